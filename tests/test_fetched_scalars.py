"""Fetched values of shape [1] turn into Python numbers as Fluid-era scripts expect
(``float(loss)``, ``"loss %f" % loss``, ``int(acc)``) on any numpy, numpy 2.4 included, and are
ndarrays in every other way, arithmetic on them keeping the conversions (NOTE(fetched-scalars)
in executor/fetched.py): through
``exe.run`` in one process, a CompiledProgram, a ParallelExecutor, an inference model loaded
with ``fluid.io``, and a 2-trainer 1-pserver job over the loopback transport, whose trainers
fetch their loss and a var the pserver holds.
"""
from __future__ import annotations

import copy
import io
import pickle
import threading

import numpy as np
import pytest

import placegroup as fluid
from placegroup.comm.loopback import LoopbackNetwork
from placegroup.executor.fetched import FetchedArray
from tests.conftest import TIME_FACTOR

ROWS = np.random.default_rng(3).standard_normal((8, 13)).astype("float32")
LABELS = ROWS[:, :1] * 0.5 + 0.1


def _model():
    """fit_a_line: (loss [1], acc-like int64 [1], the prediction [N, 1])."""
    x = fluid.layers.data("x", [13])
    y = fluid.layers.data("y", [1])
    pred = fluid.layers.fc(x, 1)
    loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
    count = fluid.layers.reduce_sum(fluid.layers.cast(fluid.layers.cast(pred, "int64"), "int64"))
    return loss, fluid.layers.reshape(count, [1]), pred


