"""Spatial ops of Fluid 1.8: unfold (im2col), temporal_shift, affine_grid, grid_sampler, crop,
fsp, similarity_focus, add_position_encoding, and their gradients (similarity_focus has none,
as in Fluid). Layout NCHW.

NOTE(unfold): Y [N, C*kh*kw, oh*ow] is Paddle's im2col (kCFO): row ``(c*kh + i)*kw + j`` holds
tap (i, j) of channel c for every output cell, read from X zero-padded by ``paddings`` =
[up, left, down, right] (that order, unlike conv's [top, bottom, left, right]); the sizes are
conv's ``(in + lo + hi - (d*(k-1) + 1)) // stride + 1``. It uses conv's tap slices
(NOTE(conv-taps) in ops/conv.py): one strided slice per tap, its gradient the same slices
added back (col2im).

NOTE(grid-sampler-1.8): Fluid 1.8's grid_sampler has no ``align_corners``, ``mode`` or
``padding_mode`` (Paddle 2.0 added them; its defaults bilinear/zeros/True are 1.8's
behaviour). Grid [N, H, W, 2] holds (x, y) in [-1, 1]; x maps to ``((x + 1) * (W - 1)) * 0.5``
(the corners are the corner *cells'* centres), y likewise. The four neighbours
floor/floor+1 are weighted bilinearly; a neighbour outside [0, W-1] x [0, H-1] reads 0. The
output has X's H and W, so Grid's H and W must equal X's (1.8's InferShape). The gradient
w.r.t. Grid is Paddle's: the weights' derivatives times the neighbours' values, times
(W-1)/2 and (H-1)/2, with the floor held fixed. X's gradient scatters dOut times each
neighbour's weight back (a bincount over the four neighbours in Paddle's order).

NOTE(affine-grid): affine_grid's base grid is 1.8's Linspace: -1 + i * (2 / (n - 1)) in the
input's dtype, x along W, y along H; row (h, w) of a sample's grid is (x_w, y_h, 1) and
Output[n] = base @ Theta[n]ᵀ. A size-1 axis is [-1] (Paddle 2's value; 1.8 divides by zero
there and gives NaN).

NOTE(similarity-focus): for each sample and each index in ``indexes``, the [A, B] slice of X
at that index along ``axis`` is scanned from its largest value down; a cell is taken unless
its row or column already holds a taken one, until min(A, B) are taken; Out is 1 along
``axis`` at every taken (row, column) of any index, else 0. Each step takes the largest
remaining cell of every (sample, index) at once: min(A, B) vectorised steps. Paddle's
std::sort leaves the order of equal values unspecified; here the first in row-major order
wins.
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.ops.conv import ints, taps, widths
from placegroup.ops.registry import Meta, Slot, check, grad_of, register


def _rank(op: str, slot: str, meta, n: int, what: str) -> None:
    check(len(meta.shape) == n, f"{op}: {slot}{list(meta.shape)} must be {n}-D {what}")


# -- unfold (NOTE(unfold)) ----------------------------------------------------------------------


def _unfold_geometry(a, xshape):
    check(len(xshape) == 4, f"unfold: X{list(xshape)} must be 4-D [N, C, H, W]")
    k, s = ints("unfold", "kernel_sizes", a["kernel_sizes"]), ints("unfold", "strides", a["strides"])
    d, p = ints("unfold", "dilations", a["dilations"]), ints("unfold", "paddings", a["paddings"], (4,))
    check(min(k + s + d) > 0 and min(p) >= 0, f"unfold: kernel_sizes {k}, strides {s} and dilations {d} must be "
                                               f"positive and paddings {p} >= 0")
    pads = [p[0], p[2], p[1], p[3]]  # [up, left, down, right] -> conv's [top, bottom, left, right]
    out = [-1 if n < 0 else (n + pads[2 * i] + pads[2 * i + 1] - (d[i] * (k[i] - 1) + 1)) // s[i] + 1
           for i, n in enumerate(xshape[2:])]
    check(all(o > 0 for o, n in zip(out, xshape[2:]) if n >= 0),
          f"unfold: X{list(xshape)} with kernel_sizes {k}, strides {s}, paddings {p}, dilations {d} gives the "
          f"output size {out}; it must be positive")
    return k, s, d, pads, out


def _unfold_infer(ins, a):
    x = ins["X"]
    k, _, _, _, out = _unfold_geometry(a, x.shape)
    c = x.shape[1]
    return {"Y": Meta((x.shape[0], -1 if c < 0 else c * k[0] * k[1], -1 if -1 in out else out[0] * out[1]),
                      x.dtype)}


_UNFOLD_ATTRS = {"kernel_sizes": [], "strides": [1, 1], "paddings": [0, 0, 0, 0], "dilations": [1, 1]}


@register("unfold", ins=("X",), outs=("Y",), attrs=_UNFOLD_ATTRS, infer=_unfold_infer, grad=grad_of(("X",), out="Y"))
def unfold(xp, ins, a, ctx):
    """Y [N, C*kh*kw, oh*ow] = the sliding kh x kw blocks of X [N, C, H, W] (im2col, NOTE(unfold))."""
    x = ins["X"]
    k, s, d, pads, out = _unfold_geometry(a, x.shape)
    xpad = xp.pad(x, [(0, 0), (0, 0)] + widths(pads, x.shape[2:], k, out, s, d))
    col = xp.empty(x.shape[:2] + tuple(k) + tuple(out), x.dtype)
    for idx, sl in taps(k, out, s, d):
        col[:, :, idx[0], idx[1]] = xpad[sl]
    return {"Y": col.reshape(x.shape[0], -1, out[0] * out[1])}


@register("unfold_grad", ins=("X", "Y@GRAD"), outs=("X@GRAD",), attrs=_UNFOLD_ATTRS, role="backward")
def unfold_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Y@GRAD"]
    k, s, d, pads, out = _unfold_geometry(a, x.shape)
    g = g.reshape(x.shape[:2] + tuple(k) + tuple(out))
    wid = widths(pads, x.shape[2:], k, out, s, d)
    gpad = xp.zeros(x.shape[:2] + tuple(lo + n + hi for (lo, hi), n in zip(wid, x.shape[2:])), g.dtype)
    for idx, sl in taps(k, out, s, d):
        gpad[sl] += g[:, :, idx[0], idx[1]]
    (t, _), (l, _) = wid
    return {"X@GRAD": xp.ascontiguousarray(gpad[:, :, t:t + x.shape[2], l:l + x.shape[3]])}


# -- temporal_shift -----------------------------------------------------------------------------


def _shift_split(op: str, a, shape):
    """(T, c1, c2): channels [0, c1) move one segment later, [c1, c2) one earlier (Paddle's
    ``int(c * ratio)`` and ``int(2c * ratio)`` in float32)."""
    t, r = a["seg_num"], a["shift_ratio"]
    check(isinstance(t, int) and t > 0, f"{op}: seg_num must be a positive int, got {t!r}")
    check(0 < r < 0.5, f"{op}: shift_ratio must lie in (0, 0.5), got {r!r}")
    check(shape[0] < 0 or shape[0] % t == 0, f"{op}: X{list(shape)}'s dim 0 (N*T) must divide by seg_num={t}")
    c = shape[1]
    return t, int(np.float32(c) * np.float32(r)), int(np.float32(2 * c) * np.float32(r))


def _shift_infer(ins, a):
    x = ins["X"]
    _rank("temporal_shift", "X", x, 4, "[N*T, C, H, W]")
    _shift_split("temporal_shift", a, x.shape)
    return {"Out": x}


_SHIFT_ATTRS = {"seg_num": None, "shift_ratio": 0.25}  # seg_num has no default in Fluid


def _shift(xp, x, a, backward: bool):
    """Out of temporal_shift, or (``backward``) its adjoint: X's gradient given dOut."""
    t, c1, c2 = _shift_split("temporal_shift", a, x.shape)
    v = x.reshape((-1, t) + x.shape[1:])
    out = xp.zeros_like(v)
    prev, later = slice(None, -1), slice(1, None)
    if backward:
        prev, later = later, prev
    out[:, later, :c1] = v[:, prev, :c1]  # segment t reads t-1 in channels [0, c1)
    out[:, prev, c1:c2] = v[:, later, c1:c2]  # and t+1 in [c1, c2)
    out[:, :, c2:] = v[:, :, c2:]
    return out.reshape(x.shape)


