"""Gradient clipping (fluid.clip): the update against numpy in one process, the order clip ->
regularization -> update, bad arguments, and the distributed runs (sync with the norm taken
over parameters on several pservers, sliced parameters, collective, async, merge_steps) equal
to one process."""
import numpy as np
import pytest

import placegroup as fluid
from placegroup.ir.printer import format_op
from tests.dist.train_model import data
from tests.inproc import build_programs, run_cluster, run_local
from tests.test_modes import check_equivalent

CLIPS = {
    "value": lambda: fluid.clip.GradientClipByValue(max=0.05, min=-0.02),
    "norm": lambda: fluid.clip.GradientClipByNorm(clip_norm=0.1),
    "global": lambda: fluid.clip.GradientClipByGlobalNorm(clip_norm=0.1),
}


def _clip_np(kind: str, grads: dict) -> dict:
    if kind == "value":
        return {k: np.clip(g, -0.02, 0.05) for k, g in grads.items()}
    if kind == "norm":
        return {k: g * 0.1 / max(np.linalg.norm(g), 0.1) for k, g in grads.items()}
    norm = np.sqrt(sum(float((g.astype(np.float64) ** 2).sum()) for g in grads.values()))
    return {k: g * 0.1 / max(norm, 0.1) for k, g in grads.items()}


def model(clip=None, reg=None, optimizer=lambda: fluid.optimizer.SGD(1.0), hidden=8, set_clip=None):
    def build():
        x = fluid.layers.data(name="x", shape=[10])
        y = fluid.layers.data(name="y", shape=[1])
        pred = fluid.layers.fc(fluid.layers.fc(x, hidden, act="relu"), 1)
        cost = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
        opt = optimizer()
        if clip is not None:
            opt._grad_clip = clip()
        if reg is not None:
            opt.regularization = reg()
        if set_clip is not None:
            fluid.clip.set_gradient_clip(set_clip())
        opt.minimize(cost)
        return [x, y], cost
    return build


@pytest.mark.parametrize("kind", sorted(CLIPS))
def test_one_sgd_step_applies_the_clipped_gradient(kind):
    (xb, yb), = data("wide", 1, 16)
    main, startup, (x, y), cost = build_programs(model())
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    params = [p.name for p in main.all_parameters()]
    before = {p: np.array(scope.find_var(p).get_tensor()) for p in params}
    # the gradients of the unclipped model at the same start, from a run that does not update
    gmain, gstart, _, _ = build_programs(model(optimizer=lambda: fluid.optimizer.SGD(0.0)))
    gexe, gscope = fluid.Executor(), fluid.Scope()
    gexe.run(gstart, scope=gscope)
    grads = dict(zip(params, gexe.run(gmain, feed={"x": xb, "y": yb}, fetch_list=[p + "@GRAD" for p in params],
                                      scope=gscope)))
    cmain, cstart, _, _ = build_programs(model(CLIPS[kind]))
    cexe, cscope = fluid.Executor(), fluid.Scope()
    cexe.run(cstart, scope=cscope)
    cexe.run(cmain, feed={"x": xb, "y": yb}, scope=cscope)
    want = _clip_np(kind, grads)
    for p in params:
        np.testing.assert_allclose(np.array(cscope.find_var(p).get_tensor()), before[p] - want[p],
                                   rtol=1e-5, atol=1e-6, err_msg=p)
    assert any(not np.allclose(want[p], grads[p]) for p in params)  # the clip bit


def test_set_gradient_clip_equals_the_optimizer_argument_and_the_argument_wins():
    batches = data("wide", 3, 16)
    by_arg = run_local(model(CLIPS["global"]), batches)
    by_set = run_local(model(set_clip=CLIPS["global"]), batches)
    np.testing.assert_array_equal(by_arg.losses[0], by_set.losses[0])
    with pytest.warns(UserWarning, match="grad_clip is used"):
        both = run_local(model(CLIPS["global"], set_clip=CLIPS["value"]), batches)
    np.testing.assert_array_equal(both.losses[0], by_arg.losses[0])


def test_clip_comes_before_the_decay():
    main, *_ = build_programs(model(CLIPS["norm"], reg=lambda: fluid.regularizer.L2Decay(0.1)))
    types = [op.type for op in main.global_block().ops if op.param == "fc_0.w_0"]
    assert types.index("scale") < types.index("elementwise_add") < types.index("sgd")
    assert types[0] == "squared_l2_norm"


