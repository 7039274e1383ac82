"""OpCases for conv2d, depthwise_conv2d, conv2d_transpose (and its depthwise twin), pool2d and
max_pool2d_with_index; tests/op_cases.py gathers them.

The references are written from Fluid 1.8's definitions, not from ops/conv.py's tap
machinery: a convolution is a loop over output pixels (each a dot of a window with the
filter), a transposed convolution scatters every input pixel times the filter into the output,
and pooling walks Paddle's window bounds (hstart = o*stride - pad_top, clipped) one output
cell at a time. Shapes stay tiny so the whole table runs in a few seconds.
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.errors import ProgramError
from tests.op_case import N, OpCase, spec

FLT_MAX = float(np.finfo(np.float32).max)


def _same(n, s, k):
    """Paddle's SAME pads for one axis: out = ceil(n / s), split the missing sum top-first."""
    total = max((math.ceil(n / s) - 1) * s + k - n, 0)
    return total // 2, total - total // 2


def _pads(a, hw, k, s):
    """[top, bottom, left, right] of an op's attrs."""
    if a["padding_algorithm"] == "VALID":
        return [0, 0, 0, 0]
    if a["padding_algorithm"] == "SAME":
        return [*_same(hw[0], s[0], k[0]), *_same(hw[1], s[1], k[1])]
    p = a["paddings"]
    return [p[0], p[0], p[1], p[1]] if len(p) == 2 else list(p)


def conv_ref(i, a):
    x, w = i["Input"], i["Filter"]
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    s = a["strides"]
    d = [1, 1] if a["padding_algorithm"] == "SAME" else a["dilations"]
    t, b, l, r = _pads(a, (h, wd), (kh, kw), s)
    xp = np.pad(x, ((0, 0), (0, 0), (t, b), (l, r)))
    oh = (h + t + b - d[0] * (kh - 1) - 1) // s[0] + 1
    ow = (wd + l + r - d[1] * (kw - 1) - 1) // s[1] + 1
    out = np.zeros((n, m, oh, ow), x.dtype)
    per = m // a["groups"]
    for o in range(m):
        ch = slice(o // per * cg, o // per * cg + cg)
        for y in range(oh):
            for z in range(ow):
                rows = slice(y * s[0], y * s[0] + d[0] * (kh - 1) + 1, d[0])
                win = xp[:, ch, rows, z * s[1]:z * s[1] + d[1] * (kw - 1) + 1:d[1]]
                out[:, o, y, z] = (win * w[o]).sum(axis=(1, 2, 3))
    return {"Output": out}


def conv_t_ref(i, a):
    x, w = i["Input"], i["Filter"]
    n, c, h, wd = x.shape
    _, mg, kh, kw = w.shape
    g, s = a["groups"], a["strides"]
    d = [1, 1] if a["padding_algorithm"] == "SAME" else a["dilations"]
    t, b, l, r = _pads(a, (h, wd), (kh, kw), s)
    full = np.zeros((n, mg * g, (h - 1) * s[0] + d[0] * (kh - 1) + 1 + 8, (wd - 1) * s[1] + d[1] * (kw - 1) + 1 + 8))
    for ci in range(c):
        gi = ci // (c // g)
        for y in range(h):
            for z in range(wd):
                for p in range(kh):
                    for q in range(kw):
                        full[:, gi * mg:(gi + 1) * mg, y * s[0] + p * d[0], z * s[1] + q * d[1]] += \
                            x[:, ci, y, z][:, None] * w[ci, :, p, q][None, :]
    oh = a["output_size"][0] if a["output_size"] else (h - 1) * s[0] - t - b + d[0] * (kh - 1) + 1
    ow = a["output_size"][1] if a["output_size"] else (wd - 1) * s[1] - l - r + d[1] * (kw - 1) + 1
    return {"Output": full[:, :, t:t + oh, l:l + ow].astype(x.dtype)}


def _bounds(o, n, k, s, top, out, adaptive):
    if adaptive:
        return o * n // out, -(-(o + 1) * n // out)
    start = o * s - top
    return max(start, 0), min(start + k, n)


def pool_ref(i, a):
    x = i["X"]
    n, c, h, w = x.shape
    glob, adaptive, is_max = a["global_pooling"], a["adaptive"], a["pooling_type"] == "max"
    k = [h, w] if glob else list(a["ksize"])
    s = a["strides"]
    t, b, l, r = [0] * 4 if glob or adaptive else _pads(a, (h, w), k, s)
    if glob:
        oh = ow = 1
    elif adaptive:
        oh, ow = k
    else:
        extra = [s[0] - 1, s[1] - 1] if a["ceil_mode"] else [0, 0]
        oh, ow = (h - k[0] + t + b + extra[0]) // s[0] + 1, (w - k[1] + l + r + extra[1]) // s[1] + 1
    win_adaptive = adaptive and not is_max  # Paddle's max kernel is run with adaptive=false
    out = np.zeros((n, c, oh, ow), x.dtype)
    for y in range(oh):
        h0, h1 = _bounds(y, h, k[0], s[0], t, oh, win_adaptive)
        for z in range(ow):
            w0, w1 = _bounds(z, w, k[1], s[1], l, ow, win_adaptive)
            cell = x[:, :, h0:h1, w0:w1]
            if is_max:
                out[:, :, y, z] = cell.max(axis=(2, 3)) if cell.size else -FLT_MAX
            else:
                size = (h1 - h0) * (w1 - w0) if a["exclusive"] or adaptive else k[0] * k[1]
                out[:, :, y, z] = cell.sum(axis=(2, 3)) / size
    return {"Out": out}


def max_index_ref(i, a):
    x = i["X"]
    n, c, h, w = x.shape
    k = [h, w] if a["global_pooling"] else list(a["ksize"])
    s, p = a["strides"], [0, 0] if a["global_pooling"] or a["adaptive"] else a["paddings"]
    oh, ow = k if a["adaptive"] else ((h - k[0] + 2 * p[0]) // s[0] + 1, (w - k[1] + 2 * p[1]) // s[1] + 1)
    out, mask = np.zeros((n, c, oh, ow), x.dtype), np.zeros((n, c, oh, ow), np.int32)
    for y in range(oh):
        h0, h1 = _bounds(y, h, k[0], s[0], p[0], oh, a["adaptive"])
        for z in range(ow):
            w0, w1 = _bounds(z, w, k[1], s[1], p[1], ow, a["adaptive"])
            flat = x[:, :, h0:h1, w0:w1].reshape(n, c, -1)
            arg = flat.argmax(axis=2)  # the first maximum, as Paddle's strict '<'
            out[:, :, y, z] = flat.max(axis=2)
            mask[:, :, y, z] = (h0 + arg // (w1 - w0)) * w + w0 + arg % (w1 - w0)
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
]
