"""Losses: square_error_cost, cross_entropy, softmax_with_cross_entropy.

NOTE(hard-labels): a hard label is an integer class id per row, shaped like the input with its
last (class) dim replaced by 1 ([N, C] -> [N, 1]). A row whose label equals ``ignore_index``
(default -100, as in Fluid) gets loss 0 and gradient 0. Any other label outside [0, C) is an
error that names the label and C. A soft label is a distribution with the input's shape.

NOTE(tolerable-log): Fluid's cross entropy clips ``log(p)`` to ±1e20 (``TolerableValue``), so
``p = 0`` gives a loss of 1e20 instead of inf; we do the same.
"""
from __future__ import annotations

from placegroup.ops.activation import reduce_axis, shifted_logits
from placegroup.ops.registry import Meta, Slot, check, grad_of, register

_APPROX_INF = 1e20  # See NOTE(tolerable-log).


def _sec_infer(ins, attrs):
    x, y = ins["X"], ins["Y"]
    check(len(x.shape) == len(y.shape), f"input {list(x.shape)} and label {list(y.shape)} differ in rank")
    return {"Out": x}


@register("square_error_cost", ins=("X", Slot("Y", no_grad=True)), outs=("Out",), infer=_sec_infer,
          grad=grad_of(("X", "Y")))
def square_error_cost(xp, ins, a, ctx):
    """Out = (X - Y)², elementwise."""
    d = ins["X"] - ins["Y"]
    return {"Out": d * d}


