"""Fluid 1.8's Dataset pipeline: the MultiSlot parser, DatasetFactory's datasets, data
generators as pipe commands, ``train_from_dataset`` (equal to ``exe.run`` over the same
batches), an unmodified Fluid script under ``placegroup run`` and ``placegroup launch``, and,
with PLACEGROUP_PADDLE18_PYTHON set, the same script under Fluid 1.8.5 itself."""
import io
import os
import re
import sys

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ConfigError, NotImplementedInPlacegroup
from placegroup.datafeed.multislot import MultiSlotFormatError, Slot, parse_text
from placegroup.tools.launch import launch
from tests.conftest import TIME_FACTOR
from tests.paddle_ref.reference import run_python

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT_DIR = os.path.join(HERE, "compat_scripts", "ctr_dataset")
SCRIPT, GEN = os.path.join(SCRIPT_DIR, "train.py"), os.path.join(SCRIPT_DIR, "gen.py")
SLOTS = [Slot("click", "int64", 0, (1,)), Slot("words", "int64", 1, (1,)), Slot("dense", "float32", 0, (2,))]
LOSS = re.compile(r"loss: ([-+0-9.eE]+|nan|inf)")


def _raw_files(tmp_path, lines_per_file=(10, 7), seed=0):
    """Raw lines for gen.py, ``click ids... ; ids...``, in part-0, part-1, ..."""
    rng = np.random.RandomState(seed)
    paths = []
    for f, n in enumerate(lines_per_file):
        rows = [f"{rng.randint(2)} {' '.join(map(str, rng.randint(0, 50, rng.randint(1, 4))))} ; "
                f"{' '.join(map(str, rng.randint(0, 50, rng.randint(1, 3))))}" for _ in range(n)]
        paths.append(tmp_path / f"part-{f}")
        paths[-1].write_text("\n".join(rows) + "\n")
    return [str(p) for p in paths]


def test_parser_reads_ids_floats_lod_and_fixed_width_vars():
    inst = parse_text("1 0 3 12 7 9 2 0.5 1.5\n\n1 1 1 4 2 -1 2e3\n", SLOTS, "part-0")
    feed = inst.feed(SLOTS, np.array([1, 0]))
    assert feed["click"].dtype == np.int64 and feed["click"].tolist() == [[1], [0]]
    assert feed["words"].data.tolist() == [[4], [12], [7], [9]]
    assert feed["words"].recursive_sequence_lengths() == [[1, 3]]
    assert feed["dense"].dtype == np.float32 and feed["dense"].tolist() == [[-1.0, 2000.0], [0.5, 1.5]]


@pytest.mark.parametrize("line, why", [
    ("1 0 3 12 7 9 2 0.5 x", r"var 'dense' \(float32\) has value 'x'"),
    ("1 0 1 a 2 0.5 1", r"var 'words' \(int64\) has value 'a'"),
    ("1 0 3 12 7 9 3 0.5 1 1", r"var 'dense' is lod_level=0 with 2 values .* gives 3"),
    ("1 0 0 2 0.5 1", r"var 'words' has count 0"),
    ("1 0 3 1 2", r"var 'words' has count 3 but only 2 values follow"),
    ("1 0 1 3 2 1 1 7", r"1 values are left after the last var 'dense'"),
    ("1 0 1 3", r"the line ends before var 'dense'"),
])
def test_a_bad_line_is_an_error_naming_file_and_line(line, why):
    with pytest.raises(MultiSlotFormatError, match=r"^part-7, line 2: " + why):
        parse_text("1 0 3 12 7 9 2 0.5 1.5\n" + line + "\n", SLOTS, "part-7")


def _ctr(main, startup):
    """The small CTR model of the Fluid script, in ``main``/``startup``: (vars, loss)."""
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        click = fluid.layers.data(name="click", shape=[1], dtype="int64")
        slots = [fluid.layers.data(name=n, shape=[1], dtype="int64", lod_level=1) for n in ("slot1", "slot2")]
        pooled = [fluid.layers.sequence_pool(fluid.layers.embedding(s, size=[50, 4], param_attr=f"emb{i}"), "sum")
                  for i, s in enumerate(slots)]
        logits = fluid.layers.fc(fluid.layers.concat(pooled, axis=1), 2)
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, click))
        fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)
    return [click, *slots], loss


