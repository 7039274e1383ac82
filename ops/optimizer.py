"""Optimizer ops: each updates a Param from its Grad (slot roles let passes find them).

NOTE(opt-roles): passes never list optimizer types; they ask the OpDef, so a new optimizer
needs no transpiler change.
Every optimizer op's slots carry one of these roles:

* ``Param`` / ``ParamOut``: the parameter it updates;
* ``Grad``: its gradient; ``LearningRate``: a one-element lr var (shared by many ops);
* ``Moment`` / ``MomentOut``: state shaped like the parameter (velocity, Adam's moments,
  Adagrad's squared sums). A pass that slices a parameter slices these with it, row for row;
* ``ScalarState`` / ``ScalarStateOut``: one-element state that advances once per update
  (Adam's beta powers). A pass that slices a parameter gives every block its own copy.

``inplace`` pairs each ``*Out`` slot with the input it replaces, so the executor and the
version rule see one loop-carried var (ParamOut -> Param, Moment1Out -> Moment1, ...).

NOTE(paddle-order): the kernels evaluate in Paddle's order and precision (its CPU kernels),
scalars cast to the parameter's dtype first, so float32 losses match Paddle's to the last few
ulps rather than to 1e-5 by luck: e.g. Adam forms
``lr_t = lr * (sqrt(1 - beta2_pow) / (1 - beta1_pow))`` in float32 from the incoming powers
(NOTE(sparse-adam-powers) for a SelectedRows gradient), then ``p - lr_t * (m1 / (sqrt(m2) + eps))``.
That ``eps`` is Fluid 1.8's: added as it is. Paddle 2.x adds ``eps * sqrt(1 - beta2_pow)``
instead, which differs only where a gradient is within a few ``eps`` of zero (an embedding
row or a dead unit's bias); there Fluid 1.8's update is the smaller.

NOTE(sparse-adam-powers): Fluid 1.8's adam kernel (and Paddle 2.6's) writes ``Beta1PowOut`` and
``Beta2PowOut``, which are the same vars as ``Beta1Pow`` and ``Beta2Pow``, *before* it updates
the rows of a SelectedRows gradient, so that update's bias correction reads the powers of the
next step: ``lr_t = lr * sqrt(1 - beta2_pow * beta2) / (1 - beta1_pow * beta1)``, lazy or
not. A dense gradient's update reads the incoming powers. So an embedding with
``is_sparse=True`` trained by Adam takes steps about 0.74 times those of the same embedding
with ``is_sparse=False`` on the first update with the default betas (the ratio tends to 1 as
the powers fall), and placegroup does the same, so that a Fluid script's losses are Fluid's.
One difference remains: Fluid's kernel returns at once for a SelectedRows gradient with no
rows (nothing moves, not even the powers); here that is an update by a zero gradient, so that
a pserver shard that no id of a step touched stays equal to the one-process run.

Kernels never write into their inputs: each returns new arrays, and the executor rebinds the
names (so a fetched value or a value another op still reads is never changed under it).

NOTE(lazy-mode): ``Grad`` may be a SelectedRows (an embedding's sparse gradient, ops/lookup.py).
Its repeated rows are first summed (``SelectedRows.merged``); then, per optimizer:

* ``lazy_mode=False`` (the default): exactly the dense update with the gradient scattered to
  a dense array (zeros in the rows no id hit), so sparse training equals dense training of
  the same model, but for Adam's bias correction, one step ahead (NOTE(sparse-adam-powers)).
  Where a zero gradient changes nothing (SGD: ``p - lr·0 = p``; Adagrad:
  ``m + 0² = m`` and ``p - lr·0/(√m + ε) = p``) this *is* the row update, and only the
  touched rows are computed. Momentum and Adam are not like that: an untouched row's
  velocity (moments) still decays and its parameter still moves, so the update is dense.
* ``lazy_mode=True`` (Momentum, Adam; Paddle's Adam ``lazy_mode``): only the touched rows are
  updated, by the dense rule applied to those rows; every other row keeps its parameter and
  its velocity / moments. Adam's beta powers still advance once per update, touched or not,
  so a row's bias correction follows the global step, as in Paddle's lazy Adam. Cheaper
  (O(touched rows) maths), but not the dense optimizer: a row last seen k steps ago has not
  decayed. For SGD and Adagrad lazy and non-lazy are the same update (above): SGD has no
  flag, Adagrad accepts it like Momentum and Adam, and it changes nothing there.

NOTE(sparse-copy): a kernel never writes its inputs, so by default a row update copies the
whole table (and each moment) before writing the touched rows: O(table) memory traffic where
O(rows) would do. The executor lifts that where it is safe: the OpDef's ``inplace`` pairs say
ParamOut replaces Param, and when nothing else can still see the old value (the var is not
pushed to another executor, whose zero-copy send may still be reading it; fetches and
``numpy.array(tensor)`` hand out copies) it sets the op's ``KernelContext.inplace`` once per
plan, and the row path writes the touched rows into the table itself.
"""
from __future__ import annotations

