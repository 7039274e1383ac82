"""``fluid.default_scope_funcs`` at its module path; placegroup/runtime/default_scope_funcs.py has the code."""
from placegroup.runtime.default_scope_funcs import *  # noqa: F401,F403
from placegroup.runtime.default_scope_funcs import __all__  # noqa: F401
