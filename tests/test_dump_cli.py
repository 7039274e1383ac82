"""``placegroup dump`` for someone who does not know the job yet: it names the trainers and
pservers a transpiled prog.bin records, lists them with ``--endpoints``, refuses a view that
names no executor or one outside the job (one line listing the valid ones), says how to draw
``--format dot``; and every subcommand's bad flag or argument is one line, exit status 2
(placegroup/tools/cli.py, placegroup/tools/dump_executors.py, docs/ir.md)."""
import os
import pty
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from placegroup import DistributeTranspiler
from placegroup.io import save_program
from placegroup.tools.cli import main
from tests.conftest import build_fit_a_line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PS = "127.0.0.1:7164,127.0.0.1:7165"


def saved(tmp_path, trainers=2, pservers=PS, name="prog.bin") -> str:
    """fit_a_line transpiled for ``trainers`` and ``pservers``, trainer 0's program saved."""
    build_fit_a_line(0.01)
    t = DistributeTranspiler()
    t.transpile(0, pservers=pservers, trainers=trainers)
    path = str(tmp_path / name)
    save_program(t.get_program(None, "trainer"), path)
    return path


@pytest.fixture
def job(fresh_programs, tmp_path):
    return saved(tmp_path)


def dump(*args):
    r = CliRunner().invoke(main, ["dump", *args])
    assert r.exit_code == 0, (r.output, r.exception)
    return r.stdout


def fails(*args):
    """The one stderr line of a dump (or other subcommand) that must fail with status 2."""
    r = CliRunner().invoke(main, list(args), prog_name="placegroup")
    assert r.exit_code == 2 and r.stdout == "", r.output
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr and "Usage:" not in r.stderr, r.stderr
    return r.stderr.rstrip("\n")


def test_text_names_the_executors_and_how_to_view_one(job):
    head = [ln for ln in dump(job).splitlines() if ln.startswith("// executors:")]
    assert head == ["// executors: 2 trainers (--role trainer --trainer-id 0..1), 2 pservers (--role pserver "
                    "--endpoint 127.0.0.1:7164 | 127.0.0.1:7165); --endpoints lists them"]


def test_endpoints_lists_every_executor_with_a_command_that_views_it(job):
    out = dump(job, "--endpoints")
    rows = [ln.split(None, 1) for ln in out.splitlines()]
    assert [name for name, _ in rows] == ["trainer:0", "trainer:1", "pserver@127.0.0.1:7164",
                                          "pserver@127.0.0.1:7165"]
    seen = {}
    for name, command in rows:
        words = command.split()
        assert words[:3] == ["placegroup", "dump", job]
        view = re.search(r"^// view: what (\S+) runs and holds: (\d+) of \d+ ops", dump(*words[2:]), re.M)
        seen[name] = (view[1], int(view[2]))
    assert seen["pserver@127.0.0.1:7164"] == ("pserver@127.0.0.1:7164", 3)
    assert seen["trainer:1"] == ("trainer:1", 9)
    assert all(n > 0 for _, n in seen.values())


@pytest.mark.parametrize("args, says", [
    (["--role", "pserver"], "--role pserver: this program has 2 pservers; name one with --endpoint "
                            "127.0.0.1:7164 | 127.0.0.1:7165"),
    (["--role", "pserver", "--endpoint", "10.0.0.1:7164"],
     "--endpoint 10.0.0.1:7164 is no pserver of this program; name one of its pservers with --endpoint "
     "127.0.0.1:7164 | 127.0.0.1:7165"),
    (["--role", "trainer"], "--role trainer: this program has 2 trainers; name one with --trainer-id 0..1"),
    (["--role", "trainer", "--trainer-id", "2"],
     "--trainer-id 2 is no trainer of this program; name one of its trainers with --trainer-id 0..1"),
    (["--role", "pserver", "--trainer-id", "0"], "--trainer-id goes with --role trainer, not --role pserver"),
    (["--role", "master"], "--role master: this program's cluster has no master; its roles are pserver, trainer"),
])
def test_a_view_must_name_one_executor_of_the_job(job, args, says):
    assert fails("dump", job, *args) == f"placegroup: error: {job}: {says}"


def test_flags_of_a_view_need_a_role(job):
    assert "--trainer-id needs --role" in fails("dump", job, "--trainer-id", "0")
    assert "--endpoint needs --role" in fails("dump", job, "--endpoint", "127.0.0.1:7164")


def test_a_lone_pserver_or_trainer_needs_no_name(fresh_programs, tmp_path):
    path = saved(tmp_path, trainers=1, pservers="127.0.0.1:7164")
    assert "// view: what pserver@127.0.0.1:7164 runs" in dump(path, "--role", "pserver")
    assert "// view: what trainer:0 runs" in dump(path, "--role", "trainer")