import numpy

from placegroup.ops.registry import Slot, check, register
from placegroup.values import is_selected_rows, put_rows, scatter_add

_P = Slot("Param", role="Param")
_G = Slot("Grad", role="Grad")
_LR = Slot("LearningRate", role="LearningRate")
_PO = Slot("ParamOut", role="ParamOut")


def _moment(name: str) -> tuple[Slot, Slot]:
    return Slot(name, role="Moment"), Slot(name + "Out", role="MomentOut")


def _scalar(name: str) -> tuple[Slot, Slot]:
    return Slot(name, role="ScalarState"), Slot(name + "Out", role="ScalarStateOut")


def _infer_for(op: str, moments: tuple = (), scalars: tuple = (), read_only: tuple = (),
               out_names: dict | None = None):
    """An ``infer``: each ``<slot>Out`` (or ``out_names[slot]``) is like ``<slot>``; checks the
    shapes that must agree. ``read_only``: one-element inputs with no output (Lamb's powers)."""
    out_names = out_names or {}

    def infer(ins, attrs):
        p = ins["Param"]
        check(tuple(ins["Grad"].shape) == tuple(p.shape),
              f"{op}: Grad{list(ins['Grad'].shape)} must have the shape of Param{list(p.shape)}")
        lr = ("LearningRate",) if "LearningRate" in ins else ()  # adadelta has none
        for slot in lr + scalars + read_only:
            check(tuple(ins[slot].shape) in ((1,), ()),
                  f"{op}: {slot} must have one element, got shape {list(ins[slot].shape)}")
        out = {"ParamOut": p}
        for slot in moments:
            check(tuple(ins[slot].shape) == tuple(p.shape),
                  f"{op}: {slot}{list(ins[slot].shape)} must have the shape of Param{list(p.shape)}")
            out[out_names.get(slot, slot + "Out")] = ins[slot]
        for slot in scalars:
            out[slot + "Out"] = ins[slot]
        return out

    return infer


def _lr(ins, dtype):
    """The learning rate as a 0-d array of the parameter's dtype (so it broadcasts anywhere)."""
    return ins["LearningRate"].astype(dtype, copy=False).reshape(())


def _merged_grad(xp, op: str, p, g):
    """(rows, values) of a SelectedRows gradient, rows sorted unique, checked against Param."""
    _check_fits(op, p, g)
    m = g.merged(xp)
    if m.rows.shape[0]:
        _check_rows(op, p, int(m.rows[0]), int(m.rows[-1]))
    return m.rows, m.values.astype(p.dtype, copy=False)


def _check_fits(op: str, p, g) -> None:
    if g.shape != tuple(p.shape):
        raise ValueError(f"{op}: Grad is a SelectedRows of shape {list(g.shape)} but Param is "
                         f"{list(p.shape)}")


def _check_rows(op: str, p, lo: int, hi: int) -> None:
    """IndexError unless rows ``lo..hi`` (the gradient's smallest and largest) are Param's."""
    if lo < 0 or hi >= p.shape[0]:
        raise IndexError(f"{op}: Grad has row {lo if lo < 0 else hi}, outside Param's {p.shape[0]} rows")