@register("temporal_shift", ins=("X",), outs=("Out",), attrs=_SHIFT_ATTRS, infer=_shift_infer,
          grad=grad_of(("X",), uses=()))
def temporal_shift(xp, ins, a, ctx):
    """Out = X [N*T, C, H, W] with its first ``shift_ratio`` of channels taken from the previous
    segment, the next ``shift_ratio`` from the following one (zeros past the ends), the rest
    unchanged (the Temporal Shift Module)."""
    return {"Out": _shift(xp, ins["X"], a, False)}


@register("temporal_shift_grad", ins=("Out@GRAD",), outs=("X@GRAD",), attrs=_SHIFT_ATTRS, role="backward")
def temporal_shift_grad(xp, ins, a, ctx):
    return {"X@GRAD": _shift(xp, ins["Out@GRAD"], a, True)}


# -- affine_grid (NOTE(affine-grid)) ---------------------------------------------------------------


def _affine_infer(ins, a):
    th, size = ins["Theta"], ins.get("OutputShape")
    _rank("affine_grid", "Theta", th, 3, "[N, 2, 3]")
    check(tuple(th.shape[1:]) == (2, 3), f"affine_grid: Theta{list(th.shape)} must be [N, 2, 3]")
    if size is not None and not a["output_shape"]:  # the attr wins when both are there, as in Paddle
        check(len(size.shape) == 1, f"affine_grid: OutputShape{list(size.shape)} must be 1-D [N, C, H, W]")
        return {"Output": Meta((th.shape[0], -1, -1, 2), th.dtype)}
    shape = ints("affine_grid", "output_shape", a["output_shape"], (4,))
    check(min(shape[2:]) > 0, f"affine_grid: output_shape {shape} must have a positive H and W")
    return {"Output": Meta((th.shape[0], shape[2], shape[3], 2), th.dtype)}


