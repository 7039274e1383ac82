"""ModelAverage, ExponentialMovingAverage, LookaheadOptimizer and RecomputeOptimizer (Fluid 1.8).

* their ops (ops/averaging.py) against numpy references over many steps: the sliding-window
  sums (with the 16384-update fold made small), the scheduled decay, the EMA update and bias
  correction, Lookahead's sync; shape errors at build time;
* each wrapper in a training program against numpy (a linear model trained by SGD in numpy):
  averages after every step, ``apply`` / ``restore`` (a context manager; Fluid 1.8's in-place
  EMA correction, NOTE(ema-apply-1.8)), what ``clone(for_test=True)`` keeps, argument errors;
* 2 trainers x 2 pservers = one process for LarsMomentum, Dpsgd (noise on), Lookahead (a
  sliced parameter), the EMA (its averages fetched from the pservers) and ModelAverage; apply
  refused with pservers, and working on every trainer without them;
* where PLACEGROUP_PADDLE_PYTHON names a python with paddle, per-step losses and applied
  averages against Paddle 2.6 (``@pytest.mark.paddle``).
"""
from __future__ import annotations

import textwrap
import threading
import warnings

import numpy as np
import pytest

import placegroup as fluid
import placegroup.ops.averaging as averaging_ops
from placegroup.comm.loopback import LoopbackNetwork
from placegroup.errors import NotImplementedInPlacegroup, ProgramError
from placegroup.initializer import NumpyArrayInitializer
from placegroup.ir.framework import Program, note_transpiled_job
from placegroup.ops.registry import KernelContext, get_op_def
from tests.dist.train_model import data
from tests.inproc import build_programs, run_cluster, run_local
from tests.paddle_ref.reference import run_reference
from tests.test_modes import check_equivalent, model_with

L = fluid.layers
TOL = dict(rtol=1e-5, atol=1e-6)
STEPS, BATCH, LR = 12, 8, 0.1
_r = np.random.default_rng(11)
X = _r.normal(size=(STEPS * BATCH, 4)).astype(np.float32)
Y = (X @ _r.normal(size=(4, 1)) + 0.3).astype(np.float32)
W0, B0 = _r.uniform(-0.5, 0.5, size=(4, 1)).astype(np.float32), np.array([0.2], np.float32)


def _lr_counter():
    """The schedules' step counter (0 on the first run), an lr_sched var the pservers hold too."""
    return L.autoincreased_step_counter("@LR_DECAY_COUNTER@", begin=0)


def _run_op(op, ins, attrs=None, step=0):
    d = get_op_def(op)
    return d.kernels["cpu"](np, ins, {**d.attrs, **(attrs or {})}, KernelContext(step=step))


# -- the ops ----------------------------------------------------------------------------------


class WindowRef:
    """ModelAverage's meaning, on lists: the average of the current window and the last full
    one; a window closes once it holds >= min and >= min(max, int(updates * rate)) params."""

    def __init__(self, rate, lo, hi):
        self.rate, self.lo, self.hi = rate, lo, hi
        self.cur, self.last, self.updates = [], [], 0

    def step(self, p):
        self.updates += 1
        self.cur.append(p.astype(np.float64))
        window = min(self.hi, int(np.float32(self.updates) * np.float32(self.rate)))  # a C++ float product
        if len(self.cur) >= self.lo and len(self.cur) >= window:
            self.last, self.cur = self.cur, []

    def average(self):
        return np.sum(self.cur + self.last, axis=0) / (len(self.cur) + len(self.last))


def test_average_accumulates_keeps_the_sliding_window_of_fluid(monkeypatch):
    monkeypatch.setattr(averaging_ops, "MAX_NUM_ACCUMULATES", 5)  # the 16384-update fold, made small
    rng = np.random.default_rng(0)
    z = np.zeros((3, 2), np.float32)
    state = {"in_sum_1": z, "in_sum_2": z, "in_sum_3": z, **{f"in_{c}": np.zeros(1, np.int64)
                                                            for c in ("num_accumulates", "old_num_accumulates",
                                                                      "num_updates")}}
    attrs = {"average_window": 0.5, "min_average_window": 3, "max_average_window": 6}
    ref, folds, restarts = WindowRef(0.5, 3, 6), 0, 0
    for step in range(1, 41):
        p = rng.normal(size=(3, 2)).astype(np.float32)
        out = _run_op("average_accumulates", {"param": p, **state}, attrs)
        state = {"in" + k[3:]: v for k, v in out.items()}
        ref.step(p)
        n, old = int(out["out_num_accumulates"][0]), int(out["out_old_num_accumulates"][0])
        assert (n, old, int(out["out_num_updates"][0])) == (len(ref.cur), len(ref.last), step)
        assert all(v.dtype == np.int64 and v.shape == (1,) for k, v in out.items() if "num" in k)
        if step % 5 == 0 and n:  # the fold: sum_1 moved into sum_2
            folds += 1
            assert not out["out_sum_1"].any() and out["out_sum_2"].any()
        restarts += n == 0
        total = out["out_sum_1"] + out["out_sum_2"] + out["out_sum_3"]
        np.testing.assert_allclose(total / (n + old), ref.average(), rtol=1e-5, err_msg=f"step {step}")
    assert folds >= 3 and restarts >= 5


