"""Pairwise ranking losses of Fluid 1.8: rank_loss (RankNet), margin_rank_loss and bpr_loss.

NOTE(tolerable-exp): bpr_loss clips what overflows to ±1e20 (Paddle's ``TolerableValue``)
before it goes on: e^(x_j - x_label) becomes 1e20 where it is inf, so a row whose negatives
far outscore its label still has a finite loss (about 46 per such negative).
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.activation import _sigmoid
from placegroup.ops.loss import _softplus, same_shape, shapes_fit
from placegroup.ops.registry import Meta, Slot, check, grad_of, register


def _pair_infer(op: str, slots: tuple, out_slots: tuple):
    def infer(ins, a):
        for s in slots[1:]:
            same_shape(op, ins, slots[0], s)
        return {o: ins[slots[1]] for o in out_slots}

    return infer


@register("rank_loss", ins=(Slot("Label", no_grad=True), "Left", "Right"), outs=("Out",),
          infer=_pair_infer("rank_loss", ("Label", "Left", "Right"), ("Out",)), grad=grad_of(("Left", "Right")))
def rank_loss(xp, ins, a, ctx):
    """RankNet's loss: Out = log(1 + e^(Left - Right)) - Label·(Left - Right), Label in
    {0, 0.5, 1} saying whether Left should rank above Right."""
    o = ins["Left"] - ins["Right"]
    return {"Out": _softplus(xp, o) - ins["Label"] * o}


@register("rank_loss_grad", ins=("Label", "Left", "Right", "Out@GRAD"),
          outs=(Slot("Left@GRAD", dispensable=True), Slot("Right@GRAD", dispensable=True)), role="backward")
def rank_loss_grad(xp, ins, a, ctx):
    d = ins["Out@GRAD"] * (_sigmoid(xp, ins["Left"] - ins["Right"]) - ins["Label"])
    res = {}
    if "Left@GRAD" in ctx.outputs:
        res["Left@GRAD"] = d
    if "Right@GRAD" in ctx.outputs:
        res["Right@GRAD"] = -d
    return res


@register("margin_rank_loss", ins=(Slot("Label", no_grad=True), "X1", "X2"), outs=("Out", "Activated"),
          attrs={"margin": 0.0}, infer=_pair_infer("margin_rank_loss", ("Label", "X1", "X2"), ("Out", "Activated")),
          grad=grad_of(("X1", "X2"), uses=("Label",), outs=("Activated",)))
def margin_rank_loss(xp, ins, a, ctx):
    """Out = max(0, -Label·(X1 - X2) + margin), Label in {-1, 1}; Activated = [Out > 0]
    (kept for the gradient)."""
    out = xp.maximum(-ins["Label"] * (ins["X1"] - ins["X2"]) + a["margin"], 0)
    return {"Out": out, "Activated": (out > 0).astype(out.dtype)}


@register("margin_rank_loss_grad", ins=("Label", "Activated", "Out@GRAD"),
          outs=(Slot("X1@GRAD", dispensable=True), Slot("X2@GRAD", dispensable=True)), attrs={"margin": 0.0},
          role="backward")
def margin_rank_loss_grad(xp, ins, a, ctx):
    d = ins["Out@GRAD"] * ins["Activated"] * ins["Label"]
    res = {}
    if "X1@GRAD" in ctx.outputs:
        res["X1@GRAD"] = -d
    if "X2@GRAD" in ctx.outputs:
        res["X2@GRAD"] = d
    return res


# -- bpr_loss -------------------------------------------------------------------------------

_APPROX_INF = 1e20  # See NOTE(tolerable-exp).


def _bpr_infer(ins, a):
    x, label = ins["X"], ins["Label"]
    want = tuple(x.shape[:-1]) + (1,)
    check(shapes_fit(label.shape, want),
          f"bpr_loss: Label{list(label.shape)} must be {list(want)} (one class id per row of X{list(x.shape)})")
    check(label.dtype == "int64", f"bpr_loss: Label must be int64, got {label.dtype}")
    check(x.shape[-1] == -1 or x.shape[-1] >= 2, f"bpr_loss: X{list(x.shape)} needs at least 2 classes")
    return {"Y": Meta(want, x.dtype)}


def _bpr_parts(xp, x, label):
    """(e^(x_j - x_label) clipped (NOTE(tolerable-exp)), a mask of the negatives j != label)."""
    c = x.shape[-1]
    if label.size and (int(label.min()) < 0 or int(label.max()) >= c):
        v = int(label[(label < 0) | (label >= c)].ravel()[0])
        raise ValueError(f"bpr_loss: label {v} is out of range for {c} classes (valid labels are 0..{c - 1})")
    pos = xp.take_along_axis(x, label.astype("int64", copy=False), axis=-1)
    with np.errstate(over="ignore"):
        e = xp.exp(x - pos)
    e = xp.where(xp.isinf(e), xp.asarray(_APPROX_INF, dtype=x.dtype), e)
    return e, xp.arange(c) != label


@register("bpr_loss", ins=("X", Slot("Label", no_grad=True)), outs=("Y",), infer=_bpr_infer,
          grad=grad_of(("X",), out="Y"))
def bpr_loss(xp, ins, a, ctx):
    """Bayesian personalised ranking: Y = Σ_{j != label} log(1 + e^(X_j - X_label)) / (C - 1)
    per row of logits X [..., C]."""
    x = ins["X"]
    e, neg = _bpr_parts(xp, x, ins["Label"])
    t = xp.log(1 + e)
    return {"Y": xp.where(neg, t, xp.zeros_like(t)).sum(axis=-1, keepdims=True) / (x.shape[-1] - 1)}


@register("bpr_loss_grad", ins=("X", "Label", "Y@GRAD"), outs=("X@GRAD",), role="backward")
def bpr_loss_grad(xp, ins, a, ctx):
    # d/dx_j = σ(x_j - x_label)/(C-1) = 1/((C-1)(1 + e^(x_label - x_j))); x_label gets minus their sum
    x, g = ins["X"], ins["Y@GRAD"]
    label = ins["Label"].astype("int64", copy=False)
    e, neg = _bpr_parts(xp, -x, label)  # e^(x_label - x_j)
    dneg = xp.where(neg, g / ((x.shape[-1] - 1) * (1 + e)), xp.zeros_like(x))
    onehot = xp.arange(x.shape[-1]) == label
    return {"X@GRAD": dneg - onehot * dneg.sum(axis=-1, keepdims=True)}