def _base_grid(xp, ins, a, dtype):
    """[H*W, 3] rows (x_w, y_h, 1) of NOTE(affine-grid); H, W from OutputShape or output_shape."""
    size = ins.get("OutputShape")
    h, w = a["output_shape"][2:4] if a["output_shape"] else [int(v) for v in size.tolist()[2:4]]

    def linspace(n):
        if n == 1:
            return xp.full(1, -1, dtype)
        return dtype.type(-1) + xp.arange(n).astype(dtype) * (dtype.type(2) / dtype.type(n - 1))

    ys, xs = linspace(h), linspace(w)
    base = xp.stack([xp.broadcast_to(xs[None, :], (h, w)), xp.broadcast_to(ys[:, None], (h, w)),
                     xp.ones((h, w), dtype)], axis=-1)
    return base.reshape(h * w, 3), h, w


_AFFINE_INS = ("Theta", Slot("OutputShape", dispensable=True, no_grad=True))
_AFFINE_ATTRS = {"output_shape": [], "use_cudnn": True}


@register("affine_grid", ins=_AFFINE_INS, outs=("Output",), attrs=_AFFINE_ATTRS, infer=_affine_infer,
          grad=grad_of(("Theta",), out="Output"))
def affine_grid(xp, ins, a, ctx):
    """Output [N, H, W, 2] = the (x, y) each output cell samples from, Theta [N, 2, 3] applied to
    the [-1, 1] grid of output_shape [N, C, H, W] (NOTE(affine-grid))."""
    th = ins["Theta"]
    base, h, w = _base_grid(xp, ins, a, th.dtype)
    return {"Output": xp.matmul(base, th.swapaxes(1, 2)).reshape(th.shape[0], h, w, 2)}


