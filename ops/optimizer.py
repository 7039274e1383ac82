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

NOTE(paddle-order): the kernels evaluate in Paddle's order and precision (its CPU kernels in
phi/kernels), scalars cast to the parameter's dtype first, so float32 losses match Paddle's
to the last few ulps rather than to 1e-5 by luck: e.g. Adam forms
``lr_t = lr * (sqrt(1 - beta2_pow) / (1 - beta1_pow))`` and ``eps_t = eps * sqrt(1 - beta2_pow)``
in float32 from the *incoming* powers, then ``p - lr_t * (m1 / (sqrt(m2) + eps_t))``.

Kernels never write into their inputs: each returns new arrays, and the executor rebinds the
names (so a fetched value or a value another op still reads is never changed under it).

NOTE(lazy-mode): ``Grad`` may be a SelectedRows (an embedding's sparse gradient, ops/lookup.py).
Its repeated rows are first summed (``SelectedRows.merged``); then, per optimizer:

* ``lazy_mode=False`` (the default): exactly the dense update with the gradient scattered to
  a dense array (zeros in the rows no id hit), so sparse training equals dense training of
  the same model. Where a zero gradient changes nothing (SGD: ``p - lr·0 = p``; Adagrad:
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
from placegroup.values import is_selected_rows, scatter_add

_P = Slot("Param", role="Param")
_G = Slot("Grad", role="Grad")
_LR = Slot("LearningRate", role="LearningRate")
_PO = Slot("ParamOut", role="ParamOut")


def _moment(name: str) -> tuple[Slot, Slot]:
    return Slot(name, role="Moment"), Slot(name + "Out", role="MomentOut")


def _scalar(name: str) -> tuple[Slot, Slot]:
    return Slot(name, role="ScalarState"), Slot(name + "Out", role="ScalarStateOut")


def _infer_for(op: str, moments: tuple = (), scalars: tuple = ()):
    """An ``infer``: each ``<slot>Out`` is like ``<slot>``; checks the shapes that must agree."""

    def infer(ins, attrs):
        p = ins["Param"]
        check(tuple(ins["Grad"].shape) == tuple(p.shape),
              f"{op}: Grad{list(ins['Grad'].shape)} must have the shape of Param{list(p.shape)}")
        for slot in ("LearningRate",) + scalars:
            check(tuple(ins[slot].shape) in ((1,), ()),
                  f"{op}: {slot} must have one element, got shape {list(ins[slot].shape)}")
        out = {"ParamOut": p}
        for slot in moments:
            check(tuple(ins[slot].shape) == tuple(p.shape),
                  f"{op}: {slot}{list(ins[slot].shape)} must have the shape of Param{list(p.shape)}")
            out[slot + "Out"] = ins[slot]
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
    """Adam with bias correction folded into the step size (Paddle's form):

    m1 = beta1*m1 + (1-beta1)*g;  m2 = beta2*m2 + (1-beta2)*g²;
    lr_t = lr * sqrt(1-beta2_pow) / (1-beta1_pow);  eps_t = epsilon * sqrt(1-beta2_pow);
    ParamOut = Param - lr_t * m1 / (sqrt(m2) + eps_t);  beta*_powOut = beta*_pow * beta*.

    The beta powers start at beta1, beta2 (t = 1 on the first update). ``lazy_mode`` only
    matters for SelectedRows gradients (dense gradients update every row either way): lazy,
    the rows the gradient does not touch keep their param and moments; non-lazy, their
    moments decay and their param moves, exactly as dense. The beta powers advance once per
    update either way (NOTE(lazy-mode), Paddle's lazy Adam).
    """
    p = ins["Param"]
    t = p.dtype.type
    b1, b2, eps = t(a["beta1"]), t(a["beta2"]), t(a["epsilon"])
    b1p, b2p = ins["Beta1Pow"], ins["Beta2Pow"]
    c1 = 1 - b1p.astype(p.dtype, copy=False).reshape(())
    c2 = xp.sqrt(1 - b2p.astype(p.dtype, copy=False).reshape(()))
    lr_t = _lr(ins, p.dtype) * (c2 / c1)
    eps_t = eps * c2

    def rule(p, g, m1, m2):
        m1 = b1 * m1 + (1 - b1) * g
        m2 = b2 * m2 + (1 - b2) * g * g
        return [p - lr_t * (m1 / (xp.sqrt(m2) + eps_t)), m1, m2]

    out, m1, m2 = _update(xp, "adam", ins, rule, ("Moment1", "Moment2"), a["lazy_mode"], ctx.inplace)
    return {"ParamOut": out, "Moment1Out": m1, "Moment2Out": m2,
            "Beta1PowOut": ins["Beta1Pow"] * b1p.dtype.type(a["beta1"]),
            "Beta2PowOut": ins["Beta2Pow"] * b2p.dtype.type(a["beta2"])}


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