def _dataset(kind, use_vars, files, batch_size=4):
    ds = fluid.DatasetFactory().create_dataset(kind)
    ds.set_use_var(use_vars)
    ds.set_batch_size(batch_size)
    ds.set_thread(2)
    ds.set_pipe_command(f"{sys.executable} -m placegroup run {GEN}")  # gen.py imports paddle
    ds.set_filelist(files)
    return ds


def test_a_data_generator_as_pipe_command_over_two_files(tmp_path):
    files = _raw_files(tmp_path)
    use_vars, _ = _ctr(fluid.Program(), fluid.Program())
    batches = list(_dataset("QueueDataset", use_vars, files).batches())
    assert [len(b["click"]) for b in batches] == [4, 4, 4, 4, 1]  # 17 lines; batches span the files
    first = open(files[0]).readline().split(";")
    click, *ids = map(int, first[0].split())
    assert batches[0]["click"][0, 0] == click
    lens = batches[0]["slot1"].recursive_sequence_lengths()[0]
    assert batches[0]["slot1"].data[:lens[0], 0].tolist() == ids
    assert batches[0]["slot2"].data[:len(first[1].split()), 0].tolist() == list(map(int, first[1].split()))


def test_a_python_pipe_command_runs_with_placegroups_interpreter(tmp_path, monkeypatch):
    """``python gen.py`` runs with sys.executable even where the first ``python`` on PATH
    cannot import placegroup (NOTE(pipe-python))."""
    decoy = tmp_path / "bin"
    decoy.mkdir()
    for name in ("python", "python3"):
        (decoy / name).write_text("#!/bin/sh\necho 'No module named placegroup' >&2\nexit 7\n")
        (decoy / name).chmod(0o755)
    monkeypatch.setenv("PATH", f"{decoy}{os.pathsep}{os.environ['PATH']}")
    gen = tmp_path / "gen.py"
    gen.write_text("import sys\nimport placegroup  # noqa: F401\nsys.stdout.write(sys.stdin.read())\n")
    data = tmp_path / "part-0"
    data.write_text("1 1 2 3 4 1 7\n1 0 1 5 1 6\n")  # click, slot1 (2 ids), slot2 (1 id)
    use_vars, _ = _ctr(fluid.Program(), fluid.Program())
    monkeypatch.chdir(tmp_path)
    for command in ("python gen.py", "  python3 gen.py | cat"):
        ds = fluid.DatasetFactory().create_dataset("QueueDataset")
        ds.set_use_var(use_vars)
        ds.set_batch_size(2)
        ds.set_pipe_command(command)
        ds.set_filelist([str(data)])
        batch, = list(ds.batches())
        assert batch["click"].tolist() == [[1], [0]], command
    ds.set_pipe_command("sh -c 'python gen.py'")  # only the command's own program is replaced
    with pytest.raises(ConfigError, match="exited with 7: No module named placegroup"):
        list(ds.batches())


def test_train_from_dataset_equals_exe_run_over_the_same_batches(tmp_path, capsys):
    files = _raw_files(tmp_path)
    results = []
    for by_hand in (False, True):
        main, startup, scope = fluid.Program(), fluid.Program(), fluid.Scope()
        use_vars, loss = _ctr(main, startup)
        main.random_seed = startup.random_seed = 7
        exe = fluid.Executor(fluid.CPUPlace())
        ds = _dataset("QueueDataset", use_vars, files)
        with fluid.scope_guard(scope):
            exe.run(startup)
            if by_hand:
                losses = [float(exe.run(main, feed=b, fetch_list=[loss])[0][0]) for b in ds.batches()]
            else:
                assert exe.train_from_dataset(main, ds, fetch_list=[loss], fetch_info=["loss"], print_period=1) is None
                losses = [float(m.group(1)) for m in LOSS.finditer(capsys.readouterr().out)]
        params = {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()}
        results.append((losses, params))
    (l0, p0), (l1, p1) = results
    assert len(l0) == 5 and np.allclose(l0, l1, rtol=1e-6)
    for name in p0:
        np.testing.assert_array_equal(p0[name], p1[name])


