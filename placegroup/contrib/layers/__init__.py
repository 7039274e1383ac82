"""Fluid 1.8's ``fluid.contrib.layers``: the layers of ``nn`` and ``metric_op`` that placegroup
has, bound here as Fluid binds them."""
from placegroup.contrib.layers import metric_op, nn  # noqa: F401  (fluid.contrib.layers.nn, .metric_op)
from placegroup.contrib.layers.metric_op import ctr_metric_bundle
from placegroup.contrib.layers.nn import (fused_elemwise_activation, fused_embedding_seq_pool, partial_concat,
                                          partial_sum, shuffle_batch)

__all__ = ["shuffle_batch", "partial_concat", "partial_sum", "fused_embedding_seq_pool", "fused_elemwise_activation",
           "ctr_metric_bundle"]
