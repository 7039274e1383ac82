"""lars_momentum and dpsgd: two updates that scale the step by a norm of the whole parameter
or gradient (Fluid 1.8's ``paddle/fluid/operators/optimizers/lars_momentum_op.h`` and
``dpsgd_op.h``), with the slot roles of NOTE(opt-roles) in ops/optimizer.py, so the transpiler
places and slices them as it does every other optimizer op.

Both are dense-only, as in Fluid 1.8 (a SelectedRows gradient is a TypeError naming the op).

NOTE(norm-per-block): both read a norm over the whole tensor they are given. A parameter the
slice pass cuts into row blocks (numel > min_block_size, several pservers) gets one norm per
block, as under Fluid 1.8's transpiler (NOTE(lamb-norms) in ops/optimizer.py), and a
model-parallel fc's column shard one per shard; an unsliced parameter updates as in one
process.

NOTE(dpsgd-noise): Fluid 1.8 draws *one* Gaussian number per op call (Box-Muller on a
``minstd_rand`` seeded by the ``seed`` attr, or by ``time(NULL)`` when it is 0) and adds it,
divided by ``batch_size``, to every element. Here the number is counter-based
(NOTE(counter-rng) in ops/random.py): ``N(0, sigma²)`` from the two uniforms at counters
``_NOISE_STREAM`` and ``_NOISE_STREAM + 1`` of the key ``(seed, step)``, ``step`` being
``ctx.step`` (the op is ``uses_step``). So a run is reproducible, the number changes every
step (Fluid's changes every second, or never with a fixed seed), and a pserver updating a
parameter, or each row block of it, draws the number one process draws at that step. Every
dpsgd op with the same seed draws the same number in a step, as Fluid's ops seeded in the same
second do. The counters lie far above any dropout mask's (``example * size + j``), so a dpsgd
op and a dropout op with one seed never share a uniform. ``sigma=0`` is noise-free and equals
Paddle's numbers.
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.dropout import step_key
from placegroup.ops.optimizer import _dense_only, _infer_for, _lr, _moment
from placegroup.ops.random import uniform01
from placegroup.ops.registry import Slot, register

_P = Slot("Param", role="Param")
_G = Slot("Grad", role="Grad")
_LR = Slot("LearningRate", role="LearningRate")
_PO = Slot("ParamOut", role="ParamOut")
_V, _VO = _moment("Velocity")


@register("lars_momentum", ins=(_P, _G, _V, _LR), outs=(_PO, _VO),
          attrs={"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005},
          infer=_infer_for("lars_momentum", ("Velocity",)), role="optimize",
          inplace={"ParamOut": "Param", "VelocityOut": "Velocity"})
def lars_momentum(xp, ins, a, ctx):
    """Layer-wise adaptive rate scaling (You et al., 2017) on momentum, as Fluid 1.8:

    local_lr = lr * lars_coeff * ||Param|| / (||Grad|| + lars_weight_decay * ||Param||)
    when both norms are > 0, else lr;
    VelocityOut = mu * Velocity + local_lr * (Grad + lars_weight_decay * Param);
    ParamOut = Param - VelocityOut. Dense gradients only (NOTE(norm-per-block)).
    """
    _dense_only("lars_momentum", ins)
    p, g, v = ins["Param"], ins["Grad"], ins["Velocity"]
    t = p.dtype.type
    mu, coeff, wd = t(a["mu"]), t(a["lars_coeff"]), t(a["lars_weight_decay"])
    lr = _lr(ins, p.dtype)
    p_norm, g_norm = xp.sqrt(xp.sum(p * p)), xp.sqrt(xp.sum(g * g))
    if p_norm > 0 and g_norm > 0:
        lr = lr * coeff * p_norm / (g_norm + wd * p_norm)
    v = v * mu + lr * (g + wd * p)
    return {"ParamOut": p - v, "VelocityOut": v}


_NOISE_STREAM = np.uint64(1 << 62)  # NOTE(dpsgd-noise): far above any dropout mask's counters


def dpsgd_noise(seed: int, step: int, sigma: float) -> float:
    """The N(0, sigma²) number a dpsgd op with ``seed`` adds at ``step`` (NOTE(dpsgd-noise))."""
    u = uniform01(np, step_key(seed, step, False), np.array([_NOISE_STREAM, _NOISE_STREAM + np.uint64(1)]))
    return float(sigma * np.sqrt(-2.0 * np.log1p(-u[0])) * np.cos(2.0 * np.pi * u[1]))


@register("dpsgd", ins=(_P, _G, _LR), outs=(_PO,),
          attrs={"clip": 10.0, "batch_size": 16.0, "sigma": 1.0, "seed": 0},
          infer=_infer_for("dpsgd"), role="optimize", inplace={"ParamOut": "Param"}, uses_step=True)
def dpsgd(xp, ins, a, ctx):
    """Differentially private SGD (Abadi et al., CCS 2016) as Fluid 1.8 computes it:

    scale = ||Grad|| / clip when ||Grad|| > clip, else 1;
    ParamOut = Param - lr * (Grad / scale + noise / batch_size), one ``noise ~ N(0, sigma²)``
    for the whole op call (NOTE(dpsgd-noise)). Dense gradients only (NOTE(norm-per-block)).
    """
    _dense_only("dpsgd", ins)
    p, g = ins["Param"], ins["Grad"]
    t = p.dtype.type
    norm = xp.sqrt(xp.sum(g * g))
    scale = norm / t(a["clip"]) if norm > t(a["clip"]) else t(1)
    noise = t(dpsgd_noise(a["seed"], ctx.step, a["sigma"]) if a["sigma"] else 0.0)
    return {"ParamOut": p - _lr(ins, p.dtype) * (g / scale + noise / t(a["batch_size"]))}
