"""``placegroup dump`` (placegroup/tools/cli.py, placegroup/tools/dump.py; formats in docs/ir.md), through
click's CliRunner and once as a real process."""
import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from placegroup import DistributeTranspiler, __version__
from placegroup.tools.cli import main
from placegroup.io import save_program
from placegroup.ir.place_group import ExecutorId, PlaceGroup
from tests.conftest import build_fit_a_line

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PSERVER = "pserver/127.0.0.1:7164"
PS_ARGS = ["--role", "pserver", "--endpoint", "127.0.0.1:7164"]


def fit_a_line():
    build_fit_a_line(0.01)


@pytest.fixture
def placed(fresh_programs, tmp_path):
    """fit_a_line, placed by hand: optimizer and its state on a pserver, the rest on trainers;
    the data var ``y`` has no place."""
    main, _ = fresh_programs
    fit_a_line()
    for op in main.global_block().ops:
        op.place = PlaceGroup.parse(PSERVER if op.role == "optimize" else "trainer")
    for v in main.global_block().vars.values():
        v.place = (PlaceGroup.parse(PSERVER) if v.persistable else
                   None if v.name == "y" else PlaceGroup.parse("trainer"))
    main.executor = ExecutorId.parse("trainer", "127.0.0.1:6170")
    main.provenance = ["placement"]
    path = tmp_path / "prog.bin"
    save_program(main, str(path))
    return main, str(path)


@pytest.fixture
def plain(fresh_programs, tmp_path):
    main, _ = fresh_programs
    fit_a_line()
    path = tmp_path / "plain.bin"
    save_program(main, str(path))
    return main, str(path)


