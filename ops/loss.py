"""Losses: square_error_cost, cross_entropy, softmax_with_cross_entropy, the sigmoid losses
(sigmoid_cross_entropy_with_logits, sigmoid_focal_loss, teacher_student_sigmoid_loss) and
log_softmax, and center_loss. Distances and regression losses are in ops/distance.py, ranking
losses in ops/rank_loss.py, the sampled ones (nce, hierarchical_sigmoid, sample_logits) in
ops/sampled_loss.py.

NOTE(hard-labels): a hard label is an integer class id per row, shaped like the input with its
last (class) dim replaced by 1 ([N, C] -> [N, 1]), or, as Fluid 1.8 takes it too, without that
dim ([B, T, C] -> [B, T]; the loss is [B, T, 1] either way). A row whose label equals ``ignore_index``
(default -100, as in Fluid) gets loss 0 and gradient 0. Any other label outside [0, C) is an
error that names the label and C. A soft label is a distribution with the input's shape.

NOTE(tolerable-log): Fluid's cross entropy clips ``log(p)`` to ±1e20 (``TolerableValue``), so
``p = 0`` gives a loss of 1e20 instead of inf; we do the same.

NOTE(center-loss): Fluid 1.8's center_loss moves its centers inside the forward op, not by an
optimizer: with ``d_i = X_i - Centers[label_i]``, Loss_i = |d_i|² / 2 and SampleCenterDiff = d;
then, when ``need_update``, ``CentersOut[c] = Centers[c] + alpha · Σ_{label_i = c} d_i / (1 +
#{i: label_i = c})`` (the count starts at 1, so a class absent from the batch stays put), alpha
being CenterUpdateRate's value, in the input's dtype as Fluid's kernel. CentersOut is Centers,
updated in place. The gradient reaches X only: dX = dLoss · d (the centers are no parameter of
the loss).
"""
from __future__ import annotations

from placegroup.errors import OutOfRange  # a user's data, not a bug: one line (NOTE(user-errors))
from placegroup.ops.activation import _sigmoid, reduce_axis, shifted_logits
from placegroup.ops.registry import Meta, Slot, check, grad_of, register
from placegroup.values import scatter_add

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
    if not soft and len(ls) == len(xs) - 1:  # the class dim left out (NOTE(hard-labels))
        ls = ls + (1,)
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
        raise OutOfRange(f"{op}: label {v} is out of range for {n_classes} classes (valid labels are "
                         f"0..{n_classes - 1}, or ignore_index={ignore_index})")


def label_column(label, ndim: int):
    """A hard label with its class dim, of rank ``ndim`` (NOTE(hard-labels))."""
    return label[..., None] if label.ndim == ndim - 1 else label


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
    label = label_column(label, x.ndim)
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
    label = label_column(label, x.ndim)
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


# -- sigmoid losses, and the shape check of the elementwise losses -------------------------


def shapes_fit(a, b) -> bool:
    """Shapes ``a`` and ``b`` are equal where both are known (-1 is an unknown size)."""
    return len(a) == len(b) and all(p == q or -1 in (p, q) for p, q in zip(a, b))


def same_shape(op: str, ins, a_slot: str, b_slot: str, same_dtype: bool = False) -> Meta:
    """``a_slot``'s meta, after checking that ``b_slot`` has its shape (and dtype, with
    ``same_dtype``): the ``infer`` check of the elementwise losses here and in
    ops/distance.py and ops/rank_loss.py."""
    a, b = ins[a_slot], ins[b_slot]
    check(shapes_fit(a.shape, b.shape), f"{op}: {b_slot}{list(b.shape)} must have the shape of {a_slot}{list(a.shape)}")
    check(not same_dtype or a.dtype == b.dtype,
          f"{op}: {b_slot} must have {a_slot}'s dtype {a.dtype}, got {b.dtype}")
    return a


def _softplus(xp, x):
    """log(1 + e^x) as Paddle's loss kernels write it: max(x, 0) + log(1 + e^-|x|)."""
    return xp.maximum(x, 0) + xp.log(1 + xp.exp(-xp.abs(x)))


def _sce_norm(xp, label, ignore_index: int, normalize: bool):
    """The divisor of Out (NOTE(sigmoid-ce-normalize)): the count of labels that are not
    ``ignore_index``, at least 1; 1 without ``normalize``."""
    if not normalize:
        return 1
    return max(int((xp.abs(label - ignore_index) > 1e-6).sum()), 1)


