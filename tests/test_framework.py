"""The Program IR: names, guards, clone, text form and the verifier."""
import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.ir.place_group import PlaceGroup


def _fit_a_line():
    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1])
    pred = fluid.layers.fc(input=x, size=1)
    cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    return x, y, pred, cost


def test_fluid_names_and_shapes(fresh_programs):
    main, startup = fresh_programs
    x, y, pred, cost = _fit_a_line()
    assert x.shape == (-1, 13) and x.is_data and x.stop_gradient
    names = set(main.global_block().vars)
    assert {"fc_0.w_0", "fc_0.b_0", "fc_0.tmp_0", "fc_0.tmp_1"} <= names
    w = main.global_block().var("fc_0.w_0")
    assert w.is_parameter and w.persistable and w.shape == (13, 1)
    assert pred.shape == (-1, 1) and cost.shape == (1,)
    # the startup program initializes exactly the parameters
    assert [op.type for op in startup.global_block().ops] == ["uniform_random", "fill_constant"]


def test_default_programs_and_guard():
    outer = fluid.default_main_program()
    inner = fluid.Program()
    with fluid.program_guard(inner):
        assert fluid.default_main_program() is inner
    assert fluid.default_main_program() is outer
    with pytest.raises(TypeError, match="must be a Program"):
        with fluid.program_guard("not a program"):
            pass


def test_unique_name_guard_restarts_counting():
    with fluid.unique_name.guard():
        a = fluid.unique_name.generate("fc")
    with fluid.unique_name.guard():
        b = fluid.unique_name.generate("fc")
    assert a == b == "fc_0"


def test_minimize_names_gradients(fresh_programs):
    main, _ = fresh_programs
    *_, cost = _fit_a_line()
    _, params_grads = fluid.optimizer.SGD(0.1).minimize(cost)
    assert [(p.name, g.name) for p, g in params_grads] == [
        ("fc_0.w_0", "fc_0.w_0@GRAD"), ("fc_0.b_0", "fc_0.b_0@GRAD")]
    roles = [op.role for op in main.global_block().ops]
    assert roles.count("optimize") == 2 and "backward" in roles
    main.verify()


def test_clone_for_test_keeps_only_forward(fresh_programs):
    main, _ = fresh_programs
    *_, cost = _fit_a_line()
    fluid.optimizer.SGD(0.1).minimize(cost)
    test_prog = main.clone(for_test=True)
    assert [op.type for op in test_prog.global_block().ops] == [
        "mul", "elementwise_add", "square_error_cost", "mean"]
    assert len(main.global_block().ops) > 4  # the original is untouched
    clone = main.clone()
    assert str(clone) == str(main) and clone is not main


def test_str_is_stable_and_shows_places(fresh_programs):
    main, _ = fresh_programs
    *_, cost = _fit_a_line()
    op = main.global_block().ops[0]
    op.place = PlaceGroup.parse("trainer/127.0.0.1:6174")
    main.global_block().var("fc_0.w_0").place = PlaceGroup.parse("pserver/127.0.0.1:7164/cpu")
    text = str(main)
    assert text == str(main.clone())
    assert "#0 mul(X=%x, Y=%fc_0.w_0) -> (Out=%fc_0.tmp_0) {x_num_col_dims=1, y_num_col_dims=1} " \
           "@trainer/127.0.0.1:6174" in text
    assert "var fc_0.w_0 : float32[13, 1] param persistable @pserver/127.0.0.1:7164/cpu" in text


def test_append_op_validates_against_opdef(fresh_programs):
    main, _ = fresh_programs
    b = main.global_block()
    x = fluid.layers.data(name="x", shape=[3])
    with pytest.raises(ProgramError, match="unknown op type 'mull'; did you mean mul"):
        b.append_op("mull", {"X": [x]}, {"Out": ["o"]})
    with pytest.raises(ProgramError, match="has no input slot 'Z'"):
        b.append_op("mean", {"Z": [x]}, {"Out": ["o"]})
    with pytest.raises(ProgramError, match="input slot 'Y' is required"):
        b.append_op("mul", {"X": [x]}, {"Out": ["o"]})
    with pytest.raises(ProgramError, match="has no attr 'alpha'"):
        b.append_op("mean", {"X": [x]}, {"Out": ["o"]}, {"alpha": 1})
    w = b.create_parameter("w", [4, 2])
    with pytest.raises(ProgramError, match=r"3 columns .* 4 rows"):
        b.append_op("mul", {"X": [x], "Y": [w]}, {"Out": ["o"]})


def test_verify_reports_use_before_def_with_context(fresh_programs):
    main, _ = fresh_programs
    *_, cost = _fit_a_line()
    b = main.global_block()
    b.ops.insert(0, b.ops.pop(1))  # elementwise_add now reads fc_0.tmp_0 before mul writes it
    with pytest.raises(ProgramError) as e:
        main.verify()
    msg = str(e.value)
    assert "op #0 `elementwise_add`: reads 'fc_0.tmp_0' before any op writes it" in msg
    assert "-> #0 elementwise_add" in msg and "#1 mul" in msg


def test_verify_reports_second_writer_and_shape_mismatch(fresh_programs):
    main, _ = fresh_programs
    x, y, pred, cost = _fit_a_line()
    b = main.global_block()
    b.append_op("mean", {"X": [x]}, {"Out": [cost]}, infer=False)
    with pytest.raises(ProgramError, match="already written by op #3"):
        main.verify()
    b.ops.pop()
    b.var("fc_0.tmp_0").shape = (-1, 7)
    with pytest.raises(ProgramError, match=r"declared \[-1, 7\] but the op makes \[-1, 1\]"):
        main.verify()


def test_variable_operators_append_ops(fresh_programs):
    main, _ = fresh_programs
    x = fluid.layers.data(name="x", shape=[2])
    z = (x * 2.0 + 1.0) / x - x
    exe = fluid.Executor()
    xs = np.array([[1.0, 2.0], [4.0, 8.0]], np.float32)
    out, = exe.run(main, feed={"x": xs}, fetch_list=[z])
    np.testing.assert_allclose(out, (xs * 2 + 1) / xs - xs, rtol=1e-6)