@register("affine_grid_grad", ins=_AFFINE_INS + ("Output@GRAD",), outs=("Theta@GRAD",), attrs=_AFFINE_ATTRS,
          role="backward")
def affine_grid_grad(xp, ins, a, ctx):
    th, g = ins["Theta"], ins["Output@GRAD"]
    base, _, _ = _base_grid(xp, ins, a, th.dtype)
    return {"Theta@GRAD": xp.matmul(g.reshape(g.shape[0], -1, 2).swapaxes(1, 2), base)}


# -- grid_sampler (NOTE(grid-sampler-1.8)) -----------------------------------------------------------


def _sampler_infer(ins, a):
    x, grid = ins["X"], ins["Grid"]
    _rank("grid_sampler", "X", x, 4, "[N, C, H, W]")
    _rank("grid_sampler", "Grid", grid, 4, "[N, H, W, 2]")
    check(x.dtype == grid.dtype, f"grid_sampler: X is {x.dtype} but Grid is {grid.dtype}")
    same = all(g < 0 or v < 0 or g == v for g, v in zip(grid.shape[:3], (x.shape[0],) + tuple(x.shape[2:])))
    check(grid.shape[3] == 2 and same, f"grid_sampler: Grid{list(grid.shape)} must be [N, H, W, 2] with "
                                       f"X{list(x.shape)}'s N, H and W (Fluid 1.8 samples to X's size)")
    return {"Output": x}


def _corners(xp, x, grid):
    """The four neighbours of each sampled point, in Paddle's order (wn, ws, en, es): their
    (valid, flat cell index) and weights, and d_w, d_e, d_n, d_s [N, H, W]."""
    n, c, h, w = x.shape
    one, half = grid.dtype.type(1), grid.dtype.type(0.5)
    gx = ((grid[..., 0] + one) * grid.dtype.type(w - 1)) * half
    gy = ((grid[..., 1] + one) * grid.dtype.type(h - 1)) * half
    x_w, y_n = xp.floor(gx), xp.floor(gy)
    x_e, y_s = x_w + one, y_n + one
    d = {"w": gx - x_w, "e": x_e - gx, "n": gy - y_n, "s": y_s - gy}
    corners = []
    for cx, cy, wx, wy in ((x_w, y_n, "e", "s"), (x_w, y_s, "e", "n"), (x_e, y_n, "w", "s"), (x_e, y_s, "w", "n")):
        ok = (cx >= 0) & (cx <= w - 1) & (cy >= 0) & (cy <= h - 1)
        cell = xp.where(ok, cy * w + cx, 0).astype(np.int64)
        corners.append((ok, cell, d[wx], d[wy]))
    return corners, d


def _values(xp, x, ok, cell):
    """X at each sampled neighbour [N, C, H, W]; 0 where it lies outside."""
    n, c = x.shape[:2]
    got = xp.take_along_axis(x.reshape(n, c, -1), cell.reshape(n, 1, -1), axis=2).reshape(x.shape)
    return xp.where(ok[:, None], got, xp.zeros((), x.dtype))


@register("grid_sampler", ins=("X", "Grid"), outs=("Output",), attrs={"use_cudnn": True}, infer=_sampler_infer,
          grad=grad_of(("X", "Grid"), out="Output"))
def grid_sampler(xp, ins, a, ctx):
    """Output [N, C, H, W] = X bilinearly sampled at Grid's (x, y) in [-1, 1], zeros outside
    (Fluid 1.8's kernel, NOTE(grid-sampler-1.8))."""
    x = ins["X"]
    (wn, ws, en, es), _ = _corners(xp, x, ins["Grid"])
    out = None
    for ok, cell, d1, d2 in (wn, en, ws, es):  # Paddle sums wn + en + ws + es
        term = _values(xp, x, ok, cell) * d1[:, None] * d2[:, None]
        out = term if out is None else out + term
    return {"Output": out}


