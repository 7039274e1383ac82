"""``cross_entropy2``: Fluid 1.8's hard-label cross entropy that keeps the picked probability.

Y = -log(X[label]) per row over the last dim (clipped to 1e20, NOTE(tolerable-log) in
ops/loss.py), 0 where the label is ``ignore_index``; MatchX = X[label] (0 where ignored), the
one number the gradient needs: dX[label] = -dY / MatchX, 0 elsewhere. XShape holds X's shape
as Fluid's does (X's dims and a trailing 0, so it has no elements). Labels are as
NOTE(hard-labels) in ops/loss.py: one int id per row, shaped like X with a last dim of 1; one
outside [0, C) that is not ``ignore_index`` is an error.
"""
from __future__ import annotations

from placegroup.ops.loss import _APPROX_INF, _check_labels, _label_infer, _pick, label_column
from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, register


def _infer(ins, a):
    x = ins["X"]
    check(x.dtype in ("float16", "float32", "float64"), f"cross_entropy2: X must be a float, got {x.dtype}")
    y = Meta(_label_infer("cross_entropy2", x, ins["Label"], False, "X"), x.dtype)
    return {"Y": y, "MatchX": y, "XShape": Meta(tuple(x.shape) + (0,), x.dtype)}


def _grad(op):
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    ins = {"Label": list(op.inputs["Label"]), "MatchX": list(op.outputs["MatchX"]),
           "XShape": list(op.outputs["XShape"]), "Y@GRAD": [grad_name(op.outputs["Y"][0])]}
    return [OpSpec("cross_entropy2_grad", ins, {"X@GRAD": [op.grad_of(x)]}, dict(op.attrs))]


@register("cross_entropy2", ins=("X", Slot("Label", no_grad=True)),
          outs=("Y", Slot("MatchX", no_grad=True), Slot("XShape", no_grad=True)), attrs={"ignore_index": -100},
          infer=_infer, grad=_grad)
def cross_entropy2(xp, ins, a, ctx):
    x = ins["X"]
    label = label_column(ins["Label"], x.ndim)
    _check_labels(xp, "cross_entropy2", label, x.shape[-1], a["ignore_index"])
    keep = label != a["ignore_index"]
    p = xp.where(keep, _pick(xp, x, xp.where(keep, label, 0)), xp.zeros((), dtype=x.dtype))
    y = xp.where(keep, -xp.clip(xp.log(xp.where(keep, p, 1)), -_APPROX_INF, _APPROX_INF), 0).astype(x.dtype)
    return {"Y": y, "MatchX": p, "XShape": xp.zeros(tuple(x.shape) + (0,), dtype=x.dtype)}


@register("cross_entropy2_grad", ins=("Label", "MatchX", "XShape", "Y@GRAD"), outs=("X@GRAD",),
          attrs={"ignore_index": -100}, role="backward")
def cross_entropy2_grad(xp, ins, a, ctx):
    match, g = ins["MatchX"], ins["Y@GRAD"]
    shape = ins["XShape"].shape[:-1]
    label = label_column(ins["Label"], len(shape))
    keep = label != a["ignore_index"]
    lab = xp.where(keep, label, 0).astype("int64", copy=False)
    onehot = (xp.arange(shape[-1]) == lab) & keep
    return {"X@GRAD": xp.where(onehot, -g / xp.where(keep, match, 1), 0).astype(g.dtype)}
