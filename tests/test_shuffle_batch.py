"""fluid.contrib.layers.shuffle_batch: the op, the layer, the ``fluid.contrib`` module, and
Fluid 1.8.5 itself (NOTE(shuffle-batch) in ops/random.py).

The op's OpCases live in tests/cases/shuffle.py (tests/test_ops.py runs them with every op);
here they run alone, beside the checks a table cannot hold: the adjoint identity
<J u, v> == <u, J^T v>, a word2vec-like model that trains under ``placegroup run`` and in a
parameter-server job, the ``fluid.contrib`` names placegroup still lacks, and Fluid 1.8.5's own
op run in a subprocess.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.compat import alias_paddle, unalias_paddle
from placegroup.ops.registry import KernelContext, get_op_def
from tests import test_ops
from tests.cases.shuffle import perm, run
from tests.conftest import TIME_FACTOR
from tests.inproc import run_cluster, run_local
from tests.op_cases import CASES
from tests.paddle_ref.reference import run_python

IDS = [c.id for c in CASES if c.op == "shuffle_batch"]


@pytest.mark.parametrize("cid", IDS)
def test_op_case_output(cid):
    test_ops.test_output(cid)


@pytest.mark.parametrize("cid", [c for c in IDS if test_ops.by_id()[c].grad])
def test_op_case_grad(cid):
    test_ops.test_grad(cid)


@pytest.mark.parametrize("cid,k", [(c, k) for c in IDS for k in range(len(test_ops.by_id()[c].errors))])
def test_op_case_error(cid, k):
    test_ops.test_error(cid, k)


def _grad(idx, g):
    d = get_op_def("shuffle_batch_grad")
    return d.kernels["cpu"](np, {"ShuffleIdx": idx, "Out@GRAD": g}, dict(d.attrs),
                            KernelContext(outputs=("X@GRAD",)))["X@GRAD"]


@pytest.mark.parametrize("shape", [(6, 3), (2, 5, 4), (7,)])
def test_gradient_is_the_transpose_of_the_forward(shape):
    """For a fixed permutation Out = J X is linear: <J u, v> == <u, J^T v>, J^T the grad op."""
    rng = np.random.default_rng(5)
    u, v = rng.standard_normal(shape), rng.standard_normal(shape)
    fwd = run({"X": u, "Seed": np.array([4], np.int64)}, {}, step=3)
    np.testing.assert_allclose(np.vdot(fwd["Out"], v), np.vdot(u, _grad(fwd["ShuffleIdx"], v)), rtol=1e-12)


def test_gradient_row_i_is_the_out_gradient_row_idx_i():
    # Fluid 1.8.5's direction (checked against its op below): X@GRAD[i] = Out@GRAD[idx[i]]
    idx = np.array([2, 0, 3, 1], np.int64)
    g = np.arange(8.0).reshape(4, 2)
    np.testing.assert_array_equal(_grad(idx, g), g[idx])


# -- the layer -------------------------------------------------------------------------------


def _op(program):
    return next(op for op in program.global_block().ops if op.type == "shuffle_batch")


def test_layer_makes_fluids_op_and_a_persistable_seed():
    x = fluid.layers.data("x", shape=[4], dtype="float32")
    out = fluid.contrib.layers.shuffle_batch(x, seed=13)
    op = _op(fluid.default_main_program())
    seed = fluid.default_main_program().global_block().var(op.input("Seed")[0])
    assert out.shape == x.shape and out.dtype == x.dtype
    assert op.attrs["startup_seed"] == 13 and op.output("SeedOut") == op.input("Seed")
    assert seed.persistable and seed.dtype == "int64" and seed.name.startswith("shuffle_batch_seed")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    feed = {"x": np.arange(24, dtype="float32").reshape(6, 4)}
    idx_name = op.output("ShuffleIdx")[0]
    got = [exe.run(feed=feed, fetch_list=[out, idx_name, seed.name]) for _ in range(3)]
    for step, (o, idx, s) in enumerate(got):
        np.testing.assert_array_equal(idx, perm(13, step, 6))  # startup_seed, then the step
        np.testing.assert_array_equal(o[idx], feed["x"])
        assert s.tolist() == [13] and idx.dtype == np.int64 and s.dtype == np.int64
    assert not np.array_equal(got[0][1], got[1][1])


def test_layer_seed_forms():
    x = fluid.layers.data("x", shape=[4], dtype="float32")
    given = fluid.layers.fill_constant([1], "int64", 5)
    fluid.contrib.layers.shuffle_batch(x, seed=given)
    op = _op(fluid.default_main_program())
    assert op.input("Seed") == [given.name] == op.output("SeedOut")
    fluid.contrib.shuffle_batch(x)
    fluid.contrib.layers.nn.shuffle_batch(x)
    starts = [op.attrs["startup_seed"] for op in fluid.default_main_program().global_block().ops
              if op.type == "shuffle_batch"][1:]
    assert starts[0] != starts[1]  # no program seed: a seed of each op's own
    with pytest.raises(ValueError, match="seed must be an int, an int64 Variable or None, got 1.5"):
        fluid.contrib.layers.shuffle_batch(x, seed=1.5)
    fluid.default_main_program().random_seed = 90
    fluid.contrib.layers.shuffle_batch(x)
    assert _op_list()[-1].attrs["startup_seed"] == 90  # the program's seed, as Fluid


def _op_list():
    return [op for op in fluid.default_main_program().global_block().ops if op.type == "shuffle_batch"]


W2V = """\
import numpy as np
import paddle.fluid as fluid

