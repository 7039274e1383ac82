"""OpCases for conv2d, depthwise_conv2d, conv2d_transpose (and its depthwise twin), pool2d,
max_pool2d_with_index and their 3-D twins conv3d, conv3d_transpose, pool3d and
max_pool3d_with_index; tests/op_cases.py gathers them.

The references are written from Fluid 1.8's definitions, not from ops/conv.py's tap
machinery: a convolution is a loop over output cells (each a dot of a window with the
filter), a transposed convolution scatters every input cell times the filter into the output,
and pooling walks Paddle's window bounds (hstart = o*stride - pad_top, clipped) one output
cell at a time; each reference serves 2-D and 3-D alike. Shapes stay tiny so the whole table
runs in a few seconds.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from placegroup.errors import ProgramError
from tests.op_case import N, OpCase, spec

FLT_MAX = float(np.finfo(np.float32).max)


def _same(n, s, k):
    """Paddle's SAME pads for one axis: out = ceil(n / s), split the missing sum top-first."""
    total = max((math.ceil(n / s) - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def _pads(a, sizes, k, s):
    """[lo, hi] per spatial axis, flattened ([top, bottom, left, right] in 2-D), of an op's attrs."""
    if a["padding_algorithm"] == "VALID":
        return [0] * (2 * len(sizes))
    if a["padding_algorithm"] == "SAME":
        return [p for n, ss, kk in zip(sizes, s, k) for p in _same(n, ss, kk)]
    p = list(a["paddings"])
    return [v for v in p for _ in (0, 1)] if len(p) == len(sizes) else p


def _cells(sizes):
    return itertools.product(*map(range, sizes))


def conv_ref(i, a):
    """A loop over output cells: each is a window of the padded input dotted with the filter."""
    x, w = i["Input"], i["Filter"]
    nd, (n, c, *sizes), (m, cg, *k) = x.ndim - 2, x.shape, w.shape
    s = a["strides"]
    d = [1] * nd if a["padding_algorithm"] == "SAME" else a["dilations"]
    p = _pads(a, sizes, k, s)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p[2 * j], p[2 * j + 1]) for j in range(nd)])
    out_sizes = [(sizes[j] + p[2 * j] + p[2 * j + 1] - d[j] * (k[j] - 1) - 1) // s[j] + 1 for j in range(nd)]
    out = np.zeros((n, m, *out_sizes), x.dtype)
    per = m // a["groups"]
    for o in range(m):
        ch = slice(o // per * cg, o // per * cg + cg)
        for cell in _cells(out_sizes):
            win = xp[(slice(None), ch) + tuple(slice(q * s[j], q * s[j] + d[j] * (k[j] - 1) + 1, d[j])
                                               for j, q in enumerate(cell))]
            out[(slice(None), o) + cell] = (win * w[o]).sum(axis=tuple(range(1, nd + 2)))
    return {"Output": out}


def conv_t_ref(i, a):
    """Every input cell times the filter, scattered into the (uncropped) output, then cropped."""
    x, w = i["Input"], i["Filter"]
    nd, (n, c, *sizes), (_, mg, *k) = x.ndim - 2, x.shape, w.shape
    g, s = a["groups"], a["strides"]
    d = [1] * nd if a["padding_algorithm"] == "SAME" else a["dilations"]
    p = _pads(a, sizes, k, s)
    full = np.zeros((n, mg * g, *((sizes[j] - 1) * s[j] + d[j] * (k[j] - 1) + 1 + 8 for j in range(nd))))
    for ci in range(c):
        gi = ci // (c // g)
        for cell in _cells(sizes):
            for t in _cells(k):
                at = tuple(q * s[j] + t[j] * d[j] for j, q in enumerate(cell))
                full[(slice(None), slice(gi * mg, (gi + 1) * mg)) + at] += \
                    x[(slice(None), ci) + cell][:, None] * w[(ci, slice(None)) + t][None, :]
    size = [a["output_size"][j] if a["output_size"] else (sizes[j] - 1) * s[j] - p[2 * j] - p[2 * j + 1]
            + d[j] * (k[j] - 1) + 1 for j in range(nd)]
    return {"Output": full[(slice(None), slice(None)) + tuple(slice(p[2 * j], p[2 * j] + size[j])
                                                              for j in range(nd))].astype(x.dtype)}


def _bounds(o, n, k, s, top, out, adaptive):
    if adaptive:
        return o * n // out, -(-(o + 1) * n // out)
    start = o * s - top
    return max(start, 0), min(start + k, n)


def pool_ref(i, a):
    """A loop over output cells, each pooling Paddle's clipped window (hstart = o*stride - pad_top)."""
    x = i["X"]
    nd, (n, c, *sizes) = x.ndim - 2, x.shape
    glob, adaptive, is_max = a["global_pooling"], a["adaptive"], a["pooling_type"] == "max"
    k = list(sizes) if glob else list(a["ksize"])
    s = a["strides"]
    p = [0] * (2 * nd) if glob or adaptive else _pads(a, sizes, k, s)
    if glob:
        out_sizes = [1] * nd
    elif adaptive:
        out_sizes = k
    else:
        extra = [ss - 1 if a["ceil_mode"] else 0 for ss in s]
        out_sizes = [(sizes[j] - k[j] + p[2 * j] + p[2 * j + 1] + extra[j]) // s[j] + 1 for j in range(nd)]
    win_adaptive = adaptive and not is_max  # Paddle's max kernel is run with adaptive=false
    out = np.zeros((n, c, *out_sizes), x.dtype)
    for cell in _cells(out_sizes):
        box = [_bounds(q, sizes[j], k[j], s[j], p[2 * j], out_sizes[j], win_adaptive) for j, q in enumerate(cell)]
        win = x[(slice(None), slice(None)) + tuple(slice(b, e) for b, e in box)]
        axes = tuple(range(2, nd + 2))
        if is_max:
            out[(slice(None), slice(None)) + cell] = win.max(axis=axes) if win.size else -FLT_MAX
        else:
            size = math.prod(e - b for b, e in box) if a["exclusive"] or adaptive else math.prod(k)
            out[(slice(None), slice(None)) + cell] = win.sum(axis=axes) / size
    return {"Out": out}


def max_index_ref(i, a):
    x = i["X"]
    nd, (n, c, *sizes) = x.ndim - 2, x.shape
    k = list(sizes) if a["global_pooling"] else list(a["ksize"])
    s, p = a["strides"], [0] * nd if a["global_pooling"] or a["adaptive"] else a["paddings"]
    out_sizes = k if a["adaptive"] else [(sizes[j] - k[j] + 2 * p[j]) // s[j] + 1 for j in range(nd)]
    out, mask = np.zeros((n, c, *out_sizes), x.dtype), np.zeros((n, c, *out_sizes), np.int32)
    for cell in _cells(out_sizes):
        box = [_bounds(q, sizes[j], k[j], s[j], p[j], out_sizes[j], a["adaptive"]) for j, q in enumerate(cell)]
        flat = x[(slice(None), slice(None)) + tuple(slice(b, e) for b, e in box)].reshape(n, c, -1)
        arg = flat.argmax(axis=2)  # the first maximum, as Paddle's strict '<'
        at = np.unravel_index(arg, [e - b for b, e in box])
        out[(slice(None), slice(None)) + cell] = flat.max(axis=2)
        mask[(slice(None), slice(None)) + cell] = np.ravel_multi_index([b + q for (b, _), q in zip(box, at)], sizes)
    return {"Out": out, "Mask": mask}


def distinct(r, *shape):
    """Values 0.05 apart in a random order: no ties, so max pooling is differentiable."""
    return (r.permutation(math.prod(shape)).reshape(shape) - math.prod(shape) / 2) * 0.05


def _conv(op, x, w, name, ref=conv_ref, errors=(), **attrs):
    return OpCase(op, lambda r: {"Input": N(r, *x), "Filter": N(r, *w)}, ref, attrs=attrs,
                  grad=("Input", "Filter"), name=name, errors=errors)


def _pool(x, name, ref=pool_ref, errors=(), op="pool2d", **attrs):
    return OpCase(op, lambda r: {"X": distinct(r, *x)}, ref, attrs=attrs, grad=("X",), name=name, errors=errors)


_CONV_ERRORS = (
    ({"Input": spec(2, 3, 5, 5), "Filter": spec(4, 2, 3, 3)}, {}, ProgramError, r"Input\[2, 3, 5, 5\] has 3 channels"),
    ({"Input": spec(2, 6, 5, 5), "Filter": spec(4, 2, 3, 3)}, {"groups": 3}, ProgramError,
     "do not split into groups=3"),
    ({"Input": spec(2, 3, 5), "Filter": spec(4, 3, 3, 3)}, {}, ProgramError, r"Input\[2, 3, 5\] must be 4-D"),
    ({"Input": spec(2, 3, 2, 2), "Filter": spec(4, 3, 3, 3)}, {}, ProgramError, "smaller than the dilated filter"),
    ({"Input": spec(2, 3, 5, 5), "Filter": spec(4, 3, 3, 3)}, {"data_format": "NHWC"}, ProgramError, "NCHW only"),
    ({"Input": spec(2, 3, 5, 5), "Filter": spec(4, 3, 3, 3)}, {"paddings": [1, 1, 1]}, ProgramError,
     "paddings must be a list of 2 or 4 ints"),
    ({"Input": spec(2, 3, 5, 5), "Filter": spec(4, 3, 3, 3)}, {"padding_algorithm": "FULL"}, ProgramError,
     "EXPLICIT, SAME or VALID"),
    ({"Input": spec(2, 3, 5, 5), "Filter": spec(4, 3, 3, 3, dtype="float64")}, {}, ProgramError,
     "Input is float32 but Filter is float64"),
)

_CONV3D_ERRORS = (
    ({"Input": spec(2, 3, 4, 4, 4), "Filter": spec(4, 2, 2, 2, 2)}, {}, ProgramError,
     r"Input\[2, 3, 4, 4, 4\] has 3 channels"),
    ({"Input": spec(2, 2, 4, 4), "Filter": spec(4, 2, 2, 2, 2)}, {}, ProgramError, r"must be 5-D \[N, C, D, H, W\]"),
    ({"Input": spec(2, 2, 4, 4, 4), "Filter": spec(4, 2, 2, 2, 2)}, {"strides": [1, 1]}, ProgramError,
     "strides must be a list of 3 ints"),
    ({"Input": spec(2, 2, 4, 4, 4), "Filter": spec(4, 2, 2, 2, 2)}, {"paddings": [1, 1, 1, 1]}, ProgramError,
     "paddings must be a list of 3 or 6 ints"),
    ({"Input": spec(2, 2, 4, 4, 4), "Filter": spec(4, 2, 2, 2, 2)}, {"data_format": "NDHWC"}, ProgramError,
     "NCDHW only"),
)

CASES: list[OpCase] = [
    _conv("conv2d", (2, 3, 6, 5), (4, 3, 3, 3), "basic", errors=_CONV_ERRORS),
    _conv("conv2d", (2, 3, 7, 6), (4, 3, 3, 2), "stride_pad2", strides=[2, 1], paddings=[1, 2]),
    _conv("conv2d", (2, 2, 7, 6), (3, 2, 3, 3), "pad4", strides=[2, 2], paddings=[1, 0, 2, 1]),
    _conv("conv2d", (1, 2, 7, 7), (3, 2, 3, 2), "dilation", dilations=[2, 3], paddings=[2, 1]),
    _conv("conv2d", (2, 4, 5, 5), (6, 2, 3, 3), "groups", groups=2, paddings=[1, 1]),
    _conv("conv2d", (1, 2, 7, 6), (3, 2, 3, 3), "same", strides=[2, 2], dilations=[2, 2], padding_algorithm="SAME"),
    _conv("conv2d", (1, 2, 6, 6), (2, 2, 2, 3), "valid", strides=[2, 1], paddings=[3, 3], padding_algorithm="VALID"),
    _conv("depthwise_conv2d", (2, 3, 6, 5), (6, 1, 3, 3), "", groups=3, strides=[2, 1], paddings=[1, 1],
          errors=(({"Input": spec(2, 4, 5, 5), "Filter": spec(8, 2, 3, 3)}, {"groups": 2}, ProgramError,
                   r"groups \(2\) must equal Input\[2, 4, 5, 5\]'s channels \(4\)"),)),
    _conv("conv2d_transpose", (2, 3, 4, 4), (3, 2, 3, 3), "basic", ref=conv_t_ref, errors=(
        ({"Input": spec(2, 3, 4, 4), "Filter": spec(2, 2, 3, 3)}, {}, ProgramError, "has 3 channels but Filter"),
        ({"Input": spec(2, 2, 3, 3), "Filter": spec(2, 3, 3, 3)}, {"strides": [2, 2], "paddings": [1, 1],
                                                                  "output_size": [7, 5]}, ProgramError,
         r"output_size \[7, 5\] must lie in \[5, 7\)"),
        ({"Input": spec(2, 3), "Filter": spec(3, 2, 3, 3)}, {}, ProgramError, "must be 4-D"))),
    _conv("conv2d_transpose", (2, 2, 3, 4), (2, 3, 3, 2), "stride_pad4_dilation", ref=conv_t_ref,
          strides=[2, 3], paddings=[1, 0, 0, 2], dilations=[1, 2]),
    _conv("conv2d_transpose", (2, 4, 3, 3), (4, 3, 2, 2), "groups", ref=conv_t_ref, groups=2, strides=[2, 2]),
    _conv("conv2d_transpose", (1, 2, 3, 3), (2, 3, 3, 3), "output_size", ref=conv_t_ref, strides=[2, 2],
          paddings=[1, 1], output_size=[6, 5]),
    _conv("conv2d_transpose", (1, 2, 5, 4), (2, 2, 3, 3), "same", ref=conv_t_ref, strides=[2, 2],
          dilations=[2, 1], padding_algorithm="SAME"),
    _conv("depthwise_conv2d_transpose", (2, 3, 4, 3), (3, 1, 3, 3), "", ref=conv_t_ref, groups=3, strides=[2, 2]),
    _pool((2, 3, 6, 6), "max", ksize=[2, 2], strides=[2, 2], errors=(
        ({"X": spec(2, 3, 6)}, {"ksize": [2, 2]}, ProgramError, r"X\[2, 3, 6\] must be 4-D"),
        ({"X": spec(2, 3, 6, 6)}, {"ksize": [2, 2], "pooling_type": "sum"}, ProgramError, "max or avg, got 'sum'"),
        ({"X": spec(2, 3, 6, 6)}, {}, ProgramError, "ksize must be a list of 2 ints"),
        ({"X": spec(2, 3, 2, 2)}, {"ksize": [4, 4]}, ProgramError, r"output size \[-1, -1\]; it must be positive"),
        ({"X": spec(2, 3, 6, 6)}, {"ksize": [2, 2], "data_format": "NHWC"}, ProgramError, "NCHW only"))),
    _pool((2, 2, 7, 6), "max_pad_stride", pooling_type="max", ksize=[3, 3], strides=[2, 2], paddings=[1, 1]),
    _pool((1, 2, 6, 7), "max_pad4", pooling_type="max", ksize=[3, 2], strides=[2, 2], paddings=[1, 0, 0, 2]),
    _pool((1, 2, 7, 6), "max_ceil", ksize=[3, 3], strides=[2, 2], ceil_mode=True),
    _pool((2, 2, 7, 6), "avg_exclusive", pooling_type="avg", ksize=[3, 3], strides=[2, 2], paddings=[1, 1]),
    _pool((2, 2, 7, 6), "avg_inclusive", pooling_type="avg", ksize=[3, 3], strides=[2, 2], paddings=[1, 1],
          exclusive=False),
    _pool((1, 2, 7, 6), "avg_ceil_inclusive", pooling_type="avg", ksize=[3, 3], strides=[2, 2], ceil_mode=True,
          exclusive=False),
    _pool((1, 2, 7, 6), "avg_ceil_exclusive", pooling_type="avg", ksize=[3, 3], strides=[2, 2], ceil_mode=True,
          paddings=[1, 0]),
    _pool((2, 3, 5, 4), "global_avg", pooling_type="avg", ksize=[1, 1], global_pooling=True, paddings=[1, 1]),
    _pool((2, 3, 5, 4), "global_max", ksize=[-1, -1], global_pooling=True),
    _pool((2, 2, 7, 5), "adaptive_avg", pooling_type="avg", ksize=[3, 2], adaptive=True),
    _pool((1, 2, 3, 5), "adaptive_avg_up", pooling_type="avg", ksize=[4, 7], adaptive=True),
    _pool((1, 2, 7, 5), "adaptive_max_as_paddle", pooling_type="max", ksize=[3, 2], adaptive=True),
    _pool((1, 2, 7, 6), "same", pooling_type="avg", ksize=[3, 2], strides=[2, 2], padding_algorithm="SAME"),
    _pool((1, 2, 7, 6), "valid", ksize=[3, 3], strides=[2, 2], paddings=[2, 2], padding_algorithm="VALID"),
    _pool((2, 2, 7, 5), "adaptive", op="max_pool2d_with_index", ref=max_index_ref, ksize=[3, 2], adaptive=True,
          errors=(({"X": spec(2, 3, 6)}, {"ksize": [2, 2]}, ProgramError, "must be 4-D"),
                  ({"X": spec(2, 3, 6, 6)}, {"ksize": [2, 2], "paddings": [0, 0, 1, 1]}, ProgramError,
                   "paddings must be a list of 2 ints"))),
    _pool((1, 2, 3, 2), "adaptive_up", op="max_pool2d_with_index", ref=max_index_ref, ksize=[5, 3], adaptive=True),
    _pool((2, 2, 7, 6), "pad_stride", op="max_pool2d_with_index", ref=max_index_ref, ksize=[3, 3],
          strides=[2, 2], paddings=[1, 1]),
    # -- 3-D (NCDHW) ----------------------------------------------------------------------------
    _conv("conv3d", (2, 2, 4, 5, 4), (3, 2, 2, 3, 2), "basic", errors=_CONV3D_ERRORS),
    _conv("conv3d", (1, 2, 5, 6, 5), (3, 2, 3, 3, 2), "stride_pad6", strides=[2, 2, 1],
          paddings=[1, 0, 2, 1, 0, 1]),
    _conv("conv3d", (1, 4, 4, 5, 5), (4, 2, 2, 2, 3), "groups_dilation", groups=2, dilations=[2, 1, 2],
          paddings=[1, 1, 1]),
    _conv("conv3d", (1, 2, 5, 4, 5), (2, 2, 3, 2, 3), "same", strides=[2, 2, 2], dilations=[2, 2, 2],
          padding_algorithm="SAME"),
    _conv("conv3d_transpose", (2, 2, 2, 3, 2), (2, 3, 2, 2, 3), "basic", ref=conv_t_ref, errors=(
        ({"Input": spec(2, 2, 3, 3), "Filter": spec(2, 3, 2, 2, 2)}, {}, ProgramError, r"must be 5-D \[N, C, D, H, W\]"),
        ({"Input": spec(2, 2, 3, 3, 3), "Filter": spec(2, 3, 2, 2, 2)}, {"output_size": [4, 4]}, ProgramError,
         "output_size must be a list of 3 ints"))),
    _conv("conv3d_transpose", (1, 4, 2, 3, 3), (4, 1, 3, 2, 2), "stride_pad_groups", ref=conv_t_ref, groups=2,
          strides=[2, 1, 2], paddings=[1, 0, 1], output_size=[4, 4, 5], data_format="NCHW"),
    _conv("conv3d_transpose", (1, 2, 3, 2, 3), (2, 2, 2, 3, 2), "same", ref=conv_t_ref, strides=[2, 2, 1],
          padding_algorithm="SAME"),
    _pool((2, 2, 4, 5, 4), "max", op="pool3d", ksize=[2, 2, 2], strides=[2, 2, 2], errors=(
        ({"X": spec(2, 3, 6, 6)}, {"ksize": [2, 2, 2]}, ProgramError, r"X\[2, 3, 6, 6\] must be 5-D"),
        ({"X": spec(2, 3, 4, 4, 4)}, {"ksize": [2, 2]}, ProgramError, "ksize must be a list of 3 ints"),
        ({"X": spec(2, 3, 4, 4, 4)}, {"ksize": [2, 2, 2], "data_format": "NDHWC"}, ProgramError, "NCDHW only"))),
    _pool((1, 2, 5, 4, 6), "max_pad_ceil", op="pool3d", ksize=[2, 3, 2], strides=[2, 2, 2], paddings=[0, 0, 1],
          ceil_mode=True),
    _pool((1, 2, 5, 5, 4), "avg_exclusive", op="pool3d", pooling_type="avg", ksize=[3, 3, 2], strides=[2, 2, 1],
          paddings=[1, 1, 0, 1, 1, 0]),
    _pool((1, 2, 5, 5, 4), "avg_inclusive", op="pool3d", pooling_type="avg", ksize=[3, 2, 3], strides=[2, 2, 2],
          paddings=[1, 1, 1], exclusive=False),
    _pool((2, 2, 3, 4, 3), "global_avg", op="pool3d", pooling_type="avg", ksize=[1, 1, 1], global_pooling=True),
    _pool((1, 2, 5, 4, 6), "adaptive_avg", op="pool3d", pooling_type="avg", ksize=[2, 3, 4], adaptive=True),
    _pool((1, 2, 5, 4, 6), "adaptive_max_as_paddle", op="pool3d", ksize=[2, 3, 2], adaptive=True),
    _pool((1, 2, 5, 4, 5), "same", op="pool3d", pooling_type="avg", ksize=[2, 3, 2], strides=[2, 2, 2],
          padding_algorithm="SAME"),
    _pool((2, 2, 5, 4, 5), "adaptive", op="max_pool3d_with_index", ref=max_index_ref, ksize=[2, 3, 2],
          adaptive=True, errors=(({"X": spec(2, 3, 6, 6)}, {"ksize": [2, 2, 2]}, ProgramError, "must be 5-D"),)),
    _pool((1, 2, 5, 5, 4), "pad_stride", op="max_pool3d_with_index", ref=max_index_ref, ksize=[3, 3, 2],
          strides=[2, 2, 2], paddings=[1, 1, 0]),
]
