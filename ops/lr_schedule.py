"""Learning-rate schedules, one fused op each: ``Out = lr(Step)``, role ``lr_sched``.

Each op reads the program's decay step counter (``Step``, one element of any numeric dtype,
0 on the first step, 1 for noam_decay's own; see ``placegroup.layers.learning_rate_scheduler``)
and writes the learning rate, a float32 ``[1]``, that optimizer ops take as ``LearningRate``.
``linear_lr_warmup`` may also read the rate it hands over to (another schedule's output).

NOTE(lr-precision): the formula is evaluated in float64 and rounded once to float32. That is
what Paddle 3 does (its ``paddle.optimizer.lr`` schedulers compute in Python floats and the
executor writes the float32 lr var), and it is within an ulp of Fluid 1.x, which chained
float32 ops (cast, elementwise_div, floor, elementwise_pow, ...).

Example (what ``fluid.layers.piecewise_decay([3, 6], [0.1, 0.01, 0.001])`` appends)::

    block.append_op("piecewise_decay", {"Step": [counter]}, {"Out": [lr]},
                    {"boundaries": [3, 6], "values": [0.1, 0.01, 0.001]}, role="lr_sched")
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.ops.registry import Meta, Slot, check, register

_STEP = Slot("Step", role="Step", no_grad=True)
_OUT = Slot("Out", role="LearningRate")


def _infer_for(op: str, validate=None):
    def infer(ins, attrs):
        shape = tuple(ins["Step"].shape)
        check(shape in ((1,), ()), f"{op}: Step must have one element, got shape {list(shape)}")
        if validate is not None:
            validate(op, attrs)
        return {"Out": Meta((1,), "float32")}

    return infer


def _decay_steps_positive(op, a):
    check(a["decay_steps"] > 0, f"{op}: decay_steps must be > 0, got {a['decay_steps']}")


def _step(xp, ins):
    return ins["Step"].reshape(()).astype("float64")


def _out(xp, lr):
    return xp.asarray(lr, dtype="float64").reshape(1).astype("float32")


def _progress(xp, ins, a):
    """step / decay_steps, floored when ``staircase``."""
    div = _step(xp, ins) / float(a["decay_steps"])
    return xp.floor(div) if a["staircase"] else div


def _check_piecewise(op, a):
    b, v = list(a["boundaries"]), list(a["values"])
    check(len(v) == len(b) + 1, f"{op}: values needs len(boundaries) + 1 = {len(b) + 1} entries, "
                                f"got {len(v)} (boundaries={b}, values={v})")
    check(all(x < y for x, y in zip(b, b[1:])), f"{op}: boundaries must increase, got {b}")


@register("piecewise_decay", ins=(_STEP,), outs=(_OUT,), attrs={"boundaries": [], "values": [0.0]},
          infer=_infer_for("piecewise_decay", _check_piecewise), role="lr_sched")
def piecewise_decay(xp, ins, a, ctx):
    """Out = values[i] for the first i with step < boundaries[i], else values[-1]."""
    i = 0
    if a["boundaries"]:  # how many boundaries the step has reached
        i = (_step(xp, ins) >= xp.asarray(a["boundaries"], dtype="float64")).sum()
    return {"Out": _out(xp, xp.asarray(a["values"], dtype="float64")[i])}


_DECAY_ATTRS = {"learning_rate": 0.1, "decay_steps": 1, "decay_rate": 0.5, "staircase": False}


@register("exponential_decay", ins=(_STEP,), outs=(_OUT,), attrs=dict(_DECAY_ATTRS),
          infer=_infer_for("exponential_decay", _decay_steps_positive), role="lr_sched")
def exponential_decay(xp, ins, a, ctx):
    """Out = learning_rate * decay_rate ^ (step / decay_steps)  (floored if staircase)."""
    return {"Out": _out(xp, a["learning_rate"] * xp.power(float(a["decay_rate"]), _progress(xp, ins, a)))}


@register("natural_exp_decay", ins=(_STEP,), outs=(_OUT,), attrs=dict(_DECAY_ATTRS),
          infer=_infer_for("natural_exp_decay", _decay_steps_positive), role="lr_sched")
def natural_exp_decay(xp, ins, a, ctx):
    """Out = learning_rate * exp(-decay_rate * (step / decay_steps))  (floored if staircase)."""
    return {"Out": _out(xp, a["learning_rate"] * xp.exp(-float(a["decay_rate"]) * _progress(xp, ins, a)))}


@register("inverse_time_decay", ins=(_STEP,), outs=(_OUT,), attrs=dict(_DECAY_ATTRS),
          infer=_infer_for("inverse_time_decay", _decay_steps_positive), role="lr_sched")
def inverse_time_decay(xp, ins, a, ctx):
    """Out = learning_rate / (1 + decay_rate * (step / decay_steps))  (floored if staircase)."""
    return {"Out": _out(xp, a["learning_rate"] / (1.0 + float(a["decay_rate"]) * _progress(xp, ins, a)))}


@register("polynomial_decay", ins=(_STEP,), outs=(_OUT,),
          attrs={"learning_rate": 0.1, "decay_steps": 1, "end_learning_rate": 1e-4, "power": 1.0,
                 "cycle": False},
          infer=_infer_for("polynomial_decay", _decay_steps_positive), role="lr_sched")
def polynomial_decay(xp, ins, a, ctx):
    """Out = (learning_rate - end) * (1 - step / decay_steps) ^ power + end, where step stops
    at decay_steps; with ``cycle`` decay_steps grows to decay_steps * ceil(step / decay_steps)
    (at least 1x) instead, so the decay restarts from a lower peak."""
    step, steps = _step(xp, ins), float(a["decay_steps"])
    if a["cycle"]:
        steps = steps * xp.maximum(xp.ceil(step / steps), 1.0)
    else:
        step = xp.minimum(step, steps)
    end = float(a["end_learning_rate"])
    return {"Out": _out(xp, (a["learning_rate"] - end) * (1.0 - step / steps) ** float(a["power"]) + end)}


@register("cosine_decay", ins=(_STEP,), outs=(_OUT,),
          attrs={"learning_rate": 0.1, "step_each_epoch": 1, "epochs": 1},
          infer=_infer_for("cosine_decay"), role="lr_sched")
def cosine_decay(xp, ins, a, ctx):
    """Out = learning_rate * (cos(epoch * pi / epochs) + 1) / 2, epoch = floor(step / step_each_epoch)."""
    epoch = xp.floor(_step(xp, ins) / float(a["step_each_epoch"]))
    return {"Out": _out(xp, a["learning_rate"] * 0.5 * (xp.cos(epoch * math.pi / float(a["epochs"])) + 1.0))}


def _check_noam(op, a):
    check(a["d_model"] > 0 and a["warmup_steps"] > 0,
          f"{op}: d_model ({a['d_model']}) and warmup_steps ({a['warmup_steps']}) must be > 0")


@register("noam_decay", ins=(_STEP,), outs=(_OUT,), attrs={"d_model": 1.0, "warmup_steps": 1.0, "learning_rate": 1.0},
          infer=_infer_for("noam_decay", _check_noam), role="lr_sched")
def noam_decay(xp, ins, a, ctx):
    """Out = learning_rate * d_model^-0.5 * min(step^-0.5, warmup_steps^-1.5 * step), the
    Transformer's schedule; Fluid counts its steps from 1 (step 0 gives inf, as there)."""
    step = _step(xp, ins)
    with np.errstate(divide="ignore"):
        a_ = xp.power(step, -0.5)
    b_ = float(a["warmup_steps"]) ** -1.5 * step
    return {"Out": _out(xp, a["learning_rate"] * float(a["d_model"]) ** -0.5 * xp.minimum(a_, b_))}


