"""Fluid 1.8.5's framework and helper names: data_feeder's checks and converters, framework's
dtype helpers and OpProtoHolder, layers.utils, layer_function_generator, the small modules
(annotations, log_helper, multiprocess_utils, default_scope_funcs, wrapped_decorator),
LayerHelperBase, fluid.executor's helpers, fluid.io's helpers, fluid.backward's calc_gradient,
ProgramStats and serialize_op_decs, distribute_lookup_table and fluid.op.

Expected values marked "Fluid 1.8.5" were printed by Fluid 1.8.5 itself on the same input.
"""
import collections
import inspect
import logging
import os

import numpy as np
import pytest

import placegroup as fluid
from placegroup import annotations, default_scope_funcs as dsf, distribute_lookup_table as dlt, log_helper
from placegroup.backward import ProgramStats, calc_gradient, serialize_op_decs
from placegroup.data_feeder import (BatchedTensorProvider, DataToLoDTensorConverter, check_dtype, check_type,
                                    check_variable_and_dtype, convert_dtype)
from placegroup.errors import ProgramError
from placegroup.executor import (FetchHandler, as_numpy, check_feed_shape_type, dimension_is_compatible_with,
                                 dtype_is_compatible_with, has_feed_operators, has_fetch_operators)
from placegroup.ir import framework, unique_name
from placegroup.layer_helper import LayerHelper
from placegroup.layer_helper_base import LayerHelperBase
from placegroup.layers import layer_function_generator as lfg, utils
from placegroup.layers.math_op_patch import monkey_patch_variable
from placegroup.multiprocess_utils import CleanupFuncRegistrar
from placegroup.op import Operator, OpDescCreationMethod, OperatorFactory, create_op_creation_method, is_str
from placegroup.values import LoDTensor
from placegroup.wrapped_decorator import signature_safe_contextmanager, wrap_decorator

CPU = fluid.CPUPlace()


def run(fetch, feed=None, startup=True):
    exe = fluid.Executor(CPU)
    if startup:
        exe.run(fluid.default_startup_program())
    return exe.run(feed=feed or {}, fetch_list=fetch)


# -- data_feeder --------------------------------------------------------------------------------

def test_convert_dtype_as_fluid():
    # Fluid 1.8.5: names and numpy types of its nine dtypes pass; Python's float and int and "float" do not
    for given, want in [("float32", "float32"), (np.float32, "float32"), (np.dtype("int64"), "int64"),
                        ("bool", "bool"), (bool, "bool"), (np.int8, "int8")]:
        assert convert_dtype(given) == want
    for bad in [float, int, "float", "uint16", np.uint16, np.complex64]:
        with pytest.raises(ValueError, match="dtype must be any of"):
            convert_dtype(bad)


def test_check_type_and_dtype_messages():
    with pytest.raises(TypeError, match=r"The data type of 'x' in fc must be \['float32'\], but received int64. extra"):
        check_dtype("int64", "x", ["float32"], "fc", "extra")  # Fluid 1.8.5's message
    with pytest.raises(TypeError, match=r"The type of 'x' in fc must be .*Variable.*, but received <class 'int'>"):
        check_type(3, "x", fluid.Variable, "fc")
    x = fluid.layers.data("x", shape=[2], dtype="int64")
    check_variable_and_dtype(x, "x", ["int64"], "emb")
    with pytest.raises(TypeError, match="received int64"):
        check_variable_and_dtype(x, "x", ["float32"], "fc")
    with pytest.warns(UserWarning, match="float16 in GPU"):
        check_dtype("float16", "x", ["float16"], "fc")


def test_converter_lod_and_flat():
    c = DataToLoDTensorConverter(CPU, 1, [-1, 2], "float32")
    c.feed([[1, 2], [3, 4]])
    c.feed([[5, 6]])
    assert c.data == [[1, 2], [3, 4], [5, 6]] and c.lod == [[2, 1]]  # Fluid 1.8.5
    t = c.done()
    np.testing.assert_array_equal(t.data, [[1, 2], [3, 4], [5, 6]])
    assert t.recursive_sequence_lengths() == [[2, 1]] and c.data == [] and c.lod == [[]]
    c = DataToLoDTensorConverter(CPU, 0, [-1, 3, 1], "int64")
    c.feed([1, 2, 3])
    c.feed([4, 5, 6])
    assert c.done().data.shape == (2, 3, 1)  # a stack of another rank is reshaped to the declared one
    c.feed([1, 2])
    with pytest.raises(ProgramError, match="do not fill"):
        c.done()


