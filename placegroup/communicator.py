"""``fluid.communicator`` at its module path; placegroup/runtime/communicator.py has the code."""
from placegroup.runtime.communicator import *  # noqa: F401,F403
from placegroup.runtime.communicator import __all__  # noqa: F401
from placegroup.runtime.communicator import DistributedMode, Program  # noqa: F401
