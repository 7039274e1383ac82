"""``fluid.parallel_executor`` at its module path; placegroup/runtime/parallel_executor.py has the code."""
from placegroup.runtime.parallel_executor import *  # noqa: F401,F403
from placegroup.runtime.parallel_executor import __all__  # noqa: F401
from placegroup.runtime.parallel_executor import BuildStrategy, ExecutionStrategy  # noqa: F401