def _update(xp, op: str, ins, rule, states: tuple = (), lazy: bool = False, inplace: bool = False) -> list:
    """``rule(p, g, *states) -> [p, *states]`` applied to a dense or SelectedRows Grad:
    dense as is; SelectedRows non-lazy on the scattered gradient, lazy on the touched rows
    only (NOTE(lazy-mode)). Inputs are never written: lazy results are updated copies."""
    p, g = ins["Param"], ins["Grad"]
    st = [ins[s] for s in states]
    if not is_selected_rows(g):
        return rule(p, g, *st)
    rows, vals = _merged_grad(xp, op, p, g)
    if not lazy:
        dense = xp.zeros_like(p)
        dense[rows] = vals
        return rule(p, dense, *st)
    outs = []
    for old, new in zip([p] + st, rule(p[rows], vals, *(s[rows] for s in st))):
        out = old if inplace else old.copy()  # NOTE(sparse-copy)
        out[rows] = new
        outs.append(out)
    return outs


@register("sgd", ins=(_P, _G, _LR), outs=(_PO,), infer=_infer_for("sgd"), role="optimize",
          inplace={"ParamOut": "Param"})
def sgd(xp, ins, a, ctx):
    """ParamOut = Param - lr * Grad.

    A SelectedRows Grad updates only its rows (``p[rows] -= lr * g``), which is the dense
    update exactly (NOTE(lazy-mode)).
    """
    p, g = ins["Param"], ins["Grad"]
    lr = _lr(ins, p.dtype)
    if is_selected_rows(g) and xp is numpy and g.values.dtype == p.dtype and p.flags.c_contiguous:
        return {"ParamOut": _sgd_rows(p, g, lr, ctx.inplace)}
    (out,) = _update(xp, "sgd", ins, lambda p, g: [p - lr * g], lazy=True, inplace=ctx.inplace)
    return {"ParamOut": out}


def _sgd_rows(p, g, lr, inplace: bool):
    """NOTE(sgd-add-at): SGD is linear in the gradient, so a repeated row needs no merging
    first: ``scatter_add`` subtracts each entry in turn, ``p - lr·g1 - lr·g2`` for ``p - lr·(g1
    + g2)`` (equal up to float rounding), at half the cost of sorting and summing the repeats
    (a pserver applies two trainers' gradients of a batch each step)."""
    _check_fits("sgd", p, g)
    if g.rows.shape[0]:
        _check_rows("sgd", p, int(g.rows.min()), int(g.rows.max()))
    out = p if inplace else p.copy()  # NOTE(sparse-copy)
    scatter_add(numpy, out, g.rows, -lr * g.values)
    return out


_V, _VO = _moment("Velocity")


@register("momentum", ins=(_P, _G, _V, _LR), outs=(_PO, _VO),
          attrs={"mu": 0.9, "use_nesterov": False, "lazy_mode": False},
          infer=_infer_for("momentum", ("Velocity",)),
          role="optimize", inplace={"ParamOut": "Param", "VelocityOut": "Velocity"})
def momentum(xp, ins, a, ctx):
    """VelocityOut = mu * Velocity + Grad;
    ParamOut = Param - lr * VelocityOut, or with ``use_nesterov``
    ParamOut = Param - (Grad + mu * VelocityOut) * lr.

    A SelectedRows Grad: non-lazy, every row's velocity decays and every param row moves, as
    dense; ``lazy_mode``, untouched rows keep their velocity and param (NOTE(lazy-mode)).
    """
    p = ins["Param"]
    mu, lr = p.dtype.type(a["mu"]), _lr(ins, p.dtype)

    def rule(p, g, v):
        v = v * mu + g
        return [p - (g + v * mu) * lr if a["use_nesterov"] else p - lr * v, v]

    out, v = _update(xp, "momentum", ins, rule, ("Velocity",), a["lazy_mode"], ctx.inplace)
    return {"ParamOut": out, "VelocityOut": v}


_M1, _M1O = _moment("Moment1")
_M2, _M2O = _moment("Moment2")
_B1, _B1O = _scalar("Beta1Pow")
_B2, _B2O = _scalar("Beta2Pow")


@register("adam", ins=(_P, _G, _LR, _M1, _M2, _B1, _B2), outs=(_PO, _M1O, _M2O, _B1O, _B2O),
          attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": False},
          infer=_infer_for("adam", ("Moment1", "Moment2"), ("Beta1Pow", "Beta2Pow")),
          role="optimize", inplace={"ParamOut": "Param", "Moment1Out": "Moment1",
                                    "Moment2Out": "Moment2", "Beta1PowOut": "Beta1Pow",
                                    "Beta2PowOut": "Beta2Pow"})
