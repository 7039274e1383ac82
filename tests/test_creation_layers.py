"""Creation and random layers (placegroup/layers/tensor.py), the TruncatedNormal and Bilinear
initializers and the noam / warmup schedules, run as programs against numpy: values, shapes
with a -1 batch, seeds (fixed: the same numbers every step; none: new ones each step, the
same in every build), data-parallel trainers drawing one process's numbers, and a
TruncatedNormal parameter sliced over two pservers equal to the one-process value.
"""
from __future__ import annotations

import numpy as np
import pytest

import placegroup as fluid
from placegroup.transpiler.parts import Part, _part_init_attrs
from tests.inproc import build_programs, run_cluster, run_local

L = fluid.layers


def _exe_run(fetch, feed=None, steps=1):
    exe = fluid.Executor()
    exe.run(fluid.default_startup_program())
    out = [exe.run(feed=feed or {}, fetch_list=fetch) for _ in range(steps)]
    return out if steps > 1 else out[0]


# -- creation ------------------------------------------------------------------------------------


def test_creation_layers_give_numpy_values():
    x = L.data("x", shape=[3])
    made = {
        "eye": L.eye(2, 3), "eye_sq": L.eye(3, dtype="int64"), "eye_batch": L.eye(2, batch_shape=[2, 1]),
        "lin": L.linspace(0.0, 1.0, 5, "float32"), "lin1": L.linspace(2.0, 9.0, 1, "float64"),
        "full": L.full([2, 2], 3.0), "full_i": L.full([3], 7, dtype="int32"),
        "like": L.full_like(x, 0.5), "like_i": L.full_like(x, 2, dtype="int64"),
        "ar": L.arange(0, 6, 2), "ar_i": L.arange(1, 4, dtype="int64"),
        "zeros": L.zeros([2], "float32"), "ones": L.ones([2], "int64"),
        "assigned": L.assign(np.array([[1.5, 2.5]], np.float32)),
        "g": L.create_global_var([2], 4.0, "float32", persistable=True),
    }
    into = L.create_tensor("float32")
    made["into"] = L.fill_constant([1, 2], "float32", -1.0, out=into)
    assert made["into"] is into
    assert made["like"].shape == (-1, 3) and made["eye_batch"].shape == (2, 1, 2, 2)
    got = dict(zip(made, _exe_run(list(made.values()), {"x": np.ones((4, 3), np.float32)})))
    want = {
        "eye": np.eye(2, 3, dtype=np.float32), "eye_sq": np.eye(3, dtype=np.int64),
        "eye_batch": np.broadcast_to(np.eye(2, dtype=np.float32), (2, 1, 2, 2)),
        "lin": np.array([0, 0.25, 0.5, 0.75, 1], np.float32), "lin1": np.array([2.0]),
        "full": np.full((2, 2), 3.0, np.float32), "full_i": np.full(3, 7, np.int32),
        "like": np.full((4, 3), 0.5, np.float32), "like_i": np.full((4, 3), 2, np.int64),
        "ar": np.array([0, 2, 4], np.float32), "ar_i": np.array([1, 2, 3], np.int64),
        "zeros": np.zeros(2, np.float32), "ones": np.ones(2, np.int64),
        "assigned": np.array([[1.5, 2.5]], np.float32), "g": np.full(2, 4.0, np.float32),
        "into": np.full((1, 2), -1.0, np.float32),
    }
    for k, w in want.items():
        np.testing.assert_array_equal(got[k], w, err_msg=k)
        assert got[k].dtype == w.dtype, k


def test_creation_layer_errors_name_the_layer():
    x = L.data("x", shape=[3])
    with pytest.raises(ValueError, match=r"eye: num_rows \(-1\)"):
        L.eye(-1)
    with pytest.raises(ValueError, match="linspace: dtype must be float32 or float64, got int32"):
        L.linspace(0, 1, 3, "int32")
    with pytest.raises(ValueError, match="linspace: num must be >= 1, got 0"):
        L.linspace(0.0, 1.0, 0, "float32")
    with pytest.raises(TypeError, match="uniform_random: shape entry x is float32; a shape Variable must be int32"):
        L.uniform_random([x, 2])  # an int Variable is read at run time (tests/test_variable_indexing.py)
    with pytest.raises(ValueError, match=r"randint: low \(5\) must be less than high \(5\)"):
        L.randint(5, 5)
    with pytest.raises(ValueError, match="randperm: dtype must be int32 or int64"):
        L.randperm(4, dtype="float32")
    with pytest.raises(ValueError, match="random_crop: seed must be"):
        L.random_crop(L.reshape(x, [-1, 3, 1]), [2, 1], seed=1.5)