def test_batched_tensor_provider_as_fluid():
    y = fluid.layers.data(name="y", shape=[2], dtype="float32")

    def gen():
        for i in range(5):
            yield (np.array([i, i], "float32"),)

    def batches(drop_last):
        return [[t.data.tolist() for t in b] for b in BatchedTensorProvider([y], CPU, 2, gen, drop_last)()]

    # Fluid 1.8.5
    assert batches(False) == [[[[0.0, 0.0], [1.0, 1.0]]], [[[2.0, 2.0], [3.0, 3.0]]], [[[4.0, 4.0]]]]
    assert batches(True) == [[[[0.0, 0.0], [1.0, 1.0]]], [[[2.0, 2.0], [3.0, 3.0]]]]
    seq = fluid.layers.data(name="s", shape=[1], dtype="int64", lod_level=1)
    with pytest.raises(ValueError, match="lod_level must be 0"):
        BatchedTensorProvider([seq], CPU, 2, gen, True)


# -- framework ----------------------------------------------------------------------------------

def test_dtype_helpers_and_names():
    # Fluid 1.8.5: FP32, INT16 (for uint16), FP64 (float), INT64 (int), BOOL
    assert [framework.convert_np_dtype_to_dtype_(d) for d in ["float32", np.uint16, float, int, bool]] == \
        ["float32", "int16", "float64", "int64", "bool"]
    assert [framework.dtype_is_floating(d) for d in ["float32", np.uint16, float, int, bool]] == \
        [True, False, True, False, False]
    with pytest.raises(ValueError, match="Not supported numpy dtype"):
        framework.convert_np_dtype_to_dtype_(np.complex64)
    x = fluid.layers.data("x", shape=[1], dtype="int64")
    assert x.dtype == framework.convert_np_dtype_to_dtype_(np.int64)
    assert framework.grad_var_name("x") == "x@GRAD"
    assert framework.generate_control_dev_var_name().startswith("__control_var@")
    root = framework.NameScope()
    a, b = root.child("s1"), root.child("s1")
    assert (a.name(), b.name(), b.parent() is root, a.child("s2").name()) == ("s1", "s1_1", True, "s2")
    before = framework.switch_device("cpu")
    assert framework.switch_device(before) == "cpu"


def test_op_proto_holder():
    holder = framework.OpProtoHolder.instance()
    assert holder is framework.OpProtoHolder.instance()
    with pytest.raises(RuntimeError, match="instance()"):
        framework.OpProtoHolder()
    proto = holder.get_op_proto("dropout")
    assert [i.name for i in proto.inputs] == ["X"]
    assert [(o.name, o.intermediate) for o in proto.outputs] == [("Out", False), ("Mask", True)]
    assert {a.name: a.type for a in proto.attrs}["dropout_prob"] == "FLOAT"
    bn = holder.get_op_proto("batch_norm")  # in-place running statistics are not intermediate
    assert [o.name for o in bn.outputs if not o.intermediate] == ["Y", "MeanOut", "VarianceOut"]
    assert next(i for i in holder.get_op_proto("sum").inputs).duplicable
    assert holder.has_op_proto("mul") and not holder.has_op_proto("mull")
    with pytest.raises(ValueError, match='Operator "mull" has not been registered. Did you mean mul'):
        holder.get_op_proto("mull")
    from placegroup.ops.registry import registered_ops
    assert [p.type for p in framework.get_all_op_protos()] == registered_ops()


def test_wrap_decorator_keeps_signature():
    @signature_safe_contextmanager
    def guard(prefix: str = "x"):
        yield prefix * 2

    assert str(inspect.signature(guard)) == "(prefix: str = 'x')" and guard.__name__ == "guard"
    with guard("ab") as v:
        assert v == "abab"
    assert framework.wrap_decorator is wrap_decorator
    calls = []
    traced = wrap_decorator(lambda f: lambda *a, **k: calls.append(f.__name__) or f(*a, **k))

    @traced
    def add(a, b=1):
        return a + b

    assert add(2) == 3 and calls == ["add"] and list(inspect.signature(add).parameters) == ["a", "b"]


