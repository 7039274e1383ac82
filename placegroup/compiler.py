"""``fluid.compiler`` at its module path; placegroup/model/compiler.py has the code."""
from placegroup.model.compiler import *  # noqa: F401,F403
from placegroup.model.compiler import __all__  # noqa: F401
from placegroup.model.compiler import one_feed, prepare_run  # noqa: F401
