"""Scaling, sums, means and reductions, and the channel ops: scale, mean, sum, reduce_sum,
reduce_mean, reduce_max, reduce_min, reduce_prod; lrn, maxout, affine_channel, clip_by_norm
(Fluid 1.8's op types, slots and attrs).

The bool reductions (reduce_all, reduce_any) are in ops/compare.py; the matrix and vector
products (mul, matmul, bmm, dot, ...) in ops/linalg.py.
"""
from __future__ import annotations

import math

from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.ops.sparse import concat_rows
from placegroup.values import TensorArray, is_selected_rows, is_tensor_array, scatter_add


# -- mean, sum -------------------------------------------------------------------------------


@register("mean", ins=("X",), outs=("Out",), infer=lambda ins, a: {"Out": Meta((1,), ins["X"].dtype)},
          grad=grad_of(("X",)))
def mean(xp, ins, a, ctx):
    """Out = mean of all elements of X, shape [1] (Fluid 1.x)."""
    x = ins["X"]
    return {"Out": x.mean(dtype=x.dtype).reshape(1)}


@register("mean_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), role="backward")
def mean_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    return {"X@GRAD": xp.full(x.shape, g.reshape(()) / x.size, dtype=x.dtype)}


def _sum_infer(ins, attrs):
    xs = ins["X"]
    for m in xs[1:]:
        check(len(m.shape) == len(xs[0].shape), f"sum inputs differ in rank: {[list(x.shape) for x in xs]}")
    return {"Out": xs[0]}


def _sum_grad(op):
    g = op.outputs["Out"][0] + "@GRAD"
    return [OpSpec("assign", {"X": [g]}, {"Out": [op.grad_of(n)]}) for n in op.inputs["X"] if n in op.need]


# NOTE(sum-sparse): ``sum`` is where gradients meet (append_backward's fan-in, the pserver's
# merge of the trainers' gradients), so it takes SelectedRows too. All SelectedRows: a
# SelectedRows holding every entry (rows and values concatenated, repeats kept: whoever
# needs unique rows merges, see SelectedRows.merged). Dense and SelectedRows mixed: dense,
# each SelectedRows scatter-added into the sum of the dense ones.


@register("sum", ins=(Slot("X", duplicable=True),), outs=("Out",), infer=_sum_infer, grad=_sum_grad)
def sum_(xp, ins, a, ctx):
    """Out = X[0] + X[1] + ... (same shapes); SelectedRows inputs as NOTE(sum-sparse) says."""
    xs = ins["X"]
    if is_tensor_array(xs[0]):  # the parts of an array's gradient are arrays
        return {"Out": _sum_arrays(xs)}
    sparse = [x for x in xs if is_selected_rows(x)]
    if sparse:
        if len(sparse) == len(xs):
            return {"Out": concat_rows(xp, "sum", xs)}
        dense = [x for x in xs if not is_selected_rows(x)]
        out = dense[0].copy()
        for x in dense[1:]:
            out += x
        for x in sparse:
            if x.shape != out.shape:
                raise ValueError(f"sum: a SelectedRows input of shape {list(x.shape)} cannot add to "
                                 f"dense inputs of shape {list(out.shape)}")
            scatter_add(xp, out, x.rows, x.values.astype(out.dtype, copy=False))
        return {"Out": out}
    out = xs[0].copy() if len(xs) > 1 else xs[0]
    for x in xs[1:]:
        out += x
    return {"Out": out}


def _sum_arrays(xs) -> TensorArray:
    """Tensor arrays added entry by entry, an empty entry counting as zero (the gradient of an
    array read at several indices, NOTE(block-grad) in placegroup/model/backward_blocks.py)."""
    out = TensorArray([None] * max(len(x) for x in xs))
    for x in xs:
        for i, v in enumerate(x):
            if v is not None:
                out[i] = v if out[i] is None else out[i] + v
    return out


# -- scale ----------------------------------------------------------------------------------


def _scale_grad(op):
    # d(scale·X + bias)/dX = scale either way round, so the gradient is a scale op too.
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    ins = {"X": [grad_name(op.outputs["Out"][0])]}
    if op.inputs.get("ScaleTensor"):
        ins["ScaleTensor"] = op.inputs["ScaleTensor"]
    return [OpSpec("scale", ins, {"Out": [op.grad_of(x)]},
                   {"scale": op.attrs["scale"], "bias": 0.0, "bias_after_scale": True})]


def _scale_infer(ins, a):
    st = ins.get("ScaleTensor")
    check(st is None or math.prod(st.shape) == 1,
          f"scale: ScaleTensor must hold one value, got shape {list(st.shape) if st else None}")
    return {"Out": ins["X"]}


@register("scale", ins=("X", Slot("ScaleTensor", dispensable=True, no_grad=True)), outs=("Out",),
          attrs={"scale": 1.0, "bias": 0.0, "bias_after_scale": True}, infer=_scale_infer, grad=_scale_grad)
def scale(xp, ins, a, ctx):
    """Out = scale·X + bias, or scale·(X + bias) when ``bias_after_scale`` is False; a
    ``ScaleTensor`` input (one value, computed in the program: a clip's factor) replaces
    the ``scale`` attr.

    A SelectedRows X gives a SelectedRows with its values scaled (a gradient's 1/N); a bias
    would make every row nonzero, so it must be 0 then.
    """
    x = ins["X"]
    s, b = a["scale"], a["bias"]
    if ins.get("ScaleTensor") is not None:
        s = ins["ScaleTensor"].reshape(()).astype(x.dtype, copy=False)
    if is_selected_rows(x):
        if b != 0:
            raise ValueError(f"scale: X is a SelectedRows of shape {list(x.shape)}, and bias={b} "
                             f"would touch every row; only bias=0 is supported for it")
        return {"Out": x.with_values((s * x.values).astype(x.dtype, copy=False))}
    out = s * x + b if a["bias_after_scale"] else s * (x + b)
    return {"Out": out.astype(x.dtype, copy=False)}


# -- reduce_sum, reduce_mean ----------------------------------------------------------------
# Fluid's attrs: ``dim`` (a list; negative counts from the end), ``keep_dim``, ``reduce_all``.
# A reduction that would leave no dims gives [1], as in Fluid 1.x.

_REDUCE_ATTRS = {"dim": [0], "keep_dim": False, "reduce_all": False}


def _reduce_axes(ndim: int, a) -> tuple:
    if a["reduce_all"]:
        return tuple(range(ndim))
    dims = a["dim"] if isinstance(a["dim"], (list, tuple)) else [a["dim"]]
    return tuple(sorted({d + ndim if d < 0 else d for d in dims}))


def _reduce_infer(ins, a):
    x = ins["X"].shape
    dims = a["dim"] if isinstance(a["dim"], (list, tuple)) else [a["dim"]]
    for d in dims if not a["reduce_all"] else ():
        check(-len(x) <= d < len(x), f"reduce: dim {d} is out of range for X{list(x)}")
    axes = _reduce_axes(len(x), a)
    out = [1 if i in axes else d for i, d in enumerate(x)] if a["keep_dim"] else \
        [d for i, d in enumerate(x) if i not in axes]
    return {"Out": Meta(tuple(out) or (1,), ins["X"].dtype)}


def _reduce(name: str, mean_: bool) -> None:
    @register(name, ins=("X",), outs=("Out",), attrs=_REDUCE_ATTRS, infer=_reduce_infer,
              grad=grad_of(("X",)))
    def forward(xp, ins, a, ctx):
        x = ins["X"]
        axes = _reduce_axes(x.ndim, a)
        out = x.mean(axis=axes, keepdims=a["keep_dim"]) if mean_ else x.sum(axis=axes, keepdims=a["keep_dim"])
        return {"Out": out.astype(x.dtype, copy=False).reshape(out.shape or (1,))}

    @register(name + "_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs=_REDUCE_ATTRS,
              role="backward")
    def backward(xp, ins, a, ctx):
        x, g = ins["X"], ins["Out@GRAD"]
        axes = _reduce_axes(x.ndim, a)
        g = g.reshape([1 if i in axes else d for i, d in enumerate(x.shape)])
        if mean_:
            g = g / xp.asarray(math.prod(x.shape[i] for i in axes), dtype=x.dtype)
        return {"X@GRAD": xp.broadcast_to(g, x.shape).astype(x.dtype)}

    forward.__doc__ = f"Out = the {'mean' if mean_ else 'sum'} of X over ``dim`` (all dims with ``reduce_all``)."


_reduce("reduce_sum", False)
_reduce("reduce_mean", True)


# -- reduce_max, reduce_min, reduce_prod ----------------------------------------------------
# NOTE(reduce-grad): as Paddle's reduce_max_grad/reduce_min_grad, the gradient goes to every
# position equal to the result (each of tied maxima gets all of it). reduce_prod's gradient
# at x is the product of the *other* entries of its group: Paddle computes Out/X, which is
# NaN at a zero; we take the products left and right of each entry (exclusive cumprods), the
# same where X != 0 and right where it is 0.


def _keep_shape(x, axes) -> list:
    return [1 if i in axes else d for i, d in enumerate(x.shape)]


def _prod_of_others(xp, x, axes: tuple):
    """For each entry, the product of the other entries of its reduction group."""
    keep = [i for i in range(x.ndim) if i not in axes]
    perm = keep + list(axes)
    xt = xp.transpose(x, perm)
    flat = xt.reshape(xt.shape[:len(keep)] + (-1,))
    one = xp.ones_like(flat[..., :1])
    left = xp.cumprod(xp.concatenate([one, flat[..., :-1]], axis=-1), axis=-1)
    right = xp.flip(xp.cumprod(xp.flip(xp.concatenate([flat[..., 1:], one], axis=-1), -1), axis=-1), -1)
    inv = [perm.index(i) for i in range(x.ndim)]
    return xp.transpose((left * right).reshape(xt.shape), inv)


def _extreme(name: str, kind: str) -> None:
    @register(name, ins=("X",), outs=("Out",), attrs=_REDUCE_ATTRS, infer=_reduce_infer,
              grad=grad_of(("X",), outs=("Out",)))
    def forward(xp, ins, a, ctx):
        x = ins["X"]
        axes = _reduce_axes(x.ndim, a)
        out = getattr(x, kind)(axis=axes, keepdims=a["keep_dim"])
        return {"Out": out.astype(x.dtype, copy=False).reshape(out.shape or (1,))}

    @register(name + "_grad", ins=("X", "Out", "Out@GRAD"), outs=("X@GRAD",), attrs=_REDUCE_ATTRS,
              role="backward")
    def backward(xp, ins, a, ctx):
        x, out, g = ins["X"], ins["Out"], ins["Out@GRAD"]
        shape = _keep_shape(x, _reduce_axes(x.ndim, a))
        g = g.reshape(shape)
        if kind == "prod":
            return {"X@GRAD": (g * _prod_of_others(xp, x, _reduce_axes(x.ndim, a))).astype(x.dtype, copy=False)}
        return {"X@GRAD": (g * (x == out.reshape(shape))).astype(x.dtype, copy=False)}

    forward.__doc__ = (f"Out = the {kind} of X over ``dim`` (all dims with ``reduce_all``); gradient as "
                       f"NOTE(reduce-grad).")


_extreme("reduce_max", "max")
_extreme("reduce_min", "min")
_extreme("reduce_prod", "prod")


# -- lrn, maxout, affine_channel, clip_by_norm ----------------------------------------------
# NOTE(lrn): Fluid's lrn (lrn_op.cc) is MidOut = k + alpha·Σ x² over the n channels
# c - (n-1)/2 .. c + (n-1)/2 (alpha is not divided by n; n must be odd, as Paddle checks),
# Out = X·MidOut^-beta; zero channels pad the ends.

_LRN_ATTRS = {"n": 5, "k": 2.0, "alpha": 1e-4, "beta": 0.75, "data_format": "AnyLayout"}


def _channels_first(xp, x, fmt: str, back: bool = False):
    if fmt != "NHWC":
        return x
    return xp.moveaxis(x, 1, 3) if back else xp.moveaxis(x, 3, 1)


def _lrn_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) == 4, f"lrn: X must be 4-D, got X{list(x.shape)}")
    check(a["n"] >= 1 and a["n"] % 2 == 1, f"lrn: n must be a positive odd number, got {a['n']}")
    check(a["data_format"] in ("AnyLayout", "NCHW", "NHWC"), f"lrn: data_format {a['data_format']!r} must be NCHW "
                                                              f"or NHWC")
    return {"Out": x, "MidOut": x}


