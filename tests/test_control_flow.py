"""Loops, branches and tensor arrays (issue: control flow, first slice): ``While``,
``while_loop``, ``cond``, ``create_array`` / ``array_write`` / ``array_read`` / ``array_length``,
run by the executor as sub-blocks (NOTE(sub-blocks) in executor/blocks.py); their gradients are
tests/test_control_flow_grad.py's.

Checked against numpy, against Fluid 1.8.5 running the same script, across a prog.bin round
trip, and across processes: a loop that reads a parameter the pservers hold."""
import sys

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import OpError, PassError
from placegroup.ir.framework import note_transpiled_job
from tests.inproc import run_cluster, run_local
from tests.paddle_ref.reference import SCRIPT_HEAD, run_reference

# one script for both frameworks: a While loop that sums, writes a tensor array and counts;
# array reads and length; cond on the result; a while_loop; and a cond inside a While
# both scripts start so: the framework the spec names, fresh programs
HEAD = SCRIPT_HEAD + r'''
main, startup = fluid.Program(), fluid.Program()
'''
SCRIPT = HEAD + r'''
with fluid.program_guard(main, startup):
    x = fluid.layers.data("x", [3], dtype="float32")
    i = fluid.layers.fill_constant([1], "int64", 0)
    n = fluid.layers.fill_constant([1], "int64", 4)
    acc = fluid.layers.fill_constant([1], "float32", 0.0)
    odd = fluid.layers.fill_constant([1], "float32", 0.0)
    arr = fluid.layers.create_array("float32")
    cond = fluid.layers.less_than(i, n)
    loop = fluid.layers.While(cond)
    with loop.block():
        s = fluid.layers.reduce_sum(x) * fluid.layers.cast(i + 1, "float32")
        fluid.layers.assign(acc + s, acc)
        fluid.layers.array_write(s, i, arr)
        two = fluid.layers.fill_constant([1], "int64", 2)
        is_odd = fluid.layers.equal(fluid.layers.elementwise_mod(i, two), fluid.layers.fill_constant([1], "int64", 1))
        picked = fluid.layers.cond(is_odd, lambda: s, lambda: s * 0.0)
        fluid.layers.assign(odd + picked, odd)
        fluid.layers.increment(i, in_place=True)
        fluid.layers.less_than(i, n, cond=cond)
    length = fluid.layers.array_length(arr)
    second = fluid.layers.array_read(arr, fluid.layers.fill_constant([1], "int64", 1))
    limit = fluid.layers.fill_constant([1], "float32", spec["limit"])
    branch = fluid.layers.cond(fluid.layers.less_than(acc, limit), lambda: acc * 2.0, lambda: acc - 1.0)
    k = fluid.layers.fill_constant([1], "int64", 0)
    total = fluid.layers.fill_constant([1], "float32", 1.0)
    ten = fluid.layers.fill_constant([1], "int64", 5)
    k, total = fluid.layers.while_loop(lambda k, t: fluid.layers.less_than(k, ten), lambda k, t: [k + 1, t * 1.5], [k, total])
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
out = {}
for step, xv in enumerate(spec["xs"]):
    got = exe.run(main, feed={"x": np.array(xv, "float32")}, fetch_list=[acc, odd, length, second, branch, i, k, total])
    for name, v in zip(["acc", "odd", "length", "second", "branch", "i", "k", "total"], got):
        out["%s%d" % (name, step)] = np.array(v)
np.savez(spec["out"], **out)
'''
XS = [[[1, 2, 3]], [[-4, 0.5, 1]], [[0.25, 0.25, 0.5], [1, 1, 1]]]


def _numpy(xs, limit):
    out = {}
    for step, xv in enumerate(xs):
        total = float(np.sum(xv))
        sums = [total * (j + 1) for j in range(4)]
        acc = sum(sums)
        out.update({f"acc{step}": acc, f"odd{step}": sums[1] + sums[3], f"length{step}": 4, f"second{step}": sums[1],
                    f"branch{step}": acc * 2 if acc < limit else acc - 1, f"i{step}": 4, f"k{step}": 5,
                    f"total{step}": 1.5 ** 5})
    return out


