"""The transpiler: from a single-process model to the one shared, placed program."""
from placegroup.transpiler.config import DistributeTranspilerConfig, HashName, RoundRobin
from placegroup.transpiler.distribute_transpiler import DistributeTranspiler

__all__ = ["DistributeTranspiler", "DistributeTranspilerConfig", "HashName", "RoundRobin"]
