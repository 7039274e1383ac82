"""``fluid.op`` at its module path; placegroup/runtime/op.py has the code."""
from placegroup.runtime.op import *  # noqa: F401,F403
from placegroup.runtime.op import __all__  # noqa: F401
