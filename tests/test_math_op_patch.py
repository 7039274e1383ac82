"""Python operators on Variables (placegroup/layers/math_op_patch.py): for each form, the ops it
appends (types; scale, bias and axis attrs), its output dtype and its values against numpy, and,
marked ``paddle``, against Fluid 1.8.5 itself (``PLACEGROUP_PADDLE18_PYTHON``): the same op
types and attrs, the same dtypes, and values equal within rtol 1e-6."""
from __future__ import annotations

import textwrap
from typing import Callable, NamedTuple

import numpy as np
import pytest

import placegroup as fluid
from placegroup.layers.math_op_patch import monkey_patch_variable
from tests.paddle_ref.reference import run_reference

# x, y: float32 [-1, 3]; s: float32 [2, 3] (no -1 dim); xi: int64 [-1, 3]
FEED = {
    "x": np.array([[0.5, 1.5, 2.0], [3.0, 1.25, 4.0]], "float32"),
    "y": np.array([[1.0, 2.0, -0.5], [0.25, 3.0, 1.5]], "float32"),
    "s": np.array([[2.0, -4.0, 0.5], [1.0, 8.0, -0.25]], "float32"),
    "xi": np.array([[7, -7, 3], [-4, 5, 9]], "int64"),
}
DATA = {"x": ([None, 3], "float32"), "y": ([None, 3], "float32"), "s": ([2, 3], "float32"),
        "xi": ([None, 3], "int64")}


def _trunc_div(a, b):
    return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)


def fill(shape, value, dtype="float32"):
    return ("fill_constant", {"shape": shape, "value": value, "dtype": dtype})


def batch_fill(value, dtype="float32"):
    return ("fill_constant_batch_size_like", {"shape": [-1, 3], "value": value, "input_dim_idx": 0,
                                              "output_dim_idx": 0, "dtype": dtype})


def scale(s, b):
    return ("scale", {"scale": s, "bias": b})


def op(type_, axis):
    return (type_, {"axis": axis})


class Form(NamedTuple):
    """One operator form: Python source over the vars of DATA, the ops it appends (type, and
    the attrs checked), the output dtype, numpy's value on FEED."""
    fid: str
    expr: str
    ops: list
    dtype: str
    ref: Callable[[dict], np.ndarray]


