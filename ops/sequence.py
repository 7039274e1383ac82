"""Sequence ops of Fluid 1.8 over LoD tensors (sequence_ops/): sequence_pool and
sequence_softmax, with their gradients.

Their kernels take X as a ``LoDTensor`` (``wants_lod``, NOTE(lod-rule) in ops/registry.py)
and pool or normalise along the sequences of its last LoD level: sequence ``i`` is
``X.data[o[i]:o[i + 1]]`` for that level's offsets ``o``.

NOTE(segments): no Python loop runs per sequence. On numpy a segment reduction is one
``ufunc.reduceat`` over the starts of the *non-empty* sequences (an empty one has no rows, so
consecutive non-empty starts bound exactly one sequence each, the last running to the end);
empty sequences then get ``pad_value``. On cupy, which has no ``reduceat``, the same sums are a
scatter of each row into its sequence (``cupyx.scatter_add``/``scatter_max``/``scatter_min``).
A gradient spreads back by gathering with the sequence of each row (``np.repeat`` of the
sequence numbers by the lengths), computed on the host from the offsets.

NOTE(seq-pool-1.8): as Fluid 1.8's SequencePoolFunctor: AVERAGE is sum / length and SQRT sum /
sqrt(length), both in the data's dtype; MAX keeps the first row reaching the maximum (strict
``>``) and records it in MaxIndex (int32, the absolute row; -1 for an empty sequence), whose
row alone gets the gradient; LAST and FIRST copy one row; an empty sequence gives
``pad_value`` and passes no gradient. With a 2-level LoD the pooling is over the last level and
Out keeps the first (Out's lod_level is X's minus one). MaxIndex is filled for MAX only (an
empty array otherwise; Fluid leaves it unset).

NOTE(seq-softmax): Fluid 1.8's kernel computes ``exp(x) / sum(exp(x))`` per sequence with no
shift; here each sequence's maximum is subtracted first, which is the same up to rounding and
stays finite where Fluid's overflows (x > 88 in float32). X is [N] or [N, 1].
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.values import LoDTensor

POOL_TYPES = ("AVERAGE", "SUM", "SQRT", "MAX", "LAST", "FIRST")


def last_level(op: str, x) -> np.ndarray:
    """The offsets of the last LoD level of ``x``; ValueError naming ``op`` when it has none."""
    if not isinstance(x, LoDTensor) or not x.offsets:
        what = "a dense array" if not isinstance(x, LoDTensor) else "a LoDTensor with an empty LoD"
        raise ValueError(f"{op}: input X is {what}, not a sequence: feed it a LoDTensor "
                         f"(fluid.create_lod_tensor, or DataFeeder for a var declared with lod_level >= 1)")
    return x.offsets[-1]


class Segments:
    """The sequences of one LoD level as host index arrays (NOTE(segments)).

    Attributes:
        n: how many sequences; ``lens``: their lengths; ``nz``: the non-empty ones;
        ``starts``/``ends``: the rows where the non-empty ones start and end.
    """

    def __init__(self, offsets: np.ndarray) -> None:
        self.n = int(offsets.shape[0]) - 1
        self.lens = offsets[1:] - offsets[:-1]
        self.nz = np.flatnonzero(self.lens)
        self.starts = offsets[:-1][self.nz]
        self.ends = offsets[1:][self.nz]

    def row_of(self) -> np.ndarray:
        """The sequence of each row (its number among all sequences)."""
        return np.repeat(np.arange(self.n), self.lens)

    def owner(self) -> np.ndarray:
        """The non-empty sequence of each row (its number among the non-empty ones)."""
        return np.repeat(np.arange(self.nz.shape[0]), self.lens[self.nz])

    def reduce(self, xp, kind: str, flat):
        """Per non-empty sequence, ``kind`` ("add", "maximum" or "minimum") over its rows of
        ``flat`` ([rows, w]): an array [len(nz), w]."""
        k = self.nz.shape[0]
        if k == 0:
            return xp.zeros((0,) + tuple(flat.shape[1:]), dtype=flat.dtype)
        if xp is np:
            return getattr(np, kind).reduceat(flat, self.starts, axis=0)
        import cupyx

        init = {"add": 0, "maximum": -np.inf, "minimum": np.inf}[kind]
        if flat.dtype.kind in "iu" and kind != "add":
            info = np.iinfo(flat.dtype)
            init = info.min if kind == "maximum" else info.max
        out = xp.full((k,) + tuple(flat.shape[1:]), init, dtype=flat.dtype)
        rows = xp.asarray(self.owner())
        {"add": cupyx.scatter_add, "maximum": cupyx.scatter_max, "minimum": cupyx.scatter_min}[kind](out, rows, flat)
        return out


# -- sequence_pool ---------------------------------------------------------------------------


def _pool_infer(ins, a):
    x = ins["X"]
    check(a["pooltype"] in POOL_TYPES,
          f"sequence_pool: pooltype {a['pooltype']!r} is not one of {list(POOL_TYPES)}")
    check(len(x.shape) >= 1, f"sequence_pool: X must have a row dim, got X{list(x.shape)}")
    check(x.dtype in ("float32", "float64"), f"sequence_pool: X must be float32 or float64, got {x.dtype}")
    shape = (-1,) + tuple(x.shape[1:])
    return {"Out": Meta(shape, x.dtype), "MaxIndex": Meta(shape, "int32")}


def _pool_lod(levels, attrs):
    """Out is X with its last level pooled away (NOTE(seq-pool-1.8)); MaxIndex has no LoD."""
    return {"Out": max(levels["X"][0] - 1, 0), "MaxIndex": 0}


def _pool_grad_maker(op) -> list:
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    ins = {"X": [x], "Out@GRAD": [grad_name(op.outputs["Out"][0])]}
    if op.attrs["pooltype"] == "MAX" and op.outputs.get("MaxIndex"):
        ins["MaxIndex"] = list(op.outputs["MaxIndex"])
    return [OpSpec("sequence_pool_grad", ins, {"X@GRAD": [op.grad_of(x)]}, dict(op.attrs))]


@register("sequence_pool", ins=("X",), outs=("Out", Slot("MaxIndex", dispensable=True, no_grad=True)),
          attrs={"is_test": False, "pooltype": "AVERAGE", "pad_value": 0.0}, infer=_pool_infer,
          grad=_pool_grad_maker, lod=_pool_lod, wants_lod=("X",))
def sequence_pool(xp, ins, a, ctx):
    """Out[i] = pool(sequence i of X's last LoD level) (NOTE(seq-pool-1.8))."""
    x = ins["X"]
    seg = Segments(last_level("sequence_pool", x))
    data = x.data
    rest = tuple(data.shape[1:])
    w = int(np.prod(rest, dtype=np.int64))
    flat = data.reshape(data.shape[0], w)
    kind = a["pooltype"]
    out = xp.full((seg.n, w), a["pad_value"], dtype=data.dtype)
    nz = xp.asarray(seg.nz)
    index = None
    if kind in ("SUM", "AVERAGE", "SQRT"):
        s = seg.reduce(xp, "add", flat)
        if kind != "SUM":
            n = xp.asarray(seg.lens[seg.nz].astype(data.dtype))[:, None]
            s = s / (n if kind == "AVERAGE" else xp.sqrt(n))
        out[nz] = s
    elif kind == "MAX":
        m = seg.reduce(xp, "maximum", flat)
        out[nz] = m
        # the first row reaching the maximum: the smallest row number where it is hit
        row = xp.arange(flat.shape[0], dtype=xp.int64)[:, None]
        owner = xp.asarray(seg.owner())
        first = seg.reduce(xp, "minimum", xp.where(flat == m[owner], row, flat.shape[0]))
        index = xp.full((seg.n, w), -1, dtype=xp.int32)
        index[nz] = first.astype(xp.int32)
    elif kind == "LAST":
        out[nz] = flat[xp.asarray(seg.ends - 1)]
    else:  # FIRST
        out[nz] = flat[xp.asarray(seg.starts)]
    out = out.reshape((seg.n,) + rest)
    index = (index.reshape((seg.n,) + rest) if index is not None
             else xp.zeros((0,) + rest, dtype=xp.int32))
    if x.lod_level > 1:  # pooled away the last level; the upper ones still group the rows
        out = LoDTensor(out, x.offsets[:-1], check=False)
    return {"Out": out, "MaxIndex": index}


@register("sequence_pool_grad", ins=("X", Slot("MaxIndex", dispensable=True), "Out@GRAD"), outs=("X@GRAD",),
          attrs={"is_test": False, "pooltype": "AVERAGE", "pad_value": 0.0}, role="backward", wants_lod=("X",))
def sequence_pool_grad(xp, ins, a, ctx):
    x = ins["X"]
    seg = Segments(last_level("sequence_pool_grad", x))
    data = x.data
    rows, rest = data.shape[0], tuple(data.shape[1:])
    w = int(np.prod(rest, dtype=np.int64))
    g = ins["Out@GRAD"].reshape(seg.n, w)
    kind = a["pooltype"]
    if kind in ("SUM", "AVERAGE", "SQRT"):
        if kind != "SUM":
            n = xp.asarray(np.maximum(seg.lens, 1).astype(g.dtype))[:, None]
            g = g / (n if kind == "AVERAGE" else xp.sqrt(n))
        dx = g[xp.asarray(seg.row_of())]
    else:
        dx = xp.zeros((rows, w), dtype=g.dtype)
        if kind == "MAX":
            if ins.get("MaxIndex") is None:
                raise ValueError("sequence_pool_grad: pooltype MAX needs the forward op's MaxIndex")
            idx = ins["MaxIndex"].reshape(seg.n, w)
            hit = idx >= 0
            cols = xp.broadcast_to(xp.arange(w), (seg.n, w))
            dx[idx[hit], cols[hit]] = g[hit]
        else:
            at = seg.ends - 1 if kind == "LAST" else seg.starts
            dx[xp.asarray(at)] = g[xp.asarray(seg.nz)]
    return {"X@GRAD": dx.reshape((rows,) + rest)}


# -- sequence_softmax ------------------------------------------------------------------------


def _softmax_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) == 1 or (len(x.shape) == 2 and x.shape[1] in (1, -1)),
          f"sequence_softmax: X must be [N] or [N, 1] (one value per step), got X{list(x.shape)}")
    check(x.dtype in ("float32", "float64"), f"sequence_softmax: X must be float32 or float64, got {x.dtype}")
    return {"Out": Meta(x.shape, x.dtype)}


