"""A model-parallel fc whose weight (and bias) start from arrays, e.g. pretrained weights:
``param_attr=fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(w))``.

Over K trainers each shard starts as its own columns of the array (the bias: its own entries),
cut by the startup program's ``assign_value`` on each trainer (``rank_axis``), and training
equals one process started from the same arrays: the mean of the trainers' losses per step to
rtol 1e-5, and the shards put together equal the one-process weight. Real processes over
ZeroMQ on 127.0.0.1 (the launcher), and over the loopback transport in one process for the
fused / unfused / with-pservers variants.
"""
import io
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import OpError, ProgramError
from placegroup.tools.launch import launch
from tests.conftest import TIME_FACTOR
from tests.inproc import run_cluster, run_local

TOL = dict(rtol=1e-5, atol=1e-6)
DIM, CLASSES = 6, 8
W = (0.3 * np.random.default_rng(11).normal(size=(DIM, CLASSES))).astype(np.float32)  # "pretrained"
B = np.linspace(-0.4, 0.3, CLASSES).astype(np.float32)


def build(bias_array: bool = True, optimizer: str = "sgd"):
    x = fluid.layers.data(name="x", shape=[DIM])
    y = fluid.layers.data(name="y", shape=[1], dtype="int64")
    init = fluid.initializer.NumpyArrayInitializer
    logits = fluid.layers.fc(
        input=x, size=CLASSES, model_parallel=True, param_attr=fluid.ParamAttr(name="w", initializer=init(W)),
        bias_attr=fluid.ParamAttr(name="b", initializer=init(B) if bias_array else None))
    cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=y))
    opt = fluid.optimizer.Adam(0.05, epsilon=1e-6) if optimizer == "adam" else fluid.optimizer.SGD(0.2)
    opt.minimize(cost)
    return [x, y], cost


def data(steps: int = 4, batch: int = 12):
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(steps * batch, DIM)).astype(np.float32)
    ys = (np.abs(xs[:, :1] * 3).astype(np.int64) % CLASSES)
    return [(xs[i * batch:(i + 1) * batch], ys[i * batch:(i + 1) * batch]) for i in range(steps)]


def test_each_trainer_starts_from_its_own_columns_of_the_array():
    run = run_cluster(build, 2, 0, [], endpoints=True)  # the startup program only
    for k in range(2):
        np.testing.assert_array_equal(run.params[k]["w"], W[:, 4 * k:4 * (k + 1)])
        np.testing.assert_array_equal(run.params[k]["b"], B[4 * k:4 * (k + 1)])


@pytest.mark.parametrize("pservers, fused, bias_array, optimizer", [
    (0, True, True, "sgd"), (0, False, True, "adam"), (0, True, False, "sgd"), (2, True, True, "adam")])
def test_training_from_an_array_equals_one_process(pservers, fused, bias_array, optimizer):
    batches = data()
    config = None if fused else fluid.DistributeTranspilerConfig(mp_fused=False)
    run = run_cluster(lambda: build(bias_array, optimizer), 2, pservers, batches, endpoints=True, config=config)
    ref = run_local(lambda: build(bias_array, optimizer), batches)
    np.testing.assert_allclose(np.mean([run.losses[0], run.losses[1]], axis=0), ref.losses[0], **TOL)
    for name in ("w", "b"):
        np.testing.assert_allclose(np.concatenate([run.params[0][name], run.params[1][name]], axis=-1),
                                   ref.params[0][name], err_msg=name, **TOL)
        assert run.params[0][name].shape[-1] == CLASSES // 2


SCRIPT = textwrap.dedent("""
    import os, sys
    import numpy as np
    import placegroup as fluid
    sys.path.insert(0, {root!r})
    from tests.test_mp_array_init import build, data

    _, cost = build()
    exe = fluid.Executor(fluid.CPUPlace())
    prog, _, tid, n = fluid.transpile_from_env(exe)
    scope = fluid.global_scope()
    start = {{p: np.array(scope.find_var(p).get_tensor()) for p in ("w", "b")}}
    losses = []
    for xs, ys in data():
        lo, hi = tid * len(xs) // n, (tid + 1) * len(xs) // n
        losses.append(float(exe.run(prog, feed={{"x": xs[lo:hi], "y": ys[lo:hi]}}, fetch_list=[cost])[0][0]))
    end = {{p: np.array(scope.find_var(p).get_tensor()) for p in ("w", "b")}}
    exe.close()
    np.savez(os.path.join({out!r}, f"run{{tid}}_of{{n}}.npz"), losses=losses,
             w0=start["w"], b0=start["b"], w=end["w"], b=end["b"])
""")


def test_two_trainer_processes_from_an_array_equal_one_process(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = tmp_path / "train.py"
    script.write_text(SCRIPT.format(root=root, out=str(tmp_path)))
    env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
    subprocess.run([sys.executable, str(script)], check=True, env=env, timeout=60 * TIME_FACTOR)
    out = io.StringIO()
    code = launch(str(script), [], 2, 0, grace=20 * TIME_FACTOR, out=out,
                  extra_env={"PLACEGROUP_PEER_TIMEOUT": str(30 * TIME_FACTOR)})
    assert code == 0, out.getvalue()
    ref = np.load(tmp_path / "run0_of1.npz")
    runs = [np.load(tmp_path / f"run{k}_of2.npz") for k in range(2)]
    for k, r in enumerate(runs):  # each shard started as its own columns of the arrays
        np.testing.assert_array_equal(r["w0"], W[:, 4 * k:4 * (k + 1)])
        np.testing.assert_array_equal(r["b0"], B[4 * k:4 * (k + 1)])
    np.testing.assert_array_equal(ref["w0"], W)
    np.testing.assert_allclose(np.mean([r["losses"] for r in runs], axis=0), ref["losses"], **TOL)
    for name in ("w", "b"):
        np.testing.assert_allclose(np.concatenate([r[name] for r in runs], axis=-1), ref[name], err_msg=name, **TOL)


@pytest.mark.parametrize("count, part", [(6, [2, 3]), (8, [2, 5]), (8, [3, 2]), (8, [2, 3])])
def test_an_array_that_does_not_hold_the_part_is_refused_with_the_shapes(count, part):
    """Too few values for the whole [2, 4] array; a part reaching past its end; a part that
    differs from the whole on another axis; and a part that is in it."""
    startup = fluid.Program()
    block = startup.global_block()
    v = block.create_var("v", shape=part, dtype="float32", persistable=True)
    block.append_op("assign_value", outputs={"Out": [v.name]}, role="init",
                    attrs={"shape": part, "values": list(range(count)), "whole_shape": [2, 4], "rank_axis": 1})
    exe, scope = fluid.Executor(), fluid.Scope()
    if count == 8 and part == [2, 3]:
        exe.run(startup, scope=scope)  # rank 0's columns 0..2 are in the array
        np.testing.assert_array_equal(np.array(scope.find_var("v").get_tensor()), [[0, 1, 2], [4, 5, 6]])
        return
    want = rf"assign_value: the part {re.escape(str(part))} of rank 0 along axis 1 is not in the whole array " \
           rf"\[2, 4\] \({count} values given\)"
    with pytest.raises((OpError, ProgramError), match=want):
        exe.run(startup, scope=scope)