def test_generate_with_ignorable_key():
    with unique_name.guard():  # Fluid 1.8.5: fc.tmp_0 fc.tmp_1 fc.tmp_2
        assert [unique_name.generate_with_ignorable_key("fc.tmp"), unique_name.generate_with_ignorable_key("fc.tmp"),
                unique_name.generate("fc.tmp")] == ["fc.tmp_0", "fc.tmp_1", "fc.tmp_2"]


# -- layers.utils (every value from Fluid 1.8.5) -------------------------------------------------

def test_nest_utils_as_fluid():
    assert utils.convert_to_list(3, 2, "stride") == [3, 3] and utils.convert_to_list((1, 2), 2, "stride") == [1, 2]
    with pytest.raises(ValueError, match=r"The stride's length must be 2. Received: \(1,\)"):
        utils.convert_to_list((1,), 2, "stride")
    with pytest.raises(ValueError, match="including element a of type <class 'str'>"):
        utils.convert_to_list((1, "a"), 2, "stride")
    with pytest.raises(ValueError, match="must be list or tuple. Received: 3.5"):
        utils.convert_to_list(3.5, 2, "stride")
    nest = {"b": [1, (2, 3)], "a": 4}
    assert utils.flatten(nest) == [4, 1, 2, 3]
    assert utils.pack_sequence_as(nest, [9, 8, 7, 6]) == {"b": [8, (7, 6)], "a": 9}
    assert utils.map_structure(lambda a, b: a + b, [1, (2, 3)], [10, (20, 30)]) == [11, (22, 33)]
    Pair = collections.namedtuple("Pair", "h c")
    assert utils.map_structure(lambda v: v * 2, Pair(1, [2])) == Pair(2, [4])
    with pytest.raises(TypeError, match="same sequence type"):
        utils.assert_same_structure([1, (2, 3)], [1, [2, 3]])
    utils.assert_same_structure([1, (2, 3)], [1, [2, 3]], check_types=False)
    with pytest.raises(ValueError, match=r"First structure \(3 elements\)"):
        utils.assert_same_structure([1, (2, 3)], [1, 2])
    with pytest.raises(ValueError, match="Could not pack sequence"):
        utils.pack_sequence_as([1, 2], [1])
    assert (utils.hold_mutable_vars([1, 2]), utils.hold_mutable_vars([1, [2]])) == (False, True)
    held = [1, [2, {"a": 3}]]
    copied = utils.copy_mutable_vars(held)
    assert copied == held and copied[1] is not held[1]
    assert [utils.is_sequence(v) for v in ["ab", {}, (1,), np.zeros(2)]] == [False, True, True, False]


# -- layer_function_generator -------------------------------------------------------------------

def test_generated_layer_runs():
    reduce_sum = lfg.generate_layer_fn("reduce_sum")
    assert reduce_sum.__name__ == "reduce_sum" and "dim (INTS)" in reduce_sum.__doc__
    x = fluid.layers.data("x", shape=[3])
    s = reduce_sum(x, dim=[1], keep_dim=False, reduce_all=False)
    d = lfg.generate_layer_fn("dropout")(x=x, dropout_prob=0.0, is_test=True)  # Mask made as a temp
    r = lfg.generate_layer_fn("scale")(x, scale=2.0, act="relu")
    t = lfg.generate_activation_fn("tanh")(x)
    xv = np.array([[1.0, -2.0, 3.0], [0.5, 0.5, -0.5]], "float32")
    got = run([s, d, r, t], {"x": xv})
    for g, want in zip(got, [xv.sum(1), xv, np.maximum(2 * xv, 0), np.tanh(xv)]):
        np.testing.assert_allclose(g, want, rtol=1e-6)


def test_generated_layer_refusals():
    with pytest.raises(ValueError, match="Only one non intermediate output"):
        lfg.generate_layer_fn("batch_norm")
    with pytest.raises(ValueError, match="has not been registered"):
        lfg.generate_layer_fn("no_such_op")
    ids = fluid.layers.data("ids", shape=[1], dtype="int64")
    with pytest.raises(TypeError, match="The data type of 'x' in tanh"):
        lfg.generate_activation_fn("tanh")(ids)
    lfg.generate_activation_fn("abs")(ids)  # abs, exp and square take ints, as in Fluid
    with pytest.raises(ValueError, match="input of mul must be variable"):
        lfg.generate_layer_fn("mul")(np.ones(2), np.ones(2))


