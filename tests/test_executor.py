"""The single-process Executor: feeds, fetches, errors, plan caching and the scope API."""
import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import OpError, ProgramError


def _model():
    x = fluid.layers.data(name="x", shape=[3])
    y = fluid.layers.fc(input=x, size=2, param_attr=fluid.ParamAttr(
        name="w", initializer=fluid.initializer.NumpyArrayInitializer(np.arange(6, dtype=np.float32).reshape(3, 2))))
    return x, y


def test_run_feeds_and_fetches(fresh_programs):
    main, startup = fresh_programs
    x, y = _model()
    exe = fluid.Executor(fluid.CPUPlace())
    assert exe.run(startup) == []
    xs = np.ones((4, 3), np.float64)  # converted to the var's float32
    out, = exe.run(main, feed={"x": xs}, fetch_list=[y])
    assert out.dtype == np.float32 and out.shape == (4, 2)
    np.testing.assert_allclose(out, xs @ np.arange(6).reshape(3, 2))
    out2, = exe.run(main, feed={"x": xs.tolist()}, fetch_list=[y.name])
    np.testing.assert_array_equal(out, out2)


def test_feed_errors_name_the_var(fresh_programs):
    main, startup = fresh_programs
    _model()
    exe = fluid.Executor()
    exe.run(startup)
    with pytest.raises(ProgramError, match=r"feed 'z' is not a var of the program; its data vars are \['x'\]"):
        exe.run(main, feed={"z": np.ones((1, 3))})
    # a fluid.layers.data var takes any shape, as in Fluid 1.8 (NOTE(feed-shape)): the op that
    # meets it names both shapes
    with pytest.raises(OpError, match=r"(?s)While executing op #0 `mul`.*input shapes \{'x': \(4, 5\), 'w': \(3, 2\)\}"):
        exe.run(main, feed={"x": np.ones((4, 5))})
    with pytest.raises(ProgramError, match="fetch 'nope' has no value"):
        exe.run(main, feed={"x": np.ones((1, 3))}, fetch_list=["nope"])


def test_missing_input_and_kernel_failure_are_wrapped(fresh_programs):
    main, startup = fresh_programs
    _model()
    exe = fluid.Executor()
    with pytest.raises(OpError, match=r"While executing op #0 `mul`.*\n  input 'x' has no value"):
        exe.run(main)
    exe.run(startup)
    fluid.global_scope().find_var("w").get_tensor().set(np.ones((5, 2), np.float32), fluid.CPUPlace())
    with pytest.raises(OpError, match=r"(?s)While executing op #0 `mul`.*input shapes .*'w': \(5, 2\)"):
        exe.run(main, feed={"x": np.ones((1, 3))})


def test_plan_is_rebuilt_after_an_edit(fresh_programs):
    main, startup = fresh_programs
    x, y = _model()
    exe = fluid.Executor()
    exe.run(startup)
    feed = {"x": np.ones((1, 3), np.float32)}
    a, = exe.run(main, feed=feed, fetch_list=[y])
    z = y * 10.0  # appends ops: the cached plan must not be reused
    b, c = exe.run(main, feed=feed, fetch_list=[y, z])
    np.testing.assert_allclose(c, 10 * a)


def test_scope_tensor_api(fresh_programs):
    main, startup = fresh_programs
    _model()
    exe = fluid.Executor()
    exe.run(startup)
    scope = fluid.global_scope()
    t = scope.find_var("w").get_tensor()
    assert t.shape() == [3, 2]
    t.set(np.full((3, 2), 2.0, np.float32), fluid.CPUPlace())
    np.testing.assert_array_equal(np.array(t), np.full((3, 2), 2.0))
    assert scope.find_var("not_there") is None
    with pytest.raises(ValueError, match="has no value in this scope"):
        np.array(scope.var("not_there").get_tensor())


def test_cuda_place_without_cupy_or_device_is_a_clear_error():
    if fluid.is_compiled_with_cuda():
        pytest.skip("a CUDA device is present")
    with pytest.raises(RuntimeError, match="CUDAPlace"):
        fluid.Executor(fluid.CUDAPlace(0))
