"""Checkpoints: re-slicing, atomicity, damaged files, and resuming a real cluster
onto 2 and onto 3 pservers, which must continue exactly as an uninterrupted run (rtol 1e-5)."""
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import placegroup as fluid
from placegroup.io import checkpoint_reslice
from placegroup.io.checkpoint import Checkpointer, CheckpointConfig, _describe, _held
from placegroup.io.checkpoint_reslice import Piece, RowSet, assemble, overlap
from placegroup.tools.launch import cluster_envs, launch
from placegroup.transpiler.parts import block_parts, shard_parts
from tests.conftest import TIME_FACTOR

HERE = os.path.dirname(__file__)
MODEL = os.path.join(HERE, "dist", "train_model.py")
SPARSE = os.path.join(HERE, "dist", "train_sparse.py")
sys.path.insert(0, os.path.join(HERE, "dist"))
import train_model  # noqa: E402
import train_sparse  # noqa: E402


# -- re-slicing --------------------------------------------------------------------------------
rowsets = st.builds(RowSet, st.integers(0, 30), st.integers(1, 7), st.integers(0, 12))


@given(rowsets, rowsets)
def test_overlap_is_the_common_rows(a, b):
    common = sorted(set(a.rows()) & set(b.rows()))
    hit = overlap(a, b)
    if not common:
        assert hit is None
        return
    assert [a.rows()[i] for i in range(a.count)[hit[0]]] == common
    assert [b.rows()[i] for i in range(b.count)[hit[1]]] == common


def _layout(kind, height, n):
    parts = block_parts([height, 1], n, 1) if kind == "blocks" else shard_parts(height, n)
    return [RowSet(p.offset, p.stride, p.rows) for p in parts]


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 60), st.integers(1, 5), st.integers(1, 5), st.sampled_from(["blocks", "shards"]),
       st.sampled_from(["blocks", "shards"]), st.integers(1, 3), st.sampled_from([4, 40, 1 << 26]))
