"""``fluid.core`` at its module path; placegroup/runtime/core.py has the code."""
from placegroup.runtime.core import *  # noqa: F401,F403
from placegroup.runtime.core import __all__  # noqa: F401
