"""docs/launch.md's Slurm recipe (deploy/slurm/): each task's launch environment, and a real run.

The fast tests run job.sbatch with stand-ins for scontrol, srun and python, and check the
environment every task gets. The slow one starts a one-node cluster (scripts/slurm-local.sh: munged, slurmctld and slurmd, installed from
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

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "slurm-local.sh"
JOB = ROOT / "deploy" / "slurm" / "job.sbatch"
# --drop-last: every batch splits evenly over the trainers, so sync training equals one process.
ARGS = ["examples/fit_a_line.py", "--passes", "3", "--data", "diabetes", "--drop-last", "--no-progress"]


def _run_script(*args, timeout):
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


# Stand-ins: scontrol names the nodes of $FAKE_NODES; srun runs its command once per task with
# SLURM_PROCID and SLURMD_NODENAME as its cyclic distribution sets them; python prints the
# launch environment.
FAKES = {
    "scontrol": '[ "$1 $2" = "show hostnames" ] || exit 9\nfor n in $FAKE_NODES; do echo "$n"; done\n',
    "srun": 'echo "srun $*" >&2\nwhile [ "${1#-}" != "$1" ]; do shift; done\nnodes=($FAKE_NODES)\n'
            'for ((i = 0; i < SLURM_NTASKS; i++)); do\n'
            '  SLURM_PROCID=$i SLURMD_NODENAME=${FAKE_WRONG_NODE:-${nodes[i % ${#nodes[@]}]}} "$@" || exit\n'
            'done\n',
    "python": 'echo "$SLURM_PROCID $TRAINING_ROLE $POD_IP:$PADDLE_INIT_PORT id=${PADDLE_TRAINER_ID-} '
              'ps=$PADDLE_INIT_PSERVERS tr=$PADDLE_TRAINER_ENDPOINTS n=$PADDLE_INIT_TRAINERS $*"\n',
}


def _fake_job(tmp_path, nodes, ntasks=4, **env):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for name, body in FAKES.items():
        (bin_dir / name).write_text("#!/bin/bash\n" + body)
        (bin_dir / name).chmod(0o755)
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM", "PADDLE_", "TRAINING_"))}
    return subprocess.run(["bash", str(JOB), "examples/fit_a_line.py", "--passes", "3"], cwd=ROOT,
                          capture_output=True, text=True, timeout=30,
                          env={**clean, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                               "FAKE_NODES": " ".join(nodes), "SLURM_NTASKS": str(ntasks),
                               "SLURM_JOB_NODELIST": "x", "BASE_PORT": "7164", **env})


def test_on_one_node_every_task_is_on_127_0_0_1_with_its_own_port(tmp_path):
    r = _fake_job(tmp_path, ["vm"])
    assert r.returncode == 0, r.stderr
    assert "--distribution=cyclic" in r.stderr and "--kill-on-bad-exit=1" in r.stderr
    ps, tr = "127.0.0.1:7164,127.0.0.1:7165", "127.0.0.1:7166,127.0.0.1:7167"
    common = f"ps={ps} tr={tr} n=2 examples/fit_a_line.py --passes 3"
    assert r.stdout.splitlines() == [
        f"0 PSERVER 127.0.0.1:7164 id= {common}",
        f"1 PSERVER 127.0.0.1:7165 id= {common}",
        f"2 TRAINER 127.0.0.1:7166 id=0 {common}",
        f"3 TRAINER 127.0.0.1:7167 id=1 {common}",
    ]


def test_on_several_nodes_task_i_is_on_node_i_mod_nodes(tmp_path):
    r = _fake_job(tmp_path, ["n0", "n1"], ntasks=6, PSERVERS="1")
    assert r.returncode == 0, r.stderr
    ps, tr = "n0:7164", "n1:7165,n0:7166,n1:7167,n0:7168,n1:7169"
    lines = r.stdout.splitlines()
    assert lines[0].startswith(f"0 PSERVER n0:7164 id= ps={ps} tr={tr} n=5 ")
    assert [line.split()[1:4] for line in lines[1:]] == [
        ["TRAINER", "n1:7165", "id=0"], ["TRAINER", "n0:7166", "id=1"], ["TRAINER", "n1:7167", "id=2"],
        ["TRAINER", "n0:7168", "id=3"], ["TRAINER", "n1:7169", "id=4"]]


def test_a_task_on_another_node_than_its_endpoint_says_so(tmp_path):
    r = _fake_job(tmp_path, ["n0", "n1"], FAKE_WRONG_NODE="n1")
    assert r.returncode == 2 and r.stdout == ""
    assert "task.sh: task 0 runs on n1, but its endpoint is n0:7164: give every node the same " \
           "number of tasks (sbatch --ntasks-per-node)" in r.stderr


def test_a_job_with_no_room_for_a_trainer_is_refused(tmp_path):
    r = _fake_job(tmp_path, ["vm"], ntasks=2)
    assert r.returncode == 2
    assert "job.sbatch: 2 tasks leave no trainer beside 2 pservers" in r.stderr


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


@pytest.mark.slow
def test_the_slurm_recipe_trains_fit_a_line_with_two_pservers_and_two_trainers(slurm, tmp_path):
    pytest.importorskip("sklearn")  # fit_a_line's diabetes set ships inside scikit-learn
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
