"""Convolutions of Fluid 1.8 (conv_op.cc, conv_transpose_op.cc): conv2d, depthwise_conv2d,
conv2d_transpose, depthwise_conv2d_transpose, conv3d, conv3d_transpose, and their gradients.
Layout NCHW (NCDHW for the 3-D ops).

Input is [N, C, *spatial] with two spatial axes (H, W) or three (D, H, W). A convolution's
Filter is [M, C/groups, *k] and gives M output channels; a transposed convolution's Filter is
[C, M/groups, *k]. With ``groups`` g the channels split into g equal parts and part k of the
output sees only part k of the input. The depthwise ops are the same maths with groups == C
(Fluid picks them when cuDNN is off). The 2-D and 3-D ops share every function below: only
the number of spatial axes differs.

NOTE(conv-taps): every kernel is a loop over the filter taps (kh*kw, or kd*kh*kw), never over
the batch or the pixels. Tap (i, j) reads the zero-padded input at rows ``i*dh + sh*oh`` and
columns ``j*dw + sw*ow`` (and likewise along depth): one strided slice, so the output is
``Σ_taps W[:, :, i, j] @ slice`` with one matmul per tap, batched over the groups. Inside,
arrays are channels-first ([C, N, H, W], so a tap's slice is a [g, C/g, N*oh*ow] matrix and
each matmul is one large GEMM per group; a depthwise filter's is a broadcast product). The
gradients read the same slices backwards: the input gradient adds ``W[:, :, i, j]ᵀ @ dOut``
into the tap's slice of a zero buffer (one tap's slice holds each cell once, so ``+=`` on the
view is safe), the filter gradient is ``dOut @ sliceᵀ`` summed over the batch. A transposed
convolution is the adjoint of the convolution whose filter is its own read as [C, M/g]: its
output is that conv's input gradient, its input gradient is that conv, its filter gradient
that conv's filter gradient with input and output swapped. Memory stays O(input + output): no
im2col buffer. Taps run in row-major order, so the 2-D sums are those of the 2-D-only kernels
this generalises (same numbers, bit for bit).

NOTE(conv-padding): ``paddings`` is one per spatial axis (both sides) or two per axis
([top, bottom, left, right]; [front, back, top, bottom, left, right] in 3-D).
``padding_algorithm`` "SAME" replaces them as Paddle's UpdatePaddingAndDilation does: per
axis out = ceil(in / stride), pad_sum = max((out - 1)*stride + k - in, 0), top = pad_sum // 2,
bottom the rest, *and the dilation becomes 1*; "VALID" zeroes them. A conv's output size is
``(in + top + bottom - (d*(k-1) + 1)) // stride + 1`` and must be positive; a transposed
conv's is ``(in - 1)*stride - top - bottom + d*(k-1) + 1``, or ``output_size`` when given,
which must lie in [that, that + stride). SAME for a transposed conv reads its input's size.
``use_cudnn`` is accepted and ignored; only channels-first layouts run (NCHW, NCDHW, and
Fluid's "AnyLayout"; conv3d_transpose's layout is "NCHW" by default and in what
fluid.layers.conv3d_transpose writes for NCDHW, as in 1.8).
"""
from __future__ import annotations

import functools
import itertools

from placegroup.ops.registry import Meta, Slot, check, grad_of, register

LAYOUTS = {2: ("NCHW", "AnyLayout"), 3: ("NCDHW", "NCHW", "AnyLayout")}
_FIRST = {2: "NCHW", 3: "NCDHW"}


def ints(op: str, name: str, value, sizes=(2,)) -> list:
    """Attr ``name`` as a list of ints, its length one of ``sizes`` (ProgramError otherwise)."""
    ok = isinstance(value, (list, tuple)) and len(value) in sizes and all(
        isinstance(v, int) or getattr(v, "dtype", None) is not None and v.dtype.kind in "iu" for v in value)
    check(ok, f"{op}: attr {name} must be a list of {' or '.join(map(str, sizes))} ints, got {value!r}")
    return [int(v) for v in value]


def check_layout(op: str, a, nd: int = 2) -> None:
    check(a["data_format"] in LAYOUTS[nd], f"{op}: data_format {a['data_format']!r} is not supported; placegroup "
                                           f"runs {_FIRST[nd]} only (transpose the input to "
                                           f"[N, C, {', '.join('DHW'[3 - nd:])}])")


