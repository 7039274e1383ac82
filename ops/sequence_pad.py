"""Sequence layout ops of Fluid 1.8 (sequence_ops/, lod_reset_op): they move rows between
the LoD form and padded batches, or make, change and read LoD, rather than compute on it.

* ``sequence_pad`` / ``sequence_unpad``: sequences <-> a [batch, padded_length, ...] array
  plus a Length vector (with gradients);
* ``sequence_mask``: lengths -> a 0/1 mask (no gradient);
* ``sequence_enumerate``: the ``win_size`` ids starting at each step (no gradient);
* ``sequence_reverse``: each sequence back to front (with gradient);
* ``lod_reset``: X's rows under another LoD, from ``target_lod`` or Y; ``append`` (what
  ``lod_append`` sets) adds the level below X's (with gradient);
* ``sequence_scatter``: Out = X, then ``Out[i, Ids[j]] += Updates[j]`` for each j of
  sequence i of Ids (with gradients).

NOTE(pad-mask): no Python loop runs per sequence (NOTE(segments) in ops/sequence.py). A
padded batch [n, L, ...] and the rows of its sequences are one boolean mask apart:
``valid[i, t] = t < len[i]`` picks, in row-major order, exactly the rows of sequence 0, then
those of sequence 1, and so on. So padding is ``out[valid] = rows``, unpadding ``x[valid]``,
and each gradient is the other direction. The mask is built on the host from the offsets or
Length (small) and moved to the device with ``xp.asarray``.

NOTE(pad-1.8): as Fluid 1.8.5's kernels, checked against its wheel. sequence_pad pads the
sequences of X's top level; 1.8.5 refuses a 2-level X (it compares the top level's last offset
with the rows), here the top sequences are padded with all their rows (absolute offsets). It
appends PadValue (a [1] scalar or one step's shape) at each tail; Out has no LoD and Length
is int64 [n]; padded_length -1 means the longest sequence, and a shorter one than the
longest is an error. At build time Fluid writes 1 for an unknown padded length; here it is
-1, so no later layer sizes a weight by a made-up 1. sequence_unpad's Length may be [n] or
[n, 1]; its Out gets one LoD level from Length.
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, register
from placegroup.ops.sequence import last_level
from placegroup.values import LoDTensor, host_array

INTS = ("int32", "int64")



def top_rows(op: str, x) -> np.ndarray:
    """The top LoD level of ``x`` as row offsets (a lower level maps each upper offset to rows)."""
    last_level(op, x)  # the error for a dense X
    o = x.offsets[0]
    for lower in x.offsets[1:]:
        o = lower[o]
    return o


def _valid(lens: np.ndarray, width: int) -> np.ndarray:
    """``valid[i, t] = t < lens[i]`` (NOTE(pad-mask))."""
    return np.arange(width)[None, :] < lens[:, None]


# -- sequence_pad ----------------------------------------------------------------------------


def _pad_infer(ins, a):
    x, pv = ins["X"], ins["PadValue"]
    check(len(x.shape) >= 2, f"sequence_pad: X must have rank >= 2 ([rows, step dims]), got X{list(x.shape)}")
    step = tuple(x.shape[1:])
    check(tuple(pv.shape) in ((1,), step),
          f"sequence_pad: PadValue must be [1] or one step's shape {list(step)}, got PadValue{list(pv.shape)}")
    n = a["padded_length"]
    check(n == -1 or n > 0, f"sequence_pad: padded_length must be -1 or > 0, got {n}")
    return {"Out": Meta((-1, n) + step, x.dtype), "Length": Meta((-1,), "int64")}  # NOTE(pad-1.8)


def _pad_grad(op) -> list:
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    ins = {"X": [x], "Out@GRAD": [grad_name(op.outputs["Out"][0])]}
    return [OpSpec("sequence_pad_grad", ins, {"X@GRAD": [op.grad_of(x)]}, dict(op.attrs))]


def _pad_plan(x, a):
    o = top_rows("sequence_pad", x)
    lens = o[1:] - o[:-1]
    longest = int(lens.max()) if lens.size else 0
    n = a["padded_length"]
    if n == -1:
        n = longest
    if n < longest:
        raise ValueError(f"sequence_pad: padded_length {n} is shorter than the longest sequence ({longest}); "
                         f"give -1 or a length >= {longest}")
    return lens, _valid(lens, n)


@register("sequence_pad", ins=("X", Slot("PadValue", no_grad=True)), outs=("Out", Slot("Length", no_grad=True)),
          attrs={"padded_length": -1}, infer=_pad_infer, grad=_pad_grad, lod="drop", wants_lod=("X",))
def sequence_pad(xp, ins, a, ctx):
    """Out[i, t] = step t of sequence i, PadValue past its end; Length[i] = its length."""
    x = ins["X"]
    lens, valid = _pad_plan(x, a)
    data, pv = x.data, ins["PadValue"]
    step = tuple(data.shape[1:])
    out = xp.empty(valid.shape + step, dtype=data.dtype)
    out[...] = pv.reshape(step if pv.size > 1 else (1,) * len(step)).astype(data.dtype)
    out[xp.asarray(valid)] = data
    return {"Out": out, "Length": xp.asarray(lens.astype(np.int64))}


@register("sequence_pad_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"padded_length": -1},
          role="backward", wants_lod=("X",))
def sequence_pad_grad(xp, ins, a, ctx):
    """X@GRAD = the valid steps of Out@GRAD (NOTE(pad-mask))."""
    _, valid = _pad_plan(ins["X"], a)
    return {"X@GRAD": ins["Out@GRAD"][xp.asarray(valid)]}


# -- sequence_unpad --------------------------------------------------------------------------


def _unpad_infer(ins, a):
    x, n = ins["X"], ins["Length"]
    check(len(x.shape) >= 2, f"sequence_unpad: X must have rank >= 2 ([batch, padded_length, ...]), "
                             f"got X{list(x.shape)}")
    check(n.dtype == "int64", f"sequence_unpad: Length must be int64, got {n.dtype}")
    check(len(n.shape) == 1 or (len(n.shape) == 2 and n.shape[1] in (1, -1)),
          f"sequence_unpad: Length must be [batch] or [batch, 1], got Length{list(n.shape)}")
    shape = (-1,) + tuple(x.shape[2:])
    return {"Out": Meta(shape if len(shape) > 1 else (-1, 1), x.dtype)}


def _lengths(x, length) -> np.ndarray:
    lens = host_array(length).reshape(-1).astype(np.int64)
    if lens.shape[0] != x.shape[0] or (lens < 0).any() or (lens > x.shape[1]).any():
        raise ValueError(f"sequence_unpad: Length {lens.tolist()[:8]} must hold one length in [0, {x.shape[1]}] "
                         f"per row of X{list(x.shape)}")
    return lens


@register("sequence_unpad", ins=("X", Slot("Length", no_grad=True)), outs=("Out",), infer=_unpad_infer,
          grad=lambda op: _unpad_grad(op), lod=lambda levels, a: {"Out": 1})
def sequence_unpad(xp, ins, a, ctx):
    """Out = the first Length[i] steps of each X[i], one after another, with LoD from Length."""
    x = ins["X"]
    lens = _lengths(x, ins["Length"])
    out = x[xp.asarray(_valid(lens, x.shape[1]))]
    if out.ndim == 1:  # Fluid's unpad of [n, L] gives [rows, 1]
        out = out.reshape(-1, 1)
    return {"Out": LoDTensor(out, [np.concatenate([[0], np.cumsum(lens)])], check=False)}


def _unpad_grad(op) -> list:
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    ins = {"X": [x], "Length": list(op.inputs["Length"]), "Out@GRAD": [grad_name(op.outputs["Out"][0])]}
    return [OpSpec("sequence_unpad_grad", ins, {"X@GRAD": [op.grad_of(x)]}, dict(op.attrs))]


@register("sequence_unpad_grad", ins=("X", "Length", "Out@GRAD"), outs=("X@GRAD",), role="backward")
def sequence_unpad_grad(xp, ins, a, ctx):
    """X@GRAD = Out@GRAD put back in its steps, zero in the padding."""
    x = ins["X"]
    valid = xp.asarray(_valid(_lengths(x, ins["Length"]), x.shape[1]))
    dx = xp.zeros(x.shape, dtype=ins["Out@GRAD"].dtype)
    dx[valid] = ins["Out@GRAD"].reshape((-1,) + tuple(x.shape[2:]))
    return {"X@GRAD": dx}


# -- sequence_mask ---------------------------------------------------------------------------


def _mask_infer(ins, a):
    x = ins["X"]
    check(x.dtype in INTS, f"sequence_mask: X must be int32 or int64 lengths, got {x.dtype}")
    m = a["maxlen"]
    check(m == -1 or m > 0, f"sequence_mask: maxlen must be -1 or > 0, got {m}")
    try:
        dtype = np.dtype(a["out_dtype"]).name
    except TypeError:
        raise ProgramError(f"sequence_mask: out_dtype {a['out_dtype']!r} is not a dtype") from None
    return {"Y": Meta(tuple(x.shape) + (m if ins.get("MaxLenTensor") is None else -1,), dtype)}


@register("sequence_mask", ins=("X", Slot("MaxLenTensor", dispensable=True)), outs=("Y",),
          attrs={"maxlen": -1, "out_dtype": "int64"}, infer=_mask_infer, lod="drop")
def sequence_mask(xp, ins, a, ctx):
    """Y[..., j] = j < X[...], for j < maxlen (MaxLenTensor, the attr, or else max(X))."""
    x = ins["X"]
    m = ins.get("MaxLenTensor")
    m = int(host_array(m).reshape(-1)[0]) if m is not None else a["maxlen"]
    if m == -1:
        m = int(x.max()) if x.size else 0
    return {"Y": (xp.arange(m) < x[..., None]).astype(a["out_dtype"])}


# -- sequence_enumerate ----------------------------------------------------------------------


def _enum_infer(ins, a):
    x = ins["X"]
    check(x.dtype in INTS, f"sequence_enumerate: X must be int32 or int64 ids, got {x.dtype}")
    check(len(x.shape) == 1 or (len(x.shape) == 2 and x.shape[1] in (1, -1)),
          f"sequence_enumerate: X must be [N] or [N, 1], got X{list(x.shape)}")
    check(a["win_size"] >= 1, f"sequence_enumerate: win_size must be >= 1, got {a['win_size']}")
    return {"Out": Meta((x.shape[0], a["win_size"]), x.dtype)}


@register("sequence_enumerate", ins=("X",), outs=("Out",), attrs={"win_size": 2, "pad_value": 0},
          infer=_enum_infer, wants_lod=("X",))
def sequence_enumerate(xp, ins, a, ctx):
    """Out[r, k] = X[r + k] while r + k stays in r's sequence, else pad_value."""
    x = ins["X"]
    o = last_level("sequence_enumerate", x)
    ids = x.data.reshape(-1)
    rows = ids.shape[0]
    end = np.repeat(o[1:], o[1:] - o[:-1])  # the end of each row's sequence
    at = np.arange(rows)[:, None] + np.arange(a["win_size"])[None, :]
    inside = xp.asarray(at < end[:, None])
    got = ids[xp.asarray(np.minimum(at, max(rows - 1, 0)))] if rows else xp.zeros(at.shape, ids.dtype)
    return {"Out": xp.where(inside, got, xp.asarray(a["pad_value"], dtype=ids.dtype))}


