"""``placegroup launch`` for scripts that take their role as arguments (NOTE(role-args) in
placegroup/tools/launch.py), and the warning for a job whose trainers all trained alone
(NOTE(trained-alone)).

* ``--trainer-args``/``--pserver-args`` placeholders are filled per process from its launch
  environment, again on each attempt; a bad one is refused before anything starts.
* Paddle's distributed-test runner (tests/compat_scripts/dist_runner.py), launched 2 + 2 with its
  roles from those flags, trains with its pservers: in sync mode the trainers' mean loss equals
  one process's.
* A script that ignores its role trains alone in every process: launch still exits 0 (or with
  the failure of a pserver that never returns) and says why on its output and on stderr.
"""
from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from placegroup.errors import ConfigError
from placegroup.tools.cli import main
from placegroup.tools.launch import cluster_envs, expand_role_args, launch, role_args, take_role_args
from placegroup.tools import progress
from placegroup.tools.progress import exit_record, parse_record
from tests.conftest import TIME_FACTOR

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "tests" / "compat_scripts" / "dist_runner.py"
ALONE = ROOT / "tests" / "dist" / "train_alone.py"
PSERVER_ARGS = "--role pserver --current_endpoint {endpoint} --endpoints {pservers} --trainers {trainers}"
TRAINER_ARGS = "--role trainer --trainer_id {trainer_id} --endpoints {pservers} --trainers {trainers}"
WARNING = "no trainer ever exchanged data with them"


def _lines(text: str) -> dict[str, list[dict]]:
    """The JSON lines each process printed, by the name launch prefixed them with
    (``[trainer:0] {...}``, ``[pserver@127.0.0.1:41237] {...}``)."""
    out: dict[str, list[dict]] = {}
    for m in re.finditer(r"^\[(\S+)\] (\{.*)$", text, re.M):
        out.setdefault(m.group(1), []).append(json.loads(m.group(2)))
    return out


def test_placeholders_are_filled_per_process():
    envs = {(m.role, m.index): m.env for m in cluster_envs(2, 2)}
    ps, tr = role_args(PSERVER_ARGS + " --name '{role} {pserver_id}'", "PSERVER"), role_args(TRAINER_ARGS, "TRAINER")
    pservers = envs["PSERVER", 0]["PADDLE_PSERVERS_IP_PORT_LIST"]
    assert expand_role_args(ps, envs["PSERVER", 1]) == [
        "--role", "pserver", "--current_endpoint", pservers.split(",")[1], "--endpoints", pservers,
        "--trainers", "2", "--name", "PSERVER 1"]
    assert expand_role_args(tr, envs["TRAINER", 1]) == [
        "--role", "trainer", "--trainer_id", "1", "--endpoints", pservers, "--trainers", "2"]
    t0 = envs["TRAINER", 0]
    assert expand_role_args(role_args("{endpoint} {trainer_endpoints} {{x}}", "TRAINER"), t0) == [
        t0["PADDLE_CURRENT_ENDPOINT"], t0["PADDLE_TRAINER_ENDPOINTS"], "{x}"]
    assert role_args(None, "TRAINER") == [] and role_args("", "PSERVER") == []


@pytest.mark.parametrize("text, role, match", [
    ("--id {trainer_id}", "PSERVER", r"--pserver-args: \{trainer_id\} is a trainer's placeholder; a pserver's "
                                     r"placeholders are \{endpoint\}, \{pserver_id\}, \{pservers\}"),
    ("--id {pserver_id}", "TRAINER", r"--trainer-args: \{pserver_id\} is a pserver's placeholder"),
    ("--eps {pserver}", "TRAINER", r"unknown placeholder \{pserver\} in '\{pserver\}'; a trainer's placeholders "
                                   r"are \{endpoint\}, \{trainer_id\}"),
    ("--x {}", "TRAINER", r"unknown placeholder \{\}"),
    ("--x {endpoint", "TRAINER", r"expected '\}'.*write \{\{ and \}\} for a literal brace"),
    ("--x {endpoint!q}", "TRAINER", r"--trainer-args: '\{endpoint!q\}'"),
    ("--x 'open", "PSERVER", r"--pserver-args \"--x 'open\": No closing quotation"),
])
def test_a_bad_placeholder_is_refused_naming_it_and_the_ones_there_are(text, role, match):
    with pytest.raises(ConfigError, match=match):
        role_args(text, role)


