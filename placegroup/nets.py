"""``fluid.nets`` at its module path; placegroup/composite/nets.py has the code."""
from placegroup.composite.nets import *  # noqa: F401,F403
from placegroup.composite.nets import __all__  # noqa: F401
