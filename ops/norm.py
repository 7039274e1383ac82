"""Normalization ops: batch_norm, layer_norm, instance_norm and group_norm, with Fluid 1.8's
slots, attrs and CPU maths, each with its grad op (X, Scale, Bias); inplace_abn (batch_norm
then an activation, one op) and spectral_norm.

NOTE(bn-stats): what ``batch_norm`` computes, as Fluid's CPU kernel does
(paddle/fluid/operators/batch_norm_op.cc). Over every axis but the channel axis (1 for NCHW,
the last for NHWC; a 2-D ``[N, C]`` input has C at axis 1 either way), in training:

* ``SavedMean`` = the batch mean, ``SavedVariance`` = ``1 / sqrt(var + epsilon)`` where
  ``var`` is the *biased* batch variance (divided by ``N*H*W``): Fluid keeps the inverse std,
  which its grad op reads back;
* ``MeanOut = Mean * momentum + mean * (1 - momentum)`` and likewise ``VarianceOut`` from the
  biased ``var`` (no Bessel correction); both replace ``Mean``/``Variance`` in place;
* ``Y = X * (Scale * inv_std) + (Bias - mean * Scale * inv_std)``, Fluid's order of operations.

With global statistics (``use_global_stats``, or ``is_test`` without
``trainable_statistics``) ``Y`` uses ``Mean``/``Variance`` and the running statistics stay as
they are. Fluid leaves ``SavedMean``/``SavedVariance`` unwritten then; here they are the
running mean and its inverse std (what the grad op uses). When there is one value per
channel (``N*H*W == 1``) training passes ``X`` through unchanged and updates nothing, as Fluid.

NOTE(bn-grad-mode): Fluid's grad kernel uses the global-statistics formula when
``is_test or use_global_stats``, even with ``trainable_statistics`` (whose forward used batch
statistics); here the grad op takes the forward's own mode, so the gradient is the true one
in that combination too (Fluid 1.8's layer never sets ``trainable_statistics``).
"""
from __future__ import annotations

import math

from placegroup.ops.registry import Meta, Slot, check, grad_of, register

_BN_ATTRS = {"momentum": 0.9, "epsilon": 1e-5, "is_test": False, "data_layout": "NCHW",
             "use_global_stats": False, "trainable_statistics": False, "use_mkldnn": False,
             "fuse_with_relu": False}
_LAYOUTS = ("NCHW", "NHWC")


def _channel_axis(ndim: int, layout: str) -> int:
    return 1 if layout == "NCHW" else ndim - 1


def _global_stats(a) -> bool:
    """Whether batch_norm normalizes by the running statistics (NOTE(bn-stats))."""
    return a["use_global_stats"] or (a["is_test"] and not a["trainable_statistics"])


def _check_epsilon(op: str, eps: float) -> None:
    check(0.0 <= eps <= 1e-3, f"{op}: epsilon must be in [0, 0.001] (Fluid's check), got {eps}")


def _bn_infer(ins, a):
    x = ins["X"]
    shape = tuple(x.shape)
    check(2 <= len(shape) <= 5, f"batch_norm: X must have rank 2 to 5 ([N, C] or [N, C, ...]), got "
                                f"X{list(shape)}")
    check(a["data_layout"] in _LAYOUTS, f"batch_norm: data_layout must be one of {list(_LAYOUTS)}, "
                                        f"got {a['data_layout']!r}")
    _check_epsilon("batch_norm", a["epsilon"])
    c = shape[_channel_axis(len(shape), a["data_layout"])]
    for slot in ("Scale", "Bias", "Mean", "Variance"):
        s = tuple(ins[slot].shape)
        check(len(s) == 1 and (c in (-1, s[0]) or s[0] == -1),
              f"batch_norm: {slot} must be [C] = [{c}] (C is X{list(shape)}'s channel dim for "
              f"data_layout {a['data_layout']}), got {slot}{list(s)}")
    if ins.get("MomentumTensor") is not None:
        m = tuple(ins["MomentumTensor"].shape)
        check(math.prod(m) == 1, f"batch_norm: MomentumTensor must hold one value, got MomentumTensor{list(m)}")
    stat = Meta((c,), x.dtype)
    return {"Y": x, "MeanOut": stat, "VarianceOut": stat, "SavedMean": stat, "SavedVariance": stat}


