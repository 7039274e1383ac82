"""``paddle`` for a dataset's pipe command started under ``placegroup run``: placegroup's.

A Fluid data generator (``python gen.py``) imports ``paddle.fluid.incubate.data_generator``.
When a script run by ``placegroup run`` reads a dataset, the pipe command's Python finds this
directory first on its path (placegroup/datafeed/dataset_factory.py); importing ``paddle`` here
installs placegroup's alias (placegroup/tools/compat.py) and hands back its ``paddle`` module.
"""
import sys

from placegroup.tools.compat import alias_paddle

del sys.modules[__name__]  # this file; the alias makes the module that stays
alias_paddle()
sys.modules[__name__] = __import__(__name__)
