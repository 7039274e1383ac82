"""Layer functions: each appends ops (and parameters) to the default programs."""
from placegroup.layers.io import data
from placegroup.layers.nn import fc, mean, square_error_cost

__all__ = ["data", "fc", "mean", "square_error_cost"]