def _ours(tmp_path, limit=10.0):
    return run_reference(sys.executable, SCRIPT, tmp_path, None, framework="placegroup", xs=XS, limit=limit)


def test_loops_branches_and_arrays_equal_numpy(tmp_path):
    ours = _ours(tmp_path)
    for key, want in _numpy(XS, 10.0).items():
        np.testing.assert_allclose(ours[key], [want], rtol=1e-6, err_msg=key)


@pytest.mark.paddle
def test_loops_branches_and_arrays_equal_fluid_1_8_5(tmp_path, fluid18_python):
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, SCRIPT, tmp_path / "fluid", None, framework="fluid", xs=XS, limit=10.0)
    ours = _ours(tmp_path)
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert ours[key].dtype == theirs[key].dtype, key
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


def _counting_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data("x", [2], dtype="float32")
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", 3)
        arr = fluid.layers.create_array("float32")
        c = fluid.layers.less_than(i, n)
        loop = fluid.layers.While(c)
        with loop.block():
            fluid.layers.array_write(x * 2.0, i, arr)
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=c)
        read = fluid.layers.array_read(arr, fluid.layers.fill_constant([1], "int64", 2))
    return main, startup, read, arr, loop


def test_the_program_shows_and_keeps_its_blocks(tmp_path):
    """The printed form lists each sub-block; the while op names it and lists the outer vars
    it reads and writes, as Fluid does; verify, a prog.bin round trip and clone keep them."""
    main, startup, read, arr, _ = _counting_program()
    text = str(main)
    assert "block 1 parent=0" in text and "sub_block=1" in text
    op = next(o for o in main.global_block().ops if o.type == "while")
    assert "x" in op.input("X") and arr.name in op.output("Out")
    main.verify()
    exe, feed = fluid.Executor(), {"x": np.array([[1.0, -2.0]], "float32")}
    exe.run(startup)
    want, = exe.run(main, feed=feed, fetch_list=[read])
    np.testing.assert_array_equal(want, [[2.0, -4.0]])
    again = fluid.Program.from_bytes(main.to_bytes())
    assert again.num_blocks == 2 and main.clone().num_blocks == 2
    got, = exe.run(again, feed=feed, fetch_list=[read.name])
    np.testing.assert_array_equal(got, want)


def test_errors_name_the_block_and_the_iteration():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        i = fluid.layers.fill_constant([1], "int64", 0)
        n = fluid.layers.fill_constant([1], "int64", 3)
        arr = fluid.layers.create_array("float32")
        c = fluid.layers.less_than(i, n)
        loop = fluid.layers.While(c)
        with loop.block():
            fluid.layers.array_read(arr, i)  # nothing was written: fails in iteration 0
            fluid.layers.increment(i, in_place=True)
            fluid.layers.less_than(i, n, cond=c)
        with pytest.raises(TypeError, match="bool Variable of one element"):
            fluid.layers.While(i)
        with pytest.raises(ValueError, match="false_fn returns None while the other branch returns values"):
            fluid.layers.cond(c, lambda: i, lambda: None)
    exe = fluid.Executor()
    exe.run(startup)
    with pytest.raises(OpError, match=r"(?s)`while`.*in iteration 0 of block 1: While executing op #0 `read_from_array`.*"
                                      r"index 0 holds no tensor"):
        exe.run(main)