_SCE_ATTRS = {"ignore_index": -100, "normalize": False}


@register("sigmoid_cross_entropy_with_logits", ins=("X", Slot("Label", no_grad=True)), outs=("Out",),
          attrs=_SCE_ATTRS, infer=lambda ins, a: {"Out": same_shape("sigmoid_cross_entropy_with_logits",
                                                                    ins, "X", "Label", True)},
          grad=grad_of(("X",), uses=("X", "Label")))
def sigmoid_cross_entropy_with_logits(xp, ins, a, ctx):
    """Out = max(X, 0) - X·Label + log(1 + e^-|X|) elementwise: the cross entropy of
    sigmoid(X) against probabilities Label; 0 where ``int(Label) == ignore_index``; divided
    by the count of labels that are not ``ignore_index`` when ``normalize``.

    NOTE(sigmoid-ce-normalize): as Paddle, a label is ignored when its truncation to int equals
    ``ignore_index``, and counted for ``normalize`` when it is more than 1e-6 away from it.
    Paddle divides by the count clipped to an int >= 1e-5, which is 0 (NaN loss) when every
    label is ignored; we divide by 1 instead (the loss is then 0).
    """
    x, label = ins["X"], ins["Label"]
    out = _softplus(xp, x) - x * label
    out = xp.where(xp.trunc(label) == a["ignore_index"], xp.zeros_like(out), out)
    return {"Out": out / _sce_norm(xp, label, a["ignore_index"], a["normalize"])}


@register("sigmoid_cross_entropy_with_logits_grad", ins=("X", "Label", "Out@GRAD"), outs=("X@GRAD",),
          attrs=_SCE_ATTRS, role="backward")
def sigmoid_cross_entropy_with_logits_grad(xp, ins, a, ctx):
    x, label, g = ins["X"], ins["Label"], ins["Out@GRAD"]
    dx = (_sigmoid(xp, x) - label) * g
    dx = xp.where(xp.trunc(label) == a["ignore_index"], xp.zeros_like(dx), dx)
    return {"X@GRAD": dx / _sce_norm(xp, label, a["ignore_index"], a["normalize"])}


def _focal_infer(ins, a):
    x, label, fg = ins["X"], ins["Label"], ins["FgNum"]
    check(len(x.shape) == 2, f"sigmoid_focal_loss: X must be [N, C], got X{list(x.shape)}")
    rows = len(label.shape) == 2 and label.shape[1] == 1 and -1 in (x.shape[0], label.shape[0]) or \
        tuple(label.shape) == (x.shape[0], 1)
    check(rows, f"sigmoid_focal_loss: Label{list(label.shape)} must be [N, 1] for X{list(x.shape)}")
    check(label.dtype == "int32" and fg.dtype == "int32",
          f"sigmoid_focal_loss: Label and FgNum must be int32, got {label.dtype} and {fg.dtype}")
    return {"Out": x}


_FOCAL_ATTRS = {"gamma": 2.0, "alpha": 0.25}
_FLT_MIN = 1.1754943508222875e-38  # Paddle clips p at FLT_MIN before its log, also in float64


def _focal_terms(xp, ins, a):
    """(p, log p, log(1 - p), positive mask, negative mask, fg count) of sigmoid_focal_loss."""
    x, label, fg = ins["X"], ins["Label"], ins["FgNum"]
    g = label.reshape(-1, 1)
    cls = xp.arange(1, x.shape[1] + 1)
    pos, neg = g == cls, (g != -1) & (g != cls)
    p = _sigmoid(xp, x)
    ge = x >= 0
    log1mp = -x * ge - xp.log(1 + xp.exp(x - 2 * x * ge))  # log(1 - p), stable (Paddle's form)
    return p, xp.log(xp.maximum(p, _FLT_MIN)), log1mp, pos, neg, max(int(fg.reshape(-1)[0]), 1)


@register("sigmoid_focal_loss", ins=("X", Slot("Label", no_grad=True), Slot("FgNum", no_grad=True)),
          outs=("Out",), attrs=_FOCAL_ATTRS, infer=_focal_infer, grad=grad_of(("X",)))