@pytest.mark.parametrize("make, err, match", [
    (lambda: fluid.clip.GradientClipByNorm(0.0), ValueError, "clip_norm must be > 0"),
    (lambda: fluid.clip.GradientClipByGlobalNorm("1"), TypeError, "clip_norm must be a number"),
    (lambda: fluid.clip.GradientClipByValue(max=-1.0), ValueError, "min 1.0 is greater than max -1.0"),
    (lambda: fluid.clip.set_gradient_clip("clip"), TypeError, "must be a GradientClipByValue"),
])
def test_bad_clips_are_refused(make, err, match):
    with pytest.raises(err, match=match):
        make()


def test_sparse_gradient_is_merged_before_it_is_clipped():
    def build():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[10, 2], is_sparse=True, param_attr="emb")
        cost = fluid.layers.reduce_sum(emb)
        fluid.optimizer.SGD(1.0, grad_clip=fluid.clip.GradientClipByValue(1.5)).minimize(cost)
        return [ids], cost
    main, startup, _, _ = build_programs(build)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    before = np.array(scope.find_var("emb").get_tensor())
    exe.run(main, feed={"ids": np.array([[3], [3], [5]], np.int64)}, scope=scope)
    step = before - np.array(scope.find_var("emb").get_tensor())
    np.testing.assert_allclose(step[3], [1.5, 1.5])  # 1 + 1, clipped after the merge
    np.testing.assert_allclose(step[5], [1.0, 1.0])
    assert not step[[0, 1, 2, 4, 6, 7, 8, 9]].any()


@pytest.mark.parametrize("kind, trainers, pservers, hidden", [
    ("global", 2, 2, 8), ("global", 2, 3, 1000), ("norm", 2, 2, 1000), ("value", 2, 2, 8), ("global", 3, 1, 8),
], ids=["global", "global-sliced", "norm-sliced", "value", "global-one-pserver"])
def test_sync_clip_on_pservers_equals_one_process(kind, trainers, pservers, hidden):
    """The clip acts on the merged gradient; a global norm over parameters (and blocks) held
    by several pservers takes every pserver's squared norms."""
    batches = data("wide", 5, 30)
    build = model(CLIPS[kind], optimizer=lambda: fluid.optimizer.Momentum(0.5, momentum=0.9), hidden=hidden)
    check_equivalent(run_cluster(build, trainers, pservers, batches), run_local(build, batches))


def test_clip_and_decay_with_collective_data_parallel_equal_one_process():
    batches = data("wide", 4, 30)
    build = model(CLIPS["global"], reg=lambda: fluid.regularizer.L2Decay(0.01))
    check_equivalent(run_cluster(build, 2, 0, batches), run_local(build, batches))


def test_clip_and_decay_on_pservers_with_merge_steps_equal_one_process_on_merged_batches():
    batches = data("wide", 4, 30)
    build = model(CLIPS["global"], reg=lambda: fluid.regularizer.L2Decay(0.01))
    merged = [[np.concatenate([a, b]) for a, b in zip(batches[i], batches[i + 1])] for i in (0, 2)]
    run = run_cluster(build, 2, 2, batches, merge_steps=2)
    ref = run_local(build, merged)
    for name, want in ref.params[0].items():
        np.testing.assert_allclose(run.params[0][name], want, rtol=1e-5, atol=1e-6, err_msg=name)


def test_async_one_trainer_with_clip_is_the_one_process_run():
    batches = data("wide", 5, 30)
    build = model(CLIPS["global"], reg=lambda: fluid.regularizer.L2Decay(0.01))
    check_equivalent(run_cluster(build, 1, 2, batches, sync_mode=False), run_local(build, batches))


def test_dump_shows_the_cross_pserver_norm():
    main, startup, _, _ = build_programs(model(CLIPS["global"]))
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup, pservers="127.0.0.1:7100,127.0.0.1:7101", trainers=2)
    prog = t.get_program("127.0.0.1:7100", "pserver")
    (op,) = [op for op in prog.global_block().ops if op.type == "clip_norm_scale"]
    assert "cross_param" in format_op(op) and str(op.place) == "pserver"
    from placegroup.executor.transfers import transfers
    pairs = {(x.src, x.var) for x in transfers(prog) if x.src.startswith("pserver")}
    assert any(".clip" in var for _, var in pairs)  # a squared norm one pserver sends another


def test_param_attr_gradient_clip_clips_that_parameter_only():
    def build():
        x = fluid.layers.data(name="x", shape=[10])
        y = fluid.layers.data(name="y", shape=[1])
        h = fluid.layers.fc(x, 8, param_attr=fluid.ParamAttr(gradient_clip=fluid.clip.GradientClipByValue(0.01)))
        cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        fluid.optimizer.SGD(0.1).minimize(cost)
        return [x, y], cost
    main, *_ = build_programs(build)
    clipped = {op.param for op in main.global_block().ops if op.type == "clip"}
    assert clipped == {"fc_0.w_0"}
