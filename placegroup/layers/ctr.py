"""Layers of Fluid 1.x CTR and recommendation jobs, Fluid 1.8 signatures: data_norm,
continuous_value_model, hash, shard_index (their ops are in ops/ctr.py).

Each function appends one op to the default main program and returns its output var, whose
shape the op's ``infer`` gives (-1 for the batch dim). Building a program is
single-threaded, as in Fluid.

Example (the head of a CTR tower)::

    import placegroup as fluid
    L = fluid.layers
    dense = L.data("dense", shape=[13])
    normed = L.data_norm(dense, name="dense_dn")           # [-1, 13]
    slot = L.data("slot", shape=[1], dtype="int64")
    bucket = L.hash(slot, hash_size=10000)                  # [-1, 1, 1] int64
    emb = L.embedding(L.reshape(bucket, [-1, 1]), size=[10000, 8])
"""
from __future__ import annotations

from placegroup.model.initializer import ConstantInitializer
from placegroup.model.layer_helper import LayerHelper
from placegroup.model.param_attr import ParamAttr

__all__ = ["data_norm", "continuous_value_model", "hash", "shard_index"]


def data_norm(input, act=None, epsilon: float = 1e-05, param_attr=None, data_layout: str = "NCHW",
              in_place: bool = False, name=None, moving_mean_name=None, moving_variance_name=None,
              do_model_average_for_mean_and_var: bool = True, slot_dim: int = -1, sync_stats: bool = False,
              summary_decay_rate: float = 0.9999999):
    """Normalize each column of ``input`` ([batch, C]) by running summaries kept as trainable
    parameters ``<name>.batch_size``, ``<name>.batch_sum`` and ``<name>.batch_square_sum``
    (``name`` defaults to ``"dn"``, so unnamed data_norm layers share them, as in Fluid):
    ``y = (x - batch_sum / batch_size) * sqrt(batch_size / batch_square_sum)``.

    Training does not differentiate the summaries: their "gradients" are this batch's count,
    sum and squared deviations, which the program's optimizer then applies
    (NOTE(data-norm-stats) in ops/ctr.py).

    Args:
        input: a float Variable [batch, C].
        act: an activation appended after (e.g. ``"relu"``), or None.
        epsilon: added per example to the squared-deviation statistic, in [0, 0.001].
        param_attr: a dict with the summaries' initial values ``batch_size`` (1e4),
            ``batch_sum`` (0) and ``batch_square`` (1e4), or None.
        data_layout: ``"NCHW"`` or ``"NHWC"`` (the same for 2-D input).
        in_place: accepted for compatibility; the output is always a new var.
        name: the summaries' name prefix (default ``"dn"``).
        moving_mean_name, moving_variance_name, do_model_average_for_mean_and_var,
            sync_stats: accepted for compatibility; unused by Fluid 1.8's CPU kernels too.
        slot_dim: > 0: the columns are slots of that many, each led by a show count; rows whose
            show is 0 give 0 there and leave the statistics alone.
        summary_decay_rate: the parameter-server summary rule's decay (kept as an attr).

    Returns:
        A Variable of ``input``'s shape and dtype.

    Raises:
        ValueError: for another data_layout.
        ProgramError: unless ``input`` is 2-D with a known C, or for an epsilon outside range.

    Example::

        y = fluid.layers.data_norm(fluid.layers.data("x", shape=[8]), name="x_dn")
    """
    if data_layout not in ("NCHW", "NHWC"):
        raise ValueError(f"data_norm: unsupported data layout {data_layout!r}; use 'NCHW' or 'NHWC'")
    helper = LayerHelper("data_norm", name=name)
    channels = input.shape[1] if data_layout == "NCHW" else input.shape[-1]
    defaults = {"batch_size": 1e4, "batch_sum": 0.0, "batch_square": 1e4}
    if isinstance(param_attr, dict):
        defaults = {k: float(param_attr.get(k, v)) for k, v in defaults.items()}
    prefix = name or "dn"
    stats = {}
    for slot, key, suffix in (("BatchSize", "batch_size", "batch_size"), ("BatchSum", "batch_sum", "batch_sum"),
                              ("BatchSquareSum", "batch_square", "batch_square_sum")):
        attr = ParamAttr(name=f"{prefix}.{suffix}", initializer=ConstantInitializer(defaults[key]), trainable=True)
        stats[slot] = [helper.create_parameter(attr, [channels], input.dtype)]
    out = helper.create_variable_for_type_inference(input.dtype)
    means = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    scales = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    attrs = {"epsilon": float(epsilon), "data_layout": data_layout, "sync_stats": bool(sync_stats),
             "summary_decay_rate": float(summary_decay_rate)}
    if slot_dim > 0:
        attrs["slot_dim"] = int(slot_dim)
    helper.append_op("data_norm", {"X": [input], **stats}, {"Y": [out], "Means": [means], "Scales": [scales]}, attrs)
    return helper.append_activation(out, act)


def continuous_value_model(input, cvm, use_cvm: bool = True):
    """Show/click features of a CTR embedding. ``input`` is [batch, 2 + D] (show, click, then
    the embedding), ``cvm`` [batch, 2]. ``use_cvm``: returns [batch, 2 + D] with
    ``log(show + 1)`` and ``log(click + 1) - log(show + 1)`` in front; else the embedding alone,
    [batch, D]. The gradient of the show/click columns is ``cvm`` itself (NOTE(cvm-grad) in
    ops/ctr.py).

    Example::

        y = fluid.layers.continuous_value_model(emb, show_click, use_cvm=True)
    """
    helper = LayerHelper("cvm")
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("cvm", {"X": [input], "CVM": [cvm]}, {"Y": [out]}, {"use_cvm": bool(use_cvm)})
    return out


def hash(input, hash_size: int, num_hash: int = 1, name=None):  # noqa: A001  (Fluid's name)
    """``num_hash`` ids in [0, hash_size) for each row of ``input`` (2-D int32 or int64):
    XXH64 of the row's bytes seeded 0..num_hash-1, modulo ``hash_size`` (NOTE(xxh64) in
    ops/ctr.py). Returns a [batch, num_hash, 1] var of ``input``'s dtype; no gradient.

    Example::

        ids = fluid.layers.hash(words, hash_size=1000, num_hash=4)   # words: [-1, 1] int64
    """
    helper = LayerHelper("hash", name=name)
    out = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op("hash", {"X": [input]}, {"Out": [out]}, {"num_hash": int(num_hash), "mod_by": int(hash_size)})
    return out


def shard_index(input, index_num: int, nshards: int, shard_id: int, ignore_value: int = -1):
    """Ids of one shard: with ``size = ceil(index_num / nshards)``, an id in shard
    ``shard_id`` (``id // size == shard_id``) becomes ``id - shard_id * size``, any other
    ``ignore_value``. ``input`` holds int ids in [0, index_num) with a last dim of 1.

    Raises:
        ValueError: unless 0 <= shard_id < nshards.

    Example::

        local = fluid.layers.shard_index(label, index_num=20, nshards=2, shard_id=0)
    """
    if not 0 <= shard_id < nshards:
        raise ValueError(f"shard_index: shard_id ({shard_id}) must be in [0, nshards={nshards})")
    helper = LayerHelper("shard_index")
    out = helper.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    helper.append_op("shard_index", {"X": [input]}, {"Out": [out]},
                     {"index_num": int(index_num), "nshards": int(nshards), "shard_id": int(shard_id),
                      "ignore_value": int(ignore_value)})
    return out