def test_ema_ops_schedule_update_and_correct():
    steps = np.arange(30, dtype=np.int64)
    got = [float(_run_op("ema_decay", {"Step": np.array([s])}, {"decay": 0.9})["Out"][0]) for s in steps]
    np.testing.assert_allclose(got, np.minimum(0.9, np.float32(steps + 1) / np.float32(steps + 10)), rtol=1e-7)
    assert _run_op("ema_decay", {"Step": np.array([3.0], np.float32)}, {"decay": 0.2})["Out"].dtype == np.float32
    p, ema = np.full((2, 2), 3.0, np.float32), np.ones((2, 2), np.float32)
    out = _run_op("ema_update", {"Param": p, "EMA": ema, "Decay": np.array([0.75], np.float32)})["EMAOut"]
    np.testing.assert_allclose(out, 0.75 * 1.0 + 0.25 * 3.0)
    d = np.array([0.9], np.float32)
    assert _run_op("ema_debias", {"EMA": ema, "Decay": d, "Step": np.array([0])})["Out"] is ema
    np.testing.assert_allclose(_run_op("ema_debias", {"EMA": ema, "Decay": d, "Step": np.array([3])})["Out"],
                               1 / (1 - 0.9 ** 3), rtol=1e-6)


def test_lookahead_op_syncs_every_k_th_step():
    p, slow = np.full((2, 3), 4.0, np.float32), np.zeros((2, 3), np.float32)
    common = {"Param": p, "Slow": slow, "K": np.array([3], np.int32), "Alpha": np.array([0.25], np.float32)}
    for step in (1, 2, 4, 5):
        out = _run_op("lookahead", {**common, "Step": np.array([step], np.int32)})
        assert out["ParamOut"] is p and out["SlowOut"] is slow
    for step in (3, 6):
        out = _run_op("lookahead", {**common, "Step": np.array([step], np.int32)})
        np.testing.assert_allclose(out["ParamOut"], 1.0)
        np.testing.assert_allclose(out["SlowOut"], 1.0)
        assert not np.shares_memory(out["ParamOut"], out["SlowOut"])


@pytest.mark.parametrize("op, shapes, attrs, msg", [
    ("average_accumulates", {"param": [3, 2], "in_sum_1": [3, 2], "in_sum_2": [2, 3], "in_sum_3": [3, 2],
                             "in_num_accumulates": [1], "in_old_num_accumulates": [1], "in_num_updates": [1]},
     {}, r"average_accumulates: in_sum_2\[2, 3\] must have the shape of the parameter \[3, 2\]"),
    ("average_accumulates", {"param": [3], "in_sum_1": [3], "in_sum_2": [3], "in_sum_3": [3],
                             "in_num_accumulates": [2], "in_old_num_accumulates": [1], "in_num_updates": [1]},
     {}, r"in_num_accumulates must have one element, got shape \[2\]"),
    ("average_accumulates", {"param": [3], "in_sum_1": [3], "in_sum_2": [3], "in_sum_3": [3],
                             "in_num_accumulates": [1], "in_old_num_accumulates": [1], "in_num_updates": [1]},
     {"min_average_window": 8, "max_average_window": 4}, r"min_average_window 8 must not exceed max_average_window 4"),
    ("ema_update", {"Param": [3, 2], "EMA": [3], "Decay": [1]}, {}, r"ema_update: EMA\[3\] must have the shape"),
    ("ema_decay", {"Step": [1]}, {"decay": 1.5}, r"ema_decay: decay must be in \[0, 1\], got 1.5"),
    ("lookahead", {"Param": [4], "Slow": [4], "Step": [1], "K": [2], "Alpha": [1]}, {},
     r"lookahead: K must have one element, got shape \[2\]"),
])
def test_ops_refuse_bad_shapes_at_build_time(op, shapes, attrs, msg):
    block = Program().global_block()
    d = get_op_def(op)
    for name, shape in shapes.items():
        block.create_var(name, shape=shape, dtype="int64" if "num" in name else "float32")
    outs = {o.name: [d.inplace.get(o.name, o.name)] for o in d.outputs}
    for o in outs.values():
        if not block.has_var(o[0]):
            block.create_var(o[0], dtype="float32")
    with pytest.raises(ProgramError, match=msg):
        block.append_op(op, {s: [s] for s in shapes}, outs, attrs)


# -- the wrappers in a program ----------------------------------------------------------------


def _linear():
    x, y = L.data(name="x", shape=[4]), L.data(name="y", shape=[1])
    pred = L.fc(x, 1, param_attr=fluid.ParamAttr(name="w", initializer=NumpyArrayInitializer(W0)),
                bias_attr=fluid.ParamAttr(name="b", initializer=NumpyArrayInitializer(B0)))
    return pred, L.mean(L.square_error_cost(pred, y))


