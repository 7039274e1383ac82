"""Fluid 1.8's ``fluid.contrib``: of it, placegroup has ``layers`` (``shuffle_batch``,
``partial_sum``, ``partial_concat``, ``fused_embedding_seq_pool``,
``fused_elemwise_activation``, ``ctr_metric_bundle``, and ``basic_gru``, ``basic_lstm``,
``BasicGRUUnit``, ``BasicLSTMUnit`` of ``layers.rnn_impl``), ``extend_optimizer``
(``extend_with_decoupled_weight_decay``), ``memory_usage_calc`` (``memory_usage``),
``model_stat`` (``summary``) and ``op_frequence`` (``op_freq_statistic``), each bound here too,
as Fluid's ``contrib/__init__.py`` binds them. Every other name Fluid 1.8.5 lists raises
NotImplementedInPlacegroup, for ``fluid.contrib.X`` and ``import paddle.fluid.contrib.X`` alike
(docs/fluid_compat.md).

Example::

    import placegroup as fluid
    neg = fluid.contrib.layers.shuffle_batch(true_emb)   # the batch's rows in a new order
    AdamW = fluid.contrib.extend_with_decoupled_weight_decay(fluid.optimizer.Adam)
"""
from placegroup.contrib import extend_optimizer, layers, memory_usage_calc, model_stat, op_frequence  # noqa: F401
from placegroup.contrib.extend_optimizer import extend_with_decoupled_weight_decay
from placegroup.contrib.layers import (BasicGRUUnit, BasicLSTMUnit, basic_gru, basic_lstm, ctr_metric_bundle,
                                       fused_elemwise_activation, fused_embedding_seq_pool, partial_concat, partial_sum,
                                       shuffle_batch)
from placegroup.contrib.memory_usage_calc import memory_usage
from placegroup.contrib.model_stat import summary  # noqa: F401  (Fluid's star import of model_stat binds it)
from placegroup.contrib.op_frequence import op_freq_statistic

# as Fluid's: the names of memory_usage_calc, op_frequence, extend_optimizer and layers (not model_stat's)
__all__ = ["memory_usage", "op_freq_statistic", "extend_with_decoupled_weight_decay", "shuffle_batch", "partial_concat",
           "partial_sum", "fused_embedding_seq_pool", "fused_elemwise_activation", "BasicGRUUnit", "basic_gru",
           "BasicLSTMUnit", "basic_lstm", "ctr_metric_bundle"]
