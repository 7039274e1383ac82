"""``fluid.average`` at its module path; placegroup/model/average.py has the code."""
from placegroup.model.average import *  # noqa: F401,F403
from placegroup.model.average import __all__  # noqa: F401
