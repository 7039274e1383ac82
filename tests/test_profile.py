"""PLACEGROUP_PROFILE=1: each executor prints where its time went (executor/profile.py)."""
import numpy as np

import placegroup as fluid
from tests.inproc import run_cluster


def _linear():
    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1])
    cost = fluid.layers.mean(fluid.layers.square_error_cost(input=fluid.layers.fc(input=x, size=1), label=y))
    fluid.optimizer.SGD(0.01).minimize(cost)
    return [x, y], cost


def _batches(steps):
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(8, 13)).astype("float32"), rng.normal(size=(8, 1)).astype("float32"))
            for _ in range(steps)]


def _rows(text: str) -> dict:
    """op name -> calls, from a printed profile table."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1].replace(",", "").isdigit():
            out[parts[0]] = int(parts[1].replace(",", ""))
    return out


def test_one_process_profile_counts_every_op_of_every_step(monkeypatch, capsys):
    monkeypatch.setenv("PLACEGROUP_PROFILE", "1")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        feeds, cost = _linear()
    exe = fluid.Executor()
    exe.run(startup)
    for xb, yb in _batches(5):
        exe.run(main, feed={"x": xb, "y": yb}, fetch_list=[cost])
    exe.close()
    err = capsys.readouterr().err
    assert "placegroup profile, local: 6 steps" in err  # the startup program and 5 steps
    rows = _rows(err)
    assert rows["mul"] == 5 and rows["mul_grad"] == 5 and rows["sgd"] == 10 and "(end of step)" in err
    assert "messages" not in err  # one process sends none


def test_distributed_profile_shows_waits_and_messages(monkeypatch, capsys):
    monkeypatch.setenv("PLACEGROUP_PROFILE", "1")
    run_cluster(_linear, 2, 2, _batches(4))
    err = capsys.readouterr().err
    tables = [t for t in err.split("placegroup profile, ")[1:]]
    trainers = [t for t in tables if t.startswith("trainer")]
    pservers = [t for t in tables if t.startswith("pserver")]
    assert len(trainers) == 2 and len(pservers) == 2, err
    for t in trainers:
        assert _rows(t)["mul"] == 4
        assert len(t.split("mul", 1)[1].splitlines()[0].split()) == 5  # it waits: calls, us, waiting, CPU, share
        assert "sent (" in t and "received (" in t and "blocked" in t
    for t in pservers:
        assert _rows(t)["sgd"] >= 4  # every pserver updates its parameters once per step