def test_doc_decorators():
    assert lfg.escape_math("a $x$ and $$y$$") == "a :math:`x` and $$y$$"

    @lfg.templatedoc(op_type="scale")
    def my_scale(x):
        """${comment} X: ${x_comment} (${x_type}); scale: ${scale_type}; out: ${out_comment}."""

    assert "X: The input X of scale (Variable); scale: FLOAT; out: The output Out of scale." in my_scale.__doc__

    @lfg.autodoc(comment="more")
    def mean(x):
        pass

    assert mean.__doc__.endswith("more") and "Args:" in mean.__doc__

    @lfg.deprecated
    def old(v):
        return v + 1

    with pytest.warns(DeprecationWarning, match="Call to deprecated function old."):
        assert old(1) == 2


def test_annotations_deprecated(capsys):
    @annotations.deprecated(since="0.15.0", instead="ParallelExecutor")
    def get_devices(n):
        """The devices."""
        return n

    assert get_devices(3) == 3
    msg = "API get_devices is deprecated since 0.15.0. Please use ParallelExecutor instead."
    assert msg in capsys.readouterr().err and get_devices.__doc__.endswith(msg)


def test_get_logger_has_one_handler():
    logger = log_helper.get_logger("pg_test_logger", logging.INFO, fmt="%(message)s")
    logger = log_helper.get_logger("pg_test_logger", logging.WARNING)
    assert len(logger.handlers) == 1 and not logger.propagate and logger.level == logging.WARNING
    assert fluid.io.get_logger is log_helper.get_logger


def test_cleanup_registrar():
    def cleanup():
        pass

    CleanupFuncRegistrar.register(cleanup)
    assert cleanup in CleanupFuncRegistrar._registered_func_set
    with pytest.raises(TypeError, match="is not callable"):
        CleanupFuncRegistrar.register(3)


def test_default_scope_funcs_as_fluid_test():
    assert dsf.get_cur_scope() is not None and dsf.find_var("test") is None
    assert dsf.var("var_a") is not None and dsf.get_cur_scope().find_var("var_a") is not None
    dsf.enter_local_scope()
    assert dsf.get_cur_scope().find_var("var_a") is not None  # found in the parent
    dsf.leave_local_scope()
    seen = []

    def body():
        dsf.var("i").get_tensor().set(np.arange(3), CPU)
        seen.append(np.array(dsf.find_var("i").get_tensor()).tolist())

    for _ in range(2):
        dsf.scoped_function(body)
    assert seen == [[0, 1, 2]] * 2 and dsf.find_var("i") is None
    assert isinstance(dsf.get_cur_scope(), fluid.core.Scope)


# -- LayerHelperBase ----------------------------------------------------------------------------

def test_layer_helper_base():
    helper = LayerHelper("fc")
    assert isinstance(helper, LayerHelperBase) and (helper.name, helper.layer_type) == ("fc_0", "fc")
    v, new = helper.create_or_get_global_variable("counter", shape=[1], dtype="int64")
    again, new2 = helper.create_or_get_global_variable("counter", shape=[1], dtype="int64")
    assert new and not new2 and again is v and v.block is fluid.default_main_program().global_block()
    assert helper.to_variable(v) is v
    with pytest.raises(TypeError, match="dygraph"):
        helper.to_variable(np.ones(2))
    w = helper.create_parameter(fluid.ParamAttr(name="w"), [2, 3], "float32")
    assert w.name == "w" and fluid.default_startup_program().global_block().has_var("w")


# -- fluid.executor -----------------------------------------------------------------------------

def test_as_numpy():
    scope = fluid.Scope()
    with fluid.scope_guard(scope):
        fluid.global_scope().var("data").get_tensor().set(np.ones((2, 2)), CPU)
    np.testing.assert_array_equal(as_numpy(scope.find_var("data").get_tensor()), np.ones((2, 2)))
    assert as_numpy(LoDTensor()) is None and as_numpy([]) == []
    with pytest.raises(RuntimeError, match="hold LoD information"):
        as_numpy(LoDTensor.from_lengths(np.ones((2, 2)), [[1, 1]]))
    arr = fluid.core.LoDTensorArray()
    arr.append(LoDTensor(np.zeros(2)))
    assert [a.tolist() for a in as_numpy(arr)] == [[0.0, 0.0]]


