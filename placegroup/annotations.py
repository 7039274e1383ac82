"""``fluid.annotations`` at its module path; placegroup/util/annotations.py has the code."""
from placegroup.util.annotations import *  # noqa: F401,F403
from placegroup.util.annotations import __all__  # noqa: F401
