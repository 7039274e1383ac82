"""``fluid.wrapped_decorator`` at its module path; placegroup/util/wrapped_decorator.py has the code."""
from placegroup.util.wrapped_decorator import *  # noqa: F401,F403
from placegroup.util.wrapped_decorator import __all__  # noqa: F401
