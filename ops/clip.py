"""Ops of gradient clipping (``fluid.clip``): the pieces ``GradientClipByNorm`` and
``GradientClipByGlobalNorm`` are built from, so the norm can be taken over gradients that
live on several executors.

* ``squared_l2_norm``: ``Out = [sum(X**2)]`` of one gradient (or one block of it). A
  SelectedRows X is merged first, so a row listed twice counts once with its summed value,
  as Fluid 1.8 does (``merge_selected_rows`` + ``get_tensor_from_selected_rows``).
* ``clip_norm_scale``: ``Out = [clip_norm / max(sqrt(sum(X)), clip_norm)]`` over the squared
  norms ``X`` of every gradient of a clip group. Every gradient of the group is then
  multiplied by it (``scale`` with a ``ScaleTensor``): 1 when the norm is within bounds.

``GradientClipByNorm(c)`` is the same with a group of one parameter; the numbers equal
Fluid's ``clip_by_norm`` op (``x * c / norm`` when ``norm > c``, else ``x``).

None of these has a gradient: clipping acts on gradients, after backward.
"""
from __future__ import annotations

from placegroup.ops.registry import Meta, Slot, check, register
from placegroup.values import is_selected_rows


def _squared_infer(ins, a):
    return {"Out": Meta((1,), ins["X"].dtype)}


@register("squared_l2_norm", ins=("X",), outs=("Out",), infer=_squared_infer, role="optimize")
def squared_l2_norm(xp, ins, a, ctx):
    """Out = [sum of X's squares]; a SelectedRows X is merged first."""
    x = ins["X"]
    if is_selected_rows(x):
        x = x.merged(xp).values
    return {"Out": xp.sum(x * x).reshape(1).astype(x.dtype, copy=False)}


def _scale_infer(ins, a):
    check(a["clip_norm"] > 0, f"clip_norm_scale: clip_norm must be > 0, got {a['clip_norm']}")
    for i, m in enumerate(ins["X"]):
        check(tuple(m.shape) == (1,), f"clip_norm_scale: X[{i}] must be a [1] squared norm, got {list(m.shape)}")
    return {"Out": Meta((1,), ins["X"][0].dtype)}


@register("clip_norm_scale", ins=(Slot("X", duplicable=True),), outs=("Out",), attrs={"clip_norm": 1.0},
          infer=_scale_infer, role="optimize")
def clip_norm_scale(xp, ins, a, ctx):
    """Out = [clip_norm / max(global_norm, clip_norm)], global_norm = sqrt(sum of X)."""
    xs = ins["X"]
    total = xs[0] if len(xs) == 1 else xp.sum(xp.concatenate(xs)).reshape(1)
    norm = xp.sqrt(total)
    c = xp.asarray(a["clip_norm"], dtype=total.dtype)
    return {"Out": (c / xp.maximum(norm, c)).astype(total.dtype, copy=False)}