# -- random layers ---------------------------------------------------------------------------


def _model_with_draws(fixed_seed=0):
    """A training program (so steps advance) with one draw of each random layer."""
    x = L.data("x", shape=[4])
    draws = {
        "gauss": L.gaussian_random([2, 3], seed=fixed_seed), "unif": L.uniform_random([2, 3], seed=fixed_seed),
        "gbsl": L.gaussian_random_batch_size_like(x, [-1, 3], seed=fixed_seed),
        "ubsl": L.uniform_random_batch_size_like(x, [2, 5], input_dim_idx=0, output_dim_idx=1, seed=fixed_seed),
        "randint": L.randint(0, 100, shape=[4], seed=fixed_seed), "randn": L.randn([3]),
        "perm": L.randperm(8, seed=fixed_seed), "ids": L.sampling_id(L.softmax(x), seed=fixed_seed),
        "crop": L.random_crop(L.reshape(x, [-1, 2, 2]), [1, 2], seed=fixed_seed or None),
    }
    cost = L.mean(L.fc(x, 1))
    fluid.optimizer.SGD(0.1).minimize(cost)
    return x, draws


def test_random_layers_shapes_dtypes_and_batch():
    x, d = _model_with_draws()
    shapes = {k: v.shape for k, v in d.items()}
    assert shapes == {"gauss": (2, 3), "unif": (2, 3), "gbsl": (-1, 3), "ubsl": (2, -1), "randint": (4,),
                      "randn": (3,), "perm": (8,), "ids": (-1,), "crop": (-1, 1, 2)}
    assert d["randint"].dtype == "int64" and d["ids"].dtype == "int64" and d["perm"].dtype == "int64"
    got = dict(zip(d, _exe_run(list(d.values()), {"x": np.arange(20, dtype=np.float32).reshape(5, 4)})))
    assert got["gbsl"].shape == (5, 3) and got["ubsl"].shape == (2, 5) and got["ids"].shape == (5,)
    assert got["crop"].shape == (5, 1, 2) and np.all((got["randint"] >= 0) & (got["randint"] < 100))
    np.testing.assert_array_equal(np.sort(got["perm"]), np.arange(8))


@pytest.mark.parametrize("fixed", [0, 17], ids=["no_seed", "seed"])
def test_a_fixed_seed_repeats_each_step_and_no_seed_draws_anew(fixed):
    """NOTE(layer-seeds): as Fluid, a given seed draws the same numbers every run; none draws
    new ones each step, and the same script builds the same draws."""
    x, d = _model_with_draws(fixed)
    names = list(d)
    feed = {"x": np.random.default_rng(0).random((6, 4)).astype(np.float32)}
    steps = _exe_run([d[k] for k in names], feed, steps=3)
    for i, k in enumerate(names):
        same = [np.array_equal(steps[0][i], s[i]) for s in steps[1:]]
        # randn takes no seed; random_crop's seed is only where its generator starts
        # (Fluid's op writes the next state back, NOTE(random-crop)): both change every step
        assert all(same) if fixed and k not in ("randn", "crop") else not any(same), k
    again = fluid.Program(), fluid.Program()
    with fluid.program_guard(*again), fluid.unique_name.guard(), fluid.scope_guard(fluid.Scope()):
        _, d2 = _model_with_draws(fixed)
        exe = fluid.Executor()
        exe.run(again[1])
        rebuilt = [exe.run(again[0], feed=feed, fetch_list=[d2[k] for k in names]) for _ in range(3)]
    for a, b in zip(steps, rebuilt):
        for k, u, v in zip(names, a, b):
            np.testing.assert_array_equal(u, v, err_msg=k)


def test_ops_without_a_seed_get_seeds_of_their_own():
    a, b = L.gaussian_random([4]), L.gaussian_random([4])
    seeds = [op.attrs["seed"] for op in fluid.default_main_program().global_block().ops]
    assert len(set(seeds)) == 2 and all(s > 0 for s in seeds)
    va, vb = _exe_run([a, b])
    assert not np.array_equal(va, vb)


