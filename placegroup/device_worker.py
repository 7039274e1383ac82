"""``fluid.device_worker`` at its module path; placegroup/runtime/device_worker.py has the code."""
from placegroup.runtime.device_worker import *  # noqa: F401,F403
from placegroup.runtime.device_worker import __all__  # noqa: F401