def adam(xp, ins, a, ctx):
    """Adam with bias correction folded into the step size (Fluid 1.8's form):

    m1 = beta1*m1 + (1-beta1)*g;  m2 = beta2*m2 + (1-beta2)*g²;
    lr_t = lr * sqrt(1-beta2_pow) / (1-beta1_pow);
    ParamOut = Param - lr_t * m1 / (sqrt(m2) + epsilon);  beta*_powOut = beta*_pow * beta*.

    The beta powers start at beta1, beta2 (t = 1 on the first update). A SelectedRows Grad's
    ``lr_t`` reads the powers after this update, beta*_pow * beta*, as Fluid's kernel does
    (NOTE(sparse-adam-powers)); ``epsilon`` is not scaled as Paddle 2.x scales it
    (NOTE(paddle-order)). ``lazy_mode`` only
    matters for SelectedRows gradients (dense gradients update every row either way): lazy,
    the rows the gradient does not touch keep their param and moments; non-lazy, their
    moments decay and their param moves, as under a zero gradient. The beta powers advance once per
    update either way (NOTE(lazy-mode), Paddle's lazy Adam).
    """
    p = ins["Param"]
    t = p.dtype.type
    b1, b2, eps = t(a["beta1"]), t(a["beta2"]), t(a["epsilon"])
    b1p, b2p = ins["Beta1Pow"], ins["Beta2Pow"]
    if is_selected_rows(ins["Grad"]):  # NOTE(sparse-adam-powers)
        b1p, b2p = b1p * b1p.dtype.type(a["beta1"]), b2p * b2p.dtype.type(a["beta2"])
    c1 = 1 - b1p.astype(p.dtype, copy=False).reshape(())
    c2 = xp.sqrt(1 - b2p.astype(p.dtype, copy=False).reshape(()))
    lr_t = _lr(ins, p.dtype) * (c2 / c1)

    def rule(p, g, m1, m2):
        m1 = b1 * m1 + (1 - b1) * g
        m2 = b2 * m2 + (1 - b2) * g * g
        return [p - lr_t * (m1 / (xp.sqrt(m2) + eps)), m1, m2]

    if is_selected_rows(ins["Grad"]) and not a["lazy_mode"] and _blockable(xp, p, ins["Moment1"], ins["Moment2"]):
        rows, vals = _merged_grad(xp, "adam", p, ins["Grad"])
        out, m1, m2 = _adam_all_rows(xp, ins, rows, vals, rule, (b1, b2, eps, lr_t), ctx.inplace)
    else:
        out, m1, m2 = _update(xp, "adam", ins, rule, ("Moment1", "Moment2"), a["lazy_mode"], ctx.inplace)
    return {"ParamOut": out, "Moment1Out": m1, "Moment2Out": m2,
            "Beta1PowOut": ins["Beta1Pow"] * b1p.dtype.type(a["beta1"]),
            "Beta2PowOut": ins["Beta2Pow"] * b2p.dtype.type(a["beta2"])}


# NOTE(adam-blocked): non-lazy Adam on a SelectedRows gradient moves every row of the table: an
# untouched row's moments decay (``m1 * beta1``, ``m2 * beta2``; the dense rule's ``+ (1 - beta) * 0``
# adds nothing) and its param moves by ``lr_t * m1 / (sqrt(m2) + eps)``. Written as the dense rule
# over a scattered gradient that is a dozen passes over the table and its moments, each allocating
# a table-sized temporary: ~200 ms for a 1M x 10 table. Here the touched rows are computed first,
# from their old values, by the dense rule itself; then one pass over the table in blocks of
# _BLOCK elements (256 KiB of float32) decays and applies in place, the block's one temporary
# staying in cache; then the touched rows are written back. Every value is the dense rule's, bit
# for bit (the untouched rows' ``m1`` can differ only in the sign of a zero, which no later
# result can see).
_BLOCK = 1 << 16


def _blockable(xp, *arrays) -> bool:
    return xp is numpy and all(x.flags.c_contiguous for x in arrays)