def test_random_layers_statistics():
    p = np.array([0.1, 0.2, 0.7], np.float32)
    probs = L.data("p", shape=[3])
    ids = L.sampling_id(probs, seed=4)
    x = L.data("img", shape=[4, 6])
    crop = L.random_crop(x, [2, 3], seed=8)
    noise = L.gaussian_random_batch_size_like(probs, [-1, 50], mean=1.0, std=3.0, seed=2)
    img = np.arange(4 * 6, dtype=np.float32).reshape(1, 4, 6).repeat(400, axis=0)
    got_ids, got_crop, got_noise = _exe_run([ids, crop, noise], {"p": np.tile(p, (3000, 1)), "img": img})
    np.testing.assert_allclose(np.bincount(got_ids, minlength=3) / 3000, p, atol=0.03)
    starts = set()
    for c in got_crop:  # a contiguous 2x3 window of the 4x6 instance
        r0, c0 = divmod(int(c[0, 0]), 6)
        np.testing.assert_array_equal(c, img[0, r0:r0 + 2, c0:c0 + 3])
        starts.add((r0, c0))
    assert starts == {(r, c) for r in range(3) for c in range(4)}  # every place is reached
    assert abs(got_noise.mean() - 1.0) < 0.05 and abs(got_noise.std() - 3.0) < 0.05


_DRAWS: list = []  # the fetch names of _batch_draws' random vars (the same in every build)


def _batch_draws():
    x = L.data("x", shape=[4])
    noise = L.gaussian_random_batch_size_like(x, [-1, 4], std=0.1)
    ids = L.sampling_id(L.softmax(x))
    crop = L.random_crop(L.reshape(x, [-1, 2, 2]), [1, 2])
    cost = L.mean(L.square(L.fc(x + noise, 1)))
    fluid.optimizer.SGD(0.1).minimize(cost)
    _DRAWS[:] = [noise.name, ids.name, crop.name]
    return [x], cost


def test_batch_draws_on_two_trainers_equal_one_process():
    """NOTE(random-steps): rows are keyed by their index in the whole batch, and the step is
    counted alike, so each trainer draws its half of one process's numbers."""
    rng = np.random.default_rng(1)
    batches = [[rng.random((8, 4)).astype(np.float32)] for _ in range(3)]
    build_programs(_batch_draws)
    local = run_local(_batch_draws, batches, fetch=tuple(_DRAWS))
    cluster = run_cluster(_batch_draws, trainers=2, pservers=2, batches=batches, fetch=tuple(_DRAWS))
    for step in range(3):
        for i in range(3):
            whole = np.concatenate([cluster.fetched[0][step][i], cluster.fetched[1][step][i]])
            np.testing.assert_array_equal(whole, local.fetched[0][step][i], err_msg=f"step {step} draw {i}")
        assert not np.array_equal(local.fetched[0][step][0], local.fetched[0][step - 1][0]) or step == 0
    np.testing.assert_allclose(np.mean([cluster.losses[0], cluster.losses[1]], axis=0), local.losses[0], rtol=1e-5)


# -- initializers --------------------------------------------------------------------------------

# Paddle 2.6's paddle.nn.initializer.Bilinear() on a [2, 1, 4, 4] parameter, channel 0
PADDLE_BILINEAR_4 = np.array([[0.0625, 0.28125, 0.375, 0.15625], [0.1875, 0.65625, 0.75, 0.21875],
                              [0.1875, 0.46875, 0.375, 0.09375], [0.0625, 0.09375, 0.0, -0.03125]], np.float32)


def test_bilinear_initializer_is_paddles_kernel_and_slices_by_rows():
    w = L.create_parameter([2, 1, 4, 4], "float32", name="up",
                           default_initializer=fluid.initializer.Bilinear())
    got, = _exe_run([w])
    np.testing.assert_array_equal(got[0, 0], PADDLE_BILINEAR_4)
    size, f = 4, 2.0
    c = (2 * f - 1 - f % 2) / (2 * f)
    i = np.arange(32)
    want = (1 - np.abs(i % size / f - c)) * (1 - np.abs((i / size) % size / f - c))
    np.testing.assert_allclose(got.ravel(), want, rtol=1e-7)
    init = fluid.default_startup_program().global_block().ops[0]
    part = _part_init_attrs(init, [1, 1, 4, 4], Part(1, 1, 1, 1, ".block1"), [2, 1, 4, 4])
    np.testing.assert_array_equal(np.array(part["values"], np.float32).reshape(1, 1, 4, 4), got[1:2])
    with pytest.raises(ValueError, match=r"Bilinear initializer for 'flat': the var must be \[C_out, C_in, K, K\]"):
        L.create_parameter([3, 4], "float32", name="flat", default_initializer=fluid.initializer.Bilinear())