def _sgd_trajectory(steps=STEPS, sync=None):
    """SGD on the linear model in float64 numpy: the parameters after each step. ``sync(step,
    params) -> params`` rewrites them after a step (Lookahead)."""
    params, out = {"w": W0.astype(np.float64), "b": B0.astype(np.float64)}, []
    for s in range(steps):
        x, y = X[s * BATCH:(s + 1) * BATCH], Y[s * BATCH:(s + 1) * BATCH]
        d = 2 * (x @ params["w"] + params["b"] - y) / len(x)
        params = {"w": params["w"] - LR * x.T @ d, "b": params["b"] - LR * d.sum(0)}
        if sync is not None:
            params = sync(s + 1, params)
        out.append(params)
    return out


def _train(main, startup, loss, steps=STEPS, fetch=()):
    exe = fluid.Executor()
    exe.run(startup)
    rows = [slice(s * BATCH, (s + 1) * BATCH) for s in range(steps)]
    return exe, [exe.run(main, feed={"x": X[r], "y": Y[r]}, fetch_list=[loss, *fetch]) for r in rows]


def _value(name):
    return np.array(fluid.global_scope().find_var(name).get_tensor())


def test_ema_averages_applies_and_restores_as_fluid_1_8(fresh_programs):
    main, startup = fresh_programs
    pred, loss = _linear()
    test = main.clone(for_test=True)
    fluid.optimizer.SGD(LR).minimize(loss)
    ema = fluid.optimizer.ExponentialMovingAverage(0.9)
    ema.update()
    assert main.global_block().ops[0].type == "increment" and main.global_block().ops[0].role == "lr_sched"
    updates = [op for op in main.global_block().ops if op.type == "ema_update"]
    assert [(op.param, op.role, op.input("EMA")) for op in updates] == [
        ("w", "optimize", ["w_ema_0"]), ("b", "optimize", ["b_ema_0"])]
    assert not any(op.type in ("ema_update", "increment") for op in main.clone(for_test=True).global_block().ops)
    exe, _ = _train(main, startup, loss)
    traj, want = _sgd_trajectory(), {"w": 0.0, "b": 0.0}
    for params in traj:
        want = {n: 0.9 * want[n] + 0.1 * params[n] for n in want}
    for n in want:
        np.testing.assert_allclose(_value(f"{n}_ema_0"), want[n], **TOL)
    assert _value("@EMA_STEP_COUNTER@").tolist() == [STEPS]
    corrected = {n: want[n] / (1 - 0.9 ** STEPS) for n in want}
    x = X[:BATCH]
    with ema.apply(exe):
        for n in want:
            np.testing.assert_allclose(_value(n), corrected[n], **TOL)
        got = exe.run(test, feed={"x": x, "y": Y[:BATCH]}, fetch_list=[pred])[0]
        np.testing.assert_allclose(got, x @ corrected["w"] + corrected["b"], **TOL)
    for n in want:  # restored: the trained values
        np.testing.assert_allclose(_value(n), traj[-1][n], **TOL)
    with ema.apply(exe, need_restore=False):  # NOTE(ema-apply-1.8): the correction went into the EMA
        pass
    for n in want:
        np.testing.assert_allclose(_value(n), corrected[n] / (1 - 0.9 ** STEPS), **TOL)
    ema.restore(exe)
    np.testing.assert_allclose(_value("w"), traj[-1]["w"], **TOL)


def test_ema_with_thres_steps_schedules_the_decay(fresh_programs):
    main, startup = fresh_programs
    _, loss = _linear()
    fluid.optimizer.SGD(LR).minimize(loss)
    ema = fluid.optimizer.ExponentialMovingAverage(0.95, thres_steps=_lr_counter())
    ema.update()
    (op,) = [op for op in main.global_block().ops if op.type == "ema_decay"]
    assert op.role == "lr_sched" and op.output("Out") == ["scheduled_ema_decay_rate"]
    exe, _ = _train(main, startup, loss)
    want, decay = {"w": 0.0, "b": 0.0}, 0.0
    for t, params in enumerate(_sgd_trajectory()):  # the counter reads t at step t
        decay = min(0.95, (t + 1) / (t + 10))
        want = {n: decay * want[n] + (1 - decay) * params[n] for n in want}
    np.testing.assert_allclose(_value("scheduled_ema_decay_rate"), [decay], rtol=1e-6)
    with ema.apply(exe):  # corrected with the last step's decay, as Fluid
        for n in want:
            np.testing.assert_allclose(_value(n), want[n] / (1 - decay ** STEPS), **TOL)


