"""Parameter-server training written the way Fluid's own distributed unit tests wrote it
(tests/compat_scripts/dist_runner.py: one script, started per process with ``--role``,
``--endpoints``, ``--trainer_id``, ``--update_method pserver`` ...), started here as those tests
start it: by hand, two pservers and then two trainers, on free ports of 127.0.0.1.

* Sync: the mean of the two trainers' per-step losses equals the local run's (``--update_method
  local``, the whole batch in one process). Each trainer gets every other example of a batch
  (``--use_reader_alloc``), and every model's loss is a mean over examples.
* Async (no ``--sync_mode``): every process runs to its end, the trainers' losses finite.
* Against Fluid 1.8.5 (``paddle`` marker, ``PLACEGROUP_PADDLE18_PYTHON``): the same script run
  locally by Fluid from placegroup's initial parameter values gives the same losses.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from placegroup.tools.launch import free_ports
from tests.conftest import LAUNCH_VARS, TIME_FACTOR
from tests.paddle_ref.reference import run_python

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "compat_scripts" / "dist_runner.py"
MODELS = ["mnist", "ctr", "simnet_bow", "word2vec"]
SPARSE = ("ctr", "simnet_bow")  # async by default for these (sparse gradients over sequence slots); the rest: -m slow
# a few steps on small batches: enough for a wrong merge or a stale parameter to show
COMMON = ["--batch_size", "8", "--lr", "0.1"]


def _env() -> dict:
    """This environment without any launcher's variables: the flags say who each process is."""
    env = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS}
    env["CPU_NUM"] = "1"
    return env


def _cmd(model: str, *flags: str) -> list[str]:
    return [sys.executable, "-m", "placegroup", "run", str(SCRIPT), "--model", model, *COMMON, *flags]


def _losses(out: str) -> list[float]:
    return [json.loads(line)["loss"] for line in out.splitlines() if line.startswith('{"step"')]


def _run_local(model: str, *flags: str) -> list[float]:
    proc = run_python(*_cmd(model, "--role", "trainer", "--update_method", "local", *flags), cwd=ROOT, env=_env(),
                      timeout=60 * TIME_FACTOR)
    return _losses(proc.stdout)


def _run_cluster(model: str, sync: bool, tmp_path: Path) -> list[list[float]]:
    """2 pservers, then 2 trainers, each started with its flags; returns each trainer's losses.
    Every process must end by itself with status 0 (a pserver when both trainers are done)."""
    eps = [f"127.0.0.1:{p}" for p in free_ports(2)]
    mode = ["--sync_mode"] if sync else []
    job = ["--endpoints", ",".join(eps), "--trainers", "2", "--update_method", "pserver", *mode]
    specs = [(f"ps{i}", ["--role", "pserver", "--trainer_id", "0", "--current_endpoint", ep])
             for i, ep in enumerate(eps)]
    specs += [(f"tr{i}", ["--role", "trainer", "--trainer_id", str(i), "--current_endpoint", ep, "--use_reader_alloc"])
              for i, ep in enumerate(eps)]
    procs: dict[str, subprocess.Popen] = {}
    try:
        for tag, flags in specs:
            with open(tmp_path / f"{tag}.out", "w") as out, open(tmp_path / f"{tag}.err", "w") as err:
                procs[tag] = subprocess.Popen(_cmd(model, *flags, *job), cwd=ROOT, env=_env(), stdout=out, stderr=err)
        for tag in ("tr0", "tr1", "ps0", "ps1"):
            try:
                procs[tag].wait(timeout=90 * TIME_FACTOR)
            except subprocess.TimeoutExpired:
                pytest.fail(f"{tag} did not end:\n{_tail(tmp_path, procs)}")
        bad = [tag for tag, p in procs.items() if p.returncode != 0]
        assert not bad, f"{bad} failed:\n{_tail(tmp_path, procs)}"
    finally:
        for p in procs.values():
            if p.poll() is None:
                p.kill()
                p.wait()
    return [_losses((tmp_path / f"tr{i}.out").read_text()) for i in range(2)]


def _tail(tmp_path: Path, procs: dict) -> str:
    return "\n".join(f"--- {tag} (exit {p.poll()}):\n{(tmp_path / f'{tag}.err').read_text()[-1500:]}"
                     for tag, p in procs.items())


@pytest.mark.parametrize("model", MODELS)
def test_sync_2x2_trainers_average_to_one_process(model, tmp_path):
    tr0, tr1 = _run_cluster(model, True, tmp_path)
    local = _run_local(model)
    assert len(local) == len(tr0) == len(tr1) == 5
    np.testing.assert_allclose((np.array(tr0) + np.array(tr1)) / 2, local, rtol=1e-5)


@pytest.mark.parametrize("model", [m if m in SPARSE else pytest.param(m, marks=pytest.mark.slow) for m in MODELS])
def test_async_2x2_trains_to_the_end(model, tmp_path):
    tr0, tr1 = _run_cluster(model, False, tmp_path)
    for losses in (tr0, tr1):
        assert len(losses) == 5 and np.isfinite(losses).all(), losses


@pytest.mark.paddle
@pytest.mark.parametrize("model", MODELS)
def test_local_run_equals_fluid18(model, fluid18_python, tmp_path):
    """The script run alone by Fluid 1.8.5 from placegroup's initial values: the same losses."""
    init = tmp_path / "init.npz"
    ours = _run_local(model, "--save_init", str(init))
    proc = run_python(fluid18_python, SCRIPT, "--model", model, *COMMON, "--role", "trainer", "--update_method",
                      "local", "--init", init, cwd=tmp_path, env=_env(), timeout=120 * TIME_FACTOR)
    theirs = _losses(proc.stdout)
    assert len(theirs) == 5
    np.testing.assert_allclose(ours, theirs, rtol=1e-4)
