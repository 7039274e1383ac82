"""placegroup.io (Fluid's fluid.io): checkpoints that resume training exactly, atomic writes,
and errors that name the var and the file."""
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placegroup as fluid
from placegroup.util import var_format
from placegroup.io import var_files as pio
from placegroup.errors import SerializationError
from placegroup.ir.cluster import ClusterSchema
from placegroup.ir.place_group import ExecutorId
from tests.conftest import build_fit_a_line

STEPS = 6


def fit_a_line():
    return build_fit_a_line(0.05)


def batches(seed=0):
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal((8, 13)).astype("float32"),
             "y": rng.standard_normal((8, 1)).astype("float32")} for _ in range(STEPS)]


def train(exe, main, avg, scope, feeds):
    return [exe.run(main, feed=f, fetch_list=[avg], scope=scope)[0].item() for f in feeds]


@pytest.fixture
def trained(fresh_programs):
    """fit_a_line and the losses of an uninterrupted run of STEPS steps."""
    main, startup = fresh_programs
    avg = fit_a_line()
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    return main, startup, avg, exe, train(exe, main, avg, scope, batches())


@pytest.mark.parametrize("filename", [None, "persistables.pgv"])
def test_save_load_persistables_resumes_training_exactly(trained, tmp_path, filename):
    main, startup, avg, exe, want = trained
    feeds = batches()
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    train(exe, main, avg, scope, feeds[:3])
    saved = pio.save_persistables(exe, str(tmp_path), main, filename=filename, scope=scope)
    assert saved == ["fc_0.w_0", "fc_0.b_0", "learning_rate_0"]
    train(exe, main, avg, scope, batches(seed=1)[:2])  # wander off, then come back
    with fluid.scope_guard(scope):  # the executor's scope is global_scope() by default
        assert pio.load_persistables(exe, str(tmp_path), main, filename=filename) == saved
    assert train(exe, main, avg, scope, feeds[3:]) == want[3:]


def test_a_fresh_process_resumes_from_program_and_persistables(trained, tmp_path):
    main, startup, avg, exe, want = trained
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    train(exe, main, avg, scope, batches()[:3])
    fluid.io.save_program(main, str(tmp_path / "ckpt" / "prog.bin"))
    pio.save_persistables(exe, str(tmp_path / "ckpt"), main, scope=scope)
    # Another process: no startup run, the program read back from disk.
    loaded = fluid.io.load_program(str(tmp_path / "ckpt" / "prog.bin"))
    assert str(loaded) == str(main)
    exe2, scope2 = fluid.Executor(), fluid.Scope()
    with fluid.scope_guard(scope2):
        pio.load_persistables(exe2, str(tmp_path / "ckpt"), loaded)
    assert train(exe2, loaded, avg, scope2, batches()[3:]) == want[3:]


def test_the_executor_and_cluster_survive_save_and_load(fresh_programs, tmp_path):
    main, _ = fresh_programs
    fit_a_line()
    main.executor = ExecutorId.parse("trainer", "127.0.0.1:6170", rank=1)
    main.cluster = ClusterSchema(trainers=2, pservers=["127.0.0.1:7164"], sync_mode=True)
    main.provenance = ["merge", "slice", "placement"]
    fluid.io.save_program(main, str(tmp_path / "prog.bin"))
    back = fluid.io.load_program(str(tmp_path / "prog.bin"))
    assert back.executor == main.executor and back.provenance == main.provenance
    assert back.cluster == main.cluster
    assert str(back) == str(main)


def test_params_only(trained, tmp_path):
    main, startup, avg, exe, _ = trained
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    assert pio.save_params(exe, str(tmp_path), main, scope=scope) == ["fc_0.w_0", "fc_0.b_0"]
    assert sorted(os.listdir(tmp_path)) == ["fc_0.b_0", "fc_0.w_0"]
    fresh = fluid.Scope()
    assert pio.load_params(exe, str(tmp_path), main, scope=fresh) == ["fc_0.w_0", "fc_0.b_0"]
    np.testing.assert_array_equal(np.array(fresh.find_var("fc_0.w_0").get_tensor()),
                                  np.array(scope.find_var("fc_0.w_0").get_tensor()))
    with pytest.raises(SerializationError, match=r"var 'learning_rate_0': no file '.*learning_rate_0'"):
        pio.load_persistables(exe, str(tmp_path), main, scope=fluid.Scope())


def test_vars_the_scope_lacks_are_skipped_on_save_and_named_on_load(trained, tmp_path):
    main, _, _, exe, _ = trained
    scope = fluid.Scope()
    scope.var("fc_0.w_0").get_tensor().set(np.ones((13, 1), np.float32))
    assert pio.save_persistables(exe, str(tmp_path), main, filename="all", scope=scope) == ["fc_0.w_0"]
    with pytest.raises(SerializationError, match=r"var 'fc_0.b_0' is not in '.*all', which holds "
                                                 r"\['fc_0.w_0'\]"):
        pio.load_persistables(exe, str(tmp_path), main, filename="all", scope=fluid.Scope())


