"""Sequence ops of Fluid 1.8 over LoD tensors (sequence_ops/): sequence_pool,
sequence_softmax, sequence_conv, sequence_expand, sequence_expand_as, sequence_reshape,
sequence_concat and sequence_slice, with their gradients.

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

NOTE(seq-conv): as Fluid 1.8's ContextProjectFunctor, row k of a sequence of h rows sees, at
tap j, its row p = k + contextStart + j; a p outside [0, h) reads zeros, or with
paddingTrainable a row of PaddingData ([up_pad + down_pad, width]): row p + up_pad above the
sequence (p < 0), row up_pad + p - h below it. (Fluid's loop over slices computes the same map.)
The taps are gathered side by side (one loop over contextLength) and Out = col @ Filter. In the
gradient a tap reads each row at most once, so X@GRAD adds with plain fancy indexing, while
PaddingData rows are shared by all sequences and add up with ``scatter_add``.

NOTE(seq-expand): sequence_expand repeats sequence i of X (row i when X has no LoD) as often as
sequence i of Y's level ``ref_level`` has elements: one gather with ``ranges`` over the
repeated blocks. Out has a LoD only when X has one (Fluid's ShareLoD of X, then the kernel's
new level 0); a Y level with no sequences copies X. The gradient adds the copies back.

NOTE(seq-slice): Offset and Length ([n, 1] ints) are read on the host; each must fit its
sequence (0 <= Offset, 0 <= Length, Offset + Length <= length), else a ValueError naming the
sequence and both values, as Fluid's checks.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.values import LoDTensor, host_array, scatter_add

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
        dx = xp.take(g, xp.asarray(seg.row_of()), axis=0)
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




# -- index arithmetic shared by the ops below ------------------------------------------------


def ranges(starts, lens) -> np.ndarray:
    """The rows ``starts[i] .. starts[i] + lens[i] - 1`` for each i, concatenated (host int64):
    the gather index of a batch of row ranges, with no loop per range."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(lens, dtype=np.int64)
    total = int(lens.sum())
    before = np.concatenate(([0], np.cumsum(lens)[:-1])) if lens.size else lens
    return np.arange(total, dtype=np.int64) + np.repeat(starts - before, lens)


def offsets_of(lens) -> np.ndarray:
    """Offsets ``[0, l0, l0 + l1, ...]`` of sequences with lengths ``lens`` (host int64)."""
    return np.concatenate(([0], np.cumsum(np.asarray(lens, dtype=np.int64)))).astype(np.int64)


def one_level(op: str, x, slot: str = "X") -> np.ndarray:
    """The offsets of ``x``'s only LoD level; ValueError naming ``op`` if it has another count
    (Fluid's "Only support one level sequence now")."""
    o = last_level(op, x)
    if x.lod_level != 1:
        raise ValueError(f"{op}: input {slot} must have 1 LoD level, got {x.lod_level} ({x.lod()})")
    return o


def lod_at_most(op: str, slot: str, most: int, out: dict) -> Callable:
    """A LoD rule (NOTE(lod-rule)) giving ``out`` (slot -> lod_level, or "X" for X's level) that
    first refuses an input ``slot`` declared with more than ``most`` LoD levels."""

    def rule(levels, attrs):
        got = levels.get(slot) or [0]
        for lv in got:
            check(lv <= most, f"{op}: input {slot} has lod_level {lv}, the op takes at most {most}")
        return {k: (got[0] if v == slot else v) for k, v in out.items()}

    return rule



# -- sequence_conv ---------------------------------------------------------------------------


def _pads(a) -> tuple[int, int]:
    """(up_pad, down_pad): the padding rows above and below a sequence that the context
    window [contextStart, contextStart + contextLength) reaches."""
    start, length = a["contextStart"], a["contextLength"]
    return max(0, -start), max(0, start + length - 1)