vocab, dim = 40, 8


def model():
    words = fluid.layers.data(name="words", shape=[1], dtype="int64")
    ctx = fluid.layers.data(name="ctx", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(words, size=[vocab, dim], param_attr="emb")
    true_w = fluid.layers.embedding(ctx, size=[vocab, dim], param_attr="emb_w")
    true_b = fluid.layers.embedding(ctx, size=[vocab, 1], param_attr="emb_b")
    neg_w = fluid.contrib.layers.shuffle_batch(true_w)   # negatives: the batch's own words
    neg_b = fluid.contrib.layers.shuffle_batch(true_b)

    def logit(w, b):
        dot = fluid.layers.reduce_sum(fluid.layers.elementwise_mul(emb, w), dim=1, keep_dim=True)
        return fluid.layers.elementwise_add(dot, b)

    true_logit, neg_logit = logit(true_w, true_b), logit(neg_w, neg_b)
    one = fluid.layers.fill_constant_batch_size_like(true_logit, [-1, 1], "float32", 1.0)
    zero = fluid.layers.fill_constant_batch_size_like(neg_logit, [-1, 1], "float32", 0.0)
    cost = fluid.layers.elementwise_add(
        fluid.layers.sigmoid_cross_entropy_with_logits(true_logit, one),
        fluid.layers.sigmoid_cross_entropy_with_logits(neg_logit, zero))
    loss = fluid.layers.mean(cost)
    fluid.optimizer.SGD(learning_rate=5.0).minimize(loss)
    return [words, ctx], loss


def batch(n=16):
    rng = np.random.RandomState(0)
    return rng.randint(0, vocab, (n, 1)).astype("int64"), rng.randint(0, vocab, (n, 1)).astype("int64")


if __name__ == "__main__":
    feeds, loss = model()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    words, ctx = batch()
    for step in range(20):
        l, = exe.run(fluid.default_main_program(), feed={"words": words, "ctx": ctx}, fetch_list=[loss])
        print("step %d loss %f" % (step, l))
"""


def test_word2vec_like_model_trains_under_placegroup_run(tmp_path):
    script = tmp_path / "w2v.py"
    script.write_text(W2V)
    out = subprocess.run([sys.executable, "-m", "placegroup", "run", str(script)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120 * TIME_FACTOR)
    assert out.returncode == 0, out.stderr
    losses = [float(x) for x in re.findall(r"loss ([0-9.]+)", out.stdout)]
    assert len(losses) == 20 and losses[-1] < 0.5 * losses[0], out.stdout


def _w2v_model():
    namespace: dict = {}
    exec(compile(W2V.replace("paddle.fluid", "placegroup"), "w2v", "exec"), namespace)
    return namespace


def test_word2vec_like_model_trains_in_a_parameter_server_job():
    w2v = _w2v_model()
    batches = [w2v["batch"]()] * 6
    local = run_local(w2v["model"], batches)
    job = run_cluster(w2v["model"], trainers=2, pservers=1, batches=batches, timeout=60 * TIME_FACTOR)
    assert local.losses[0][-1] < local.losses[0][0]
    for k in (0, 1):  # each trainer permutes its own half of the batch (NOTE(shuffle-batch))
        assert len(job.losses[k]) == 6 and job.losses[k][-1] < job.losses[k][0], job.losses


# -- fluid.contrib: the rest stays refused ---------------------------------------------------


@pytest.mark.parametrize("name, why", [
    ("slim", "model compression (contrib"), ("mixed_precision", "mixed precision (contrib"),
    ("BeamSearchDecoder", "beam-search decoding (contrib"), ("layers.tdm_sampler", "(TDM) retrieval"),
    ("layers.nn.var_conv_2d", "text-matching models"), ("utils", "HDFS and lookup-table utilities")])
def test_other_contrib_names_say_placegroup_lacks_them(name, why):
    *path, leaf = name.split(".")
    module = fluid.contrib
    for part in path:
        module = getattr(module, part)
    label = ".".join(["fluid.contrib", *path, leaf])
    with pytest.raises(fluid.NotImplementedInPlacegroup,
                       match=re.escape(f"placegroup does not implement {label}: ") + ".*" + re.escape(why)):
        getattr(module, leaf)
    assert not hasattr(module, leaf)
    with pytest.raises(AttributeError) as e:
        fluid.contrib.no_such_layer  # noqa: B018
    assert type(e.value) is AttributeError


def test_importing_contrib_under_the_paddle_alias():
    alias_paddle()
    try:
        import paddle.fluid.contrib.layers.nn as nn  # noqa: PLR0402 - the module path itself
        from paddle.fluid.contrib.layers import shuffle_batch

        assert shuffle_batch is nn.shuffle_batch is fluid.contrib.shuffle_batch
        for mod in ("slim", "quantize", "mixed_precision"):
            with pytest.raises(ModuleNotFoundError, match=f"placegroup does not implement paddle.fluid.contrib.{mod}: "):
                __import__(f"paddle.fluid.contrib.{mod}")
        with pytest.raises(ModuleNotFoundError, match="placegroup does not implement paddle.fluid.contrib.slim: "):
            import paddle.fluid.contrib.slim.quantization  # noqa: F401
    finally:
        unalias_paddle()


def test_placegroup_run_refuses_other_contrib_modules(tmp_path):
    script = tmp_path / "slim.py"
    script.write_text("import paddle.fluid as fluid\nimport paddle.fluid.contrib.slim\n")
    out = subprocess.run([sys.executable, "-m", "placegroup", "run", str(script)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60 * TIME_FACTOR)
    assert out.returncode != 0 and "placegroup does not implement paddle.fluid.contrib.slim: model compression" in out.stderr


# -- Fluid 1.8.5 itself ----------------------------------------------------------------------

FLUID_SCRIPT = textwrap.dedent("""\
    import json, sys
    import numpy as np
    import paddle.fluid as fluid

    spec = json.loads(sys.argv[1])
    x_val = np.array(spec["x"], dtype="float32")
    w_val = np.array(spec["w"], dtype="float32")
    main, start = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, start):
        x = fluid.data("x", shape=[-1] + list(x_val.shape[1:]), dtype="float32")
        x.stop_gradient = False
        out = fluid.contrib.layers.shuffle_batch(x, seed=7)
        w = fluid.layers.assign(w_val)
        fluid.backward.append_backward(fluid.layers.reduce_sum(out * w))
        seq = fluid.data("seq", shape=[-1, 2], dtype="int64", lod_level=1)
        seq_out = fluid.contrib.layers.shuffle_batch(seq, seed=3)
    op = [o for o in main.global_block().ops if o.type == "shuffle_batch"][0]
    names = [op.output(s)[0] for s in ("Out", "ShuffleIdx", "SeedOut")] + [x.name + "@GRAD"]
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(start)
    lod = fluid.create_lod_tensor(np.arange(10, dtype="int64").reshape(5, 2), [[2, 3]], fluid.CPUPlace())
    got = {}
    for step in range(2):
        vals = exe.run(main, feed={"x": x_val, "seq": lod}, fetch_list=names + [seq_out], return_numpy=False)
        for key, v in zip(["Out", "ShuffleIdx", "SeedOut", "XGrad", "SeqOut"], vals):
            a = np.array(v)
            got["%s%d" % (key, step)] = {"v": a.tolist(), "dtype": a.dtype.name, "lod": v.lod()}
    print("RESULT " + json.dumps(got))
