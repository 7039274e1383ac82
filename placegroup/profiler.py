"""``fluid.profiler`` at its module path; placegroup/runtime/profiler.py has the code."""
from placegroup.runtime.profiler import *  # noqa: F401,F403
from placegroup.runtime.profiler import __all__  # noqa: F401
from placegroup.runtime.profiler import SORTED_KEYS, STATES, TRACER_OPTIONS  # noqa: F401