def _bn_view(xp, x, layout: str):
    """(axes reduced over, the shape a [C] vector broadcasts as, N*H*W)."""
    cax = _channel_axis(x.ndim, layout)
    axes = tuple(d for d in range(x.ndim) if d != cax)
    bshape = tuple(x.shape[cax] if d == cax else 1 for d in range(x.ndim))
    return axes, bshape, x.size // max(x.shape[cax], 1)


def _bn_grad_maker():
    # the running statistics are read back only in the global-statistics mode; they are
    # passed always, since that mode is the op's attrs' to say (Fluid passes MeanOut, the same var)
    return grad_of(("X", "Scale", "Bias"), uses=("X", "Scale", "Mean", "Variance"), out="Y",
                   outs=("SavedMean", "SavedVariance"))


@register("batch_norm",
          ins=("X", "Scale", "Bias", Slot("Mean", no_grad=True), Slot("Variance", no_grad=True),
               Slot("MomentumTensor", dispensable=True, no_grad=True)),
          outs=("Y", Slot("MeanOut", no_grad=True), Slot("VarianceOut", no_grad=True),
                Slot("SavedMean", no_grad=True), Slot("SavedVariance", no_grad=True)),
          attrs=_BN_ATTRS, infer=_bn_infer, grad=_bn_grad_maker(),
          inplace={"MeanOut": "Mean", "VarianceOut": "Variance"})
def batch_norm(xp, ins, a, ctx):
    """Y = (X - mean) / sqrt(var + epsilon) * Scale + Bias per channel; the running statistics
    move by ``momentum`` in training (NOTE(bn-stats))."""
    x, scale, bias = ins["X"], ins["Scale"], ins["Bias"]
    run_mean, run_var = ins["Mean"], ins["Variance"]
    eps = a["epsilon"]
    axes, bshape, m = _bn_view(xp, x, a["data_layout"])
    if _global_stats(a):
        inv_std = 1.0 / xp.sqrt(run_var + eps)
        mean, mean_out, var_out = run_mean, run_mean, run_var
        saved_mean, saved_inv = run_mean.copy(), inv_std
    elif m == 1:  # one value per channel: Fluid passes X through and updates nothing
        zeros = xp.zeros_like(run_mean)
        return {"Y": x.copy(), "MeanOut": run_mean, "VarianceOut": run_var, "SavedMean": zeros,
                "SavedVariance": zeros.copy()}
    else:
        mean = x.mean(axis=axes)
        var = ((x - mean.reshape(bshape)) ** 2).mean(axis=axes)  # biased, two-pass as Fluid
        momentum = a["momentum"]
        if ins.get("MomentumTensor") is not None:
            momentum = float(ins["MomentumTensor"].reshape(-1)[0])
        mean_out = run_mean * momentum + mean * (1.0 - momentum)
        var_out = run_var * momentum + var * (1.0 - momentum)
        inv_std = 1.0 / xp.sqrt(var + eps)
        saved_mean, saved_inv = mean, inv_std
    new_scale = inv_std * scale
    new_bias = bias - mean * new_scale
    y = x * new_scale.reshape(bshape) + new_bias.reshape(bshape)
    return {"Y": y.astype(x.dtype, copy=False), "MeanOut": mean_out.astype(x.dtype, copy=False),
            "VarianceOut": var_out.astype(x.dtype, copy=False),
            "SavedMean": saved_mean.astype(x.dtype, copy=False),
            "SavedVariance": saved_inv.astype(x.dtype, copy=False)}


@register("batch_norm_grad",
          ins=("X", "Scale", "SavedMean", "SavedVariance", "Y@GRAD", Slot("Mean", dispensable=True),
               Slot("Variance", dispensable=True)),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Scale@GRAD", dispensable=True),
                Slot("Bias@GRAD", dispensable=True)),
          attrs=_BN_ATTRS, role="backward")
