"""More sequence ops of Fluid 1.8: ``row_conv`` (lookahead convolution), ``im2sequence``
(image patches as a sequence per image) and ``filter_by_instag`` (keep the instances that
carry a tag), with their gradients.

NOTE(row-conv): as Fluid 1.8's row_conv_op, with a Filter [C, D] (C = future context + 1):
``Out[k] = sum_{w < C, k + w < end} X[k + w] * Filter[w]`` (elementwise over D) for each row k
of a sequence that ends (exclusive) at row ``end``: the context never reaches into the next
sequence. X is a LoDTensor [T, D] (its last LoD level are the sequences) or a dense
[B, T, D] whose every row is one sequence of T steps. An empty sequence gives nothing (Fluid's
kernel fails on one). One loop over the C taps, each a shifted, masked multiply.

NOTE(im2seq): as Fluid 1.8's im2sequence_op, X [N, C, H, W] -> Out [rows, C * kh * kw], one
row per filter position, image by image, positions row-major, and each row's numbers in
(channel, filter row, filter column) order. The positions of one image are
``(size + pad_a + pad_b - k) / stride + 1`` per axis (C division; Fluid's doc gives a rounding
up that its kernel does not do, and Fluid 1.8.5 gives these counts). ``paddings`` are [up,
left, down, right]. With Y [N, 2] (each image's real height and width, as numbers) and N > 1, image i has
the positions that ``ceil(Y[i] / out_stride)`` would have, read from the start of the whole
(padded) image; with N == 1 Fluid ignores Y, and so does this. Out's LoD gives each image's
rows. The gradient adds each patch back where it was read from (Fluid 1.8's grad fails when Y
is given; here it follows the same positions).

NOTE(instag): as Fluid 1.8's filter_by_instag_op. Instance i has the tags
``Ins_tag[lod[i]:lod[i + 1]]`` (Ins_tag's LoD) and the rows of Ins of its LoD's sequence i
(``is_lod``) or row i alone (not ``is_lod``). An instance with any tag of Filter_tag is kept:
Out holds the kept instances' rows in order, with a LoD of one sequence per kept instance;
IndexMap [k, 3] int64 holds per kept instance (its first row in Out, its first row in Ins,
its row count); LossWeight [k, 1] float32 is ones (Fluid's layer declares float64, its kernel
writes float32). When nothing is kept, Out is one row of ``out_val_if_empty``, IndexMap
[[0, 1, 1]] and LossWeight [[0]], and the gradient is zero. IndexMap and LossWeight have a LoD
of k sequences of one row. The gradient copies Out@GRAD's rows back to the Ins rows they came
from; the other rows get zeros.
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.values import LoDTensor, as_host, scatter_add

# -- row_conv (NOTE(row-conv)) ----------------------------------------------------------------


def _row_conv_infer(ins, a):
    x, f = ins["X"], ins["Filter"]
    check(len(x.shape) in (2, 3), f"row_conv: X must be a LoDTensor [T, D] or a dense [B, T, D], got X{list(x.shape)}")
    check(len(f.shape) == 2 and (f.shape[1] == x.shape[-1] or -1 in (f.shape[1], x.shape[-1])),
          f"row_conv: Filter must be [future_context_size + 1, D] for X{list(x.shape)}, got Filter{list(f.shape)}")
    check(x.dtype in ("float32", "float64") and f.dtype == x.dtype,
          f"row_conv: X and Filter must share float32 or float64, got {x.dtype} and {f.dtype}")
    return {"Out": x}


def _row_ends(x) -> tuple:
    """(data as [rows, D], each row's sequence end, exclusive; the dense shape or None)."""
    if isinstance(x, LoDTensor) and x.offsets:
        off = np.asarray(as_host(x.offsets[-1]), dtype=np.int64)
        ends = np.repeat(off[1:], np.diff(off))
        return x.data, ends, None
    data = x.data if isinstance(x, LoDTensor) else x
    if data.ndim != 3:
        raise ValueError(f"row_conv: X is a dense array of shape {list(data.shape)}: feed a LoDTensor [T, D] "
                         f"(fluid.create_lod_tensor) or a dense [B, T, D]")
    b, t, d = data.shape
    ends = np.repeat(np.arange(1, b + 1, dtype=np.int64) * t, t)
    return data.reshape(b * t, d), ends, data.shape


def _taps(xp, ends, k: int):
    """Per tap w < k: (rows r with r + w inside their sequence, as an index array)."""
    rows = np.arange(ends.shape[0], dtype=np.int64)
    return [xp.asarray(rows[rows + w < ends]) for w in range(k)]


@register("row_conv", ins=("X", "Filter"), outs=("Out",), infer=_row_conv_infer, wants_lod=("X",),
          grad=grad_of(("X", "Filter")))
def row_conv(xp, ins, a, ctx):
    """Lookahead convolution over each sequence's next rows (NOTE(row-conv))."""
    x, f = ins["X"], ins["Filter"]
    data, ends, dense = _row_ends(x)
    out = xp.zeros_like(data)
    for w, r in enumerate(_taps(xp, ends, f.shape[0])):
        out[r] += data[r + w] * f[w]
    return {"Out": out.reshape(dense) if dense is not None else out}  # Out shares X's LoD (the executor's)


@register("row_conv_grad", ins=("X", "Filter", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Filter@GRAD", dispensable=True)), role="backward",
          wants_lod=("X",))
def row_conv_grad(xp, ins, a, ctx):
    x, f = ins["X"], ins["Filter"]
    data, ends, dense = _row_ends(x)
    g = ins["Out@GRAD"].reshape(data.shape)
    dx, df = xp.zeros_like(data), xp.zeros_like(f)
    for w, r in enumerate(_taps(xp, ends, f.shape[0])):
        dx[r + w] += g[r] * f[w]
        df[w] = (g[r] * data[r + w]).sum(axis=0)
    out = {}
    if "X@GRAD" in ctx.outputs:
        out["X@GRAD"] = dx.reshape(dense) if dense is not None else dx
    if "Filter@GRAD" in ctx.outputs:
        out["Filter@GRAD"] = df
    return out


# -- im2sequence (NOTE(im2seq)) ---------------------------------------------------------------

_IM2SEQ_ATTRS = {"kernels": [1, 1], "strides": [1, 1], "paddings": [0, 0, 0, 0], "out_stride": [1, 1]}


def _positions(size: int, k: int, pad_a: int, pad_b: int, stride: int) -> int:
    """Filter positions along one axis, Fluid's Im2SeqOutputSize (C division, towards zero)."""
    return int((size + pad_a + pad_b - k) / stride) + 1


def _im2seq_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) == 4, f"im2sequence: X must be [N, C, H, W], got X{list(x.shape)}")
    for name, n in (("kernels", 2), ("strides", 2), ("paddings", 4), ("out_stride", 2)):
        check(len(a[name]) == n, f"im2sequence: {name} must hold {n} ints, got {a[name]}")
    check(min(a["kernels"]) >= 1 and min(a["strides"]) >= 1 and min(a["out_stride"]) >= 1
          and min(a["paddings"]) >= 0,
          f"im2sequence: kernels, strides and out_stride must be >= 1 and paddings >= 0, got kernels={a['kernels']}, "
          f"strides={a['strides']}, out_stride={a['out_stride']}, paddings={a['paddings']}")
    y = ins.get("Y")
    check(y is None or (len(y.shape) == 2 and y.shape[1] in (2, -1)),
          f"im2sequence: Y must be [N, 2] (each image's real height and width), got Y{list(y.shape) if y else ''}")
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (pu, pl, pd, pr) = a["kernels"], a["strides"], a["paddings"]
    rows = -1  # with real sizes (Y) for several images, or unknown dims, the rows are known at run time
    if min(n, h, w) >= 0 and (y is None or n == 1):
        rows = n * max(_positions(h, kh, pu, pd, sh), 0) * max(_positions(w, kw, pl, pr, sw), 0)
    return {"Out": Meta((rows, -1 if c == -1 else c * kh * kw), x.dtype)}


