"""Distances, normalisation and regression losses of Fluid 1.8: cos_sim, norm (the
l2_normalize layer), smooth_l1_loss, huber_loss, log_loss and kldiv_loss.

Each follows Paddle's CPU kernel, down to where its gradient reads a saved forward output
(cos_sim's XNorm/YNorm, norm's Norm, smooth_l1's Diff, huber's Residual) instead of the
inputs; those outputs are part of the op, as in Fluid. Kernels use only ``xp`` functions.
"""
from __future__ import annotations

from placegroup.ops.loss import same_shape, shapes_fit
from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register


# -- cos_sim --------------------------------------------------------------------------------

_COS_EPS = 1e-8  # Paddle clips each squared norm at 1e-8 before its square root


def _cos_infer(ins, a):
    x, y = ins["X"], ins["Y"]
    check(len(x.shape) >= 2 and len(x.shape) == len(y.shape),
          f"cos_sim: X{list(x.shape)} and Y{list(y.shape)} must have one rank, at least 2")
    check(shapes_fit(x.shape[1:], y.shape[1:]), f"cos_sim: X{list(x.shape)} and Y{list(y.shape)} differ past dim 0")
    check(y.shape[0] in (1, -1) or shapes_fit(x.shape[:1], y.shape[:1]),
          f"cos_sim: Y{list(y.shape)} must have X's {x.shape[0]} rows or 1 row")
    return {"Out": Meta((x.shape[0], 1), x.dtype), "XNorm": Meta((x.shape[0], 1), x.dtype),
            "YNorm": Meta((y.shape[0], 1), y.dtype)}


def _norms(xp, v):
    return xp.sqrt(xp.maximum((v * v).sum(axis=1, keepdims=True), _COS_EPS))


@register("cos_sim", ins=("X", "Y"), outs=("Out", "XNorm", "YNorm"), infer=_cos_infer,
          grad=grad_of(("X", "Y"), outs=("Out", "XNorm", "YNorm")))
def cos_sim(xp, ins, a, ctx):
    """Out[i] = X[i]·Y[i] / (|X[i]|·|Y[i]|) over rows flattened past dim 0; a Y of one row
    is compared with every row of X. XNorm and YNorm ([rows, 1]) keep the norms, each
    computed as sqrt(max(|v|², 1e-8)) as in Paddle."""
    x, y = ins["X"], ins["Y"]
    x2, y2 = x.reshape(x.shape[0], -1), y.reshape(y.shape[0], -1)
    xn, yn = _norms(xp, x2), _norms(xp, y2)
    return {"Out": (x2 * y2).sum(axis=1, keepdims=True) / (xn * yn), "XNorm": xn, "YNorm": yn}


@register("cos_sim_grad", ins=("X", "Y", "Out", "XNorm", "YNorm", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), role="backward")
def cos_sim_grad(xp, ins, a, ctx):
    # dX = dz·(Y/(|X||Y|) - z·X/|X|²), the norms held constant (Paddle's CosSimGradFunctor); a
    # broadcast Y's gradient sums its rows' terms.
    x, y, z, xn, yn, dz = ins["X"], ins["Y"], ins["Out"], ins["XNorm"], ins["YNorm"], ins["Out@GRAD"]
    x2, y2 = x.reshape(x.shape[0], -1), y.reshape(y.shape[0], -1)
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = (dz * (y2 / (xn * yn) - z * x2 / (xn * xn))).reshape(x.shape)
    if "Y@GRAD" in ctx.outputs:
        dy = dz * (x2 / (xn * yn) - z * y2 / (yn * yn))
        if y.shape[0] != x.shape[0]:
            dy = dy.sum(axis=0, keepdims=True)
        res["Y@GRAD"] = dy.reshape(y.shape)
    return res


# -- norm (l2_normalize) --------------------------------------------------------------------

_NORM_ATTRS = {"axis": -1, "epsilon": 1e-10, "is_test": False}


def _norm_infer(ins, a):
    x = ins["X"]
    check(-len(x.shape) <= a["axis"] < len(x.shape), f"norm: axis {a['axis']} is out of range for X{list(x.shape)}")
    shape = list(x.shape)
    shape[a["axis"]] = 1
    return {"Out": x, "Norm": Meta(tuple(shape), x.dtype)}


@register("norm", ins=("X",), outs=("Out", "Norm"), attrs=_NORM_ATTRS, infer=_norm_infer,
          grad=grad_of(("X",), outs=("Norm",)))
def norm(xp, ins, a, ctx):
    """Out = X / Norm with Norm = sqrt(Σ X² + epsilon) along ``axis`` (kept as a size-1 dim)."""
    x = ins["X"]
    n = xp.sqrt((x * x).sum(axis=a["axis"], keepdims=True) + a["epsilon"])
    return {"Out": x / n, "Norm": n}