def _warmup_infer(ins, a):
    out = _infer_for("linear_lr_warmup", lambda op, at: check(
        at["warmup_steps"] > 0, f"{op}: warmup_steps must be > 0, got {at['warmup_steps']}"))(ins, a)
    lr = ins.get("LearningRate")
    if lr is not None:
        check(tuple(lr.shape) in ((1,), ()), f"linear_lr_warmup: LearningRate must have one element, got shape "
                                             f"{list(lr.shape)}")
        return {"Out": Meta((1,), lr.dtype)}
    return out


@register("linear_lr_warmup", ins=(_STEP, Slot("LearningRate", dispensable=True, no_grad=True)), outs=(_OUT,),
          attrs={"warmup_steps": 1, "start_lr": 0.0, "end_lr": 0.0, "learning_rate": 0.0},
          infer=_warmup_infer, role="lr_sched")
def linear_lr_warmup(xp, ins, a, ctx):
    """Out = start_lr + (end_lr - start_lr) * step / warmup_steps while step < warmup_steps,
    then the schedule it wraps: LearningRate if given (another schedule's output), else the
    constant ``learning_rate``."""
    step = _step(xp, ins)
    lr = ins.get("LearningRate")
    after = lr.reshape(()).astype("float64") if lr is not None else xp.asarray(float(a["learning_rate"]))
    start, end = float(a["start_lr"]), float(a["end_lr"])
    warm = start + (end - start) * (step / float(a["warmup_steps"]))
    out = xp.where(step < float(a["warmup_steps"]), warm, after)
    return {"Out": _out(xp, out).astype(lr.dtype if lr is not None else "float32")}
