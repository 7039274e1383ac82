"""README.md's "What a user writes" runs as written: in one process, with no launch environment,
and as each process of a local cluster (``placegroup launch``), with pservers and without.

The snippet is taken from the README itself, so it cannot drift from what runs; the test only
defines ``my_batches`` (this trainer's part of a few batches of a linear problem) before it and
prints the last loss after it.
"""
from __future__ import annotations

import io
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest

from placegroup.tools.launch import launch
from tests.conftest import TIME_FACTOR

ROOT = pathlib.Path(__file__).resolve().parent.parent
BATCHES = """
import os
import numpy as np

_tid = int(os.getenv("PADDLE_TRAINER_ID", "0"))
_n = int(os.getenv("PADDLE_INIT_TRAINERS", "1"))
_rng = np.random.default_rng(0)
my_batches = []
for _ in range(20):
    _x = _rng.normal(size=(8, 13)).astype("float32")
    _y = _x[:, :3].sum(1, keepdims=True)
    my_batches.append({"x": _x[_tid::_n], "y": _y[_tid::_n]})
"""
REPORT = """
if role != "PSERVER":
    print("snippet trained; last loss", float(loss[0]))
"""


def readme_snippet() -> str:
    """The first python block of README.md's "What a user writes" section."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## What a user writes", 1)[1].split("\n## ", 1)[0]
    found = re.search(r"```python\n(.*?)```", section, re.S)
    assert found, "README.md's 'What a user writes' has no python block"
    return found.group(1)


def _script(tmp_path) -> str:
    path = tmp_path / "readme_snippet.py"
    path.write_text(BATCHES + readme_snippet() + REPORT)
    return str(path)


def _last_losses(out: str) -> list[float]:
    return [float(v) for v in re.findall(r"snippet trained; last loss (\S+)", out)]


def test_the_readme_snippet_runs_in_one_process(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLE_", "TRAINING_ROLE", "POD_IP"))}
    r = subprocess.run([sys.executable, _script(tmp_path)], env=env, cwd=tmp_path, capture_output=True,
                       text=True, timeout=60 * TIME_FACTOR)
    assert r.returncode == 0, r.stdout + r.stderr
    (loss,) = _last_losses(r.stdout)
    assert math.isfinite(loss) and loss < 3.0  # the targets' variance is 3: it learned something


@pytest.mark.parametrize("pservers", [1, 0])
def test_the_readme_snippet_runs_as_a_cluster(tmp_path, pservers):
    out = io.StringIO()
    code = launch(_script(tmp_path), [], trainers=2, pservers=pservers, out=out, grace=30 * TIME_FACTOR)
    assert code == 0, out.getvalue()
    losses = _last_losses(out.getvalue())
    assert len(losses) == 2 and all(math.isfinite(v) and v < 3.0 for v in losses), out.getvalue()
