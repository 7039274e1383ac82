"""#15 item 5: the three LoD example jobs (examples/ctr_slots.py, examples/word2vec.py,
examples/text_classification.py) trained 2 trainers + 2 pservers.

Each example's loss is a mean over examples, and trainer t is fed the t-th contiguous half of
every batch's examples, so in sync mode the mean of the two trainers' losses is the one-process
loss at every step (rtol 1e-5); in async mode each trainer's loss falls. The cluster runs in one
process over the loopback transport (tests/inproc.py), built by the example's own ``build``;
each batch is the example's own ``feed`` of its examples, cut by examples (rows, or sentences
of a LoD tensor) for the trainers.
"""
from __future__ import annotations

import importlib.util
import os

import numpy as np
import pytest

from tests.conftest import TIME_FACTOR
from tests.inproc import run_cluster, run_local

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")


def example(name: str):
    """The module examples/<name>.py (examples/ is no package)."""
    spec = importlib.util.spec_from_file_location(f"example_{name}", os.path.join(EXAMPLES, name + ".py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def check_sync(build, feed, batches) -> list:
    """The mean of the 2 trainers' losses equals one process's at every step; returns the latter."""
    batches = [feed(b) for b in batches]
    local = run_local(lambda: build()[:2], batches).losses[0]
    got = run_cluster(lambda: build()[:2], 2, 2, batches, timeout=120).losses
    np.testing.assert_allclose((np.array(got[0]) + np.array(got[1])) / 2, local, rtol=1e-5)
    return local


def check_async(build, feed, batches) -> None:
    got = run_cluster(lambda: build()[:2], 2, 2, [feed(b) for b in batches], timeout=120,
                      sync_mode=False).losses
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
    return w2v, w2v.pairs(w2v.corpus(2_000, 200), window=2, batch=32)[:steps]


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