@register("grid_sampler_grad", ins=("X", "Grid", "Output@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Grid@GRAD", dispensable=True)), attrs={"use_cudnn": True},
          role="backward")
def grid_sampler_grad(xp, ins, a, ctx):
    x, grid, g = ins["X"], ins["Grid"], ins["Output@GRAD"]
    n, c, h, w = x.shape
    corners, d = _corners(xp, x, grid)
    res = {}
    if "X@GRAD" in ctx.outputs:
        plane = (xp.arange(n * c) * (h * w)).reshape(n, c, 1, 1)
        flat = [xp.where(ok[:, None], cell[:, None] + plane, 0) for ok, cell, _, _ in corners]
        weights = [xp.where(ok[:, None], g * d1[:, None] * d2[:, None], 0) for ok, _, d1, d2 in corners]
        dx = xp.bincount(xp.concatenate([f.ravel() for f in flat]),
                         weights=xp.concatenate([v.ravel() for v in weights]), minlength=n * c * h * w)
        res["X@GRAD"] = dx.astype(x.dtype).reshape(x.shape)
    if "Grid@GRAD" in ctx.outputs:
        wn, ws, en, es = (_values(xp, x, ok, cell) for ok, cell, _, _ in corners)
        gx = (((en - wn) * d["s"][:, None] + (es - ws) * d["n"][:, None]) * g).sum(1)
        gy = (((ws - wn) * d["e"][:, None] + (es - en) * d["w"][:, None]) * g).sum(1)
        two = x.dtype.type(2)
        res["Grid@GRAD"] = xp.stack([gx * (x.dtype.type(w - 1) / two), gy * (x.dtype.type(h - 1) / two)], axis=-1)
    return res


# -- crop ---------------------------------------------------------------------------------------


def _crop_infer(ins, a):
    x, ref, offs = ins["X"], ins.get("Y"), ins.get("Offsets")
    rank = len(x.shape)
    check(1 <= rank <= 6, f"crop: X{list(x.shape)} must have 1 to 6 dims")
    if ref is not None:
        check(len(ref.shape) == rank, f"crop: Y{list(ref.shape)} must have X{list(x.shape)}'s rank {rank}")
        shape = list(ref.shape)
    else:
        shape = ints("crop", "shape", a["shape"], (rank,))
        check(all(s > 0 or (i == 0 and s == -1) for i, s in enumerate(shape)),
              f"crop: shape {shape} must be positive (-1 only in dim 0: X's batch)")
        if shape[0] == -1:
            shape[0] = x.shape[0]
    if offs is not None:
        check(not a["offsets"], f"crop: give the offsets as the Offsets input or the offsets attr, not both "
                                f"(attr {a['offsets']})")
        check(tuple(offs.shape) in ((rank,), (-1,)),
              f"crop: Offsets{list(offs.shape)} must be [{rank}], one per dim of X{list(x.shape)}")
    else:
        offsets = ints("crop", "offsets", a["offsets"], (rank,))
        for i, (o, s, n) in enumerate(zip(offsets, shape, x.shape)):
            check(o >= 0 and (n < 0 or s < 0 or o + s <= n),
                  f"crop: dim {i}: offset {o} + size {s} must fit X{list(x.shape)} (offsets {offsets}, shape {shape})")
    return {"Out": Meta(tuple(shape), x.dtype)}


def _crop_box(ins, a, out_shape):
    x, offs = ins["X"], ins.get("Offsets")
    offsets = [int(v) for v in offs.tolist()] if offs is not None else list(a["offsets"])
    if any(o < 0 or o + s > n for o, s, n in zip(offsets, out_shape, x.shape)):
        raise ValueError(f"crop: offsets {offsets} with the output shape {list(out_shape)} do not fit "
                         f"X{list(x.shape)}")
    return tuple(slice(o, o + s) for o, s in zip(offsets, out_shape))


