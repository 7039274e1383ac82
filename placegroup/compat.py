"""``placegroup.compat``, running Fluid 1.x scripts unchanged (``alias_paddle``, ``run_script``):
placegroup/tools/compat.py has the code."""
from placegroup.tools.compat import *  # noqa: F401,F403
from placegroup.tools.compat import __all__  # noqa: F401
from placegroup.tools.compat import ALIASES, MODULES  # noqa: F401
