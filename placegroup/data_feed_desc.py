"""``fluid.data_feed_desc`` at its module path; placegroup/datafeed/data_feed_desc.py has the code."""
from placegroup.datafeed.data_feed_desc import *  # noqa: F401,F403
from placegroup.datafeed.data_feed_desc import __all__  # noqa: F401
from placegroup.datafeed.data_feed_desc import DataFeedDescMsg, MultiSlotDescMsg, SlotMsg  # noqa: F401
