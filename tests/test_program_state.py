"""fluid.io.save / load / load_program_state / set_program_state (Fluid 1.8's .pdparams, .pdopt,
.pdmodel in placegroup's var format): round trips that resume training exactly, var_list and
the save_vars fallback, and errors naming the var and both shapes, or the pickle."""
import os

import numpy as np
import pytest

import placegroup as fluid
from placegroup.tools.compat_names import FLUID_18
from placegroup.errors import SerializationError
from placegroup.io import ProgramStateError

STEPS = 6


def build(size=1, lr=0.05):
    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1])
    hidden = fluid.layers.fc(input=x, size=size)
    pred = fluid.layers.fc(input=hidden, size=1) if size != 1 else hidden
    avg = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    fluid.optimizer.Adam(learning_rate=lr).minimize(avg)
    return avg


def batches(seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((8, 13)).astype("float32"),
             "y": rng.standard_normal((8, 1)).astype("float32")} for _ in range(STEPS)]


def run(exe, main, avg, feeds):
    return [exe.run(main, feed=f, fetch_list=[avg])[0].item() for f in feeds]


@pytest.fixture
def model(fresh_programs):
    """An Adam-trained model and the losses of an uninterrupted run, from a fresh start."""
    main, startup = fresh_programs
    avg = build()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    init = {v.name: np.array(fluid.global_scope().find_var(v.name).get_tensor())
            for v in fluid.io.get_program_persistable_vars(main)}
    want = run(exe, main, avg, batches())
    fluid.io.set_program_state(main, init)  # back to the start for the test
    return main, startup, avg, exe, want


def test_program_vars_lists(model):
    main = model[0]
    assert [v.name for v in fluid.io.get_program_parameter(main)] == ["fc_0.w_0", "fc_0.b_0"]
    names = {v.name for v in fluid.io.get_program_persistable_vars(main)}
    assert {"fc_0.w_0", "fc_0.b_0", "learning_rate_0"} <= names
    assert any("moment1" in n for n in names) and "x" not in names


def test_save_then_load_resumes_training_exactly(model, tmp_path):
    main, startup, avg, exe, want = model
    feeds = batches()
    assert run(exe, main, avg, feeds[:3]) == want[:3]
    prefix = str(tmp_path / "ckpt" / "model")
    fluid.io.save(main, prefix)
    for suffix in (".pdparams", ".pdopt", ".pdmodel"):
        assert os.path.isfile(prefix + suffix)
    run(exe, main, avg, batches(seed=1)[:2])  # wander off, then come back
    fluid.io.load(main, prefix, exe)
    assert run(exe, main, avg, feeds[3:]) == want[3:]
    fluid.io.load(main, prefix + ".pdparams", exe)  # a suffix is dropped, as in 1.8
    assert run(exe, main, avg, feeds[3:]) == want[3:]
    prog = fluid.io.load_program(prefix + ".pdmodel")
    assert [op.type for op in prog.global_block().ops] == [op.type for op in main.global_block().ops]


def test_load_program_state_and_set_program_state(model, tmp_path):
    main, startup, avg, exe, want = model
    feeds = batches()
    run(exe, main, avg, feeds[:3])
    fluid.io.save(main, str(tmp_path / "m"))
    state = fluid.io.load_program_state(str(tmp_path / "m"))
    persist = {v.name for v in fluid.io.get_program_persistable_vars(main)}
    assert set(state) == persist and all(isinstance(a, np.ndarray) for a in state.values())
    assert state["fc_0.w_0"].shape == (13, 1) and state["fc_0.w_0"].dtype == np.float32
    run(exe, main, avg, batches(seed=2)[:2])
    fluid.io.set_program_state(main, state)
    assert run(exe, main, avg, feeds[3:]) == want[3:]


def test_a_converted_npz_is_read_without_pickle(model, tmp_path):
    main, startup, avg, exe, want = model
    feeds = batches()
    run(exe, main, avg, feeds[:3])
    state = {v.name: np.array(fluid.global_scope().find_var(v.name).get_tensor())
             for v in fluid.io.get_program_persistable_vars(main)}
    np.savez(tmp_path / "paddle_model.npz", **state)
    run(exe, main, avg, batches(seed=3)[:1])
    fluid.io.set_program_state(main, fluid.io.load_program_state(str(tmp_path / "paddle_model.npz")))
    assert run(exe, main, avg, feeds[3:]) == want[3:]