X, Y, S, XI = (FEED[k] for k in ("x", "y", "s", "xi"))
FORMS = [
    # a Python number on + - * /: one scale op
    Form("add_int", "x + 2", [scale(1.0, 2.0)], "float32", lambda d: X + 2),
    Form("add_float", "x + 0.5", [scale(1.0, 0.5)], "float32", lambda d: X + 0.5),
    Form("radd", "2 + x", [scale(1.0, 2.0)], "float32", lambda d: 2 + X),
    Form("sub", "x - 1.5", [scale(1.0, -1.5)], "float32", lambda d: X - 1.5),
    Form("rsub", "3 - x", [scale(-1.0, 3.0)], "float32", lambda d: 3 - X),
    Form("mul", "x * 3", [scale(3.0, 0.0)], "float32", lambda d: X * 3),
    Form("rmul", "2.5 * x", [scale(2.5, 0.0)], "float32", lambda d: 2.5 * X),
    Form("div", "x / 4", [scale(0.25, 0.0)], "float32", lambda d: X / 4),
    Form("neg", "-x", [scale(-1.0, 0.0)], "float32", lambda d: -X),
    Form("bool_number", "x + True", [scale(1.0, 1.0)], "float32", lambda d: X + 1),
    Form("chain", "(x * 2 + 1) / 4", [scale(2.0, 0.0), scale(1.0, 1.0), scale(0.25, 0.0)], "float32",
         lambda d: (X * 2 + 1) / 4),
    Form("int_add_float", "xi + 2.0", [scale(1.0, 2.0)], "int64", lambda d: XI + 2),
    Form("int_mul", "xi * 3", [scale(3.0, 0.0)], "int64", lambda d: XI * 3),
    Form("int_rsub", "5 - xi", [scale(-1.0, 5.0)], "int64", lambda d: 5 - XI),
    # x / v on ints: the elementwise path, integer division (towards zero, as C++)
    Form("int_div", "xi / 2", [fill([1], 2.0, "int64"), op("elementwise_div", -1)], "int64",
         lambda d: _trunc_div(XI, np.int64(2))),
    # a number that is not a Python int or float (numpy.float32): a [1] constant on the right
    Form("numpy_number", "x + np.float32(0.5)", [fill([1], 0.5), op("elementwise_add", -1)], "float32",
         lambda d: X + np.float32(0.5)),
    # two Variables: axis 0 when Y's first dim is -1
    Form("var_add", "x + y", [op("elementwise_add", 0)], "float32", lambda d: X + Y),
    Form("var_sub", "x - y", [op("elementwise_sub", 0)], "float32", lambda d: X - Y),
    Form("var_mul", "x * y", [op("elementwise_mul", 0)], "float32", lambda d: X * Y),
    Form("var_div", "x / y", [op("elementwise_div", 0)], "float32", lambda d: X / Y),
    Form("var_static_y", "x + s", [op("elementwise_add", -1)], "float32", lambda d: X + S),
    Form("var_cast", "x + xi", [("cast", {"out_dtype": "float32"}), op("elementwise_add", 0)], "float32",
         lambda d: X + XI.astype("float32")),
    # a number on the left: a constant of x's shape (batch-size-like when x has a -1 dim)
    Form("rtruediv", "1 / x", [batch_fill(1.0), op("elementwise_div", 0)], "float32", lambda d: 1 / X),
    Form("rtruediv_static", "1 / s", [fill([2, 3], 1.0), op("elementwise_div", -1)], "float32", lambda d: 1 / S),
    Form("rpow", "2 ** x", [batch_fill(2.0), op("elementwise_pow", 0)], "float32", lambda d: 2 ** X),
    Form("rpow_static", "2 ** s", [fill([2, 3], 2.0), op("elementwise_pow", -1)], "float32", lambda d: 2 ** S),
    # ** // %: the elementwise path, a [1] constant on the right
    Form("pow", "x ** 2", [fill([1], 2.0), op("elementwise_pow", -1)], "float32", lambda d: X ** 2),
    Form("pow_var", "x ** y", [op("elementwise_pow", 0)], "float32", lambda d: X ** Y),
    Form("floordiv", "xi // 2", [fill([1], 2.0, "int64"), op("elementwise_floordiv", -1)], "int64",
         lambda d: _trunc_div(XI, np.int64(2))),
    Form("mod_int", "xi % 3", [fill([1], 3.0, "int64"), op("elementwise_mod", -1)], "int64",
         lambda d: np.fmod(XI, 3)),
    Form("mod_float", "y % 0.75", [fill([1], 0.75), op("elementwise_mod", -1)], "float32",
         lambda d: np.mod(Y, np.float32(0.75))),
    # comparisons: bool
    Form("lt", "x < 1.5", [fill([1], 1.5), op("less_than", -1)], "bool", lambda d: X < 1.5),
    Form("le_var", "x <= y", [op("less_equal", 0)], "bool", lambda d: X <= Y),
    Form("gt", "x > 2", [fill([1], 2.0), op("greater_than", -1)], "bool", lambda d: X > 2),
    Form("ge", "x >= 1.5", [fill([1], 1.5), op("greater_equal", -1)], "bool", lambda d: X >= 1.5),
    Form("reflected_lt", "1.5 < x", [fill([1], 1.5), op("greater_than", -1)], "bool", lambda d: 1.5 < X),
    Form("int_lt", "xi < 3", [fill([1], 3.0, "int64"), op("less_than", -1)], "bool", lambda d: XI < 3),
    # astype
    Form("astype", "x.astype('int32')", [("cast", {"out_dtype": "int32"})], "int32", lambda d: X.astype("int32")),
    Form("astype_np", "xi.astype(np.float64)", [("cast", {"out_dtype": "float64"})], "float64",
         lambda d: XI.astype("float64")),
]



def _data():
    return {name: fluid.data(name=name, shape=shape, dtype=dtype) for name, (shape, dtype) in DATA.items()}


