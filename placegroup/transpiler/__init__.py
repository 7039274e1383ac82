"""The transpiler: from a single-process model to the one shared, placed program."""
from placegroup.transpiler import ps_dispatcher  # noqa: F401  (Fluid's module path, compat.install_surface)
from placegroup.transpiler.config import DistributeTranspilerConfig, HashName, RoundRobin
from placegroup.transpiler.distribute_transpiler import DistributeTranspiler

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig", "HashName", "RoundRobin"]