def test_model_average_applies_the_window_average(fresh_programs):
    main, startup = fresh_programs
    pred, loss = _linear()
    fluid.optimizer.SGD(LR).minimize(loss)
    avg = fluid.optimizer.ModelAverage(0.5, min_average_window=2, max_average_window=4)
    ops = [op for op in main.global_block().ops if op.type == "average_accumulates"]
    assert [(op.param, op.role, op.input("in_sum_1")) for op in ops] == [
        ("w", "optimize", ["w_sum_1_0"]), ("b", "optimize", ["b_sum_1_0"])]
    assert ops[0].attrs == {"average_window": 0.5, "min_average_window": 2, "max_average_window": 4}
    exe, _ = _train(main, startup, loss)
    refs = {n: WindowRef(0.5, 2, 4) for n in ("w", "b")}
    traj = _sgd_trajectory()
    for params in traj:
        for n, r in refs.items():
            r.step(params[n])
    with avg.apply(exe):
        for n, r in refs.items():
            np.testing.assert_allclose(_value(n), r.average(), **TOL)
            np.testing.assert_allclose(_value(f"{n}.tmp_0"), traj[-1][n], **TOL)  # the saved value
    np.testing.assert_allclose(_value("w"), traj[-1]["w"], **TOL)


def test_averages_skip_parameters_with_do_model_average_false(fresh_programs):
    main, _ = fresh_programs
    _, loss = _linear()
    fluid.optimizer.SGD(LR).minimize(loss)
    main.global_block().var("b").attrs["do_model_average"] = False
    fluid.optimizer.ModelAverage(0.5)
    fluid.optimizer.ExponentialMovingAverage().update()
    averaged = {op.param for op in main.global_block().ops if op.type in ("average_accumulates", "ema_update")}
    assert averaged == {"w"}


def test_apply_and_restore_say_what_is_missing(fresh_programs):
    main, startup = fresh_programs
    _, loss = _linear()
    fluid.optimizer.SGD(LR).minimize(loss)
    ema = fluid.optimizer.ExponentialMovingAverage(0.9)
    ema.update()
    avg = fluid.optimizer.ModelAverage(0.5)
    exe = fluid.Executor()
    with pytest.raises(RuntimeError, match=r"ExponentialMovingAverage.apply: '.*' is not in the executor's scope. "
                                           r"Run the startup program first.*pservers"):
        with ema.apply(exe):
            pass
    exe.run(startup)
    with pytest.raises(RuntimeError, match=r"ModelAverage.restore: 'w.tmp_0', the value of 'w' apply\(\) saves"):
        avg.restore(exe)


def test_lookahead_syncs_slow_and_fast_every_k_steps(fresh_programs):
    main, startup = fresh_programs
    _, loss = _linear()
    fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(LR), alpha=0.4, k=3).minimize(loss)
    block = main.global_block()
    assert {n: block.var(n).persistable for n in ("lookahead_k", "lookahead_alpha", "lookahead_step", "w@SLOW")} \
        == dict.fromkeys(("lookahead_k", "lookahead_alpha", "lookahead_step", "w@SLOW"), True)
    la = [op for op in block.ops if op.type == "lookahead"]
    assert [(op.param, op.input("Slow")) for op in la] == [("w", ["w@SLOW"]), ("b", ["b@SLOW"])]
    slow = {"w": W0.astype(np.float64), "b": B0.astype(np.float64)}

    def sync(step, params):
        if step % 3:
            return params
        for n in slow:
            slow[n] = 0.4 * params[n] + 0.6 * slow[n]
        return dict(slow)

    traj = _sgd_trajectory(sync=sync)
    _, fetched = _train(main, startup, loss, fetch=["w"])
    for s, (got, params) in enumerate(zip(fetched, traj)):
        np.testing.assert_allclose(got[1], params["w"], err_msg=f"step {s}", **TOL)
    for n in slow:
        np.testing.assert_allclose(_value(f"{n}@SLOW"), slow[n], **TOL)
    assert _value("lookahead_step").tolist() == [STEPS] and _value("lookahead_step").dtype == np.int32


def test_lookahead_slow_copy_starts_at_the_initial_parameters(fresh_programs):
    """NOTE(lookahead-slow-init): the parameter's own initializer, copied (a random one too)."""
    main, startup = fresh_programs
    startup.random_seed = 5
    x = L.data(name="x", shape=[3])
    loss = L.mean(L.fc(x, 4))
    fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1)).minimize(loss)
    fluid.Executor().run(startup)
    np.testing.assert_array_equal(_value("fc_0.w_0@SLOW"), _value("fc_0.w_0"))
    assert _value("fc_0.w_0").std() > 0


def test_recompute_runs_the_wrapped_optimizer_and_says_so_once(monkeypatch):
    import placegroup.model.optimizer_wrappers as wrappers

    monkeypatch.setattr(wrappers, "_noticed", False)
    runs, notices = [], []
    for recompute in (False, True, True):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard(), fluid.scope_guard(fluid.Scope()):
            pred, loss = _linear()
            opt = fluid.optimizer.Adam(0.05)
            if recompute:
                opt = fluid.optimizer.RecomputeOptimizer(opt)
                opt._set_checkpoints([pred])
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                ops, params_grads = opt.minimize(loss)
            notices += [str(w.message) for w in caught if issubclass(w.category, wrappers.RecomputeNotice)]
            assert [op.type for op in ops] == ["adam", "adam"] and len(params_grads) == 2
            runs.append([float(v[0][0]) for v in _train(main, startup, loss)[1]])
    assert runs[0] == runs[1] == runs[2]
    assert notices == ["RecomputeOptimizer: checkpoints do not change memory use in placegroup; the wrapped "
                       "optimizer runs unchanged (shown once per process)"]