@register("norm_grad", ins=("X", "Norm", "Out@GRAD"), outs=("X@GRAD",), attrs=_NORM_ATTRS, role="backward")
def norm_grad(xp, ins, a, ctx):
    # dX = (dY - X·Σ(X·dY)/Norm²) / Norm, Norm² holding the epsilon as in Paddle
    x, n, g = ins["X"], ins["Norm"], ins["Out@GRAD"]
    return {"X@GRAD": (g - x * (x * g).sum(axis=a["axis"], keepdims=True) / (n * n)) / n}


# -- smooth_l1_loss -------------------------------------------------------------------------


def _smooth_l1_infer(ins, a):
    x = same_shape("smooth_l1_loss", ins, "X", "Y")
    check(len(x.shape) >= 2, f"smooth_l1_loss: X must have a batch dim and at least one more, got X{list(x.shape)}")
    for w in ("InsideWeight", "OutsideWeight"):
        if ins.get(w) is not None:
            same_shape("smooth_l1_loss", ins, "X", w)
    check((ins.get("InsideWeight") is None) == (ins.get("OutsideWeight") is None),
          "smooth_l1_loss: give both InsideWeight and OutsideWeight, or neither")
    return {"Diff": x, "Out": Meta((x.shape[0], 1), x.dtype)}


def _smooth_l1_grad(op):
    # Fluid's grad maker: the gradient reads only the weights, Diff and Out@GRAD
    need = {s: op.inputs[s][0] for s in ("X", "Y") if op.inputs.get(s) and op.inputs[s][0] in op.need}
    if not need:
        return []
    ins = {s: list(op.inputs[s]) for s in ("InsideWeight", "OutsideWeight") if op.inputs.get(s)}
    ins.update({"Diff": list(op.outputs["Diff"]), "Out@GRAD": [grad_name(op.outputs["Out"][0])]})
    outs = {grad_name(s): [op.grad_of(n)] for s, n in need.items()}
    return [OpSpec("smooth_l1_loss_grad", ins, outs, dict(op.attrs))]


_W = (Slot("InsideWeight", dispensable=True, no_grad=True), Slot("OutsideWeight", dispensable=True, no_grad=True))


@register("smooth_l1_loss", ins=("X", "Y") + _W, outs=("Diff", "Out"), attrs={"sigma": 1.0},
          infer=_smooth_l1_infer, grad=_smooth_l1_grad)
def smooth_l1_loss(xp, ins, a, ctx):
    """Diff = (X - Y)·InsideWeight; Out[i] = Σ over row i of OutsideWeight·f(Diff), with
    f(d) = 0.5·σ²·d² where |d| < 1/σ², else |d| - 0.5/σ² (σ = ``sigma``); weights default to 1."""
    x, y = ins["X"], ins["Y"]
    s2 = a["sigma"] * a["sigma"]
    diff = x - y
    if ins.get("InsideWeight") is not None:
        diff = diff * ins["InsideWeight"]
    ad = xp.abs(diff)
    err = xp.where(ad < 1.0 / s2, 0.5 * s2 * diff * diff, ad - 0.5 / s2)
    if ins.get("OutsideWeight") is not None:
        err = err * ins["OutsideWeight"]
    return {"Diff": diff, "Out": err.reshape(x.shape[0], -1).sum(axis=1, keepdims=True)}


@register("smooth_l1_loss_grad", ins=_W + ("Diff", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), attrs={"sigma": 1.0},
          role="backward")
def smooth_l1_loss_grad(xp, ins, a, ctx):
    d, g = ins["Diff"], ins["Out@GRAD"]
    s2 = a["sigma"] * a["sigma"]
    dd = xp.where(xp.abs(d) < 1.0 / s2, s2 * d, xp.sign(d))
    if ins.get("InsideWeight") is not None:
        dd = dd * ins["InsideWeight"] * ins["OutsideWeight"]
    dx = (dd.reshape(d.shape[0], -1) * g.reshape(-1, 1)).reshape(d.shape)
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = dx
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = -dx
    return res


# -- huber_loss -----------------------------------------------------------------------------


def _huber_grad(op):
    need = {s: op.inputs[s][0] for s in ("X", "Y") if op.inputs[s][0] in op.need}
    if not need:
        return []
    ins = {"Residual": list(op.outputs["Residual"]), "Out@GRAD": [grad_name(op.outputs["Out"][0])]}
    return [OpSpec("huber_loss_grad", ins, {grad_name(s): [op.grad_of(n)] for s, n in need.items()},
                   dict(op.attrs))]


@register("huber_loss", ins=("X", "Y"), outs=("Residual", "Out"), attrs={"delta": 1.0},
          infer=lambda ins, a: {"Residual": same_shape("huber_loss", ins, "X", "Y"), "Out": ins["X"]}, grad=_huber_grad)
