"""``fluid.distribute_lookup_table`` at its module path; placegroup/model/distribute_lookup_table.py has the code."""
from placegroup.model.distribute_lookup_table import *  # noqa: F401,F403
from placegroup.model.distribute_lookup_table import __all__  # noqa: F401