@pytest.mark.parametrize("make, exc, msg", [
    (lambda: fluid.optimizer.ExponentialMovingAverage(1.5), ValueError, r"decay must be a number in \[0, 1\], got 1.5"),
    (lambda: fluid.optimizer.ExponentialMovingAverage(0.9, thres_steps=3), TypeError,
     "thres_steps must be a Variable or None, got int"),
    (lambda: fluid.optimizer.ModelAverage(0.0), ValueError, "average_window_rate must be a number > 0, got 0.0"),
    (lambda: fluid.optimizer.ModelAverage(0.1, min_average_window=1.5), TypeError,
     r"min_average_window must be an int >= 0, got 1.5"),
    (lambda: fluid.optimizer.ModelAverage(0.1, min_average_window=20, max_average_window=10), ValueError,
     "min_average_window 20 exceeds max_average_window 10"),
    (lambda: fluid.optimizer.LookaheadOptimizer(None), ValueError, "inner_optimizer can not be None"),
    (lambda: fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1), alpha=2), ValueError,
     r"alpha must be a number in \[0, 1\], got 2"),
    (lambda: fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1), k=0), ValueError,
     "k must be a positive integer, got 0"),
    (lambda: fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(0.1))._set_checkpoints("fc_0"), TypeError,
     "checkpoints must be a list of Variables"),
    (lambda: fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(0.1)).minimize(_linear()[1]), ValueError,
     r"call _set_checkpoints\(\[...\]\) first"),
    (lambda: fluid.optimizer.RecomputeOptimizer(fluid.optimizer.SGD(0.1)).load({}), NotImplementedError,
     "load function is not supported by Recompute Optimizer"),
    (lambda: fluid.optimizer.PipelineOptimizer, NotImplementedInPlacegroup, "fluid.optimizer.PipelineOptimizer"),
    (lambda: fluid.optimizer.DGCMomentumOptimizer, NotImplementedInPlacegroup, "DGCMomentumOptimizer"),
])
def test_argument_errors_and_missing_strategies(make, exc, msg):
    with pytest.raises(exc, match=msg):
        make()


# -- distributed: 2 trainers x 2 pservers = one process -----------------------------------------


class _WithAverage:
    """An "optimizer" whose minimize is SGD's plus an average made after it (as scripts do)."""

    def __init__(self, kind: str, holder: dict | None = None):
        self.kind, self.holder = kind, holder if holder is not None else {}

    def minimize(self, loss):
        fluid.optimizer.SGD(0.05).minimize(loss)
        if self.kind == "ema":
            self.holder["avg"] = fluid.optimizer.ExponentialMovingAverage(0.9, thres_steps=_lr_counter())
            self.holder["avg"].update()
        else:
            self.holder["avg"] = fluid.optimizer.ModelAverage(0.5, min_average_window=2, max_average_window=3)


DIST = {  # name -> (optimizer maker, hidden size: 1000 cuts fc_0.w_0 into 2 row blocks)
    "lars_momentum": (lambda: fluid.optimizer.LarsMomentum(0.05, momentum=0.9, lars_coeff=0.5), 16),
    "dpsgd_noisy": (lambda: fluid.optimizer.Dpsgd(0.05, clip=1.0, batch_size=8.0, sigma=0.3), 16),
    "lookahead_sliced": (lambda: fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.05), alpha=0.5, k=3),
                         1000),
    "lookahead_adam": (lambda: fluid.optimizer.LookaheadOptimizer(fluid.optimizer.Adam(0.01), alpha=0.3, k=2), 16),
    "ema_sliced": (lambda: _WithAverage("ema"), 1000),
    "model_average_sliced": (lambda: _WithAverage("ma"), 1000),
}


@pytest.mark.parametrize("name", sorted(DIST))
def test_sync_two_by_two_equals_one_process(name):
    """Each new op is placed and sliced by the passes as they are (they ask its OpDef and
    ``op.param``); the averages, kept on the pservers, are what one process keeps."""
    make, hidden = DIST[name]
    batches = data("wide", 6, 30)
    fetch = {"ema_sliced": ("fc_1.w_0_ema_0",), "model_average_sliced": ("fc_1.w_0_sum_1_0", "fc_1.w_0_sum_3_0"),
             "lookahead_sliced": ("fc_1.w_0@SLOW",)}.get(name, ())
    run = run_cluster(model_with(make, hidden), 2, 2, batches, fetch=fetch)
    ref = run_local(model_with(make, hidden), batches, fetch=fetch)
    check_equivalent(run, ref)
    for k in range(2):
        for got, want in zip(run.fetched[k], ref.fetched[0]):
            for g, w, n in zip(got, want, fetch):
                np.testing.assert_allclose(g, w, err_msg=n, **TOL)