def _conv_infer(ins, a):
    x, w, pad = ins["X"], ins["Filter"], ins.get("PaddingData")
    check(a["contextStride"] == 1, f"sequence_conv: contextStride must be 1 (Fluid supports no other), "
                                   f"got {a['contextStride']}")
    check(a["contextLength"] > 0, f"sequence_conv: contextLength must be > 0, got {a['contextLength']}")
    check(len(x.shape) == 2 and len(w.shape) == 2,
          f"sequence_conv: X and Filter must be 2-D, got X{list(x.shape)} and Filter{list(w.shape)}")
    check(w.shape[0] in (-1, a["contextLength"] * x.shape[1]) or x.shape[1] == -1,
          f"sequence_conv: Filter's height must be contextLength * X's width = {a['contextLength']} * "
          f"{x.shape[1]}, got Filter{list(w.shape)}")
    if a["paddingTrainable"]:
        up, down = _pads(a)
        check(up + down > 0, "sequence_conv: paddingTrainable needs padding rows; with contextStart 0 and "
                             "contextLength 1 there are none, so it must be false")
        check(pad is not None, "sequence_conv: paddingTrainable is true but input PaddingData is missing")
        check(list(pad.shape) == [up + down, x.shape[1]],
              f"sequence_conv: PaddingData must be [up_pad + down_pad, X's width] = [{up + down}, {x.shape[1]}] "
              f"for contextStart {a['contextStart']} and contextLength {a['contextLength']}, "
              f"got PaddingData{list(pad.shape)}")
    return {"Out": Meta((x.shape[0], w.shape[1]), x.dtype)}


def _taps(o: np.ndarray, a):
    """NOTE(seq-conv): per context tap j, over all rows: (inside: the tap's row lies in the
    row's sequence, src: that row of X (0 elsewhere), pad: the PaddingData row it reads when
    outside (0 inside)). Host arrays, one loop over the taps."""
    up, _ = _pads(a)
    lens = o[1:] - o[:-1]
    seq = np.repeat(np.arange(lens.shape[0]), lens)
    start, h = o[:-1][seq], lens[seq]
    k = np.arange(int(o[-1]), dtype=np.int64) - start
    for j in range(a["contextLength"]):
        p = k + a["contextStart"] + j
        inside = (p >= 0) & (p < h)
        yield inside, np.where(inside, start + p, 0), np.where(inside, 0, np.where(p < 0, p + up, up + p - h))


def _conv_cols(xp, x, o, pad, a):
    """The context matrix [rows, contextLength * width]: the taps side by side."""
    data = x.data
    cols = []
    for inside, src, prow in _taps(o, a):
        v = data[xp.asarray(src)]
        other = pad[xp.asarray(prow)] if a["paddingTrainable"] else xp.zeros_like(v)
        cols.append(xp.where(xp.asarray(inside)[:, None], v, other))
    if not cols or data.shape[0] == 0:
        return xp.zeros((data.shape[0], a["contextLength"] * data.shape[1]), dtype=data.dtype)
    return xp.concatenate(cols, axis=1)


def _conv_grad_maker(op) -> list:
    want = [s for s in ("X", "Filter", "PaddingData") if op.inputs.get(s) and op.inputs[s][0] in op.need]
    if not op.attrs["paddingTrainable"] and "PaddingData" in want:
        want.remove("PaddingData")
    if not want:
        return []
    ins = {s: list(op.inputs[s]) for s in ("X", "Filter", "PaddingData") if op.inputs.get(s)}
    ins["Out@GRAD"] = [grad_name(op.outputs["Out"][0])]
    return [OpSpec("sequence_conv_grad", ins, {s + "@GRAD": [op.grad_of(op.inputs[s][0])] for s in want},
                   dict(op.attrs))]


CONV_ATTRS = {"paddingTrainable": False, "contextLength": 3, "contextStart": 0, "contextStride": 1}


@register("sequence_conv", ins=("X", Slot("PaddingData", dispensable=True), "Filter"), outs=("Out",),
          attrs=CONV_ATTRS, infer=_conv_infer, grad=_conv_grad_maker, wants_lod=("X",),
          lod=lod_at_most("sequence_conv", "X", 1, {"Out": "X"}))
