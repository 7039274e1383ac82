"""Ops that keep averages of the parameters beside their updates: ``average_accumulates``
(``fluid.optimizer.ModelAverage``), ``ema_decay`` / ``ema_update`` / ``ema_debias``
(``ExponentialMovingAverage``) and ``lookahead`` (``LookaheadOptimizer``'s slow weights).

Fluid 1.8 builds the EMA and Lookahead from elementwise ops and ``Switch`` blocks; placegroup
has no conditional blocks, so each (test, then update) pair is one op here that computes
the same float32 expressions in the same order. ``average_accumulates`` is Fluid's own op.

The ops that run every step carry NOTE(opt-roles) slot roles (``Param``, ``Moment`` for state
shaped like the parameter, ``ScalarState`` for one-element counters); the wrappers give each
op ``op.param``, so the transpiler runs it beside its parameter's update, and the slice pass
gives each row block its own state (placegroup/runtime/averaging.py, NOTE(averages-placement)).
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, Slot, check, register



def _one(op: str, slot: str, m) -> None:
    check(tuple(m.shape) in ((1,), ()), f"{op}: {slot} must have one element, got shape {list(m.shape)}")


def _like(op: str, slot: str, m, p) -> None:
    check(tuple(m.shape) == tuple(p.shape),
          f"{op}: {slot}{list(m.shape)} must have the shape of the parameter {list(p.shape)}")


def _scalar(x, dtype):
    """A one-element array as a 0-d array of ``dtype`` (broadcasts anywhere)."""
    return x.astype(dtype, copy=False).reshape(())


# -- ModelAverage -------------------------------------------------------------------------------

_SUMS = ("sum_1", "sum_2", "sum_3")
_COUNTS = ("num_accumulates", "old_num_accumulates", "num_updates")
# Fluid's kMaxNumAccumulates: every this many updates sum_1 moves into sum_2, so no one float
# sum grows over too many terms
MAX_NUM_ACCUMULATES = 16384
INT64_MAX = 2 ** 63 - 1


def _aa_infer(ins, a):
    check(a["min_average_window"] <= a["max_average_window"],
          f"average_accumulates: min_average_window {a['min_average_window']} must not exceed "
          f"max_average_window {a['max_average_window']}")
    p = ins["param"]
    out = {}
    for s in _SUMS:
        _like("average_accumulates", "in_" + s, ins["in_" + s], p)
        out["out_" + s] = ins["in_" + s]
    for c in _COUNTS:
        _one("average_accumulates", "in_" + c, ins["in_" + c])
        out["out_" + c] = Meta((1,), "int64")
    return out


@register("average_accumulates",
          ins=(Slot("param", role="Param"), *(Slot("in_" + s, role="Moment") for s in _SUMS),
               *(Slot("in_" + c, role="ScalarState", no_grad=True) for c in _COUNTS)),
          outs=(*(Slot("out_" + s, role="MomentOut") for s in _SUMS),
                *(Slot("out_" + c, role="ScalarStateOut") for c in _COUNTS)),
          attrs={"average_window": 0.0, "min_average_window": 10000, "max_average_window": INT64_MAX},
          infer=_aa_infer, role="optimize",
          inplace={**{"out_" + s: "in_" + s for s in _SUMS}, **{"out_" + c: "in_" + c for c in _COUNTS}})
def average_accumulates(xp, ins, a, ctx):
    """One step of ModelAverage's sliding-window sums, as Fluid's kernel computes them when
    each ``out_*`` is its ``in_*`` (how ModelAverage appends it):

    num_updates += 1; num_accumulates += 1; sum_1 += param;
    every 16384th update: sum_2 += sum_1, sum_1 = 0 (a float sum of bounded length);
    when num_accumulates >= min_average_window and
    num_accumulates >= min(max_average_window, int(num_updates * average_window)):
    sum_3 = sum_1 + sum_2, sum_1 = sum_2 = 0, old_num_accumulates = num_accumulates,
    num_accumulates = 0 (the window restarts; sum_3 keeps the last one).

    The average is ``(sum_1 + sum_2 + sum_3) / (num_accumulates + old_num_accumulates)``.
    """
    p = ins["param"]
    s1, s2, s3 = (ins["in_" + s] for s in _SUMS)
    n_acc, old, n_upd = (int(ins["in_" + c].reshape(-1)[0]) for c in _COUNTS)
    n_upd += 1
    n_acc += 1
    s1 = s1 + p
    if n_upd % MAX_NUM_ACCUMULATES == 0:
        s2, s1 = s2 + s1, xp.zeros_like(s1)
    # C++: min<int64_t>(max_window, num_updates * average_window), the product a float
    window = min(a["max_average_window"], int(np.float32(n_upd) * np.float32(a["average_window"])))
    if n_acc >= a["min_average_window"] and n_acc >= window:
        s3, s1, s2 = s1 + s2, xp.zeros_like(s1), xp.zeros_like(s2)
        old, n_acc = n_acc, 0
    count = lambda v: xp.full((1,), v, dtype=np.int64)  # noqa: E731
    return {"out_sum_1": s1, "out_sum_2": s2, "out_sum_3": s3, "out_num_accumulates": count(n_acc),
            "out_old_num_accumulates": count(old), "out_num_updates": count(n_upd)}


# -- ExponentialMovingAverage -------------------------------------------------------------------


def _decay_infer(ins, a):
    _one("ema_decay", "Step", ins["Step"])
    check(0.0 <= a["decay"] <= 1.0, f"ema_decay: decay must be in [0, 1], got {a['decay']}")
    return {"Out": Meta((1,), "float32")}


@register("ema_decay", ins=(Slot("Step", no_grad=True),), outs=("Out",), attrs={"decay": 0.999},
          infer=_decay_infer, role="lr_sched")
def ema_decay(xp, ins, a, ctx):
    """The scheduled decay of ``ExponentialMovingAverage(thres_steps=Step)``:
    Out = min(decay, (Step + 1) / (Step + 10)), the sums in Step's dtype and the quotient in
    float32, as Fluid 1.8's ``(thres_steps + 1.0) / (thres_steps + 10.0)`` and its Switch."""
    s = ins["Step"].reshape(-1)[:1]
    one, ten = s.dtype.type(1), s.dtype.type(10)
    d_t = (s + one).astype(np.float32) / (s + ten).astype(np.float32)
    d = np.float32(a["decay"])
    return {"Out": xp.where(d_t < d, d_t, d).astype(np.float32)}


