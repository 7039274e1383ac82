"""``fluid.multiprocess_utils`` at its module path; placegroup/util/multiprocess_utils.py has the code."""
from placegroup.util.multiprocess_utils import *  # noqa: F401,F403
from placegroup.util.multiprocess_utils import __all__  # noqa: F401