def huber_loss(xp, ins, a, ctx):
    """Residual = Y - X; Out = 0.5·r² where |r| <= delta, else delta·(|r| - 0.5·delta)."""
    r = ins["Y"] - ins["X"]
    d = a["delta"]
    ar = xp.abs(r)
    return {"Residual": r, "Out": xp.where(ar <= d, 0.5 * r * r, d * (ar - 0.5 * d))}


@register("huber_loss_grad", ins=("Residual", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), attrs={"delta": 1.0},
          role="backward")
def huber_loss_grad(xp, ins, a, ctx):
    r, g = ins["Residual"], ins["Out@GRAD"]
    d = a["delta"]
    dy = xp.where(xp.abs(r) <= d, r, d * xp.sign(r)) * g  # d Out / d Y; X's is its negative
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = -dy
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = dy
    return res


# -- log_loss, kldiv_loss -------------------------------------------------------------------


def _log_loss_infer(ins, a):
    p = same_shape("log_loss", ins, "Predicted", "Labels")
    check(len(p.shape) == 2 and p.shape[1] == 1, f"log_loss: Predicted must be [N, 1], got {list(p.shape)}")
    return {"Loss": p}


@register("log_loss", ins=("Predicted", Slot("Labels", no_grad=True)), outs=("Loss",), attrs={"epsilon": 1e-4},
          infer=_log_loss_infer, grad=grad_of(("Predicted",), out="Loss"))
def log_loss(xp, ins, a, ctx):
    """Loss = -Labels·log(Predicted + ε) - (1 - Labels)·log(1 - Predicted + ε)."""
    p, y, eps = ins["Predicted"], ins["Labels"], a["epsilon"]
    return {"Loss": -(y * xp.log(p + eps)) - (1 - y) * xp.log(1 - p + eps)}


@register("log_loss_grad", ins=("Predicted", "Labels", "Loss@GRAD"), outs=("Predicted@GRAD",),
          attrs={"epsilon": 1e-4}, role="backward")
def log_loss_grad(xp, ins, a, ctx):
    p, y, g, eps = ins["Predicted"], ins["Labels"], ins["Loss@GRAD"], a["epsilon"]
    return {"Predicted@GRAD": g * (-(y / (p + eps)) + (1 - y) / (1 - p + eps))}


_REDUCTIONS = ("none", "batchmean", "mean", "sum")


def _kldiv_infer(ins, a):
    x = same_shape("kldiv_loss", ins, "X", "Target")
    check(a["reduction"] in _REDUCTIONS, f"kldiv_loss: reduction {a['reduction']!r} is not one of {_REDUCTIONS}")
    return {"Loss": x if a["reduction"] == "none" else Meta((1,), x.dtype)}


def _kldiv_scale(a, x) -> float:
    return {"none": 1, "sum": 1, "mean": max(x.size, 1), "batchmean": max(x.shape[0], 1)}[a["reduction"]]


@register("kldiv_loss", ins=("X", Slot("Target", no_grad=True)), outs=("Loss",), attrs={"reduction": "mean"},
          infer=_kldiv_infer, grad=grad_of(("X",), out="Loss"))
def kldiv_loss(xp, ins, a, ctx):
    """Loss = Target·(log Target - X) elementwise (X holds log-probabilities), 0 where
    Target <= 0 (NOTE(kldiv-zero)); then ``reduction``: none, sum, mean (over every element)
    or batchmean (the sum over dim 0's size), the last three giving shape [1].

    NOTE(kldiv-zero): Fluid 1.8's kernel zeroes only Target < 0, so a Target of exactly 0 gives
    0·log 0 = NaN; Paddle 2.x and we give 0 there, and the gradient is 0 as in both.
    """
    x, t = ins["X"], ins["Target"]
    keep = t > 0
    out = xp.where(keep, t * (xp.log(xp.where(keep, t, xp.ones_like(t))) - x), xp.zeros_like(x))
    if a["reduction"] == "none":
        return {"Loss": out}
    return {"Loss": (out.sum() / _kldiv_scale(a, x)).reshape(1).astype(x.dtype, copy=False)}


@register("kldiv_loss_grad", ins=("X", "Target", "Loss@GRAD"), outs=("X@GRAD",), attrs={"reduction": "mean"},
          role="backward")
def kldiv_loss_grad(xp, ins, a, ctx):
    x, t, g = ins["X"], ins["Target"], ins["Loss@GRAD"]
    dx = xp.where(t > 0, -t, xp.zeros_like(t)) * g
    return {"X@GRAD": (dx / _kldiv_scale(a, x)).astype(x.dtype, copy=False)}