def test_blocks_and_shards_re_slice_from_m_to_m_prime(height, m, m2, old, new, width, chunk):
    """Row blocks or row shards of M parts fill the blocks or shards of M' parts exactly, read a
    span of ``chunk`` bytes at a time, and never more rows of a piece than the span needs."""
    whole = np.arange(height * width, dtype=np.float32).reshape(height, width)
    saved = _layout(old, height, m)
    spans = []

    def read(a, b, r):
        spans.append(b - a)
        return whole[r.first::r.stride][:r.count][a:b]
    pieces = [Piece(r, (r.count, width), "float32", f"part{i}", lambda a, b, r=r: read(a, b, r))
              for i, r in enumerate(saved)]
    was, checkpoint_reslice.CHUNK = checkpoint_reslice.CHUNK, chunk
    try:
        for want in _layout(new, height, m2):
            got = assemble("w", want, (want.count, width), "float32", pieces)
            np.testing.assert_array_equal(got, whole[want.first::want.stride][:want.count])
    finally:
        checkpoint_reslice.CHUNK = was
    stride = max(r.stride for r in _layout(new, height, m2)) * max(r.stride for r in saved)
    assert max(spans) <= max(stride, chunk // (4 * width) * stride)


def test_assemble_names_rows_no_piece_holds_and_a_wrong_dtype():
    piece = Piece(RowSet(0, 2, 5), (5, 3), "float32", "ckpt/step-3/pserver.0/0000-w",
                  lambda a, b: np.zeros((5, 3), np.float32)[a:b])
    with pytest.raises(fluid.SerializationError, match=r"var 'w': rows \[1, 3, 5, 7, 9\] \.\.\. are in no saved piece"):
        assemble("w", RowSet(0, 1, 12), (12, 3), "float32", [piece])
    with pytest.raises(fluid.SerializationError,
                       match=r"pserver.0/0000-w holds float32\[5, 3\], which cannot fill float64"):
        assemble("w", RowSet(0, 2, 5), (5, 3), "float64", [piece])


# -- placements: what a cluster saves loads onto another --------------------------------------
def _build(which):
    if which == "wide":
        train_model.build("wide", "adam")
    else:
        train_sparse.build(301, 4, "adam", True)


def _programs(which, pservers, min_block_size=2000):
    """(single-process main, [the program of each pserver and trainer])."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        _build(which)
    if not pservers:
        return main, [main]
    eps = [f"127.0.0.1:{7000 + i}" for i in range(pservers)]
    t = fluid.DistributeTranspiler(fluid.DistributeTranspilerConfig(min_block_size=min_block_size))
    # transpile rewrites what it is given into one process's part; main stays the one-process program
    t.transpile(pservers=",".join(eps), trainers=2, program=main.clone(), startup_program=startup.clone())
    trainers = [t.get_program(None, "trainer") for _ in range(2)]
    trainers[1].executor = fluid.ExecutorId.parse("trainer", None, rank=1)
    return main, [t.get_program(e, "pserver") for e in eps] + trainers


def _truth(main, seed=0):
    rng = np.random.default_rng(seed)
    return {v.name: rng.normal(size=v.shape).astype(v.dtype) for v in main.list_vars() if v.persistable}


def _part(truth, v):
    of, _, rows = _describe(v)
    return truth[of][rows.first::rows.stride][:rows.count].reshape(v.shape)


def _save(tmp_path, programs, truth, step=5):
    exe = fluid.Executor()
    for prog in programs:
        scope = fluid.Scope()
        for v in _held(prog):
            scope.var(v.name).get_tensor().set(_part(truth, v))
        fluid.io.save_checkpoint(exe, str(tmp_path), prog, step, scope=scope)


@pytest.mark.parametrize("which, before, after", [("wide", 2, 3), ("wide", 3, 2), ("sparse", 2, 3),
                                                  ("sparse", 3, 2), ("sparse", 2, 0), ("wide", 0, 3)])
def test_a_checkpoint_loads_onto_another_number_of_pservers(tmp_path, which, before, after):
    """Blocks (wide: fc_0.w_0 in 2 or 3 blocks), shards (a distributed table) and per-block
    copies (Adam's beta powers) re-slice onto another pserver count, or one process (0)."""
    main, saved = _programs(which, before)
    truth = _truth(main)
    _save(tmp_path, saved, truth)
    assert fluid.io.latest_checkpoint(str(tmp_path)) == 5
    _, loading = _programs(which, after)
    exe, checked = fluid.Executor(), 0
    for prog in loading:
        scope = fluid.Scope()
        assert fluid.io.load_checkpoint(exe, str(tmp_path), prog, scope=scope) == 5
        for v in _held(prog):
            got = np.array(scope.find_var(v.name).get_tensor())
            np.testing.assert_array_equal(got, _part(truth, v), err_msg=v.name)
            checked += 1
    assert checked >= len(truth)


# -- one process: resume equals an uninterrupted run ------------------------------------------
def _train_local(batches, checkpoint=None):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard(), fluid.scope_guard(fluid.Scope()):
        _, cost = train_model.build("linear", "momentum")
        exe = fluid.Executor(fluid.CPUPlace(), checkpoint=checkpoint)
        exe.run(startup)
        losses = [float(exe.run(main, feed={"x": x, "y": y}, fetch_list=[cost])[0][0])
                  for x, y in batches[exe.resumed_step:]]
        exe.close()  # its last save sealed
        return exe.resumed_step, losses, np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor())


def test_one_process_resumes_exactly_and_keeps_the_newest(tmp_path):
    batches = train_model.data("linear", 10, 8)
    _, ref, w = _train_local(batches)
    cfg = CheckpointConfig(dirname=str(tmp_path), every=2, keep=2)
    assert _train_local(batches[:7], cfg)[0] == 0
    assert sorted(os.listdir(tmp_path)) == ["step-4", "step-6"]  # keep=2
    start, losses, w2 = _train_local(batches, cfg.model_copy(update={"resume": True}))
    assert start == 6  # piecewise_decay's counter and the velocities came back with it
    np.testing.assert_allclose(losses, ref[6:], rtol=1e-6)
    np.testing.assert_allclose(w2, w, rtol=1e-6)


def test_resume_with_nothing_saved_starts_at_step_0(tmp_path):
    assert _train_local(train_model.data("linear", 2, 8), CheckpointConfig(dirname=str(tmp_path), resume=True))[0] == 0


def test_the_environment_configures_and_overrides(monkeypatch, tmp_path):
    monkeypatch.setenv("PLACEGROUP_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("PLACEGROUP_CHECKPOINT_EVERY", "5")
    assert CheckpointConfig.from_env() == CheckpointConfig(dirname=str(tmp_path), every=5)
    monkeypatch.setenv("PLACEGROUP_RESUME", "1")
    assert CheckpointConfig.from_env(CheckpointConfig(dirname="x", keep=7)).model_dump() == dict(
        dirname=str(tmp_path), every=5, resume=True, keep=7)
    monkeypatch.delenv("PLACEGROUP_CHECKPOINT_DIR")
    with pytest.raises(fluid.ProgramError, match="PLACEGROUP_CHECKPOINT_EVERY, PLACEGROUP_RESUME set without"):
        CheckpointConfig.from_env()
    monkeypatch.setenv("PLACEGROUP_CHECKPOINT_EVERY", "0")
    monkeypatch.setenv("PLACEGROUP_RESUME", "0")
    assert CheckpointConfig.from_env() is None  # turned off, not half configured
    monkeypatch.setenv("PLACEGROUP_RESUME", "yes")
    with pytest.raises(fluid.ProgramError, match="PLACEGROUP_RESUME='yes': expected a whole number"):
        CheckpointConfig.from_env()


# -- atomicity and damage ----------------------------------------------------------------------
def _local_checkpoint(tmp_path, steps=(3,)):
    main, _ = _programs("wide", 0)
    truth = _truth(main)
    for s in steps:
        _save(tmp_path, [main], truth, step=s)
    return main, truth


def test_a_crash_mid_write_leaves_the_previous_checkpoint_the_newest(tmp_path, monkeypatch):
    from placegroup.io import checkpoint_store as store

    main, truth = _local_checkpoint(tmp_path)
    real, calls = store._write_var, []

    def crash_on_third(path, name, arr):
        calls.append(path)
        if len(calls) == 3:
            raise KeyboardInterrupt("killed mid-write")
        real(path, name, arr)
    monkeypatch.setattr(store, "_write_var", crash_on_third)
    with pytest.raises(KeyboardInterrupt):
        _save(tmp_path, [main], truth, step=6)
    monkeypatch.setattr(store, "_write_var", real)
    assert fluid.io.latest_checkpoint(str(tmp_path)) == 3
    # a process killed outright leaves its hidden temporary part behind: it is ignored
    junk = tmp_path / "step-9" / ".local.abc.tmp"
    junk.mkdir(parents=True)
    (junk / "manifest.json").write_text("{")
    assert fluid.io.latest_checkpoint(str(tmp_path)) == 3
    _save(tmp_path, [main], truth, step=6)  # and saving again works
    assert fluid.io.latest_checkpoint(str(tmp_path)) == 6


def test_a_step_is_complete_only_with_every_part_of_one_run(tmp_path):
    main, saved = _programs("wide", 2)
    truth = _truth(main)
    _save(tmp_path, saved, truth, step=4)
    _save(tmp_path, saved[:1], truth, step=8)  # pserver.1 and the trainer died before saving 8
    assert fluid.io.latest_checkpoint(str(tmp_path)) == 4
    man = tmp_path / "step-4" / "pserver.1" / "manifest.json"
    data = json.loads(man.read_text())
    man.write_text(json.dumps({**data, "resumed_from": 2}))  # a part another run wrote
    assert fluid.io.latest_checkpoint(str(tmp_path)) is None
    with pytest.raises(fluid.SerializationError, match="no complete checkpoint"):
        fluid.io.load_checkpoint(fluid.Executor(), str(tmp_path), saved[0], scope=fluid.Scope())


@pytest.mark.parametrize("damage, message", [
    (lambda d: "{not json", r"manifest.json: not a checkpoint manifest: not JSON"),
    (lambda d: json.dumps({**d, "step": "three"}), r"manifest.json: malformed checkpoint manifest: step: "),
    (lambda d: json.dumps({**d, "version": 9}), r"manifest.json: checkpoint manifest version 9; this placegroup "
                                                 r"reads version 1"),
    (lambda d: json.dumps({**d, "step": 4}), r"manifest.json: says step 4 of 'local', but lies in step-3/local"),
])
def test_a_damaged_manifest_is_an_error_naming_it(tmp_path, damage, message):
    _local_checkpoint(tmp_path)
    man = tmp_path / "step-3" / "local" / "manifest.json"
    man.write_text(damage(json.loads(man.read_text())))
    with pytest.raises(fluid.SerializationError, match=message):
        fluid.io.latest_checkpoint(str(tmp_path))


def test_a_damaged_or_missing_var_file_is_an_error_naming_it(tmp_path):
    main, _ = _local_checkpoint(tmp_path)
    part = tmp_path / "step-3" / "local"
    victim = next(p for p in part.iterdir() if p.name.endswith("fc_0.w_0"))
    data = bytearray(victim.read_bytes())
    data[-1] ^= 0xFF
    victim.write_bytes(bytes(data))
    with pytest.raises(fluid.SerializationError,
                       match=r"0000-fc_0.w_0: record 1 of 1 \(var 'fc_0.w_0'\): checksum mismatch"):
        fluid.io.load_checkpoint(fluid.Executor(), str(tmp_path), main, scope=fluid.Scope())
    victim.unlink()
    with pytest.raises(fluid.SerializationError, match=r"no file .*0000-fc_0.w_0'"):
        fluid.io.load_checkpoint(fluid.Executor(), str(tmp_path), main, scope=fluid.Scope())


def test_a_var_the_checkpoint_lacks_is_named(tmp_path):
    _local_checkpoint(tmp_path)
    main, _ = _programs("sparse", 0)
    with pytest.raises(fluid.SerializationError,
                       match=r"var 'emb': checkpoint .*step-3 holds no piece of it \(parts: \['local'\]\)"):
        fluid.io.load_checkpoint(fluid.Executor(), str(tmp_path), main, scope=fluid.Scope())


def test_async_refuses_the_schedule_and_ssp_warns(caplog):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        train_model.build("linear", "sgd")
    ck = Checkpointer(CheckpointConfig(dirname="unused", every=3))
    for kw, outcome in ((dict(sync_mode=False), "needs sync mode"), (dict(merge_steps=2), "merge_steps > 1"),
                        (dict(staleness=2), None)):
        t = fluid.DistributeTranspiler()
        t.transpile(pservers="127.0.0.1:7000", trainers=2, program=main.clone(), startup_program=startup.clone(),
                    **kw)
        prog = t.get_program("127.0.0.1:7000", "pserver")
        if outcome:
            with pytest.raises(fluid.ProgramError, match=outcome):
                ck.check(prog)
        else:
            ck.check(prog)
            assert "not bit-equal to an uninterrupted run" in caplog.text


# -- real clusters: stop or kill, resume onto 2 and onto 3 pservers ----------------------------
def _launch(script, out, trainers, pservers, *args):
    os.makedirs(out, exist_ok=True)
    log = io.StringIO()
    code = launch(script, ["--out", str(out), *args], trainers, pservers, grace=20 * TIME_FACTOR, out=log,
                  extra_env={"PLACEGROUP_PEER_TIMEOUT": str(30 * TIME_FACTOR)})
    assert code == 0, log.getvalue()[-4000:]


def _local(script, out, *args):
    os.makedirs(out, exist_ok=True)
    subprocess.run([sys.executable, script, "--out", str(out), *args], check=True, timeout=120 * TIME_FACTOR,
                   env={k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"})
    return np.load(out / "local0.npz")


def _resume_and_compare(script, tmp_path, ckpt, ref, args, start, pservers_list=(2, 3), params=None):
    """Resume copies of ``ckpt`` onto each pserver count: the trainers' mean losses from
    ``start`` on and their parameters equal the uninterrupted ``ref``."""
    for m in pservers_list:
        mine = tmp_path / f"ckpt-onto-{m}"
        shutil.copytree(ckpt, mine)
        out = tmp_path / f"resumed-onto-{m}"
        _launch(script, out, 2, m, *args, "--checkpoint-dir", str(mine), "--resume")
        runs = [np.load(out / f"trainer{i}.npz") for i in range(2)]
        assert [int(r["start"]) for r in runs] == [start, start]
        np.testing.assert_allclose(np.mean([r["losses"] for r in runs], axis=0), ref["losses"][start:],
                                   rtol=1e-5, atol=1e-6)
        for name in params or [n for n in ref.files if n not in ("losses", "start")]:
            for r in runs:
                np.testing.assert_allclose(r[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
        assert fluid.io.latest_checkpoint(str(mine)) > start  # the resumed run saves too
        yield m, out


def test_sliced_dense_model_resumes_onto_2_and_3_pservers(tmp_path):
    """fc_0.w_0 in 2 blocks on 2 pservers, 3 on 3; Adam's moments and beta powers re-sliced."""
    args = ["--model", "wide", "--optimizer", "adam", "--min-block-size", "2000", "--checkpoint-every", "3"]
    ref = _local(MODEL, tmp_path / "local", *args, "--steps", "12")
    _launch(MODEL, tmp_path / "first", 2, 2, *args, "--steps", "6", "--checkpoint-dir", str(tmp_path / "ckpt"))
    assert fluid.io.latest_checkpoint(str(tmp_path / "ckpt")) == 6
    done = list(_resume_and_compare(MODEL, tmp_path, tmp_path / "ckpt", ref, [*args, "--steps", "12"], 6))
    assert len(done) == 2


@pytest.mark.slow  # 8 s; re-sharding itself runs by default (test_re_sharding_a_table_never_holds_it_whole)
def test_sparse_table_re_shards_onto_2_and_3_pservers(tmp_path):
    args = ["--optimizer", "momentum", "--vocab", "301", "--checkpoint-every", "2"]
    ref = _local(SPARSE, tmp_path / "local", *args, "--steps", "8")
    _launch(SPARSE, tmp_path / "first", 2, 2, *args, "--steps", "4", "--checkpoint-dir", str(tmp_path / "ckpt"))
    for m, out in _resume_and_compare(SPARSE, tmp_path, tmp_path / "ckpt", ref, [*args, "--steps", "8"], 4,
                                      params=["fc_0.w_0", "fc_0.b_0"]):
        table = np.zeros_like(ref["emb"])
        for k in range(m):
            table[k::m] = np.load(out / f"pserver{k}.npz")[f"emb.shard{k}"]
        np.testing.assert_allclose(table, ref["emb"], rtol=1e-5, atol=1e-6)


def test_a_killed_pserver_resumes_from_the_last_checkpoint_with_no_update_lost_or_repeated(tmp_path):
    """SIGKILL a pserver mid-run; the job restarted from the newest complete checkpoint (onto
    3 pservers) continues as if nothing happened."""
    steps, args = "30", ["--model", "wide", "--optimizer", "momentum", "--min-block-size", "2000",
                         "--checkpoint-every", "2"]
    ckpt = tmp_path / "ckpt"
    procs = {}
    try:
        for m in cluster_envs(2, 2):
            with open(tmp_path / f"{m.name}.log", "wb") as log:
                procs[m.role, m.index] = subprocess.Popen(
                    [sys.executable, MODEL, "--out", str(tmp_path), *args, "--steps", steps, "--slow", "0.1",
                     "--checkpoint-dir", str(ckpt)], env={**os.environ, **m.env, "PLACEGROUP_PEER_TIMEOUT": "60"},
                    stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60 * TIME_FACTOR
        while (fluid.io.latest_checkpoint(str(ckpt)) or 0) < 4:
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs.values())
            time.sleep(0.05)
        procs["PSERVER", 1].send_signal(signal.SIGKILL)
        for p in procs.values():  # the others notice and stop
            p.wait(timeout=30 * TIME_FACTOR)
        assert procs["TRAINER", 0].returncode != 0
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
            p.wait()
    start = fluid.io.latest_checkpoint(str(ckpt))
    assert 4 <= start < 30
    ref = _local(MODEL, tmp_path / "local", *args, "--steps", steps)
    assert len(list(_resume_and_compare(MODEL, tmp_path, ckpt, ref, [*args, "--steps", steps], start,
                                        pservers_list=(3,)))) == 1


# -- a table larger than one process should hold ----------------------------------------------
_BIG = r"""
import resource, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import placegroup as fluid
from placegroup.io import checkpoint_reslice
from placegroup.io.checkpoint import _describe, _held
import train_sparse

mode, where, vocab, dim, m = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
checkpoint_reslice.CHUNK = int(sys.argv[7])
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup), fluid.unique_name.guard():
    train_sparse.build(vocab, dim, "sgd", False)
eps = [f"127.0.0.1:{7000 + i}" for i in range(m)]
t = fluid.DistributeTranspiler()
t.transpile(pservers=",".join(eps), trainers=2, program=main, startup_program=startup)


def value(v):  # a function of the global row: no whole table needed to make or check a part
    _, _, r = _describe(v)
    rows = np.arange(r.first, r.first + r.stride * r.count, r.stride, dtype=np.float32)
    return np.broadcast_to(rows.reshape([-1] + [1] * (len(v.shape) - 1)), v.shape).astype(v.dtype)


exe = fluid.Executor()
if mode == "save":
    for ep in eps:
        prog, scope = t.get_program(ep, "pserver"), fluid.Scope()
        for v in _held(prog):
            scope.var(v.name).get_tensor().set(value(v))
        fluid.io.save_checkpoint(exe, where, prog, 7, scope=scope)
        del scope
else:
    prog, scope = t.get_program(eps[0], "pserver"), fluid.Scope()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert fluid.io.load_checkpoint(exe, where, prog, scope=scope) == 7
    grew = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    for v in _held(prog):
        assert np.array_equal(np.array(scope.find_var(v.name).get_tensor()), value(v)), v.name
    print(grew * 1024)
"""


def _re_shard_big_table(tmp_path, vocab, dim, chunk):
    def run(mode, m):
        got = subprocess.run([sys.executable, "-c", _BIG, os.path.join(HERE, "dist"), mode, str(tmp_path),
                              str(vocab), str(dim), str(m), str(chunk)], capture_output=True, text=True,
                             timeout=600 * TIME_FACTOR,
                             env={k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"})
        assert got.returncode == 0, got.stderr[-3000:]
        return got.stdout
    run("save", 2)
    grew = int(run("load", 3))  # pserver 0 of 3 gathers rows 0, 3, 6, ... from both old shards
    table = vocab * dim * 4
    assert grew < table / 2, (f"loading one of 3 shards grew the process by {grew / 2**20:.0f} MiB; "
                              f"the table is {table / 2**20:.0f} MiB")


def test_re_sharding_a_table_never_holds_it_whole(tmp_path):
    _re_shard_big_table(tmp_path, 2_000_000, 16, 1 << 22)


@pytest.mark.slow
def test_re_sharding_a_10_million_row_table_never_holds_it_whole(tmp_path):
    _re_shard_big_table(tmp_path, 10_000_000, 64, 1 << 26)