def resolve_pads(op: str, a, in_sizes, strides, ksize) -> list:
    """[lo, hi] per spatial axis, flattened ([top, bottom, left, right] in 2-D), after
    ``padding_algorithm`` (NOTE(conv-padding))."""
    alg, nd = a["padding_algorithm"], len(in_sizes)
    check(alg in ("EXPLICIT", "SAME", "VALID"),
          f"{op}: padding_algorithm must be EXPLICIT, SAME or VALID, got {alg!r}")
    p = ints(op, "paddings", a["paddings"], (nd, 2 * nd))
    check(min(p) >= 0, f"{op}: paddings {p} must be >= 0")
    if alg == "VALID":
        return [0] * (2 * nd)
    if alg == "EXPLICIT":
        return [v for v in p for _ in (0, 1)] if len(p) == nd else p
    pads = []
    for n, s, k in zip(in_sizes, strides, ksize):
        total = 0 if n < 0 else max((-(-n // s) - 1) * s + k - n, 0)
        pads += [total // 2, total - total // 2]
    return pads


def conv_geometry(op: str, a, xshape, fshape, transpose: bool = False, nd: int = 2):
    """Check a conv op's shapes and attrs; return (strides, dilations, pads, out_sizes, out_channels).

    ``nd`` is the number of spatial axes (2 or 3). ``-1`` in Input's shape (an unknown batch,
    or size) gives ``-1`` in the output's.
    """
    axes = "[N, C, H, W]" if nd == 2 else "[N, C, D, H, W]"
    check(len(xshape) == nd + 2, f"{op}: Input{list(xshape)} must be {nd + 2}-D {axes}")
    check(len(fshape) == nd + 2, f"{op}: Filter{list(fshape)} must be {nd + 2}-D")
    check_layout(op, a, nd)
    s, d = ints(op, "strides", a["strides"], (nd,)), ints(op, "dilations", a["dilations"], (nd,))
    check(min(s) > 0 and min(d) > 0, f"{op}: strides {s} and dilations {d} must be positive")
    g = a["groups"]
    check(isinstance(g, int) and g >= 1, f"{op}: groups must be an int >= 1, got {g!r}")
    c, k = xshape[1], list(fshape[2:])
    kdims = "k" + ", k".join("dhw"[3 - nd:])
    if transpose:
        check(c in (-1, fshape[0]), f"{op}: Input{list(xshape)} has {c} channels but Filter{list(fshape)} "
                                    f"(a transposed conv's is [C, M/groups, {kdims}]) expects {fshape[0]}")
        check(fshape[0] % g == 0, f"{op}: Filter{list(fshape)}: its {fshape[0]} input channels do not split "
                                  f"into groups={g}")
        m = fshape[1] * g
    else:
        check(c in (-1, fshape[1] * g), f"{op}: Input{list(xshape)} has {c} channels but Filter{list(fshape)} "
                                        f"with groups={g} expects {fshape[1]} * {g} = {fshape[1] * g}")
        check(fshape[0] % g == 0, f"{op}: Filter{list(fshape)}: its {fshape[0]} filters do not split into "
                                  f"groups={g}")
        m = fshape[0]
    if op.startswith("depthwise"):
        check(c in (-1, g), f"{op}: groups ({g}) must equal Input{list(xshape)}'s channels ({c})")
    pads = resolve_pads(op, a, xshape[2:], s, k)
    if a["padding_algorithm"] == "SAME":
        d = [1] * nd
    out = []
    for axis, (n, kk, dd, ss) in enumerate(zip(xshape[2:], k, d, s)):
        p0, p1, ext = pads[2 * axis], pads[2 * axis + 1], dd * (kk - 1) + 1
        if n < 0:
            out.append(-1)
        elif transpose:
            out.append((n - 1) * ss - p0 - p1 + ext)
        else:
            size = n + p0 + p1 - ext
            check(size >= 0, f"{op}: Input{list(xshape)} padded by {pads} is smaller than the dilated "
                             f"filter ({ext} along axis {axis + 2})")
            out.append(size // ss + 1)
    if transpose and a["output_size"]:
        want = ints(op, "output_size", a["output_size"], (nd,))
        for o, w, ss in zip(out, want, s):
            check(o < 0 or o <= w < o + ss, f"{op}: output_size {want} must lie in [{o}, {o + ss}) per "
                                            f"axis for Input{list(xshape)}, strides {s}")
        out = want
    check(all(o > 0 for o, n in zip(out, xshape[2:]) if n >= 0), f"{op}: Input{list(xshape)} gives the "
                                                                   f"output size {out}; it must be positive")
    return s, d, pads, out, m


# -- the tap machinery (NOTE(conv-taps)) ---------------------------------------------------

_ALL2 = (slice(None), slice(None))


def taps(ksize, out, s, d):
    """(idx, index) for every filter tap ``idx`` = (i, j) or (i, j, l), in row-major order:
    ``xpad[index]`` is the strided slice of a padded [A, B, *spatial] array that the tap reads
    for every output cell."""
    return _taps(tuple(ksize), tuple(out), tuple(s), tuple(d))


@functools.lru_cache(maxsize=512)
def _taps(ksize, out, s, d) -> tuple:
    # cached: a small tuple of slices per geometry, and tiny kernels spend their time here
    per_axis = [[slice(i * dd, i * dd + ss * (o - 1) + 1, ss) for i in range(k)]
                for k, o, ss, dd in zip(ksize, out, s, d)]
    return tuple(zip(itertools.product(*map(range, ksize)), (_ALL2 + sl for sl in itertools.product(*per_axis))))


def widths(pads, in_sizes, ksize, out, s, d) -> list:
    """(lo, hi) per spatial axis: ``pads`` with each hi side grown so that every tap's slice fits."""
    return [(pads[2 * a], max(pads[2 * a + 1], (out[a] - 1) * s[a] + d[a] * (ksize[a] - 1) + 1 - pads[2 * a] - n))
            for a, n in enumerate(in_sizes)]


def _padded_cn(xp, x, pads, ksize, out, s, d):
    """``x`` [N, C, *spatial] as a padded [C, N, *spatial'] array (NOTE(conv-taps): channels lead)."""
    return xp.pad(x.swapaxes(0, 1), [(0, 0), (0, 0)] + widths(pads, x.shape[2:], ksize, out, s, d))


def _bmm(xp, a, b):
    """``a [G, I, K] @ b [G, K, J]``; a broadcast product when K == 1 (a depthwise filter)."""
    return a * b if a.shape[2] == 1 else xp.matmul(a, b)


def _rows(x, g: int):
    """[N, C, ...] -> [g, C/g, N*...]: the matmul layout of NOTE(conv-taps)."""
    return x.swapaxes(0, 1).reshape(g, x.shape[1] // g, -1)


def _inner(w, sizes):
    """The [lo, lo + size) window of every spatial axis of a padded array."""
    return w[_ALL2 + tuple(slice(lo, lo + n) for (lo, _), n in sizes)]


def conv(xp, x, w, s, d, pads, groups: int, out):
    """Out[N, M, *out] of Input x and Filter w [M, C/g, *k]."""
    n, g = x.shape[0], groups
    m, cg = w.shape[:2]
    xpad = _padded_cn(xp, x, pads, w.shape[2:], out, s, d)
    res = None
    for idx, sl in taps(w.shape[2:], out, s, d):
        part = _bmm(xp, w[_ALL2 + idx].reshape(g, m // g, cg), xpad[sl].reshape(g, cg, -1))
        if res is None:
            res = part
        else:
            res += part
    return xp.ascontiguousarray(res.reshape(m, n, *out).swapaxes(0, 1))


def conv_input_grad(xp, gout, w, x_sizes, s, d, pads, groups: int):
    """d conv / d Input [N, C, *x_sizes] given dOut [N, M, *out]."""
    n, m, out = gout.shape[0], gout.shape[1], gout.shape[2:]
    cg, g = w.shape[1], groups
    wid = widths(pads, x_sizes, w.shape[2:], out, s, d)
    gpad = xp.zeros((cg * g, n) + tuple(lo + x + hi for (lo, hi), x in zip(wid, x_sizes)), gout.dtype)
    gg = _rows(gout, g)
    for idx, sl in taps(w.shape[2:], out, s, d):
        view = gpad[sl]
        view += _bmm(xp, w[_ALL2 + idx].reshape(g, m // g, cg).swapaxes(1, 2), gg).reshape(view.shape)
    return xp.ascontiguousarray(_inner(gpad, zip(wid, x_sizes)).swapaxes(0, 1))


def conv_filter_grad(xp, x, gout, w_shape, s, d, pads, groups: int):
    """d conv / d Filter [M, C/g, *k] given Input x and dOut [N, M, *out]."""
    m, out = gout.shape[1], gout.shape[2:]
    cg, g = w_shape[1], groups
    xpad = _padded_cn(xp, x, pads, w_shape[2:], out, s, d)
    gg = _rows(gout, g)
    dw = xp.empty(tuple(w_shape), gout.dtype)
    for idx, sl in taps(w_shape[2:], out, s, d):
        v = xpad[sl].reshape(g, cg, -1)
        dw[_ALL2 + idx] = ((gg * v).sum(-1, keepdims=True) if m == g and cg == 1 else
                           xp.matmul(gg, v.swapaxes(1, 2))).reshape(m, cg)
    return dw


# -- the ops --------------------------------------------------------------------------------


def _attrs(nd: int, transpose: bool) -> dict:
    one, zero = [1] * nd, [0] * nd
    # a transposed conv's layout says NCHW also in 3-D: Fluid 1.8.5's conv3d_transpose refuses
    # "NCDHW" (its layer writes "NCHW"); we take either
    attrs = {"strides": one, "paddings": zero, "dilations": one, "groups": 1, "padding_algorithm": "EXPLICIT",
             "data_format": "NCHW" if transpose else _FIRST[nd], "use_cudnn": False}
    return {**attrs, "output_size": []} if transpose else attrs


def _register_pair(op: str, transpose: bool, nd: int) -> None:
    """Register ``op`` and ``op_grad`` (Input@GRAD and Filter@GRAD, each only when asked for)."""
    attrs = _attrs(nd, transpose)

    def geometry(a, x, f):
        return conv_geometry(op, a, x.shape, f.shape, transpose, nd)

    def infer(ins, a):
        x, f = ins["Input"], ins["Filter"]
        check(x.dtype == f.dtype, f"{op}: Input is {x.dtype} but Filter is {f.dtype}")
        _, _, _, out, m = geometry(a, x, f)
        return {"Output": Meta((x.shape[0], m, *out), x.dtype)}

    @register(op, ins=("Input", "Filter"), outs=("Output",), attrs=attrs, infer=infer,
              grad=grad_of(("Input", "Filter"), out="Output"))
    def forward(xp, ins, a, ctx):
        x, w = ins["Input"], ins["Filter"]
        s, d, pads, out, _ = geometry(a, x, w)
        if transpose:
            return {"Output": conv_input_grad(xp, x, w, out, s, d, pads, a["groups"])}
        return {"Output": conv(xp, x, w, s, d, pads, a["groups"], out)}

    @register(op + "_grad", ins=("Input", "Filter", "Output@GRAD"),
              outs=(Slot("Input@GRAD", dispensable=True), Slot("Filter@GRAD", dispensable=True)),
              attrs=attrs, role="backward")
    def backward(xp, ins, a, ctx):
        x, w, g = ins["Input"], ins["Filter"], ins["Output@GRAD"]
        s, d, pads, _, _ = geometry(a, x, w)
        res = {}
        if "Input@GRAD" in ctx.outputs:
            res["Input@GRAD"] = (conv(xp, g, w, s, d, pads, a["groups"], x.shape[2:]) if transpose else
                                 conv_input_grad(xp, g, w, x.shape[2:], s, d, pads, a["groups"]))
        if "Filter@GRAD" in ctx.outputs:
            res["Filter@GRAD"] = (conv_filter_grad(xp, g, x, w.shape, s, d, pads, a["groups"]) if transpose
                                  else conv_filter_grad(xp, x, g, w.shape, s, d, pads, a["groups"]))
        return res

    kind = f"transposed convolution (the adjoint of conv{nd}d)" if transpose else "convolution"
    depth = " with groups == C (a depthwise one)" if op.startswith("depthwise") else ""
    layout = "[N, C, H, W]" if nd == 2 else "[N, C, D, H, W]"
    forward.__doc__ = (f"Output = the {nd}-D {kind}{depth} of Input {layout} by Filter, with strides, "
                       f"paddings, dilations and groups (NOTE(conv-taps), NOTE(conv-padding)).")


for _op, _transpose, _nd in (("conv2d", False, 2), ("depthwise_conv2d", False, 2), ("conv2d_transpose", True, 2),
                             ("depthwise_conv2d_transpose", True, 2), ("conv3d", False, 3),
                             ("conv3d_transpose", True, 3)):
    _register_pair(_op, _transpose, _nd)