# -- sequence_reverse ------------------------------------------------------------------------


def _reversed_rows(op: str, x) -> np.ndarray:
    """Row r of the output is row ``o[s] + o[s + 1] - 1 - r`` of the input, s its sequence."""
    o = last_level(op, x)
    lens = o[1:] - o[:-1]
    return np.repeat(o[:-1] + o[1:] - 1, lens) - np.arange(int(o[-1]))


def _reverse_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) >= 1, f"sequence_reverse: X must have a row dim, got X{list(x.shape)}")
    return {"Y": Meta(x.shape, x.dtype)}


def _reverse_grad(op) -> list:
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    return [OpSpec("sequence_reverse_grad", {"X": [x], "Y@GRAD": [grad_name(op.outputs["Y"][0])]},
                   {"X@GRAD": [op.grad_of(x)]})]


@register("sequence_reverse", ins=("X",), outs=("Y",), infer=_reverse_infer, grad=_reverse_grad, wants_lod=("X",))
def sequence_reverse(xp, ins, a, ctx):
    """Each sequence of X's last LoD level back to front; Y keeps X's LoD."""
    x = ins["X"]
    return {"Y": x.data[xp.asarray(_reversed_rows("sequence_reverse", x))]}


@register("sequence_reverse_grad", ins=("X", "Y@GRAD"), outs=("X@GRAD",), role="backward", wants_lod=("X",))
def sequence_reverse_grad(xp, ins, a, ctx):
    """The reversal is its own inverse: X@GRAD = Y@GRAD reversed per sequence."""
    return {"X@GRAD": ins["Y@GRAD"][xp.asarray(_reversed_rows("sequence_reverse_grad", ins["X"]))]}


