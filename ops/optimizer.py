"""Optimizer ops: each updates a Param from its Grad (slot roles let passes find them).

NOTE(opt-roles): passes never list optimizer types (STYLE.md rule 7); they ask the OpDef.
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
"""
from __future__ import annotations

from placegroup.ops.registry import Slot, check, register

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


@register("sgd", ins=(_P, _G, _LR), outs=(_PO,), infer=_infer_for("sgd"), role="optimize",
          inplace={"ParamOut": "Param"})
def sgd(xp, ins, a):
    """ParamOut = Param - lr * Grad."""
    p = ins["Param"]
    return {"ParamOut": p - _lr(ins, p.dtype) * ins["Grad"]}


_V, _VO = _moment("Velocity")


@register("momentum", ins=(_P, _G, _V, _LR), outs=(_PO, _VO),
          attrs={"mu": 0.9, "use_nesterov": False}, infer=_infer_for("momentum", ("Velocity",)),
          role="optimize", inplace={"ParamOut": "Param", "VelocityOut": "Velocity"})
def momentum(xp, ins, a):
    """VelocityOut = mu * Velocity + Grad;
    ParamOut = Param - lr * VelocityOut, or with ``use_nesterov``
    ParamOut = Param - (Grad + mu * VelocityOut) * lr."""
    p, g = ins["Param"], ins["Grad"]
    mu, lr = p.dtype.type(a["mu"]), _lr(ins, p.dtype)
    v = ins["Velocity"] * mu + g
    if a["use_nesterov"]:
        return {"ParamOut": p - (g + v * mu) * lr, "VelocityOut": v}
    return {"ParamOut": p - lr * v, "VelocityOut": v}


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
def adam(xp, ins, a):
    """Adam with bias correction folded into the step size (Paddle's form):

    m1 = beta1*m1 + (1-beta1)*g;  m2 = beta2*m2 + (1-beta2)*g²;
    lr_t = lr * sqrt(1-beta2_pow) / (1-beta1_pow);  eps_t = epsilon * sqrt(1-beta2_pow);
    ParamOut = Param - lr_t * m1 / (sqrt(m2) + eps_t);  beta*_powOut = beta*_pow * beta*.

    The beta powers start at beta1, beta2 (t = 1 on the first update). ``lazy_mode`` only
    matters for SelectedRows gradients; dense gradients update every row either way.
    """
    p, g = ins["Param"], ins["Grad"]
    t = p.dtype.type
    b1, b2, eps = t(a["beta1"]), t(a["beta2"]), t(a["epsilon"])
    b1p, b2p = ins["Beta1Pow"], ins["Beta2Pow"]
    m1 = b1 * ins["Moment1"] + (1 - b1) * g
    m2 = b2 * ins["Moment2"] + (1 - b2) * g * g
    c1 = 1 - b1p.astype(p.dtype, copy=False).reshape(())
    c2 = xp.sqrt(1 - b2p.astype(p.dtype, copy=False).reshape(()))
    lr_t = _lr(ins, p.dtype) * (c2 / c1)
    eps_t = eps * c2
    return {"ParamOut": p - lr_t * (m1 / (xp.sqrt(m2) + eps_t)), "Moment1Out": m1, "Moment2Out": m2,
            "Beta1PowOut": ins["Beta1Pow"] * b1p.dtype.type(a["beta1"]),
            "Beta2PowOut": ins["Beta2Pow"] * b2p.dtype.type(a["beta2"])}


_M, _MO = _moment("Moment")


@register("adagrad", ins=(_P, _G, _M, _LR), outs=(_PO, _MO), attrs={"epsilon": 1e-6},
          infer=_infer_for("adagrad", ("Moment",)), role="optimize",
          inplace={"ParamOut": "Param", "MomentOut": "Moment"})
def adagrad(xp, ins, a):
    """MomentOut = Moment + Grad²;  ParamOut = Param - lr * Grad / (sqrt(MomentOut) + epsilon)."""
    p, g = ins["Param"], ins["Grad"]
    m = ins["Moment"] + g * g
    return {"ParamOut": p - _lr(ins, p.dtype) * g / (xp.sqrt(m) + p.dtype.type(a["epsilon"])),
            "MomentOut": m}


# NOTE(l1-sign): L1Decay needs sign(Param). No ``sign`` op is registered in ops/math.py yet,
# and registering that name here would clash when one is, so the regularizer uses this
# distinctly named, gradient-free copy. Once ``sign`` exists, placegroup/regularizer.py can
# switch to it and this op can go. Its role is ``backward``: it only ever helps form a
# gradient (NOTE(reg-placement) in placegroup/regularizer.py).
@register("l1_decay_sign", ins=(Slot("X", no_grad=True),), outs=("Out",),
          infer=lambda ins, a: {"Out": ins["X"]}, role="backward")
def l1_decay_sign(xp, ins, a):
    """Out = sign(X): -1, 0 or 1 elementwise, in X's dtype."""
    return {"Out": xp.sign(ins["X"])}