def sigmoid_focal_loss(xp, ins, a, ctx):
    """Out[i, d] = -α/fg·(1-p)^γ·log p if Label[i] = d + 1, -(1-α)/fg·p^γ·log(1-p) if
    Label[i] is another class or 0 (background), 0 if Label[i] = -1 (ignored); p =
    sigmoid(X[i, d]), fg = max(FgNum, 1). Classes are 1-based, as in Fluid's detection op."""
    x = ins["X"]
    p, logp, log1mp, pos, neg, fg = _focal_terms(xp, ins, a)
    gamma, alpha = a["gamma"], a["alpha"]
    out = -(pos * (1 - p) ** gamma * logp) * (alpha / fg) - (neg * p ** gamma * log1mp) * ((1 - alpha) / fg)
    return {"Out": out.astype(x.dtype, copy=False)}


@register("sigmoid_focal_loss_grad", ins=("X", "Label", "FgNum", "Out@GRAD"), outs=("X@GRAD",),
          attrs=_FOCAL_ATTRS, role="backward")
def sigmoid_focal_loss_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    p, logp, log1mp, pos, neg, fg = _focal_terms(xp, ins, a)
    gamma, alpha = a["gamma"], a["alpha"]
    d_pos = (1 - p) ** gamma * (1 - p - p * gamma * logp)
    d_neg = p ** gamma * (gamma * (1 - p) * log1mp - p)
    dx = -(pos * d_pos) * (alpha / fg) - (neg * d_neg) * ((1 - alpha) / fg)
    return {"X@GRAD": (dx * g).astype(x.dtype, copy=False)}


_TS_ATTRS = {"soft_max_up_bound": 15.0, "soft_max_lower_bound": -15.0}


@register("teacher_student_sigmoid_loss", ins=("X", Slot("Label", no_grad=True)), outs=("Y",), attrs=_TS_ATTRS,
          infer=lambda ins, a: {"Y": same_shape("teacher_student_sigmoid_loss", ins, "X", "Label")},
          grad=grad_of(("X",), out="Y"))
def teacher_student_sigmoid_loss(xp, ins, a, ctx):
    """Y = the click loss plus the teacher loss, by Label (NOTE(teacher-student)): Label < -1:
    no teacher, no click; -1 <= Label < 0: no teacher, click; 0 <= Label < 1: teacher value
    Label, no click; Label >= 1: teacher value Label - 1, click. With sp = log(1 + e^X):
    sp, sp - X, 2·sp - X·Label and 2·sp - X·Label respectively.

    NOTE(teacher-student): the bounds clip X only in the gradient, which is 0 where X lies on
    or outside them (Paddle's kernel); the forward value is never clipped.
    """
    x, label = ins["X"], ins["Label"].astype(ins["X"].dtype, copy=False)
    sp = _softplus(xp, x)
    y = xp.where(label < -1, sp, xp.where(label < 0, sp - x, 2 * sp - x * label))
    return {"Y": y}


@register("teacher_student_sigmoid_loss_grad", ins=("X", "Label", "Y@GRAD"), outs=("X@GRAD",), attrs=_TS_ATTRS,
          role="backward")
def teacher_student_sigmoid_loss_grad(xp, ins, a, ctx):
    x, label, g = ins["X"], ins["Label"].astype(ins["X"].dtype, copy=False), ins["Y@GRAD"]
    lo, hi = a["soft_max_lower_bound"], a["soft_max_up_bound"]
    p = _sigmoid(xp, xp.minimum(xp.maximum(x, lo), hi))
    dx = xp.where(label < -1, p, xp.where(label < 0, p - 1, 2 * p - label))
    return {"X@GRAD": xp.where((x > lo) & (x < hi), dx * g, xp.zeros_like(dx))}


# -- log_softmax (Paddle 2.x's op) ------------------------------------------------------------


def _log_softmax_infer(ins, a):
    x = ins["X"]
    check(-len(x.shape) <= a["axis"] < len(x.shape), f"log_softmax: axis {a['axis']} is out of range for "
                                                     f"X{list(x.shape)}")
    return {"Out": x}


@register("log_softmax", ins=("X",), outs=("Out",), attrs={"axis": -1}, infer=_log_softmax_infer,
          grad=grad_of(("X",), uses=(), outs=("Out",)))
