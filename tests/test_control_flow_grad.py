"""Gradients through loops and branches (NOTE(block-grad) in placegroup/model/backward_blocks.py,
NOTE(step-records) in executor/blocks.py): ``while_grad`` and ``conditional_block_grad``, the
tensor-array ops' gradients, ``select_output`` and IfElse's split and merge.

Each gradient equals float64 central differences. Models trained with them give Fluid 1.8.5's
per-step losses and trained parameters, and examples/control_flow.py's While RNN and
IfElse model train as 2 trainers + 2 pservers equal to one process.
"""
import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

import placegroup as fluid
from placegroup.backward import append_backward
from tests.inproc import run_cluster, run_local
from tests.numeric import central_differences
from tests.paddle_ref.reference import SCRIPT_HEAD, run_reference

L = fluid.layers
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "control_flow.py"


def _example():
    spec = importlib.util.spec_from_file_location("control_flow_example", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# -- gradients against central differences --------------------------------------------------

def _array_loop(x):
    """Fluid's own While test, with a product: mem[i+1] = d[i] + mem[i] * d[i] over an array."""
    data = L.array_write(L.scale(x, 1.0), L.fill_constant([1], "int64", 0))
    L.array_write(L.scale(x, 2.0), L.fill_constant([1], "int64", 1), array=data)
    L.array_write(L.scale(x, 3.0), L.fill_constant([1], "int64", 2), array=data)
    i = L.zeros([1], "int64")
    n = L.fill_constant([1], "int64", 3)
    mem = L.array_write(L.fill_constant([2, 3], "float64", 0.5), i)
    cond = L.less_than(i, n)
    loop = L.While(cond)
    with loop.block():
        d, prev = L.array_read(data, i), L.array_read(mem, i)
        res = L.sums([d, L.elementwise_mul(prev, d)])
        L.increment(i, in_place=True)
        L.array_write(res, i, array=mem)
        L.less_than(i, n, cond=cond)
    return L.mean(L.array_read(mem, n))


def _loop_var(x):
    """while_loop with a loop var the body reads, through a parameter created in the body."""
    i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 3)
    h = L.scale(x, 0.5)

    def body(i, h):
        return [L.increment(i), L.tanh(L.fc(h, 3, param_attr=fluid.ParamAttr(name="w"), bias_attr=False) + x)]

    _, out = L.while_loop(lambda i, h: L.less_than(i, n), body, [i, h])
    return L.mean(out)


def _cond(x, shift):
    pred = L.less_than(L.reduce_sum(x), L.fill_constant([1], "float64", shift))
    out = L.cond(pred, lambda: L.tanh(x) * 2.0, lambda: L.exp(x) * L.fc(x, 3, param_attr=fluid.ParamAttr(name="w")))
    return L.mean(L.elementwise_mul(out, x))


def _ifelse(x):
    ie = L.IfElse(L.less_than(L.slice(x, axes=[1], starts=[0], ends=[1]), L.fill_constant([1], "float64", 0.5)))
    with ie.true_block():
        ie.output(L.tanh(L.fc(ie.input(x), 3, param_attr=fluid.ParamAttr(name="w"))))
    with ie.false_block():
        ie.output(L.exp(ie.input(x)))
    out, = ie()
    return L.mean(L.elementwise_mul(out, x))


def _cond_in_loop(x):
    """A cond in a While body, on the loop's counter, summing into a loop var."""
    i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 4)
    acc = L.scale(x, 0.0)
    two, one = L.fill_constant([1], "int64", 2), L.fill_constant([1], "int64", 1)

    def body(i, acc):
        odd = L.equal(L.elementwise_mod(i, two), one)
        step = L.cond(odd, lambda: L.sin(acc + x), lambda: L.fc(acc + x, 3, param_attr=fluid.ParamAttr(name="w")))
        return [L.increment(i), step]

    _, out = L.while_loop(lambda i, acc: L.less_than(i, n), body, [i, acc])
    return L.mean(out)


