"""Feed shapes: every case of tests/cases/feed_shapes.py replayed with placegroup, and (``paddle``
marker, ``PLACEGROUP_PADDLE18_PYTHON``) with PaddlePaddle Fluid 1.8.5 itself, whose outcome must
be the one the table records. Both sides run the same program and feed through
tests/paddle_ref/feed_runner.py; Fluid runs in a process of its own, reading the cases as JSON."""
import json
import re
from pathlib import Path

import numpy as np
import pytest

import placegroup as fluid
from tests.cases.feed_shapes import CASES
from tests.conftest import TIME_FACTOR
from tests.paddle_ref import feed_runner
from tests.paddle_ref.reference import run_python

RUNNER = Path(__file__).parent / "paddle_ref" / "feed_runner.py"


def _problems(case: dict, got: dict, *, fluid_side: bool) -> list[str]:
    """How ``got`` (one side's outcome) differs from what the table records for that side."""
    dtype = case["declare"].get("dtype", "float32")
    refused = case.get("fluid") if fluid_side else case.get("refused")
    sees = case.get("fluid_sees", case.get("sees")) if fluid_side else case.get("sees")
    if fluid_side and "fluid" in case and "fluid_sees" not in case:
        sees = None  # Fluid refused it
    if refused is not None and sees is None:
        if got["ok"]:
            return [f"was taken (op sees {got['shape']}), the table says refused"]
        kind = "" if fluid_side else "ProgramError: "
        if not got["error"].startswith(kind) or not re.search(refused, got["error"]):
            return [f"refused with {got['error'][:600]!r}, which does not match {kind}{refused!r}"]
        return []
    if not got["ok"]:
        return [f"was refused ({got['error'][:600]}), the table says the op sees {sees}"]
    out = []
    if got["shape"] != sees:
        out.append(f"op sees {got['shape']}, the table says {sees}")
    if got["lod"] != case.get("lod", []):
        out.append(f"LoD {got['lod']}, the table says {case.get('lod', [])}")
    want = np.asarray(feed_runner.fed_numbers(case["fed"], dtype), np.float64)
    if case.get("net") == "fc":  # its output, before the first update
        want = want * feed_runner.W0 + feed_runner.B0
    if not np.array_equal(np.asarray(got["values"], np.float64), want):
        out.append(f"values {got['values'][:8]}..., want {want[:8].tolist()}...")
    if "loss" in case:
        n = len(got.get("loss", []))
        if n < 1 or not np.allclose(got["loss"], case["loss"][:n], rtol=1e-5, atol=1e-6):
            out.append(f"losses {got.get('loss')}, the table says {case['loss']}")
    return out


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_placegroup_takes_or_refuses_each_feed_as_the_table_says(case):
    got = feed_runner.run_case(fluid, case)
    assert not _problems(case, got, fluid_side=False), (case, got)


def test_every_case_where_placegroup_departs_from_fluid_says_why():
    for case in CASES:
        refused_only_by_fluid = "fluid" in case and "refused" not in case
        taken_only_by_fluid = "fluid_sees" in case
        assert bool(case.get("why")) == (refused_only_by_fluid or taken_only_by_fluid), case["id"]
        assert ("refused" in case) != ("sees" in case), case["id"]
        if "refused" in case:
            assert "fluid" in case or "fluid_sees" in case, f"{case['id']}: say what Fluid did"


def test_the_cases_are_data_only():
    assert json.loads(json.dumps(CASES)) == CASES


def test_a_padded_batch_trains_as_in_fluid():
    """The case that started the table: samples padded to [2, 1] for a [-1, 10, 1] var, through the
    DataFeeder, train an fc over the last dim, and the op sees [N, 2, 1] (Fluid 1.8.5's losses are
    the table's)."""
    case = next(c for c in CASES if c["id"] == "feeder-L-pad-fc")
    got = feed_runner.run_case(fluid, case)
    assert got["ok"] and got["shape"] == [2, 2, 1], got
    np.testing.assert_allclose(got["loss"], case["loss"], rtol=1e-5)


@pytest.mark.paddle
def test_fluid_18_takes_or_refuses_each_feed_as_the_table_says(fluid18_python, tmp_path):
    spec = tmp_path / "spec.json"  # the outcomes are JSON, not arrays: not run_reference
    spec.write_text(json.dumps({"cases": CASES, "out": str(tmp_path / "out.json")}))
    run_python(fluid18_python, RUNNER, spec, cwd=tmp_path, timeout=900 * TIME_FACTOR)
    results = json.loads((tmp_path / "out.json").read_text())
    wrong = {c["id"]: p for c in CASES for p in _problems(c, results[c["id"]], fluid_side=True)}
    assert not wrong, "\n".join(f"{k}: {v}" for k, v in wrong.items())

