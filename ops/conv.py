"""Convolutions of Fluid 1.8 (conv_op.cc, conv_transpose_op.cc): conv2d, depthwise_conv2d,
conv2d_transpose, depthwise_conv2d_transpose, and their gradients. Layout NCHW.

Input is [N, C, H, W]. A convolution's Filter is [M, C/groups, kh, kw] and gives M output
channels; a transposed convolution's Filter is [C, M/groups, kh, kw]. With ``groups`` g the
channels split into g equal parts and part k of the output sees only part k of the input.
The depthwise ops are the same maths with groups == C (Fluid picks them when cuDNN is off).

NOTE(conv-taps): every kernel is a loop over the kh*kw filter taps, never over the batch or
the pixels. Tap (i, j) reads the zero-padded input at rows ``i*dh + sh*oh`` and columns
``j*dw + sw*ow``: one strided slice, so the output is ``Σ_taps W[:, :, i, j] @ slice`` with
one matmul per tap, batched over the groups. Inside, arrays are channels-first ([C, N, H, W],
so a tap's slice is a [g, C/g, N*oh*ow] matrix and each matmul is one large GEMM per group;
a depthwise filter's is a broadcast product). The gradients read the same slices
backwards: the input gradient adds ``W[:, :, i, j]ᵀ @ dOut`` into the tap's slice of a zero
buffer (one tap's slice holds each cell once, so ``+=`` on the view is safe), the filter
gradient is ``dOut @ sliceᵀ`` summed over the batch. A transposed convolution is the adjoint
of the convolution whose filter is its own read as [C, M/g]: its output is that conv's input
gradient, its input gradient is that conv, its filter gradient that conv's filter gradient
with input and output swapped. Memory stays O(input + output): no im2col buffer.

NOTE(conv-padding): ``paddings`` is [ph, pw] (both sides) or [top, bottom, left, right].
``padding_algorithm`` "SAME" replaces them as Paddle's UpdatePaddingAndDilation does: per
axis out = ceil(in / stride), pad_sum = max((out - 1)*stride + k - in, 0), top = pad_sum // 2,
bottom the rest, *and the dilation becomes 1*; "VALID" zeroes them. A conv's output size is
``(in + top + bottom - (d*(k-1) + 1)) // stride + 1`` and must be positive; a transposed
conv's is ``(in - 1)*stride - top - bottom + d*(k-1) + 1``, or ``output_size`` when given,
which must lie in [that, that + stride). SAME for a transposed conv reads its input's size.
``use_cudnn`` is accepted and ignored; only NCHW (or Fluid's "AnyLayout") is run.
"""
from __future__ import annotations

from placegroup.ops.registry import Meta, Slot, check, grad_of, register

LAYOUTS = ("NCHW", "AnyLayout")


def ints(op: str, name: str, value, sizes=(2,)) -> list:
    """Attr ``name`` as a list of ints, its length one of ``sizes`` (ProgramError otherwise)."""
    ok = isinstance(value, (list, tuple)) and len(value) in sizes and all(
        isinstance(v, int) or getattr(v, "dtype", None) is not None and v.dtype.kind in "iu" for v in value)
    check(ok, f"{op}: attr {name} must be a list of {' or '.join(map(str, sizes))} ints, got {value!r}")
    return [int(v) for v in value]


def check_layout(op: str, a) -> None:
    check(a["data_format"] in LAYOUTS, f"{op}: data_format {a['data_format']!r} is not supported; placegroup "
                                       f"runs NCHW only (transpose the input to [N, C, H, W])")


