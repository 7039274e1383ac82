"""Pruning old checkpoints leaves exactly the ``keep`` newest complete ones, nothing else, over
many saves of several processes, and collects what saves killed or failed midway left behind
without touching a live peer's save (NOTE(leftovers) in placegroup/io/checkpoint_store.py)."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from placegroup.io import checkpoint_store as store
from placegroup.io import index_vars
from tests.conftest import TIME_FACTOR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAGS = ["pserver.0", "pserver.1", "trainer.0"]
KEEP = 3


def _save(dirname, step, tag, arrays, keep=KEEP):
    """What save_checkpoint does for one process's part, through the store's API."""
    entries = [store.Entry(name=n, of=n, kind="rows", first=0, stride=1, count=a.shape[0], shape=list(a.shape),
                           dtype=a.dtype.name, file=f"{i:04d}-{n}") for i, (n, a) in enumerate(arrays.items())]
    manifest = store.Manifest(format=store.FORMAT, version=store.VERSION, step=step, executor=tag, endpoint=None,
                              expected=TAGS, digest="", resumed_from=None, cluster={}, written_at=time.time(),
                              vars=entries)
    store.write_part(os.path.join(dirname, f"{store.STEP}{step}"), tag, entries, list(arrays.values()), manifest)()
    store.prune(dirname, keep, tag)


def _arrays(step, tag):
    return {f"{tag}.w": np.full((3, 2), step, np.float32), f"{tag}.b": np.arange(step % 7, dtype=np.int64)}


def _everything(dirname):
    """Every directory and file under ``dirname``, relative."""
    out = []
    for root, dirs, files in os.walk(dirname):
        out += [os.path.relpath(os.path.join(root, n), dirname) for n in dirs + files]
    return sorted(out)


def _exactly_kept(dirname, last, every=1, nvars=2):
    kept = [last - every * k for k in range(KEEP)]
    want = sorted([f"step-{s}" for s in kept] + [f"step-{s}/{t}" for s in kept for t in TAGS]
                  + [f"step-{s}/{t}/{f}" for s in kept for t in TAGS
                     for f in ["manifest.json"] + [f"{i:04d}-{t}.{n}" for i, n in enumerate("wb")][:nvars]])
    assert _everything(dirname) == want
    assert store.latest_checkpoint(dirname) == last
    for t in TAGS:  # sealed: every checksum holds
        index_vars(os.path.join(dirname, f"step-{last}", t, f"0000-{t}.w"))


def test_a_handful_of_saves_and_prunes_of_several_processes_leave_nothing_behind(tmp_path):
    for step in range(1, 9):
        for tag in TAGS:
            _save(str(tmp_path), step, tag, _arrays(step, tag))
    _exactly_kept(str(tmp_path), 8)


def _dead_pid():
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_leftovers_of_dead_savers_go_and_a_live_peers_save_stays(tmp_path):
    for step in (1, 2, 3, 4):
        for tag in TAGS:
            _save(str(tmp_path), step, tag, _arrays(step, tag))
    machine = store._MACHINE
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    step4 = tmp_path / "step-4"
    leftovers = [f".pserver.1.{_dead_pid()}@{machine}.00ff.tmp",   # killed mid-save, on this machine
                 f".trainer.0.{_dead_pid()}@{machine}.01ab.old",   # killed while pruning
                 ".pserver.0.abc123.tmp"]                          # this tag's own, an older naming
    kept = [f".pserver.2.{live.pid}@{machine}.0abc.tmp",           # a live peer writing now
            f".pserver.1.{_dead_pid()}@0000beef.0abc.tmp"]         # another machine's: unknown
    try:
        for name in leftovers + kept:
            (step4 / name).mkdir()
            (step4 / name / "0000-w").write_bytes(b"x" * 10)
        (tmp_path / "step-2" / kept[0]).mkdir()  # a live save in a step about to be pruned
        _save(str(tmp_path), 5, "pserver.0", _arrays(5, "pserver.0"))
        assert sorted(n for n in os.listdir(step4) if n.startswith(".")) == sorted(kept)
        _save(str(tmp_path), 5, "trainer.0", _arrays(5, "trainer.0"))
        _save(str(tmp_path), 5, "pserver.1", _arrays(5, "pserver.1"))  # its own tag's: collected
        assert [n for n in os.listdir(step4) if n.startswith(".")] == kept[:1]
        assert os.listdir(tmp_path / "step-2") == kept[:1]  # its parts went, the live save stays
    finally:
        live.kill()
        live.wait()
    for tag in TAGS:
        _save(str(tmp_path), 6, tag, _arrays(6, tag))
    _exactly_kept(str(tmp_path), 6)  # the dead maker's: collected, and step-2 with it


def test_a_failed_save_keeps_the_part_it_was_replacing(tmp_path, monkeypatch):
    for tag in TAGS:
        _save(str(tmp_path), 1, tag, _arrays(1, tag))
    monkeypatch.setattr(store.os, "rename", _fail_publish(store.os.rename))
    with pytest.raises(OSError, match="injected"):
        _save(str(tmp_path), 1, "pserver.0", _arrays(2, "pserver.0"))  # a resumed run saving 1 again
    monkeypatch.undo()
    assert store.latest_checkpoint(str(tmp_path)) == 1  # the part set aside came back
    assert sorted(os.listdir(tmp_path / "step-1")) == TAGS


def _fail_publish(real):
    def rename(a, b):
        if a.endswith(".tmp"):
            raise OSError("injected")
        real(a, b)
    return rename


WORKER = textwrap.dedent("""
    import os, sys, time
    import numpy as np
    sys.path.insert(0, {root!r})
    from placegroup.io import checkpoint_store as store
    from tests.test_checkpoint_prune import _save
    def stuck(path):  # mid-save: the var files written, not sealed
        open({ready!r}, "w").close()
        time.sleep(600)
    store._seal_var = stuck
    _save({dirname!r}, {step}, "pserver.1", {{"pserver.1.w": np.ones((1 << 20, 8), np.float32),
                                              "pserver.1.b": np.zeros(3, np.int64)}})