def sequence_conv(xp, ins, a, ctx):
    """Out = context(X) @ Filter, the context of a row being the contextLength rows from
    contextStart on within its sequence, zeros (or PaddingData rows) past its ends
    (NOTE(seq-conv))."""
    x = ins["X"]
    o = one_level("sequence_conv", x)
    col = _conv_cols(xp, x, o, ins.get("PaddingData"), a)
    return {"Out": x.with_data(col @ ins["Filter"])}


@register("sequence_conv_grad", ins=("X", Slot("PaddingData", dispensable=True), "Filter", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("PaddingData@GRAD", dispensable=True),
                Slot("Filter@GRAD", dispensable=True)),
          attrs=CONV_ATTRS, role="backward", wants_lod=("X",))
def sequence_conv_grad(xp, ins, a, ctx):
    x, w, g = ins["X"], ins["Filter"], ins["Out@GRAD"]
    o = one_level("sequence_conv_grad", x)
    out = {}
    if "Filter@GRAD" in ctx.outputs:
        out["Filter@GRAD"] = _conv_cols(xp, x, o, ins.get("PaddingData"), a).T @ g
    dcol = g @ w.T
    width = x.data.shape[1]
    dx = xp.zeros_like(x.data)
    pad = ins.get("PaddingData")
    dpad = xp.zeros_like(pad) if pad is not None else None
    for j, (inside, src, prow) in enumerate(_taps(o, a)):
        d = dcol[:, j * width:(j + 1) * width]
        dx[xp.asarray(src[inside])] += d[xp.asarray(inside)]  # one tap reads each row once
        if dpad is not None and a["paddingTrainable"]:
            scatter_add(xp, dpad, xp.asarray(prow[~inside]), d[xp.asarray(~inside)])
    out["X@GRAD"] = dx
    if dpad is not None:
        out["PaddingData@GRAD"] = dpad
    return {k: v for k, v in out.items() if k in ctx.outputs}


# -- sequence_expand, sequence_expand_as -----------------------------------------------------


def _expand_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) >= 2, f"sequence_expand: X must have at least 2 dims, got X{list(x.shape)}")
    check(a["ref_level"] >= -1, f"sequence_expand: ref_level must be -1 or a level of Y, got {a['ref_level']}")
    return {"Out": Meta((-1,) + tuple(x.shape[1:]), x.dtype)}


def _expand_lod(levels, a):
    x, y = (levels.get("X") or [0])[0], (levels.get("Y") or [0])[0]
    check(x <= 1, f"sequence_expand: X has lod_level {x}, the op takes at most 1")
    check(y == 0 or a["ref_level"] < y,
          f"sequence_expand: ref_level {a['ref_level']} is not a level of Y (lod_level {y}): use -1 or 0..{y - 1}")
    return {"Out": x}


def _expand_index(op: str, x, y, ref_level: int):
    """(gather index into X's rows, Out's offsets or None): NOTE(seq-expand)."""
    if not isinstance(y, LoDTensor) or not y.offsets:
        raise ValueError(f"{op}: input Y has no LoD; it must be a sequence whose LoD says how often to repeat X")
    if not -1 <= ref_level < y.lod_level:
        raise ValueError(f"{op}: ref_level {ref_level} is not a level of Y's {y.lod_level}-level LoD")
    ref = y.offsets[ref_level]
    has_lod = isinstance(x, LoDTensor) and bool(x.offsets)
    rows = int(x.data.shape[0]) if isinstance(x, LoDTensor) else int(x.shape[0])
    if has_lod and x.lod_level > 1:
        raise ValueError(f"{op}: X must have at most 1 LoD level, got {x.lod_level}")
    xo = x.offsets[0] if has_lod else np.arange(rows + 1, dtype=np.int64)
    if ref.shape[0] <= 1:
        return np.arange(rows, dtype=np.int64), (xo if has_lod else None)
    if xo.shape[0] != ref.shape[0]:
        what = f"{xo.shape[0] - 1} sequences" if has_lod else f"{rows} rows"
        raise ValueError(f"{op}: X has {what} but level {ref_level} of Y's LoD has {ref.shape[0] - 1} "
                         f"sequences; each must be repeated by one of Y's")
    lens = xo[1:] - xo[:-1]
    block = np.repeat(np.arange(lens.shape[0]), ref[1:] - ref[:-1])
    return ranges(xo[:-1][block], lens[block]), (offsets_of(lens[block]) if has_lod else None)


