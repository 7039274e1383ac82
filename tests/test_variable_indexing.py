"""``x[...]`` on a Variable (placegroup/layers/indexing.py), shapes read at run time
(NOTE(run-time-ints) in ops/tensor.py) and ``fluid.core.LoDTensorArray``.

Each indexing form is checked against numpy (values, and the gradient of sum(out * cot)),
and, marked ``paddle``, against Fluid 1.8.5 itself (``PLACEGROUP_PADDLE18_PYTHON``)."""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from tests.paddle_ref.reference import run_reference

L = fluid.layers
X = np.arange(24, dtype="float32").reshape(4, 6) / 7.0

# (id, the index as Python source over `x` (a [-1, 6] float32 var) and `c(v)` (an int32 [1]
# constant var), numpy's result of the same index on the [4, 6] value; None: not
# differentiable through this form in Fluid 1.8 either)
FORMS = [
    ("int", "x[0]", lambda a: a[0]),
    ("neg_int", "x[-1]", lambda a: a[-1]),
    ("range", "x[1:3]", lambda a: a[1:3]),
    ("open_end", "x[-2:]", lambda a: a[-2:]),
    ("past_end", "x[1:100]", lambda a: a[1:100]),
    ("column", "x[:, 1]", lambda a: a[:, 1]),
    ("last_column", "x[:, -1]", lambda a: a[:, -1]),
    ("both_ints", "x[1, 2]", lambda a: a[1, 2].reshape(1)),  # every dim dropped: [1], as in Fluid
    ("int_and_range", "x[2, 1:4]", lambda a: a[2, 1:4]),
    ("steps", "x[0:4:2, 1:]", lambda a: a[0:4:2, 1:]),
    ("col_steps", "x[:, 0:6:3]", lambda a: a[:, 0:6:3]),
    ("neg_step", "x[3:0:-1]", lambda a: a[3:0:-1]),
    ("reverse", "x[::-1]", lambda a: a[::-1]),
    ("reverse_cols", "x[:, ::-1]", lambda a: a[:, ::-1]),
    ("reverse_then_int", "x[::-1, 0]", lambda a: a[::-1, 0]),
    ("all", "x[:]", lambda a: a),
    ("var_int", "x[c(2)]", lambda a: a[2]),
    ("var_int64", "x[c(2, 'int64')]", lambda a: a[2]),
    ("var_start", "x[c(1):]", lambda a: a[1:]),
    ("var_stop", "x[:, 1:c(3)]", lambda a: a[:, 1:3]),
    ("var_step", "x[0:4:c(2)]", lambda a: a[0:4:2]),
]


def _build(form: str):
    x = fluid.data(name="x", shape=[None, 6], dtype="float32")
    x.stop_gradient = False

    def c(v, dtype="int32"):
        return L.fill_constant([1], dtype, v)

    return x, eval(form, {"x": x, "c": c, "L": L})  # noqa: S307  (the table's own source)


@pytest.mark.parametrize("fid,form,ref", FORMS, ids=[f[0] for f in FORMS])
def test_index_matches_numpy(fid, form, ref):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x, y = _build(form)
        cot = fluid.data(name="cot", shape=[-1] * len(y.shape), dtype="float32")
        loss = L.reduce_sum(L.elementwise_mul(y, cot)) if y is not x else L.reduce_sum(x * cot)
        gx, = fluid.gradients([loss], [x])
    main.verify()
    want = ref(X)
    c = np.random.default_rng(3).standard_normal(want.shape).astype("float32")
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    got, got_gx = exe.run(main, feed={"x": X, "cot": c}, fetch_list=[y, gx])
    np.testing.assert_array_equal(got, want)
    want_gx = np.zeros_like(X)
    view = ref(want_gx.view())
    if want.shape == (1,) and view.shape == (1,):  # both_ints: a copy, scatter by hand
        want_gx[1, 2] = c[0]
    else:
        view[...] = c  # numpy basic indexing gives a view: write the cotangent through it
    np.testing.assert_allclose(got_gx, want_gx, rtol=1e-6)
    assert all(s in (-1, w) for s, w in zip(y.shape, want.shape)) and len(y.shape) == len(want.shape)