def test_trainers_listed_by_endpoint_are_named_either_way(fresh_programs, tmp_path):
    path = saved(tmp_path, trainers="127.0.0.1:6170,127.0.0.1:6171")
    by_id = dump(path, "--role", "trainer", "--trainer-id", "1")
    assert "// view: what trainer:1 runs" in by_id
    assert dump(path, "--role", "trainer", "--endpoint", "127.0.0.1:6171") == by_id
    assert fails("dump", path, "--role", "trainer").endswith(
        "name one with --trainer-id 0 (127.0.0.1:6170) | 1 (127.0.0.1:6171)")


def test_a_program_without_a_job_takes_the_view_as_given(fresh_programs, tmp_path):
    build_fit_a_line(0.01)
    path = str(tmp_path / "plain.bin")
    save_program(fresh_programs[0], path)
    assert "// executors:" not in dump(path)
    assert "records no cluster" in dump(path, "--endpoints")
    assert "// view: what pserver@10.0.0.1:1 runs and holds: 11 of 11 ops" in dump(
        path, "--role", "pserver", "--endpoint", "10.0.0.1:1")


# -- dot ----------------------------------------------------------------------------------------
def test_help_says_how_to_draw_dot():
    r = CliRunner().invoke(main, ["dump", "--help"])
    assert "dot -Tsvg" in r.stdout and "apt-get install graphviz" in r.stdout


def _on_a_terminal(args, env):
    """stdout of ``python -m placegroup.tools.cli ARGS`` written to a pseudo-terminal."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "placegroup.tools.cli", *args], stdout=slave,
                         stderr=subprocess.PIPE, env=env)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # EIO: the writer closed
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert p.wait(timeout=60) == 0, p.stderr.read()
    return out.decode().replace("\r\n", "\n")


def test_dot_on_a_terminal_starts_with_how_to_draw_it_and_a_pipe_gets_the_plain_graph(job, tmp_path):
    no_dot = str(tmp_path / "empty-bin")  # a PATH without graphviz's dot
    os.mkdir(no_dot)
    env = {**os.environ, "PYTHONPATH": ROOT, "PATH": no_dot}
    shown = _on_a_terminal(["dump", job, "--format", "dot"], env)
    first, rest = shown.split("\n", 1)
    assert first == (f"// graphviz source: draw it with `placegroup dump {job} --format dot | dot -Tsvg > prog.svg` "
                     "(this machine has no `dot`: apt-get install graphviz, brew install graphviz or conda "
                     "install graphviz)")
    piped = subprocess.run([sys.executable, "-m", "placegroup.tools.cli", "dump", job, "--format", "dot"],
                           env=env, capture_output=True, text=True, timeout=60)
    assert piped.stdout.startswith("digraph program {") and piped.stdout == rest
    assert dump(job, "--format", "dot") == rest


# -- usage errors of every subcommand -------------------------------------------------------------
def test_bad_flags_and_arguments_are_one_line(tmp_path):
    script = tmp_path / "x.py"
    script.write_text("")
    assert fails("launch", "--trainers", "-1", str(script)) == (
        "placegroup launch: error: Invalid value for '--trainers': -1 is not in the range x>=1. "
        "(see 'placegroup launch --help')")
    assert fails("launch", str(tmp_path / "nosuch.py")).startswith(
        "placegroup launch: error: Invalid value for 'SCRIPT': File ")
    assert fails("dump") == "placegroup dump: error: Missing argument 'PROG_BIN'. (see 'placegroup dump --help')"
    assert fails("dump", "x.bin", "--format", "svg").startswith("placegroup dump: error: Invalid value for '--format'")
    assert fails("nosuch") == "placegroup: error: No such command 'nosuch'. (see 'placegroup --help')"
    assert fails("dump", str(tmp_path / "missing.bin")).endswith("missing.bin': No such file or directory")


def test_as_real_processes(tmp_path):
    for args in (["dump", str(tmp_path / "missing.bin")], ["launch", "--trainers", "-1", "x.py"],
                 ["launch", "nosuch.py"]):
        p = subprocess.run([sys.executable, "-m", "placegroup", *args], cwd=tmp_path, capture_output=True,
                           text=True, timeout=60, env={**os.environ, "PYTHONPATH": ROOT})
        assert p.returncode == 2 and p.stdout == "" and p.stderr.count("\n") == 1, (args, p.stderr)
        assert re.match(r"(python -m )?placegroup( \w+)?: error: ", p.stderr), p.stderr