def test_save_vars_output_with_var_list(model, tmp_path):
    main, startup, avg, exe, want = model
    feeds = batches()
    run(exe, main, avg, feeds[:3])
    fluid.io.save_persistables(exe, str(tmp_path / "dir"), main)
    fluid.io.save_persistables(exe, str(tmp_path), main, filename="all.pgv")
    run(exe, main, avg, batches(seed=4)[:2])
    fluid.io.load(main, str(tmp_path / "dir"), exe)  # a directory of per-var files
    assert run(exe, main, avg, feeds[3:]) == want[3:]

    persist = fluid.io.get_program_persistable_vars(main)
    with pytest.raises(ValueError, match="var_list must name"):
        fluid.io.load(main, str(tmp_path / "all.pgv"), exe)
    with pytest.raises(ValueError, match="executor is needed"):
        fluid.io.load(main, str(tmp_path / "all.pgv"))
    run(exe, main, avg, batches(seed=4)[:2])
    fluid.io.load(main, str(tmp_path / "all.pgv"), exe, var_list=persist)
    assert run(exe, main, avg, feeds[3:]) == want[3:]

    w = main.global_block().var("fc_0.w_0")
    one = fluid.io.load_program_state(str(tmp_path / "all.pgv"), var_list=[w])
    assert list(one) == ["fc_0.w_0"]
    whole = fluid.io.load_program_state(str(tmp_path / "dir"))
    assert set(whole) == {v.name for v in persist}
    with pytest.raises(ValueError, match="var_list must name"):
        fluid.io.load_program_state(str(tmp_path / "all.pgv"))
    with pytest.raises(FileNotFoundError, match="nope.pdparams"):
        fluid.io.load_program_state(str(tmp_path / "nope"))


def test_wrong_shapes_name_the_var_and_both_shapes(model, tmp_path):
    main, startup, avg, exe, want = model
    good = {v.name: np.array(fluid.global_scope().find_var(v.name).get_tensor())
            for v in fluid.io.get_program_parameter(main)}
    bad = dict(good, **{"fc_0.w_0": np.zeros((13, 2), np.float32)})
    with pytest.raises(ProgramStateError, match=r"'fc_0.w_0' has shape \[13, 1\] in the program, "
                                                r"the state gives \[13, 2\]"):
        fluid.io.set_program_state(main, bad)
    with pytest.raises(ProgramStateError, match=r"'fc_0.b_0' is float32 .* gives float64"):
        fluid.io.set_program_state(main, dict(good, **{"fc_0.b_0": np.zeros(1)}))
    with pytest.warns(UserWarning, match="not_a_var"):
        fluid.io.set_program_state(main, dict(good, not_a_var=np.zeros(1)))

    # A checkpoint of another architecture: fc_0 is 13 x 4 there.
    other_main, other_startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(other_main, other_startup), fluid.unique_name.guard(), \
            fluid.scope_guard(fluid.Scope()):
        build(size=4)
        exe.run(other_startup)
        fluid.io.save(other_main, str(tmp_path / "other"))
    before = np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor())
    with pytest.raises(ProgramStateError, match=r"'fc_0.w_0'.*other.pdparams has shape \[13, 4\], "
                                                r"but the program declares \[13, 1\]"):
        fluid.io.load(main, str(tmp_path / "other"), exe)
    np.testing.assert_array_equal(np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor()),
                                  before)  # nothing was set


def test_missing_var_and_missing_startup(model, tmp_path, fresh_programs):
    main, startup, avg, exe, want = model
    fluid.io.save(main, str(tmp_path / "m"))
    with fluid.scope_guard(fluid.Scope()):
        with pytest.raises(ProgramStateError, match="'fc_0.w_0' has no value.*startup"):
            fluid.io.set_program_state(main, fluid.io.load_program_state(str(tmp_path / "m")))
        with pytest.raises(ProgramStateError, match="run the startup program"):
            fluid.io.save(main, str(tmp_path / "empty"))
    os.remove(tmp_path / "m.pdopt")
    with pytest.raises(FileNotFoundError, match=r"m\.pdopt is missing"):
        fluid.io.load(main, str(tmp_path / "m"), exe)
    with pytest.raises(ValueError, match="no file name"):
        fluid.io.save(main, str(tmp_path) + os.sep)


def test_a_paddle_pickle_is_refused_and_says_how_to_convert(model, tmp_path):
    main, startup, avg, exe, want = model
    # The first bytes of what Paddle 1.8's fluid.io.save writes: pickle protocol 2 of a dict.
    (tmp_path / "paddle.pdparams").write_bytes(b"\x80\x02}q\x00(X\x08\x00\x00\x00fc_0.w_0q\x01.")
    for call in (lambda: fluid.io.load_program_state(str(tmp_path / "paddle")),
                 lambda: fluid.io.load(main, str(tmp_path / "paddle"), exe)):
        with pytest.raises(SerializationError) as e:
            call()
        msg = str(e.value)
        assert "paddle.pdparams is a Python pickle" in msg and "does not load pickles" in msg
        assert "np.savez" in msg and "paddle.npz" in msg


def test_a_damaged_state_file_names_the_file(model, tmp_path):
    main, startup, avg, exe, want = model
    fluid.io.save(main, str(tmp_path / "m"))
    path = tmp_path / "m.pdparams"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(SerializationError, match=r"m\.pdparams.*checksum mismatch"):
        fluid.io.load_program_state(str(tmp_path / "m"))


def test_fluid_io_has_fluid_18_names():
    missing = sorted(n for n in FLUID_18["fluid.io"] if not hasattr(fluid.io, n))
    assert missing == []
    assert fluid.io.batch is fluid.batch and fluid.io.shuffle is fluid.reader.shuffle
