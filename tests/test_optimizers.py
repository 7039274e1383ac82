"""Optimizer ops, lr schedules, regularizers and optimizer classes against plain numpy.

* every optimizer op (``ops/optimizer.py``, ``ops/lars_dpsgd.py``) against a numpy reference of the update rules Fluid 1.8 documents
  over several float32 steps, with its state fed back; output shapes and dtypes (float32 and
  float64); inputs never mutated or aliased; slot roles and ``inplace`` pairs; ``infer`` errors;
* every schedule's value over steps 0..12 against its formula, the one decay counter that
  runs first, and argument errors;
* one training run per optimizer (with a schedule, regularizers and a per-parameter lr) on a
  tiny linear model, whose per-step losses and final state must equal a numpy re-implementation
  of the same model and optimizer (rtol 1e-5);
* dpsgd's counter-based noise (one number per step and seed) and LARS's zero-norm rule.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.ir.framework import Program
from placegroup.layers.learning_rate_scheduler import LR_DECAY_COUNTER
from placegroup.ops.registry import KernelContext, get_op_def
from placegroup.regularizer import L1Decay, L2Decay, append_regularization_ops

# -- numpy references: one update, (param, grad, lr, state, attrs) -> (param, state) ---------


def ref_sgd(p, g, lr, s, a):
    return p - lr * g, {}


def ref_momentum(p, g, lr, s, a):
    v = a["mu"] * s["Velocity"] + g
    return p - lr * (g + a["mu"] * v if a["use_nesterov"] else v), {"Velocity": v}


def ref_adam(p, g, lr, s, a):
    # the attrs as the kernel holds them (float32, as Fluid's float attrs): 1 - beta2 is then
    # 1.3e-5 below 0.001, which Moment2 shows after a few steps
    b1, b2, eps = (float(np.float32(a[k])) for k in ("beta1", "beta2", "epsilon"))
    m1 = b1 * s["Moment1"] + (1 - b1) * g
    m2 = b2 * s["Moment2"] + (1 - b2) * g * g
    b1p, b2p = s["Beta1Pow"], s["Beta2Pow"]
    lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
    p = p - lr_t * m1 / (np.sqrt(m2) + eps)  # Fluid 1.8's epsilon (NOTE(paddle-order))
    return p, {"Moment1": m1, "Moment2": m2, "Beta1Pow": b1p * b1, "Beta2Pow": b2p * b2}


def ref_adagrad(p, g, lr, s, a):
    m = s["Moment"] + g * g
    return p - lr * g / (np.sqrt(m) + a["epsilon"]), {"Moment": m}


def ref_rmsprop(p, g, lr, s, a):
    rho, eps, mu = a["decay"], a["epsilon"], a["momentum"]
    ms = rho * s["MeanSquare"] + (1 - rho) * g * g
    mg = rho * s["MeanGrad"] + (1 - rho) * g if a["centered"] else s["MeanGrad"]
    mom = mu * s["Moment"] + lr * g / np.sqrt(ms - (mg * mg if a["centered"] else 0) + eps)
    return p - mom, {"Moment": mom, "MeanSquare": ms, "MeanGrad": mg}


def ref_adamax(p, g, lr, s, a):
    m = a["beta1"] * s["Moment"] + (1 - a["beta1"]) * g
    u = np.maximum(a["beta2"] * s["InfNorm"] + a["epsilon"], np.abs(g))
    p = p - lr / (1 - s["Beta1Pow"]) * m / u
    return p, {"Moment": m, "InfNorm": u, "Beta1Pow": s["Beta1Pow"] * a["beta1"]}


def ref_adadelta(p, g, lr, s, a):  # no learning rate; the step taken with the updated accumulator, as Fluid 1.8.5
    rho, eps = a["rho"], a["epsilon"]  # (NOTE(adadelta-1.8) in ops/optimizer.py)
    eg = rho * s["AvgSquaredGrad"] + (1 - rho) * g * g
    dx = -np.sqrt((s["AvgSquaredUpdate"] + eps) / (eg + eps)) * g
    ex = rho * s["AvgSquaredUpdate"] + (1 - rho) * dx * dx
    return p - np.sqrt((ex + eps) / (eg + eps)) * g, {"AvgSquaredGrad": eg, "AvgSquaredUpdate": ex}


def ref_decayed_adagrad(p, g, lr, s, a):
    m = a["decay"] * s["Moment"] + (1 - a["decay"]) * g * g
    return p - lr * g / (np.sqrt(m) + a["epsilon"]), {"Moment": m}


def ref_ftrl(p, g, lr, s, a):
    n, z, k = s["SquaredAccumulator"], s["LinearAccumulator"], -a["lr_power"]
    n2 = n + g * g
    z = z + g - (n2 ** k - n ** k) / lr * p
    shrunk = (a["l1"] * np.sign(z) - z) / (n2 ** k / lr + 2 * a["l2"])
    return np.where(np.abs(z) > a["l1"], shrunk, 0.0), {"SquaredAccumulator": n2, "LinearAccumulator": z}


def ref_lamb(p, g, lr, s, a):  # Fluid 1.8: no bias correction, the beta powers unused
    # the kernel's betas are float32, as Paddle's: 1 - float32(0.999) is 1.3e-5 off 0.001
    b1, b2 = float(np.float32(a["beta1"])), float(np.float32(a["beta2"]))
    m1 = b1 * s["Moment1"] + (1 - b1) * g
    m2 = b2 * s["Moment2"] + (1 - b2) * g * g
    r = m1 / (np.sqrt(m2) + a["epsilon"]) + a["weight_decay"] * p
    pn, rn = np.linalg.norm(p), np.linalg.norm(r)
    return p - lr * (pn / rn if pn > 0 and rn > 0 else 1.0) * r, {"Moment1": m1, "Moment2": m2}


def ref_lars_momentum(p, g, lr, s, a):
    wd, pn, gn = a["lars_weight_decay"], np.linalg.norm(p), np.linalg.norm(g)
    local = lr * a["lars_coeff"] * pn / (gn + wd * pn) if pn > 0 and gn > 0 else lr
    v = a["mu"] * s["Velocity"] + local * (g + wd * p)
    return p - v, {"Velocity": v}


def ref_dpsgd(p, g, lr, s, a):  # the noise-free update (sigma=0); the noise is tested on its own
    norm = np.linalg.norm(g)
    return p - lr * g / (norm / a["clip"] if norm > a["clip"] else 1.0), {}


@dataclasses.dataclass(frozen=True)
class OptCase:
    """An optimizer op: its attrs, its state slots (slot -> fill value, None = like the
    param with random values), the numpy reference and the optimizer class building it."""

    op: str
    attrs: dict
    state: dict
    ref: Callable
    make: Callable  # (lr, **kw) -> Optimizer
    name: str = ""

    @property
    def id(self):
        return self.name or self.op


OPT_CASES = [
    OptCase("sgd", {}, {}, ref_sgd, lambda lr, **kw: fluid.optimizer.SGD(lr, **kw)),
    OptCase("momentum", {"mu": 0.9, "use_nesterov": False}, {"Velocity": None}, ref_momentum,
            lambda lr, **kw: fluid.optimizer.Momentum(lr, momentum=0.9, **kw)),
    OptCase("momentum", {"mu": 0.8, "use_nesterov": True}, {"Velocity": None}, ref_momentum,
            lambda lr, **kw: fluid.optimizer.Momentum(lr, momentum=0.8, use_nesterov=True, **kw), "nesterov"),
    OptCase("adam", {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "lazy_mode": False},
            {"Moment1": None, "Moment2": 0.5, "Beta1Pow": 0.9, "Beta2Pow": 0.999}, ref_adam,
            lambda lr, **kw: fluid.optimizer.Adam(lr, **kw)),
    OptCase("adagrad", {"epsilon": 1e-6}, {"Moment": 0.25}, ref_adagrad,
            lambda lr, **kw: fluid.optimizer.Adagrad(lr, **kw)),
    OptCase("rmsprop", {"decay": 0.95, "epsilon": 1e-6, "momentum": 0.0, "centered": False},
            {"MeanSquare": 0.5, "MeanGrad": 0.1, "Moment": None}, ref_rmsprop,
            lambda lr, **kw: fluid.optimizer.RMSProp(lr, **kw)),
    OptCase("rmsprop", {"decay": 0.9, "epsilon": 1e-6, "momentum": 0.5, "centered": True},
            {"MeanSquare": 1.0, "MeanGrad": 0.1, "Moment": None}, ref_rmsprop,
            lambda lr, **kw: fluid.optimizer.RMSProp(lr, rho=0.9, momentum=0.5, centered=True, **kw),
            "rmsprop_centered"),
    OptCase("adamax", {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8},
            {"Moment": None, "InfNorm": 0.5, "Beta1Pow": 0.9}, ref_adamax,
            lambda lr, **kw: fluid.optimizer.Adamax(lr, **kw)),
    OptCase("adadelta", {"rho": 0.95, "epsilon": 1e-6}, {"AvgSquaredGrad": 0.3, "AvgSquaredUpdate": 0.1},
            ref_adadelta, lambda lr, **kw: fluid.optimizer.Adadelta(lr, **kw)),
    OptCase("decayed_adagrad", {"decay": 0.95, "epsilon": 1e-6}, {"Moment": 0.25}, ref_decayed_adagrad,
            lambda lr, **kw: fluid.optimizer.DecayedAdagrad(lr, **kw)),
    OptCase("ftrl", {"l1": 0.0, "l2": 0.0, "lr_power": -0.5},
            {"SquaredAccumulator": 0.25, "LinearAccumulator": None}, ref_ftrl,
            lambda lr, **kw: fluid.optimizer.Ftrl(lr, **kw)),
    OptCase("ftrl", {"l1": 0.05, "l2": 0.1, "lr_power": -0.25},
            {"SquaredAccumulator": 0.25, "LinearAccumulator": None}, ref_ftrl,
            lambda lr, **kw: fluid.optimizer.Ftrl(lr, l1=0.05, l2=0.1, lr_power=-0.25, **kw), "ftrl_l1_l2_pow"),
    OptCase("lamb", {"beta1": 0.9, "beta2": 0.999, "epsilon": 1e-6, "weight_decay": 0.01},
            {"Moment1": None, "Moment2": 0.5, "Beta1Pow": 0.9, "Beta2Pow": 0.999}, ref_lamb,
            lambda lr, **kw: fluid.optimizer.Lamb(lr, **kw)),
    OptCase("lars_momentum", {"mu": 0.9, "lars_coeff": 0.001, "lars_weight_decay": 0.0005}, {"Velocity": None},
            ref_lars_momentum, lambda lr, **kw: fluid.optimizer.LarsMomentum(lr, momentum=0.9, **kw)),
    OptCase("lars_momentum", {"mu": 0.5, "lars_coeff": 0.5, "lars_weight_decay": 0.01}, {"Velocity": None},
            ref_lars_momentum, lambda lr, **kw: fluid.optimizer.LarsMomentum(
                lr, momentum=0.5, lars_coeff=0.5, lars_weight_decay=0.01, **kw), "lars_coeff_half"),
    OptCase("dpsgd", {"clip": 1.0, "batch_size": 8.0, "sigma": 0.0, "seed": 0}, {}, ref_dpsgd,
            lambda lr, regularization=None: fluid.optimizer.Dpsgd(lr, clip=1.0, batch_size=8.0, sigma=0.0)),
    OptCase("dpsgd", {"clip": 100.0, "batch_size": 8.0, "sigma": 0.0, "seed": 0}, {}, ref_dpsgd,
            lambda lr, regularization=None: fluid.optimizer.Dpsgd(lr, clip=100.0, batch_size=8.0, sigma=0.0),
            "dpsgd_unclipped"),
]
NEW_OPS = ["rmsprop", "adamax", "adadelta", "decayed_adagrad", "ftrl", "lamb"]  # issue 14, item 6
LATER_OPS = ["lars_momentum", "dpsgd"]  # issue 14, the remaining optimizers
OPT_IDS = [c.id for c in OPT_CASES]


def _inputs(case: OptCase, rng, dtype, shape=(3, 4)) -> dict:
    ins = {"Param": rng.normal(size=shape), "Grad": rng.normal(size=shape), "LearningRate": np.array([0.05])}
    for slot, fill in case.state.items():
        scalar = slot.endswith("Pow")
        ins[slot] = (np.full((1,) if scalar else shape, fill) if fill is not None
                     else rng.normal(size=shape))
    return {k: v.astype(dtype) for k, v in ins.items()}


def _run(op, ins, attrs):
    opdef = get_op_def(op)
    ctx = KernelContext(outputs=(s.name for s in opdef.outputs))
    return opdef.kernels["cpu"](np, ins, {**opdef.attrs, **attrs}, ctx)


@pytest.mark.parametrize("case", OPT_CASES, ids=OPT_IDS)
def test_op_matches_reference_over_steps(case):
    rng = np.random.default_rng(0)
    ins = _inputs(case, rng, np.float32)
    opdef = get_op_def(case.op)
    ref_p = ins["Param"].astype(np.float64)
    ref_s = {k: ins[k].astype(np.float64) for k in case.state}
    for _ in range(5):
        out = _run(case.op, ins, case.attrs)
        ref_p, ref_s = case.ref(ref_p, ins["Grad"].astype(np.float64), 0.05, ref_s, case.attrs)
        np.testing.assert_allclose(out["ParamOut"], ref_p, rtol=1e-5, atol=1e-6)
        out_of = {v: k for k, v in opdef.inplace.items()}  # state slot -> its output slot
        for slot, want in ref_s.items():
            np.testing.assert_allclose(out[out_of[slot]], want, rtol=1e-5, atol=1e-6, err_msg=slot)
        ins = {**ins, **{opdef.inplace[o]: v for o, v in out.items()}}  # state fed back
        ins["Grad"] = rng.normal(size=(3, 4)).astype(np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", OPT_CASES, ids=OPT_IDS)
def test_op_outputs_are_new_arrays_of_the_state_shapes(case, dtype):
    ins = _inputs(case, np.random.default_rng(1), dtype)
    before = {k: v.copy() for k, v in ins.items()}
    out = _run(case.op, ins, case.attrs)
    opdef = get_op_def(case.op)
    assert set(out) == {s.name for s in opdef.outputs}
    for slot, value in out.items():
        src = ins[opdef.inplace[slot]]
        assert (value.shape, value.dtype) == (src.shape, src.dtype), slot
        assert not any(np.shares_memory(value, x) for x in ins.values()), f"{slot} aliases an input"
    for k in ins:
        np.testing.assert_array_equal(ins[k], before[k], err_msg=f"input {k} was mutated")


@pytest.mark.parametrize("op", ["sgd", "momentum", "adam", "adagrad"] + NEW_OPS + LATER_OPS)
def test_op_slot_roles_and_inplace_pairs(op):
    d = get_op_def(op)
    assert d.role == "optimize"
    for role in ("Param", "Grad", "LearningRate"):  # adadelta: no learning rate, as in Fluid 1.8
        assert len(d.input_slots(role)) == (0 if (op, role) == ("adadelta", "LearningRate") else 1), role
    assert d.output_slots("ParamOut") == ["ParamOut"]
    assert set(d.inplace) == {s.name for s in d.outputs}  # every output updates an input
    for out, inp in d.inplace.items():
        assert d.slot(out).role == d.slot(inp).role + "Out", (out, inp)
    state = d.input_slots("Moment") + d.input_slots("ScalarState")
    others = [s.name for s in d.inputs if s.role not in ("Param", "Grad", "LearningRate")]
    assert sorted(state) == sorted(others)


def _append(op, shapes, attrs=None):
    block = Program().global_block()
    d = get_op_def(op)
    for name, shape in shapes.items():
        block.create_var(name, shape=shape, dtype="float32")
    return block.append_op(op, {s: [s] for s in shapes},
                           {o.name: [d.inplace[o.name]] for o in d.outputs}, attrs)


def test_infer_checks_grad_state_and_lr_shapes():
    good = {"Param": [3, 4], "Grad": [3, 4], "LearningRate": [1], "Moment1": [3, 4], "Moment2": [3, 4],
            "Beta1Pow": [1], "Beta2Pow": [1]}
    _append("adam", good)
    for slot, bad in [("Grad", [4, 3]), ("Moment2", [3]), ("LearningRate", [2]), ("Beta1Pow", [3, 4])]:
        with pytest.raises(ProgramError, match=rf"adam: {slot}.*{bad}"):
            _append("adam", {**good, slot: bad})


# -- schedules --------------------------------------------------------------------------------

SCHEDULES = {  # name -> (layer call, formula of the step)
    "piecewise": (lambda L: L.piecewise_decay([3, 6, 9], [0.1, 0.2, 0.3, 0.4]),
                  lambda s: [0.1, 0.2, 0.3, 0.4][sum(s >= b for b in (3, 6, 9))]),
    "exponential": (lambda L: L.exponential_decay(0.1, 4, 0.5), lambda s: 0.1 * 0.5 ** (s / 4)),
    "exponential_staircase": (lambda L: L.exponential_decay(0.1, 4, 0.5, staircase=True),
                              lambda s: 0.1 * 0.5 ** (s // 4)),
    "natural_exp": (lambda L: L.natural_exp_decay(0.1, 3, 0.5), lambda s: 0.1 * math.exp(-0.5 * s / 3)),
    "natural_exp_staircase": (lambda L: L.natural_exp_decay(0.1, 3, 0.5, True),
                              lambda s: 0.1 * math.exp(-0.5 * (s // 3))),
    "inverse_time": (lambda L: L.inverse_time_decay(0.1, 2, 0.5), lambda s: 0.1 / (1 + 0.5 * s / 2)),
    "inverse_time_staircase": (lambda L: L.inverse_time_decay(0.1, 2, 0.5, True),
                               lambda s: 0.1 / (1 + 0.5 * (s // 2))),
    "polynomial": (lambda L: L.polynomial_decay(0.1, 8, 0.01, power=2.0),
                   lambda s: 0.09 * (1 - min(s, 8) / 8) ** 2 + 0.01),
    "polynomial_cycle": (lambda L: L.polynomial_decay(0.1, 5, 0.01, power=1.0, cycle=True),
                         lambda s: 0.09 * (1 - s / (5 * max(math.ceil(s / 5), 1))) + 0.01),
    "cosine": (lambda L: L.cosine_decay(0.1, 2, 6),
               lambda s: 0.1 * (math.cos((s // 2) * math.pi / 6) + 1) / 2),
}


@pytest.mark.parametrize("name", sorted(SCHEDULES))
def test_schedule_values_over_steps(name, fresh_programs):
    main, startup = fresh_programs
    layer, formula = SCHEDULES[name]
    lr = layer(fluid.layers)
    exe = fluid.Executor()
    exe.run(startup)
    got = [exe.run(main, fetch_list=[lr])[0] for _ in range(13)]
    assert all(v.shape == (1,) and v.dtype == np.float32 for v in got)
    np.testing.assert_allclose(np.concatenate(got), [formula(s) for s in range(13)], rtol=1e-6)


def test_one_decay_counter_runs_first(fresh_programs):
    main, startup = fresh_programs
    x = fluid.layers.data(name="x", shape=[2])
    fluid.layers.mean(x)
    lr1 = fluid.layers.piecewise_decay([2], [1.0, 2.0])
    lr2 = fluid.layers.exponential_decay(1.0, 1, 0.5)
    incs = [op for op in main.global_block().ops if op.type == "increment"]
    assert len(incs) == 1 and main.global_block().ops[0] is incs[0] and incs[0].role == "lr_sched"
    counter = main.global_block().var(LR_DECAY_COUNTER)
    assert counter.persistable and counter.dtype == "int64"
    assert [op.role for op in main.global_block().ops if op.type.endswith("_decay")] == ["lr_sched"] * 2
    exe = fluid.Executor()
    exe.run(startup)
    assert np.asarray(fluid.global_scope().find_var(LR_DECAY_COUNTER).get_tensor()).tolist() == [-1]
    for step in range(3):
        a, b = exe.run(main, feed={"x": np.ones((1, 2), "float32")}, fetch_list=[lr1, lr2])
        assert (a[0], b[0]) == (1.0 if step < 2 else 2.0, 0.5 ** step)
    assert np.asarray(fluid.global_scope().find_var(LR_DECAY_COUNTER).get_tensor()).tolist() == [2]
    assert not any(op.role == "lr_sched" for op in main.clone(for_test=True).global_block().ops)


@pytest.mark.parametrize("call, exc, msg", [
    (lambda L: L.piecewise_decay([3, 6], [0.1, 0.2]), ValueError, r"values needs .* 3 entries, got 2"),
    (lambda L: L.piecewise_decay([6, 3], [0.1, 0.2, 0.3]), ValueError, r"boundaries must increase"),
    (lambda L: L.exponential_decay(0.1, 0, 0.5), ValueError, r"exponential_decay: decay_steps must be"),
    (lambda L: L.cosine_decay(0.1, 10, 0), ValueError, r"cosine_decay: epochs must be"),
    (lambda L: L.inverse_time_decay(L.data(name="lr", shape=[1]), 2, 0.5), TypeError,
     r"learning_rate must be a number"),
])
def test_schedule_argument_errors(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call(fluid.layers)


# -- end to end: training runs against a numpy re-implementation ------------------------------

STEPS, BATCH = 10, 8
_r = np.random.default_rng(7)
DATA_X = _r.normal(size=(STEPS * BATCH, 4)).astype(np.float32)
DATA_Y = (DATA_X @ _r.normal(size=(4, 1)) + 0.5).astype(np.float32)
W0, B0 = _r.uniform(-0.8, 0.8, size=(4, 1)).astype(np.float32), np.array([0.2], np.float32)
CASE = {c.id: c for c in OPT_CASES}


@dataclasses.dataclass(frozen=True)
class Run:
    """A training run: optimizer case, lr (float, or (layer call, formula of the step)),
    the optimizer's regularizer, ``w``'s own regularizer and lr multiplier."""

    name: str
    opt: str
    lr: object
    reg: tuple | None = None  # ("l1" | "l2", coeff)
    w_reg: tuple | None = None
    w_lr: float = 1.0


RUNS = [
    Run("sgd", "sgd", 0.05),
    Run("sgd_l2_w_lr_half", "sgd", 0.05, reg=("l2", 0.1), w_lr=0.5),
    Run("sgd_w_l1_over_l2", "sgd", 0.05, reg=("l2", 0.1), w_reg=("l1", 0.2)),
    Run("momentum_piecewise", "momentum", (lambda L: L.piecewise_decay([3, 6], [0.02, 0.01, 0.005]),
                                           lambda s: [0.02, 0.01, 0.005][(s >= 3) + (s >= 6)])),
    Run("nesterov_l1", "nesterov", 0.02, reg=("l1", 0.05)),
    Run("adam", "adam", 0.05),
    Run("adam_exponential", "adam", (lambda L: L.exponential_decay(0.05, 2, 0.7),
                                     lambda s: 0.05 * 0.7 ** (s / 2))),
    Run("adagrad_l2", "adagrad", 0.2, reg=("l2", 0.01)),
    Run("rmsprop", "rmsprop", 0.01),
    Run("rmsprop_centered_l2", "rmsprop_centered", 0.01, reg=("l2", 0.01)),
    Run("adamax_w_lr_half", "adamax", 0.05, w_lr=0.5),
    Run("adadelta", "adadelta", 1.0),
    Run("decayed_adagrad_piecewise", "decayed_adagrad",
        (lambda L: L.piecewise_decay([4], [0.1, 0.05]), lambda s: [0.1, 0.05][s >= 4])),
    Run("ftrl", "ftrl", 0.1),
    Run("ftrl_l1_l2_pow_w_l1", "ftrl_l1_l2_pow", 0.1, w_reg=("l1", 0.01)),
    Run("lamb", "lamb", 0.05),
    Run("lars_momentum_piecewise", "lars_coeff_half", (lambda L: L.piecewise_decay([4], [0.5, 0.2]),
                                                       lambda s: [0.5, 0.2][s >= 4])),
    Run("lars_momentum_l2", "lars_momentum", 1.0, reg=("l2", 0.01)),
    Run("dpsgd", "dpsgd", 0.05),
    Run("dpsgd_unclipped_w_lr_half", "dpsgd_unclipped", 0.05, w_lr=0.5),
]
_REG = {"l1": L1Decay, "l2": L2Decay}


def _numpy_run(run: Run):
    """The same model and optimizer in float64 numpy: per-step losses and final state."""
    case = CASE[run.opt]
    params = {"w": W0.astype(np.float64), "b": B0.astype(np.float64)}
    pow0 = {"Beta1Pow": case.attrs.get("beta1"), "Beta2Pow": case.attrs.get("beta2")}
    # the powers start at float32(beta), as the startup program fills them
    state = {n: {slot: np.full((1,), np.float32(pow0[slot]), np.float64) if slot in pow0 else np.zeros_like(p)
                 for slot in case.state}
             for n, p in params.items()}
    losses = []
    for s in range(STEPS):
        x, y = DATA_X[s * BATCH:(s + 1) * BATCH], DATA_Y[s * BATCH:(s + 1) * BATCH]
        diff = x @ params["w"] + params["b"] - y
        losses.append(np.mean(diff ** 2))
        dpred = 2 * diff / len(x)
        grads = {"w": x.T @ dpred, "b": dpred.sum(0)}
        lr = run.lr if isinstance(run.lr, float) else run.lr[1](s)
        for n, p in params.items():
            reg = (run.w_reg if n == "w" else None) or run.reg
            g = grads[n]
            if reg is not None:
                g = g + reg[1] * (p if reg[0] == "l2" else np.sign(p))
            mult = run.w_lr if n == "w" else 1.0
            params[n], state[n] = case.ref(p, g, lr * mult, state[n], case.attrs)
    return np.array(losses), params, state


@pytest.mark.parametrize("run", RUNS, ids=[r.name for r in RUNS])
def test_training_matches_numpy(run, fresh_programs):
    main, startup = fresh_programs
    L = fluid.layers
    x, y = L.data(name="x", shape=[4]), L.data(name="y", shape=[1])
    w_attr = fluid.ParamAttr(name="w", learning_rate=run.w_lr,
                             regularizer=_REG[run.w_reg[0]](run.w_reg[1]) if run.w_reg else None)
    loss = L.mean(L.square_error_cost(L.fc(x, 1, param_attr=w_attr, bias_attr=fluid.ParamAttr(name="b")), y))
    lr = run.lr if isinstance(run.lr, float) else run.lr[0](L)
    CASE[run.opt].make(lr, regularization=_REG[run.reg[0]](run.reg[1]) if run.reg else None).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    scope = fluid.global_scope()
    scope.find_var("w").get_tensor().set(W0)
    scope.find_var("b").get_tensor().set(B0)
    rows = [slice(s * BATCH, (s + 1) * BATCH) for s in range(STEPS)]
    losses = [exe.run(main, feed={"x": DATA_X[r], "y": DATA_Y[r]}, fetch_list=[loss])[0] for r in rows]
    want_losses, want_params, want_state = _numpy_run(run)
    np.testing.assert_allclose(np.concatenate(losses), want_losses, rtol=1e-5)
    for op in main.global_block().ops:  # the final state, found through the ops' slots
        if op.role == "optimize" and op.type == CASE[run.opt].op:
            name = op.input("Param")[0]
            np.testing.assert_allclose(np.asarray(scope.find_var(name).get_tensor()), want_params[name],
                                       rtol=1e-5, atol=1e-7)
            for slot, want in want_state[name].items():
                got = np.asarray(scope.find_var(op.input(slot)[0]).get_tensor())
                assert got.dtype == np.float32 and got.shape == want.shape
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7, err_msg=f"{name} {slot}")


@pytest.mark.parametrize("opt", NEW_OPS + ["lars_coeff_half", "dpsgd"])
def test_each_new_optimizer_trains_a_small_model(opt, fresh_programs):
    """Issue 14, item 6: a two-layer regression, one batch 40 times, with Fluid's defaults
    (but the learning rate): the loss falls."""
    main, startup = fresh_programs
    startup.random_seed = 1
    L = fluid.layers
    x, y = L.data(name="x", shape=[4]), L.data(name="y", shape=[1])
    loss = L.mean(L.square_error_cost(L.fc(L.fc(x, 8, act="tanh"), 1), y))
    CASE[opt].make(0.05).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    feed = {"x": DATA_X[:16], "y": DATA_Y[:16]}
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss])[0][0]) for _ in range(40)]
    assert losses[-1] < 0.8 * losses[0], losses


def test_lamb_excludes_parameters_from_weight_decay(fresh_programs):
    main, _ = fresh_programs
    x = fluid.layers.data(name="x", shape=[3])
    loss = fluid.layers.mean(fluid.layers.fc(x, 2))
    fluid.optimizer.Lamb(0.01, lamb_weight_decay=0.1,
                         exclude_from_weight_decay_fn=lambda p: p.name.endswith(".b_0")).minimize(loss)
    decay = {op.input("Param")[0]: op.attrs["weight_decay"] for op in main.global_block().ops if op.type == "lamb"}
    assert decay == {"fc_0.w_0": 0.1, "fc_0.b_0": 0.0}


def test_new_optimizers_accumulators_are_named_as_fluid_names_them(fresh_programs):
    main, startup = fresh_programs
    x = fluid.layers.data(name="x", shape=[3])
    loss = fluid.layers.mean(fluid.layers.fc(x, 1, bias_attr=False))
    fluid.optimizer.RMSProp(0.01).minimize(loss)
    fluid.optimizer.Adadelta(0.01).minimize(loss)  # a second optimizer: names stay unique
    names = sorted(v.name for v in main.global_block().vars.values() if v.attrs.get("accumulator_of"))
    assert names == ["fc_0.w_0__avg_squared_grad_0", "fc_0.w_0__avg_squared_update_0", "fc_0.w_0_mean_grad_0",
                     "fc_0.w_0_mean_square_0", "fc_0.w_0_momentum_0"]
    assert all(startup.global_block().has_var(n) for n in names)


@pytest.mark.parametrize("case", [c for c in OPT_CASES if c.op in ("rmsprop", "lamb")], ids=lambda c: c.id)
def test_sparse_gradient_is_the_dense_update_on_the_scattered_gradient(case):
    from placegroup.values import SelectedRows

    rng = np.random.default_rng(5)
    ins = _inputs(case, rng, np.float32, shape=(6, 3))
    rows = np.array([4, 1, 4])
    g = SelectedRows(rows, rng.normal(size=(3, 3)).astype(np.float32), 6)
    sparse, dense = _run(case.op, {**ins, "Grad": g}, case.attrs), _run(case.op, {**ins, "Grad": g.to_dense()},
                                                                          case.attrs)
    for k in dense:
        np.testing.assert_allclose(sparse[k], dense[k], rtol=1e-6, err_msg=k)


@pytest.mark.parametrize("op", ["adamax", "adadelta", "decayed_adagrad", "ftrl"] + LATER_OPS)
def test_dense_only_optimizers_refuse_a_sparse_gradient_naming_themselves(op):
    from placegroup.values import SelectedRows

    case = next(c for c in OPT_CASES if c.op == op)
    ins = _inputs(case, np.random.default_rng(6), np.float32, shape=(6, 3))
    g = SelectedRows(np.array([1]), np.ones((1, 3), np.float32), 6)
    with pytest.raises(TypeError, match=rf"{op}: Grad is a SelectedRows .* {op} does not support"):
        _run(op, {**ins, "Grad": g}, case.attrs)


def test_regularizer_ops_finish_the_gradient_on_the_trainer_side(fresh_programs):
    main, _ = fresh_programs
    x = fluid.layers.data(name="x", shape=[3])
    w_attr = fluid.ParamAttr(name="w", regularizer=L1Decay(0.1))
    loss = fluid.layers.mean(fluid.layers.fc(x, 1, param_attr=w_attr, bias_attr=fluid.ParamAttr(name="b")))
    _, params_grads = fluid.optimizer.SGD(0.1, regularization=L2Decay(0.2)).minimize(loss)
    ops = main.global_block().ops
    sgd = {op.input("Param")[0]: op for op in ops if op.type == "sgd"}
    for p, g in params_grads:  # the update reads the regularized gradient, made by one add
        assert sgd[p.name].input("Grad") == [g.name] and g.name != p.name + "@GRAD"
        writer = [op for op in ops if g.name in op.output_arg_names]
        assert [op.type for op in writer] == ["elementwise_add"]
    kinds = ("l1_decay_sign", "scale", "elementwise_add")
    reg_ops = [op for op in ops if op.type in kinds and op.role != "forward"]
    assert [op.type for op in reg_ops] == list(kinds) + ["scale", "elementwise_add"]  # w: L1, b: L2
    assert all(op.role == "backward" and op.param is None for op in reg_ops)  # NOTE(reg-placement)
    b_grad = dict((p.name, g) for p, g in params_grads)["b"]
    with pytest.raises(TypeError, match="regularizer of parameter 'b' must be L1Decay or L2Decay"):
        append_regularization_ops([(main.global_block().var("b"), b_grad)], regularization="l2")


def _embedding_model(is_sparse: bool, reg, distributed: bool = False):
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(ids, size=[20, 4], is_sparse=is_sparse, is_distributed=distributed,
                                 param_attr=fluid.ParamAttr(name="emb", regularizer=reg))
    cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(fluid.layers.fc(emb, 3), label))
    fluid.optimizer.SGD(0.5).minimize(cost)
    return cost


def _train_embedding(is_sparse: bool, reg) -> tuple:
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard(), fluid.scope_guard(fluid.Scope()):
        startup.random_seed = 3
        cost = _embedding_model(is_sparse, reg)
        exe = fluid.Executor()
        exe.run(startup)
        rng = np.random.default_rng(0)
        losses = []
        for _ in range(4):
            feed = {"ids": rng.integers(0, 20, (8, 1)), "label": rng.integers(0, 3, (8, 1))}
            losses.append(float(exe.run(main, feed=feed, fetch_list=[cost])[0][0]))
        return losses, np.array(fluid.global_scope().find_var("emb").get_tensor())


@pytest.mark.parametrize("reg", [fluid.regularizer.L2Decay(0.1), fluid.regularizer.L1Decay(0.05)],
                         ids=["L2Decay", "L1Decay"])
def test_a_sparse_gradient_takes_the_decay_of_the_whole_table(reg):
    """As in Fluid 1.x: a SelectedRows gradient plus the decay is dense (every row decays every
    step), so is_sparse=True trains exactly as is_sparse=False does."""
    sparse_losses, sparse_table = _train_embedding(True, reg)
    dense_losses, dense_table = _train_embedding(False, reg)
    np.testing.assert_allclose(sparse_losses, dense_losses, rtol=1e-6)
    np.testing.assert_allclose(sparse_table, dense_table, rtol=1e-6, atol=1e-7)
    untouched = _train_embedding(True, None)[1]
    assert not np.allclose(sparse_table, untouched)  # the decay did something


def test_a_regularized_distributed_table_is_refused_naming_it():
    with pytest.raises(ValueError, match="'emb' is a distributed table"):
        _embedding_model(True, fluid.regularizer.L2Decay(0.1), distributed=True)


# -- lars_momentum and dpsgd (issue 14: the remaining Fluid 1.8 optimizers) -----------------------


def test_lars_momentum_takes_the_plain_rate_when_a_norm_is_zero():
    """Fluid 1.8: local_lr = lr unless both ||Param|| and ||Grad|| are > 0."""
    case = CASE["lars_coeff_half"]
    for zero in ("Param", "Grad"):
        ins = _inputs(case, np.random.default_rng(3), np.float32)
        ins[zero] = np.zeros_like(ins[zero])
        out = _run("lars_momentum", ins, case.attrs)
        wd = case.attrs["lars_weight_decay"]
        v = case.attrs["mu"] * ins["Velocity"] + 0.05 * (ins["Grad"] + wd * ins["Param"])
        np.testing.assert_allclose(out["VelocityOut"], v, rtol=1e-6, err_msg=zero)


def _dpsgd_step(seed: int, step: int, sigma: float, ins=None):
    from placegroup.ops.lars_dpsgd import dpsgd  # the kernel, with the step the executor would set

    rng = np.random.default_rng(9)
    ins = ins or {"Param": rng.normal(size=(5, 3)).astype(np.float32),
                  "Grad": rng.normal(size=(5, 3)).astype(np.float32), "LearningRate": np.array([0.1], np.float32)}
    attrs = {"clip": 1.0, "batch_size": 4.0, "sigma": sigma, "seed": seed}
    ctx = KernelContext(outputs=("ParamOut",), step=step)
    return ins, dpsgd(np, ins, attrs, ctx)["ParamOut"]


def test_dpsgd_adds_one_counter_based_gaussian_number_per_step():
    """NOTE(dpsgd-noise): one N(0, sigma²) number per op call, the same for every element, a
    function of (seed, step) only: the same step repeats it, another step or seed changes it."""
    from placegroup.ops.lars_dpsgd import dpsgd_noise

    ins, clean = _dpsgd_step(7, 0, 0.0)
    assert get_op_def("dpsgd").uses_step
    seen = {}
    for seed, step in [(7, 0), (7, 1), (7, 2), (8, 0)]:
        _, out = _dpsgd_step(seed, step, 2.0, ins)
        shift = (clean - out) / 0.1 * 4.0  # lr * noise / batch_size, as noise
        np.testing.assert_allclose(shift, np.full_like(shift, shift.flat[0]), rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(shift.flat[0], dpsgd_noise(seed, step, 2.0), rtol=1e-4, atol=1e-5)
        seen[(seed, step)] = float(shift.flat[0])
        np.testing.assert_array_equal(_dpsgd_step(seed, step, 2.0, ins)[1], out)  # repeatable
    assert len({round(v, 6) for v in seen.values()}) == 4, seen
    draws = np.array([dpsgd_noise(3, s, 1.5) for s in range(4000)])
    assert abs(draws.mean()) < 0.1 and abs(draws.std() - 1.5) < 0.1


@pytest.mark.parametrize("make, exc, msg", [
    (lambda: fluid.optimizer.LarsMomentum(0.1, momentum=None), TypeError, "LarsMomentumOptimizer: momentum must be"),
    (lambda: fluid.optimizer.LarsMomentum(0.1, 0.9, lars_coeff="big"), TypeError, "lars_coeff must be a number"),
    (lambda: fluid.optimizer.Dpsgd(0.1, clip=0.0), ValueError, r"DpsgdOptimizer: clip must be > 0, got 0.0"),
    (lambda: fluid.optimizer.Dpsgd(0.1, batch_size=-2), ValueError, r"batch_size must be > 0, got -2"),
    (lambda: fluid.optimizer.Dpsgd(0.1, sigma=-1.0), ValueError, r"sigma must be >= 0, got -1.0"),
    (lambda: fluid.optimizer.Dpsgd("0.1"), TypeError, "learning_rate must be a float or a Variable"),
])
def test_lars_and_dpsgd_argument_errors(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make()


def test_lars_and_dpsgd_ops_as_fluid_names_them(fresh_programs):
    main, startup = fresh_programs
    x = fluid.layers.data(name="x", shape=[3])
    loss = fluid.layers.mean(fluid.layers.fc(x, 2))
    fluid.optimizer.LarsMomentum(0.1, 0.9, lars_coeff=0.002, lars_weight_decay=0.001).minimize(loss)
    lars = [op for op in main.global_block().ops if op.type == "lars_momentum"]
    assert [op.input("Velocity")[0] for op in lars] == ["fc_0.w_0_velocity_0", "fc_0.b_0_velocity_0"]
    assert lars[0].attrs == {"mu": 0.9, "lars_coeff": 0.002, "lars_weight_decay": 0.001}
    assert all(op.param == op.input("Param")[0] and op.role == "optimize" for op in lars)
    main2 = fluid.Program()
    with fluid.program_guard(main2, fluid.Program()):
        x = fluid.layers.data(name="x", shape=[3])
        loss = fluid.layers.mean(fluid.layers.fc(x, 2))
        fluid.optimizer.Dpsgd(0.1, clip=2.0, batch_size=16.0, sigma=0.5).minimize(loss)
    op = next(op for op in main2.global_block().ops if op.type == "dpsgd")
    assert op.attrs == {"clip": 2.0, "batch_size": 16.0, "sigma": 0.5, "seed": 0}


def _adam_first_steps(fresh_programs, is_sparse: bool, ids_or_x, steps: int) -> list:
    main, startup = fresh_programs
    if is_sparse is None:  # a weight whose gradient is x itself: loss = x @ w
        x = fluid.layers.data(name="x", shape=[4])
        out = fluid.layers.fc(x, 1, bias_attr=False,
                              param_attr=fluid.ParamAttr(name="w", initializer=fluid.initializer.Constant(0.0)))
        loss, feed = fluid.layers.mean(out), {"x": ids_or_x}
    else:
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[10, 4], is_sparse=is_sparse,
                                     param_attr=fluid.ParamAttr(name="w", initializer=fluid.initializer.Constant(0.5)))
        loss, feed = fluid.layers.mean(emb * emb), {"ids": ids_or_x}
    fluid.optimizer.Adam(learning_rate=1e-3).minimize(loss)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    values = []
    for _ in range(steps):
        exe.run(main, feed=feed, fetch_list=[loss])
        values.append(np.array(fluid.global_scope().find_var("w").get_tensor()))
    return values


def test_adam_adds_fluid_18s_epsilon_to_tiny_gradients(fresh_programs):
    """Gradients near epsilon: Fluid 1.8.5's own values for this model (its epsilon is added
    unscaled, NOTE(paddle-order) in ops/optimizer.py)."""
    x = np.array([[1e-6, 3e-7, 1e-7, 1e-8]], np.float32)
    w1, w2 = _adam_first_steps(fresh_programs, None, x, 2)
    np.testing.assert_allclose(w1.ravel(), [-7.5974577e-04, -4.8683141e-04, -2.4025192e-04, -3.0653238e-05],
                               rtol=1e-6)
    np.testing.assert_allclose(w2.ravel(), [-1.5769608e-03, -1.0597158e-03, -5.4921315e-04, -7.3449555e-05],
                               rtol=1e-6)


@pytest.mark.parametrize("is_sparse, step", [(False, 0.00099999), (True, 0.00074413)])
def test_sparse_adam_corrects_bias_with_the_next_steps_powers(fresh_programs, is_sparse, step):
    """Fluid 1.8.5's first Adam step on an embedding row: smaller with ``is_sparse=True``
    (NOTE(sparse-adam-powers) in ops/optimizer.py)."""
    (w,) = _adam_first_steps(fresh_programs, is_sparse, np.array([[1], [2]], np.int64), 1)
    np.testing.assert_allclose(0.5 - w[1:3], step, rtol=1e-4)
    np.testing.assert_array_equal(w[[0, 3]], 0.5)  # rows no id touched: no moments yet, no move