def _array_to_tensor(x):
    """A loop's states joined by tensor_array_to_tensor, concatenated and stacked."""
    i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 3)
    states = L.create_array("float64")
    h = L.scale(x, 1.0)
    cond = L.less_than(i, n)
    loop = L.While(cond)
    with loop.block():
        L.assign(L.tanh(L.fc(h, 3, param_attr=fluid.ParamAttr(name="w"), bias_attr=False)), h)
        L.array_write(h, i, array=states)
        L.increment(i, in_place=True)
        L.less_than(i, n, cond=cond)
    joined, _ = L.tensor_array_to_tensor(states, axis=1)
    stacked, _ = L.tensor_array_to_tensor(states, axis=0, use_stack=True)
    return L.mean(L.elementwise_mul(joined, L.concat([x, x * 2.0, x * 3.0], axis=1))) + L.reduce_sum(stacked[2])


MODELS = {"array_loop": _array_loop, "array_to_tensor": _array_to_tensor, "loop_var": _loop_var, "cond_true": lambda x: _cond(x, 100.0),
          "cond_false": lambda x: _cond(x, -100.0), "ifelse": _ifelse, "cond_in_loop": _cond_in_loop}


def _gradient_program(model):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = L.data("x", [2, 3], dtype="float64", append_batch_size=False)
        x.stop_gradient = False
        loss = model(x)
        for p in main.global_block().all_parameters():
            p.dtype = "float64"
        append_backward(loss)
    return main, startup, loss


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_gradients_through_blocks_equal_central_differences(kind):
    main, startup, loss = _gradient_program(MODELS[kind])
    scope = fluid.Scope()
    exe = fluid.Executor()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(1)
    xv = rng.uniform(-1, 1, (2, 3))
    params = {p.name: rng.uniform(-0.5, 0.5, p.shape) for p in main.global_block().all_parameters()}
    for name, value in params.items():
        scope.find_var(name).get_tensor().set(value, fluid.CPUPlace())
    names = ["x", *params]
    got = exe.run(main, feed={"x": xv}, fetch_list=[loss] + [n + "@GRAD" for n in names], scope=scope)

    def f(which, value):
        feed = {"x": value if which == "x" else xv}
        if which != "x":
            scope.find_var(which).get_tensor().set(value, fluid.CPUPlace())
        out = exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0][0]
        if which != "x":
            scope.find_var(which).get_tensor().set(params[which], fluid.CPUPlace())
        return out

    for name, grad in zip(names, got[1:]):
        base = xv if name == "x" else params[name]
        numeric = central_differences(lambda v: f(name, v), base)
        np.testing.assert_allclose(grad, numeric, rtol=1e-6, atol=1e-9, err_msg=f"{kind}: {name}@GRAD")


def test_the_gradient_blocks_show_in_the_program():
    main, _, _ = _gradient_program(_array_loop)
    text = str(main)
    assert "while_grad(" in text and "block 2 parent=1" in text
    kept = [op for op in main.block(1).ops if op.type == "assign"]  # the counter kept before increment
    assert len(kept) == 1 and kept[0].outputs["Out"][0].endswith("@PRE@0")
    main.verify()
    again = fluid.Program.from_bytes(main.to_bytes())
    assert str(again) == text


# -- training, against Fluid 1.8.5 ----------------------------------------------------------