def _looping_model():
    x, y = fluid.layers.data("x", [4]), fluid.layers.data("y", [1])
    h = fluid.layers.fc(x, 4, act="tanh", param_attr=fluid.ParamAttr(name="w0"))
    cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
    # off the loss's path: h <- tanh(h @ w0) three times, reading the parameter inside the loop
    g = fluid.layers.assign(h)
    g.stop_gradient = True
    i = fluid.layers.fill_constant([1], "int64", 0)
    n = fluid.layers.fill_constant([1], "int64", 3)
    c = fluid.layers.less_than(i, n)
    loop = fluid.layers.While(c)
    block = fluid.default_main_program().global_block()
    with loop.block():
        fluid.layers.assign(fluid.layers.tanh(fluid.layers.mul(g, block.var("w0"))), g)
        fluid.layers.increment(i, in_place=True)
        fluid.layers.less_than(i, n, cond=c)
    fluid.layers.assign(fluid.layers.reduce_mean(g), block.create_var(name="loop_out", shape=[1], dtype="float32"))
    fluid.optimizer.SGD(0.1).minimize(cost)
    return [x, y], cost


def test_a_loop_over_a_parameter_the_pservers_hold_runs_on_each_trainer():
    """2 trainers + 2 pservers: the loop runs on the trainer that owns it, the parameter it
    reads prefetched before the loop starts (it is an input of the while op); each step's
    loop output, averaged over the trainers' halves, equals one process's, as do the losses."""
    rng = np.random.default_rng(0)
    batches = [(rng.normal(size=(8, 4)).astype("float32"), rng.normal(size=(8, 1)).astype("float32"))
               for _ in range(3)]
    local = run_local(_looping_model, batches, fetch=("loop_out",))
    cluster = run_cluster(_looping_model, trainers=2, pservers=2, batches=batches, fetch=("loop_out",))
    np.testing.assert_allclose(np.mean([cluster.losses[0], cluster.losses[1]], axis=0), local.losses[0], rtol=1e-5)
    ours = np.mean([[f[0] for f in cluster.fetched[t]] for t in (0, 1)], axis=0)
    np.testing.assert_allclose(ours, [f[0] for f in local.fetched[0]], rtol=1e-5)


def test_a_block_that_reads_what_its_op_does_not_list_is_refused_by_the_transpiler():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        feeds, cost = _looping_model()
    op = next(o for o in main.global_block().ops if o.type == "while")
    op.inputs["X"] = [n for n in op.inputs["X"] if n != "w0"]
    t = fluid.DistributeTranspiler()
    with pytest.raises(PassError, match=r"reads 'w0', which is not an input of the op"):
        t.transpile(0, program=main, startup_program=startup, pservers="127.0.0.1:7100", trainers=1)
    note_transpiled_job(None)


SWITCH_SCRIPT = HEAD + r'''
with fluid.program_guard(main, startup):
    x = fluid.layers.data("x", [1], dtype="float32")
    lr = fluid.layers.create_global_var(shape=[1], value=0.0, dtype="float32", persistable=True, name="lr")
    step = fluid.layers.reduce_sum(x)
    with fluid.layers.Switch() as sw:
        with sw.case(fluid.layers.less_than(step, fluid.layers.fill_constant([1], "float32", 2.0))):
            fluid.layers.assign(fluid.layers.fill_constant([1], "float32", 0.1), lr)
        with sw.case(fluid.layers.less_than(step, fluid.layers.fill_constant([1], "float32", 5.0))):
            fluid.layers.assign(fluid.layers.fill_constant([1], "float32", 0.2), lr)
        with sw.default():
            fluid.layers.assign(fluid.layers.fill_constant([1], "float32", 0.3), lr)
    idx = fluid.layers.cast(step, "int64")
    by_index = fluid.layers.switch_case(idx, {1: lambda: step * 10.0, 3: lambda: step * 100.0},
                                        default=lambda: step * 0.0)
    by_case = fluid.layers.case([(fluid.layers.less_than(step, fluid.layers.fill_constant([1], "float32", 2.0)),
                                  lambda: step + 1000.0)], default=lambda: step - 1000.0)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
out = {}
for v in spec["values"]:
    got = exe.run(main, feed={"x": np.array([[v]], "float32")}, fetch_list=[lr, by_index, by_case])
    for name, g in zip(["lr", "by_index", "by_case"], got):
        out["%s_%g" % (name, v)] = np.array(g)
np.savez(spec["out"], **out)
'''


