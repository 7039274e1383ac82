"""dropout and dropout_grad, with Fluid 1.8's slots and attrs and counter-based masks.

NOTE(dropout-masks): a mask is not drawn from a stateful generator. Element ``j`` of example
``g`` (``g`` counts the examples of the *whole* batch) is kept at step ``s`` iff
``uniform01(key(seed, s), g * per_example + j) >= dropout_prob``, with ``uniform01`` the
counter-based generator of ops/random.py (NOTE(counter-rng)) and ``per_example`` the size of
one example (``X``'s dims after the first). So a mask is a pure function of (seed, step,
global example index, index within the example):

* a trainer that runs rows ``[r*n, (r+1)*n)`` of a batch (trainers split a batch into
  contiguous equal parts in rank order; ``g = ctx.rank * n + i`` for its row ``i``) draws
  exactly the rows one process draws for them, so data parallel training keeps the numbers of
  one process;
* ``step`` is ``ctx.step``, the training steps run before this one, which one process
  (``Executor._steps_done``) and every trainer (``Link.step``) count alike; the op is
  registered ``uses_step`` so the executor keeps it current (NOTE(lean-loop));
* with ``fix_seed`` the step is left out: every step draws the same mask, as Fluid 1.8 does
  when the seed is fixed (it re-seeds its engine with ``seed`` at every run). The layer
  (placegroup/layers/norm.py) fixes the seed only when the user gives one, and otherwise gives
  each dropout op of a program a seed of its own (NOTE(dropout-seed) there).

The values differ from Paddle's (another generator), so a run with dropout matches Paddle in
distribution, not value; ``is_test`` runs and ``dropout_prob=0`` match exactly.
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.ops.random import uniform01
from placegroup.ops.registry import Meta, Slot, check, grad_of, register

_IMPLS = ("downgrade_in_infer", "upscale_in_train")
_ATTRS = {"dropout_prob": 0.5, "is_test": False, "fix_seed": False, "seed": 0,
          "dropout_implementation": "downgrade_in_infer"}


def _infer(ins, a):
    check(0.0 <= a["dropout_prob"] <= 1.0, f"dropout: dropout_prob must be in [0, 1], got {a['dropout_prob']}")
    check(a["dropout_implementation"] in _IMPLS, f"dropout: dropout_implementation must be one of "
                                                 f"{list(_IMPLS)}, got {a['dropout_implementation']!r}")
    x = ins["X"]
    return {"Out": x, "Mask": Meta(tuple(x.shape), "uint8")}


def step_key(seed: int, step: int, fix_seed: bool) -> int:
    """The generator key of a dropout op's masks at ``step`` (NOTE(dropout-masks)): the seed in
    the high 32 bits, the step (0 with ``fix_seed``) in the low 32."""
    return ((int(seed) & 0xFFFFFFFF) << 32) | ((0 if fix_seed else int(step)) & 0xFFFFFFFF)


def keep_mask(xp, shape, prob: float, key: int, first_example: int):
    """uint8 keep mask of ``shape`` whose row ``i`` is example ``first_example + i`` of the batch."""
    n = shape[0] if len(shape) else 1
    per = math.prod(shape[1:]) if len(shape) else 1
    rows = xp.arange(n, dtype=np.uint64) + np.uint64(first_example)
    idx = rows.reshape(-1, 1) * np.uint64(per) + xp.arange(per, dtype=np.uint64)
    return (uniform01(xp, key, idx) >= prob).astype(np.uint8).reshape(shape)


def _test_scale(x, a):
    """What ``is_test`` multiplies by: 1 - p (downgrade_in_infer) or 1 (upscale_in_train)."""
    if a["dropout_implementation"] == "upscale_in_train":
        return None
    t = x.dtype.type
    return t(1.0) - t(a["dropout_prob"])


@register("dropout", ins=("X",), outs=("Out", Slot("Mask", no_grad=True)), attrs=_ATTRS, infer=_infer,
          grad=grad_of(("X",), uses=(), outs=("Mask",)), uses_step=True)
def dropout(xp, ins, a, ctx):
    """Training: Out = X * Mask (downgrade_in_infer) or X * Mask / (1 - p) (upscale_in_train),
    Mask keeping each element with probability 1 - p (NOTE(dropout-masks)). ``is_test``: Out =
    X * (1 - p) or X, and Mask is all ones."""
    x, p = ins["X"], a["dropout_prob"]
    if a["is_test"]:
        k = _test_scale(x, a)
        return {"Out": x.copy() if k is None else x * k, "Mask": xp.ones(x.shape, dtype=np.uint8)}
    n = x.shape[0] if x.ndim else 1
    mask = keep_mask(xp, x.shape, p, step_key(a["seed"], ctx.step, a["fix_seed"]), ctx.rank * n)
    out = x * mask
    if a["dropout_implementation"] == "upscale_in_train":
        t = x.dtype.type
        out = out / (t(1.0) - t(p)) if p < 1.0 else xp.zeros_like(x)
    return {"Out": out.astype(x.dtype, copy=False), "Mask": mask}


@register("dropout_grad", ins=("Mask", "Out@GRAD"), outs=("X@GRAD",), attrs=_ATTRS, role="backward")
def dropout_grad(xp, ins, a, ctx):
    # dX = dOut * Mask, / (1 - p) when upscaling; in is_test mode, the forward's constant scale
    g, p = ins["Out@GRAD"], a["dropout_prob"]
    if a["is_test"]:
        k = _test_scale(g, a)
        return {"X@GRAD": g.copy() if k is None else g * k}
    dx = g * ins["Mask"]
    if a["dropout_implementation"] == "upscale_in_train":
        t = g.dtype.type
        dx = dx / (t(1.0) - t(p)) if p < 1.0 else xp.zeros_like(g)
    return {"X@GRAD": dx.astype(g.dtype, copy=False)}
