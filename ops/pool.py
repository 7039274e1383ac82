"""Pooling of Fluid 1.8 (pool_op.cc, max_pool_with_index_op.cc, math/pooling.cc): pool2d and
max_pool2d_with_index, and their gradients. Layout NCHW.

NOTE(pool-windows): output cell o of an axis pools input cells [o*stride - top, ... + k),
clipped to [0, in) (pooling.cc): the bottom/right padding only makes the output longer. The
output size is ``(in - k + top + bottom) // stride + 1`` (``+ stride - 1`` before the division
with ``ceil_mode``); ``padding_algorithm`` SAME/VALID sets the pads as for conv
(NOTE(conv-padding) in ops/conv.py, without the dilation); ``global_pooling`` makes k the
whole input and an ``adaptive`` op's output is ``ksize``, cell o pooling
[floor(o*in/out), ceil((o+1)*in/out)); both zero the pads. An avg divides by the cells the
window holds when ``exclusive`` or ``adaptive``, else by kh*kw (padding counted, even past
the padding with ``ceil_mode``). Like conv, the kernels loop over the kh*kw window taps with
one strided slice each (NOTE(conv-taps)): max pads with -FLT_MAX (an empty window gives
-FLT_MAX, as Paddle's), avg with 0. Adaptive avg is separable: ``Ah @ X @ Awᵀ`` with 0/1
window matrices Ah [out_h, in_h], Aw [out_w, in_w], and its gradient the transposes.

NOTE(pool-inclusive): with ``exclusive=False`` the divisor is kh*kw for every window, also
one that ``ceil_mode`` (or an asymmetric padding) runs past the padding, as Fluid 1.8's
pooling.cc has it. Paddle >= 2.0 divides such a window by its part inside input + padding, so
there the two differ (tests/test_conv_layers.py leaves that one case out of its comparison).

NOTE(pool-max-grad): Paddle's CPU MaxPool2dGradFunctor gives each window's gradient to the
*first* input cell (row-major within the window) equal to the window's max, and no other, so
ties do not split or duplicate it; the kernel keeps a per-output "found" mask across the taps
in the same order. max_pool2d_with_index records that cell (the first strictly greater value
wins) in ``Mask`` as h*W + w, and its gradient adds dOut there.

NOTE(pool-adaptive-max): pool2d with pooling_type "max" and ``adaptive`` runs Paddle's max
kernel, which is passed adaptive=false: the output is ``ksize`` but the windows are the
non-adaptive ones (stride ``strides``, no padding). We do the same, so a hand-built program
gets Paddle's numbers; fluid.layers.adaptive_pool2d uses max_pool2d_with_index for max, whose
windows are adaptive.
"""
from __future__ import annotations

from placegroup.ops.conv import check_layout, ints, resolve_pads
from placegroup.ops.registry import Meta, check, grad_of, register

FLT_MAX = 3.4028234663852886e38  # the initial value of Paddle's MaxPool (for float and double)


def _out_size(n: int, k: int, p0: int, p1: int, s: int, ceil: bool) -> int:
    return -1 if n < 0 else (n - k + p0 + p1 + (s - 1 if ceil else 0)) // s + 1


def pool_geometry(op: str, a, xshape, with_index: bool = False):
    """Check a pool op's input and attrs; return (ksize, strides, pads [t, b, l, r], out_hw)."""
    check(len(xshape) == 4, f"{op}: X{list(xshape)} must be 4-D [N, C, H, W]")
    hw = list(xshape[2:])
    if not with_index:
        check_layout(op, a)
        check(a["pooling_type"] in ("max", "avg"), f"{op}: pooling_type must be max or avg, got "
                                                   f"{a['pooling_type']!r}")
    glob, adaptive = a["global_pooling"], a["adaptive"]
    k = hw if glob else ints(op, "ksize", a["ksize"])
    s = ints(op, "strides", a["strides"])
    check(min(s) > 0 and (glob or min(k) > 0), f"{op}: ksize {k} and strides {s} must be positive")
    if with_index:
        pads = ints(op, "paddings", a["paddings"])
        pads = [pads[0], pads[0], pads[1], pads[1]]
    else:
        pads = resolve_pads(op, a, hw, s, k)
    if glob or adaptive:
        pads = [0, 0, 0, 0]
    if glob:
        out = [1, 1]
    elif adaptive:
        out = k
    else:
        ceil = not with_index and a["ceil_mode"]
        out = [_out_size(n, kk, pads[2 * i], pads[2 * i + 1], ss, ceil) for i, (n, kk, ss) in enumerate(zip(hw, k, s))]
        check(all(o > 0 for o, n in zip(out, hw) if n >= 0),
              f"{op}: X{list(xshape)} with ksize {k}, strides {s}, paddings {pads} gives the output size {out}; "
              f"it must be positive")
    return k, s, pads, out