def test_switch_case_and_switch_case_pick_their_branch(tmp_path):
    ours = run_reference(sys.executable, SWITCH_SCRIPT, tmp_path, None, framework="placegroup", values=[1, 3, 7])
    want = {1: (0.1, 10.0, 1001.0), 3: (0.2, 300.0, -997.0), 7: (0.3, 0.0, -993.0)}
    for v, (lr, by_index, by_case) in want.items():
        np.testing.assert_allclose([ours[f"lr_{v}"][0], ours[f"by_index_{v}"][0], ours[f"by_case_{v}"][0]],
                                   [lr, by_index, by_case], rtol=1e-6)


@pytest.mark.paddle
def test_switch_case_and_switch_case_equal_fluid_1_8_5(tmp_path, fluid18_python):
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, SWITCH_SCRIPT, tmp_path / "fluid", None, framework="fluid",
                           values=[0, 1, 2, 3, 4.5, 7])
    ours = run_reference(sys.executable, SWITCH_SCRIPT, tmp_path, None, framework="placegroup", values=[0, 1, 2, 3, 4.5, 7])
    for key in theirs:
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


def _warmup_model():
    """A model whose learning rate is a schedule written by hand, as ERNIE's and BERT's Fluid
    scripts write linear warmup: a Switch over the step counter under _lr_schedule_guard."""
    x, y = fluid.layers.data("x", [4]), fluid.layers.data("y", [1])
    cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
    with fluid.default_main_program()._lr_schedule_guard():
        lr = fluid.layers.create_global_var(shape=[1], value=0.0, dtype="float32", persistable=True,
                                            name="scheduled_learning_rate")
        step = fluid.layers.learning_rate_scheduler._decay_step_counter()
        with fluid.layers.Switch() as switch:
            with switch.case(step < 3):
                fluid.layers.assign(0.1 * (step / 3), lr)
            with switch.default():
                fluid.layers.assign(fluid.layers.polynomial_decay(0.1, decay_steps=10, end_learning_rate=0.0), lr)
    fluid.optimizer.SGD(lr).minimize(cost)
    return [x, y], cost


