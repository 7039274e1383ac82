"""Pooling of Fluid 1.8 (pool_op.cc, max_pool_with_index_op.cc, math/pooling.cc): pool2d,
pool3d, max_pool2d_with_index, max_pool3d_with_index, and their gradients. Layout NCHW
(NCDHW for the 3-D ops); the 2-D and 3-D ops share every function below.

NOTE(pool-windows): output cell o of an axis pools input cells [o*stride - top, ... + k),
clipped to [0, in) (pooling.cc): the bottom/right padding only makes the output longer. The
output size is ``(in - k + top + bottom) // stride + 1`` (``+ stride - 1`` before the division
with ``ceil_mode``); ``padding_algorithm`` SAME/VALID sets the pads as for conv
(NOTE(conv-padding) in ops/conv.py, without the dilation); ``global_pooling`` makes k the
whole input and an ``adaptive`` op's output is ``ksize``, cell o pooling
[floor(o*in/out), ceil((o+1)*in/out)); both zero the pads. An avg divides by the cells the
window holds when ``exclusive`` or ``adaptive``, else by kh*kw (kd*kh*kw; padding counted,
even past the padding with ``ceil_mode``). Like conv, the kernels loop over the window taps
with one strided slice each (NOTE(conv-taps)): max pads with -FLT_MAX (an empty window gives
-FLT_MAX, as Paddle's), avg with 0. Adaptive avg is separable: ``Ah @ X @ Awᵀ`` with 0/1
window matrices Ah [out_h, in_h], Aw [out_w, in_w] (then ``Ad @`` along depth), and its
gradient the transposes.

NOTE(pool-inclusive): with ``exclusive=False`` the divisor is kh*kw for every window, also
one that ``ceil_mode`` (or an asymmetric padding) runs past the padding, as Fluid 1.8's
pooling.cc has it. Paddle >= 2.0 divides such a window by its part inside input + padding, so
there the two differ (tests/test_conv_layers.py leaves that one case out of its comparison).

NOTE(pool-max-grad): Paddle's CPU MaxPool2dGradFunctor (and MaxPool3dGradFunctor) gives each
window's gradient to the *first* input cell (row-major within the window) equal to the
window's max, and no other, so ties do not split or duplicate it; the kernel keeps a
per-output "found" mask across the taps in the same order. max_pool2d_with_index records that
cell (the first strictly greater value wins) in ``Mask`` as h*W + w (d*H*W + h*W + w in 3-D),
and its gradient adds dOut there.

NOTE(pool-adaptive-max): pool2d (and pool3d) with pooling_type "max" and ``adaptive`` runs
Paddle's max kernel, which is passed adaptive=false: the output is ``ksize`` but the windows are the
non-adaptive ones (stride ``strides``, no padding). We do the same, so a hand-built program
gets Paddle's numbers; fluid.layers.adaptive_pool2d/3d use max_pool2d/3d_with_index for
max, whose windows are adaptive.
"""
from __future__ import annotations

import itertools
import math
import operator

from placegroup.ops.conv import check_layout, ints, resolve_pads, taps
from placegroup.ops.registry import Meta, check, grad_of, register

FLT_MAX = 3.4028234663852886e38  # the initial value of Paddle's MaxPool (for float and double)


def _out_size(n: int, k: int, p0: int, p1: int, s: int, ceil: bool) -> int:
    return -1 if n < 0 else (n - k + p0 + p1 + (s - 1 if ceil else 0)) // s + 1


