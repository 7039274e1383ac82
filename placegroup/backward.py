"""``fluid.backward`` at its module path; placegroup/model/backward.py has the code."""
from placegroup.model.backward import *  # noqa: F401,F403
from placegroup.model.backward import __all__  # noqa: F401
from placegroup.model.backward import gradients_of  # noqa: F401