def _adam_all_rows(xp, ins, rows, vals, rule, consts, inplace: bool):
    b1, b2, eps, lr_t = consts
    p, m1, m2 = ins["Param"], ins["Moment1"], ins["Moment2"]
    if not inplace:  # NOTE(sparse-copy)
        p, m1, m2 = p.copy(), m1.copy(), m2.copy()
    touched = rule(numpy.take(p, rows, axis=0), vals, numpy.take(m1, rows, axis=0), numpy.take(m2, rows, axis=0))
    fp, f1, f2 = p.reshape(-1), m1.reshape(-1), m2.reshape(-1)
    tmp = numpy.empty(min(_BLOCK, fp.size), p.dtype)
    for lo in range(0, fp.size, _BLOCK):
        hi = min(lo + _BLOCK, fp.size)
        d1, d2, t = f1[lo:hi], f2[lo:hi], tmp[:hi - lo]
        d1 *= b1
        d2 *= b2
        numpy.sqrt(d2, out=t)
        t += eps
        numpy.divide(d1, t, out=t)
        t *= lr_t
        fp[lo:hi] -= t
    for whole, part in zip((p, m1, m2), touched):
        put_rows(numpy, whole, rows, part)
    return p, m1, m2


_M, _MO = _moment("Moment")


@register("adagrad", ins=(_P, _G, _M, _LR), outs=(_PO, _MO), attrs={"epsilon": 1e-6, "lazy_mode": False},
          infer=_infer_for("adagrad", ("Moment",)), role="optimize",
          inplace={"ParamOut": "Param", "MomentOut": "Moment"})
def adagrad(xp, ins, a, ctx):
    """MomentOut = Moment + Grad²;  ParamOut = Param - lr * Grad / (sqrt(MomentOut) + epsilon).

    A SelectedRows Grad updates only its rows, lazy or not: a zero gradient leaves a row's
    moment and param as they are, so the row update is the dense one (NOTE(lazy-mode)).
    """
    p = ins["Param"]
    lr, eps = _lr(ins, p.dtype), p.dtype.type(a["epsilon"])

    def rule(p, g, m):
        m = m + g * g
        return [p - lr * g / (xp.sqrt(m) + eps), m]

    out, m = _update(xp, "adagrad", ins, rule, ("Moment",), lazy=True, inplace=ctx.inplace)
    return {"ParamOut": out, "MomentOut": m}


# NOTE(fluid18-optimizers): rmsprop, adamax, adadelta, decayed_adagrad, ftrl and lamb follow
# Fluid 1.8's CPU kernels (paddle/fluid/operators/optimizers/*_op.h of release 1.8) and its
# optimizer.py, slot for slot, with two exceptions, both kept to Fluid's numbers:
# * adamax has a ``Beta1PowOut``: Fluid 1.8's AdamaxOptimizer advances the power with a
#   separate ``scale`` op (``_finish_update``); here the op does it, as adam does, so the power
#   is ordinary ScalarState that the passes copy per block and run once per update (round).
# * adadelta has no ``LearningRate``, as in 1.8: its step is ``sqrt(E[dx²]+ε)/sqrt(E[g²]+ε)``,
#   and AdadeltaOptimizer's ``learning_rate`` is accepted and unused there too.
# SelectedRows gradients: rmsprop and lamb take them as 1.8 does, the dense update on the
# scattered gradient (every row's state decays: NOTE(lazy-mode), non-lazy); adamax, adadelta,
# decayed_adagrad and ftrl were dense-only in 1.8 and refuse one (``_dense_only``).
# NOTE(lamb-norms): lamb's trust ratio ``||p|| / ||r||`` is over the parameter the op gets; a
# parameter the slice pass cuts into row blocks (numel > min_block_size, several pservers) gets
# one ratio per block, as under Fluid 1.8's transpiler.


def _dense_only(op: str, ins) -> None:
    if is_selected_rows(ins["Grad"]):
        raise TypeError(f"{op}: Grad is a SelectedRows (a sparse embedding's gradient), which "
                        f"{op} does not support (nor did Fluid 1.8's); use embedding(is_sparse=False) "
                        f"or an optimizer that does (sgd, momentum, adam, adagrad, rmsprop, lamb)")