@pytest.fixture()
def fetched():
    """One step's fetches: loss (float32 [1]), an int64 [1], pred [8, 1], a parameter [13, 1]."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, count, pred = _model()
        fluid.optimizer.SGD(0.01).minimize(loss)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    got = exe.run(main, feed={"x": ROWS, "y": LABELS}, fetch_list=[loss, count, pred, "fc_0.w_0"], scope=scope)
    return dict(zip(("loss", "count", "pred", "w"), got))


# (what a script writes, the expected result from the one element); each on a shape-[1] fetch
CONVERSIONS = [
    ("float(loss)", lambda v: float(v)),
    ("int(count)", lambda v: int(v)),
    ("'%f' % loss", lambda v: "%f" % float(v)),
    ("'loss %.3e' % loss", lambda v: "loss %.3e" % float(v)),
    ("'%d' % count", lambda v: "%d" % int(v)),
    ("'{:.4f}'.format(loss)", lambda v: "{:.4f}".format(float(v))),
    ("f'{loss:8.2f}'", lambda v: f"{float(v):8.2f}"),
    ("complex(loss)", lambda v: complex(float(v))),
    ("round(float(loss), 3)", lambda v: round(float(v), 3)),
    ("bool(count >= 0)", lambda v: v >= 0),
]


@pytest.mark.parametrize("expr, want", CONVERSIONS, ids=[c[0] for c in CONVERSIONS])
def test_a_shape_1_fetch_converts_to_a_number(fetched, expr, want):
    name = "count" if "count" in expr else "loss"
    value = fetched[name]
    assert value.shape == (1,)
    assert eval(expr, {}, dict(fetched)) == want(value.view(np.ndarray).reshape(-1)[0].item())


# (check, on the fetched dict): everything but the conversions is a plain ndarray's behaviour
LIKE_NDARRAY = [
    ("isinstance", lambda f: isinstance(f["loss"], np.ndarray)),
    ("repr", lambda f: repr(f["loss"]) == repr(f["loss"].view(np.ndarray)) and repr(f["loss"]).startswith("array(")),
    ("str and {}", lambda f: str(f["pred"]) == str(f["pred"].view(np.ndarray)) == "{}".format(f["pred"])),
    ("'%s'", lambda f: "%s" % f["loss"] == str(f["loss"].view(np.ndarray))),
    ("tolist", lambda f: f["loss"].tolist() == [float(f["loss"])]),
    ("indexing", lambda f: type(f["loss"][0]) is np.float32 and f["pred"][2, 0] == f["pred"].view(np.ndarray)[2, 0]),
    ("np.mean over a list", lambda f: type(np.mean([f["loss"], f["loss"]])) in (np.float32, np.float64)),
    ("arithmetic keeps the conversions", lambda f: float(f["loss"] * 2 + 1) == float(f["loss"]) * 2 + 1
     and isinstance(-f["pred"], FetchedArray) and (-f["pred"] == -f["pred"].view(np.ndarray)).all()),
    ("accumulating then converting", lambda f: _accumulated(f["loss"]) == pytest.approx(float(f["loss"]) * 1.5)),
    ("comparison", lambda f: bool(f["loss"] > 0) == bool(float(f["loss"]) > 0)),
    ("reductions are scalars", lambda f: type(f["pred"].sum()) is np.float32 and type(np.max(f["pred"])) is np.float32),
    ("numpy functions are plain", lambda f: type(np.concatenate([f["loss"], f["loss"]])) is np.ndarray
     and type(np.where(f["pred"] > 0, f["pred"], 0)) is np.ndarray and type(np.stack([f["loss"]])) is np.ndarray),
    ("asarray and array are plain", lambda f: type(np.asarray(f["loss"])) is np.ndarray
     and type(np.array(f["loss"])) is np.ndarray),
    ("in place keeps the object", lambda f: _in_place(f["loss"].copy())),
    ("np.save", lambda f: _saved(f["pred"])),
    ("pickle loads a plain ndarray", lambda f: all(
        type(pickle.loads(pickle.dumps(f["pred"], protocol=p))) is np.ndarray
        and np.array_equal(pickle.loads(pickle.dumps(f["pred"], protocol=p)), f["pred"]) for p in (2, 4, 5))),
    ("deepcopy", lambda f: np.array_equal(copy.deepcopy(f["loss"]), f["loss"])),
    ("dtype and shape", lambda f: f["loss"].dtype == np.float32 and f["count"].dtype == np.int64
     and f["w"].shape == (13, 1)),
]


def _in_place(x) -> bool:
    before = x
    x += 1
    return x is before and isinstance(x, FetchedArray)


def _saved(x) -> bool:
    buf = io.BytesIO()
    np.save(buf, x)
    buf.seek(0)
    back = np.load(buf)
    return type(back) is np.ndarray and np.array_equal(back, x)


def _accumulated(loss) -> float:
    """What Fluid-era scripts do with a fetched loss: sum it over steps, print the mean."""
    total = 0
    for _ in range(3):
        total += loss
    return float(total / 2)


@pytest.mark.parametrize("what, check", LIKE_NDARRAY, ids=[c[0] for c in LIKE_NDARRAY])
def test_a_fetch_is_a_plain_ndarray_otherwise(fetched, what, check):
    assert check(fetched)


@pytest.mark.parametrize("expr", ["float(pred)", "int(w)", "'%f' % pred", "'{:.4f}'.format(w)"])
def test_more_than_one_element_is_refused_as_numpy_does(fetched, expr):
    with pytest.raises(TypeError):
        eval(expr, {}, dict(fetched))


def test_index_is_refused_as_numpy_116_did(fetched):
    with pytest.raises(TypeError):
        range(fetched["count"])


def test_a_fetched_parameter_is_a_copy(fetched):
    w = fetched["w"]
    assert isinstance(w, FetchedArray) and w.flags.owndata is False  # a view of the copy, not the scope's


def _train_once(run):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss, _, pred = _model()
        test_prog = main.clone(for_test=True)
        fluid.optimizer.SGD(0.01).minimize(loss)
    return run(main, startup, test_prog, loss, pred)


def test_compiled_program_and_parallel_executor_fetch_numbers():
    def run(main, startup, _, loss, __):
        with fluid.scope_guard(fluid.Scope()):
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(startup)
            compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=loss.name)
            a, = exe.run(compiled, feed={"x": ROWS, "y": LABELS}, fetch_list=[loss])
            pe = fluid.ParallelExecutor(use_cuda=False, loss_name=loss.name, main_program=main)
            b, = pe.run(fetch_list=[loss.name], feed={"x": ROWS, "y": LABELS})
        return a, b

    for value in _train_once(run):
        assert isinstance(value, FetchedArray) and "%f" % value == "%f" % value.reshape(-1)[0]


def test_an_inference_model_fetches_numbers(tmp_path):
    def run(main, startup, test_prog, loss, pred):
        with fluid.scope_guard(fluid.Scope()):
            exe = fluid.Executor(fluid.CPUPlace())
            exe.run(startup)
            fluid.io.save_inference_model(str(tmp_path), ["x"], [pred], exe, main_program=test_prog)
            prog, feeds, targets = fluid.io.load_inference_model(str(tmp_path), exe)
            out, = exe.run(prog, feed={feeds[0]: ROWS[:1]}, fetch_list=targets)
        return out

    out = _train_once(run)
    assert isinstance(out, FetchedArray) and out.shape == (1, 1) and float(out) == out.item()


def test_a_distributed_job_fetches_numbers():
    """2 trainers and 1 pserver on threads over the loopback transport; each process builds and
    transpiles its own copy of the model, as separate processes do."""
    ps, trainers, net = "127.0.0.1:7300", 2, LoopbackNetwork()
    results, errors = {}, []

    def programs(role: str, k: int):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            loss, _, _ = _model()
            fluid.optimizer.SGD(0.01).minimize(loss)
        t = fluid.DistributeTranspiler()
        t.transpile(trainer_id=k, program=main, startup_program=startup, pservers=ps, trainers=trainers)
        ep = ps if role == "pserver" else None
        return t.get_program(ep, role), t.get_startup_program(ep, role), loss

    def pserver():
        prog, sprog, _ = programs("pserver", 0)
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        exe.run(prog, scope=scope)
        exe.close()

    def trainer(k: int):
        prog, sprog, loss = programs("trainer", k)
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        rows = slice(k * 4, (k + 1) * 4)
        out = []
        for _ in range(2):
            # the loss is the trainer's; the merged gradient of the bias lives on the pserver
            out.append(exe.run(prog, feed={"x": ROWS[rows], "y": LABELS[rows]},
                               fetch_list=[loss, "fc_0.b_0@GRAD@MERGED"], scope=scope))
        exe.close()
        results[k] = out

    def guarded(fn, *args):
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    jobs = [threading.Thread(target=guarded, args=(pserver,), daemon=True)]
    jobs += [threading.Thread(target=guarded, args=(trainer, k), daemon=True) for k in range(trainers)]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join(60 * TIME_FACTOR)
    if errors:
        raise errors[0]
    assert not any(j.is_alive() for j in jobs), "the in-process job did not finish"
    for k in range(trainers):
        for loss, grad in results[k]:
            assert isinstance(loss, FetchedArray) and isinstance(grad, FetchedArray)
            assert "loss %f, grad %.6f" % (loss, grad) == "loss %f, grad %.6f" % (loss.item(), grad.item())
    # both trainers fetched the same merged gradient of each step: it is the pserver's one value
    assert [float(g) for _, g in results[0]] == [float(g) for _, g in results[1]]