def _windows(xp, n: int, k: int, s: int, top: int, out: int, adaptive: bool):
    """Per output cell of one axis: (start, end) of its window, clipped to [0, n) (NOTE(pool-windows))."""
    o = xp.arange(out)
    if adaptive:
        return (o * n) // out, -((-(o + 1) * n) // out)
    start = o * s - top
    return xp.maximum(start, 0), xp.minimum(start + k, n)


# -- regular windows: one strided slice per tap -----------------------------------------------


def _widths(x, k, s, pads, out):
    """(top, bottom, left, right) that fit every window: the bottom and right pads only
    lengthen the output (NOTE(pool-windows)), so they are what the last window needs."""
    t, l = pads[0], pads[2]
    return (t, max(0, (out[0] - 1) * s[0] + k[0] - t - x.shape[2]),
            l, max(0, (out[1] - 1) * s[1] + k[1] - l - x.shape[3]))


def _padded(xp, x, k, s, pads, out, value):
    t, b, l, r = _widths(x, k, s, pads, out)
    return xp.pad(x, ((0, 0), (0, 0), (t, b), (l, r)), constant_values=value)


def _tap(xpad, i: int, j: int, s, out):
    return xpad[:, :, i:i + s[0] * (out[0] - 1) + 1:s[0], j:j + s[1] * (out[1] - 1) + 1:s[1]]


def _inside(xp, n: int, k: int, s: int, top: int, out: int):
    """[k, out] bools: whether tap i of output cell o reads an input cell (not padding)."""
    cell = xp.arange(out)[None, :] * s - top + xp.arange(k)[:, None]
    return (cell >= 0) & (cell < n)


def _avg_divisor(xp, x, k, s, pads, out, exclusive: bool):
    if not exclusive:
        return x.dtype.type(k[0] * k[1])
    (h0, h1), (w0, w1) = (_windows(xp, x.shape[2 + i], k[i], s[i], pads[2 * i], out[i], False) for i in (0, 1))
    return ((h1 - h0)[:, None] * (w1 - w0)[None, :]).astype(x.dtype)


def _pool(xp, x, a, k, s, pads, out):
    if a["pooling_type"] == "avg" and a["adaptive"]:
        ah, aw = _adaptive_matrices(xp, x, out)
        return xp.matmul(xp.matmul(ah, x), aw.T) / (ah.sum(1)[:, None] * aw.sum(1)[None, :])
    is_max = a["pooling_type"] == "max"
    xpad = _padded(xp, x, k, s, pads, out, -FLT_MAX if is_max else 0.0)
    acc = None
    for i in range(k[0]):
        for j in range(k[1]):
            v = _tap(xpad, i, j, s, out)
            acc = v.copy() if acc is None else (xp.maximum(acc, v, out=acc) if is_max else xp.add(acc, v, out=acc))
    if is_max:
        return acc
    return acc / _avg_divisor(xp, x, k, s, pads, out, a["exclusive"])