def batch_norm_grad(xp, ins, a, ctx):
    # x̂ = (x - mean) * inv_std. dBias = Σ dy, dScale = Σ dy·x̂; training:
    # dx = scale·inv_std / M · (M·dy - dBias - x̂·dScale); global statistics: dx = dy·scale·inv_std.
    x, scale, dy = ins["X"], ins["Scale"], ins["Y@GRAD"]
    axes, bshape, m = _bn_view(xp, x, a["data_layout"])
    glob = _global_stats(a)
    if glob:
        mean, inv_std = ins["Mean"], 1.0 / xp.sqrt(ins["Variance"] + a["epsilon"])
    else:
        mean, inv_std = ins["SavedMean"], ins["SavedVariance"]
    xhat = (x - mean.reshape(bshape)) * inv_std.reshape(bshape)
    dbias = dy.sum(axis=axes)
    dscale = (dy * xhat).sum(axis=axes)
    out = {}
    if "X@GRAD" in ctx.outputs:
        k = (scale * inv_std).reshape(bshape)
        if glob:
            dx = dy * k
        elif m == 1:
            dx = dy.copy()
        else:
            dx = k / m * (m * dy - dbias.reshape(bshape) - xhat * dscale.reshape(bshape))
        out["X@GRAD"] = dx.astype(x.dtype, copy=False)
    if "Scale@GRAD" in ctx.outputs:
        out["Scale@GRAD"] = (dscale if glob or m > 1 else xp.zeros_like(dscale)).astype(x.dtype, copy=False)
    if "Bias@GRAD" in ctx.outputs:
        out["Bias@GRAD"] = (dbias if glob or m > 1 else xp.zeros_like(dbias)).astype(x.dtype, copy=False)
    return out


# -- layer_norm -----------------------------------------------------------------------------


def _ln_split(shape, axis: int) -> tuple:
    """(left, right): X as a [left, right] matrix split at ``begin_norm_axis`` (-1: unknown)."""
    left = -1 if any(d < 0 for d in shape[:axis]) else math.prod(shape[:axis])
    right = -1 if any(d < 0 for d in shape[axis:]) else math.prod(shape[axis:])
    return left, right


def _ln_infer(ins, a):
    x = ins["X"]
    shape, axis = tuple(x.shape), a["begin_norm_axis"]
    check(1 <= axis < len(shape), f"layer_norm: begin_norm_axis must be in [1, rank(X)) = [1, "
                                  f"{len(shape)}) for X{list(shape)}, got {axis}")
    _check_epsilon("layer_norm", a["epsilon"])
    left, right = _ln_split(shape, axis)
    for slot in ("Scale", "Bias"):
        if ins.get(slot) is not None:
            s = tuple(ins[slot].shape)
            check(len(s) == 1 and (s[0] == right or -1 in (s[0], right)),
                  f"layer_norm: {slot} must be [{right}] (X{list(shape)}'s dims from begin_norm_axis="
                  f"{axis} on, flattened), got {slot}{list(s)}")
    stat = Meta((left,), x.dtype)
    return {"Y": x, "Mean": stat, "Variance": stat}


@register("layer_norm", ins=("X", Slot("Scale", dispensable=True), Slot("Bias", dispensable=True)),
          outs=("Y", Slot("Mean", no_grad=True), Slot("Variance", no_grad=True)),
          attrs={"epsilon": 1e-5, "begin_norm_axis": 1}, infer=_ln_infer,
          grad=grad_of(("X", "Scale", "Bias"), uses=("X", "Scale"), out="Y", outs=("Mean", "Variance")))
def layer_norm(xp, ins, a, ctx):
    """Each row of X (its dims from ``begin_norm_axis`` on) normalized to mean 0, variance 1,
    then ``* Scale + Bias`` elementwise along the row; Mean and Variance (biased, without
    epsilon) are per row, [left], as in Fluid."""
    x = ins["X"]
    axis = a["begin_norm_axis"]
    left = math.prod(x.shape[:axis])
    x2 = x.reshape(left, -1)
    mean = x2.mean(axis=1)
    var = ((x2 - mean[:, None]) ** 2).mean(axis=1)
    y = (x2 - mean[:, None]) / xp.sqrt(var + a["epsilon"])[:, None]
    if ins.get("Scale") is not None:
        y = y * ins["Scale"]
    if ins.get("Bias") is not None:
        y = y + ins["Bias"]
    return {"Y": y.reshape(x.shape).astype(x.dtype, copy=False), "Mean": mean.astype(x.dtype, copy=False),
            "Variance": var.astype(x.dtype, copy=False)}