def _update_infer(ins, a):
    _like("ema_update", "EMA", ins["EMA"], ins["Param"])
    _one("ema_update", "Decay", ins["Decay"])
    return {"EMAOut": ins["EMA"]}


@register("ema_update", ins=(Slot("Param", role="Param", no_grad=True), Slot("EMA", role="Moment"),
                             Slot("Decay", no_grad=True)),
          outs=(Slot("EMAOut", role="MomentOut"),), infer=_update_infer, role="optimize",
          inplace={"EMAOut": "EMA"})
def ema_update(xp, ins, a, ctx):
    """EMAOut = EMA * decay + Param * (1 - decay) (Fluid 1.8's ``ExponentialMovingAverage.update``:
    elementwise_mul, scale(-1, +1), elementwise_mul, elementwise_add, in that order)."""
    p, ema = ins["Param"], ins["EMA"]
    d = _scalar(ins["Decay"], p.dtype)
    return {"EMAOut": ema * d + p * (p.dtype.type(1) - d)}


def _debias_infer(ins, a):
    _one("ema_debias", "Decay", ins["Decay"])
    _one("ema_debias", "Step", ins["Step"])
    return {"Out": ins["EMA"]}


@register("ema_debias", ins=("EMA", Slot("Decay", no_grad=True), Slot("Step", no_grad=True)), outs=("Out",),
          infer=_debias_infer)
def ema_debias(xp, ins, a, ctx):
    """Out = EMA / (1 - Decay ** Step) when Step > 0, else EMA: the bias correction of
    ``ExponentialMovingAverage.apply`` (float32 ``elementwise_pow`` of the decay and the step
    cast to float32, then ``scale(-1, +1)`` and ``elementwise_div``, as Fluid 1.8)."""
    ema = ins["EMA"]
    step = _scalar(ins["Step"], np.float32)
    if not step > 0:
        return {"Out": ema}
    pow_ = _scalar(ins["Decay"], np.float32) ** step
    return {"Out": ema / (np.float32(1) - pow_).astype(ema.dtype)}


# -- LookaheadOptimizer -------------------------------------------------------------------------


def _lookahead_infer(ins, a):
    _like("lookahead", "Slow", ins["Slow"], ins["Param"])
    for slot in ("Step", "K", "Alpha"):
        _one("lookahead", slot, ins[slot])
    return {"ParamOut": ins["Param"], "SlowOut": ins["Slow"]}


@register("lookahead", ins=(Slot("Param", role="Param"), Slot("Slow", role="Moment"), Slot("Step", no_grad=True),
                            Slot("K", no_grad=True), Slot("Alpha", no_grad=True)),
          outs=(Slot("ParamOut", role="ParamOut"), Slot("SlowOut", role="MomentOut")),
          infer=_lookahead_infer, role="optimize", inplace={"ParamOut": "Param", "SlowOut": "Slow"})
def lookahead(xp, ins, a, ctx):
    """Lookahead's sync (Zhang et al., 2019), as Fluid 1.8: when Step % K == 0,
    SlowOut = ParamOut = Param * alpha + Slow * (1 - alpha); otherwise both pass through.

    Step counts the updates (1 on the first), so the fast weights sync every K-th update.
    """
    p, slow = ins["Param"], ins["Slow"]
    step, k = int(ins["Step"].reshape(-1)[0]), int(ins["K"].reshape(-1)[0])
    if k <= 0:
        raise ValueError(f"lookahead: K must be a positive integer, got {k}")
    if step % k:
        return {"ParamOut": p, "SlowOut": slow}
    alpha = _scalar(ins["Alpha"], p.dtype)
    new = p * alpha + slow * (p.dtype.type(1) - alpha)
    return {"ParamOut": new, "SlowOut": new.copy()}  # two vars never share one array