""")


@pytest.mark.slow
def test_a_thousand_saves_with_kills_and_failures_midway_keep_exactly_the_newest(tmp_path, monkeypatch):
    """1,002 saves of 3 processes (334 steps) in random order, some failing at one of two
    points of the save, one killed with SIGKILL mid-save: at the end exactly the 3 newest steps."""
    rng = np.random.default_rng(0)
    dirname = str(tmp_path / "ckpt")
    killed_at = 100
    real_seal, real_rename = store._seal_var, store.os.rename
    for step in range(1, 335):
        if step == killed_at:  # pserver.1 dies in the middle of a big save; it is restarted
            ready = tmp_path / "ready"
            code = WORKER.format(root=ROOT, ready=str(ready), dirname=dirname, step=step)
            p = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
            deadline = time.monotonic() + 60 * TIME_FACTOR
            while not ready.exists() and p.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            assert ready.exists(), "the saver never got to the middle of its save"
            p.send_signal(signal.SIGKILL)
            p.wait()
            assert any(n.startswith(".pserver.1.") for n in os.listdir(os.path.join(dirname, f"step-{step}")))
        for tag in rng.permutation(TAGS):
            if step < 320 and rng.random() < 0.03:  # a save that fails at one of its points
                how = rng.integers(2)
                if how == 0:
                    monkeypatch.setattr(store, "_seal_var", _raise)
                else:  # a resumed run saving the step before again, failing to publish
                    monkeypatch.setattr(store.os, "rename", _fail_publish(real_rename))
                with pytest.raises(OSError, match="injected"):
                    _save(dirname, step - int(how), tag, _arrays(step, tag))
                monkeypatch.setattr(store, "_seal_var", real_seal)
                monkeypatch.setattr(store.os, "rename", real_rename)
            _save(dirname, step, tag, _arrays(step, tag))
        if step == 3 or step % 50 == 0:
            assert len(_everything(dirname)) <= (KEEP + 2) * (1 + len(TAGS) * 4), step
    _exactly_kept(dirname, 334)


def _raise(path):
    raise OSError("injected")
