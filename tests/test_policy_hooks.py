"""A mode is one class: a version policy defined here, in the test, trains a 2 trainers +
2 pservers job through the real interpreter, with no edit anywhere else.

``Delayed`` is a mode placegroup does not ship: a trainer computes step s on the parameters
after update s-2 (one update older than sync's), a fixed delay rather than a bound. Only
``wanted`` changes; the interpreter keeps the startup values in hand at step 1 (``None``),
the pservers stay sync, and the losses equal a numpy run of delayed-gradient SGD.
"""
import numpy as np

import placegroup as fluid
from placegroup.executor import executor as executor_module
from placegroup.executor.policy import CARRIED, Sync, policy_for
from tests.inproc import run_cluster, run_local

LR = 0.1


class Delayed(Sync):
    """A trainer's loop-carried reads take the parameters one update older than sync's."""

    name = "delayed(1)"

    def wanted(self, when: str, step: int) -> int | None:
        if when != CARRIED:
            return super().wanted(when, step)
        if step == 1:
            return None        # keep the startup program's values in hand
        return max(step - 2, -1)


def build():
    x = fluid.layers.data(name="x", shape=[4])
    y = fluid.layers.data(name="y", shape=[1])
    cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
    fluid.optimizer.SGD(LR).minimize(cost)
    return [x, y], cost


def _batches(n: int) -> list:
    rng = np.random.default_rng(3)
    true_w = rng.normal(size=(4, 1)).astype(np.float32)
    out = []
    for _ in range(n):
        x = rng.normal(size=(8, 4)).astype(np.float32)
        out.append((x, (x @ true_w + 0.5).astype(np.float32)))
    return out


def _delayed_sgd(w, b, batches: list, trainers: int) -> dict:
    """Each trainer's loss per step when step s computes on the parameters after update s-2."""
    history = [(w, b)]  # history[v + 1]: after update v; history[0]: the startup values
    losses: dict = {k: [] for k in range(trainers)}
    for s, (x, y) in enumerate(batches):
        rw, rb = history[max(s - 2, -1) + 1]
        gw, gb = np.zeros_like(w), np.zeros_like(b)
        for k in range(trainers):
            xk, yk = (v[k * len(v) // trainers:(k + 1) * len(v) // trainers] for v in (x, y))
            err = xk @ rw + rb - yk
            losses[k].append(float(np.mean(err ** 2)))
            gw += 2 * xk.T @ err / len(xk) / trainers
            gb += 2 * err.mean(axis=0) / trainers
        w, b = history[-1]
        history.append((w - LR * gw, b - LR * gb))
    return losses


def test_a_policy_defined_in_a_test_trains_through_the_real_interpreter(monkeypatch):
    def with_delay(cluster, role):
        base = policy_for(cluster, role)
        return Delayed() if getattr(role, "value", role) == "trainer" else base

    monkeypatch.setattr(executor_module, "policy_for", with_delay)
    batches = _batches(8)
    start = run_local(build, []).params[0]
    run = run_cluster(build, 2, 2, batches)
    want = _delayed_sgd(start["fc_0.w_0"], start["fc_0.b_0"], batches, 2)
    for k in range(2):
        np.testing.assert_allclose(run.losses[k], want[k], rtol=1e-5)
    # it is not sync: sync's trainers read one update newer
    monkeypatch.setattr(executor_module, "policy_for", policy_for)
    sync = run_cluster(build, 2, 2, batches)
    assert not np.allclose(sync.losses[0][2:], want[0][2:], rtol=1e-3)