def test_shape_of_batch_as_fill_constant_shape():
    # PaddleRec's multiview_simnet and word2vec (models release/1.8)
    x = fluid.data(name="x", shape=[None, 3], dtype="float32")
    n = fluid.layers.shape(x)[0]
    ones = fluid.layers.fill_constant(shape=[n, 1], dtype="float32", value=1.0)
    assert n.dtype == "int32" and tuple(n.shape) == (1,) and tuple(ones.shape) == (-1, 1)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    for batch in (4, 7):  # read each step: the batch may change
        got_n, got = exe.run(feed={"x": np.zeros((batch, 3), "float32")}, fetch_list=[n, ones])
        np.testing.assert_array_equal(got_n, [batch])
        np.testing.assert_array_equal(got, np.ones((batch, 1), "float32"))


RUN_TIME_SHAPES = [
    ("fill_list", "L.fill_constant(shape=[L.shape(x)[0], 2], dtype='float32', value=3.0)", (4, 2), (-1, 2)),
    ("fill_var", "L.fill_constant(shape=L.shape(x), dtype='float32', value=2.0)", (4, 6), (-1, -1)),
    ("ones", "L.ones(shape=[L.shape(x)[0], 1], dtype='float32')", (4, 1), (-1, 1)),
    ("zeros", "L.zeros(shape=[L.shape(x)[0], 1], dtype='int64')", (4, 1), (-1, 1)),
    ("uniform", "L.uniform_random(shape=[L.shape(x)[0], 2], seed=1)", (4, 2), (-1, 2)),
    ("gaussian", "L.gaussian_random(shape=[L.shape(x)[0], 2], seed=1)", (4, 2), (-1, 2)),
    ("reshape", "L.reshape(x, shape=[L.shape(x)[0], 3, 2])", (4, 3, 2), (-1, 3, 2)),
    ("reshape_copy", "L.reshape(x, shape=[0, L.fill_constant([1], 'int32', 2), -1])", (4, 2, 3), (-1, -1, -1)),
    ("slice_list", "L.slice(x, axes=[0], starts=[L.fill_constant([1], 'int32', 1)], ends=[3])", (2, 6), (-1, 6)),
    ("slice_tensor", "L.slice(x, axes=[0, 1], starts=L.fill_constant([2], 'int32', 1), ends=[3, 4])", (2, 3),
     (-1, -1)),
    ("strided", "L.strided_slice(x, axes=[1], starts=[0], ends=[6], strides=[L.fill_constant([1], 'int32', 2)])",
     (4, 3), (-1, -1)),
]


@pytest.mark.parametrize("fid,form,shape,static", RUN_TIME_SHAPES, ids=[f[0] for f in RUN_TIME_SHAPES])
def test_run_time_shapes(fid, form, shape, static):
    x, y = _build(form)
    assert tuple(y.shape) == static
    fluid.default_main_program().verify()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(fluid.default_startup_program())
    got, = exe.run(feed={"x": X}, fetch_list=[y])
    assert got.shape == shape
    if fid.startswith(("reshape", "slice", "strided")):
        want = {"reshape": X.reshape(4, 3, 2), "reshape_copy": X.reshape(4, 2, 3), "slice_list": X[1:3],
                "slice_tensor": X[1:3, 1:4], "strided": X[:, 0:6:2]}[fid]
        np.testing.assert_array_equal(got, want)


def test_seeded_random_with_run_time_shape_is_deterministic():
    _, y = _build("L.uniform_random(shape=[L.shape(x)[0], 2], seed=5)")
    exe = fluid.Executor(fluid.CPUPlace())
    a, = exe.run(feed={"x": X}, fetch_list=[y])
    b, = exe.run(feed={"x": X}, fetch_list=[y])
    np.testing.assert_array_equal(a, b)
    assert np.all((a >= -1) & (a < 1)) and len(np.unique(a)) == a.size


