"""``fluid.layers.control_flow``: Fluid's control-flow layers, as far as placegroup has them.

Scripts import the module by this path. The comparisons Fluid keeps here are the ones of
placegroup/layers/ops.py; every other Fluid 1.8 name of the module (``While``, ``IfElse``,
``Switch``, ``StaticRNN``, ...) raises ``NotImplementedInPlacegroup``.
"""
from placegroup.layers.ops import equal, greater_equal, greater_than, less_equal, less_than, not_equal

__all__ = ["equal", "greater_equal", "greater_than", "less_equal", "less_than", "not_equal"]
