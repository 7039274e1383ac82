"""``fluid.log_helper`` at its module path; placegroup/util/log_helper.py has the code."""
from placegroup.util.log_helper import *  # noqa: F401,F403
from placegroup.util.log_helper import __all__  # noqa: F401