# -- lod_reset (and lod_append) --------------------------------------------------------------


def _reset_infer(ins, a):
    x, y = ins["X"], ins.get("Y")
    check(y is not None or len(a["target_lod"]) > 1,
          f"lod_reset: give Y or a target_lod of at least 2 offsets, got target_lod={a['target_lod']}")
    return {"Out": Meta(x.shape, x.dtype)}


def _reset_lod(levels, a):
    """NOTE(lod-rule): Y's LoD when Y is a sequence, else one level (appended to X's)."""
    y = levels.get("Y") or []
    if y and y[0] > 0:
        return {"Out": y[0]}
    return {"Out": (levels["X"][0] + 1) if a["append"] else 1}


@register("lod_reset", ins=("X", Slot("Y", dispensable=True, no_grad=True)), outs=("Out",),
          attrs={"target_lod": [], "append": False}, infer=_reset_infer,
          grad=lambda op: _reset_grad(op), lod=_reset_lod, wants_lod=("X", "Y"))
def lod_reset(xp, ins, a, ctx):
    """Out = X's rows with Y's LoD (Y a sequence), Y's values as offsets, or ``target_lod``;
    ``append`` adds that level below X's own."""
    x, y = ins["X"], ins.get("Y")
    data = x.data if isinstance(x, LoDTensor) else x
    rows = int(data.shape[0])
    if isinstance(y, LoDTensor) and y.offsets:
        if int(y.offsets[-1][-1]) != rows:
            raise ValueError(f"lod_reset: Y's LoD {y.lod()} ends at {int(y.offsets[-1][-1])}, but X has {rows} rows")
        return {"Out": LoDTensor(data, y.offsets, check=False)}
    level = host_array(y.data if isinstance(y, LoDTensor) else y).reshape(-1) if y is not None else \
        np.asarray(a["target_lod"])
    level = level.astype(np.int64)
    if level.size < 2 or level[0] != 0 or level[-1] != rows or (np.diff(level) < 0).any():
        raise ValueError(f"lod_reset: the target LoD {level.tolist()[:16]} must start at 0, never decrease and end "
                         f"at X's {rows} rows")
    upper = tuple(x.offsets) if a["append"] and isinstance(x, LoDTensor) else ()
    return {"Out": LoDTensor(data, upper + (level,), check=bool(upper))}