def _grid(x, y, a) -> list[tuple[int, int]]:
    """Each image's filter positions (rows, columns) (NOTE(im2seq))."""
    n, _, h, w = x.shape
    (kh, kw), (sh, sw), (pu, pl, pd, pr) = a["kernels"], a["strides"], a["paddings"]
    if y is None or n <= 1:
        return [(_positions(h, kh, pu, pd, sh), _positions(w, kw, pl, pr, sw))] * n
    real = np.asarray(as_host(y)).reshape(n, 2).astype(np.int64)
    oh, ow = a["out_stride"]
    rh, rw = -(-real[:, 0] // oh), -(-real[:, 1] // ow)
    return [(_positions(int(a_), kh, pu, pd, sh), _positions(int(b_), kw, pl, pr, sw)) for a_, b_ in zip(rh, rw)]


def _padded_shape(shape, grid, a) -> tuple:
    """The shape of X zero-padded so that every position of every image lies inside it."""
    n, c, h, w = shape
    (kh, kw), (sh, sw), (pu, pl, _, _) = a["kernels"], a["strides"], a["paddings"]
    gh = max((g[0] for g in grid), default=0)
    gw = max((g[1] for g in grid), default=0)
    return (n, c, max(pu + h, (gh - 1) * sh + kh), max(pl + w, (gw - 1) * sw + kw))


def _patch_index(grid, a, shape):
    """For every output row and tap: the flat index into the padded X (an int64 [rows, C*kh*kw]).
    Images with the same positions (all of them without Y) share one index block."""
    n, c, hp, wp = shape
    (kh, kw), (sh, sw) = a["kernels"], a["strides"]
    ci, i, j = np.meshgrid(np.arange(c), np.arange(kh), np.arange(kw), indexing="ij")
    tap = ((ci * hp + i) * wp + j).reshape(1, 1, -1)  # offsets from a patch's corner
    blocks = []
    for (gh, gw), images in _runs(grid):
        if gh <= 0 or gw <= 0:
            continue
        r, q = np.meshgrid(np.arange(gh) * sh, np.arange(gw) * sw, indexing="ij")
        corner = np.asarray(images)[:, None] * (c * hp * wp) + (r * wp + q).reshape(1, -1)  # [images, positions]
        blocks.append((corner[:, :, None] + tap).reshape(-1, tap.shape[-1]))
    return np.concatenate(blocks) if blocks else np.zeros((0, c * kh * kw), dtype=np.int64)


def _runs(grid):
    """[(positions, [consecutive images with them])], in image order."""
    out: list = []
    for b, g in enumerate(grid):
        if out and out[-1][0] == g:
            out[-1][1].append(b)
        else:
            out.append((g, [b]))
    return out


def _im2seq_lod(levels, attrs):
    return {"Out": 1}


@register("im2sequence", ins=("X", Slot("Y", dispensable=True, no_grad=True)), outs=("Out",), attrs=_IM2SEQ_ATTRS,
          infer=_im2seq_infer, lod=_im2seq_lod, grad=grad_of(("X",)))
def im2sequence(xp, ins, a, ctx):
    """Every image's filter patches as one sequence of rows (NOTE(im2seq))."""
    x = ins["X"]
    grid = _grid(x, ins.get("Y"), a)
    _, _, h, w = x.shape
    pu, pl = a["paddings"][0], a["paddings"][1]
    xpad = xp.zeros(_padded_shape(x.shape, grid, a), dtype=x.dtype)
    xpad[:, :, pu:pu + h, pl:pl + w] = x
    idx = _patch_index(grid, a, xpad.shape)
    counts = [max(gh, 0) * max(gw, 0) for gh, gw in grid]
    out = xpad.reshape(-1)[xp.asarray(idx)]
    return {"Out": LoDTensor(out, [np.concatenate([[0], np.cumsum(counts)]).astype(np.int64)])}


@register("im2sequence_grad", ins=("X", Slot("Y", dispensable=True), "Out@GRAD"), outs=("X@GRAD",),
          attrs=_IM2SEQ_ATTRS, role="backward")
def im2sequence_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    grid = _grid(x, ins.get("Y"), a)
    shape = _padded_shape(x.shape, grid, a)
    idx = _patch_index(grid, a, shape)
    flat = xp.zeros(int(np.prod(shape)), dtype=g.dtype)
    scatter_add(xp, flat, xp.asarray(idx.reshape(-1)), g.reshape(-1))
    _, _, h, w = x.shape
    pu, pl = a["paddings"][0], a["paddings"][1]
    return {"X@GRAD": flat.reshape(shape)[:, :, pu:pu + h, pl:pl + w]}


# -- filter_by_instag (NOTE(instag)) ----------------------------------------------------------


def _instag_infer(ins, a):
    x, tag, ftag = ins["Ins"], ins["Ins_tag"], ins["Filter_tag"]
    check(len(x.shape) == 2, f"filter_by_instag: Ins must be 2-D [rows, width], got Ins{list(x.shape)}")
    check(tag.dtype == "int64" and ftag.dtype == "int64",
          f"filter_by_instag: Ins_tag and Filter_tag must be int64, got {tag.dtype} and {ftag.dtype}")
    return {"Out": Meta((-1, x.shape[1]), x.dtype), "LossWeight": Meta((-1, 1), "float32"),
            "IndexMap": Meta((-1, 3), "int64")}


def _instag_lod(levels, attrs):
    return {"Out": 1, "LossWeight": 1, "IndexMap": 1}


def _instag_grad(op):
    x = op.inputs["Ins"][0]
    if x not in op.need:
        return []
    return [OpSpec("filter_by_instag_grad", {"Ins": [x], "IndexMap": list(op.outputs["IndexMap"]),
                                             "LossWeight": list(op.outputs["LossWeight"]),
                                             "Out@GRAD": [grad_name(op.outputs["Out"][0])]},
                   {"Ins@GRAD": [op.grad_of(x)]}, dict(op.attrs))]


def _host_offsets(op: str, slot: str, v) -> np.ndarray:
    if not isinstance(v, LoDTensor) or not v.offsets:
        raise ValueError(f"{op}: {slot} must be a LoDTensor with a 1-level LoD (one sequence per instance)")
    return np.asarray(as_host(v.offsets[-1]), dtype=np.int64)


@register("filter_by_instag", ins=("Ins", Slot("Ins_tag", no_grad=True), Slot("Filter_tag", no_grad=True)),
          outs=("Out", Slot("LossWeight", no_grad=True), Slot("IndexMap", no_grad=True)),
          attrs={"is_lod": True, "out_val_if_empty": 0}, infer=_instag_infer, lod=_instag_lod,
          wants_lod=("Ins", "Ins_tag"), grad=_instag_grad)
def filter_by_instag(xp, ins, a, ctx):
    """The instances carrying a tag of Filter_tag (NOTE(instag))."""
    x, tags = ins["Ins"], ins["Ins_tag"]
    data = x.data if isinstance(x, LoDTensor) else x
    tag_off = _host_offsets("filter_by_instag", "Ins_tag", tags)
    if a["is_lod"]:
        ins_off = _host_offsets("filter_by_instag", "Ins (is_lod=True)", x)
    else:
        ins_off = np.arange(data.shape[0] + 1, dtype=np.int64)
    n = tag_off.shape[0] - 1
    if ins_off.shape[0] - 1 < n:
        raise ValueError(f"filter_by_instag: Ins_tag gives {n} instances but Ins has {ins_off.shape[0] - 1}")
    tag_vals = np.asarray(as_host(tags.data)).reshape(-1)
    wanted = np.isin(tag_vals, np.asarray(as_host(ins["Filter_tag"])).reshape(-1))
    owner = np.repeat(np.arange(n), np.diff(tag_off))
    kept = np.unique(owner[wanted[:tag_off[-1]]])
    if kept.size == 0:
        out = xp.full((1, data.shape[1]), a["out_val_if_empty"], dtype=data.dtype)
        one = [np.array([0, 1], dtype=np.int64)]
        return {"Out": LoDTensor(out, one), "LossWeight": LoDTensor(xp.zeros((1, 1), dtype=np.float32), one),
                "IndexMap": LoDTensor(xp.asarray(np.array([[0, 1, 1]], dtype=np.int64)), one)}
    starts, lens = ins_off[kept], ins_off[kept + 1] - ins_off[kept]
    out_off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    rows = np.repeat(starts - out_off[:-1], lens) + np.arange(out_off[-1])
    imap = np.stack([out_off[:-1], starts, lens], axis=1).astype(np.int64)
    per = [np.arange(kept.size + 1, dtype=np.int64)]
    return {"Out": LoDTensor(data[xp.asarray(rows)], [out_off]),
            "LossWeight": LoDTensor(xp.ones((kept.size, 1), dtype=np.float32), per),
            "IndexMap": LoDTensor(xp.asarray(imap), per)}


@register("filter_by_instag_grad", ins=("Ins", "IndexMap", "LossWeight", "Out@GRAD"), outs=("Ins@GRAD",),
          attrs={"is_lod": True, "out_val_if_empty": 0}, role="backward")
def filter_by_instag_grad(xp, ins, a, ctx):
    x, g = ins["Ins"], ins["Out@GRAD"]
    dx = xp.zeros(x.shape, dtype=g.dtype)
    lw = np.asarray(as_host(ins["LossWeight"]))
    if lw.size == 1 and float(lw.reshape(-1)[0]) == 0.0:  # nothing was kept
        return {"Ins@GRAD": dx}
    imap = np.asarray(as_host(ins["IndexMap"])).reshape(-1, 3).astype(np.int64)
    out_start, in_start, lens = imap[:, 0], imap[:, 1], imap[:, 2]
    step = np.arange(int(lens.sum())) - np.repeat(np.cumsum(lens) - lens, lens)  # row within its instance
    dx[xp.asarray(np.repeat(in_start, lens) + step)] = g[xp.asarray(np.repeat(out_start, lens) + step)]
    return {"Ins@GRAD": dx}
