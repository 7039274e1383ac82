"""Var files Fluid 1.x saved load here (placegroup/util/fluid_tensor_file.py): one var a file, or
several in one file in the order of their sorted names, as Fluid's save_vars writes them; and
``placegroup run -m MODULE``, the way PaddleRec's own entry is started."""
import os
import struct
import subprocess
import sys

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import SerializationError
from placegroup.util.fluid_tensor_file import parse_fluid
from tests.paddle_ref.reference import run_reference


def _varint(v: int) -> bytes:
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def _stream(arr: np.ndarray, lod=()) -> bytes:
    """A LoDTensor stream as Fluid writes it (its format, from its documentation of SerializeToStream)."""
    code = {"float32": 5, "float64": 6, "int64": 3, "int32": 2}[arr.dtype.name]
    desc = b"\x08" + _varint(code) + b"".join(b"\x10" + _varint(d) for d in arr.shape)
    head = struct.pack("<IQ", 0, len(lod))
    for level in lod:
        head += struct.pack("<Q", 8 * len(level)) + np.asarray(level, "<u8").tobytes()
    return head + struct.pack("<Ii", 0, len(desc)) + desc + np.ascontiguousarray(arr, arr.dtype.newbyteorder("<")).tobytes()


def test_a_fluid_stream_parses_and_bad_ones_are_named():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([5, -1, 7, 0], dtype=np.int64)
    got = parse_fluid(_stream(a, lod=[[0, 1, 2]]) + _stream(b), "f", ["a", "b"])
    np.testing.assert_array_equal(got["a"], a)
    np.testing.assert_array_equal(got["b"], b)
    assert got["a"].dtype == np.float32 and got["b"].dtype == np.int64
    with pytest.raises(SerializationError, match=r"f \(var 'a'\): truncated"):
        parse_fluid(_stream(a)[:-4], "f", ["a"])
    with pytest.raises(SerializationError, match="holds more vars than that"):
        parse_fluid(_stream(a) + _stream(b), "f", ["a"])
    with pytest.raises(SerializationError, match="fewer than the 2 vars"):
        parse_fluid(_stream(a), "f", ["a", "b"])


def _model():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[4], dtype="float32")
        loss = fluid.layers.mean(fluid.layers.fc(fluid.layers.fc(x, 3, act="relu"), 1))
        fluid.optimizer.Adam(0.01).minimize(loss)
    return main, startup, loss


@pytest.mark.parametrize("combined", [False, True])
def test_vars_saved_as_fluid_writes_them_load(tmp_path, combined):
    main, startup, _ = _model()
    names = sorted(v.name for v in main.list_vars() if v.persistable)
    rng = np.random.default_rng(0)
    values = {n: rng.normal(size=[d if d > 0 else 1 for d in main.global_block().var(n).shape]).astype(np.float32)
              for n in names}
    if combined:
        (tmp_path / "all").write_bytes(b"".join(_stream(values[n]) for n in names))
    else:
        for n in names:
            (tmp_path / n).write_bytes(_stream(values[n]))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    with fluid.scope_guard(scope):
        fluid.io.load_persistables(exe, str(tmp_path), main, filename="all" if combined else None)
    for n in names:
        np.testing.assert_array_equal(np.array(scope.find_var(n).get_tensor()), values[n], err_msg=n)


FLUID_SAVE = r'''
import json, sys
import numpy as np
import paddle.fluid as fluid
spec = json.loads(sys.argv[1])
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    x = fluid.layers.data(name="x", shape=[4], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="int64")
    p = fluid.layers.fc(fluid.layers.fc(x, 3, act="relu"), 1)
    loss = fluid.layers.mean(p)
    prob = fluid.layers.sigmoid(p)
    fluid.layers.auc(fluid.layers.concat([1 - prob, prob], 1), y, num_thresholds=63, slide_steps=3)
    fluid.optimizer.Adam(0.01).minimize(loss)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
data = np.load(spec["data"])
for _ in range(2):
    exe.run(main, feed={"x": data["x"], "y": data["y"]})
fluid.io.save_persistables(exe, spec["dir"], main)
fluid.io.save_persistables(exe, spec["dir"] + "_one", main, filename="all")
l, = exe.run(main, feed={"x": data["x"], "y": data["y"]}, fetch_list=[loss])
np.savez(spec["out"], loss=np.array(l))
'''


@pytest.mark.paddle
def test_what_fluid_1_8_5_saved_loads_and_trains_on(tmp_path, fluid18_python):
    """Fluid 1.8.5 trains two steps and saves its persistables (Adam's moments and the auc
    state among them; one file a var, and one file); placegroup loads either into the same
    model and its third step's loss is Fluid's."""
    x = np.random.default_rng(1).normal(size=(6, 4)).astype(np.float32)
    y = (x[:, :1] > 0).astype(np.int64)
    out = run_reference(fluid18_python, FLUID_SAVE, tmp_path, {"x": x, "y": y}, dir=str(tmp_path / "saved"))
    for where, filename in ((tmp_path / "saved", None), (tmp_path / "saved_one", "all")):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup):
            xv = fluid.layers.data(name="x", shape=[4], dtype="float32")
            yv = fluid.layers.data(name="y", shape=[1], dtype="int64")
            p = fluid.layers.fc(fluid.layers.fc(xv, 3, act="relu"), 1)
            loss = fluid.layers.mean(p)
            prob = fluid.layers.sigmoid(p)
            fluid.layers.auc(fluid.layers.concat([1 - prob, prob], 1), yv, num_thresholds=63, slide_steps=3)
            fluid.optimizer.Adam(0.01).minimize(loss)
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        with fluid.scope_guard(scope):
            fluid.io.load_persistables(exe, str(where), main, filename=filename)
            got, = exe.run(main, feed={"x": x, "y": y}, fetch_list=[loss])
        np.testing.assert_allclose(got, out["loss"], rtol=1e-6, err_msg=str(where))


def test_placegroup_run_m_runs_a_module_with_the_paddle_alias(tmp_path):
    pkg = tmp_path / "mypkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "entry.py").write_text("import sys\nimport paddle.fluid as fluid\n"
                                  "print(fluid.__name__, sys.argv[1:], __name__)\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = subprocess.run([sys.executable, "-m", "placegroup", "run", "-m", "mypkg.entry", "-m", "x.yaml"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "placegroup ['-m', 'x.yaml'] __main__"
    bad = subprocess.run([sys.executable, "-m", "placegroup", "run", "nope.py"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "no file 'nope.py'" in bad.stderr and "-m MODULE" in bad.stderr