def test_truncated_normal_initializer():
    init = fluid.initializer.TruncatedNormal(loc=0.0, scale=0.5)
    assert fluid.initializer.TruncatedNormalInitializer is type(init)
    a = L.create_parameter([300, 200], "float32", name="a", default_initializer=init)
    b = L.create_parameter([300, 200], "float32", name="b", default_initializer=init)
    c = L.create_parameter([3], "float32", name="c",
                           default_initializer=fluid.initializer.TruncatedNormal(scale=2.0, seed=9))
    ops = fluid.default_startup_program().global_block().ops
    assert [op.type for op in ops] == ["truncated_gaussian_random"] * 3 and ops[2].attrs["seed"] == 9
    va, vb, vc = _exe_run([a, b, c])
    assert np.abs(va).max() <= 1.0 and np.abs(va).max() > 0.98 and not np.array_equal(va, vb)
    assert abs(va.mean()) < 0.005 and abs(va.std() - 0.5 * 0.8796) < 0.005
    assert np.abs(vc).max() <= 4.0


def _wide_model():
    x = L.data("x", shape=[128])
    w = fluid.ParamAttr("wide.w", initializer=fluid.initializer.TruncatedNormal(scale=0.05))
    h = L.fc(x, 100, param_attr=w, act="relu")  # 12800 elements: two blocks over two pservers
    cost = L.mean(L.square(L.fc(h, 1)))
    fluid.optimizer.SGD(0.1).minimize(cost)
    return [x], cost


def test_truncated_normal_parameter_sliced_over_two_pservers_equals_one_process():
    main, startup, _, _ = build_programs(_wide_model)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    whole = np.array(scope.find_var("wide.w").get_tensor())
    eps = ["127.0.0.1:7301", "127.0.0.1:7302"]
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id=0, program=main, startup_program=startup, pservers=",".join(eps), trainers=2)
    blocks = {}
    for ep in eps:
        sprog = t.get_startup_program(ep, "pserver")
        s = fluid.Scope()
        fluid.Executor().run(sprog, scope=s)
        for name in (n for op in sprog.global_block().ops for n in op.output_arg_names):
            if name.startswith("wide.w.block") and s.find_var(name) is not None:  # this pserver's block
                blocks[int(name.rsplit("block", 1)[1])] = np.array(s.find_var(name).get_tensor())
    assert sorted(blocks) == [0, 1], "wide.w should be cut into two blocks"
    np.testing.assert_array_equal(np.concatenate([blocks[0], blocks[1]]), whole)
    rng = np.random.default_rng(4)
    batches = [[rng.random((4, 128)).astype(np.float32)] for _ in range(2)]
    cluster, local = run_cluster(_wide_model, 2, 2, batches), run_local(_wide_model, batches)
    np.testing.assert_allclose(np.mean([cluster.losses[0], cluster.losses[1]], axis=0), local.losses[0], rtol=1e-5)
    np.testing.assert_allclose(cluster.params[0]["wide.w"], local.params[0]["wide.w"], rtol=1e-5, atol=1e-7)


# -- schedules -----------------------------------------------------------------------------------


def test_noam_decay_counts_steps_from_one():
    lr = L.noam_decay(d_model=64, warmup_steps=3, learning_rate=2.0)
    got = [float(r[0][0]) for r in _exe_run([lr], steps=6)]
    want = [2.0 * 64 ** -0.5 * min(s ** -0.5, 3 ** -1.5 * s) for s in range(1, 7)]
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_linear_lr_warmup_over_a_number_and_over_a_schedule():
    const = L.linear_lr_warmup(0.5, warmup_steps=4, start_lr=0.0, end_lr=0.2)
    piece = L.linear_lr_warmup(L.piecewise_decay([5], [0.3, 0.03]), warmup_steps=2, start_lr=0.1, end_lr=0.3)
    got = np.array([[float(a[0]), float(b[0])] for a, b in _exe_run([const, piece], steps=7)])
    steps = np.arange(7)  # the decay counter starts at 0 here
    want_const = np.where(steps < 4, 0.2 * steps / 4, 0.5)
    want_piece = np.where(steps < 2, 0.1 + 0.2 * steps / 2, np.where(steps < 5, 0.3, 0.03))
    np.testing.assert_allclose(got, np.stack([want_const, want_piece], 1), rtol=1e-6)
    with pytest.raises(ValueError, match="linear_lr_warmup: warmup_steps must be a positive number"):
        L.linear_lr_warmup(0.1, 0, 0.0, 0.1)


def test_autoincreased_step_counter():
    a = L.autoincreased_step_counter(begin=3, step=2)
    b = L.autoincreased_step_counter(counter_name="mine")
    assert L.autoincreased_step_counter(begin=10) is a  # the existing counter, unchanged
    ops = fluid.default_main_program().global_block().ops
    assert [op.type for op in ops] == ["increment", "increment"] and {op.role for op in ops} == {"forward"}
    got = [(int(x[0]), int(y[0])) for x, y in _exe_run([a, b], steps=3)]
    assert got == [(4, 1), (6, 2), (8, 3)]  # Fluid: begin - 1, then += step before any read
