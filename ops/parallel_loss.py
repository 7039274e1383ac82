"""parallel_softmax_with_cross_entropy: softmax cross-entropy over logits split by columns
among the members of a group (a model-parallel last layer), without the whole logits anywhere.

Member r holds the columns ``[r·C/K, (r+1)·C/K)`` of logits [N, C] (its fc shard's output)
and every row's global label. Per row::

    m = allreduce_max(max of my columns)            the global row max
    s = allreduce_sum(sum of exp(clip(x - m)))      the global sum-exp (NOTE(softmax-clip))
    p = allreduce_sum(clip(x[label] - m) if the label is one of my columns else 0)
    loss = log(s) - p                               = -log softmax[label], as in one process

so memory per member is O(N · C/K). ``Softmax`` is this member's columns of the softmax.

NOTE(parallel-ce-grad): d loss / d x = softmax - onehot(label), column by column, so each
member's gradient is local once it has the loss gradient of *every* row. In the model-parallel
data flow each member keeps only its own rows of the loss (``c_split``), whose gradient is
zero outside them; the grad op sums the members' loss gradients (one allreduce of [N, 1]) to
get every row's, then multiplies locally. This assumes every row's loss is taken by exactly
one member, which is what the model-parallel pass builds.
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.activation import SOFTMAX_CLIP
from placegroup.ops.registry import Meta, Slot, check, grad_name, OpSpec, register

_ATTRS = {"nranks": 1, "ignore_index": -100}


def _infer(ins, a):
    x, label = ins["Logits"], ins["Label"]
    check(len(x.shape) == 2 and tuple(label.shape)[1:] == (1,),
          f"parallel_softmax_with_cross_entropy: Logits [N, C/K] and Label [N, 1], got "
          f"{list(x.shape)} and {list(label.shape)}")
    return {"Softmax": x, "Loss": Meta((x.shape[0], 1), x.dtype)}


def _local_labels(xp, label, width: int, rank: int, ignore: int):
    """(column of the label in my shard or -1, mask of my rows' labels, mask of ignored rows)."""
    lab = label.reshape(-1).astype(np.int64)
    ignored = lab == ignore
    col = lab - rank * width
    mine = (col >= 0) & (col < width) & ~ignored
    return xp.where(mine, col, 0), mine, ignored


def _grad(op):
    x = op.inputs["Logits"][0]
    if x not in op.need:
        return []
    return [OpSpec("parallel_softmax_with_cross_entropy_grad",
                   {"Softmax": op.outputs["Softmax"], "Label": op.inputs["Label"],
                    "Loss@GRAD": [grad_name(op.outputs["Loss"][0])]},
                   {"Logits@GRAD": [op.grad_of(x)]}, dict(op.attrs))]


@register("parallel_softmax_with_cross_entropy", ins=("Logits", Slot("Label", no_grad=True)),
          outs=("Softmax", "Loss"), attrs=_ATTRS, infer=_infer, grad=_grad, role="comm", wants_comm=True,
          collective_calls=("m", "s", "p"))
def parallel_softmax_with_cross_entropy(xp, ins, attrs, ctx):
    x, label = ins["Logits"], ins["Label"]
    comm, tag, step = ctx.comm, ctx.tag or "c", ctx.step
    host = (lambda v: v) if xp is np else (lambda v: v.get())
    m = xp.asarray(comm.allreduce(host(x.max(axis=1, keepdims=True)), "max", tag + "m", step))
    shifted = xp.maximum(x - m, SOFTMAX_CLIP)
    e = xp.exp(shifted)
    s = xp.asarray(comm.allreduce(host(e.sum(axis=1, keepdims=True)), "sum", tag + "s", step))
    col, mine, ignored = _local_labels(xp, label, x.shape[1], comm.rank, attrs["ignore_index"])
    picked = xp.where(mine, xp.take_along_axis(shifted, col[:, None], axis=1)[:, 0], 0).astype(x.dtype)
    p = xp.asarray(comm.allreduce(host(picked[:, None]), "sum", tag + "p", step))
    loss = xp.where(ignored[:, None], 0, xp.log(s) - p).astype(x.dtype)
    return {"Softmax": (e / s).astype(x.dtype), "Loss": loss}


@register("parallel_softmax_with_cross_entropy_grad", ins=("Softmax", "Label", "Loss@GRAD"),
          outs=("Logits@GRAD",), attrs=_ATTRS, role="backward", wants_comm=True, collective_calls=("g",))
def parallel_softmax_with_cross_entropy_grad(xp, ins, attrs, ctx):
    """Logits@GRAD = (Softmax - onehot) * (every member's Loss@GRAD summed): NOTE(parallel-ce-grad)."""
    sm, label, g = ins["Softmax"], ins["Label"], ins["Loss@GRAD"]
    comm, tag, step = ctx.comm, ctx.tag or "c", ctx.step
    g = xp.asarray(comm.allreduce(g if xp is np else g.get(), "sum", tag + "g", step))
    col, mine, ignored = _local_labels(xp, label, sm.shape[1], comm.rank, attrs["ignore_index"])
    d = sm.copy()
    rows = xp.nonzero(mine)[0]
    d[rows, col[rows]] -= 1
    d *= xp.where(ignored[:, None], 0, g).astype(d.dtype)
    return {"Logits@GRAD": d}