@register("square_error_cost_grad", ins=("X", "Y", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Y@GRAD", dispensable=True)), role="backward")
def square_error_cost_grad(xp, ins, a, ctx):
    g = 2 * (ins["X"] - ins["Y"]) * ins["Out@GRAD"]
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = g
    if "Y@GRAD" in ctx.outputs:
        res["Y@GRAD"] = -g
    return res


# -- cross entropy --------------------------------------------------------------------------


def _label_infer(op: str, x: Meta, label: Meta, soft: bool, x_slot: str) -> tuple:
    xs, ls = tuple(x.shape), tuple(label.shape)
    want = xs if soft else xs[:-1] + (1,)
    ok = len(ls) == len(xs) and all(a == b or -1 in (a, b) for a, b in zip(ls, want))
    kind = "soft label (a distribution per row)" if soft else "hard label (one class id per row)"
    check(ok, f"{op}: Label{list(ls)} does not fit {x_slot}{list(xs)}: a {kind} must have shape "
              f"{list(want)}")
    if soft:
        check(label.dtype == x.dtype, f"{op}: a soft Label must have {x_slot}'s dtype {x.dtype}, "
                                      f"got {label.dtype}")
    else:
        check(label.dtype in ("int64", "int32"), f"{op}: a hard Label must be int64 (or int32), got "
                                                 f"{label.dtype}; set soft_label=True for a distribution")
    return xs[:-1] + (1,)


def _check_labels(xp, op: str, label, n_classes: int, ignore_index: int) -> None:
    """Raise if a hard label is outside [0, C) and not ``ignore_index`` (NOTE(hard-labels))."""
    if label.size == 0 or (int(label.min()) >= 0 and int(label.max()) < n_classes):
        return
    bad = ((label < 0) | (label >= n_classes)) & (label != ignore_index)
    if bool(bad.any()):
        v = int(label[bad].ravel()[0])
        raise ValueError(f"{op}: label {v} is out of range for {n_classes} classes (valid labels are "
                         f"0..{n_classes - 1}, or ignore_index={ignore_index})")


def _pick(xp, x, label):
    """x[..., label[..., 0]] along the last axis, keeping it as a size-1 dim (labels in range)."""
    return xp.take_along_axis(x, label.astype("int64", copy=False), axis=-1)


def _ce_infer(ins, a):
    x = ins["X"]
    return {"Y": Meta(_label_infer("cross_entropy", x, ins["Label"], a["soft_label"], "X"), x.dtype)}


_CE_ATTRS = {"soft_label": False, "ignore_index": -100}


@register("cross_entropy", ins=("X", Slot("Label", no_grad=True)), outs=("Y",), attrs=_CE_ATTRS,
          infer=_ce_infer, grad=grad_of(("X",), out="Y"))
def cross_entropy(xp, ins, a, ctx):
    """Y = -log(X[label]) per row (hard labels) or -Σ label·log(X) (soft); X holds
    probabilities over the last dim (NOTE(hard-labels), NOTE(tolerable-log))."""
    x, label = ins["X"], ins["Label"]
    if a["soft_label"]:
        logx = xp.clip(xp.log(x), -_APPROX_INF, _APPROX_INF)
        return {"Y": -(label * logx).sum(axis=-1, keepdims=True)}
    _check_labels(xp, "cross_entropy", label, x.shape[-1], a["ignore_index"])
    keep = label != a["ignore_index"]
    p = _pick(xp, x, xp.where(keep, label, 0))
    y = -xp.clip(xp.log(p), -_APPROX_INF, _APPROX_INF)
    return {"Y": xp.where(keep, y, xp.zeros_like(y))}


@register("cross_entropy_grad", ins=("X", "Label", "Y@GRAD"), outs=("X@GRAD",), attrs=_CE_ATTRS,
          role="backward")
def cross_entropy_grad(xp, ins, a, ctx):
    x, label, g = ins["X"], ins["Label"], ins["Y@GRAD"]
    if a["soft_label"]:
        return {"X@GRAD": -g * label / x}
    keep = label != a["ignore_index"]
    label = xp.where(keep, label, 0).astype("int64", copy=False)
    onehot = xp.arange(x.shape[-1]) == label  # [..., C] by broadcasting [..., 1]
    dx = xp.where(onehot & keep, -g / xp.where(onehot, x, xp.ones_like(x)), xp.zeros_like(x))
    return {"X@GRAD": dx}


# -- softmax_with_cross_entropy -------------------------------------------------------------


def _swce_infer(ins, a):
    x = ins["Logits"]
    check(a["axis"] in (-1, len(x.shape) - 1), f"softmax_with_cross_entropy: only the last axis is "
                                               f"supported, got axis={a['axis']} for Logits{list(x.shape)}")
    loss = _label_infer("softmax_with_cross_entropy", x, ins["Label"], a["soft_label"], "Logits")
    return {"Softmax": x, "Loss": Meta(loss, x.dtype)}


_SWCE_ATTRS = {"soft_label": False, "ignore_index": -100, "numeric_stable_mode": True, "axis": -1}


@register("softmax_with_cross_entropy", ins=("Logits", Slot("Label", no_grad=True)),
          outs=("Softmax", "Loss"), attrs=_SWCE_ATTRS, infer=_swce_infer,
          grad=grad_of(("Logits",), uses=("Label",), out="Loss", outs=("Softmax",)))
def softmax_with_cross_entropy(xp, ins, a, ctx):
    """Softmax = softmax(Logits) over the last dim; Loss = -log(Softmax[label]) per row.

    The loss is ``log Σ exp(s) - s[label]`` on the shifted logits ``s`` (NOTE(softmax-clip)), so
    it is finite for any logits; a row labelled ``ignore_index`` has loss 0.
    """
    x, label = ins["Logits"], ins["Label"]
    s = shifted_logits(xp, x, -1)
    e = xp.exp(s)
    total = reduce_axis(xp, xp.add, e, -1)
    log_total = xp.log(total)
    if a["soft_label"]:
        return {"Softmax": e / total, "Loss": (label * (log_total - s)).sum(axis=-1, keepdims=True)}
    _check_labels(xp, "softmax_with_cross_entropy", label, x.shape[-1], a["ignore_index"])
    if not _may_ignore(label, a["ignore_index"]):
        return {"Softmax": e / total, "Loss": log_total - _pick(xp, s, label)}
    keep = label != a["ignore_index"]
    loss = log_total - _pick(xp, s, xp.where(keep, label, 0))
    return {"Softmax": e / total, "Loss": xp.where(keep, loss, xp.zeros_like(loss))}


def _may_ignore(label, ignore_index: int) -> bool:
    """Whether some label may be ``ignore_index``: not when it is negative (the default, -100)
    and no label is (the masks that drop ignored rows are then skipped)."""
    return ignore_index >= 0 or (label.size > 0 and int(label.min()) < 0)


@register("softmax_with_cross_entropy_grad", ins=("Label", "Softmax", "Loss@GRAD"),
          outs=("Logits@GRAD",), attrs=_SWCE_ATTRS, role="backward")
def softmax_with_cross_entropy_grad(xp, ins, a, ctx):
    # d Loss / d Logits = Softmax - onehot(label) (or - label, soft), times the row's dLoss.
    # The Softmax output's own gradient is not used, as in Fluid.
    p, label, g = ins["Softmax"], ins["Label"], ins["Loss@GRAD"]
    if a["soft_label"]:
        return {"Logits@GRAD": (p - label) * g}
    onehot = xp.arange(p.shape[-1]) == label
    if not _may_ignore(label, a["ignore_index"]):
        return {"Logits@GRAD": (p - onehot) * g}
    keep = label != a["ignore_index"]
    return {"Logits@GRAD": xp.where(keep, (p - onehot) * g, xp.zeros_like(p))}