def pool_geometry(op: str, a, xshape, with_index: bool = False, nd: int = 2):
    """Check a pool op's input and attrs; return (ksize, strides, pads [lo, hi per axis], out_sizes)."""
    axes = "[N, C, H, W]" if nd == 2 else "[N, C, D, H, W]"
    check(len(xshape) == nd + 2, f"{op}: X{list(xshape)} must be {nd + 2}-D {axes}")
    sizes = list(xshape[2:])
    if not with_index:
        check_layout(op, a, nd)
        check(a["pooling_type"] in ("max", "avg"), f"{op}: pooling_type must be max or avg, got "
                                                   f"{a['pooling_type']!r}")
    glob, adaptive = a["global_pooling"], a["adaptive"]
    k = sizes if glob else ints(op, "ksize", a["ksize"], (nd,))
    s = ints(op, "strides", a["strides"], (nd,))
    check(min(s) > 0 and (glob or min(k) > 0), f"{op}: ksize {k} and strides {s} must be positive")
    if with_index:
        pads = [p for p in ints(op, "paddings", a["paddings"], (nd,)) for _ in (0, 1)]
    else:
        pads = resolve_pads(op, a, sizes, s, k)
    if glob or adaptive:
        pads = [0] * (2 * nd)
    if glob:
        out = [1] * nd
    elif adaptive:
        out = k
    else:
        ceil = not with_index and a["ceil_mode"]
        out = [_out_size(n, kk, pads[2 * i], pads[2 * i + 1], ss, ceil)
               for i, (n, kk, ss) in enumerate(zip(sizes, k, s))]
        check(all(o > 0 for o, n in zip(out, sizes) if n >= 0),
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


def _outer(arrays, op=operator.mul):
    """``op`` of per-axis 1-D arrays broadcast against each other: [len0, len1, ...]."""
    res = arrays[0]
    for a in arrays[1:]:
        res = op(res[..., None], a)
    return res


# -- regular windows: one strided slice per tap -----------------------------------------------


def _widths(x, k, s, pads, out):
    """(lo, hi) per axis that fit every window: the hi pads only lengthen the output
    (NOTE(pool-windows)), so they are what the last window needs."""
    return [(pads[2 * a], max(0, (out[a] - 1) * s[a] + k[a] - pads[2 * a] - n)) for a, n in enumerate(x.shape[2:])]


def _padded(xp, x, k, s, pads, out, value):
    return xp.pad(x, [(0, 0), (0, 0)] + _widths(x, k, s, pads, out), constant_values=value)


def _inside(xp, n: int, k: int, s: int, top: int, out: int):
    """[k, out] bools: whether tap i of output cell o reads an input cell (not padding)."""
    cell = xp.arange(out)[None, :] * s - top + xp.arange(k)[:, None]
    return (cell >= 0) & (cell < n)


def _avg_divisor(xp, x, k, s, pads, out, exclusive: bool):
    if not exclusive:
        return x.dtype.type(math.prod(k))
    spans = []
    for i, n in enumerate(x.shape[2:]):
        start, end = _windows(xp, n, k[i], s[i], pads[2 * i], out[i], False)
        spans.append(end - start)
    return _outer(spans).astype(x.dtype)


def _adaptive_matrices(xp, x, out):
    """0/1 window matrices [out, in] of the spatial axes (NOTE(pool-windows))."""
    mats = []
    for n, o in zip(x.shape[2:], out):
        start, end = _windows(xp, n, 0, 1, 0, o, True)
        cell = xp.arange(n)[None, :]
        mats.append(((cell >= start[:, None]) & (cell < end[:, None])).astype(x.dtype))
    return mats


def _adaptive_avg(xp, x, out, g=None):
    """Adaptive avg pooling of x (``g`` None), or its gradient for dOut ``g``: separable
    0/1 matrices along H and W, then along D in 3-D."""
    mats = _adaptive_matrices(xp, x, out)
    count = _outer([m.sum(1) for m in mats])
    nc, ah, aw = x.shape[:2], mats[-2], mats[-1]
    if g is None:
        y = xp.matmul(xp.matmul(ah, x), aw.T)
        if len(mats) == 3:
            y = xp.matmul(mats[0], y.reshape(*nc, x.shape[2], -1)).reshape(*nc, *out)
        return y / count
    g = g / count
    if len(mats) == 3:
        g = xp.matmul(mats[0].T, g.reshape(*nc, out[0], -1)).reshape(*nc, x.shape[2], *out[1:])
    return xp.matmul(xp.matmul(ah.T, g), aw)


def _pool(xp, x, a, k, s, pads, out):
    if a["pooling_type"] == "avg" and a["adaptive"]:
        return _adaptive_avg(xp, x, out)
    is_max = a["pooling_type"] == "max"
    xpad = _padded(xp, x, k, s, pads, out, -FLT_MAX if is_max else 0.0)
    acc = None
    for _, sl in taps(k, out, s, [1] * len(k)):
        v = xpad[sl]
        acc = v.copy() if acc is None else (xp.maximum(acc, v, out=acc) if is_max else xp.add(acc, v, out=acc))
    if is_max:
        return acc
    return acc / _avg_divisor(xp, x, k, s, pads, out, a["exclusive"])


def _pool_grad(xp, x, y, g, a, k, s, pads, out):
    if a["pooling_type"] == "avg" and a["adaptive"]:
        return _adaptive_avg(xp, x, out, g)
    is_max, sizes = a["pooling_type"] == "max", x.shape[2:]
    wid = _widths(x, k, s, pads, out)
    gpad = xp.zeros(x.shape[:2] + tuple(lo + n + hi for (lo, hi), n in zip(wid, sizes)), g.dtype)
    if is_max:  # NOTE(pool-max-grad)
        xpad = _padded(xp, x, k, s, pads, out, -FLT_MAX)
        inside = [_inside(xp, n, k[i], s[i], pads[2 * i], out[i]) for i, n in enumerate(sizes)]
        found = xp.zeros(y.shape, bool)
    else:
        g = g * (1 / _avg_divisor(xp, x, k, s, pads, out, a["exclusive"])).astype(g.dtype)
    zero = xp.zeros((), g.dtype)
    for idx, sl in taps(k, out, s, [1] * len(k)):
        view = gpad[sl]
        if is_max:
            hit = (xpad[sl] == y) & ~found & _outer([m[i] for m, i in zip(inside, idx)], operator.and_)
            found |= hit
            view += xp.where(hit, g, zero)
        else:
            view += g
    return xp.ascontiguousarray(gpad[(slice(None), slice(None)) + tuple(slice(lo, lo + n)
                                                                        for (lo, _), n in zip(wid, sizes))])


# -- pool2d, pool3d ---------------------------------------------------------------------------


def _register_pool(op: str, nd: int) -> None:
    attrs = {"pooling_type": "max", "ksize": [], "global_pooling": False, "strides": [1] * nd,
             "paddings": [0] * nd, "exclusive": True, "adaptive": False, "ceil_mode": False,
             "padding_algorithm": "EXPLICIT", "data_format": "NCHW" if nd == 2 else "NCDHW", "use_cudnn": False}

    def infer(ins, a):
        x = ins["X"]
        _, _, _, out = pool_geometry(op, a, x.shape, nd=nd)
        return {"Out": Meta((x.shape[0], x.shape[1], *out), x.dtype)}

    @register(op, ins=("X",), outs=("Out",), attrs=attrs, infer=infer, grad=grad_of(("X",), outs=("Out",)))
    def forward(xp, ins, a, ctx):
        x = ins["X"]
        return {"Out": _pool(xp, x, a, *pool_geometry(op, a, x.shape, nd=nd))}

    @register(op + "_grad", ins=("X", "Out", "Out@GRAD"), outs=("X@GRAD",), attrs=attrs, role="backward")
    def backward(xp, ins, a, ctx):
        x = ins["X"]
        return {"X@GRAD": _pool_grad(xp, x, ins["Out"], ins["Out@GRAD"], a, *pool_geometry(op, a, x.shape, nd=nd))}

    layout = "[N, C, H, W]" if nd == 2 else "[N, C, D, H, W]"
    forward.__doc__ = (f"Out = the max or average of each ksize window of X {layout} (NOTE(pool-windows), "
                       f"NOTE(pool-adaptive-max)).")


# -- max_pool2d_with_index, max_pool3d_with_index -------------------------------------------------


def _max_with_index(xp, x, k, s, pads, out, adaptive: bool):
    """(Out, Mask) of NOTE(pool-max-grad): one gather per window offset, adaptive windows or not."""
    sizes = x.shape[2:]
    bounds = [_windows(xp, n, k[i], s[i], pads[2 * i], out[i], adaptive) for i, n in enumerate(sizes)]
    flat_stride = [math.prod(sizes[i + 1:]) for i in range(len(sizes))]
    best = xp.full(x.shape[:2] + tuple(out), -FLT_MAX, x.dtype)
    mask = xp.full(best.shape, -1, "int32")
    for idx in itertools.product(*(range(int((e - b).max())) for b, e in bounds)):
        cells = [xp.minimum(b + i, n - 1) for (b, _), i, n in zip(bounds, idx, sizes)]
        valid = _outer([b + i < e for (b, e), i in zip(bounds, idx)], operator.and_)
        v = x[(slice(None), slice(None)) + tuple(_outer_index(cells))]
        hit = (v > best) & valid
        best = xp.where(hit, v, best)
        mask = xp.where(hit, _outer([c * st for c, st in zip(cells, flat_stride)], operator.add).astype("int32"),
                        mask)
    return best, mask


def _outer_index(arrays):
    """Per-axis index arrays shaped to broadcast into an open mesh (``np.ix_``)."""
    nd = len(arrays)
    return [a.reshape([-1 if i == j else 1 for j in range(nd)]) for i, a in enumerate(arrays)]


def _register_index(op: str, nd: int) -> None:
    attrs = {"ksize": [], "global_pooling": False, "strides": [1] * nd, "paddings": [0] * nd, "adaptive": False}

    def infer(ins, a):
        x = ins["X"]
        _, _, _, out = pool_geometry(op, a, x.shape, with_index=True, nd=nd)
        shape = (x.shape[0], x.shape[1], *out)
        return {"Out": Meta(shape, x.dtype), "Mask": Meta(shape, "int32")}

    @register(op, ins=("X",), outs=("Out", "Mask"), attrs=attrs, infer=infer,
              grad=grad_of(("X",), uses=("X",), outs=("Mask",)))
    def forward(xp, ins, a, ctx):
        x = ins["X"]
        k, s, pads, out = pool_geometry(op, a, x.shape, with_index=True, nd=nd)
        best, mask = _max_with_index(xp, x, k, s, pads, out, a["adaptive"])
        return {"Out": best, "Mask": mask}

    @register(op + "_grad", ins=("X", "Mask", "Out@GRAD"), outs=("X@GRAD",), attrs=attrs, role="backward")
    def backward(xp, ins, a, ctx):
        # X@GRAD[mask] += dOut, duplicates summed: a bincount over the flat (n, c, cell) index
        x, mask, g = ins["X"], ins["Mask"], ins["Out@GRAD"]
        nc, cells = x.shape[0] * x.shape[1], math.prod(x.shape[2:])
        plane = (xp.arange(nc) * cells).reshape(x.shape[:2] + (1,) * nd)
        hit = mask >= 0
        flat = xp.where(hit, mask + plane, 0).ravel()
        dx = xp.bincount(flat, weights=xp.where(hit, g, 0).ravel(), minlength=nc * cells)
        return {"X@GRAD": dx.astype(x.dtype).reshape(x.shape)}

    cell = "h*W + w" if nd == 2 else "d*H*W + h*W + w"
    forward.__doc__ = (f"Out = the max of each window of X, Mask = where it is ({cell}, the first of equal "
                       f"maxima); adaptive windows when ``adaptive`` (NOTE(pool-windows), NOTE(pool-max-grad)).")


for _nd in (2, 3):
    _register_pool(f"pool{_nd}d", _nd)
    _register_index(f"max_pool{_nd}d_with_index", _nd)