def test_in_memory_dataset_shuffles_by_the_documented_seed(tmp_path):
    files = _raw_files(tmp_path)
    use_vars, _ = _ctr(fluid.Program(), fluid.Program())
    ds = _dataset("InMemoryDataset", use_vars, files, batch_size=17)
    ds.load_into_memory()
    assert ds.get_memory_data_size() == 17 and ds.get_shuffle_data_size() == 0
    before = next(ds.batches())["slot1"]
    ds.local_shuffle()  # the first shuffle: RandomState(shuffle_seed + 0)
    after = next(ds.batches())["slot1"]
    assert ds.get_shuffle_data_size() == 17
    order = np.random.RandomState(0).permutation(17)
    seqs = np.split(before.data[:, 0], before.offsets[0][1:-1])
    assert np.concatenate([seqs[i] for i in order]).tolist() == after.data[:, 0].tolist()
    ds.global_shuffle()  # one process: a local shuffle, the second (seed 1)
    ds.release_memory()
    with pytest.raises(ConfigError, match="load_into_memory"):
        ds.get_memory_data_size()


def test_bad_setups_are_refused_clearly(tmp_path):
    use_vars, loss = _ctr(fluid.Program(), fluid.Program())
    with pytest.raises(ValueError, match="datafeed class NoSuch does not exist"):
        fluid.DatasetFactory().create_dataset("NoSuch")
    with pytest.raises(NotImplementedInPlacegroup, match="local files only"):
        list(_dataset("QueueDataset", use_vars, ["hdfs:/data/part-0"]).batches())
    with pytest.raises(ConfigError, match="does not exist"):
        list(_dataset("QueueDataset", use_vars, [str(tmp_path / "nope")]).batches())
    bad = _dataset("QueueDataset", use_vars, _raw_files(tmp_path))
    bad.set_pipe_command("exit 3")
    with pytest.raises(ConfigError, match="exited with 3"):
        list(bad.batches())
    with pytest.raises(NotImplementedError, match="InMemoryDataset"):
        bad.local_shuffle()
    with pytest.raises(ConfigError, match="optimizer op"):
        fluid.Executor().infer_from_dataset(loss.block.program, bad)


def _run_script(tmp_path, *args, python=sys.executable, cmd=("-m", "placegroup", "run"), env=None):
    return run_python(python, *cmd, SCRIPT, tmp_path, *args, cwd=tmp_path, timeout=120 * TIME_FACTOR, env=env).stdout


def test_an_unmodified_fluid_script_runs_under_placegroup_run(tmp_path):
    _raw_files(tmp_path)
    for kind in ("QueueDataset", "InMemoryDataset"):
        losses = [float(x) for x in LOSS.findall(_run_script(tmp_path, str(tmp_path / "pg.npz"), "-", kind))]
        assert len(losses) == 5 and np.isfinite(losses).all()


def test_launch_2x2_trains_each_trainer_on_its_own_file(tmp_path):
    _raw_files(tmp_path, (8, 12))
    out = io.StringIO()
    code = launch(SCRIPT, [str(tmp_path), str(tmp_path / "dist.npz")], 2, 2, out=out, grace=30 * TIME_FACTOR,
                  paddle_compat=True)
    assert code == 0, out.getvalue()
    for tag, batches in (("[trainer:0]", 2), ("[trainer:1]", 3)):
        losses = [float(m.group(1)) for line in out.getvalue().splitlines() if line.startswith(tag)
                  for m in [LOSS.search(line)] if m]
        assert len(losses) == batches and np.isfinite(losses).all(), out.getvalue()


@pytest.mark.paddle
def test_fluid_18_gives_the_same_losses_and_parameters(fluid18_python, tmp_path):
    """The script unchanged under PaddlePaddle Fluid 1.8.5 (PLACEGROUP_PADDLE18_PYTHON), from the
    same initial parameters, set by name."""
    _raw_files(tmp_path)
    rng = np.random.RandomState(1)
    init = {"emb1": rng.normal(0, .1, (50, 4)), "emb2": rng.normal(0, .1, (50, 4)),
            "fc_w": rng.normal(0, .3, (8, 2)), "fc_b": np.zeros(2)}
    np.savez(tmp_path / "init.npz", **{k: v.astype(np.float32) for k, v in init.items()})
    ours = [float(x) for x in LOSS.findall(_run_script(tmp_path, str(tmp_path / "pg.npz"), str(tmp_path / "init.npz")))]
    text = _run_script(tmp_path, str(tmp_path / "pd.npz"), str(tmp_path / "init.npz"), python=fluid18_python, cmd=())
    theirs = [float(x) for x in re.findall(r"data: \[([-+0-9.eE]+)\]", text)]  # Fluid prints the tensor
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    a, b = np.load(tmp_path / "pg.npz"), np.load(tmp_path / "pd.npz")
    for name in init:
        np.testing.assert_allclose(a[name], b[name], rtol=1e-5, atol=1e-7)
