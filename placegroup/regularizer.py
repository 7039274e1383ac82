"""``fluid.regularizer`` at its module path; placegroup/model/regularizer.py has the code."""
from placegroup.model.regularizer import *  # noqa: F401,F403
from placegroup.model.regularizer import __all__  # noqa: F401
