"""Fluid 1.8's ``fluid.contrib.layers``: the layers of ``nn``, ``rnn_impl`` and ``metric_op``
that placegroup has, bound here as Fluid binds them."""
from placegroup.contrib.layers import metric_op, nn, rnn_impl  # noqa: F401  (fluid.contrib.layers.nn, ...)
from placegroup.contrib.layers.metric_op import ctr_metric_bundle
from placegroup.contrib.layers.nn import (fused_elemwise_activation, fused_embedding_seq_pool, partial_concat,
                                          partial_sum, shuffle_batch, sparse_embedding)
from placegroup.contrib.layers.rnn_impl import BasicGRUUnit, BasicLSTMUnit, basic_gru, basic_lstm

__all__ = ["shuffle_batch", "partial_concat", "partial_sum", "fused_embedding_seq_pool", "fused_elemwise_activation",
           "sparse_embedding", "BasicGRUUnit", "basic_gru", "BasicLSTMUnit", "basic_lstm", "ctr_metric_bundle"]