@pytest.mark.parametrize("form,exc,match", [
    ("x[...]", TypeError, "not an index"),
    ("x[None]", TypeError, "not an index"),
    ("x[[0, 1]]", TypeError, "not an index"),
    ("x[1.0]", TypeError, "not an index"),
    ("x[L.fill_constant([1], 'float32', 1.0)]", TypeError, "must be int32 or int64"),
    ("x[::2]", IndexError, "only the step -1"),
    ("x[0, 1, 2]", ProgramError, "out of range"),
    ("list(x)", TypeError, "not iterable"),
    ("L.fill_constant(shape=[L.fill_constant([1], 'float32', 2.0)], dtype='float32', value=1.0)", TypeError,
     "int32 or int64"),
    ("L.reshape(x, shape=L.shape(x))", ValueError, "one Variable"),
])
def test_refused_forms(form, exc, match):
    with pytest.raises(exc, match=match):
        _build(form)


def test_lod_tensor_array():
    arr = fluid.core.LoDTensorArray()
    assert fluid.LoDTensorArray is fluid.core.LoDTensorArray and not isinstance(arr, list)
    t = fluid.core.LoDTensor()
    t.set(np.ones((2, 3), "float32"), fluid.CPUPlace())
    arr.append(t)
    assert len(arr) == 1 and arr[0] is t and list(arr) == [t]
    arr[0] = t
    with pytest.raises(TypeError, match="holds LoDTensors"):
        arr.append(np.ones(3))
    assert arr._move_to_list() == [t] and len(arr) == 0
    # PaddleRec 1.8.5's check on each fetched value
    x = fluid.data(name="x", shape=[None, 3], dtype="float32")
    y = L.scale(x, 2.0)
    exe = fluid.Executor(fluid.CPUPlace())
    out, = exe.run(feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y], return_numpy=False)
    assert not isinstance(out, fluid.core.LoDTensorArray)


FLUID18_SCRIPT = textwrap.dedent("""
    import json, sys
    import numpy as np
    import paddle.fluid as fluid
    L = fluid.layers
    spec = json.loads(sys.argv[1])
    X = np.load(spec["data"])["x"]
    res = {}
    for fid, form in spec["forms"]:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            x = fluid.data(name="x", shape=[None, 6], dtype="float32")
            x.stop_gradient = False
            c = lambda v, dtype="int32": L.fill_constant([1], dtype, v)
            y = eval(form, {"x": x, "c": c, "L": L})
            fetch = [y]
            if spec["grads"] and y.dtype == x.dtype:
                fetch += fluid.gradients([L.reduce_sum(y * y)], [x])
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(startup)
        for k, v in enumerate(exe.run(main, feed={"x": X}, fetch_list=fetch)):
            res[f"{fid}/{k}"] = np.asarray(v)
    np.savez(spec["out"], **res)
""")


def _ours(form: str, grads: bool) -> list:
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x, y = _build(form)
        fetch = [y]
        if grads and y.dtype == x.dtype:
            fetch += fluid.gradients([L.reduce_sum(y * y)], [x])
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    return [np.asarray(v) for v in exe.run(main, feed={"x": X}, fetch_list=fetch)]


@pytest.mark.paddle
def test_index_and_run_time_shapes_match_fluid18(fluid18_python, tmp_path):
    # var_int64: Fluid 1.8.5 adds an int32 1 to the int64 index and fails; we take it
    forms = [(f, s) for f, s, _ in FORMS if f != "var_int64"]
    shapes = [(f, s) for f, s, _, _ in RUN_TIME_SHAPES if f not in ("uniform", "gaussian")]  # draws differ
    for group, grads in ((forms, True), (shapes, False)):
        ref = run_reference(fluid18_python, FLUID18_SCRIPT, tmp_path, {"x": X}, timeout=600, cwd=tmp_path,
                            forms=group, grads=grads)
        for fid, form in group:
            for k, got in enumerate(_ours(form, grads)):
                want = ref[f"{fid}/{k}"]
                assert got.shape == want.shape, (fid, k)
                np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{fid}/{k}")
