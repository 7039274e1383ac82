"""``fluid.input`` at its module path; placegroup/composite/input.py has the code."""
from placegroup.composite.input import *  # noqa: F401,F403
from placegroup.composite.input import __all__  # noqa: F401
from placegroup.composite.input import LayerHelper  # noqa: F401