def test_launch_refuses_a_bad_placeholder_before_starting_anything(tmp_path):
    marker = tmp_path / "started"
    script = tmp_path / "s.py"
    script.write_text(f"open({str(marker)!r}, 'w').close()\n")
    with pytest.raises(ConfigError, match="unknown placeholder"):
        launch(str(script), [], 1, 1, out=io.StringIO(), trainer_args="--x {nope}")
    assert not marker.exists()


def test_the_command_line_takes_them_before_or_after_the_script_and_says_what_is_wrong_in_one_line():
    rest, taken = take_role_args(["--is_local", "0", "--pserver-args", "--role pserver", "--trainer-args=--b 1"],
                                 {"TRAINER": "--a {trainer_id}", "PSERVER": None})
    assert rest == ["--is_local", "0"]
    assert taken == {"TRAINER": "--a {trainer_id} --b 1", "PSERVER": "--role pserver"}
    result = CliRunner().invoke(main, ["launch", "--pserver-args", "--id {trainer_id}", str(ALONE)],
                                prog_name="placegroup")
    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        "placegroup launch: error: --pserver-args: {trainer_id} is a trainer's placeholder; a pserver's "
        "placeholders are {endpoint}, {pserver_id}, {pservers}, {trainers}, {trainer_endpoints}, {role} "
        "(see 'placegroup launch --help')"]
    assert "--trainer-args needs a value" in CliRunner().invoke(main, ["launch", str(ALONE), "--trainer-args"]).output
    help_text = CliRunner().invoke(main, ["launch", "--help"]).output
    assert '--trainer-args "--role trainer --trainer_id {trainer_id}' in help_text


def test_a_restart_fills_the_placeholders_with_its_fresh_endpoints(tmp_path):
    """Trainer 0 fails on the first attempt; each attempt's flags name that attempt's ports."""
    script = tmp_path / "args.py"
    script.write_text("import json, os, sys\n"
                      "print(json.dumps({'argv': sys.argv[1:], 'env': os.environ['PADDLE_CURRENT_ENDPOINT'],\n"
                      "                  'pservers': os.environ['PADDLE_PSERVERS_IP_PORT_LIST'],\n"
                      "                  'attempt': os.environ['PLACEGROUP_RESTART']}))\n"
                      "sys.exit(os.environ['PLACEGROUP_RESTART'] == '0' and os.environ['TRAINING_ROLE'] == 'TRAINER')\n")
    out = io.StringIO()
    code = launch(str(script), ["--common"], 1, 1, out=out, max_restarts=1, grace=5 * TIME_FACTOR,
                  trainer_args="--me {endpoint} --ps {pservers}", pserver_args="--me {endpoint}")
    assert code == 0, out.getvalue()
    seen = {}
    for name, recs in _lines(out.getvalue()).items():
        for rec in recs:
            trainer = name == "trainer:0"
            assert trainer or name == f"pserver@{rec['env']}"  # named by this attempt's endpoint
            want = ["--common", "--me", rec["env"]] + (["--ps", rec["pservers"]] if trainer else [])
            assert rec["argv"] == want
            seen[name.split("@")[0], rec["attempt"]] = rec["env"]
    # the trainer prints before it fails; the first pserver may be stopped before it prints
    assert {("trainer:0", "0"), ("trainer:0", "1"), ("pserver", "1")} <= set(seen), out.getvalue()