TRAIN = r'''
import importlib.util, json, sys
import numpy as np
spec = json.loads(sys.argv[1])
if spec["framework"] == "placegroup":
    import placegroup as fluid
else:
    import paddle.fluid as fluid
    sys.modules["placegroup"] = fluid  # the example is plain Fluid 1.x code
loader = importlib.util.spec_from_file_location("example", spec["example"])
example = importlib.util.module_from_spec(loader)
loader.loader.exec_module(example)
L = fluid.layers


def cond_model(x, y):
    h = L.fc(x, 8, act="tanh", param_attr=fluid.ParamAttr(name="in_w"), bias_attr=fluid.ParamAttr(name="in_b"))
    pred = L.less_than(L.reduce_mean(x), L.fill_constant([1], "float32", 0.0))
    out = L.cond(pred, lambda: L.fc(h, 1, param_attr=fluid.ParamAttr(name="a_w"), bias_attr=False),
                 lambda: L.fc(L.square(h), 1, param_attr=fluid.ParamAttr(name="b_w"), bias_attr=False))
    return L.mean(L.square_error_cost(out, y))


main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    if spec["model"] == "cond":
        x, y = L.data("x", [example.T * example.D]), L.data("y", [1])
        loss = cond_model(x, y)
        fluid.optimizer.SGD(0.1).minimize(loss)
    else:
        (x, y), loss = example.build(spec["model"])
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
scope = fluid.global_scope()
rng = np.random.RandomState(7)
params = sorted(p.name for p in main.global_block().all_parameters())
for name in params:
    t = scope.find_var(name).get_tensor()
    t.set(rng.uniform(-0.5, 0.5, np.array(t).shape).astype("float32"), fluid.CPUPlace())
out = {}
for step, (xv, yv) in enumerate(example.batches("rnn" if spec["model"] == "cond" else spec["model"], 5, 16)):
    out["loss%d" % step], = exe.run(main, feed={"x": xv, "y": yv}, fetch_list=[loss])
for name in params:
    out["p_" + name] = np.array(scope.find_var(name).get_tensor())
np.savez(spec["out"], **out)
'''


@pytest.mark.paddle
@pytest.mark.parametrize("model", ["rnn", "ifelse", "cond"])
def test_training_through_blocks_equals_fluid_1_8_5(tmp_path, fluid18_python, model):
    """The While RNN over tensor arrays, the IfElse model and a cond: Fluid 1.8.5 and placegroup,
    from the same initial values, give the same losses and trained parameters."""
    (tmp_path / "fluid").mkdir()
    theirs = run_reference(fluid18_python, TRAIN, tmp_path / "fluid", None, framework="fluid", model=model,
                           example=str(EXAMPLE))
    ours = run_reference(sys.executable, TRAIN, tmp_path, None, framework="placegroup", model=model,
                         example=str(EXAMPLE))
    assert sorted(ours) == sorted(theirs)
    for key in theirs:
        np.testing.assert_allclose(ours[key], theirs[key], rtol=1e-4, atol=1e-6, err_msg=key)


LOOP_VAR = SCRIPT_HEAD + r'''
L = fluid.layers
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    x = fluid.data("x", [2, 3], "float32")
    x.stop_gradient = False
    i, n = L.fill_constant([1], "int64", 0), L.fill_constant([1], "int64", 3)
    h = L.fill_constant([2, 3], "float32", 0.5)
    h.stop_gradient = False
    _, out = L.while_loop(lambda i, h: L.less_than(i, n),
                          lambda i, h: [L.increment(i), L.tanh(L.elementwise_mul(h, x) + x)], [i, h])
    loss = L.mean(out)
    fluid.backward.append_backward(loss)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
g, = exe.run(main, feed={"x": np.array(spec["x"], "float32")}, fetch_list=[x.name + "@GRAD"])
np.savez(spec["out"], grad=np.array(g))
'''


LOOP_X = np.array([[0.2, -0.4, 0.9], [0.5, 0.1, -0.3]])


def _loop_var_numeric() -> np.ndarray:
    def f(x):
        h = np.full((2, 3), 0.5)
        for _ in range(3):
            h = np.tanh(h * x + x)
        return h.mean()

    return central_differences(f, LOOP_X)


def test_a_loop_var_the_body_reads_differentiates_at_the_value_it_read(tmp_path):
    """h <- tanh(h * x + x), three times: the gradient equals central differences."""
    ours = run_reference(sys.executable, LOOP_VAR, tmp_path, None, framework="placegroup", x=LOOP_X.tolist())
    np.testing.assert_allclose(ours["grad"], _loop_var_numeric(), rtol=1e-4)