_CROP_INS = ("X", Slot("Y", dispensable=True, no_grad=True), Slot("Offsets", dispensable=True, no_grad=True))


@register("crop", ins=_CROP_INS, outs=("Out",), attrs={"shape": [], "offsets": []}, infer=_crop_infer,
          grad=grad_of(("X",), uses=("X", "Offsets")))
def crop(xp, ins, a, ctx):
    """Out = the box of X at ``offsets`` (attr, or the Offsets input at run time) with the shape
    ``shape`` (dim 0 may be -1: X's) or Y's shape."""
    x, ref = ins["X"], ins.get("Y")
    shape = list(ref.shape) if ref is not None else [x.shape[0] if s == -1 else s for s in a["shape"]]
    return {"Out": xp.ascontiguousarray(x[_crop_box(ins, a, shape)])}


@register("crop_grad", ins=("X", Slot("Offsets", dispensable=True), "Out@GRAD"), outs=("X@GRAD",),
          attrs={"shape": [], "offsets": []}, role="backward")
def crop_grad(xp, ins, a, ctx):
    g = ins["Out@GRAD"]
    dx = xp.zeros(ins["X"].shape, g.dtype)
    dx[_crop_box(ins, a, g.shape)] = g
    return {"X@GRAD": dx}


# -- fsp ----------------------------------------------------------------------------------------


def _fsp_infer(ins, a):
    x, y = ins["X"], ins["Y"]
    _rank("fsp", "X", x, 4, "[N, C1, H, W]")
    _rank("fsp", "Y", y, 4, "[N, C2, H, W]")
    check(x.dtype == y.dtype, f"fsp: X is {x.dtype} but Y is {y.dtype}")
    same = all(p < 0 or q < 0 or p == q for i, (p, q) in enumerate(zip(x.shape, y.shape)) if i != 1)
    check(same, f"fsp: X{list(x.shape)} and Y{list(y.shape)} must share N, H and W")
    return {"Out": Meta((x.shape[0], x.shape[1], y.shape[1]), x.dtype)}


def _flat(v):
    return v.reshape(v.shape[0], v.shape[1], -1)


@register("fsp", ins=("X", "Y"), outs=("Out",), infer=_fsp_infer, grad=grad_of(("X", "Y")))
def fsp(xp, ins, a, ctx):
    """Out [N, C1, C2] = X [N, C1, H, W] · Y [N, C2, H, W] over the H*W cells, divided by H*W
    (the FSP matrix of knowledge distillation)."""
    x, y = ins["X"], ins["Y"]
    scale = x.dtype.type(1.0 / math.prod(x.shape[2:]))
    return {"Out": xp.matmul(_flat(x), _flat(y).swapaxes(1, 2)) * scale}