@pytest.mark.parametrize("mode", ["async_one_trainer", "collective", "merge_steps"])
@pytest.mark.parametrize("name", sorted(DIST))
def test_every_mode_equals_one_process(name, mode):
    """Async with one trainer, collective data parallel (no pservers: the ops run on every
    trainer), and merge_steps=2 on 2x2 (one update, and one average step, per round)."""
    make, hidden = DIST[name]
    if mode == "merge_steps":
        batches = data("wide", 8, 24)
        run = run_cluster(model_with(make, hidden), 2, 2, batches, merge_steps=2)
        merged = [tuple(np.concatenate([b[i] for b in batches[r * 2:r * 2 + 2]]) for i in range(2)) for r in range(4)]
        ref = run_local(model_with(make, hidden), merged)
        for pname, want in ref.params[0].items():
            for k in range(2):
                np.testing.assert_allclose(run.params[k][pname], want, err_msg=pname, **TOL)
        return
    batches = data("wide", 6, 30)
    run = (run_cluster(model_with(make, hidden), 1, 2, batches, sync_mode=False) if mode == "async_one_trainer"
           else run_cluster(model_with(make, hidden), 2, 0, batches))
    check_equivalent(run, run_local(model_with(make, hidden), batches))


def test_averages_live_beside_their_parameters_on_the_pservers():
    main, startup, _, _ = build_programs(model_with(lambda: _WithAverage("ema"), 1000))
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup, pservers="127.0.0.1:7100,127.0.0.1:7101", trainers=2)
    prog = t.get_program(None, "trainer").global_block()
    for op in prog.ops:
        if op.type == "ema_update":
            assert str(op.place).startswith("pserver") and op.param == op.input("Param")[0], op
            assert prog.var(op.input("EMA")[0]).place == prog.var(op.param).place
    averaged = {op.input("Param")[0] for op in prog.ops if op.type == "ema_update"}
    assert averaged >= {"fc_0.w_0.block0", "fc_0.w_0.block1"}  # one update per row block


def _bn_model(make):
    def build():
        x, y = L.data(name="x", shape=[10]), L.data(name="y", shape=[1])
        h = L.batch_norm(L.fc(x, 16), act="relu")
        cost = L.mean(L.square_error_cost(L.fc(h, 1), y))
        make().minimize(cost)
        return [x, y], cost
    return build


@pytest.mark.parametrize("make", [lambda: _WithAverage("ema"), lambda: _WithAverage("ma"),
                                  lambda: fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.05), k=2)],
                         ids=["ema", "model_average", "lookahead"])
def test_a_parameter_no_optimizer_updates_is_averaged_on_the_trainers(make):
    """batch_norm's running statistics are parameters the forward pass writes on the trainers:
    their averages (or slow copies) stay there, the weights' go to the pservers."""
    main, startup, _, _ = build_programs(_bn_model(make))
    kinds = ("ema_update", "average_accumulates", "lookahead")
    homes = {op.input("Param" if op.type != "average_accumulates" else "param")[0]: op.param
             for op in main.global_block().ops if op.type in kinds}
    assert homes["batch_norm_0.w_1"] is None and homes["batch_norm_0.w_2"] is None
    assert homes["fc_0.w_0"] == "fc_0.w_0" and homes["batch_norm_0.w_0"] == "batch_norm_0.w_0"
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup, pservers="127.0.0.1:7100,127.0.0.1:7101", trainers=2)
    for op in t.get_program(None, "trainer").global_block().ops:
        if op.type in kinds:
            assert (str(op.place) == "trainer") == (op.param is None), op
    run = run_cluster(_bn_model(make), 2, 2, data("wide", 3, 24))
    assert all(np.isfinite(run.losses[k]).all() and len(run.losses[k]) == 3 for k in range(2))


def test_ema_scheduled_by_a_trainer_counter_is_refused_at_transpile_with_pservers():
    """thres_steps from a forward-role counter lives on the trainers; the schedule runs on the
    pservers beside the averages, so the placement pass refuses it, naming ema_decay."""

    class EmaOnStepCounter:
        def minimize(self, loss):
            fluid.optimizer.SGD(0.05).minimize(loss)
            fluid.optimizer.ExponentialMovingAverage(0.9, thres_steps=L.autoincreased_step_counter()).update()

    main, startup, _, _ = build_programs(model_with(EmaOnStepCounter, 16))
    with pytest.raises(fluid.PassError, match=r"`ema_decay` @pserver reads '@STEP_COUNTER@' @trainer"):
        fluid.DistributeTranspiler().transpile(0, program=main, startup_program=startup,
                                               pservers="127.0.0.1:7100,127.0.0.1:7101", trainers=2)


