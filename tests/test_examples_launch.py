"""Every script in examples/ runs as a new user would run it: ``placegroup launch --trainers 2
--pservers 2 examples/X.py`` and ``--pservers 0``, with the example's own flags for a short run.

With pservers every example trains to completion. Without, an example whose model can train on
trainers alone (they all-reduce dense gradients) does; one with sparse gradients stops with one
line that says why (a ConfigError), and no traceback. The table below names every example in
both set-ups, so a new example has to be added to it. The quick runs are in the default suite;
the others are marked ``slow``.
"""
from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

from tests.conftest import TIME_FACTOR

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
SHORT = {  # each example's own flags for a run of a few seconds
    "fit_a_line": ["--passes", "1", "--no-progress"],
    "many_classes": ["--classes", "1000", "--steps", "5"],
    "sliced_wide_layer": ["--passes", "1", "--hidden", "256"],
    "ctr_slots": ["--steps", "5", "--vocab", "1000"],
    "ctr_sparse": ["--steps", "5", "--vocab", "10000", "--batch-size", "64"],
    "ctr_dynamic": ["--steps", "5", "--batch-size", "64"],
    "inference": ["--passes", "1"],
    "text_classification": ["--steps", "5"],
    "word2vec": ["--steps", "5", "--corpus", "2000"],
    "control_flow": ["--steps", "5"],
}
SPARSE = "sparse ones"  # what the one line says of a model that needs pservers
GROWN = "live on pservers"  # ... and of one whose tables are keyed by raw ids (sparse_embedding)
# (example, pservers, None: trains | the one ConfigError line's text); quick ones run by default
QUICK = [("many_classes", 2, None), ("many_classes", 0, None), ("fit_a_line", 0, None),
         ("inference", 0, None), ("ctr_sparse", 2, None), ("word2vec", 2, None), ("word2vec", 0, SPARSE),
         ("text_classification", 0, SPARSE), ("control_flow", 0, None), ("ctr_dynamic", 0, GROWN)]
SLOW = [("fit_a_line", 2, None), ("sliced_wide_layer", 2, None), ("sliced_wide_layer", 0, None),
        ("ctr_slots", 2, None), ("ctr_slots", 0, SPARSE), ("ctr_sparse", 0, SPARSE), ("inference", 2, None),
        ("text_classification", 2, None), ("control_flow", 2, None), ("ctr_dynamic", 2, None)]
CASES = [pytest.param(*c, id=f"{c[0]}-{c[1]}ps") for c in QUICK] + \
        [pytest.param(*c, id=f"{c[0]}-{c[1]}ps", marks=pytest.mark.slow) for c in SLOW]


def test_the_table_names_every_example_with_and_without_pservers():
    names = sorted(p.stem for p in EXAMPLES.glob("*.py"))
    assert sorted(SHORT) == names
    assert sorted((name, ps) for name, ps, _ in QUICK + SLOW) == sorted((n, ps) for n in names for ps in (0, 2))


def run_launch(tmp_path, name: str, pservers: int) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLE_", "TRAINING_ROLE", "POD_IP"))}
    env.pop("PLACEGROUP_DEBUG", None)  # the one-line failures keep their one line
    cmd = [sys.executable, "-m", "placegroup", "launch", "--trainers", "2", "--pservers", str(pservers),
           str(EXAMPLES / f"{name}.py"), *SHORT[name]]
    return subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240 * TIME_FACTOR)


@pytest.mark.parametrize("name, pservers, says", CASES)
def test_an_example_runs_under_placegroup_launch(tmp_path, name, pservers, says):
    r = run_launch(tmp_path, name, pservers)
    out = r.stdout + r.stderr
    assert "Traceback" not in out, out
    if says is None:
        assert r.returncode == 0, out
        assert "[launch]" not in out, out  # nobody failed, nobody was stopped
        return
    assert r.returncode == 1, out
    lines = [line for line in out.splitlines() if "placegroup: ConfigError:" in line]
    assert lines and all(says in line and "PADDLE_INIT_PSERVERS" in line for line in lines), out