@register("layer_norm_grad",
          ins=("X", Slot("Scale", dispensable=True), "Mean", "Variance", "Y@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Scale@GRAD", dispensable=True),
                Slot("Bias@GRAD", dispensable=True)),
          attrs={"epsilon": 1e-5, "begin_norm_axis": 1}, role="backward")
def layer_norm_grad(xp, ins, a, ctx):
    # per row, with x̂ = (x - mean) * inv_std and g = dy·scale:
    # dx = inv_std / H · (H·g - Σ g - x̂ · Σ g·x̂); dScale = Σ_rows dy·x̂; dBias = Σ_rows dy.
    x = ins["X"]
    left = math.prod(x.shape[:a["begin_norm_axis"]])
    x2 = x.reshape(left, -1)
    dy = ins["Y@GRAD"].reshape(x2.shape)
    inv_std = (1.0 / xp.sqrt(ins["Variance"] + a["epsilon"]))[:, None]
    xhat = (x2 - ins["Mean"][:, None]) * inv_std
    out = {}
    if "X@GRAD" in ctx.outputs:
        g = dy * ins["Scale"] if ins.get("Scale") is not None else dy
        h = x2.shape[1]
        dx = inv_std / h * (h * g - g.sum(axis=1, keepdims=True) - xhat * (g * xhat).sum(axis=1, keepdims=True))
        out["X@GRAD"] = dx.reshape(x.shape).astype(x.dtype, copy=False)
    if "Scale@GRAD" in ctx.outputs:
        out["Scale@GRAD"] = (dy * xhat).sum(axis=0).astype(x.dtype, copy=False)
    if "Bias@GRAD" in ctx.outputs:
        out["Bias@GRAD"] = dy.sum(axis=0).astype(x.dtype, copy=False)
    return out


# -- instance_norm and group_norm -------------------------------------------------------------
#
# NOTE(group-stats): both normalize each example over groups of its channels and all their
# spatial positions, with the biased variance: instance_norm's group is one channel, group_norm's
# ``ceil(C / groups)`` consecutive channels (Fluid 1.8 lets the last group be smaller when
# ``groups`` does not divide C). X is seen as [N, C, S] (S: the spatial positions; NHWC moves C
# first); a one-hot [C, G] membership matrix turns per-channel sums into per-group sums and
# back, so uneven groups need no loop. instance_norm keeps Fluid's SavedVariance, the inverse std
# per (n, c); group_norm's Variance is the variance itself, [N, groups].


def _as_ncs(x, layout: str = "NCHW"):
    """X as [N, C, S] (a view for NCHW)."""
    if layout == "NHWC" and x.ndim > 2:
        x = x.reshape(x.shape[0], -1, x.shape[-1]).swapaxes(1, 2)
    return x.reshape(x.shape[0], x.shape[1], -1)


def _from_ncs(y, shape, layout: str = "NCHW"):
    if layout == "NHWC" and len(shape) > 2:
        return y.swapaxes(1, 2).reshape(shape)
    return y.reshape(shape)


