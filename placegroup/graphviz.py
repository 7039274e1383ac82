"""``fluid.graphviz`` at its module path; placegroup/util/graphviz.py has the code."""
from placegroup.util.graphviz import *  # noqa: F401,F403
from placegroup.util.graphviz import __all__  # noqa: F401
from placegroup.util.graphviz import log, shutil  # noqa: F401