@register("sequence_softmax", ins=("X",), outs=("Out",), attrs={"use_cudnn": False, "data_format": "AnyLayout"},
          infer=_softmax_infer, grad=grad_of(("X",), uses=("X",), outs=("Out",)), wants_lod=("X",))
def sequence_softmax(xp, ins, a, ctx):
    """Softmax over the steps of each sequence of X's last LoD level (NOTE(seq-softmax))."""
    x = ins["X"]
    seg = Segments(last_level("sequence_softmax", x))
    data = x.data
    if data.size != data.shape[0]:
        raise ValueError(f"sequence_softmax: X must hold one value per step, got X{list(data.shape)}")
    flat = data.reshape(-1, 1)
    owner = xp.asarray(seg.owner())
    e = xp.exp(flat - seg.reduce(xp, "maximum", flat)[owner])  # NOTE(seq-softmax)
    return {"Out": (e / seg.reduce(xp, "add", e)[owner]).reshape(data.shape)}


@register("sequence_softmax_grad", ins=("X", "Out", "Out@GRAD"), outs=("X@GRAD",),
          attrs={"use_cudnn": False, "data_format": "AnyLayout"}, role="backward", wants_lod=("X",))
def sequence_softmax_grad(xp, ins, a, ctx):
    """X@GRAD = (g - sum over the sequence of g * Out) * Out, per sequence."""
    x = ins["X"]
    seg = Segments(last_level("sequence_softmax_grad", x))
    out = ins["Out"].reshape(-1, 1)
    g = ins["Out@GRAD"].reshape(-1, 1)
    owner = xp.asarray(seg.owner())
    dx = (g - seg.reduce(xp, "add", g * out)[owner]) * out
    return {"X@GRAD": dx.reshape(x.data.shape)}


__all__ = ["POOL_TYPES", "Segments", "last_level"]
