"""Activations: relu, sigmoid, tanh, softmax, and their gradients.

Each gradient reads the forward *output* rather than the input where that is cheaper (Fluid
does the same): relu' = [Out > 0], sigmoid' = Out·(1-Out), tanh' = 1-Out²,
softmax' ·g = Out·(g - Σ g·Out).

NOTE(softmax-clip): Fluid/Paddle's softmax clips the shifted logits ``x - max(x)`` at -64
before ``exp`` (``ValueClip`` in softmax_impl.h), so no probability is ever below
exp(-64)/C ≈ 1.6e-28 and ``-log`` of one is at most about 64 + log C. We do the same, so
losses match Paddle's to the bit in the tails; the gradient (from Out) then treats the clipped
entries as if unclipped, as Paddle's does. ``softmax_with_cross_entropy`` (ops/loss.py) shares
``shifted_logits``.
"""
from __future__ import annotations

from placegroup.ops.registry import Meta, check, grad_of, register

SOFTMAX_CLIP = -64.0  # See NOTE(softmax-clip).


def _unary(name: str, fwd, dfwd, doc: str) -> None:
    """Register ``name`` (Out = fwd(X)) and ``name_grad`` (X@GRAD = dfwd(Out, Out@GRAD))."""

    @register(name, ins=("X",), outs=("Out",), infer=lambda ins, a: {"Out": ins["X"]},
              grad=grad_of(("X",), uses=(), outs=("Out",)))
    def forward(xp, ins, a, ctx):
        return {"Out": fwd(xp, ins["X"])}

    @register(name + "_grad", ins=("Out", "Out@GRAD"), outs=("X@GRAD",), role="backward")
    def backward(xp, ins, a, ctx):
        return {"X@GRAD": dfwd(xp, ins["Out"], ins["Out@GRAD"])}

    forward.__doc__ = doc


def _sigmoid(xp, x):
    # 1/(1+e^-x) overflows e^-x for x < -88 in float32; with e = e^-|x| both branches stay
    # finite and give the same values (Paddle's gives an exact 0 where this gives a denormal).
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


_unary("relu", lambda xp, x: xp.maximum(x, 0), lambda xp, o, g: g * (o > 0),
       "Out = max(X, 0).")
_unary("sigmoid", _sigmoid, lambda xp, o, g: g * o * (1 - o), "Out = 1 / (1 + exp(-X)).")
_unary("tanh", lambda xp, x: xp.tanh(x), lambda xp, o, g: g * (1 - o * o), "Out = tanh(X).")


def shifted_logits(xp, x, axis: int):
    """``x - max(x, axis)``, clipped below at -64 (NOTE(softmax-clip))."""
    return xp.maximum(x - reduce_axis(xp, xp.maximum, x, axis), SOFTMAX_CLIP)


NARROW = 8


def reduce_axis(xp, ufunc, x, axis: int):
    """``x.max(axis, keepdims=True)`` for ``ufunc`` ``xp.maximum``, else ``x.sum(...)`` (``xp.add``).

    NOTE(narrow-reduce): numpy reduces a short last axis slowly (max over [1024, 2] takes
    30 us, far more than the arithmetic), so an axis of at most NARROW entries is reduced a
    column at a time, in order; for a sum of fewer than 8 entries numpy's pairwise sum adds
    in that same order, so the result is the same to the bit."""
    n = x.shape[axis] if x.ndim else 0
    if xp.__name__ != "numpy" or not 1 <= n <= NARROW or axis not in (-1, x.ndim - 1):
        return x.max(axis=axis, keepdims=True) if ufunc is xp.maximum else x.sum(axis=axis, keepdims=True)
    acc = x[..., 0:1].copy()
    for j in range(1, n):
        ufunc(acc, x[..., j:j + 1], out=acc)
    return acc


def _softmax_infer(ins, a):
    x = ins["X"]
    axis = a["axis"]
    check(-len(x.shape) <= axis < len(x.shape),
          f"softmax: axis {axis} is out of range for X{list(x.shape)}")
    return {"Out": Meta(x.shape, x.dtype)}


@register("softmax", ins=("X",), outs=("Out",), attrs={"axis": -1, "use_cudnn": False},
          infer=_softmax_infer, grad=grad_of(("X",), uses=(), outs=("Out",)))
def softmax(xp, ins, a, ctx):
    """Out = exp(X - max) / Σ exp(X - max) along ``axis`` (default the last)."""
    e = xp.exp(shifted_logits(xp, ins["X"], a["axis"]))
    return {"Out": e / reduce_axis(xp, xp.add, e, a["axis"])}


@register("softmax_grad", ins=("Out", "Out@GRAD"), outs=("X@GRAD",),
          attrs={"axis": -1, "use_cudnn": False}, role="backward")
def softmax_grad(xp, ins, a, ctx):
    o, g = ins["Out"], ins["Out@GRAD"]
    return {"X@GRAD": o * (g - reduce_axis(xp, xp.add, g * o, a["axis"]))}