def test_save_load_vars_by_name_and_predicate(fresh_programs, tmp_path):
    main, _ = fresh_programs
    block = main.global_block()
    values = {"ids": np.arange(12, dtype=np.int64).reshape(3, 4), "mask": np.array([True, False]),
              "step": np.array(7.5), "empty": np.zeros((0, 3), np.float64)}
    scope = fluid.Scope()
    for name, arr in values.items():
        block.create_var(name, shape=arr.shape, dtype=arr.dtype, persistable=True)
        scope.var(name).get_tensor().set(arr)
    assert pio.save_vars(None, str(tmp_path), main, vars=["ids", block.var("mask")],
                         scope=scope) == ["ids", "mask"]
    assert pio.save_vars(None, str(tmp_path), main, predicate=lambda v: v.name in ("step", "empty"),
                         filename="two", scope=scope) == ["step", "empty"]
    back = fluid.Scope()
    pio.load_vars(None, str(tmp_path), main, vars=["ids", "mask"], scope=back)
    pio.load_vars(None, str(tmp_path), main, vars=["step", "empty"], filename="two", scope=back)
    for name, arr in values.items():
        got = np.array(back.find_var(name).get_tensor())
        assert got.dtype == arr.dtype and got.shape == arr.shape
        np.testing.assert_array_equal(got, arr)


@pytest.fixture
def saved(trained, tmp_path):
    """A per-var checkpoint and a combined one of fit_a_line's persistables."""
    main, startup, _, exe, _ = trained
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    pio.save_persistables(exe, str(tmp_path), main, scope=scope)
    pio.save_persistables(exe, str(tmp_path), main, filename="all", scope=scope)
    return main, exe, tmp_path


def _corrupt(path, how):
    data = bytearray(path.read_bytes())
    if how == "truncate":
        data = data[:-3]
    elif how == "flip":
        data[-2] ^= 0x01
    elif how == "magic":
        data[:6] = b"NUMPY!"
    elif how == "stray":
        data += b"x"
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("filename", [None, "all"])
@pytest.mark.parametrize("how,message", [
    ("truncate", r"record \d of \d \(var '[\w.]+'\): truncated: needs \d+ bytes, the file has \d+ left"),
    ("flip", r"record \d of \d \(var '[\w.]+'\): checksum mismatch"),
    ("magic", r"not a placegroup var file: magic is b'NUMPY!'"),
    ("stray", r"1 stray bytes after the last of \d records"),
])
def test_damaged_files_name_the_file(saved, filename, how, message):
    main, exe, tmp_path = saved
    path = tmp_path / (filename or "fc_0.w_0")
    _corrupt(path, how)
    scope = fluid.Scope()
    with pytest.raises(SerializationError, match=message) as err:
        pio.load_persistables(exe, str(tmp_path), main, filename=filename, scope=scope)
    assert str(path) in str(err.value)
    assert scope.local_var_names() == []  # nothing set: every file is checked first


def test_shape_and_dtype_mismatch_against_the_program(saved):
    main, exe, tmp_path = saved
    other, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(other, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[13])
        fluid.layers.fc(input=x, size=2)  # same names, fc_0.w_0 is now [13, 2]
    with pytest.raises(SerializationError, match=r"var 'fc_0.w_0' in '.*fc_0.w_0' has shape \[13, 1\], "
                                                 r"but the program declares \[13, 2\]"):
        pio.load_params(exe, str(tmp_path), other, scope=fluid.Scope())
    main.global_block().var("learning_rate_0").dtype = "float64"
    with pytest.raises(SerializationError, match=r"var 'learning_rate_0' in '.*all' is float32, but "
                                                 r"the program declares float64"):
        pio.load_persistables(exe, str(tmp_path), main, filename="all", scope=fluid.Scope())


def test_a_file_that_holds_another_var(saved):
    main, exe, tmp_path = saved
    os.replace(tmp_path / "fc_0.b_0", tmp_path / "fc_0.w_0")
    with pytest.raises(SerializationError, match=r"'.*fc_0.w_0' holds \['fc_0.b_0'\], not var 'fc_0.w_0'"):
        pio.load_params(exe, str(tmp_path), main, scope=fluid.Scope())


