"""``fluid.metrics`` at its module path; placegroup/model/metrics.py has the code."""
from placegroup.model.metrics import *  # noqa: F401,F403
from placegroup.model.metrics import __all__  # noqa: F401
