"""Fluid 1.8's ``fluid.contrib.layers``: ``shuffle_batch`` (from ``nn``, as in Fluid)."""
from placegroup.contrib.layers import nn  # noqa: F401  (fluid.contrib.layers.nn)
from placegroup.contrib.layers.nn import shuffle_batch

__all__ = ["shuffle_batch"]