def test_a_slash_in_a_name_makes_subdirectories_as_in_fluid(fresh_programs, tmp_path):
    """Fluid's GRUCell names its parameters ``GRUCell/BasicGRUUnit_0.w_0`` (the book's seq2seq
    saves them with ``save_params``): one file each, in subdirectories, and back."""
    main, _ = fresh_programs
    main.global_block().create_var("GRUCell/BasicGRUUnit_0.w_0", shape=[2], persistable=True)
    scope = fluid.Scope()
    scope.var("GRUCell/BasicGRUUnit_0.w_0").get_tensor().set(np.array([1.0, 2.0], np.float32))
    pio.save_persistables(None, str(tmp_path), main, scope=scope)
    assert (tmp_path / "GRUCell" / "BasicGRUUnit_0.w_0").is_file()
    back = fluid.Scope()
    pio.load_persistables(None, str(tmp_path), main, scope=back)
    np.testing.assert_array_equal(np.array(back.find_var("GRUCell/BasicGRUUnit_0.w_0").get_tensor()), [1.0, 2.0])


@pytest.mark.parametrize("name", ["a/../../b", "/abs", "a//b", "a\\b", "."])
def test_names_that_cannot_be_file_names(fresh_programs, tmp_path, name):
    """A name that would leave the directory, or is no file name, is refused before any file is
    written; one combined file takes any name."""
    main, _ = fresh_programs
    for n in ("fine", name):
        main.global_block().create_var(n, shape=[1], persistable=True)
    scope = fluid.Scope()
    for n in ("fine", name):
        scope.var(n).get_tensor().set(np.ones(1, np.float32))
    with pytest.raises(SerializationError, match=r"cannot be its own file name; save with filename="):
        pio.save_persistables(None, str(tmp_path / "out"), main, scope=scope)
    assert not (tmp_path / "out" / "fine").exists()
    pio.save_persistables(None, str(tmp_path), main, filename="all", scope=scope)  # fine combined


def test_unsaveable_dtype(fresh_programs, tmp_path):
    main, _ = fresh_programs
    main.global_block().create_var("s", shape=[1], persistable=True)
    scope = fluid.Scope()
    scope.vars["s"] = np.array(["text"], dtype=object)
    with pytest.raises(SerializationError, match=r"var 's': cannot save dtype object"):
        pio.save_persistables(None, str(tmp_path), main, scope=scope)


_GOOD = b"".join(bytes(c) for c in var_format.records([("w", np.arange(6, dtype=np.float32)),
                                                   ("n", np.array([1, 2], np.int64))]))


@settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_damaged_var_files_raise_only_serialization_error(data):
    kind = data.draw(st.sampled_from(["random", "truncate", "flip"]))
    if kind == "random":
        blob = var_format.VAR_MAGIC + (1).to_bytes(2, "little") + data.draw(st.binary(max_size=200))
    elif kind == "truncate":
        blob = _GOOD[:data.draw(st.integers(0, len(_GOOD) - 1))]
    else:
        at = data.draw(st.integers(0, len(_GOOD) - 1))
        blob = _GOOD[:at] + bytes([_GOOD[at] ^ data.draw(st.integers(1, 255))]) + _GOOD[at + 1:]
    try:
        got = var_format.parse(blob, "f")
    except SerializationError:
        return
    # Random bytes may happen to spell a valid file (no records); no damaged one may pass.
    assert kind == "random", f"damaged file parsed: {got}"


def test_load_program_errors_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError):
        fluid.io.load_program(str(tmp_path / "missing.bin"))
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"PGPROG\x01\x00")
    with pytest.raises(SerializationError, match=rf"^{bad}: prog.bin is truncated"):
        fluid.io.load_program(str(bad))


@pytest.mark.parametrize("fail_at", ["fsync", "replace"])
def test_a_failed_write_leaves_the_old_file(fresh_programs, tmp_path, monkeypatch, fail_at):
    main, startup = fresh_programs
    fit_a_line()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    prog, ckpt = tmp_path / "prog.bin", tmp_path / "all"
    fluid.io.save_program(startup, str(prog))
    pio.save_persistables(exe, str(tmp_path), main, filename="all", scope=scope)
    os.chmod(prog, 0o600)
    before = {p: p.read_bytes() for p in (prog, ckpt)}
    scope.var("fc_0.b_0").get_tensor().set(np.full(1, 9, np.float32))

    def boom(*a):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, fail_at, boom)
    with pytest.raises(OSError, match="No space left"):
        fluid.io.save_program(main, str(prog))
    with pytest.raises(OSError, match="No space left"):
        pio.save_persistables(exe, str(tmp_path), main, filename="all", scope=scope)
    monkeypatch.undo()
    assert {p: p.read_bytes() for p in (prog, ckpt)} == before
    assert sorted(os.listdir(tmp_path)) == ["all", "prog.bin"]  # no temporary file left behind
    fluid.io.save_program(main, str(prog))
    assert oct(os.stat(prog).st_mode & 0o777) == oct(0o600)  # a replaced file keeps its mode
    assert str(fluid.io.load_program(str(prog))) == str(main)


def test_exposed_as_fluid_io():
    # In a fresh interpreter: this module's own import would make the attribute exist.
    code = ("import placegroup as fluid; "
            "print(all(callable(getattr(fluid.io, n)) for n in fluid.io.__all__))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "True", out.stderr