def test_feed_checks_as_fluid():
    assert dimension_is_compatible_with([-1, 3], [8, 3]) and not dimension_is_compatible_with([2, 3], [8, 3])
    assert dimension_is_compatible_with([None, 3], [8, -1]) and not dimension_is_compatible_with([3], [3, 1])
    assert dtype_is_compatible_with("float32", np.float32) and not dtype_is_compatible_with("int64", "int32")
    x = fluid.data(name="x", shape=[-1, 3, 2])
    # Fluid 1.8.5: these pass; [4, 3, 2, 1], [4, 2, 2], [3, 2] and [4, 2, 2] over 2 places do not
    for shape, places in [((4, 3, 2), 1), ((4, 3, 2), 2), ((4, 3), 1), ((5, 3, 2), 2)]:
        assert check_feed_shape_type(x, LoDTensor(np.zeros(shape, "float32")), places)
    for shape, places, seen in [((4, 3, 2, 1), 1, "[4, 3, 2, 1]"), ((4, 2, 2), 1, "[4, 2, 2]"),
                                ((3, 2), 1, "[3, 2]"), ((4, 2, 2), 2, "[2, 2, 2]")]:
        with pytest.raises(ValueError, match=rf"should have dimensions = 3, shape = \(-1, 3, 2\), but received "
                                             rf"fed shape {seen.replace('[', '.').replace(']', '.')} on each device"):
            check_feed_shape_type(x, np.zeros(shape, "float32"), places)
    with pytest.raises(ValueError, match="must be 'float32', but received 'int64'"):
        check_feed_shape_type(x, np.zeros((4, 3, 2), "int64"))
    y = fluid.layers.data(name="y", shape=[3, 2])
    assert check_feed_shape_type(y, np.zeros((4, 7), "int64"))  # fluid.layers.data: no check (Fluid 1.8.5)


def test_feed_fetch_targets_and_inference_model(tmp_path):
    x = fluid.layers.data("x", shape=[3])
    y = fluid.layers.fc(x, 2)
    z = fluid.layers.scale(y, scale=3.0)
    block = fluid.default_main_program().global_block()
    assert not has_feed_operators(block, {"x": 1}, "feed") and not has_fetch_operators(block, [y], "fetch")
    exe = fluid.Executor(CPU)
    exe.run(fluid.default_startup_program())
    program = fluid.default_main_program().clone(for_test=True)
    fluid.io.prepend_feed_ops(program, ["x"])
    fluid.io.append_fetch_ops(program, [y.name, z.name])
    b = program.global_block()
    assert has_feed_operators(b, {"x": 1}, "feed") and has_fetch_operators(b, [y, z.name], "fetch")
    with pytest.raises(ProgramError, match="'feed_targets' does not have x"):
        has_feed_operators(b, {"w": 1}, "feed")
    with pytest.raises(ProgramError, match="do not match"):
        has_feed_operators(b, {"x": 1, "w": 2}, "feed")
    with pytest.raises(ProgramError, match="fetch target 0"):
        has_fetch_operators(b, [z, y], "fetch")
    with pytest.raises(ProgramError, match="not a var"):
        fluid.io.prepend_feed_ops(program, ["nope"])
    fluid.io.save_program(program, os.path.join(tmp_path, "__model__"))
    fluid.io.save_persistables(exe, str(tmp_path), program)
    prog, feeds, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
    assert feeds == ["x"] and [v.name for v in fetches] == [y.name, z.name]
    xv = np.ones((2, 3), "float32")
    a, c = exe.run(prog, feed={"x": xv}, fetch_list=fetches)
    np.testing.assert_allclose(c, 3 * a, rtol=1e-6)


def test_fetch_handler(capsys):
    with pytest.raises(ValueError, match="var_dict"):
        FetchHandler()
    h = FetchHandler({"auc": "auc_0"}, period_secs=5)
    h.handler({"auc": np.array([0.5, 0.7]), "none": None})
    assert capsys.readouterr().out == "auc[0]: 0.5 \n" and h.period_secs == 5


# -- fluid.io -----------------------------------------------------------------------------------

