"""Fluid 1.x training scripts run unchanged (tests/compat_scripts/: ``import paddle.fluid``), as
a checker would run them: under ``placegroup run``, data and initial values from outside, the
initial values set by name after the startup program.

* Against PaddlePaddle 2.6 (``paddle`` marker; ``PLACEGROUP_PADDLE_PYTHON`` names a python
  with paddle): the same models built with ``paddle.static`` (tests/paddle_ref/
  programs_runner.py) from the script's initial values, set there by name too, give the same
  per-step losses (rtol 1e-4; seen: ~2e-7) and the exported model the same predictions: a CNN
  with batch_norm and Adam, an MLP with L2 decay and global-norm clipping exported with
  save_inference_model, the word2vec N-gram model with a sparse shared embedding and L2 decay.
* Distributed (``placegroup launch --paddle-compat``, 2 trainers + 2 pservers, real processes):
  the mean of the trainers' losses and the trained model equal one process, for the MLP, the
  word-embedding model and a CNN with dropout. (batch_norm keeps each trainer's own batch
  statistics, as Paddle's transpiler does, so the CNN with it is not in this contract.)
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from placegroup.tools.launch import launch
from tests.conftest import TIME_FACTOR

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "compat_scripts"
RUNNER = ROOT / "tests" / "paddle_ref" / "programs_runner.py"
STEPS = 6


def _data(model: str, path: Path) -> Path:
    r = np.random.default_rng(2020)
    if model in ("cnn_classifier", "cnn_dropout"):
        arrays = dict(img=r.random((STEPS, 16, 1, 16, 16), dtype="float32"), label=r.integers(0, 10, (STEPS, 16, 1)))
    elif model == "mlp_export":
        arrays = dict(x=r.standard_normal((STEPS, 16, 20)).astype("float32"), label=r.integers(0, 4, (STEPS, 16, 1)),
                      test_x=r.standard_normal((5, 20)).astype("float32"))
    else:
        arrays = {n: r.integers(0, 200, (STEPS, 32, 1)) for n in ("firstw", "secondw", "thirdw", "fourthw", "nextw")}
    np.savez(path, steps=STEPS, **arrays)
    return path


def _run_script(model: str, data: Path, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-m", "placegroup", "run", str(SCRIPTS / f"{model}.py"), str(data), str(out)],
                          capture_output=True, text=True, timeout=120 * TIME_FACTOR, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(out) as z:
        return dict(z)


@pytest.fixture(scope="module")
def paddle_python() -> str:
    python = os.environ.get("PLACEGROUP_PADDLE_PYTHON")
    if not python:
        pytest.skip("PLACEGROUP_PADDLE_PYTHON is not set (a python with paddlepaddle==2.6.2; a local reference only)")
    return python


@pytest.mark.paddle
@pytest.mark.parametrize("model", ["cnn_classifier", "mlp_export", "word2vec"])
def test_a_fluid_script_gives_paddles_losses(model, paddle_python, tmp_path):
    data = _data(model, tmp_path / "data.npz")
    ours = _run_script(model, data, tmp_path / "ours.npz")
    spec = {"model": model, "data": str(data), "init": str(tmp_path / "ours.npz"), "out": str(tmp_path / "paddle.npz")}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    proc = subprocess.run([paddle_python, str(RUNNER), str(tmp_path / "spec.json")], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with np.load(tmp_path / "paddle.npz") as z:
        theirs = dict(z)
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-4)
    if "predict" in theirs:
        np.testing.assert_allclose(ours["predict"], theirs["predict"], rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize("model", ["mlp_export", "word2vec", "cnn_dropout"])
def test_a_fluid_script_launched_2x2_equals_one_process(model, tmp_path):
    data = _data(model, tmp_path / "data.npz")
    one = _run_script(model, data, tmp_path / "one.npz")
    out = io.StringIO()
    code = launch(str(SCRIPTS / f"{model}.py"), [str(data), str(tmp_path / "dist")], 2, 2, out=out,
                  grace=30 * TIME_FACTOR, paddle_compat=True)
    assert code == 0, out.getvalue()[-3000:]
    runs = []
    for t in range(2):
        with np.load(tmp_path / f"dist.trainer{t}.npz") as z:
            runs.append(dict(z))
    np.testing.assert_allclose(np.mean([r["loss"] for r in runs], axis=0), one["loss"], rtol=1e-5)
    if "predict" in one:
        for r in runs:
            np.testing.assert_allclose(r["predict"], one["predict"], rtol=1e-5, atol=1e-6)
