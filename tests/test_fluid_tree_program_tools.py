"""Fluid 1.8.5's program printing, Graphviz drawing and transpiler internals:
``fluid.debugger``, ``fluid.graphviz``, ``fluid.net_drawer``, ``fluid.transpiler.details``,
``distribute_transpiler``'s block split, and the collective transpilers (``GradAllReduce`` and
``LocalSGD`` equal one process; ``GradAllReduce`` also over two real processes on 127.0.0.1)."""
from __future__ import annotations

import io
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest

import placegroup as fluid
from placegroup import debugger, graphviz, net_drawer
from placegroup.comm.loopback import LoopbackNetwork
from placegroup.errors import CommTimeout, ConfigError
from placegroup.ir.framework import note_transpiled_job
from placegroup.transpiler import distribute_transpiler as dt
from placegroup.transpiler.collective import GradAllReduce, LocalSGD, SingleProcessMultiThread
from placegroup.transpiler.details import (UnionFind, VarDistributed, VarsDistributed, VarStruct, block_to_code,
                                           delete_ops, find_op_by_input_arg, find_op_by_output_arg,
                                           get_indent_space, op_to_code, program_to_code, variable_to_code,
                                           wait_server_ready)
from tests.conftest import LAUNCH_VARS, TIME_FACTOR

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _fit_a_line():
    """fit_a_line with a sequence data var, in the test's default programs; returns the cost."""
    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1])
    fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    pred = fluid.layers.fc(input=x, size=1)
    cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    fluid.optimizer.SGD(0.01).minimize(cost)
    return cost


@pytest.fixture
def no_dot(monkeypatch):
    """No Graphviz on PATH, whatever this machine has."""
    real = graphviz.shutil.which
    monkeypatch.setattr(graphviz.shutil, "which", lambda name: None if name == "dot" else real(name))


