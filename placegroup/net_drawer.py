"""``fluid.net_drawer`` at its module path; placegroup/util/net_drawer.py has the code."""
from placegroup.util.net_drawer import *  # noqa: F401,F403
from placegroup.util.net_drawer import __all__  # noqa: F401
from placegroup.util.net_drawer import GRAPH_STYLE, Graph, OP_STYLE, VAR_STYLE, get_logger, logger  # noqa: F401