def dump(*args):
    result = CliRunner().invoke(main, ["dump", *args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.stdout


def test_text_has_summary_then_the_program(placed):
    program, path = placed
    out = dump(path)
    head, body = out.split("program seed=", 1)
    assert "program seed=" + body == str(program)
    assert head.splitlines() == [
        "// placegroup dump: 11 ops, 15 vars, 1 block(s)",
        "// made for executor: trainer@127.0.0.1:6170",
        "// placement                 ops   vars",
        "// pserver/127.0.0.1:7164      2      3",
        "// trainer                     9     11",
        "// -                           0      1",
    ]
    assert dump(path, "--format", "text") == out


def test_text_view_of_one_executor(placed):
    program, path = placed
    out = dump(path, *PS_ARGS)
    assert "// view: what pserver@127.0.0.1:7164 runs and holds: 2 of 11 ops, 4 of 15 vars" in out
    ops = re.findall(r"^  #(\d+) (\w+)", out, re.M)
    assert ops == [("9", "sgd"), ("10", "sgd")]  # indices of the whole program
    held = re.findall(r"^  var (\S+)", out, re.M)
    assert held == ["fc_0.b_0", "fc_0.w_0", "learning_rate_0", "y"]  # y has no place: everyone's
    full = set(str(program).splitlines())
    assert all(line in full for line in out.splitlines() if not line.startswith("//"))
    trainer = dump(path, "--role", "TRAINER")  # any case; no endpoint: any trainer
    assert len(re.findall(r"^  #\d+ ", trainer, re.M)) == 9 and "sgd(" not in trainer
    assert dump(path, "--role", "master").count("  #") == 0


def test_unplaced_ops_are_run_by_everyone(plain):
    program, path = plain
    out = dump(path, *PS_ARGS)
    assert len(re.findall(r"^  #\d+ ", out, re.M)) == len(program.global_block().ops)
    assert re.search(r"^// -\s+11\s+15$", out, re.M)
    assert "made for executor" not in out


def test_json_document(placed):
    program, path = placed
    doc = json.loads(dump(path, "--format", "json"))
    assert doc["format"] == "placegroup.dump/1" and doc["schema_version"] == 1
    assert doc["executor"] == {"role": "trainer", "endpoint": "127.0.0.1:6170", "rank": None}
    assert doc["cluster"] is None
    assert doc["provenance"] == ["placement"] and doc["view"] is None
    assert doc["placements"] == [{"place": PSERVER, "ops": 2, "vars": 3},
                                 {"place": "trainer", "ops": 9, "vars": 11},
                                 {"place": None, "ops": 0, "vars": 1}]
    block, = doc["blocks"]
    ops = block["ops"]
    assert [o["type"] for o in ops] == [op.type for op in program.global_block().ops]
    mul = ops[0]
    assert mul["inputs"] == {"X": ["x"], "Y": ["fc_0.w_0"]} and mul["outputs"] == {"Out": ["fc_0.tmp_0"]}
    assert mul["attrs"]["x_num_col_dims"] == 1 and mul["role"] == "forward" and mul["place"] == "trainer"
    assert ops[9]["role"] == "optimize" and ops[9]["place"] == PSERVER and ops[9]["index"] == 9
    w = next(v for v in block["vars"] if v["name"] == "fc_0.w_0")
    assert w == {"name": "fc_0.w_0", "shape": [13, 1], "dtype": "float32", "type": "lod_tensor",
                 "flags": ["param", "persistable"], "lod_level": 0, "place": PSERVER, "attrs": {}}
    assert [v["name"] for v in block["vars"]] == sorted(program.global_block().vars)
    assert dump(path, "--format", "json") == dump(path, "--format", "json")  # stable


def test_json_view(placed):
    _, path = placed
    doc = json.loads(dump(path, "--format", "json", *PS_ARGS))
    assert doc["view"] == {"role": "pserver", "endpoint": "127.0.0.1:7164", "rank": None}
    block, = doc["blocks"]
    assert [(o["index"], o["type"]) for o in block["ops"]] == [(9, "sgd"), (10, "sgd")]
    assert {v["name"] for v in block["vars"]} == {"fc_0.w_0", "fc_0.b_0", "learning_rate_0", "y"}


def _dot_graph(text):
    """(node id -> attrs, [(src, dst, attrs)]) from our DOT; checks it is well formed."""
    assert text.startswith("digraph program {\n") and text.rstrip().endswith("}")
    assert text.count("{") == text.count("}")
    nodes = dict(re.findall(r'^\s+("[^"]+"|legend_\d+) \[(.*)\];$', text, re.M))
    edges = re.findall(r'^\s+("[^"]+") -> ("[^"]+") \[(.*)\];$', text, re.M)
    for src, dst, _ in edges:
        assert src in nodes and dst in nodes, (src, dst)
    return nodes, edges


def test_dot_colours_placements_and_marks_cross_edges(placed):
    _, path = placed
    nodes, edges = _dot_graph(dump(path, "--format", "dot"))
    legend = {re.search(r'label="([^"]*)"', a).group(1): re.search(r'fillcolor="([^"]*)"', a).group(1)
              for n, a in nodes.items() if n.startswith("legend_")}
    assert list(legend) == [PSERVER, "trainer", "(no place)"]
    assert len(set(legend.values())) == 3
    mul = nodes['"op_0_0"']
    assert "shape=box" in mul and f'fillcolor="{legend["trainer"]}"' in mul
    assert f'fillcolor="{legend[PSERVER]}"' in nodes['"op_0_9"']
    assert "shape=ellipse" in nodes['"var_0_fc_0.w_0"'] and "@pserver" in nodes['"var_0_fc_0.w_0"']
    red = {(s, d): a for s, d, a in edges if "color=red" in a}
    # the trainer's mul reads the pserver's weight; the pserver's sgd reads the trainer's grad
    assert 'label="Y: pserver/127.0.0.1:7164 -> trainer"' in red[('"var_0_fc_0.w_0"', '"op_0_0"')]
    assert "style=bold" in red[('"var_0_fc_0.w_0"', '"op_0_0"')]
    assert ('"var_0_fc_0.w_0@GRAD"', '"op_0_9"') in red
    assert ('"var_0_y"', '"op_0_2"') in red  # an unplaced var read by a placed op crosses
    assert ('"var_0_x"', '"op_0_0"') not in red  # same placement
    assert len(red) == 8  # reads of w, b (fwd, grad), y (fwd, grad) and the two grads


@pytest.mark.parametrize("var,op,is_input,crossing", [
    (None, None, True, False),
    (None, "trainer", True, True),
    ("trainer", None, False, True),
    ("trainer", "trainer", True, False),
    ("trainer/gpu:[0]", "trainer/cpu", True, False),  # devices are not compared
    ("pserver", PSERVER, True, False),  # each pserver reads its own instance
    ("pserver", PSERVER, False, True),  # the other pservers' instances are not written
    (PSERVER, "pserver", True, True),
    (PSERVER, "pserver", False, False),
    ("trainer", PSERVER, True, True),  # a gather edge
    ("pserver/127.0.0.1:7164,127.0.0.1:7165", PSERVER, True, False),
    ("trainer,pserver", "pserver", True, False),
    ("pserver", "trainer,pserver", True, True),
])
def test_cross_edges(var, op, is_input, crossing):
    from placegroup.tools.dump import crosses

    parse = lambda t: None if t is None else PlaceGroup.parse(t)  # noqa: E731
    assert crosses(parse(var), parse(op), is_input) is crossing


def test_dot_view_draws_remote_vars_dashed(placed):
    _, path = placed
    nodes, edges = _dot_graph(dump(path, "--format", "dot", *PS_ARGS))
    ops = [n for n in nodes if n.startswith('"op_')]
    assert ops == ['"op_0_9"', '"op_0_10"']
    assert "style=dashed" in nodes['"var_0_fc_0.w_0@GRAD"']  # read here, held by the trainers
    assert "style=dashed" not in nodes['"var_0_fc_0.w_0"']


def test_dot_of_unplaced_program_has_no_cross_edges(plain):
    _, path = plain
    nodes, edges = _dot_graph(dump(path, "--format", "dot"))
    assert [e for e in edges if "color=red" in e[2]] == []
    assert sum(n.startswith("legend_") for n in nodes) == 1


def test_version():
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0 and result.stdout == f"placegroup {__version__}\n"


def _fails(args, message):
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    assert re.search(message, result.stderr), result.stderr
    return result.stderr


def test_errors_are_one_line_and_exit_2(placed, tmp_path):
    _, path = placed
    _fails(["dump", str(tmp_path / "missing.bin")],
           r"^placegroup: error: cannot read '.*missing.bin': No such file or directory$")
    _fails(["dump", str(tmp_path)], r"cannot read '.*': Is a directory")
    data = open(path, "rb").read()
    (tmp_path / "cut.bin").write_bytes(data[:-7])
    _fails(["dump", str(tmp_path / "cut.bin")], r"cut.bin: prog.bin is truncated or padded")
    (tmp_path / "flip.bin").write_bytes(data[:-3] + bytes([data[-3] ^ 1]) + data[-2:])
    _fails(["dump", str(tmp_path / "flip.bin")], r"flip.bin: prog.bin checksum mismatch")
    _fails(["dump", path, "--role", "chef"], r"bad executor --role 'chef'.*not one of trainer")
    _fails(["dump", path, "--role", "pserver", "--endpoint", "nowhere"], r"has no ':port'")
    _fails(["dump", path, "--endpoint", "127.0.0.1:7164"], r"--endpoint needs --role")
    result = CliRunner().invoke(main, ["dump", path, "--format", "svg"])
    assert result.exit_code == 2 and "'svg' is not one of" in result.stderr  # click's usage error


def test_as_a_real_process(placed, tmp_path):
    _, path = placed
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    run = [sys.executable, "-m", "placegroup.tools.cli"]
    ok = subprocess.run([*run, "dump", path, "--format", "json", *PS_ARGS], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr
    doc = json.loads(ok.stdout)
    assert [o["type"] for o in doc["blocks"][0]["ops"]] == ["sgd", "sgd"]
    text = subprocess.run([*run, "dump", path], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=60)
    assert text.returncode == 0 and "#0 mul(X=%x, Y=%fc_0.w_0)" in text.stdout
    bad = subprocess.run([*run, "dump", str(tmp_path / "missing.bin")], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stdout == ""
    assert bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert "No such file or directory" in bad.stderr


@pytest.mark.parametrize("kw, says", [
    ({}, r"trainer:0 -> pserver@127\.0\.0\.1:7164: fc_0\.w_0@GRAD \[gather\] after #\d+ \w+, every step, version step"),
    ({"sync_mode": False}, r"pserver@127\.0\.0\.1:7164 -> trainer:0, trainer:1: fc_0\.w_0 \[each answer \(to the "
                           r"instance that triggered it\)\] after #\d+ sgd, per arriving instance, any source's, any "
                           r"version, one per pass; .*, version the version of the instance it answers"),
    ({"merge_steps": 2}, r"trainer:1 -> pserver@127\.0\.0\.1:7164: fc_0\.w_0@GRAD@ROUND \[gather\] after #\d+ scale, "
                         r"once per round, version round \(step // 2\)")])
def test_dump_lists_every_transfer_of_a_transpiled_program(fresh_programs, tmp_path, kw, says):
    main, startup = fresh_programs
    fit_a_line()
    t = DistributeTranspiler()
    t.transpile(0, program=main, startup_program=startup, pservers="127.0.0.1:7164,127.0.0.1:7165", trainers=2,
                **kw)
    path = str(tmp_path / "prog.bin")
    save_program(t.get_program(None, "trainer"), path)
    out = dump(path)
    assert "// transfers: every message the job sends" in out and re.search(says, out), out
    doc = json.loads(dump(path, "--format", "json"))
    assert {x["rule"] for x in doc["transfers"]} >= {"broadcast", "fetch", "hello", "done", "error"}
    mine = dump(path, *PS_ARGS)  # one pserver's view: only what it sends or receives
    assert "pserver@127.0.0.1:7165 ->" not in mine and "-> pserver@127.0.0.1:7165" not in mine
