"""``fluid.lod_tensor`` at its module path; placegroup/datafeed/lod_tensor.py has the code."""
from placegroup.datafeed.lod_tensor import *  # noqa: F401,F403
from placegroup.datafeed.lod_tensor import __all__  # noqa: F401