_MS, _MSO = _moment("MeanSquare")
_MG, _MGO = _moment("MeanGrad")


@register("rmsprop", ins=(_P, _G, _MS, _MG, _M, _LR), outs=(_PO, _MO, _MSO, _MGO),
          attrs={"epsilon": 1e-10, "decay": 0.9, "momentum": 0.0, "centered": False},
          infer=_infer_for("rmsprop", ("MeanSquare", "MeanGrad", "Moment")), role="optimize",
          inplace={"ParamOut": "Param", "MomentOut": "Moment", "MeanSquareOut": "MeanSquare",
                   "MeanGradOut": "MeanGrad"})
def rmsprop(xp, ins, a, ctx):
    """MeanSquareOut = decay * MeanSquare + (1 - decay) * Grad²; then
    MomentOut = momentum * Moment + lr * Grad / sqrt(MeanSquareOut + epsilon), or with
    ``centered`` MeanGradOut = decay * MeanGrad + (1 - decay) * Grad and the root of
    ``MeanSquareOut - MeanGradOut² + epsilon``; ParamOut = Param - MomentOut.

    Not centered, MeanGrad is passed through. A SelectedRows Grad: the dense update on the
    scattered gradient (NOTE(fluid18-optimizers)).
    """
    p = ins["Param"]
    t = p.dtype.type
    rho, eps, mu, lr = t(a["decay"]), t(a["epsilon"]), t(a["momentum"]), _lr(ins, p.dtype)

    def rule(p, g, ms, mg, mom):
        ms = rho * ms + (1 - rho) * g * g
        if a["centered"]:
            mg = rho * mg + (1 - rho) * g
            mom = mu * mom + lr * g / xp.sqrt(ms - mg * mg + eps)
        else:
            mg = mg.copy()
            mom = mu * mom + lr * g / xp.sqrt(ms + eps)
        return [p - mom, ms, mg, mom]

    out, ms, mg, mom = _update(xp, "rmsprop", ins, rule, ("MeanSquare", "MeanGrad", "Moment"))
    return {"ParamOut": out, "MomentOut": mom, "MeanSquareOut": ms, "MeanGradOut": mg}


_IN, _INO = _moment("InfNorm")