def _pool_grad(xp, x, y, g, a, k, s, pads, out):
    if a["pooling_type"] == "avg" and a["adaptive"]:
        ah, aw = _adaptive_matrices(xp, x, out)
        return xp.matmul(xp.matmul(ah.T, g / (ah.sum(1)[:, None] * aw.sum(1)[None, :])), aw)
    is_max = a["pooling_type"] == "max"
    t, b, l, r = _widths(x, k, s, pads, out)
    gpad = xp.zeros(x.shape[:2] + (t + x.shape[2] + b, l + x.shape[3] + r), g.dtype)
    if is_max:  # NOTE(pool-max-grad)
        xpad = _padded(xp, x, k, s, pads, out, -FLT_MAX)
        in_h = _inside(xp, x.shape[2], k[0], s[0], pads[0], out[0])
        in_w = _inside(xp, x.shape[3], k[1], s[1], pads[2], out[1])
        found = xp.zeros(y.shape, bool)
    else:
        g = g * (1 / _avg_divisor(xp, x, k, s, pads, out, a["exclusive"])).astype(g.dtype)
    zero = xp.zeros((), g.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            view = _tap(gpad, i, j, s, out)
            if is_max:
                hit = (_tap(xpad, i, j, s, out) == y) & ~found & (in_h[i][:, None] & in_w[j][None, :])
                found |= hit
                view += xp.where(hit, g, zero)
            else:
                view += g
    return xp.ascontiguousarray(gpad[:, :, t:t + x.shape[2], l:l + x.shape[3]])


def _adaptive_matrices(xp, x, out):
    """0/1 window matrices [out, in] of the two axes (NOTE(pool-windows))."""
    mats = []
    for axis in (0, 1):
        n = x.shape[2 + axis]
        start, end = _windows(xp, n, 0, 1, 0, out[axis], True)
        cell = xp.arange(n)[None, :]
        mats.append(((cell >= start[:, None]) & (cell < end[:, None])).astype(x.dtype))
    return mats


# -- pool2d -----------------------------------------------------------------------------------

_POOL_ATTRS = {"pooling_type": "max", "ksize": [], "global_pooling": False, "strides": [1, 1],
               "paddings": [0, 0], "exclusive": True, "adaptive": False, "ceil_mode": False,
               "padding_algorithm": "EXPLICIT", "data_format": "NCHW", "use_cudnn": False}


def _pool_infer(ins, a):
    x = ins["X"]
    _, _, _, out = pool_geometry("pool2d", a, x.shape)
    return {"Out": Meta((x.shape[0], x.shape[1], *out), x.dtype)}


@register("pool2d", ins=("X",), outs=("Out",), attrs=_POOL_ATTRS, infer=_pool_infer,
          grad=grad_of(("X",), outs=("Out",)))
def pool2d(xp, ins, a, ctx):
    """Out = the max or average of each ksize window of X [N, C, H, W] (NOTE(pool-windows),
    NOTE(pool-adaptive-max))."""
    x = ins["X"]
    return {"Out": _pool(xp, x, a, *pool_geometry("pool2d", a, x.shape))}


@register("pool2d_grad", ins=("X", "Out", "Out@GRAD"), outs=("X@GRAD",), attrs=_POOL_ATTRS, role="backward")
def pool2d_grad(xp, ins, a, ctx):
    x = ins["X"]
    return {"X@GRAD": _pool_grad(xp, x, ins["Out"], ins["Out@GRAD"], a, *pool_geometry("pool2d", a, x.shape))}


# -- max_pool2d_with_index ----------------------------------------------------------------------

_INDEX_ATTRS = {"ksize": [], "global_pooling": False, "strides": [1, 1], "paddings": [0, 0], "adaptive": False}


def _index_infer(ins, a):
    x = ins["X"]
    _, _, _, out = pool_geometry("max_pool2d_with_index", a, x.shape, with_index=True)
    shape = (x.shape[0], x.shape[1], *out)
    return {"Out": Meta(shape, x.dtype), "Mask": Meta(shape, "int32")}


@register("max_pool2d_with_index", ins=("X",), outs=("Out", "Mask"), attrs=_INDEX_ATTRS, infer=_index_infer,
          grad=grad_of(("X",), uses=("X",), outs=("Mask",)))
def max_pool2d_with_index(xp, ins, a, ctx):
    """Out = the max of each window of X, Mask = where it is (h*W + w, the first of equal maxima);
    adaptive windows when ``adaptive`` (NOTE(pool-windows), NOTE(pool-max-grad))."""
    x = ins["X"]
    k, s, pads, out = pool_geometry("max_pool2d_with_index", a, x.shape, with_index=True)
    h, w = x.shape[2:]
    (h0, h1), (w0, w1) = (_windows(xp, x.shape[2 + i], k[i], s[i], pads[2 * i], out[i], a["adaptive"])
                          for i in (0, 1))
    best = xp.full(x.shape[:2] + tuple(out), -FLT_MAX, x.dtype)
    mask = xp.full(best.shape, -1, "int32")
    for i in range(int((h1 - h0).max())):
        rows = xp.minimum(h0 + i, h - 1)
        picked = x[:, :, rows]
        for j in range(int((w1 - w0).max())):
            cols = xp.minimum(w0 + j, w - 1)
            v = picked[:, :, :, cols]
            hit = (v > best) & ((h0 + i < h1)[:, None] & (w0 + j < w1)[None, :])
            best = xp.where(hit, v, best)
            mask = xp.where(hit, (rows[:, None] * w + cols[None, :]).astype("int32"), mask)
    return {"Out": best, "Mask": mask}


@register("max_pool2d_with_index_grad", ins=("X", "Mask", "Out@GRAD"), outs=("X@GRAD",), attrs=_INDEX_ATTRS,
          role="backward")
def max_pool2d_with_index_grad(xp, ins, a, ctx):
    # X@GRAD[mask] += dOut, duplicates summed: a bincount over the flat (n, c, h*W + w) index
    x, mask, g = ins["X"], ins["Mask"], ins["Out@GRAD"]
    n, c, h, w = x.shape
    plane = (xp.arange(n * c) * (h * w)).reshape(n, c, 1, 1)
    hit = mask >= 0
    flat = xp.where(hit, mask + plane, 0).ravel()
    dx = xp.bincount(flat, weights=xp.where(hit, g, 0).ravel(), minlength=n * c * h * w)
    return {"X@GRAD": dx.astype(x.dtype).reshape(x.shape)}