def _members(xp, c: int, groups: int, dtype):
    """[C, G] one-hot: channel c is in group c // ceil(C / G) (NOTE(group-stats))."""
    size = -(-c // groups)
    return (xp.arange(c)[:, None] // size == xp.arange(groups)[None, :]).astype(dtype)


def _group_stats(xp, x3, member):
    """Per-(n, g) mean and biased variance of x3 [N, C, S]; each broadcast back as [N, C, 1]."""
    count = member.sum(axis=0) * x3.shape[2]  # elements per group
    mean = (x3.sum(axis=2) @ member) / count
    mean_c = (mean @ member.T)[:, :, None]
    var = (((x3 - mean_c) ** 2).sum(axis=2) @ member) / count
    return mean, var, mean_c, (var @ member.T)[:, :, None], count


def _affine(y3, ins):
    if ins.get("Scale") is not None:
        y3 = y3 * ins["Scale"][None, :, None]
    if ins.get("Bias") is not None:
        y3 = y3 + ins["Bias"][None, :, None]
    return y3


def _group_grad(xp, ins, out, x3, dy3, mean_c, inv_c, member, count_c, slots):
    """X@GRAD, Scale@GRAD, Bias@GRAD (those in ``slots``) of a grouped normalization:
    dx = inv_std / M · (M·g - Σ g - x̂ · Σ g·x̂) per group, g = dy·scale (NOTE(group-stats))."""
    xhat = (x3 - mean_c) * inv_c
    if "X@GRAD" in slots:
        g = dy3 * ins["Scale"][None, :, None] if ins.get("Scale") is not None else dy3
        sum_g = (g.sum(axis=2) @ member) @ member.T
        sum_gx = ((g * xhat).sum(axis=2) @ member) @ member.T
        out["X@GRAD"] = inv_c / count_c * (count_c * g - sum_g[:, :, None] - xhat * sum_gx[:, :, None])
    if "Scale@GRAD" in slots:
        out["Scale@GRAD"] = (dy3 * xhat).sum(axis=(0, 2))
    if "Bias@GRAD" in slots:
        out["Bias@GRAD"] = dy3.sum(axis=(0, 2))


def _affine_check(op: str, ins, c: int, shape) -> None:
    for slot in ("Scale", "Bias"):
        if ins.get(slot) is not None:
            s = tuple(ins[slot].shape)
            check(len(s) == 1 and (s[0] == c or -1 in (s[0], c)),
                  f"{op}: {slot} must be [C] = [{c}] for X{list(shape)}, got {slot}{list(s)}")


def _in_infer(ins, a):
    x = ins["X"]
    shape = tuple(x.shape)
    check(2 <= len(shape) <= 5, f"instance_norm: X must have rank 2 to 5 ([N, C, ...]), got X{list(shape)}")
    _check_epsilon("instance_norm", a["epsilon"])
    _affine_check("instance_norm", ins, shape[1], shape)
    nc = -1 if -1 in shape[:2] else shape[0] * shape[1]
    stat = Meta((nc,), x.dtype)
    return {"Y": x, "SavedMean": stat, "SavedVariance": stat}


@register("instance_norm", ins=("X", Slot("Scale", dispensable=True), Slot("Bias", dispensable=True)),
          outs=("Y", Slot("SavedMean", no_grad=True), Slot("SavedVariance", no_grad=True)),
          attrs={"epsilon": 1e-5}, infer=_in_infer,
          grad=grad_of(("X", "Scale", "Bias"), uses=("X", "Scale"), out="Y",
                       outs=("SavedMean", "SavedVariance")))
def instance_norm(xp, ins, a, ctx):
    """Each (example, channel) normalized over its spatial positions, then ``* Scale[c] +
    Bias[c]``; SavedMean and SavedVariance (the inverse std) are [N*C] (NOTE(group-stats))."""
    x = ins["X"]
    x3 = _as_ncs(x)
    mean = x3.mean(axis=2, keepdims=True)
    inv = 1.0 / xp.sqrt(((x3 - mean) ** 2).mean(axis=2, keepdims=True) + a["epsilon"])
    y = _affine((x3 - mean) * inv, ins)
    return {"Y": y.reshape(x.shape).astype(x.dtype, copy=False),
            "SavedMean": mean.reshape(-1).astype(x.dtype, copy=False),
            "SavedVariance": inv.reshape(-1).astype(x.dtype, copy=False)}


@register("instance_norm_grad",
          ins=("X", Slot("Scale", dispensable=True), "SavedMean", "SavedVariance", "Y@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Scale@GRAD", dispensable=True),
                Slot("Bias@GRAD", dispensable=True)),
          attrs={"epsilon": 1e-5}, role="backward")
def instance_norm_grad(xp, ins, a, ctx):
    x = ins["X"]
    x3, dy3 = _as_ncs(x), _as_ncs(ins["Y@GRAD"])
    n, c = x3.shape[:2]
    member = xp.eye(c, dtype=x.dtype)  # one group per channel
    mean_c, inv_c = ins["SavedMean"].reshape(n, c, 1), ins["SavedVariance"].reshape(n, c, 1)
    out: dict = {}
    _group_grad(xp, ins, out, x3, dy3, mean_c, inv_c, member, x3.shape[2], ctx.outputs)
    if "X@GRAD" in out:
        out["X@GRAD"] = out["X@GRAD"].reshape(x.shape)
    return {k: v.astype(x.dtype, copy=False) for k, v in out.items()}


_GN_ATTRS = {"epsilon": 1e-5, "groups": 1, "data_layout": "NCHW"}


def _gn_infer(ins, a):
    x = ins["X"]
    shape, groups = tuple(x.shape), a["groups"]
    check(len(shape) >= 2, f"group_norm: X must have rank >= 2 ([N, C, ...]), got X{list(shape)}")
    check(a["data_layout"] in _LAYOUTS, f"group_norm: data_layout must be one of {list(_LAYOUTS)}, "
                                        f"got {a['data_layout']!r}")
    _check_epsilon("group_norm", a["epsilon"])
    c = shape[_channel_axis(len(shape), a["data_layout"])]
    check(groups >= 1 and (c == -1 or groups <= c),
          f"group_norm: groups must be in [1, C] = [1, {c}] for X{list(shape)}, got {groups}")
    _affine_check("group_norm", ins, c, shape)
    stat = Meta((shape[0], groups), x.dtype)
    return {"Y": x, "Mean": stat, "Variance": stat}


@register("group_norm", ins=("X", Slot("Scale", dispensable=True), Slot("Bias", dispensable=True)),
          outs=("Y", Slot("Mean", no_grad=True), Slot("Variance", no_grad=True)),
          attrs=_GN_ATTRS, infer=_gn_infer,
          grad=grad_of(("X", "Scale", "Bias"), uses=("X", "Scale"), out="Y", outs=("Mean", "Variance")))
def group_norm(xp, ins, a, ctx):
    """Each example's channels in ``groups`` groups, each group normalized over its channels
    and positions, then ``* Scale[c] + Bias[c]``; Mean and Variance are [N, groups]
    (NOTE(group-stats))."""
    x, layout = ins["X"], a["data_layout"]
    x3 = _as_ncs(x, layout)
    member = _members(xp, x3.shape[1], a["groups"], x.dtype)
    mean, var, mean_c, var_c, _ = _group_stats(xp, x3, member)
    y = _affine((x3 - mean_c) / xp.sqrt(var_c + a["epsilon"]), ins)
    return {"Y": _from_ncs(y, x.shape, layout).astype(x.dtype, copy=False),
            "Mean": mean.astype(x.dtype, copy=False), "Variance": var.astype(x.dtype, copy=False)}


@register("group_norm_grad", ins=("X", Slot("Scale", dispensable=True), "Mean", "Variance", "Y@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Scale@GRAD", dispensable=True),
                Slot("Bias@GRAD", dispensable=True)),
          attrs=_GN_ATTRS, role="backward")
