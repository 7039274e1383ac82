"""#15 item 5: the three LoD example jobs (examples/ctr_slots.py, examples/word2vec.py,
examples/text_classification.py) trained 2 trainers + 2 pservers.

Each example's loss is a mean over examples, and trainer t is fed the t-th contiguous half of
every batch's examples, so in sync mode the mean of the two trainers' losses is the one-process
loss at every step (rtol 1e-5); in async mode each trainer's loss falls. The cluster runs in one
process over the loopback transport (tests/inproc.py's way), built by the example's own
``build`` and fed by its own ``feed``.
"""
from __future__ import annotations

import importlib.util
import os
import threading

import numpy as np
import pytest

import placegroup as fluid
from placegroup.comm.loopback import LoopbackNetwork
from tests.conftest import TIME_FACTOR

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def example(name: str):
    """The module examples/<name>.py (examples/ is no package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(EXAMPLES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def programs(build):
    """``build()`` in fresh programs and names; returns (main, startup, loss)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        startup.random_seed = 7
        loss = build()[1]
    return main, startup, loss


def run_local(build, feed, batches) -> list:
    main, startup, loss = programs(build)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return [float(np.array(exe.run(main, feed=feed(b), fetch_list=[loss], scope=scope)[0]).ravel()[0])
            for b in batches]