@pytest.mark.paddle
def test_fluid_1_8_5_differentiates_a_loop_var_at_its_last_value(tmp_path, fluid18_python):
    """Where placegroup departs from Fluid 1.8.5 (docs/control_flow.md): Fluid's gradient of the
    same loop is off by a quarter, as its grad ops read h's value after the loop."""
    theirs = run_reference(fluid18_python, LOOP_VAR, tmp_path, None, framework="fluid", x=LOOP_X.tolist())["grad"]
    numeric = _loop_var_numeric()
    assert np.abs(theirs - numeric).max() > 0.1 * np.abs(numeric).max()


# -- across processes -----------------------------------------------------------------------

@pytest.mark.parametrize("model", ["rnn", "ifelse"])
def test_the_examples_train_as_2_trainers_and_2_pservers_equal_to_one_process(model):
    example = _example()
    batches = example.batches(model, 4, 16)

    def build():
        return example.build(model)

    local = run_local(build, batches)
    cluster = run_cluster(build, trainers=2, pservers=2, batches=batches)
    np.testing.assert_allclose(np.mean([cluster.losses[0], cluster.losses[1]], axis=0), local.losses[0], rtol=1e-5)
    for name, value in local.params[0].items():
        np.testing.assert_allclose(cluster.params[0][name], value, rtol=1e-5, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("model", ["rnn", "ifelse"])
def test_the_examples_train_over_two_places_as_on_one(model):
    """CompiledProgram.with_data_parallel writes the loop, its gradient block and the branches
    out per place (NOTE(data-parallel))."""
    example = _example()
    batches = example.batches(model, 4, 16)
    one = run_local(lambda: example.build(model), batches)
    two = run_local(lambda: example.build(model), batches, places=2)
    for name, value in one.params[0].items():
        np.testing.assert_allclose(two.params[0][name], value, rtol=1e-5, atol=1e-7, err_msg=name)


def test_an_inference_model_of_a_trained_loop_keeps_the_loop_not_its_gradient(tmp_path):
    example = _example()
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        example.build("rnn")
    pred = next(op for op in main.global_block().ops if op.type == "elementwise_add"
                and "out_b" in op.input_arg_names).output_arg_names[0]
    exe = fluid.Executor()
    exe.run(startup)
    x, y = example.batches("rnn", 1, 8)[0]
    want, = exe.run(main.clone(for_test=True), feed={"x": x, "y": y}, fetch_list=[pred])
    fluid.io.save_inference_model(str(tmp_path), ["x"], [main.global_block().var(pred)], exe, main_program=main)
    served, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert len(served.blocks) == 2 and [op.type for op in served.global_block().ops].count("while") == 1
    got, = exe.run(served, feed={"x": x}, fetch_list=fetches)
    np.testing.assert_array_equal(got, want)


# -- select_output ---------------------------------------------------------------------------

def test_select_output_writes_only_the_output_its_mask_names():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = L.data("x", [2], dtype="float32", append_batch_size=False)
        k = L.data("k", [1], dtype="int32", append_batch_size=False)
        block = main.global_block()
        outs = [block.create_var(f"out{j}", shape=[2], dtype="float32") for j in range(3)]
        block.append_op("select_output", {"X": [x], "Mask": [k]}, {"Out": outs})
    exe = fluid.Executor()
    xv = np.array([1.0, 2.0], "float32")
    for j in range(3):
        got, = exe.run(main, feed={"x": xv, "k": np.array([j], "int32")}, fetch_list=[outs[j]])
        np.testing.assert_array_equal(got, xv)
    with pytest.raises(fluid.errors.OpError, match="Mask -1 is negative"):
        exe.run(main, feed={"x": xv, "k": np.array([-1], "int32")}, fetch_list=[outs[0]])