def _expand_apply(data, idx, offs):
    out = data[idx]
    return LoDTensor(out, [offs], check=False) if offs is not None else out


@register("sequence_expand", ins=("X", Slot("Y", no_grad=True)), outs=("Out",), attrs={"ref_level": -1},
          infer=_expand_infer, grad=grad_of(("X",), uses=("X", "Y")), lod=_expand_lod, wants_lod=("X", "Y"))
def sequence_expand(xp, ins, a, ctx):
    """Sequence i of X (row i when X has no LoD) repeated as often as sequence i of level
    ``ref_level`` of Y has elements (NOTE(seq-expand))."""
    x = ins["X"]
    idx, offs = _expand_index("sequence_expand", x, ins["Y"], a["ref_level"])
    data = x.data if isinstance(x, LoDTensor) else x
    return {"Out": _expand_apply(data, xp.asarray(idx), offs)}


@register("sequence_expand_grad", ins=("X", "Y", "Out@GRAD"), outs=("X@GRAD",), attrs={"ref_level": -1},
          role="backward", wants_lod=("X", "Y"))
def sequence_expand_grad(xp, ins, a, ctx):
    """X@GRAD sums Out@GRAD over the copies of each row."""
    x = ins["X"]
    idx, _ = _expand_index("sequence_expand_grad", x, ins["Y"], a["ref_level"])
    data = x.data if isinstance(x, LoDTensor) else x
    dx = xp.zeros(data.shape, dtype=ins["Out@GRAD"].dtype)
    scatter_add(xp, dx, xp.asarray(idx), ins["Out@GRAD"])
    return {"X@GRAD": dx}


def _expand_as_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) >= 2, f"sequence_expand_as: X must have at least 2 dims, got X{list(x.shape)}")
    return {"Out": Meta((-1,) + tuple(x.shape[1:]), x.dtype)}


def _expand_as_segments(op: str, x, y) -> Segments:
    seg = Segments(one_level(op, y, "Y"))
    rows = int(x.shape[0])
    if rows != seg.n:
        raise ValueError(f"{op}: X has {rows} rows but Y has {seg.n} sequences; row i is repeated by sequence i")
    return seg


@register("sequence_expand_as", ins=("X", Slot("Y", no_grad=True)), outs=("Out",), infer=_expand_as_infer,
          grad=grad_of(("X",), uses=("X", "Y")), wants_lod=("Y",),
          lod=lod_at_most("sequence_expand_as", "Y", 1, {"Out": "Y"}))
def sequence_expand_as(xp, ins, a, ctx):
    """Row i of X repeated as often as sequence i of Y is long; Out has Y's LoD."""
    y = ins["Y"]
    seg = _expand_as_segments("sequence_expand_as", ins["X"], y)
    return {"Out": LoDTensor(ins["X"][xp.asarray(seg.row_of())], y.offsets, check=False)}


@register("sequence_expand_as_grad", ins=("X", "Y", "Out@GRAD"), outs=("X@GRAD",), role="backward",
          wants_lod=("Y",))
def sequence_expand_as_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    seg = _expand_as_segments("sequence_expand_as_grad", x, ins["Y"])
    rest = tuple(x.shape[1:])
    flat = g.reshape(g.shape[0], -1)
    dx = xp.zeros((seg.n, flat.shape[1]), dtype=g.dtype)
    dx[xp.asarray(seg.nz)] = seg.reduce(xp, "add", flat)
    return {"X@GRAD": dx.reshape((seg.n,) + rest)}


# -- sequence_reshape ------------------------------------------------------------------------