def run_2x2(build, feed, batches, sync_mode: bool = True) -> dict:
    """2 trainers + 2 pservers on threads over one LoopbackNetwork; trainer t takes the t-th half
    of every batch's examples. Returns trainer id -> [loss per step]."""
    main, startup, loss = programs(build)
    ps = ["127.0.0.1:7400", "127.0.0.1:7401"]
    net = LoopbackNetwork()
    out, errors = {}, []

    def program_of(role, i):
        t = fluid.DistributeTranspiler()
        t.transpile(trainer_id=i if role == "trainer" else 0, program=main, startup_program=startup,
                    pservers=",".join(ps), trainers=2, sync_mode=sync_mode)
        ep = ps[i] if role == "pserver" else None
        return t.get_program(ep, role), t.get_startup_program(ep, role)

    def pserver(prog, sprog):
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        exe.run(prog, scope=scope)
        exe.close()

    def trainer(k, prog, sprog):
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        losses = []
        for b in batches:
            got, = exe.run(prog, feed=feed(b[k * len(b) // 2:(k + 1) * len(b) // 2]), fetch_list=[loss],
                           scope=scope)
            losses.append(float(np.array(got).ravel()[0]))
        out[k] = losses
        exe.close()

    def guarded(fn, *a):
        try:
            fn(*a)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    jobs = [threading.Thread(target=guarded, args=(pserver, *program_of("pserver", i)), daemon=True)
            for i in range(2)]
    jobs += [threading.Thread(target=guarded, args=(trainer, k, *program_of("trainer", k)), daemon=True)
             for k in range(2)]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join(120 * TIME_FACTOR)
    if errors:
        raise errors[0]
    assert not any(j.is_alive() for j in jobs), "the 2x2 cluster did not finish"
    return out


def check_sync(build, feed, batches) -> list:
    local = run_local(build, feed, batches)
    got = run_2x2(build, feed, batches)
    np.testing.assert_allclose((np.array(got[0]) + np.array(got[1])) / 2, local, rtol=1e-5)
    return local


def check_async(build, feed, batches) -> None:
    got = run_2x2(build, feed, batches, sync_mode=False)
    for k in (0, 1):
        assert np.isfinite(got[k]).all()
        assert np.mean(got[k][-5:]) < np.mean(got[k][:5]), got[k]


# --- (a) CTR over 26 id slots -------------------------------------------------------------

def _ctr():
    ctr = example("ctr_slots")
    return ctr, (lambda: ctr.build(vocab=2_600, dim=4)), ctr.feed


def test_ctr_slots_2x2_sync_equals_one_process():
    ctr, build, feed = _ctr()
    local = check_sync(build, feed, ctr.click_log(steps=12, batch=32, vocab=2_600))
    assert np.mean(local[-4:]) < np.mean(local[:4])  # it learns


def test_ctr_slots_per_slot_tables_2x2_sync_equals_one_process():
    ctr = example("ctr_slots")
    check_sync(lambda: ctr.build(vocab=2_600, dim=4, tables="per-slot"), ctr.feed,
               ctr.click_log(steps=4, batch=16, vocab=2_600))


def test_ctr_slots_trains_in_async_mode():
    ctr, build, feed = _ctr()
    check_async(build, feed, ctr.click_log(steps=30, batch=32, vocab=2_600))


def test_ctr_slots_runs_alone_and_prints_auc(capsys):
    example("ctr_slots").main(["--steps", "20", "--batch-size", "64", "--vocab", "2600"])
    out = capsys.readouterr().out
    assert "step   20  loss" in out and "final AUC" in out


# --- (b) word2vec, skip-gram over a fixed window ---------------------------------------------

def _w2v(steps: int):
    w2v = example("word2vec")
    batches = w2v.pairs(w2v.corpus(2_000, 200), window=2, batch=32)[:steps]
    # each batch as a list of (centre, context) pairs, so the runner's slice is by examples
    return w2v, [list(zip(c.ravel(), t.ravel())) for c, t in batches]


def test_word2vec_2x2_sync_equals_one_process():
    w2v, batches = _w2v(12)
    local = check_sync(lambda: w2v.build(dict_size=200, dim=16), w2v.feed, batches)
    assert np.mean(local[-4:]) < np.mean(local[:4])


def test_word2vec_trains_in_async_mode():
    w2v, batches = _w2v(30)
    check_async(lambda: w2v.build(dict_size=200, dim=16), w2v.feed, batches)


def test_word2vec_runs_alone(capsys):
    example("word2vec").main(["--steps", "50", "--dict-size", "200", "--corpus", "2000", "--batch-size", "64"])
    out = capsys.readouterr().out
    assert "step   50  loss" in out and "final top-1 accuracy" in out


# --- (c) text classification: text CNN and bag of words over LoD word ids --------------------

@pytest.mark.parametrize("model", ["cnn", "bow"])
def test_text_classification_2x2_sync_equals_one_process(model):
    tc = example("text_classification")
    local = check_sync(lambda: tc.build(dict_size=300, model=model), tc.feed,
                       tc.sentences(steps=12, batch=16, dict_size=300))
    assert np.mean(local[-4:]) < np.mean(local[:4])


def test_text_classification_trains_in_async_mode():
    tc = example("text_classification")
    check_async(lambda: tc.build(dict_size=300), tc.feed, tc.sentences(steps=30, batch=16, dict_size=300))


def test_text_classification_runs_alone(capsys):
    example("text_classification").main(["--steps", "25", "--dict-size", "300", "--batch-size", "16"])
    out = capsys.readouterr().out
    assert "step   25  loss" in out and "final accuracy" in out


# --- under placegroup launch: real processes and sockets --------------------------------------

@pytest.mark.parametrize("name, args, last", [
    ("ctr_slots", ["--steps", "20", "--batch-size", "64", "--vocab", "2600"], "final AUC"),
    ("word2vec", ["--steps", "50", "--dict-size", "200", "--corpus", "2000", "--batch-size", "64"], "final top-1"),
    ("text_classification", ["--steps", "25", "--dict-size", "300", "--batch-size", "16"], "final accuracy"),
])
def test_example_runs_under_launch_2x2(name, args, last):
    import io

    from placegroup.tools.launch import launch

    out = io.StringIO()
    code = launch(os.path.join(EXAMPLES, name + ".py"), args, 2, 2, grace=60 * TIME_FACTOR, out=out)
    text = out.getvalue()
    assert code == 0, text[-3000:]
    assert text.count(last) == 2 and text.count("pserver: every trainer is done") == 2, text[-3000:]