def test_a_hand_written_lr_schedule_runs_with_the_optimizers_on_the_pservers():
    """Its ops (the Switch's conditional blocks among them) are lr_sched ops, which the
    transpiler places on the pservers with the optimizers, as Fluid places its lr-decay
    blocks; 2 trainers + 2 pservers equal one process, step by step."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        _warmup_model()
    blocks = [op for op in main.global_block().ops if op.type == "conditional_block"]
    assert len(blocks) == 2 and all(op.role == "lr_sched" for op in blocks)
    t = fluid.DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup, pservers="127.0.0.1:7100,127.0.0.1:7101", trainers=2)
    ps = t.get_program("127.0.0.1:7100", "pserver")
    note_transpiled_job(None)  # this test process plays no part in that job
    placed = [op for op in ps.global_block().ops if op.type == "conditional_block"]
    assert len(placed) == 2 and all(str(op.place).startswith("pserver") for op in placed)
    rng = np.random.default_rng(1)
    batches = [(rng.normal(size=(8, 4)).astype("float32"), rng.normal(size=(8, 1)).astype("float32")) for _ in range(6)]
    local = run_local(_warmup_model, batches, fetch=("scheduled_learning_rate",))
    cluster = run_cluster(_warmup_model, trainers=2, pservers=2, batches=batches)
    lrs = [float(f[0][0]) for f in local.fetched[0]]
    np.testing.assert_allclose(lrs, [0.0, 0.1 / 3, 0.2 / 3, 0.07, 0.06, 0.05], rtol=1e-6)
    np.testing.assert_allclose(np.mean([cluster.losses[0], cluster.losses[1]], axis=0), local.losses[0], rtol=1e-5)
    for name, value in local.params[0].items():
        np.testing.assert_allclose(cluster.params[0][name], value, rtol=1e-5, err_msg=name)


IFELSE_SCRIPT = HEAD + r'''
with fluid.program_guard(main, startup):
    x = fluid.layers.data("x", [3], dtype="float32")
    col = fluid.layers.slice(x, axes=[1], starts=[0], ends=[1])
    cond = fluid.layers.less_than(col, fluid.layers.fill_constant([1], "float32", 0.0))
    ie = fluid.layers.IfElse(cond)
    with ie.true_block():
        rows = ie.input(x)
        ie.output(fluid.layers.scale(rows, 2.0), fluid.layers.reduce_sum(rows, dim=1, keep_dim=True))
    with ie.false_block():
        rows = ie.input(x)
        ie.output(fluid.layers.scale(rows, 1.0, bias=-1.0), fluid.layers.reduce_max(rows, dim=1, keep_dim=True))
    out, side = ie()
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
got = {}
for k, xv in enumerate(spec["xs"]):
    o, s = exe.run(main, feed={"x": np.array(xv, "float32")}, fetch_list=[out, side])
    got["out%d" % k], got["side%d" % k] = np.array(o), np.array(s)
np.savez(spec["out"], **got)
'''
IFELSE_XS = [[[1, 2, 3], [-1, 5, 6], [2, 0, 1], [-3, 1, 1]], [[1, 2, 3], [2, 0, 1]], [[-1, -2, -3]]]


def test_ifelse_sends_each_row_through_its_block_and_merges_them_back(tmp_path):
    ours = run_reference(sys.executable, IFELSE_SCRIPT, tmp_path, None, framework="placegroup", xs=IFELSE_XS)
    for k, xv in enumerate(IFELSE_XS):
        x = np.array(xv, "float32")
        neg = x[:, :1] < 0
        np.testing.assert_array_equal(ours[f"out{k}"], np.where(neg, x * 2, x - 1))
        np.testing.assert_array_equal(ours[f"side{k}"], np.where(neg, x.sum(1, keepdims=True), x.max(1, keepdims=True)))


@pytest.mark.paddle
def test_ifelse_equals_fluid_1_8_5(tmp_path, fluid18_python):
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, IFELSE_SCRIPT, tmp_path / "fluid", None, framework="fluid", xs=IFELSE_XS)
    ours = run_reference(sys.executable, IFELSE_SCRIPT, tmp_path, None, framework="placegroup", xs=IFELSE_XS)
    for key in theirs:
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


PIECES_SCRIPT = HEAD + r'''
cf = fluid.layers.control_flow
with fluid.program_guard(main, startup):
    x = fluid.layers.data("x", [3], dtype="float32")
    mask = fluid.layers.less_than(fluid.layers.slice(x, axes=[1], starts=[0], ends=[1]),
                                  fluid.layers.fill_constant([1], "float32", 0.0))
    neg, pos = cf.split_lod_tensor(x, mask)
    merged = cf.merge_lod_tensor(neg * 10.0, pos, x, mask)
    i = fluid.layers.fill_constant([1], "int64", 0)
    n = fluid.layers.fill_constant([1], "int64", 3)
    arr = fluid.layers.create_array("float32")
    c = fluid.layers.less_than(i, n)
    loop = fluid.layers.While(c)
    with cf.WhileGuard(loop):
        fluid.layers.array_write(x * fluid.layers.cast(i + 1, "float32"), i, array=arr)
        fluid.layers.increment(i, in_place=True)
        fluid.layers.less_than(i, n, cond=c)
    joined, sizes = fluid.layers.tensor_array_to_tensor(arr, axis=1)
    stacked, ones = fluid.layers.tensor_array_to_tensor(arr, axis=0, use_stack=True)
    flag = fluid.layers.reduce_sum(x) > 0.0
    block = cf.ConditionalBlock([flag], is_scalar_condition=True)
    with cf.ConditionalBlockGuard(block):
        doubled = cf.copy_var_to_parent_block(x * 2.0, fluid.layer_helper.LayerHelper("pieces"))
    k = fluid.layers.cast(flag, "int32")
    outs = [fluid.default_main_program().global_block().create_var(name="sel%d" % j, shape=[-1, 3], dtype="float32")
            for j in range(2)]
    cf.select_output(x, outs, k)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
got = {}
for step, xv in enumerate(spec["xs"]):
    xv = np.array(xv, "float32")
    names = ["neg", "pos", "merged", "joined", "sizes", "stacked", "ones"]
    vals = exe.run(main, feed={"x": xv}, fetch_list=[neg, pos, merged, joined, sizes, stacked, ones])
    if xv.sum() > 0:
        names, vals = names + ["doubled", "sel"], vals + exe.run(main, feed={"x": xv}, fetch_list=[doubled, outs[1]])
    for name, v in zip(names, vals):  # Fluid fetches a split with no rows as None
        got["%s%d" % (name, step)] = np.zeros((0, 3), "float32") if v is None else np.array(v)
np.savez(spec["out"], **got)
'''


def test_fluid_pieces_split_merge_select_and_join_as_numpy_says(tmp_path):
    """split_lod_tensor, merge_lod_tensor, select_output, tensor_array_to_tensor, the guards and
    copy_var_to_parent_block, as fluid.layers.control_flow has them."""
    ours = run_reference(sys.executable, PIECES_SCRIPT, tmp_path, None, framework="placegroup", xs=IFELSE_XS)
    for k, xv in enumerate(IFELSE_XS):
        x = np.array(xv, "float32")
        neg = x[:, 0] < 0
        np.testing.assert_array_equal(ours[f"neg{k}"], x[neg])
        np.testing.assert_array_equal(ours[f"merged{k}"], np.where(neg[:, None], x * 10, x))
        np.testing.assert_array_equal(ours[f"joined{k}"], np.concatenate([x, 2 * x, 3 * x], axis=1))
        np.testing.assert_array_equal(ours[f"stacked{k}"], np.stack([x, 2 * x, 3 * x]))
        np.testing.assert_array_equal(ours[f"sizes{k}"], [3, 3, 3])
        np.testing.assert_array_equal(ours[f"ones{k}"], [len(x)] * 3)
        if x.sum() > 0:
            np.testing.assert_array_equal(ours[f"doubled{k}"], 2 * x)
            np.testing.assert_array_equal(ours[f"sel{k}"], x)


@pytest.mark.paddle
def test_fluid_pieces_equal_fluid_1_8_5(tmp_path, fluid18_python):
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, PIECES_SCRIPT, tmp_path / "fluid", None, framework="fluid", xs=IFELSE_XS)
    ours = run_reference(sys.executable, PIECES_SCRIPT, tmp_path, None, framework="placegroup", xs=IFELSE_XS)
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        assert ours[key].dtype == theirs[key].dtype, key
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)


def test_select_input_picks_the_input_its_mask_names():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        a = fluid.layers.fill_constant([2], "float32", 1.0)
        b = fluid.layers.fill_constant([2], "float32", 2.0)
        k = fluid.layers.data("k", [1], dtype="int32", append_batch_size=False)
        out = fluid.layers.control_flow.select_input([a, b], k)
        with pytest.raises(TypeError, match="mask must be an int32 Variable"):
            fluid.layers.control_flow.select_input([a], a)
    exe = fluid.Executor()
    exe.run(startup)
    for k, want in ((0, 1.0), (1, 2.0)):
        got, = exe.run(main, feed={"k": np.array([k], "int32")}, fetch_list=[out])
        np.testing.assert_array_equal(got, [want, want])
    with pytest.raises(OpError, match="Mask 2 is not an index of its 2 inputs"):
        exe.run(main, feed={"k": np.array([2], "int32")}, fetch_list=[out])