def group_norm_grad(xp, ins, a, ctx):
    x, layout = ins["X"], a["data_layout"]
    x3, dy3 = _as_ncs(x, layout), _as_ncs(ins["Y@GRAD"], layout)
    member = _members(xp, x3.shape[1], a["groups"], x.dtype)
    mean_c = (ins["Mean"] @ member.T)[:, :, None]
    inv_c = 1.0 / xp.sqrt((ins["Variance"] @ member.T)[:, :, None] + a["epsilon"])
    count_c = ((member.sum(axis=0) @ member.T) * x3.shape[2])[None, :, None]
    out: dict = {}
    _group_grad(xp, ins, out, x3, dy3, mean_c, inv_c, member, count_c, ctx.outputs)
    if "X@GRAD" in out:
        out["X@GRAD"] = _from_ncs(out["X@GRAD"], x.shape, layout)
    return {k: v.astype(x.dtype, copy=False) for k, v in out.items()}


# -- inplace_abn: batch_norm, then an activation --------------------------------------------

# NOTE(inplace-abn): Fluid's inplace_abn is batch_norm followed by ``activation`` (identity,
# leaky_relu or elu, with ``alpha``) in one op that overwrites its input, recovering X from Y
# in the backward pass to save memory. Here nothing is overwritten (Y is a new var, the grad op
# reads X as batch_norm_grad does); the numbers are batch_norm's then the activation's, and the
# gradient is dY · act'(Y) fed to batch_norm's gradient (act' read from Y: 1 where Y > 0, else
# alpha for leaky_relu and Y + alpha for elu).
_ABN_ACTS = ("", "identity", "leaky_relu", "elu")
_ABN_ATTRS = {**_BN_ATTRS, "activation": "", "alpha": 0.1}


