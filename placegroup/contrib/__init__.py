"""Fluid 1.8's ``fluid.contrib``: of it, placegroup has ``layers.shuffle_batch`` (also bound
here, as Fluid binds it); every other name Fluid 1.8.5 lists raises NotImplementedInPlacegroup,
for ``fluid.contrib.X`` and ``import paddle.fluid.contrib.X`` alike (docs/fluid_compat.md).

Example::

    import placegroup as fluid
    neg = fluid.contrib.layers.shuffle_batch(true_emb)   # the batch's rows in a new order
"""
from placegroup.contrib import layers  # noqa: F401  (fluid.contrib.layers)
from placegroup.contrib.layers import shuffle_batch

__all__ = ["shuffle_batch"]