@pytest.fixture
def fake_dot(tmp_path, monkeypatch):
    """A `dot` on PATH that writes its -o file (or fails when FAKE_DOT_FAIL is set)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    script = bindir / "dot"
    script.write_text("#!/bin/sh\nif [ -n \"$FAKE_DOT_FAIL\" ]; then echo 'syntax error in line 3' >&2; exit 1; fi\n"
                      "echo pdf > \"$4\"\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    return script


# -- fluid.graphviz ------------------------------------------------------------------------------

def test_graph_text_nodes_edges_and_ranks():
    assert graphviz.crepr("a") == '"a"' and graphviz.crepr(3) == "3"
    g = graphviz.Graph("t", rankdir="TB")
    late, early = g.rank_group("same", 2), g.rank_group("min", 0)
    a = g.node('"a"', prefix="arg", description="a", rank=early)
    b = g.node("<<B>mul</B>>", prefix="op", description="mul", shape="box")
    e = g.edge(a, b, color="orange")
    assert a.name.startswith("arg_") and b.name == f"op_{int(a.name.split('_')[1]) + 1}"
    assert str(b) == f'{b.name} [label=<<B>mul</B>> ,shape="box" ];'
    assert str(e) == f'{a.name} -> {b.name} [color="orange"]'
    assert str(g.rank_groups[early]) == "{rank=min;%s}" % a.name and str(g.rank_groups[late]) == ""
    assert "rank" not in a.attrs and g.node_named("mul") is b and g.node_named("nope") is None
    lines = g.code().split("\n")
    assert lines[:3] == ["digraph G {", 'title = "t"', 'rankdir="TB";'] and lines[-1] == "}"
    assert lines.index(str(a)) < lines.index(str(b)) < lines.index(str(e))  # stable order, as added
    assert g.code() == g.code()
    with pytest.raises(KeyError):
        g.node("x", prefix="arg", rank="rankgroup-nope")


def test_compile_writes_dot_and_renders_with_dot_or_says_it_is_missing(tmp_path, no_dot):
    g = graphviz.GraphPreviewGenerator("blk")
    g.add_edge(g.add_param("w", "float32[2, 3]"), g.add_op("mul"))
    path = tmp_path / "g.dot"
    with pytest.raises(graphviz.GraphvizNotFound, match=r"wrote .*g\.dot; making .*g\.pdf from it needs "
                                                        r"Graphviz's `dot` program, which is not on PATH"):
        g(str(path))
    assert path.read_text() == g.graph.code()
    assert isinstance(graphviz.GraphvizNotFound("x"), FileNotFoundError)  # what Fluid raised without dot


def test_compile_runs_dot_and_reports_its_failure(tmp_path, fake_dot, monkeypatch):
    g = graphviz.Graph("x")
    g.node('"a"', prefix="arg")
    assert g.compile(str(tmp_path / "a.dot")) == str(tmp_path / "a.pdf")
    assert (tmp_path / "a.pdf").read_text() == "pdf\n"
    monkeypatch.setenv("FAKE_DOT_FAIL", "1")
    with pytest.raises(RuntimeError, match=r"failed \(exit code 1\): syntax error in line 3"):
        g.compile(str(tmp_path / "b.dot"))


def test_preview_generator_styles_and_highlights():
    g = graphviz.GraphPreviewGenerator("t")
    p = g.add_param("fc_0.w_0", "float32[13, 1]", highlight=True)
    a, o = g.add_arg("x"), g.add_op("mul", highlight=False)
    e1, e2 = g.add_edge(a, o), g.add_edge(p, o, highlight=True)
    assert p.attrs["color"] == "orange" and a.attrs["color"] == "#dddddd" and o.attrs["color"] == "#303A3A"
    assert "<b>\nfc_0.w_0\n" in p.label and "float32[13, 1]" in p.label and a.label == '"x"'
    assert e1.attrs == {"color": "#000000"} and e2.attrs == {"color": "orange"}
    assert g.graph.attrs == {"layout": "dot", "concentrate": "true", "rankdir": "TB"}


# -- fluid.debugger ------------------------------------------------------------------------------

# Fluid 1.8.5's pprint_program_codes of the same model (its square_error_cost is two ops there,
# elementwise_sub and square, hence the extra var): every line placegroup prints is among these.
FLUID_VAR_LINES = {
    "Tensor x (tensor(type=float32, shape=[-1, 13]))",
    "LoDTensor words (level=1, tensor(type=int64, shape=[-1, 1]))",
    "Tensor fc_0.w_0 (tensor(type=float32, shape=[13, 1]))",
    "Tensor mean_0.tmp_0 (tensor(type=float32, shape=[1]))",
    "Tensor y (tensor(type=float32, shape=[-1, 1]))",
    "Tensor fc_0.tmp_0 (tensor(type=float32, shape=[-1, 1]))",
    "Tensor fc_0.b_0 (tensor(type=float32, shape=[1]))",
    "Tensor fc_0.tmp_1 (tensor(type=float32, shape=[-1, 1]))",
    "Tensor square_error_cost_0.tmp_0 (tensor(type=float32, shape=[-1, 1]))",
    "Tensor learning_rate_0 (tensor(type=float32, shape=[1]))",
    "Tensor square_error_cost_0.tmp_1 (tensor(type=float32, shape=[-1, 1]))",
}


def test_pprint_program_codes_in_fluids_format(fresh_programs):
    main, startup = fresh_programs
    _fit_a_line()
    text = debugger.pprint_program_codes(main)
    head, ops = text.split("\n\n// operators\n")
    lines = head.split("\n")
    assert lines[:2] == ["// block-0  parent--1", "// variables"]
    assert set(lines[2:]) <= FLUID_VAR_LINES and len(lines[2:]) == 10
    assert ops.split("\n")[:2] == ["fc_0.tmp_0 = mul(X=x, Y=fc_0.w_0) [{x_num_col_dims=1,y_num_col_dims=1}]",
                                   "fc_0.tmp_1 = elementwise_add(X=fc_0.tmp_0, Y=fc_0.b_0) [{axis=1}]"]
    assert "@GRAD" not in text and "sgd" not in text  # the gradient side is left out, as in Fluid
    full = debugger.pprint_block_codes(main.global_block(), show_backward=True)
    assert "Tensor fc_0.w_0@GRAD (tensor(type=float32, shape=[13, 1]))" in full
    assert "mean_0.tmp_0@GRAD = 1.0 [shape=[1]]" in full  # fill_constant's own form
    assert "fc_0.w_0 = sgd(Param=fc_0.w_0, Grad=fc_0.w_0@GRAD, LearningRate=learning_rate_0) [{}]" in full
    assert "learning_rate_0 = 0.01 [shape=[1]]" in debugger.pprint_program_codes(startup)
    with pytest.raises(TypeError, match="expected a Block"):
        debugger.pprint_block_codes(main)
    with pytest.raises(TypeError, match="expected a Program"):
        debugger.pprint_program_codes(main.global_block())


def test_repr_helpers(fresh_programs):
    main, _ = fresh_programs
    block = main.global_block()
    assert [debugger.repr_data_type(i) for i in (0, 3, 5, 6)] == ["bool", "int64", "float32", "float64"]  # Fluid 1.8.5
    assert debugger.repr_data_type(fluid.core.VarDesc.VarType.FP16) == "float16"
    assert debugger.repr_data_type(np.int32) == "int32"
    with pytest.raises(ValueError, match="not one of Fluid's 0..6"):
        debugger.repr_data_type(9)
    sr = block.create_var("emb@GRAD", shape=[10, 4], dtype="float32", type="selected_rows")
    arr = block.create_var("arr", shape=[3], dtype="int64", type="lod_tensor_array", lod_level=1)
    raw = block.create_var("ids", shape=None, type="raw")
    assert debugger.repr_var(sr) == "SelectedRows emb@GRAD (tensor(type=float32, shape=[10, 4]))"
    assert debugger.repr_var(arr) == "TensorArray arr (level=1, tensor(type=int64, shape=[3]))"
    assert debugger.repr_lodtensor(sr) is None and debugger.repr_selected_rows(arr) is None
    assert debugger.repr_var(raw) is None and "raw ids" in debugger.pprint_block_codes(block)
    assert debugger.repr_tensor(sr) == "tensor(type=float32, shape=[10, 4])"
    assert debugger.repr_attr(("dtype", 5)) == ("dtype=float32", ("dtype", "float32"))
    assert debugger.repr_attr(("shape", [2, 3])) == ("shape=[2, 3]", ("shape", [2, 3]))
    x = block.create_var("a", shape=[2], dtype="float32")
    y = block.create_var("b", shape=[2], dtype="float32")
    op = block.append_op("sum", {"X": [x, y]}, {"Out": ["c"]})
    assert debugger.repr_op(op) == "c = sum(X=['a', 'b']) [{}]"


def test_draw_block_graphviz_writes_the_block(tmp_path, fresh_programs, no_dot):
    main, _ = fresh_programs
    _fit_a_line()
    path = tmp_path / "blk.dot"
    with pytest.raises(graphviz.GraphvizNotFound):
        debugger.draw_block_graphviz(main.global_block(), highlights=["fc_0.w.*", "mul"], path=str(path))
    text = path.read_text()
    block = main.global_block()
    assert text.count("[label=<<table") == sum(v.persistable for v in block.vars.values())  # params
    assert text.count(" -> ") == sum(len(op.input_arg_names) + len(op.output_arg_names) for op in block.ops)
    assert text.count('color="orange"') >= 3  # the param fc_0.w_0, the op mul, and mul's edges
    assert "<b>\nfc_0.w_0\n    </b>" in text and "lod_tensor float32[13, 1]" in text
    with pytest.raises(TypeError, match="highlights are regular expressions"):
        debugger.draw_block_graphviz(block, highlights=[3], path=str(path))


def _nan_model():
    x = fluid.layers.data(name="x", shape=[3])
    h = fluid.layers.fc(x, 2, param_attr=fluid.ParamAttr(initializer=fluid.initializer.Constant(0.5)))
    return h, fluid.layers.mean(fluid.layers.log(h))


def test_fast_nan_inf_debug_finds_the_op_and_dumps_the_persistables(tmp_path, monkeypatch, fresh_programs, capsys):
    main, startup = fresh_programs
    h, cost = _nan_model()
    debugger.prepare_fast_nan_inf_debug(None)  # the default main program: this test's
    checks = [v for v in main.global_block().vars.values() if "nan_inf_check_of" in v.attrs]
    assert sorted(v.attrs["nan_inf_check_of"] for v in checks) == sorted(
        ["fc_0.tmp_0", "fc_0.tmp_1", "log_0.tmp_0", "mean_0.tmp_0"])
    debugger.prepare_fast_nan_inf_debug(main)  # again: nothing new
    assert len([v for v in main.global_block().vars.values() if "nan_inf_check_of" in v.attrs]) == len(checks)
    exe = fluid.Executor()
    exe.run(startup)
    monkeypatch.chdir(tmp_path)
    good = np.ones((2, 3), "float32")
    got = debugger.run_fast_nan_inf_debug(exe, main, feed={"x": good}, fetch_list=[h, cost])
    np.testing.assert_allclose(got[0], np.full((2, 2), 1.5, "float32"))
    np.testing.assert_allclose(got[1], [np.log(1.5)], rtol=1e-6)
    assert os.listdir(tmp_path) == []
    with np.errstate(invalid="ignore"):
        assert debugger.run_fast_nan_inf_debug(exe, main, feed={"x": -good}, fetch_list=[cost]) is None
    out = capsys.readouterr().out
    assert "catch an exception:\nOperator `log` (op #2 of block 0) output 'log_0.tmp_0' contains Inf or NaN" in out
    [core] = os.listdir(tmp_path)
    assert core.startswith("core") and core.endswith(".pdckpt") and f"dumping a core into ./{core}" in out
    fresh = fluid.Scope()
    fluid.io.load_persistables(exe, str(tmp_path), main, filename=core, scope=fresh)
    np.testing.assert_allclose(np.array(fresh.find_var("fc_0.w_0").get_tensor()), np.full((3, 2), 0.5))
    # a failing run is reported the same way; dump_core=False dumps nothing
    assert debugger.run_fast_nan_inf_debug(exe, main, feed={"x": np.ones((2, 4), "float32")},
                                           fetch_list=[cost], dump_core=False) is None
    assert "catch an exception:" in capsys.readouterr().out and len(os.listdir(tmp_path)) == 1
    with pytest.raises(ValueError, match="needs an executor"):
        debugger.run_fast_nan_inf_debug(None, main)


def test_fast_nan_inf_debug_refuses_a_transpiled_program(fresh_programs):
    main, startup = fresh_programs
    _fit_a_line()
    GradAllReduce().transpile(startup, main, 0, ["127.0.0.1:7464", "127.0.0.1:7465"], "127.0.0.1:7464", False)
    note_transpiled_job(None)
    with pytest.raises(ConfigError, match="before DistributeTranspiler.transpile"):
        debugger.prepare_fast_nan_inf_debug(main)


# -- fluid.net_drawer ----------------------------------------------------------------------------

def test_draw_graph_links_writers_to_readers(tmp_path, fresh_programs):
    main, startup = fresh_programs
    _fit_a_line()
    path = tmp_path / "net.gv"
    g = net_drawer.draw_graph(startup, main, filename=str(path), node_attr={"fontname": "Arial"})
    assert path.read_text() == g.code() and isinstance(g, net_drawer.Graph)
    ops = {n.description: n for n in g.nodes if n.name.startswith("op_")}
    n_ops = len(startup.global_block().ops) + len(main.global_block().ops)
    assert len(ops) == n_ops and all(n.attrs["fontname"] == "Arial" for n in ops.values())
    mul = next(d for d in ops if d.startswith("mul_") and not d.startswith("mul_grad"))
    edges = {(e.source.description, e.target.description, e.attrs["label"]) for e in g.edges}
    init_w = next(d for d in ops if d.startswith("uniform_random_"))
    assert (init_w, mul, "Y(fc_0.w_0)") in edges and ("Feed", mul, "X(x)") in edges
    sgd_w = [e for e in edges if e[2] == "Param(fc_0.w_0)"]
    assert sgd_w == [(init_w, sgd_w[0][1], "Param(fc_0.w_0)")]  # an in-place update reads the startup's value
    assert net_drawer.draw_node(type("Op", (), {"type": "mul_0"})) == {**net_drawer.OP_STYLE, "name": "mul_0",
                                                                       "label": "mul_0"}
    slot = type("Slot", (), {"parameter": "X"})
    assert net_drawer.draw_edge({"x": "Feed"}, type("Op", (), {"type": "mul_0"}), slot, "x") == {
        "label": "X(x)", "head_name": "mul_0", "tail_name": "Feed"}
    first = net_drawer.unique_id()
    assert net_drawer.unique_id() == first + 1
    with pytest.raises(TypeError, match="unexpected keyword arguments \\['colour'\\]"):
        net_drawer.draw_graph(startup, main, colour="red")


# -- fluid.transpiler.details -----------------------------------------------------------------------

def test_variable_and_op_to_code_in_fluids_format(fresh_programs):
    main, startup = fresh_programs
    _fit_a_line()
    block = main.global_block()
    # Fluid 1.8.5's variable_to_code of the same vars
    assert variable_to_code(block.var("fc_0.w_0")) == \
        "persist trainable parameter fc_0.w_0 : fluid.VarType.LOD_TENSOR.shape(13, 1).astype(VarType.FP32)"
    assert variable_to_code(block.var("fc_0.b_0")) == \
        "persist trainable parameter fc_0.b_0 : fluid.VarType.LOD_TENSOR.shape(1,).astype(VarType.FP32)"
    assert variable_to_code(block.var("learning_rate_0")) == \
        "persist var learning_rate_0 : fluid.VarType.LOD_TENSOR.shape(1,).astype(VarType.FP32)"
    assert variable_to_code(block.var("words")) == \
        "var words : fluid.VarType.LOD_TENSOR.shape(-1, 1).astype(VarType.INT64)"
    frozen = block.create_parameter("frozen", [2], trainable=False)
    assert variable_to_code(frozen).startswith("persist parameter frozen : ")
    assert op_to_code(block.ops[0]) == ("{Out=['fc_0.tmp_0']} = mul(inputs={X=['x'], Y=['fc_0.w_0']}, "
                                        "op_role = forward, x_num_col_dims = 1, y_num_col_dims = 1)")
    sgd = next(op for op in block.ops if op.type == "sgd")
    assert op_to_code(sgd).startswith("{ParamOut=['fc_0.w_0']} = sgd(inputs={Param=['fc_0.w_0'], "
                                      "Grad=['fc_0.w_0@GRAD'], LearningRate=['learning_rate_0']}, op_role = optimize")
    buf = io.StringIO()
    program_to_code(main, fout=buf)
    lines = buf.getvalue().split("\n")
    assert lines[0] == "{ // block 0" and lines[-2:] == ["}", ""]
    var_lines = [line for line in lines[1:] if line.startswith("    ") and " : fluid." in line]
    assert [line.split(" : ")[0].split()[-1] for line in var_lines] == sorted(block.vars)
    assert lines[len(var_lines) + 1] == "" and lines[len(var_lines) + 2] == "    " + op_to_code(block.ops[0])
    buf2 = io.StringIO()
    block_to_code(main.global_block(), 0, buf2)
    assert buf2.getvalue() == buf.getvalue()
    assert get_indent_space(2) == " " * 8 and get_indent_space(1, 2) == "  "


def test_type_names_match_fluid_core():
    from placegroup.transpiler.details.program_utils import _VAR_TYPES

    assert _VAR_TYPES == {m.value: m.name for m in fluid.core.VarDesc.VarType}


def test_find_and_delete_ops(fresh_programs, caplog):
    main, _ = fresh_programs
    _fit_a_line()
    block = main.global_block()
    assert find_op_by_input_arg(block, "fc_0.w_0") == 0
    assert find_op_by_output_arg(block, "fc_0.w_0") == len(block.ops) - 2        # the first sgd
    assert find_op_by_output_arg(block, "fc_0.tmp_0", reverse=True) == 0
    assert find_op_by_input_arg(block, "nope") == -1 == find_op_by_output_arg(block, "nope", reverse=True)
    sgds = [op for op in block.ops if op.type == "sgd"]
    n = len(block.ops)
    delete_ops(block, sgds)
    assert len(block.ops) == n - 2 and not any(op.type == "sgd" for op in block.ops)
    delete_ops(block, sgds[:1])  # not there any more: logged, skipped
    assert len(block.ops) == n - 2 and "op `sgd` is not in block 0; skipped" in caplog.text


def test_union_find():
    uf = UnionFind(["a", "b", "c", "d"])
    uf.union("a", "b")
    uf.union("c", "d")
    assert uf.is_connected("a", "b") and not uf.is_connected("b", "c")
    uf.union("b", "d")
    assert uf.is_connected("a", "c") and uf.find("a") == uf.find("d") >= 0
    assert uf.find("zz") == -1 and UnionFind().find("a") == -1
    uf.union("a", "zz")  # an unknown element joins nothing
    assert uf.find("a") == uf.find("c")


def test_vars_distributed(fresh_programs):
    main, _ = fresh_programs
    w = main.global_block().create_parameter("w", [10, 4])
    vd = VarsDistributed()
    vd.add_distributed_var(w, VarStruct("w.block0", (5, 4), "float32", "lod_tensor", 0, True), block_id=0, offset=0,
                           vtype="Param", endpoint="127.0.0.1:7164")
    vd.add_distributed_var(w, VarStruct("w.block1", (5, 4), "float32", "lod_tensor", 0, True), block_id=1, offset=20,
                           vtype="Param", endpoint="127.0.0.1:7165")
    vd.add_distributed_var(w, w, vtype="Optimizer", endpoint="127.0.0.1:7165")
    whole = vd.distributed_vars[2]
    assert whole.is_slice is False and vd.distributed_vars[0].is_slice is True
    assert vd.get_distributed_var_by_slice("w.block1").offset == 20
    assert vd.get_distributed_var_by_slice("nope") is None
    assert vd.get_distributed_var_by_origin_and_ep("w", "127.0.0.1:7164").slice.name == "w.block0"
    assert [v.slice.name for v in vd.get_distributed_vars_by_ep("127.0.0.1:7165", "Param")] == ["w.block1"]
    assert len(vd.get_distributed_vars_by_ep("127.0.0.1:7165")) == 2
    assert list(vd.get_distributed_vars_by_vtypes(["Param"], groupby=True)) == ["w"]
    assert len(vd.get_distributed_vars_by_vtypes(["Param", "Optimizer"])) == 3
    assert str(vd.distributed_vars[1]) == (
        "var owned: Param, origin var: ( w : fluid.VarType.LOD_TENSOR.shape(10, 4).astype(VarType.FP32) ), "
        "slice var: ( w.block1 : fluid.VarType.LOD_TENSOR.shape(5, 4).astype(VarType.FP32).slice(True).block(1)"
        ".offset(20) ), endpoint: 127.0.0.1:7165 ")
    assert vd.overview().count("\n") == 2
    with pytest.raises(TypeError, match="compares VarStructs"):
        VarDistributed.equal(w, whole.slice)


def _free_port_socket(listen: bool) -> socket.socket:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    if listen:
        s.listen(8)
    return s


def test_wait_server_ready(capsys):
    up, down = _free_port_socket(True), _free_port_socket(False)  # bound, not listening: refuses
    try:
        up_ep = "127.0.0.1:%d" % up.getsockname()[1]
        down_ep = "127.0.0.1:%d" % down.getsockname()[1]
        wait_server_ready([up_ep])
        with pytest.raises(CommTimeout, match=rf"\['{down_ep}'\] did not accept a connection in 0.3s"):
            wait_server_ready([up_ep, down_ep], timeout=0.3, interval=0.1)
        assert f"not ready endpoints:['{down_ep}']" in capsys.readouterr().err
        threading.Timer(0.3, lambda: down.listen(1)).start()  # comes up later
        wait_server_ready([down_ep], timeout=10 * TIME_FACTOR, interval=0.05)
    finally:
        up.close()
        down.close()
    with pytest.raises(TypeError, match="takes a list of endpoints"):
        wait_server_ready("127.0.0.1:1,127.0.0.1:2")
    with pytest.raises(ConfigError, match="is not ip:port"):
        wait_server_ready(["localhost"])


# -- distribute_transpiler: Fluid's block split ------------------------------------------------------

class _V:
    def __init__(self, name, shape):
        self.name, self.shape = name, shape


# slice_variable of real Fluid 1.8.5 on these (var, slice_count, min_block_size)
FLUID_SPLITS = [
    (("w", (10, 1000)), 3, 8192, ["w:0:10000"]),
    (("w", (1000, 10)), 3, 8192, ["w:0:10000"]),
    (("b", (100000,)), 4, 8192, ["b:0:25000", "b:1:25000", "b:2:25000", "b:3:25000"]),
    (("e", (17, 3001)), 5, 1024, ["e:0:12004", "e:1:12004", "e:2:12004", "e:3:12004", "e:4:3001"]),
    (("s", (7,)), 3, 8192, ["s:0:7"]),
    (("t", (9, 9)), 4, 8, ["t:0:27", "t:1:27", "t:2:27"]),
    (("u", (5, 3, 4)), 3, 7, ["u:0:24", "u:1:24", "u:2:12"]),
    (("x", (100, 100)), 3, 8192, ["x:0:10000"]),
    (("y", (3, 5000)), 4, 1000, ["y:0:5000", "y:1:5000", "y:2:5000"]),
]


@pytest.mark.parametrize("var, count, min_block, expected", FLUID_SPLITS)
def test_slice_variable_gives_fluids_blocks(var, count, min_block, expected):
    assert dt.slice_variable([_V(*var)], count, min_block) == expected


def test_slice_variable_helpers(capsys, monkeypatch):
    got = dt.slice_variable([_V("a", (10, 1000)), _V("b", (100000,))], 4, 8192)
    assert got == ["a:0:10000", "b:0:25000", "b:1:25000", "b:2:25000", "b:3:25000"]
    assert str(dt.VarBlock("a", 2, 30)) == "a:2:30"
    # Fluid 1.8.5: True True False True
    assert [dt.same_or_split_var(*a) for a in [("w.block0", "w"), ("w", "w"), ("wx", "w"), ("w.block", "w")]] == \
        [True, True, False, True]
    with pytest.raises(ValueError, match="needs known dims"):
        dt.slice_variable([_V("d", (-1, 4))], 2, 8)
    with pytest.raises(ValueError, match="must be at least 1"):
        dt.slice_variable([_V("d", (4,))], 0, 8)
    dt.log("quiet")
    from placegroup.transpiler import var_blocks

    monkeypatch.setattr(var_blocks, "PRINT_LOG", True)
    dt.log("said", 1)
    assert capsys.readouterr().out == "('said', 1)\n"


# -- the collective transpilers ------------------------------------------------------------------------

EPS = ["127.0.0.1:7466", "127.0.0.1:7467"]


def _model(optimizer: str):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        startup.random_seed = 7
        x = fluid.layers.data(name="x", shape=[4])
        y = fluid.layers.data(name="y", shape=[1])
        h = fluid.layers.fc(x, 8, act="relu")
        cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        (fluid.optimizer.SGD(0.1) if optimizer == "sgd" else fluid.optimizer.Adam(0.05)).minimize(cost)
    return main, startup, cost


def _batches(steps=4, n=8):
    rng = np.random.default_rng(0)
    return [(rng.normal(size=(n, 4)).astype("float32"), rng.normal(size=(n, 1)).astype("float32"))
            for _ in range(steps)]


def _params(prog, scope) -> dict:
    return {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in prog.all_parameters()}


def test_grad_allreduce_inserts_the_gradient_reduction():
    main, startup, _ = _model("sgd")
    t = GradAllReduce()
    t.transpile(startup, main, 1, ",".join(EPS), EPS[1], True)
    note_transpiled_job(None)
    assert (t.nranks, t.rank, t.endpoints, t.current_endpoint) == (2, 1, EPS, EPS[1])
    ops = main.global_block().ops
    reduced = [op.input("X")[0] for op in ops if op.type == "c_allreduce_sum"]
    assert sorted(reduced) == sorted(p.name + "@GRAD" for p in main.all_parameters())
    assert (main.executor.rank, main.executor.endpoint) == (1, EPS[1]) and main.cluster.trainer_endpoints == EPS
    assert startup.cluster is not None and main._origin_program.cluster is None
    assert not any(op.type == "c_allreduce_sum" for op in main._origin_program.global_block().ops)


@pytest.mark.parametrize("kwargs, message", [
    (dict(endpoints=EPS[:1], current_endpoint=EPS[0]), "the number of endpoints must > 1"),
    (dict(rank=-1), "rank must >= 0"),
    (dict(current_endpoint="127.0.0.1:7469"), "is not in"),
    (dict(rank=1), "rank 1 and current endpoint 127.0.0.1:7466 disagree"),
])
def test_collective_transpile_checks_the_group(kwargs, message):
    main, startup, _ = _model("sgd")
    args = {**dict(startup_program=startup, main_program=main, rank=0, endpoints=EPS, current_endpoint=EPS[0],
                   wait_port=False), **kwargs}
    with pytest.raises(ValueError, match=message):
        GradAllReduce().transpile(**args)
    with pytest.raises(ValueError, match="nrings must be an int >= 1"):
        LocalSGD(0)
    with pytest.raises(NotImplementedError):
        fluid.transpiler.collective.Collective(1).passes()


def test_single_process_multi_thread_with_one_endpoint_leaves_the_programs():
    main, startup, _ = _model("adam")
    before = (str(main), str(startup))
    t = SingleProcessMultiThread()
    t.transpile(startup, main, 0, EPS[:1], EPS[0], True)
    assert (str(main), str(startup)) == before and t.nrings == 1 and t.mode == "single_process_multi_thread"
    main2, startup2, _ = _model("sgd")
    SingleProcessMultiThread().transpile(startup2, main2, 0, EPS, EPS[0], True)  # several: GradAllReduce's
    note_transpiled_job(None)
    assert any(op.type == "c_allreduce_sum" for op in main2.global_block().ops)


def _run_group(cls, optimizer: str, batches) -> dict:
    """Two trainers of ``cls`` on threads over the loopback transport; rank r is fed half r of
    each batch. Returns rank -> (losses, params)."""
    net, out, errors = LoopbackNetwork(), {}, []
    progs = []
    for rank in range(2):
        main, startup, cost = _model(optimizer)
        cls().transpile(startup, main, rank, EPS, EPS[rank], True)
        note_transpiled_job(None)
        progs.append((main, startup, cost))

    def trainer(rank):
        try:
            main, startup, cost = progs[rank]
            exe, scope = fluid.Executor(network=net), fluid.Scope()
            exe.run(startup, scope=scope)
            losses = []
            for xb, yb in batches:
                half = slice(rank * len(xb) // 2, (rank + 1) * len(xb) // 2)
                loss, = exe.run(main, feed={"x": xb[half], "y": yb[half]}, fetch_list=[cost], scope=scope)
                losses.append(float(loss[0]))
            out[rank] = (losses, _params(main._origin_program, scope))
            exe.close()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            errors.append(e)

    threads = [threading.Thread(target=trainer, args=(r,), daemon=True) for r in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60 * TIME_FACTOR)
    if errors:
        raise errors[0]
    assert not any(t.is_alive() for t in threads), "the trainers did not finish"
    return out


def _run_local(optimizer: str, batches, average_every_step: bool = False) -> tuple:
    """The reference: one process on the whole batches; or (``average_every_step``) two
    local trainers on the halves whose parameters are averaged after every step (LocalSGD)."""
    main, startup, cost = _model(optimizer)
    exe = fluid.Executor()
    scopes = [fluid.Scope() for _ in range(2 if average_every_step else 1)]
    for scope in scopes:
        exe.run(startup, scope=scope)
    losses = []
    for xb, yb in batches:
        step = []
        for k, scope in enumerate(scopes):
            part = slice(k * len(xb) // len(scopes), (k + 1) * len(xb) // len(scopes))
            loss, = exe.run(main, feed={"x": xb[part], "y": yb[part]}, fetch_list=[cost], scope=scope)
            step.append(float(loss[0]))
        losses.append(float(np.mean(step)))
        if average_every_step:
            for name, _ in _params(main, scopes[0]).items():
                mean = np.mean([np.array(s.find_var(name).get_tensor()) for s in scopes], axis=0)
                for s in scopes:
                    s.find_var(name).get_tensor().set(mean)
    return losses, _params(main, scopes[0])


@pytest.mark.parametrize("cls, optimizer, average", [(GradAllReduce, "adam", False), (LocalSGD, "sgd", False),
                                                     (LocalSGD, "adam", True)])
def test_collective_transpilers_train_as_their_reference(cls, optimizer, average):
    """GradAllReduce equals one process on the whole batch; so does LocalSGD with SGD (the mean
    of the trainers' SGD steps from one point is the step of the mean gradient); LocalSGD with
    Adam equals two local trainers whose parameters are averaged after each step."""
    batches = _batches()
    got = _run_group(cls, optimizer, batches)
    ref_losses, ref_params = _run_local(optimizer, batches, average)
    np.testing.assert_allclose(np.mean([got[0][0], got[1][0]], axis=0), ref_losses, rtol=1e-5, atol=1e-6)
    for rank in range(2):
        for name, value in ref_params.items():
            np.testing.assert_allclose(got[rank][1][name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_local_sgd_program():
    main, startup, _ = _model("adam")
    LocalSGD().transpile(startup, main, 0, EPS, EPS[0], True)
    note_transpiled_job(None)
    block = main.global_block()
    p = "fc_0.w_0"
    ops = [op for op in block.ops if op.param == p]
    assert [op.type for op in ops][-5:] == ["elementwise_sub", "c_allreduce_sum", "scale", "elementwise_sub", "assign"]
    assert ops[-3].attrs["scale"] == 0.5 and ops[-1].output("Out") == [p + "@SNAPSHOT"]
    assert block.var(p + "@SNAPSHOT").persistable
    assert [op.input("X") for op in startup.global_block().ops if op.type == "assign" and
            op.output("Out") == [p + "@SNAPSHOT"]] == [[p]]
    assert not any(op.input("X")[0].endswith("@GRAD") for op in block.ops if op.type == "c_allreduce_sum")
    assert LocalSGD().snapshot_name("w") == "w@SNAPSHOT"


WORKER = textwrap.dedent("""
    import sys
    import numpy as np
    import placegroup as fluid
    from placegroup.transpiler import collective

    mode, rank, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    eps = sys.argv[4].split(",")
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        startup.random_seed = 7
        x = fluid.layers.data(name="x", shape=[4])
        y = fluid.layers.data(name="y", shape=[1])
        h = fluid.layers.fc(x, 8, act="relu")
        cost = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(h, 1), y))
        fluid.optimizer.SGD(0.1).minimize(cost)
    params = [p.name for p in main.all_parameters()]
    if mode != "local":
        cls = {"grad_allreduce": collective.GradAllReduce, "local_sgd": collective.LocalSGD}[mode]
        cls().transpile(startup_program=startup, main_program=main, rank=rank, endpoints=eps,
                        current_endpoint=eps[rank], wait_port=True)
    n = 1 if mode == "local" else len(eps)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(4):
        xb, yb = rng.normal(size=(8, 4)).astype("float32"), rng.normal(size=(8, 1)).astype("float32")
        part = slice(rank * 8 // n, (rank + 1) * 8 // n)
        loss, = exe.run(main, feed={"x": xb[part], "y": yb[part]}, fetch_list=[cost])
        losses.append(float(loss[0]))
    scope = fluid.global_scope()
    values = {p: np.array(scope.find_var(p).get_tensor()) for p in params}
    exe.close()
    np.savez(out, losses=np.array(losses), **values)
""")


@pytest.mark.parametrize("mode, ports", [("grad_allreduce", (7460, 7461)), ("local_sgd", (7462, 7463))])
def test_two_processes_over_127_0_0_1_equal_one(tmp_path, mode, ports):
    """Fluid's collective script shape, in two real processes talking over 127.0.0.1."""
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env["PYTHONPATH"] = REPO + os.pathsep + env.get("PYTHONPATH", "")
    env["PLACEGROUP_START_TIMEOUT"] = str(60 * TIME_FACTOR)
    eps = ",".join(f"127.0.0.1:{p}" for p in ports)
    runs = [(mode, str(r)) for r in range(2)] + [("local", "0")]
    procs = [subprocess.Popen([sys.executable, str(script), m, r, str(tmp_path / f"{m}{r}.npz"), eps], env=env,
                              cwd=str(tmp_path), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for m, r in runs]
    logs = []
    try:
        for p in procs:
            logs.append(p.communicate(timeout=120 * TIME_FACTOR)[0])
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert [p.returncode for p in procs] == [0, 0, 0], "\n".join(logs)
    ref = np.load(tmp_path / "local0.npz")
    got = [np.load(tmp_path / f"{mode}{r}.npz") for r in range(2)]
    np.testing.assert_allclose(np.mean([g["losses"] for g in got], axis=0), ref["losses"], rtol=1e-5, atol=1e-6)
    for name in ref.files:
        if name != "losses":
            for g in got:
                np.testing.assert_allclose(g[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)


# -- the names at Fluid's paths ------------------------------------------------------------------------

def test_names_at_fluids_paths():
    from placegroup.compat import alias_paddle

    alias_paddle()
    import paddle.fluid.debugger as d
    import paddle.fluid.graphviz as gv
    import paddle.fluid.net_drawer as nd
    import paddle.fluid.transpiler.collective as col
    import paddle.fluid.transpiler.details as det
    import paddle.fluid.transpiler.details.checkport as cp
    import paddle.fluid.transpiler.distribute_transpiler as pdt

    assert d.GraphPreviewGenerator is gv.GraphPreviewGenerator is graphviz.GraphPreviewGenerator
    assert nd.Graph is gv.Graph and d.repr_var is debugger.repr_var
    assert col.wait_server_ready is det.wait_server_ready is cp.wait_server_ready is wait_server_ready
    assert pdt.slice_variable is dt.slice_variable and pdt.VarBlock is dt.VarBlock and pdt.log is dt.log
    assert det.UnionFind is UnionFind and col.GradAllReduce is GradAllReduce
    assert pdt.delete_ops is delete_ops and pdt.find_op_by_output_arg is find_op_by_output_arg