def _cluster_apply(kind: str, trainers: int, pservers: int, batches) -> dict:
    """tests/inproc.py's cluster, each trainer calling ``apply`` after training: trainer id
    -> its parameters inside ``apply``, or the error."""
    holder: dict = {}
    main, startup, feeds, cost = build_programs(model_with(lambda: _WithAverage(kind, holder), 16))
    ps = [f"127.0.0.1:{7100 + i}" for i in range(pservers)]
    tr = [f"127.0.0.1:{7200 + i}" for i in range(trainers)]
    net, lock, out, errors = LoopbackNetwork(), threading.Lock(), {}, []

    def program_of(role, index):
        t = fluid.DistributeTranspiler()
        t.transpile(index if role == "trainer" else 0, program=main.clone(), startup_program=startup.clone(),
                    pservers=",".join(ps), trainers=",".join(tr) if not pservers else trainers)
        note_transpiled_job(None)  # this test process plays every part (tests/inproc.py, program_of)
        ep = ps[index] if role == "pserver" else (tr[index] if not pservers else None)
        return t.get_program(ep, role), t.get_startup_program(ep, role)

    def pserver(i, prog, sprog):
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        exe.run(prog, scope=scope)
        exe.close()

    def trainer(k, prog, sprog):
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        for batch in batches:
            part = [b[k * len(b) // trainers:(k + 1) * len(b) // trainers] for b in batch]
            exe.run(prog, feed=dict(zip([f.name for f in feeds], part)), fetch_list=[cost], scope=scope)
        for p in main.all_parameters():  # take the last parameters (and flush this trainer's last
            scope.find_var(p.name)       # gradients) before waiting for the lock
        with lock, fluid.scope_guard(scope):  # apply reads the global scope
            try:
                with holder["avg"].apply(exe):
                    out[k] = {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()}
            except RuntimeError as e:
                out[k] = e
        exe.close()

    def guarded(fn, *args):
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    jobs = [threading.Thread(target=guarded, args=(pserver, i, *program_of("pserver", i)), daemon=True)
            for i in range(pservers)]
    jobs += [threading.Thread(target=guarded, args=(trainer, k, *program_of("trainer", k)), daemon=True)
             for k in range(trainers)]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join(60)
    if errors:
        raise errors[0]
    return out


def _local_apply(kind: str, batches) -> dict:
    holder: dict = {}
    main, startup, feeds, cost = build_programs(model_with(lambda: _WithAverage(kind, holder), 16))
    exe, scope = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope):
        exe.run(startup)
        for batch in batches:
            exe.run(main, feed=dict(zip([f.name for f in feeds], batch)), fetch_list=[cost])
        with holder["avg"].apply(exe):
            return {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()}


@pytest.mark.parametrize("kind", ["ema", "ma"])
def test_apply_is_refused_with_pservers_and_works_without(kind):
    """NOTE(averages-placement): with pservers the averages are theirs, so a trainer's apply
    raises naming the var; with none (collective), every trainer keeps them and applies
    one process's averages."""
    batches = data("wide", 5, 24)
    refused = _cluster_apply(kind, 2, 2, batches)
    assert set(refused) == {0, 1}
    for err in refused.values():
        assert isinstance(err, RuntimeError) and "is not in the executor's scope" in str(err)
        assert "live on the pservers" in str(err)
    want = _local_apply(kind, batches)
    applied = _cluster_apply(kind, 2, 0, batches)
    for k in range(2):
        for name, value in want.items():
            np.testing.assert_allclose(applied[k][name], value, err_msg=name, **TOL)


# -- against Paddle 2.6 -------------------------------------------------------------------------

# Paddle 2.6 builds x -> fc(8, relu) -> fc(1) -> mse from the same initial values and trains it
# with each case's optimizer; "applied" holds the parameters inside apply(). Fluid 1.8's
# Lookahead (a startup copy of the parameters, a sync every k-th step) is built from Paddle's
# elementwise ops, since Paddle 2.x's LookAhead copies the fast weights at step 1 instead.
PADDLE_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle
    paddle.enable_static()
    spec = json.loads(sys.argv[1])
    d = np.load(spec["data"])
    case = spec["case"]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        attr = lambda k: paddle.ParamAttr(name=k, initializer=paddle.nn.initializer.Assign(d[k]))
        x = paddle.static.data("x", [-1, 4], "float32")
        y = paddle.static.data("y", [-1, 1], "float32")
        h = paddle.static.nn.fc(x, 8, weight_attr=attr("w1"), bias_attr=attr("b1"), activation="relu")
        pred = paddle.static.nn.fc(h, 1, weight_attr=attr("w2"), bias_attr=attr("b2"))
        loss = paddle.mean(paddle.nn.functional.square_error_cost(pred, y))
        names = ["w1", "b1", "w2", "b2"]
        avg = None
        if case == "lars":
            paddle.incubate.optimizer.LarsMomentumOptimizer(0.1, momentum=0.9, lars_coeff=0.5,
                                                           lars_weight_decay=0.01).minimize(loss)
        elif case == "dpsgd":
            lr = paddle.static.create_global_var([1], 0.1, "float32", persistable=True, name="lr")
            block = main.global_block()
            for p, g in paddle.static.append_backward(loss):
                block.append_op(type="dpsgd", inputs={"Param": p, "Grad": g, "LearningRate": lr},
                                outputs={"ParamOut": p},
                                attrs={"clip": 0.5, "batch_size": 8.0, "sigma": 0.0, "seed": 0})
        else:
            paddle.optimizer.SGD(0.1).minimize(loss)
        if case == "ema":
            avg = paddle.static.ExponentialMovingAverage(0.9)  # 2.6's thres_steps fails to build (its cond)
            avg.update()
        elif case == "ma":
            avg = paddle.incubate.ModelAverage(0.5, min_average_window=2, max_average_window=3)
        elif case == "lookahead":
            block, sblock = main.global_block(), startup.global_block()
            k = paddle.static.create_global_var([1], 3, "int32", persistable=True, name="lookahead_k")
            alpha = paddle.static.create_global_var([1], 0.4, "float32", persistable=True, name="lookahead_alpha")
            step = paddle.static.create_global_var([1], 0, "int32", persistable=True, name="lookahead_step")
            paddle.increment(step, 1.0)
            zero = paddle.zeros([1], "int32")
            sync = paddle.cast(paddle.equal(paddle.remainder(step, k), zero), "float32")
            for n in names:
                fast = block.var(n)
                slow = paddle.static.create_global_var(fast.shape, 0.0, "float32", persistable=True, name=n + "@SLOW")
                sblock.append_op(type="assign", inputs={"X": sblock.var(n)}, outputs={"Out": sblock.var(n + "@SLOW")})
                tmp = fast * alpha + slow * (1.0 - alpha)
                paddle.assign(sync * tmp + (1.0 - sync) * fast, fast)
                paddle.assign(sync * tmp + (1.0 - sync) * slow, slow)
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    losses = [float(exe.run(main, feed={"x": xb, "y": yb}, fetch_list=[loss])[0]) for xb, yb in zip(d["x"], d["y"])]
    scope = paddle.static.global_scope()
    value = lambda n: np.array(scope.find_var(n).get_tensor())
    out = {"losses": np.array(losses)}
    out.update({"final." + n: value(n) for n in names})
    if avg is not None:
        with avg.apply(exe):
            out.update({"applied." + n: value(n) for n in names})
    np.savez(spec["out"], **out)
""")


def _placegroup_case(case: str, d: dict) -> dict:
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard(), fluid.scope_guard(fluid.Scope()):
        attr = lambda k: fluid.ParamAttr(name=k, initializer=NumpyArrayInitializer(d[k]))  # noqa: E731
        x, y = L.data(name="x", shape=[4]), L.data(name="y", shape=[1])
        h = L.fc(x, 8, act="relu", param_attr=attr("w1"), bias_attr=attr("b1"))
        loss = L.mean(L.square_error_cost(L.fc(h, 1, param_attr=attr("w2"), bias_attr=attr("b2")), y))
        avg = None
        if case == "lars":
            fluid.optimizer.LarsMomentum(0.1, momentum=0.9, lars_coeff=0.5, lars_weight_decay=0.01).minimize(loss)
        elif case == "dpsgd":
            fluid.optimizer.Dpsgd(0.1, clip=0.5, batch_size=8.0, sigma=0.0).minimize(loss)
        elif case == "lookahead":
            fluid.optimizer.LookaheadOptimizer(fluid.optimizer.SGD(0.1), alpha=0.4, k=3).minimize(loss)
        else:
            fluid.optimizer.SGD(0.1).minimize(loss)
        if case == "ema":
            avg = fluid.optimizer.ExponentialMovingAverage(0.9)
            avg.update()
        elif case == "ma":
            avg = fluid.optimizer.ModelAverage(0.5, min_average_window=2, max_average_window=3)
        exe = fluid.Executor()
        exe.run(startup)
        losses = [float(exe.run(main, feed={"x": xb, "y": yb}, fetch_list=[loss])[0][0])
                  for xb, yb in zip(d["x"], d["y"])]
        out = {"losses": np.array(losses), **{"final." + n: _value(n) for n in ("w1", "b1", "w2", "b2")}}
        if avg is not None:
            with avg.apply(exe):
                out.update({"applied." + n: _value(n) for n in ("w1", "b1", "w2", "b2")})
        return out


@pytest.mark.paddle
@pytest.mark.parametrize("case", ["lars", "dpsgd", "ema", "ma", "lookahead"])
def test_against_paddle(case, paddle26_python, tmp_path):
    rng = np.random.default_rng(6)
    d = {"x": rng.normal(size=(10, 8, 4)).astype(np.float32), "w1": rng.uniform(-0.6, 0.6, (4, 8)).astype(np.float32),
         "b1": (0.1 * rng.normal(size=8)).astype(np.float32), "w2": rng.uniform(-0.6, 0.6, (8, 1)).astype(np.float32),
         "b2": np.array([0.1], np.float32)}
    d["y"] = (np.sin(d["x"].sum(-1, keepdims=True)) + 0.2).astype(np.float32)
    want = run_reference(paddle26_python, PADDLE_SCRIPT, tmp_path, d, timeout=600, case=case)
    got = _placegroup_case(case, d)
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=1e-5, atol=1e-6)
    assert set(got) == set(want)
    for key in want:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-5, atol=1e-6, err_msg=key)
