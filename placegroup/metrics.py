"""``fluid.metrics``: Fluid's Python-side metric accumulators. None is implemented yet.

Each of Fluid 1.8's names here (``Accuracy``, ``Auc``, ``Precision``, ``Recall``,
``CompositeMetric``, ...) raises ``NotImplementedInPlacegroup``; the in-graph
``fluid.layers.accuracy`` exists (docs/fluid_compat.md).
"""
__all__: list[str] = []