def _abn_infer(ins, a):
    check(a["activation"] in _ABN_ACTS, f"inplace_abn: activation must be one of {list(_ABN_ACTS)}, "
                                        f"got {a['activation']!r}")
    return _bn_infer(ins, a)


@register("inplace_abn",
          ins=("X", "Scale", "Bias", Slot("Mean", no_grad=True), Slot("Variance", no_grad=True),
               Slot("MomentumTensor", dispensable=True, no_grad=True)),
          outs=("Y", Slot("MeanOut", no_grad=True), Slot("VarianceOut", no_grad=True),
                Slot("SavedMean", no_grad=True), Slot("SavedVariance", no_grad=True)),
          attrs=_ABN_ATTRS, infer=_abn_infer,
          grad=grad_of(("X", "Scale", "Bias"), uses=("X", "Scale", "Mean", "Variance"), out="Y",
                       outs=("Y", "SavedMean", "SavedVariance")),
          inplace={"MeanOut": "Mean", "VarianceOut": "Variance"})
def inplace_abn(xp, ins, a, ctx):
    """Y = activation(batch_norm(X)) (NOTE(inplace-abn)); the statistics as batch_norm's."""
    out = batch_norm(xp, ins, a, ctx)
    y, alpha = out["Y"], out["Y"].dtype.type(a["alpha"])
    if a["activation"] == "leaky_relu":
        out["Y"] = xp.where(y > 0, y, alpha * y)
    elif a["activation"] == "elu":
        out["Y"] = xp.where(y > 0, y, alpha * (xp.exp(xp.minimum(y, 0)) - 1)).astype(y.dtype, copy=False)
    return out


@register("inplace_abn_grad",
          ins=("X", "Scale", "Y", "SavedMean", "SavedVariance", "Y@GRAD", Slot("Mean", dispensable=True),
               Slot("Variance", dispensable=True)),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Scale@GRAD", dispensable=True),
                Slot("Bias@GRAD", dispensable=True)),
          attrs=_ABN_ATTRS, role="backward")
def inplace_abn_grad(xp, ins, a, ctx):
    y, dy = ins["Y"], ins["Y@GRAD"]
    alpha = y.dtype.type(a["alpha"])
    if a["activation"] == "leaky_relu":
        dy = xp.where(y > 0, dy, dy * alpha)
    elif a["activation"] == "elu":
        dy = xp.where(y > 0, dy, dy * (y + alpha))
    return batch_norm_grad(xp, {**ins, "Y@GRAD": dy}, a, ctx)


# -- spectral_norm --------------------------------------------------------------------------

# NOTE(spectral-norm): as Fluid 1.8's kernel (spectral_norm_op.h): Weight, with dim ``dim`` moved
# first, is read as an [h, w] matrix W; starting from copies of U [h] and V [w], ``power_iters``
# rounds of v = Wᵀu / (|Wᵀu| + eps), u = Wv / (|Wv| + eps) give sigma = uᵀWv and Out = Weight /
# sigma. U and V are inputs only: the op never writes them back, so every run starts from the
# same U and V (the layer's random parameters), as in Fluid. The gradient is Paddle's rule,
# recomputing u, v and sigma: dW = dOut ∘ (1 - u vᵀ · Σ Out) / sigma (elementwise; Paddle 1.8 to
# 2.6 keep it). It is not the derivative of Out (that would be (dOut - u vᵀ · ⟨dOut, Out⟩) /
# sigma with u, v held), but it is what Paddle trains with, so training here matches Paddle's.