def log_softmax(xp, ins, a, ctx):
    """Out = X - max - log Σ exp(X - max) along ``axis``: Paddle 2.x's log_softmax op (Fluid
    1.8's layer is softmax then log, see placegroup/layers/loss.py), without softmax's clip."""
    s = ins["X"] - ins["X"].max(axis=a["axis"], keepdims=True)
    return {"Out": s - xp.log(xp.exp(s).sum(axis=a["axis"], keepdims=True))}


@register("log_softmax_grad", ins=("Out", "Out@GRAD"), outs=("X@GRAD",), attrs={"axis": -1}, role="backward")
def log_softmax_grad(xp, ins, a, ctx):
    o, g = ins["Out"], ins["Out@GRAD"]
    return {"X@GRAD": g - xp.exp(o) * g.sum(axis=a["axis"], keepdims=True)}


# -- center_loss (NOTE(center-loss)) --------------------------------------------------------


def _center_infer(ins, a):
    x, label, centers, rate = ins["X"], ins["Label"], ins["Centers"], ins["CenterUpdateRate"]
    op, k = "center_loss", a["cluster_num"]
    check(len(x.shape) == 2, f"{op}: X must be [N, D], got X{list(x.shape)}")
    check(label.dtype == "int64" and len(label.shape) in (1, 2) and shapes_fit(label.shape[:1], x.shape[:1])
          and (len(label.shape) == 1 or label.shape[1] == 1),
          f"{op}: Label must be int64 [N, 1] for X{list(x.shape)}, got {label.dtype}{list(label.shape)}")
    check(shapes_fit(centers.shape, (k, x.shape[1])),
          f"{op}: Centers{list(centers.shape)} must be [cluster_num, D] = [{k}, {x.shape[1]}]")
    check(len(rate.shape) >= 1 and all(d in (1, -1) for d in rate.shape),
          f"{op}: CenterUpdateRate must hold one value, got CenterUpdateRate{list(rate.shape)}")
    return {"CentersOut": centers, "SampleCenterDiff": x, "Loss": Meta((x.shape[0], 1), x.dtype)}


@register("center_loss", ins=("X", Slot("Label", no_grad=True), Slot("Centers", no_grad=True),
                              Slot("CenterUpdateRate", no_grad=True)),
          outs=(Slot("CentersOut", no_grad=True), Slot("SampleCenterDiff", no_grad=True), "Loss"),
          attrs={"cluster_num": 0, "need_update": False}, infer=_center_infer, inplace={"CentersOut": "Centers"},
          grad=grad_of(("X",), uses=(), out="Loss", outs=("SampleCenterDiff",)))
def center_loss(xp, ins, a, ctx):
    """Loss = |X - Centers[label]|² / 2 per row; the centers move toward their rows when
    ``need_update`` (NOTE(center-loss)).

    Raises:
        ValueError: a label outside [0, cluster_num).
    """
    x, centers = ins["X"], ins["Centers"]
    label = ins["Label"].reshape(-1).astype("int64", copy=False)
    k = a["cluster_num"]
    if label.size and (int(label.min()) < 0 or int(label.max()) >= k):
        bad = int(label[(label < 0) | (label >= k)][0])
        raise ValueError(f"center_loss: label {bad} is out of range for cluster_num={k} (valid are 0..{k - 1})")
    diff = x - centers[label]
    out = centers if ctx.inplace else centers.copy()
    if a["need_update"]:
        acc = xp.zeros(centers.shape, dtype=x.dtype)
        scatter_add(xp, acc, label, diff)
        count = (xp.bincount(label, minlength=k) + 1).astype(x.dtype)
        alpha = ins["CenterUpdateRate"].reshape(-1)[:1].astype(x.dtype)
        out += (acc * (alpha / count)[:, None]).astype(out.dtype, copy=False)
    return {"CentersOut": out, "SampleCenterDiff": diff, "Loss": (diff * diff).sum(axis=1, keepdims=True) / 2}


@register("center_loss_grad", ins=("SampleCenterDiff", "Loss@GRAD"), outs=("X@GRAD",),
          attrs={"cluster_num": 0, "need_update": False}, role="backward")
def center_loss_grad(xp, ins, a, ctx):
    """X@GRAD = Loss@GRAD · SampleCenterDiff, row by row."""
    return {"X@GRAD": ins["Loss@GRAD"].reshape(-1, 1) * ins["SampleCenterDiff"]}
