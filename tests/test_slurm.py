"""docs/launch.md's Slurm recipe, run by a real Slurm: 2 pservers + 2 trainers of fit_a_line.

A one-node cluster (scripts/slurm-local.sh: munged, slurmctld and slurmd, installed from
Debian's packages when missing) runs ``sbatch deploy/slurm/job.sbatch examples/fit_a_line.py``;
the job must end COMPLETED, and its trainers must reach the loss one process reaches.
Needs root and Slurm (or apt-get and the Debian mirror); skipped otherwise, with the reason.
"""
import os
import pathlib
import re
import shutil
import socket
import subprocess
import sys
import tempfile

import pytest

from tests.conftest import TIME_FACTOR

pytestmark = pytest.mark.slow
pytest.importorskip("sklearn")  # fit_a_line's diabetes set ships inside scikit-learn

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "slurm-local.sh"
JOB = ROOT / "deploy" / "slurm" / "job.sbatch"
# --drop-last: every batch splits evenly over the trainers, so sync training equals one process.
ARGS = ["examples/fit_a_line.py", "--passes", "3", "--data", "diabetes", "--drop-last", "--no-progress"]


def _run_script(*args, timeout):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


@pytest.fixture(scope="module")
def slurm():
    """``SLURM_CONF`` of a running one-node cluster; everything is stopped afterwards."""
    if os.geteuid() != 0:
        pytest.skip("a local Slurm cluster needs root (slurmd starts jobs as their users)")
    if not shutil.which("slurmd") and not shutil.which("apt-get"):
        pytest.skip("Slurm is not installed and there is no apt-get to install it")
    home = tempfile.mkdtemp(prefix="placegroup-slurm-")  # short: munge's socket path is limited
    try:
        try:  # the first run installs slurm-wlm and munge: a minute or two
            r = _run_script("start", home, timeout=900)
        except subprocess.TimeoutExpired:
            pytest.skip("scripts/slurm-local.sh start took over 15 minutes (apt-get stuck?)")
        why = (r.stderr.strip().splitlines() or ["no message"])[-1]
        if r.returncode in (3, 4):  # could not install; a daemon would not start
            pytest.skip(f"no local Slurm cluster here: {why}")
        assert r.returncode == 0, f"slurm-local.sh start failed ({r.returncode}): {r.stderr}"
        yield str(pathlib.Path(home) / "slurm.conf")
    finally:
        if os.path.exists(os.path.join(home, "slurm.conf")):
            stop = _run_script("stop", home, timeout=120)
            assert stop.returncode == 0, stop.stderr
        shutil.rmtree(home, ignore_errors=True)
    assert not os.path.exists(home)


def _free_port_run(n: int) -> int:
    """A port p with p..p+n-1 free on 127.0.0.1 now (job.sbatch's BASE_PORT)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + n > 65535:
            continue
        socks = []
        try:
            for p in range(base, base + n):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no {n} consecutive free ports on 127.0.0.1")


def _losses(text: str, prefix: str = "") -> tuple[float, float]:
    """(train loss of the trained model, test loss) from fit_a_line's report lines."""
    train = re.search(rf"^{prefix}train loss of the trained model ([0-9.]+)", text, re.M)
    test = re.search(rf"^{prefix}test loss ([0-9.]+)", text, re.M)
    assert train and test, f"fit_a_line's final loss lines are missing from:\n{text}"
    return float(train.group(1)), float(test.group(1))


def _job_field(conf_env: dict, job: str, field: str) -> str:
    out = subprocess.run(["scontrol", "show", "job", "-o", job], capture_output=True, text=True,
                         env=conf_env, timeout=30).stdout
    m = re.search(rf"\b{field}=(\S+)", out)
    assert m, f"scontrol show job {job} has no {field}: {out!r}"
    return m.group(1)


def test_the_slurm_recipe_trains_fit_a_line_with_two_pservers_and_two_trainers(slurm, tmp_path):
    env = {**os.environ, "SLURM_CONF": slurm, "BASE_PORT": str(_free_port_run(4)),
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    out = tmp_path / "job.out"
    try:  # --wait: sbatch returns when the job has ended
        submit = subprocess.run(["sbatch", "--parsable", "--wait", f"--output={out}", str(JOB), *ARGS],
                                capture_output=True, text=True, env=env, cwd=ROOT,
                                timeout=300 * TIME_FACTOR)
    except subprocess.TimeoutExpired:
        jobs = subprocess.run(["squeue", "-h", "-o", "%A"], capture_output=True, text=True, env=env,
                              timeout=30).stdout.split()
        subprocess.run(["scancel", *jobs], env=env, timeout=30)
        pytest.fail(f"the job did not end in {300 * TIME_FACTOR:g} s:\n"
                    f"{out.read_text() if out.exists() else ''}")
    job = submit.stdout.strip().split(";")[0]
    assert job.isdigit(), f"sbatch printed no job id: {submit.stdout!r} {submit.stderr!r}"
    text = out.read_text()
    assert _job_field(env, job, "JobState") == "COMPLETED", text
    assert _job_field(env, job, "ExitCode") == "0:0", text

    # srun --label: tasks 0 and 1 are the pservers, 2 and 3 the trainers; trainer 0 reports.
    assert "2: 2 trainers, each fed its contiguous 1/2 of every batch" in text, text
    assert re.search(r"^2: pass   2  train loss", text, re.M), text
    dist_train, dist_test = _losses(text, prefix="2: ")

    alone = subprocess.run([sys.executable, *ARGS], capture_output=True, text=True, cwd=ROOT,
                           env={k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"},
                           timeout=120 * TIME_FACTOR)
    assert alone.returncode == 0, alone.stderr
    one_train, one_test = _losses(alone.stdout)
    # Sync training over evenly split batches is one process's run, up to float32 sums.
    assert dist_train == pytest.approx(one_train, rel=1e-3)
    assert dist_test == pytest.approx(one_test, rel=1e-3)
