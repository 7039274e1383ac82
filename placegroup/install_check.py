"""``fluid.install_check`` at its module path; placegroup/runtime/install_check.py has the code."""
from placegroup.runtime.install_check import *  # noqa: F401,F403
from placegroup.runtime.install_check import __all__  # noqa: F401