@register("adamax", ins=(_P, _G, _LR, _M, _IN, _B1), outs=(_PO, _MO, _INO, _B1O),
          attrs={"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
          infer=_infer_for("adamax", ("Moment", "InfNorm"), ("Beta1Pow",)), role="optimize",
          inplace={"ParamOut": "Param", "MomentOut": "Moment", "InfNormOut": "InfNorm",
                   "Beta1PowOut": "Beta1Pow"})
def adamax(xp, ins, a, ctx):
    """MomentOut = beta1 * Moment + (1 - beta1) * Grad;
    InfNormOut = max(beta2 * InfNorm + epsilon, |Grad|);
    ParamOut = Param - lr / (1 - beta1_pow) * (MomentOut / InfNormOut);
    Beta1PowOut = Beta1Pow * beta1 (NOTE(fluid18-optimizers)). Dense gradients only.
    """
    _dense_only("adamax", ins)
    p, g, m, inf = ins["Param"], ins["Grad"], ins["Moment"], ins["InfNorm"]
    t = p.dtype.type
    b1, b2, eps = t(a["beta1"]), t(a["beta2"]), t(a["epsilon"])
    lr_t = _lr(ins, p.dtype) / (1 - ins["Beta1Pow"].astype(p.dtype, copy=False).reshape(()))
    m = b1 * m + (1 - b1) * g
    inf = xp.maximum(b2 * inf + eps, xp.abs(g))
    return {"ParamOut": p - lr_t * (m / inf), "MomentOut": m, "InfNormOut": inf,
            "Beta1PowOut": ins["Beta1Pow"] * ins["Beta1Pow"].dtype.type(a["beta1"])}


_ASG, _ASGO = _moment("AvgSquaredGrad")
_ASU, _ASUO = _moment("AvgSquaredUpdate")


@register("adadelta", ins=(_P, _G, _ASG, _ASU), outs=(_PO, _ASGO, _ASUO),
          attrs={"rho": 0.95, "epsilon": 1e-6},
          infer=_infer_for("adadelta", ("AvgSquaredGrad", "AvgSquaredUpdate")), role="optimize",
          inplace={"ParamOut": "Param", "AvgSquaredGradOut": "AvgSquaredGrad",
                   "AvgSquaredUpdateOut": "AvgSquaredUpdate"})
def adadelta(xp, ins, a, ctx):
    """AvgSquaredGradOut = rho * AvgSquaredGrad + (1 - rho) * Grad²;
    update = -sqrt((AvgSquaredUpdate + epsilon) / (AvgSquaredGradOut + epsilon)) * Grad;
    AvgSquaredUpdateOut = rho * AvgSquaredUpdate + (1 - rho) * update²;
    ParamOut = Param - sqrt((AvgSquaredUpdateOut + epsilon) / (AvgSquaredGradOut + epsilon)) * Grad,
    as Fluid 1.8.5 computes it (NOTE(adadelta-1.8)). No learning rate (NOTE(fluid18-optimizers));
    dense only.

    NOTE(adadelta-1.8): Fluid 1.8's kernel writes ``update`` as a lazy Eigen expression over
    AvgSquaredUpdate, updates AvgSquaredUpdate in place, then adds ``update`` to the parameter:
    the step the parameter takes is evaluated with the accumulator already updated. Its
    accumulators are the textbook ones; its parameter step is this one (measured: one step from
    zero accumulators moves a parameter by sqrt(2) times the textbook step).
    """
    _dense_only("adadelta", ins)
    p, g, asg, asu = ins["Param"], ins["Grad"], ins["AvgSquaredGrad"], ins["AvgSquaredUpdate"]
    rho, eps = p.dtype.type(a["rho"]), p.dtype.type(a["epsilon"])
    asg = rho * asg + (1 - rho) * g * g
    update = -xp.sqrt((asu + eps) / (asg + eps)) * g
    asu = rho * asu + (1 - rho) * update * update
    return {"ParamOut": p - xp.sqrt((asu + eps) / (asg + eps)) * g, "AvgSquaredGradOut": asg,
            "AvgSquaredUpdateOut": asu}


@register("decayed_adagrad", ins=(_P, _G, _M, _LR), outs=(_PO, _MO), attrs={"decay": 0.95, "epsilon": 1e-6},
          infer=_infer_for("decayed_adagrad", ("Moment",)), role="optimize",
          inplace={"ParamOut": "Param", "MomentOut": "Moment"})
def decayed_adagrad(xp, ins, a, ctx):
    """MomentOut = decay * Moment + (1 - decay) * Grad²;
    ParamOut = Param - lr * Grad / (sqrt(MomentOut) + epsilon). Dense gradients only.
    """
    _dense_only("decayed_adagrad", ins)
    p, g = ins["Param"], ins["Grad"]
    decay, eps, lr = p.dtype.type(a["decay"]), p.dtype.type(a["epsilon"]), _lr(ins, p.dtype)
    m = decay * ins["Moment"] + (1 - decay) * g * g
    return {"ParamOut": p - lr * g / (xp.sqrt(m) + eps), "MomentOut": m}


_SQ, _LIN = Slot("SquaredAccumulator", role="Moment"), Slot("LinearAccumulator", role="Moment")
_SQO, _LINO = Slot("SquaredAccumOut", role="MomentOut"), Slot("LinearAccumOut", role="MomentOut")


@register("ftrl", ins=(_P, _SQ, _LIN, _G, _LR), outs=(_PO, _SQO, _LINO),
          attrs={"l1": 0.0, "l2": 0.0, "lr_power": -0.5},
          infer=_infer_for("ftrl", ("SquaredAccumulator", "LinearAccumulator"),
                           out_names={"SquaredAccumulator": "SquaredAccumOut",
                                      "LinearAccumulator": "LinearAccumOut"}),
          role="optimize", inplace={"ParamOut": "Param", "SquaredAccumOut": "SquaredAccumulator",
                                    "LinearAccumOut": "LinearAccumulator"})
def ftrl(xp, ins, a, ctx):
    """FTRL-Proximal (McMahan et al.), with n = SquaredAccumulator, z = LinearAccumulator,
    k = -lr_power (``sqrt`` for the default k = 0.5):

    n' = n + Grad²;  z' = z + Grad - (n'^k - n^k) / lr * Param;
    ParamOut = (l1 * sign(z') - z') / (n'^k / lr + 2 * l2) where |z'| > l1, else 0.
    Dense gradients only (as in Fluid 1.8).
    """
    _dense_only("ftrl", ins)
    p, g, n, z = ins["Param"], ins["Grad"], ins["SquaredAccumulator"], ins["LinearAccumulator"]
    t = p.dtype.type
    l1, l2, k, lr = t(a["l1"]), t(a["l2"]), -t(a["lr_power"]), _lr(ins, p.dtype)
    new = n + g * g
    root = xp.sqrt if a["lr_power"] == -0.5 else (lambda v: v ** k)
    z = z + g - (root(new) - root(n)) / lr * p
    shrunk = (l1 * xp.sign(z) - z) / (root(new) / lr + 2 * l2)
    return {"ParamOut": xp.where(xp.abs(z) > l1, shrunk, t(0)), "SquaredAccumOut": new, "LinearAccumOut": z}


@register("lamb", ins=(_P, _G, _LR, _M1, _M2, Slot("Beta1Pow", role="ScalarState"),
                       Slot("Beta2Pow", role="ScalarState")), outs=(_PO, _M1O, _M2O),
          attrs={"weight_decay": 0.01, "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6},
          infer=_infer_for("lamb", ("Moment1", "Moment2"), read_only=("Beta1Pow", "Beta2Pow")),
          role="optimize", inplace={"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2"})
def lamb(xp, ins, a, ctx):
    """LAMB as Fluid 1.8 computes it (no bias correction; Beta1Pow/Beta2Pow are read by no
    formula and never advanced, as there):

    m1 = beta1*m1 + (1-beta1)*g;  m2 = beta2*m2 + (1-beta2)*g²;
    r = m1 / (sqrt(m2) + epsilon) + weight_decay * Param;
    ParamOut = Param - lr * ratio * r, ratio = ||Param|| / ||r|| when both are > 0, else 1
    (NOTE(lamb-norms)). A SelectedRows Grad: dense on the scattered gradient; one with no rows
    changes nothing, as in Fluid.
    """
    p, g = ins["Param"], ins["Grad"]
    if is_selected_rows(g) and g.rows.shape[0] == 0:
        return {"ParamOut": p.copy(), "Moment1Out": ins["Moment1"].copy(), "Moment2Out": ins["Moment2"].copy()}
    t = p.dtype.type
    b1, b2, eps, wd = t(a["beta1"]), t(a["beta2"]), t(a["epsilon"]), t(a["weight_decay"])
    lr = _lr(ins, p.dtype)

    def rule(p, g, m1, m2):
        m1 = b1 * m1 + (1 - b1) * g
        m2 = b2 * m2 + (1 - b2) * g * g
        r = m1 / (xp.sqrt(m2) + eps) + wd * p
        p_norm, r_norm = xp.sqrt(xp.sum(p * p)), xp.sqrt(xp.sum(r * r))
        ratio = p_norm / r_norm if p_norm > 0 and r_norm > 0 else t(1)
        return [p - (lr * ratio) * r, m1, m2]

    out, m1, m2 = _update(xp, "lamb", ins, rule, ("Moment1", "Moment2"))
    return {"ParamOut": out, "Moment1Out": m1, "Moment2Out": m2}


# NOTE(l1-sign): L1Decay needs sign(Param). No ``sign`` op is registered in ops/math.py yet,
# and registering that name here would clash when one is, so the regularizer uses this
# distinctly named, gradient-free copy. Once ``sign`` exists, placegroup/regularizer.py can
# switch to it and this op can go. Its role is ``backward``: it only ever helps form a
# gradient (NOTE(reg-placement) in placegroup/regularizer.py).
@register("l1_decay_sign", ins=(Slot("X", no_grad=True),), outs=("Out",),
          infer=lambda ins, a: {"Out": ins["X"]}, role="backward")
def l1_decay_sign(xp, ins, a, ctx):
    """Out = sign(X): -1, 0 or 1 elementwise, in X's dtype."""
    return {"Out": xp.sign(ins["X"])}