def _build(expr: str):
    """(main program, out var, the ops ``expr`` appended) in a fresh program."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        env = _data()
        before = len(main.global_block().ops)
        out = eval(expr, {"np": np, "L": fluid.layers, **env})  # noqa: S307  (the table's own source)
    return main, out, main.global_block().ops[before:]


def _run(main, outs):
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {k: v for k, v in FEED.items() if main.global_block().has_var(k)}
    return [np.asarray(v) for v in exe.run(main, feed=feed, fetch_list=outs)]


@pytest.mark.parametrize("form", FORMS, ids=[f.fid for f in FORMS])
def test_ops_appended(form):
    _, out, ops = _build(form.expr)
    assert [o.type for o in ops] == [t for t, _ in form.ops]
    for o, (_, attrs) in zip(ops, form.ops):
        got = {k: o.attrs[k] for k in attrs}
        assert got == attrs, (o.type, got, attrs)  # the table's scales are exact in binary
    assert out.dtype == form.dtype
    assert ops[-1].outputs["Out"] == [out.name]


@pytest.mark.parametrize("form", FORMS,
                         ids=[f.fid for f in FORMS])
def test_values_match_numpy(form):
    main, out, _ = _build(form.expr)
    got, = _run(main, [out])
    want = np.asarray(form.ref(FEED))
    assert got.dtype == want.dtype == np.dtype(form.dtype)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_eq_and_ne_keep_python_identity():
    # NOTE(variable-eq): no equal/not_equal op; == is identity, so `in` and dict lookups work
    main, out, ops = _build("(x == y, x == x, x != y, x in [y, x], {x: 1}[x])")
    assert out == (False, True, True, True, 1) and ops == []
    main, out, ops = _build("L.equal(x, y)")
    assert [o.type for o in ops] == ["equal"] and out.dtype == "bool"


@pytest.mark.parametrize("expr,exc,match", [
    ("xi + 0.5", ValueError, "not a whole number"),
    ("xi * 2.5", ValueError, "not a whole number"),
    ("x / 0", ZeroDivisionError, "zero divisor"),
    ("x + [1, 2]", TypeError, "Variable or a Python number"),
    ("x + 'a'", TypeError, "Python number"),
    ("list(x)", TypeError, "not iterable"),
])
def test_errors(expr, exc, match):
    with pytest.raises(exc, match=match):
        _build(expr)


def test_ops_go_to_the_current_block_of_the_vars_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
    n_default = len(fluid.default_main_program().global_block().ops)
    y = (x + 1) * x
    assert [o.type for o in main.global_block().ops] == ["scale", "elementwise_mul"]
    assert len(fluid.default_main_program().global_block().ops) == n_default
    got, = _run(main, [y])
    np.testing.assert_allclose(got, (X + 1) * X, rtol=1e-6)


def test_constants_stop_gradient_and_grads_flow():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        x.stop_gradient = False
        out = 1 / x - x * 3 + x ** 2
        g, = fluid.gradients([fluid.layers.reduce_sum(out)], [x])
    consts = [main.global_block().var(o.outputs["Out"][0]) for o in main.global_block().ops
              if o.type in ("fill_constant", "fill_constant_batch_size_like")]
    assert consts and all(v.stop_gradient for v in consts)
    got, = _run(main, [g])
    np.testing.assert_allclose(got, -1 / X ** 2 - 3 + 2 * X, rtol=1e-5)


def test_monkey_patch_is_idempotent():
    monkey_patch_variable()
    monkey_patch_variable()
    main, out, ops = _build("x * 2 + 1")
    assert [o.type for o in ops] == ["scale", "scale"]
    got, = _run(main, [out])
    np.testing.assert_array_equal(got, X * 2 + 1)


# -- against Fluid 1.8.5 ---------------------------------------------------------------------

FLUID18_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle.fluid as fluid
    spec = json.loads(sys.argv[1])
    d = np.load(spec["data"])
    feed = {k: d[k] for k in d.files}
    res = {}
    for fid, expr in spec["forms"]:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            env = {k: fluid.data(name=k, shape=s, dtype=t) for k, (s, t) in spec["vars"].items()}
            before = len(main.global_block().ops)
            out = eval(expr, dict(np=np, **env))
        ops = main.global_block().ops[before:]
        res[fid + "/types"] = np.array([o.type for o in ops])
        res[fid + "/attrs"] = np.array([[o.attr(k) if o.has_attr(k) else np.nan for k in ("scale", "bias", "axis")]
                                        for o in ops], "float64")
        res[fid + "/dtype"] = np.array(str(out.dtype).split(".")[-1])
        exe = fluid.Executor(fluid.CPUPlace())
        res[fid + "/value"] = np.asarray(exe.run(main, feed=feed, fetch_list=[out])[0])
    np.savez(spec["out"], **res)
""")

# Fluid's VarType names for the dtypes of FORMS
FLUID_DTYPES = {"float32": "FP32", "float64": "FP64", "int32": "INT32", "int64": "INT64", "bool": "BOOL"}


@pytest.mark.paddle
def test_forms_match_fluid18(fluid18_python, tmp_path):
    ref = run_reference(fluid18_python, FLUID18_SCRIPT, tmp_path, FEED, timeout=300, cwd=tmp_path,
                        forms=[(f.fid, f.expr) for f in FORMS], vars=DATA)
    for form in FORMS:
        main, out, ops = _build(form.expr)
        assert [o.type for o in ops] == list(ref[f"{form.fid}/types"]), form.fid
        ours = np.array([[o.attrs.get(k, np.nan) for k in ("scale", "bias", "axis")] for o in ops], "float64")
        # Fluid keeps float attrs as float32 (1/3 -> 0.33333334)
        np.testing.assert_array_equal(ours.astype("float32"), ref[f"{form.fid}/attrs"].astype("float32"),
                                      err_msg=form.fid)
        assert FLUID_DTYPES[out.dtype] == str(ref[f"{form.fid}/dtype"]), form.fid
        want = ref[f"{form.fid}/value"]
        got, = _run(main, [out])
        assert got.dtype == want.dtype and got.shape == want.shape, form.fid
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=form.fid)
