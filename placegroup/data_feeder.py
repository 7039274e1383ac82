"""``fluid.data_feeder`` at its module path; placegroup/datafeed/data_feeder.py has the code."""
from placegroup.datafeed.data_feeder import *  # noqa: F401,F403
from placegroup.datafeed.data_feeder import __all__  # noqa: F401
from placegroup.datafeed.data_feeder import (BatchedTensorProvider, DataToLoDTensorConverter,  # noqa: F401
                                             check_dtype, check_type, check_variable_and_dtype,
                                             convert_dtype)