@register("fsp_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), role="backward")
def fsp_grad(xp, ins, a, ctx):
    x, y, g = ins["X"], ins["Y"], ins["Out@GRAD"]
    scale, res = x.dtype.type(1.0 / math.prod(x.shape[2:])), {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = (xp.matmul(g, _flat(y)) * scale).reshape(x.shape)
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = (xp.matmul(g.swapaxes(1, 2), _flat(x)) * scale).reshape(y.shape)
    return res


# -- similarity_focus (NOTE(similarity-focus)) ------------------------------------------------------


def _focus_infer(ins, a):
    x = ins["X"]
    _rank("similarity_focus", "X", x, 4, "[N, A, B, C]")
    axis, idx = a["axis"], a["indexes"]
    check(axis in (1, 2, 3), f"similarity_focus: axis must be 1, 2 or 3, got {axis!r}")
    check(isinstance(idx, (list, tuple)) and len(idx) > 0, f"similarity_focus: indexes must be a non-empty list, "
                                                           f"got {idx!r}")
    n = x.shape[axis]
    check(all(isinstance(i, int) and 0 <= i and (n < 0 or i < n) for i in idx),
          f"similarity_focus: indexes {list(idx)} must lie in [0, {n}) (X{list(x.shape)}'s dim {axis})")
    return {"Out": x}


@register("similarity_focus", ins=("X",), outs=("Out",), attrs={"axis": 1, "indexes": []}, infer=_focus_infer)
def similarity_focus(xp, ins, a, ctx):
    """Out = a 0/1 mask of X's shape: the greedy one-per-row-and-column picks of X's slices at
    ``indexes`` along ``axis``, spread along that axis (NOTE(similarity-focus)). No gradient."""
    x, axis = ins["X"], a["axis"]
    v = xp.moveaxis(x, axis, 1)[:, list(a["indexes"])]  # [N, K, A, B]
    n, k, rows, cols = v.shape
    flat = v.reshape(n, k, -1)
    free_r, free_c = xp.ones((n, k, rows), bool), xp.ones((n, k, cols), bool)
    taken = xp.zeros((n, k, rows * cols), bool)
    ninf, cells, r_ids, c_ids = xp.asarray(-np.inf, x.dtype), xp.arange(rows * cols), xp.arange(rows), xp.arange(cols)
    for _ in range(min(rows, cols)):
        free = (free_r[..., :, None] & free_c[..., None, :]).reshape(n, k, -1)
        vals = xp.where(free, flat, ninf)
        pick = xp.argmax(free & (vals == vals.max(-1, keepdims=True)), axis=-1)[..., None]
        taken |= cells == pick
        free_r &= r_ids != pick // cols
        free_c &= c_ids != pick % cols
    mask = taken.reshape(n, k, rows, cols).any(1)[:, None]
    return {"Out": xp.ascontiguousarray(xp.moveaxis(xp.broadcast_to(mask, (n, x.shape[axis], rows, cols)), 1, axis)
                                        .astype(x.dtype))}


# -- add_position_encoding ------------------------------------------------------------------------


def _encoding_infer(ins, a):
    x = ins["X"]
    _rank("add_position_encoding", "X", x, 3, "[N, L, E] (a LoD input is not supported)")
    check(x.shape[2] < 0 or x.shape[2] % 2 == 0, f"add_position_encoding: X{list(x.shape)}'s size E must be even")
    return {"Out": x}


def _f32(v: float) -> float:
    """An attr as Paddle's float attr holds it."""
    return float(np.float32(v))


@register("add_position_encoding", ins=("X",), outs=("Out",), attrs={"alpha": 1.0, "beta": 1.0},
          infer=_encoding_infer, grad=grad_of(("X",), uses=()))
def add_position_encoding(xp, ins, a, ctx):
    """Out = alpha * X + beta * PE for X [N, L, E]: PE[j, k] = sin(j / 10000^(k / (E/2 - 1))) in the
    first E/2 columns and the cos in the last E/2 (j / 10000 when E == 2), computed in float64
    and added to alpha * X (in X's dtype) before rounding, as Paddle's kernel does."""
    x = ins["X"]
    length, half = x.shape[1], x.shape[2] // 2
    j = xp.arange(length, dtype=np.float64)[:, None]
    rate = (10000.0 ** (xp.arange(half, dtype=np.float64) / (half - 1))) if half > 1 else xp.full(half, 10000.0)
    val = j / rate
    pe = xp.concatenate([xp.sin(val), xp.cos(val)], axis=1) * _f32(a["beta"])
    return {"Out": ((x * x.dtype.type(_f32(a["alpha"]))) + pe).astype(x.dtype)}


@register("add_position_encoding_grad", ins=("Out@GRAD",), outs=("X@GRAD",), attrs={"alpha": 1.0, "beta": 1.0},
          role="backward")
def add_position_encoding_grad(xp, ins, a, ctx):
    g = ins["Out@GRAD"]
    return {"X@GRAD": g * g.dtype.type(_f32(a["alpha"]))}