def _channel_window_sum(xp, v, n: int):
    """Σ v[:, c - (n-1)/2 .. c + (n-1)/2] along dim 1 for odd n, zero outside [0, C)."""
    c = v.shape[1]
    pad = xp.zeros((v.shape[0], c + n - 1) + v.shape[2:], dtype=v.dtype)
    pad[:, (n - 1) // 2:(n - 1) // 2 + c] = v
    out = pad[:, 0:c].copy()
    for j in range(1, n):
        out += pad[:, j:j + c]
    return out


@register("lrn", ins=("X",), outs=("Out", Slot("MidOut", no_grad=True)), attrs=_LRN_ATTRS, infer=_lrn_infer,
          grad=grad_of(("X",), outs=("Out", "MidOut")))
def lrn(xp, ins, a, ctx):
    """Local response normalization across channels (NOTE(lrn)); NCHW or NHWC."""
    x = _channels_first(xp, ins["X"], a["data_format"])
    n = a["n"]
    mid = a["k"] + a["alpha"] * _channel_window_sum(xp, x * x, n)
    mid = mid.astype(x.dtype, copy=False)
    out = x * mid ** -a["beta"]
    f = a["data_format"]
    return {"Out": _channels_first(xp, out, f, True), "MidOut": _channels_first(xp, mid, f, True)}


@register("lrn_grad", ins=("X", "Out", "MidOut", "Out@GRAD"), outs=("X@GRAD",), attrs=_LRN_ATTRS, role="backward")
def lrn_grad(xp, ins, a, ctx):
    f, n = a["data_format"], a["n"]
    x, out, mid, g = (_channels_first(xp, ins[s], f) for s in ("X", "Out", "MidOut", "Out@GRAD"))
    acc = _channel_window_sum(xp, g * out / mid, n)  # dMidOut[c'] / dX[c] = 2·alpha·X[c] in c's window
    dx = mid ** -a["beta"] * g - 2 * a["alpha"] * a["beta"] * x * acc
    return {"X@GRAD": _channels_first(xp, dx.astype(x.dtype, copy=False), f, True)}


def _maxout_infer(ins, a):
    x, g, ax = ins["X"], a["groups"], a["axis"]
    check(len(x.shape) == 4 and ax in (1, 3, -1), f"maxout: X must be 4-D and axis 1 (NCHW) or 3 (NHWC), got "
                                                  f"X{list(x.shape)}, axis {ax}")
    c = x.shape[ax]
    check(g >= 1 and (c == -1 or c % g == 0), f"maxout: groups {g} must divide the {c} channels of X{list(x.shape)}")
    out = list(x.shape)
    out[ax] = -1 if c == -1 else c // g
    return {"Out": Meta(tuple(out), x.dtype)}


def _maxout_groups(xp, x, a):
    """X as [N, C/groups, groups, H, W], channels first."""
    x = xp.moveaxis(x, a["axis"], 1) if a["axis"] != 1 else x
    return x.reshape((x.shape[0], x.shape[1] // a["groups"], a["groups"]) + x.shape[2:])


@register("maxout", ins=("X",), outs=("Out",), attrs={"groups": 1, "axis": 1}, infer=_maxout_infer,
          grad=grad_of(("X",), outs=("Out",)))
def maxout(xp, ins, a, ctx):
    """Out[:, c] = max over k < groups of X[:, c·groups + k] (channels at ``axis``); the gradient
    goes to the first of tied maxima, as Paddle's MaxOutGradFunctor."""
    out = _maxout_groups(xp, ins["X"], a).max(axis=2)
    return {"Out": xp.moveaxis(out, 1, a["axis"]) if a["axis"] != 1 else out}


@register("maxout_grad", ins=("X", "Out", "Out@GRAD"), outs=("X@GRAD",), attrs={"groups": 1, "axis": 1},
          role="backward")
def maxout_grad(xp, ins, a, ctx):
    x = ins["X"]
    grouped = _maxout_groups(xp, x, a)
    first = xp.argmax(grouped, axis=2)[:, :, None]
    g = ins["Out@GRAD"]
    g = xp.moveaxis(g, a["axis"], 1) if a["axis"] != 1 else g
    dx = (xp.arange(a["groups"]).reshape(1, 1, -1, *([1] * (x.ndim - 2))) == first) * g[:, :, None]
    dx = dx.reshape((dx.shape[0], -1) + dx.shape[3:]).astype(x.dtype, copy=False)
    return {"X@GRAD": xp.moveaxis(dx, 1, a["axis"]) if a["axis"] != 1 else dx}


def _affine_channel_infer(ins, a):
    x, fmt = ins["X"], a["data_layout"]
    check(fmt in ("NCHW", "NHWC", "AnyLayout") and len(x.shape) >= 2,
          f"affine_channel: data_layout {fmt!r} must be NCHW or NHWC and X of rank >= 2, got X{list(x.shape)}")
    c = x.shape[1 if fmt == "NCHW" else -1]
    for slot in ("Scale", "Bias"):
        m = ins[slot]
        check(c == -1 or math.prod(m.shape) == c, f"affine_channel: {slot}{list(m.shape)} must hold one value per "
                                                  f"channel of X{list(x.shape)} ({c}, {fmt})")
    return {"Out": x}


def _per_channel(x, fmt: str) -> tuple:
    # Paddle reads channels from dim 1 only for "NCHW": "AnyLayout" (the op's default) is last
    return (1, -1) + (1,) * (x.ndim - 2) if fmt == "NCHW" else (1,) * (x.ndim - 1) + (-1,)


@register("affine_channel", ins=("X", "Scale", "Bias"), outs=("Out",), attrs={"data_layout": "AnyLayout"},
          infer=_affine_channel_infer, grad=grad_of(("X", "Scale", "Bias"), uses=("X", "Scale")))
def affine_channel(xp, ins, a, ctx):
    """Out = X·Scale + Bias with one Scale and Bias per channel: dim 1 for ``data_layout`` NCHW
    (the layer's default), the last dim otherwise (NHWC, and the op's default AnyLayout, as
    Paddle reads it)."""
    x, shape = ins["X"], _per_channel(ins["X"], a["data_layout"])
    return {"Out": (x * ins["Scale"].reshape(shape) + ins["Bias"].reshape(shape)).astype(x.dtype, copy=False)}


@register("affine_channel_grad", ins=("X", "Scale", "Out@GRAD"),
          outs=tuple(Slot(s + "@GRAD", dispensable=True) for s in ("X", "Scale", "Bias")),
          attrs={"data_layout": "AnyLayout"}, role="backward")
def affine_channel_grad(xp, ins, a, ctx):
    x, scale, g = ins["X"], ins["Scale"], ins["Out@GRAD"]
    shape = _per_channel(x, a["data_layout"])
    axes = tuple(i for i, d in enumerate(shape) if d == 1)
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = (g * scale.reshape(shape)).astype(x.dtype, copy=False)
    if "Scale@GRAD" in ctx.outputs:
        res["Scale@GRAD"] = (g * x).sum(axis=axes).reshape(scale.shape)
    if "Bias@GRAD" in ctx.outputs:
        res["Bias@GRAD"] = g.sum(axis=axes).reshape(scale.shape)
    return res


def _clip_by_norm_infer(ins, a):
    check(a["max_norm"] > 0, f"clip_by_norm: max_norm must be > 0, got {a['max_norm']}")
    return {"Out": ins["X"]}


@register("clip_by_norm", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs={"max_norm": 1.0},
          infer=_clip_by_norm_infer)
def clip_by_norm(xp, ins, a, ctx):
    """Out = X·max_norm / ‖X‖₂ when ‖X‖₂ > max_norm, else X (the norm over all entries; a
    SelectedRows X is merged first and stays one). No gradient, as in Fluid 1.8."""
    x = ins["X"]
    rows = is_selected_rows(x)
    if rows:
        x = x.merged(xp)
    v = x.values if rows else x
    norm = xp.sqrt((v * v).sum())
    scale = xp.where(norm > a["max_norm"], a["max_norm"] / xp.maximum(norm, a["max_norm"]), 1).astype(v.dtype)
    out = (v * scale).astype(v.dtype, copy=False)
    return {"Out": x.with_values(out) if rows else out}
