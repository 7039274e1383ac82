"""``fluid.transpiler.ps_dispatcher``: Fluid 1.8's module of the pserver dispatchers.

placegroup defines ``RoundRobin`` and ``HashName`` in config.py; ``compat.install_surface`` puts
them here as the same objects.
"""
