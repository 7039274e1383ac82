"""``placegroup launch --max-restarts``: a job whose processes are killed with SIGKILL restarts
from its newest complete checkpoint, by itself, and ends as if nothing had happened.

Each run is a real local cluster (2 trainers + 2 pservers over ZeroMQ) under the real command.
The worker (tests/dist/train_restart.py) kills itself where ``--die`` says; every loss any
attempt computed, and the final parameters, must equal an uninterrupted run's (sync mode,
rtol 1e-5).
"""
import io
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from placegroup.tools.launch import launch

from tests.conftest import TIME_FACTOR

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "dist", "train_restart.py")
STEPS = 20
EVERY = 2


def _launch(tmp, name, *extra, restarts=0, checkpoints=True):
    out, ckpt = tmp / name, tmp / f"{name}-ckpt"
    out.mkdir()
    saving = ["--checkpoint-dir", str(ckpt), "--checkpoint-every", str(EVERY)] if checkpoints else []
    cmd = [sys.executable, "-m", "placegroup", "launch", "--max-restarts", str(restarts), *saving, WORKER,
           "--out", str(out), "--steps", str(STEPS), *extra]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PLACEGROUP_CHECKPOINT", "PLACEGROUP_RESUME"))}
    got = subprocess.run(cmd, capture_output=True, text=True, timeout=300 * TIME_FACTOR,
                         env={**env, "PLACEGROUP_PEER_TIMEOUT": str(30 * TIME_FACTOR)})
    launch_lines = [ln for ln in got.stdout.splitlines() if ln.startswith("[launch]")]
    return got.returncode, out, launch_lines, got.stdout + got.stderr


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The uninterrupted run: {trainer: ({step: loss}, params)}."""
    code, out, lines, text = _launch(tmp_path_factory.mktemp("ref"), "run")
    assert code == 0 and not lines, text[-3000:]
    return {t: (_losses(out, t), np.load(out / f"trainer.{t}.npz")) for t in (0, 1)}


def _dead(text):
    """The names launch printed the processes that killed themselves under, in order."""
    return re.findall(r"^\[(\S+)\] dying on purpose$", text, re.M)


def _losses(out, t):
    """Every (attempt, step, loss) trainer ``t`` wrote."""
    with open(out / f"trainer.{t}.losses") as f:
        return [(int(a), int(s), float(v)) for a, s, v in (line.split() for line in f)]


def _assert_same_as(reference, out):
    for t, (ref_losses, ref_params) in reference.items():
        ref = {s: v for _, s, v in ref_losses}
        got = _losses(out, t)
        assert {s for _, s, _ in got} == set(range(STEPS)), f"trainer {t} skipped steps"
        for attempt, step, loss in got:
            assert loss == pytest.approx(ref[step], rel=1e-5), (t, attempt, step)
        params = np.load(out / f"trainer.{t}.npz")
        for name in ref_params.files:
            np.testing.assert_allclose(params[name], ref_params[name], rtol=1e-5, atol=1e-7, err_msg=name)


def test_a_killed_pserver_restarts_from_the_newest_checkpoint_and_ends_as_if_uninterrupted(tmp_path, reference):
    step = int(np.random.default_rng(11).integers(3, STEPS - 3))
    code, out, lines, text = _launch(tmp_path, "run", "--die", f"0:pserver:1:{step}", restarts=2)
    assert code == 0, text[-3000:]
    dead, = _dead(text)  # the runtime's name for it, in its lines' prefix and in launch's own line
    assert re.fullmatch(r"pserver@127\.0\.0\.1:\d+", dead), dead
    assert re.fullmatch(rf"\[launch\] attempt 1: {re.escape(dead)} \(PSERVER, pid \d+\) failed first "
                        r"\(killed by SIGKILL\); stopping the others", lines[0]), lines
    # the newest complete checkpoint when it died: saves are sealed in the background
    # (NOTE(save-cost) in placegroup/io/checkpoint_store.py), so on a loaded machine the newest
    # one may still have been sealing, and the one before (or none yet) is the newest complete
    if lines[1].endswith("(no complete checkpoint yet)"):
        resumed = 0
        assert lines[1] == "[launch] restart 1 of 2 from step 0 (no complete checkpoint yet)", lines
    else:
        resumed = int(lines[1].rsplit(" ", 1)[1])
        assert lines[1] == f"[launch] restart 1 of 2 from checkpoint step {resumed}"
    assert 0 <= resumed <= step
    assert len(lines) == 2, lines
    _assert_same_as(reference, out)
    assert {a for a, _, _ in _losses(out, 0)} == {0, 1}


def test_a_job_without_a_checkpoint_dir_restarts_from_step_0(tmp_path, reference):
    """PLACEGROUP_RESUME=1 with no directory means nothing saved yet: every process starts over."""
    # --die in its older spelling, the pserver's file tag (pserver.1), is still read
    code, out, lines, text = _launch(tmp_path, "run", "--die", "0:pserver.1:7", restarts=1, checkpoints=False)
    assert code == 0, text[-3000:]
    assert "set without a checkpoint directory" not in text
    assert "--max-restarts without PLACEGROUP_CHECKPOINT_DIR" in lines[0], lines
    assert f"attempt 1: {_dead(text)[0]} (PSERVER, pid " in lines[1] and "killed by SIGKILL" in lines[1], lines
    assert lines[2:] == ["[launch] restart 1 of 1 resuming as the script's own checkpoint settings allow"]
    _assert_same_as(reference, out)
    attempts = [(a, s) for a, s, _ in _losses(out, 0)]
    assert [s for a, s in attempts if a == 1] == list(range(STEPS))  # from step 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2])
def test_seeded_random_kills_of_any_process_even_several_times(tmp_path, reference, seed):
    """Three deaths, one per attempt, of seeded random processes at seeded random steps
    (increasing, so each attempt reaches its own)."""
    rng = np.random.default_rng(seed)
    tags = ["trainer:0", "trainer:1", "pserver:0", "pserver:1"]
    steps = sorted(rng.choice(np.arange(2, STEPS - 1), size=3, replace=False))
    deaths = [f"{a}:{tags[rng.integers(4)]}:{s}" for a, s in enumerate(steps)]
    code, out, lines, text = _launch(tmp_path, "run", *sum((["--die", d] for d in deaths), []), restarts=3)
    assert code == 0, (deaths, text[-3000:])
    assert sum("restart" in ln for ln in lines) == 3, (deaths, lines)
    _assert_same_as(reference, out)


def test_it_gives_up_after_max_restarts_with_the_last_failure_as_exit_code(tmp_path):
    code, _, lines, text = _launch(tmp_path, "run", "--die", "0:trainer:0:3", "--die", "1:trainer:0:5", restarts=1)
    assert code == 128 + 9, text[-3000:]
    assert _dead(text) == ["trainer:0", "trainer:0"], text[-3000:]
    assert "attempt 1: trainer:0 (TRAINER, 127.0.0.1:" in lines[0], lines
    assert lines[-1] == "[launch] giving up: the job failed 2 times", lines
    assert [ln.split(":")[0] for ln in lines if "failed first" in ln] == ["[launch] attempt 1", "[launch] attempt 2"]


def test_restarts_without_a_checkpoint_dir_say_what_they_will_do(tmp_path, monkeypatch):
    monkeypatch.delenv("PLACEGROUP_CHECKPOINT_DIR", raising=False)
    script = tmp_path / "fail.py"
    script.write_text("import os, sys\nsys.exit(3 if os.environ['TRAINING_ROLE'] == 'TRAINER' else 0)\n")
    log = io.StringIO()
    assert launch(str(script), [], 1, 0, out=log, max_restarts=1, grace=5) == 3
    text = log.getvalue()
    assert "--max-restarts without PLACEGROUP_CHECKPOINT_DIR" in text
    assert "restart 1 of 1 resuming as the script's own checkpoint settings allow" in text
    with pytest.raises(ValueError, match="max_restarts must be 0 or more"):
        launch(str(script), [], 1, 0, max_restarts=-1)


def test_a_pserver_that_will_not_stop_after_training_is_not_a_reason_to_train_again(tmp_path):
    script = tmp_path / "hang.py"
    script.write_text("import os, time\nif os.environ['TRAINING_ROLE'] == 'PSERVER':\n    time.sleep(60)\n")
    log = io.StringIO()
    assert launch(str(script), [], 1, 1, out=log, max_restarts=2, grace=1) == 1
    text = log.getvalue()
    assert "still running 1s after the trainers finished" in text
    assert "restart 1" not in text and "giving up" not in text