def _reset_grad(op) -> list:
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    return [OpSpec("lod_reset_grad", {"X": [x], "Out@GRAD": [grad_name(op.outputs["Out"][0])]},
                   {"X@GRAD": [op.grad_of(x)]}, dict(op.attrs))]


@register("lod_reset_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"target_lod": [], "append": False},
          role="backward")
def lod_reset_grad(xp, ins, a, ctx):
    """X@GRAD = Out@GRAD (the rows are X's; only the LoD changed); it keeps X's LoD."""
    return {"X@GRAD": ins["Out@GRAD"]}


# -- sequence_scatter ------------------------------------------------------------------------


def _scatter_infer(ins, a):
    x, ids, up = ins["X"], ins["Ids"], ins["Updates"]
    check(len(x.shape) >= 2, f"sequence_scatter: X must be [batch, width], got X{list(x.shape)}")
    check(ids.dtype == "int64", f"sequence_scatter: Ids must be int64, got {ids.dtype}")
    check(up.dtype == x.dtype, f"sequence_scatter: Updates must have X's dtype {x.dtype}, got {up.dtype}")
    check(tuple(up.shape) == tuple(ids.shape) or -1 in tuple(up.shape) + tuple(ids.shape),
          f"sequence_scatter: Updates{list(up.shape)} must have the shape of Ids{list(ids.shape)}")
    return {"Out": Meta(x.shape, x.dtype)}


