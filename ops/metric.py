"""Metrics: top_k and accuracy. Neither has a gradient.

``layers.accuracy(input, label, k)`` is ``top_k`` then ``accuracy``, as in Fluid: accuracy
reads the top-k ``Indices`` of each row and counts the rows whose label is among them.
"""
from __future__ import annotations

from placegroup.ops.registry import Meta, Slot, check, register


def _topk_infer(ins, a):
    x = ins["X"].shape
    k = a["k"]
    check(len(x) >= 1 and k >= 1 and (x[-1] == -1 or k <= x[-1]),
          f"top_k: k={k} must be in 1..{x[-1] if x else '?'} for X{list(x)}")
    out = tuple(x[:-1]) + (k,)
    return {"Out": Meta(out, ins["X"].dtype), "Indices": Meta(out, "int64")}


@register("top_k", ins=(Slot("X", no_grad=True),), outs=("Out", "Indices"), attrs={"k": 1},
          infer=_topk_infer)
def top_k(xp, ins, a, ctx):
    """Out, Indices = the k largest entries of each row of X (last dim), largest first; ties
    go to the lower index, as in Fluid."""
    x = ins["X"]
    # A stable sort of -X keeps equal values in index order.
    idx = xp.argsort(-x, axis=-1, kind="stable")[..., : a["k"]]
    return {"Out": xp.take_along_axis(x, idx, axis=-1), "Indices": idx.astype("int64", copy=False)}


def _acc_infer(ins, a):
    out, idx, label = ins["Out"].shape, ins["Indices"].shape, ins["Label"].shape
    check(tuple(out) == tuple(idx), f"accuracy: Out{list(out)} and Indices{list(idx)} differ")
    check(len(label) == 2 and label[1] == 1 and (label[0] == idx[0] or -1 in (label[0], idx[0])),
          f"accuracy: Label{list(label)} must be [N, 1] for Indices{list(idx)}")
    return {"Accuracy": Meta((1,), "float32"), "Correct": Meta((1,), "int64"),
            "Total": Meta((1,), "int64")}


@register("accuracy", ins=(Slot("Out", no_grad=True), Slot("Indices", no_grad=True),
                           Slot("Label", no_grad=True)),
          outs=("Accuracy", "Correct", "Total"), infer=_acc_infer)
def accuracy(xp, ins, a, ctx):
    """Correct = rows whose Label is among their top-k Indices; Total = rows;
    Accuracy = Correct / Total (0 for an empty batch)."""
    idx, label = ins["Indices"], ins["Label"]
    correct = (idx == label.reshape(-1, 1)).any(axis=-1).sum()
    total = idx.shape[0]
    acc = correct.astype("float32") / max(total, 1)
    return {"Accuracy": acc.reshape(1).astype("float32"), "Correct": correct.reshape(1).astype("int64"),
            "Total": xp.full((1,), total, dtype="int64")}