def _reshape_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) == 2, f"sequence_reshape: X must be 2-D, got X{list(x.shape)}")
    check(a["new_dim"] > 0, f"sequence_reshape: new_dim must be > 0, got {a['new_dim']}")
    return {"Out": Meta((-1, a["new_dim"]), x.dtype)}


def _reshape_offsets(op: str, x, new_dim: int) -> np.ndarray:
    o = one_level(op, x)
    width = int(x.data.shape[1])
    bad = np.flatnonzero((o * width) % new_dim)
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{op}: the sequences before offset {o[i]} hold {o[i] * width} values "
                         f"({o[i]} rows of {width}), not a multiple of new_dim {new_dim}")
    return o * width // new_dim


@register("sequence_reshape", ins=("X",), outs=("Out",), attrs={"new_dim": 1}, infer=_reshape_infer,
          grad=grad_of(("X",), uses=("X",)), wants_lod=("X",),
          lod=lod_at_most("sequence_reshape", "X", 1, {"Out": "X"}))
def sequence_reshape(xp, ins, a, ctx):
    """Each sequence's values re-cut into rows of new_dim; the LoD scales by width / new_dim."""
    x = ins["X"]
    offs = _reshape_offsets("sequence_reshape", x, a["new_dim"])
    return {"Out": LoDTensor(x.data.reshape(-1, a["new_dim"]), [offs], check=False)}


@register("sequence_reshape_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"new_dim": 1},
          role="backward", wants_lod=("X",))
def sequence_reshape_grad(xp, ins, a, ctx):
    return {"X@GRAD": ins["Out@GRAD"].reshape(ins["X"].data.shape)}


# -- sequence_concat -------------------------------------------------------------------------


def _concat_infer(ins, a):
    xs = ins["X"]
    check(len(xs) >= 1, "sequence_concat: X needs at least one input")
    first = xs[0]
    for i, x in enumerate(xs):
        check(len(x.shape) >= 1 and tuple(x.shape[1:]) == tuple(first.shape[1:]) and x.dtype == first.dtype,
              f"sequence_concat: X[{i}] is {x.dtype}{list(x.shape)}, X[0] {first.dtype}{list(first.shape)}: "
              f"all must agree past dim 0 and in dtype")
    return {"Out": Meta((-1,) + tuple(first.shape[1:]), first.dtype)}


def _concat_lod(levels, a):
    got = levels.get("X") or [0]
    for i, lv in enumerate(got):
        check(lv <= 1, f"sequence_concat: X[{i}] has lod_level {lv}, the op takes at most 1")
    known = {lv for lv in got if lv > 0}
    check(len(known) <= 1 and (not known or 0 not in got),
          f"sequence_concat: the inputs X have lod_levels {got}; all must be sequences of 1 level")
    return {"Out": max(got)}


def _concat_index(op: str, xs):
    """(gather index into the inputs stacked, Out's offsets, each input's first stacked row)."""
    offs = [one_level(op, x, f"X[{k}]") for k, x in enumerate(xs)]
    n = offs[0].shape[0] - 1
    for k, o in enumerate(offs):
        if o.shape[0] - 1 != n:
            raise ValueError(f"{op}: X[{k}] has {o.shape[0] - 1} sequences, X[0] has {n}; all must have as many")
    base = np.concatenate(([0], np.cumsum([int(o[-1]) for o in offs])))
    starts = np.stack([base[k] + o[:-1] for k, o in enumerate(offs)], axis=1)  # [n, k]: i-major
    lens = np.stack([o[1:] - o[:-1] for o in offs], axis=1)
    return ranges(starts.reshape(-1), lens.reshape(-1)), offsets_of(lens.sum(axis=1)), base


@register("sequence_concat", ins=(Slot("X", duplicable=True),), outs=("Out",), infer=_concat_infer,
          grad=grad_of(("X",), uses=("X",)), lod=_concat_lod, wants_lod=("X",))
def sequence_concat(xp, ins, a, ctx):
    """Out's sequence i is sequence i of X[0], then of X[1], ...: one gather from the inputs
    stacked."""
    xs = ins["X"]
    idx, offs, _ = _concat_index("sequence_concat", xs)
    stacked = xp.concatenate([x.data for x in xs], axis=0)
    return {"Out": LoDTensor(stacked[xp.asarray(idx)], [offs], check=False)}