def resolve_pads(op: str, a, in_hw, strides, ksize) -> list:
    """[top, bottom, left, right] after ``padding_algorithm`` (NOTE(conv-padding))."""
    alg = a["padding_algorithm"]
    check(alg in ("EXPLICIT", "SAME", "VALID"),
          f"{op}: padding_algorithm must be EXPLICIT, SAME or VALID, got {alg!r}")
    p = ints(op, "paddings", a["paddings"], (2, 4))
    check(min(p) >= 0, f"{op}: paddings {p} must be >= 0")
    if alg == "VALID":
        return [0, 0, 0, 0]
    if alg == "EXPLICIT":
        return [p[0], p[0], p[1], p[1]] if len(p) == 2 else p
    pads = []
    for n, s, k in zip(in_hw, strides, ksize):
        total = 0 if n < 0 else max((-(-n // s) - 1) * s + k - n, 0)
        pads += [total // 2, total - total // 2]
    return pads


def conv_geometry(op: str, a, xshape, fshape, transpose: bool = False):
    """Check a conv op's shapes and attrs; return (strides, dilations, pads, out_hw, out_channels).

    ``-1`` in Input's shape (an unknown batch, or size) gives ``-1`` in the output's.
    """
    check(len(xshape) == 4, f"{op}: Input{list(xshape)} must be 4-D [N, C, H, W]")
    check(len(fshape) == 4, f"{op}: Filter{list(fshape)} must be 4-D")
    check_layout(op, a)
    s, d = ints(op, "strides", a["strides"]), ints(op, "dilations", a["dilations"])
    check(min(s) > 0 and min(d) > 0, f"{op}: strides {s} and dilations {d} must be positive")
    g = a["groups"]
    check(isinstance(g, int) and g >= 1, f"{op}: groups must be an int >= 1, got {g!r}")
    c, k = xshape[1], list(fshape[2:])
    if transpose:
        check(c in (-1, fshape[0]), f"{op}: Input{list(xshape)} has {c} channels but Filter{list(fshape)} "
                                    f"(a transposed conv's is [C, M/groups, kh, kw]) expects {fshape[0]}")
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
        d = [1, 1]
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
        want = ints(op, "output_size", a["output_size"])
        for o, w, ss in zip(out, want, s):
            check(o < 0 or o <= w < o + ss, f"{op}: output_size {want} must lie in [{o}, {o + ss}) per "
                                            f"axis for Input{list(xshape)}, strides {s}")
        out = want
    check(all(o > 0 for o, n in zip(out, xshape[2:]) if n >= 0), f"{op}: Input{list(xshape)} gives the "
                                                                   f"output size {out}; it must be positive")
    return s, d, pads, out, m


# -- the tap machinery (NOTE(conv-taps)) ---------------------------------------------------


def _tap(xpad, i: int, j: int, out_hw, s, d):
    (oh, ow), (sh, sw), (dh, dw) = out_hw, s, d
    return xpad[:, :, i * dh:i * dh + sh * (oh - 1) + 1:sh, j * dw:j * dw + sw * (ow - 1) + 1:sw]


def _widths(pads, in_hw, ksize, out_hw, s, d) -> tuple:
    """``pads`` with bottom and right grown so that every tap's slice fits."""
    t, b, l, r = pads
    need = [(o - 1) * ss + dd * (k - 1) + 1 for o, ss, dd, k in zip(out_hw, s, d, ksize)]
    return t, max(b, need[0] - t - in_hw[0]), l, max(r, need[1] - l - in_hw[1])


def _padded_cn(xp, x, pads, ksize, out_hw, s, d):
    """``x`` [N, C, H, W] as a padded [C, N, H', W'] array (NOTE(conv-taps): channels lead)."""
    t, b, l, r = _widths(pads, x.shape[2:], ksize, out_hw, s, d)
    return xp.pad(x.transpose(1, 0, 2, 3), ((0, 0), (0, 0), (t, b), (l, r)))


def _bmm(xp, a, b):
    """``a [G, I, K] @ b [G, K, J]``; a broadcast product when K == 1 (a depthwise filter)."""
    return a * b if a.shape[2] == 1 else xp.matmul(a, b)


def _rows(x, g: int):
    """[N, C, ...] -> [g, C/g, N*...]: the matmul layout of NOTE(conv-taps)."""
    return x.transpose(1, 0, *range(2, x.ndim)).reshape(g, x.shape[1] // g, -1)


def conv(xp, x, w, s, d, pads, groups: int, out_hw):
    """Out[N, M, oh, ow] of Input x and Filter w [M, C/g, kh, kw]."""
    n, g = x.shape[0], groups
    m, cg, kh, kw = w.shape
    xpad = _padded_cn(xp, x, pads, (kh, kw), out_hw, s, d)
    out = None
    for i in range(kh):
        for j in range(kw):
            part = _bmm(xp, w[:, :, i, j].reshape(g, m // g, cg), _tap(xpad, i, j, out_hw, s, d).reshape(g, cg, -1))
            if out is None:
                out = part
            else:
                out += part
    return xp.ascontiguousarray(out.reshape(m, n, *out_hw).transpose(1, 0, 2, 3))


def conv_input_grad(xp, gout, w, x_hw, s, d, pads, groups: int):
    """d conv / d Input [N, C, H, W] given dOut [N, M, oh, ow]."""
    n, m, oh, ow = gout.shape
    _, cg, kh, kw = w.shape
    g = groups
    t, b, l, r = _widths(pads, x_hw, (kh, kw), (oh, ow), s, d)
    gpad = xp.zeros((cg * g, n, t + x_hw[0] + b, l + x_hw[1] + r), gout.dtype)
    gg = _rows(gout, g)
    for i in range(kh):
        for j in range(kw):
            view = _tap(gpad, i, j, (oh, ow), s, d)
            view += _bmm(xp, w[:, :, i, j].reshape(g, m // g, cg).swapaxes(1, 2), gg).reshape(view.shape)
    return xp.ascontiguousarray(gpad[:, :, t:t + x_hw[0], l:l + x_hw[1]].transpose(1, 0, 2, 3))


def conv_filter_grad(xp, x, gout, w_shape, s, d, pads, groups: int):
    """d conv / d Filter [M, C/g, kh, kw] given Input x and dOut [N, M, oh, ow]."""
    n, m, oh, ow = gout.shape
    _, cg, kh, kw = w_shape
    g = groups
    xpad = _padded_cn(xp, x, pads, (kh, kw), (oh, ow), s, d)
    gg = _rows(gout, g)
    dw = xp.empty(tuple(w_shape), gout.dtype)
    for i in range(kh):
        for j in range(kw):
            v = _tap(xpad, i, j, (oh, ow), s, d).reshape(g, cg, -1)
            dw[:, :, i, j] = ((gg * v).sum(-1, keepdims=True) if m == g and cg == 1 else
                              xp.matmul(gg, v.swapaxes(1, 2))).reshape(m, cg)
    return dw


# -- the ops --------------------------------------------------------------------------------

_ATTRS = {"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1,
          "padding_algorithm": "EXPLICIT", "data_format": "NCHW", "use_cudnn": False}
_T_ATTRS = {**_ATTRS, "output_size": []}


def _register_pair(op: str, transpose: bool) -> None:
    """Register ``op`` and ``op_grad`` (Input@GRAD and Filter@GRAD, each only when asked for)."""
    attrs = _T_ATTRS if transpose else _ATTRS

    def geometry(a, x, f):
        return conv_geometry(op, a, x.shape, f.shape, transpose)

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

    kind = "transposed convolution (the adjoint of conv2d)" if transpose else "convolution"
    depth = " with groups == C (a depthwise one)" if op.startswith("depthwise") else ""
    forward.__doc__ = (f"Output = the 2-D {kind}{depth} of Input [N, C, H, W] by Filter, with strides, "
                       f"paddings, dilations and groups (NOTE(conv-taps), NOTE(conv-padding)).")


for _op, _transpose in (("conv2d", False), ("depthwise_conv2d", False), ("conv2d_transpose", True),
                        ("depthwise_conv2d_transpose", True)):
    _register_pair(_op, _transpose)