""")


@pytest.mark.paddle
def test_fluid_185_op_agrees(fluid18_python, tmp_path):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 3, 2)).astype("float32")
    w = rng.standard_normal((4, 3, 2)).astype("float32")
    done = run_python(fluid18_python, "-c", FLUID_SCRIPT, json.dumps({"x": x.tolist(), "w": w.tolist()}),
                      timeout=300 * TIME_FACTOR, cwd=tmp_path)
    got = json.loads(done.stdout.split("RESULT ", 1)[1])
    ours = run({"X": x, "Seed": np.array([7], np.int64)}, {})
    for step in (0, 1):
        theirs = {k[:-1]: np.array(v["v"], dtype=v["dtype"]) for k, v in got.items() if k.endswith(str(step))}
        idx = theirs["ShuffleIdx"]
        for slot, ref in (("Out", x), ("ShuffleIdx", idx), ("SeedOut", ours["SeedOut"])):
            assert theirs[slot].shape == ours[slot].shape and theirs[slot].dtype == ours[slot].dtype, slot
        assert sorted(idx.tolist()) == list(range(12))
        np.testing.assert_array_equal(theirs["Out"].reshape(12, 2)[idx], x.reshape(12, 2))  # Out[idx[i]] = X[i]
        np.testing.assert_allclose(_grad(idx, w), theirs["XGrad"], rtol=0, atol=0)  # our grad op, their idx
        seq = got[f"SeqOut{step}"]
        assert seq["lod"] == [[0, 2, 5]]  # Out keeps X's LoD, as ours (the "lod" OpCase)
        assert sorted(map(tuple, seq["v"])) == [(2 * i, 2 * i + 1) for i in range(5)]
    assert got["ShuffleIdx0"]["v"] != got["ShuffleIdx1"]["v"]  # a new permutation each run, as ours