def test_parameter_values_and_optimizer_state():
    x = fluid.layers.data("x", shape=[3])
    loss = fluid.layers.mean(fluid.layers.fc(x, 2))
    fluid.optimizer.Adam(0.1).minimize(loss)
    exe = fluid.Executor(CPU)
    exe.run(fluid.default_startup_program())
    w = fluid.default_main_program().global_block().var("fc_0.w_0")
    want = np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor())
    np.testing.assert_array_equal(fluid.io.get_parameter_value(w, exe), want)
    np.testing.assert_array_equal(fluid.io.get_parameter_value_by_name("fc_0.w_0", exe), want)
    with pytest.raises(TypeError, match="not parameter"):
        fluid.io.get_parameter_value(x, exe)
    owned = {v.name for v in fluid.default_main_program().list_vars() if fluid.io.is_belong_to_optimizer(v)}
    assert "fc_0.w_0_moment1_0" in owned and "learning_rate_0" in owned
    assert not owned & {"x", "fc_0.w_0", "fc_0.b_0"}


# -- fluid.backward -----------------------------------------------------------------------------

def test_calc_gradient_numbers():
    x = fluid.layers.data("x", shape=[3], stop_gradient=False)
    y = fluid.layers.scale(x, scale=2.0, bias=1.0)
    z = fluid.layers.reduce_sum(fluid.layers.square(y))
    dx = calc_gradient(z, x)
    assert isinstance(dx, fluid.Variable)
    both = calc_gradient([z], [x, y])
    assert isinstance(both, list) and len(both) == 2
    xv = np.array([[0.5, -1.0, 2.0]], "float32")
    got, = run([dx], {"x": xv}, startup=False)
    np.testing.assert_allclose(got, 4 * (2 * xv + 1), rtol=1e-6)  # d/dx sum((2x+1)^2)
    g = fluid.layers.data("g", shape=[4])
    with pytest.raises(ValueError, match="shapes of target and grad are different"):
        calc_gradient([y], [x], target_gradients=[g])


def test_serialize_op_decs_format():
    x = fluid.layers.data("x", shape=[3])
    fluid.layers.scale(x, scale=2.0, bias=1.0)
    text = serialize_op_decs(fluid.default_main_program().global_block().ops[0])
    # Fluid 1.8.5's text for this op, less the op_role/op_namescope/op_callstack/op_device attrs it adds
    assert text.startswith('inputs {\n  parameter: "ScaleTensor"\n}\ninputs {\n  parameter: "X"\n  arguments: "x"\n}\n'
                           'outputs {\n  parameter: "Out"\n  arguments: "scale_0.tmp_0"\n}\ntype: "scale"\n')
    for attr in ['attrs {\n  name: "bias"\n  type: FLOAT\n  f: 1.0\n}',
                 'attrs {\n  name: "bias_after_scale"\n  type: BOOLEAN\n  b: true\n}',
                 'attrs {\n  name: "scale"\n  type: FLOAT\n  f: 2.0\n}']:
        assert attr in text
    r = fluid.layers.reshape(x, [3, -1])
    text = serialize_op_decs(fluid.default_main_program().global_block().ops[-1])
    assert 'name: "shape"\n  type: INTS\n  ints: 3\n  ints: -1\n' in text and r.name in text


def test_program_stats():
    x = fluid.layers.data("x", shape=[3])
    a = fluid.layers.scale(x, scale=2.0)
    b = fluid.layers.square(a)
    c = fluid.layers.elementwise_add(b, a)
    block = fluid.default_main_program().global_block()
    stats = ProgramStats(block, block.ops)
    stats.build_stats()
    assert stats.get_input_nodes() == ["x"] and stats.get_reserved_vars() == []
    assert stats.op_deps == {0: {"in_ops": [], "out_ops": [1, 2]}, 1: {"in_ops": [0], "out_ops": [2]},
                             2: {"in_ops": [1, 0], "out_ops": []}}
    assert stats.sort_checkpoints([c.name, "nope", b.name, "x"]) == ["x", b.name, c.name]
    assert stats.is_subgraph(["x"], [c.name]) == (True, 0, 2)
    assert stats.is_subgraph([c.name], ["x"])[0] is False
    assert sorted(stats.get_out_of_subgraph_vars(1, 2)) == [a.name, b.name]
    stats.modify_forward_desc_for_recompute()
    assert len(block.ops) == 3


# -- distribute_lookup_table --------------------------------------------------------------------

