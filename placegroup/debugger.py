"""``fluid.debugger`` at its module path; placegroup/runtime/debugger.py has the code."""
from placegroup.runtime.debugger import *  # noqa: F401,F403
from placegroup.runtime.debugger import __all__  # noqa: F401
from placegroup.runtime.debugger import LOD_TENSOR_ARRAY, op_repr_handlers, reprtpl, type_handlers  # noqa: F401
