"""``fluid.transpiler.ps_dispatcher``: Fluid 1.8's module of the pserver dispatchers.

placegroup defines ``PSDispatcher``, ``RoundRobin`` and ``HashName`` in config.py.
"""
from placegroup.transpiler.config import HashName, PSDispatcher, RoundRobin  # noqa: F401