def test_find_distributed_lookup_table():
    ids = fluid.layers.data("ids", shape=[1], dtype="int64")
    ids2 = fluid.layers.data("ids2", shape=[1], dtype="int64")
    program = fluid.default_main_program()
    fluid.layers.embedding(ids, size=[10, 4])
    assert dlt.find_distributed_lookup_table(program) is None
    e1 = fluid.layers.embedding(ids, size=[10, 4], is_distributed=True, param_attr=fluid.ParamAttr(name="tbl"))
    e2 = fluid.layers.embedding(ids2, size=[10, 4], is_distributed=True, param_attr=fluid.ParamAttr(name="tbl"))
    assert dlt.find_distributed_lookup_table(program) == "tbl"
    assert dlt.find_distributed_lookup_table_inputs(program, "tbl") == [ids, ids2]
    assert dlt.find_distributed_lookup_table_outputs(program, "tbl") == [e1, e2]
    fluid.layers.embedding(ids, size=[10, 4], is_distributed=True, param_attr=fluid.ParamAttr(name="other"))
    with pytest.raises(RuntimeError, match="only one table"):
        dlt.find_distributed_lookup_table(program)


# -- fluid.op -----------------------------------------------------------------------------------

def test_operator_runs_on_scope():
    scope = fluid.core.Scope()
    scope.var("X").get_tensor().set(np.arange(6, dtype="float32").reshape(2, 3), CPU)
    op = Operator("scale", X="X", Out="Out", scale=2.0)
    assert op.type() == "scale" and op.input_vars() == ["X"] and op.output_vars() == ["Out"]
    op.run(scope, CPU)
    np.testing.assert_array_equal(np.array(scope.find_var("Out").get_tensor()),
                                  2 * np.arange(6, dtype="float32").reshape(2, 3))
    for name, value in [("Param", np.full((4, 2), 5.0)), ("Grad", np.ones((4, 2))), ("LearningRate", [2.0])]:
        scope.var(name).get_tensor().set(np.asarray(value, "float32"), CPU)
    Operator("sgd", Param="Param", Grad="Grad", ParamOut="Param", LearningRate="LearningRate").run(scope, CPU)
    np.testing.assert_array_equal(np.array(scope.find_var("Param").get_tensor()), np.full((4, 2), 3.0))
    Operator(type="sum", X=["X", "Out"], Out="S").run(scope, CPU)
    np.testing.assert_array_equal(np.array(scope.find_var("S").get_tensor()),
                                  3 * np.arange(6, dtype="float32").reshape(2, 3))


def test_operator_factory_errors_and_info():
    with pytest.raises(ValueError, match="Output Out expects only one output, but 2 are given"):
        Operator("sum", X=["a", "b"], Out=["c", "d"])
    with pytest.raises(ValueError, match="The operator: nope is not registered"):
        Operator("nope")
    with pytest.raises(ValueError, match="keyword arguments"):
        Operator("scale", "X")
    with pytest.raises(ProgramError, match="input var 'zz' has no value"):
        Operator("scale", X="zz", Out="o").run(fluid.core.Scope(), CPU)
    factory = OperatorFactory()
    assert factory.get_op_input_names("mul") == ["X", "Y"] and factory.get_op_outputs("sum") == [("Out", False)]
    assert "scale" in factory.get_op_attr_names("scale") and "sgd" in factory.types()
    proto = framework.OpProtoHolder.instance().get_op_proto("scale")
    info = create_op_creation_method(proto)
    assert info.name == "scale" and info.inputs == [("X", False), ("ScaleTensor", False)]
    spec = OpDescCreationMethod(proto)(X="a", Out="b", scale=np.float32(3.0), bias=None)
    assert (spec.type, dict(spec.inputs), dict(spec.attrs)) == ("scale", {"X": ["a"]}, {"scale": 3.0})
    with pytest.raises(TypeError, match="OpProto"):
        OpDescCreationMethod("scale")
    assert is_str("a") and not is_str(b"a")


def test_math_op_patch_is_idempotent():
    monkey_patch_variable()
    monkey_patch_variable()
    x = fluid.layers.data("x", shape=[2])
    got, = run([x * 2 + 1], {"x": np.array([[1.0, 2.0]], "float32")}, startup=False)
    np.testing.assert_array_equal(got, [[3.0, 5.0]])