def _scatter_at(op: str, x, ids) -> np.ndarray:
    """The flat position in X of each id: ``seq * width + id`` (Fluid's kernel)."""
    o = ids.offsets[0] if isinstance(ids, LoDTensor) and ids.offsets else last_level(op, ids)
    n = int(x.shape[0])
    width = int(np.prod(x.shape[1:], dtype=np.int64))
    if len(o) - 1 > n:
        raise ValueError(f"{op}: Ids has {len(o) - 1} sequences but X has {n} rows")
    col = host_array(ids.data).reshape(-1).astype(np.int64)
    if col.size and (col.min() < 0 or col.max() >= width):
        raise ValueError(f"{op}: Ids must lie in [0, {width}), got values in [{col.min()}, {col.max()}]")
    return np.repeat(np.arange(len(o) - 1), o[1:] - o[:-1]) * width + col


@register("sequence_scatter", ins=("X", Slot("Ids", no_grad=True), "Updates"), outs=("Out",),
          infer=_scatter_infer, grad=lambda op: _scatter_grad(op),
          lod=lambda levels, a: {"Out": levels["X"][0]}, wants_lod=("X", "Ids"))
def sequence_scatter(xp, ins, a, ctx):
    """Out = X; Out[i, Ids[j]] += Updates[j] for each j of sequence i of Ids."""
    x = ins["X"]
    data = x.data if isinstance(x, LoDTensor) else x
    at = _scatter_at("sequence_scatter", data, ins["Ids"])
    flat = data.reshape(-1).copy()
    np.add.at(flat, at, ins["Updates"].reshape(-1)) if xp is np else xp.add.at(flat, xp.asarray(at),
                                                                               ins["Updates"].reshape(-1))
    out = flat.reshape(data.shape)
    return {"Out": x.with_data(out) if isinstance(x, LoDTensor) else out}


def _scatter_grad(op) -> list:
    want = {s: op.inputs[s][0] for s in ("X", "Updates") if op.inputs[s][0] in op.need}
    if not want:
        return []
    ins = {"X": list(op.inputs["X"]), "Ids": list(op.inputs["Ids"]), "Updates": list(op.inputs["Updates"]),
           "Out@GRAD": [grad_name(op.outputs["Out"][0])]}
    return [OpSpec("sequence_scatter_grad", ins, {s + "@GRAD": [op.grad_of(n)] for s, n in want.items()})]


@register("sequence_scatter_grad", ins=("X", "Ids", "Updates", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Updates@GRAD", dispensable=True)), role="backward",
          wants_lod=("Ids",))
def sequence_scatter_grad(xp, ins, a, ctx):
    """X@GRAD = Out@GRAD; Updates@GRAD[j] = Out@GRAD at the place Updates[j] went."""
    g = ins["Out@GRAD"]
    at = _scatter_at("sequence_scatter_grad", g, ins["Ids"])
    return {"X@GRAD": g, "Updates@GRAD": g.reshape(-1)[xp.asarray(at)].reshape(ins["Updates"].shape)}


__all__ = ["top_rows"]