@register("sequence_concat_grad", ins=(Slot("X", duplicable=True), "Out@GRAD"),
          outs=(Slot("X@GRAD", duplicable=True),), role="backward", wants_lod=("X",))
def sequence_concat_grad(xp, ins, a, ctx):
    xs, g = ins["X"], ins["Out@GRAD"]
    idx, _, base = _concat_index("sequence_concat_grad", xs)
    stacked = xp.zeros((int(base[-1]),) + tuple(g.shape[1:]), dtype=g.dtype)
    stacked[xp.asarray(idx)] = g  # a permutation of the stacked rows
    return {"X@GRAD": [stacked[int(base[k]):int(base[k + 1])] for k in range(len(xs))]}


# -- sequence_slice --------------------------------------------------------------------------


def _slice_infer(ins, a):
    x, off, length = ins["X"], ins["Offset"], ins["Length"]
    check(len(x.shape) >= 1, f"sequence_slice: X must have a row dim, got X{list(x.shape)}")
    for slot, v in (("Offset", off), ("Length", length)):
        check(len(v.shape) == 2 and v.shape[1] in (1, -1),
              f"sequence_slice: {slot} must be [number of sequences, 1], got {slot}{list(v.shape)}")
        check(v.dtype in ("int32", "int64"), f"sequence_slice: {slot} must be int32 or int64, got {v.dtype}")
    return {"Out": Meta((-1,) + tuple(x.shape[1:]), x.dtype)}


def _slice_index(op: str, x, off, length):
    """(gather index into X's rows, Out's offsets): NOTE(seq-slice)."""
    o = one_level(op, x)
    off = host_array(off).reshape(-1).astype(np.int64)
    length = host_array(length).reshape(-1).astype(np.int64)
    n = o.shape[0] - 1
    if off.shape[0] != n or length.shape[0] != n:
        raise ValueError(f"{op}: X has {n} sequences but Offset has {off.shape[0]} and Length {length.shape[0]} "
                         f"entries; there must be one of each per sequence")
    lens = o[1:] - o[:-1]
    for what, bad in (("Offset", off < 0), ("Length", length < 0), ("Offset + Length", off + length > lens)):
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"{op}: sequence {i} has {lens[i]} rows but Offset {off[i]}, Length {length[i]}: "
                             f"{what} {'is negative' if what != 'Offset + Length' else 'runs past its end'}")
    return ranges(o[:-1] + off, length), offsets_of(length)


@register("sequence_slice", ins=("X", Slot("Offset", no_grad=True), Slot("Length", no_grad=True)), outs=("Out",),
          infer=_slice_infer, grad=grad_of(("X",), uses=("X", "Offset", "Length")), wants_lod=("X",),
          lod=lod_at_most("sequence_slice", "X", 1, {"Out": "X"}))
def sequence_slice(xp, ins, a, ctx):
    """Out's sequence i is rows Offset[i] .. Offset[i] + Length[i] - 1 of X's sequence i."""
    x = ins["X"]
    idx, offs = _slice_index("sequence_slice", x, ins["Offset"], ins["Length"])
    return {"Out": LoDTensor(x.data[xp.asarray(idx)], [offs], check=False)}


@register("sequence_slice_grad", ins=("X", "Offset", "Length", "Out@GRAD"), outs=("X@GRAD",), role="backward",
          wants_lod=("X",))
def sequence_slice_grad(xp, ins, a, ctx):
    x = ins["X"]
    idx, _ = _slice_index("sequence_slice_grad", x, ins["Offset"], ins["Length"])
    dx = xp.zeros_like(x.data)
    dx[xp.asarray(idx)] = ins["Out@GRAD"]  # the sliced rows are distinct
    return {"X@GRAD": dx}


__all__ = ["POOL_TYPES", "Segments", "last_level", "offsets_of", "one_level", "ranges"]