def _sn_infer(ins, a):
    w, u, v = ins["Weight"].shape, ins["U"].shape, ins["V"].shape
    op, dim = "spectral_norm", a["dim"]
    check(2 <= len(w) <= 5, f"{op}: Weight must have rank 2 to 5, got Weight{list(w)}")
    check(dim in (0, 1), f"{op}: dim can only be 0 or 1 (Fluid's check), got {dim}")
    check(a["power_iters"] >= 0, f"{op}: power_iters must be >= 0, got {a['power_iters']}")
    h = w[dim]
    rest = [d for i, d in enumerate(w) if i != dim]
    width = -1 if -1 in rest else math.prod(rest)
    check(len(u) == 1 and (u[0] in (h, -1) or h == -1), f"{op}: U must be [h] = [{h}] (Weight{list(w)}'s dim {dim}), "
                                                         f"got U{list(u)}")
    check(len(v) == 1 and (v[0] in (width, -1) or width == -1),
          f"{op}: V must be [w] = [{width}] (Weight{list(w)}'s other dims, multiplied), got V{list(v)}")
    return {"Out": ins["Weight"]}


def _sn_matrix(xp, ins, a):
    """(W as [h, w] with dim first, the permutation used, u, v, sigma) (NOTE(spectral-norm))."""
    weight, dim = ins["Weight"], a["dim"]
    perm = [dim] + [i for i in range(weight.ndim) if i != dim]
    w = xp.transpose(weight, perm).reshape(weight.shape[dim], -1)
    u, v = ins["U"].reshape(-1).astype(w.dtype), ins["V"].reshape(-1).astype(w.dtype)
    eps = w.dtype.type(a["eps"])
    for _ in range(int(a["power_iters"])):
        v = w.T @ u
        v = v / (xp.sqrt((v * v).sum()) + eps)
        u = w @ v
        u = u / (xp.sqrt((u * u).sum()) + eps)
    return w, perm, u, v, (u * (w @ v)).sum()


def _sn_back(xp, m, perm, shape):
    """The [h, w] matrix ``m`` laid out as Weight again."""
    return xp.transpose(m.reshape([shape[p] for p in perm]), [perm.index(i) for i in range(len(perm))])


@register("spectral_norm", ins=("Weight", Slot("U", no_grad=True), Slot("V", no_grad=True)), outs=("Out",),
          attrs={"dim": 0, "power_iters": 1, "eps": 1e-12}, infer=_sn_infer, grad=grad_of(("Weight",)))
def spectral_norm(xp, ins, a, ctx):
    """Out = Weight / sigma, sigma Weight's largest singular value as ``power_iters`` rounds of
    power iteration from U and V estimate it (NOTE(spectral-norm))."""
    w, perm, u, v, sigma = _sn_matrix(xp, ins, a)
    return {"Out": _sn_back(xp, w / sigma, perm, ins["Weight"].shape).astype(w.dtype, copy=False)}


@register("spectral_norm_grad", ins=("Weight", "U", "V", "Out@GRAD"), outs=("Weight@GRAD",),
          attrs={"dim": 0, "power_iters": 1, "eps": 1e-12}, role="backward")
def spectral_norm_grad(xp, ins, a, ctx):
    # Paddle's rule, not the derivative (NOTE(spectral-norm))
    w, perm, u, v, sigma = _sn_matrix(xp, ins, a)
    g = xp.transpose(ins["Out@GRAD"], perm).reshape(w.shape)
    dw = g * (1 - xp.outer(u, v) * (w / sigma).sum()) / sigma
    return {"Weight@GRAD": _sn_back(xp, dw, perm, ins["Weight"].shape).astype(w.dtype, copy=False)}
