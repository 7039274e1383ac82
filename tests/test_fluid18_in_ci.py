"""The comparisons with PaddlePaddle Fluid 1.8.5 itself, run where nobody set them up (marked
``slow``, so CI's ``python -m pytest -m slow`` runs it).

The tests that compare placegroup with Fluid 1.8.5 skip unless ``PLACEGROUP_PADDLE18_PYTHON``
names a python with it. This test builds that python (or reuses it: tests/fluid18_env.py, in
``PLACEGROUP_FLUID18_CACHE``, default ~/.cache/placegroup/fluid-1.8.5), then runs in a subprocess
every ``paddle``-marked test of the test files that read ``PLACEGROUP_PADDLE18_PYTHON`` or use the
``fluid18_python`` fixture, and asserts that none failed and none skipped for want of Fluid 1.8.5.
The Paddle 2.6 comparisons in those files skip there (``PLACEGROUP_PADDLE_PYTHON`` is removed
from the subprocess's environment), and so may a comparison for a reason of its own.

A new Fluid 1.8.5 comparison is picked up by itself when it carries the ``paddle`` marker and
is not ``slow``.
"""
from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests import fluid18_env
from tests.conftest import TIME_FACTOR

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# Comparisons that must have run and passed, by test function (any parameters): a rename shows
# up here rather than as a comparison that silently stopped running.
MUST_PASS = ("test_the_same_script_under_fluid_18_gives_the_same_losses", "test_lstm_classifier_equals_fluid18",
             "test_gru_classifier_equals_fluid18", "test_unit_model_equals_fluid18")


def _comparison_files() -> list[str]:
    """The test files that read PLACEGROUP_PADDLE18_PYTHON or use the fluid18_python fixture."""
    here = Path(__file__).resolve()
    return [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").glob("test_*.py"))
            if p != here and ("PLACEGROUP_PADDLE18_PYTHON" in (text := p.read_text()) or "fluid18_python" in text)]


def _cases(junit: Path) -> list[tuple[str, str, str]]:
    """(test id, outcome, message) for each test case of a junit XML report; outcome is one of
    passed, failed, skipped."""
    out = []
    for case in ET.parse(junit).iter("testcase"):
        test = f"{case.get('classname')}::{case.get('name')}"
        bad = case.find("failure") if case.find("failure") is not None else case.find("error")
        skipped = case.find("skipped")
        if bad is not None:
            out.append((test, "failed", (bad.text or bad.get("message", ""))[-2000:]))
        elif skipped is not None:
            out.append((test, "skipped", skipped.get("message", "")))
        else:
            out.append((test, "passed", ""))
    return out


def test_every_fluid18_comparison_runs_and_passes(tmp_path):
    try:
        env = fluid18_env.ensure()
    except fluid18_env.Fluid18EnvError as e:
        pytest.fail(f"cannot build the Fluid 1.8.5 environment: {e}", pytrace=False)
    files = _comparison_files()
    assert files, "no test file reads PLACEGROUP_PADDLE18_PYTHON"
    environ = env.environ()
    environ.pop("PLACEGROUP_PADDLE_PYTHON", None)  # Fluid 1.8.5 only; Paddle 2.6 is a local reference
    junit = tmp_path / "junit.xml"
    cmd = [sys.executable, "-m", "pytest", "-m", "paddle and not slow", "-q", "-rs", "-p", "no:cacheprovider",
           f"--junitxml={junit}", *files]
    proc = subprocess.run(cmd, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=1800 * TIME_FACTOR)
    tail = (proc.stdout + proc.stderr)[-5000:]
    assert junit.exists(), f"pytest wrote no report (exit {proc.returncode}):\n{tail}"
    cases = _cases(junit)
    failed = [f"{t}:\n{m}" for t, o, m in cases if o == "failed"]
    if failed:
        pytest.fail(f"{len(failed)} Fluid 1.8.5 comparison(s) failed:\n\n" + "\n\n".join(failed), pytrace=False)
    not_run = [f"{t}: {m}" for t, o, m in cases if o == "skipped" and "PLACEGROUP_PADDLE18_PYTHON" in m]
    if not_run:
        pytest.fail("comparisons skipped although PLACEGROUP_PADDLE18_PYTHON was set:\n" + "\n".join(not_run),
                    pytrace=False)
    passed = {t.split("::")[-1].split("[")[0] for t, o, _ in cases if o == "passed"}
    missing = [name for name in MUST_PASS if name not in passed]
    if missing:
        pytest.fail(f"these Fluid 1.8.5 comparisons did not run: {missing}\n{tail}", pytrace=False)
    assert proc.returncode == 0, f"pytest exited with {proc.returncode}:\n{tail}"