def test_an_exit_record_is_a_record_line(capfd, monkeypatch):
    """As a process launch started, which ran a distributed program, writes it at exit."""
    monkeypatch.setenv("PLACEGROUP_PROGRESS", "lines")
    monkeypatch.setenv("PLACEGROUP_LAUNCHER_PID", str(os.getppid()))
    monkeypatch.setattr(progress, "ran_distributed", lambda: True)
    exit_record()
    line = capfd.readouterr().out
    assert parse_record(line) == {"distributed": True}
    assert parse_record(line.replace("true", '"yes"')) is None


def _dist_env() -> dict:
    return {"CPU_NUM": "1"}


def test_dist_runner_launched_2x2_with_role_args_trains_with_its_pservers(capsys):
    """Sync mode, each trainer fed every other example of a batch: the mean of the two trainers'
    losses is the local run's, step by step; no warning."""
    common = ["--model", "word2vec", "--batch_size", "8", "--lr", "0.1"]
    out = io.StringIO()
    code = launch(str(RUNNER), [*common, "--update_method", "pserver", "--sync_mode"], 2, 2, out=out,
                  paddle_compat=True, extra_env=_dist_env(), grace=30 * TIME_FACTOR,
                  pserver_args=PSERVER_ARGS, trainer_args=TRAINER_ARGS + " --use_reader_alloc")
    text = out.getvalue()
    assert code == 0, text[-3000:]
    assert WARNING not in text and WARNING not in capsys.readouterr().err
    recs = _lines(text)
    tr0, tr1 = ([r["loss"] for r in recs[f"trainer:{i}"]] for i in range(2))
    assert sorted(recs) == ["trainer:0", "trainer:1"]  # the pservers served; they trained nothing of their own
    local = subprocess.run([sys.executable, "-m", "placegroup", "run", str(RUNNER), *common, "--role", "trainer",
                            "--update_method", "local"], cwd=ROOT, env={**os.environ, **_dist_env()},
                           capture_output=True, text=True, timeout=60 * TIME_FACTOR, check=False)
    assert local.returncode == 0, local.stderr[-3000:]
    want = [json.loads(line)["loss"] for line in local.stdout.splitlines() if line.startswith('{"step"')]
    assert len(want) == len(tr0) == len(tr1) == 5
    np.testing.assert_allclose((np.array(tr0) + np.array(tr1)) / 2, want, rtol=1e-5)


def test_a_script_that_ignores_its_role_ends_with_the_warning_and_status_0(capsys):
    out = io.StringIO()
    assert launch(str(ALONE), [], 2, 2, out=out, grace=30 * TIME_FACTOR) == 0, out.getvalue()
    text = out.getvalue()
    recs = _lines(text)  # everyone trained alone
    assert {"trainer:0", "trainer:1"} < set(recs) and [len(r) for r in recs.values()] == [3] * 4, recs
    assert f"[launch] warning: pservers were started, but {WARNING}" in text
    assert "--trainer-args and --pserver-args" in text and "docs/launch.md" in text
    assert f"placegroup launch: warning: pservers were started, but {WARNING}" in capsys.readouterr().err


def test_pservers_that_never_return_after_trainers_trained_alone_get_the_warning_too(capsys):
    out = io.StringIO()
    assert launch(str(ALONE), ["--pserver-hangs"], 1, 1, out=out, grace=1.0) == 1
    text = out.getvalue()
    assert re.search(r"^\[launch\] pserver@127\.0\.0\.1:\d+ still running", text, re.M) and WARNING in text, text
    assert WARNING in capsys.readouterr().err


def test_no_warning_without_pservers_or_without_placegroup(tmp_path, capsys):
    """Trainers alone (--pservers 0) are meant to be; a script that never imports placegroup
    sends no record, so launch cannot tell and says nothing."""
    script = tmp_path / "plain.py"
    script.write_text("print('hello')\n")
    for path, pservers in ((script, 1), (ALONE, 0)):
        out = io.StringIO()
        assert launch(str(path), [], 1, pservers, out=out) == 0, out.getvalue()
        assert "hello" in out.getvalue() or "trainer:0" in _lines(out.getvalue())
        assert WARNING not in out.getvalue() and WARNING not in capsys.readouterr().err
