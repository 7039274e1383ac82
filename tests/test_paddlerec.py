"""A real client: PaddleRec 1.8.5 (``paddle-rec==1.8.5.1`` from the package registry, installed
with ``--no-deps`` into a venv of its own, since it pins paddlepaddle) trains through its own
entry, ``python -m paddlerec.run -m config.yaml``, under placegroup's ``paddle`` alias
(``placegroup run -m``).

* Two models written here in its zoo's format (tests/paddlerec_models/): a CTR DNN and a
  DIN-style model whose batches are padded to their own width, each with ``thread_num: 2``,
  so PaddleRec runs them data parallel over 2 places, each place's batch its own width. From
  the same initial values (Fluid 1.8.5's, saved by its startup and loaded through the
  config's ``init_model_path``) each step's losses, one per place, and the parameters
  after the epoch equal Fluid 1.8.5's.
* The CTR DNN in PaddleRec's local cluster (2 pservers and a trainer per data file).
* PaddleRec's own tests, each module in its own process.

Marked slow: it installs a package and starts many processes."""
import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from placegroup.util.fluid_tensor_file import parse_fluid
from placegroup.util.var_format import read

pytestmark = pytest.mark.slow
MODELS = Path(__file__).resolve().parent / "paddlerec_models"
# the wrapper scripts/paddlerec_zoo.py runs PaddleRec through: with INIT_DIR set it saves what the
# startup made and stops, so both frameworks can start from Fluid's initial values
INIT_DUMP = runpy.run_path(str(Path(__file__).resolve().parent.parent / "scripts" / "paddlerec_zoo.py"))["SEEDED"]


@pytest.fixture(scope="module")
def paddlerec(tmp_path_factory) -> Path:
    """A venv (this Python, its site-packages visible) with paddle-rec 1.8.5.1 in it, no deps;
    returns the folder that holds the ``paddlerec`` package."""
    venv = tmp_path_factory.mktemp("paddlerec") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    site = next(venv.glob("lib/python*/site-packages"))
    got = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "--quiet", "--target", str(site),
                          "paddle-rec==1.8.5.1"], capture_output=True, text=True, timeout=600)
    if got.returncode != 0:
        pytest.skip(f"paddle-rec 1.8.5.1 could not be installed from the package registry: {got.stderr[-500:]}")
    assert (site / "paddlerec" / "run.py").is_file()
    return site


def _ctr_data(folder: Path, files: int, lines: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    for f in range(files):
        rows = []
        for _ in range(lines):
            slots = " ".join(f"{s}:{i}" for s in range(1, 5) for i in rng.integers(0, 100, size=rng.integers(1, 4)))
            values = rng.random(3)
            dense = " ".join(f"dense_var:{v:.4f}" for v in values)
            rows.append(f"click:{int(values[0] > 0.6)} {dense} {slots}")  # learnable from a dense feature
        (folder / f"part-{f}.txt").write_text("\n".join(rows) + "\n")


def _din_data(folder: Path, lines: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    rows = [" ".join(map(str, rng.integers(1, 50, size=rng.integers(1, 9)))) + f";{rng.integers(1, 50)};"
            f"{int(rng.random() < 0.5)}" for _ in range(lines)]
    (folder / "part-0.txt").write_text("\n".join(rows) + "\n")


def _config(work: Path, model: str, tag: str, *, init: str = "", cluster: bool = False) -> Path:
    """A config in the zoo's format for ``model`` (copied into ``work``): one train runner over
    the data in ``work/data``, thread_num 2, per-batch metrics dumped to ``work/<tag>.json``."""
    ws = work / model
    if not ws.exists():
        shutil.copytree(MODELS / model, ws)
    dataset = {"name": "train", "type": "DataLoader", "batch_size": 4, "data_path": str(work / "data")}
    if model == "ctr_dnn":
        dataset.update(sparse_slots="click 1 2 3 4", dense_slots="dense_var:3")
        hyper = {"vocab": 100, "dim": 4, "hidden": [16, 8]}
    else:
        dataset["data_converter"] = "{workspace}/reader.py"
        hyper = {"items": 50, "dim": 4}
    runner = {"name": "run", "class": "local_cluster_train" if cluster else "train", "epochs": 1, "device": "cpu",
              "print_interval": 1, "init_model_path": init, "save_checkpoint_interval": 1,
              "save_checkpoint_path": str(work / f"ckpt_{tag}"), "runner_result_dump_path": str(work / f"{tag}.json")}
    if cluster:
        runner.update(fleet_mode="ps", worker_num=2, server_num=2)
    config = {"workspace": str(ws), "dataset": [dataset],
              "hyper_parameters": {"optimizer": {"class": "Adam", "learning_rate": 0.01, "strategy": "sync"}, **hyper},
              "mode": ["run"], "runner": [runner],
              "phase": [{"name": "phase1", "model": "{workspace}/model.py", "dataset_name": "train", "thread_num": 2}]}
    path = work / f"config_{tag}.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def _run(python: str, args: list, work: Path, site: Path, env: dict | None = None, timeout: float = 600,
         finish: bool = True):
    full = {**os.environ, "PYTHONPATH": str(site), **(env or {})}
    full.pop("CPU_NUM", None)
    done = subprocess.run([python, *args], cwd=work, env=full, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0 and (not finish or "PaddleRec Finish" in done.stdout), \
        f"{' '.join(map(str, args))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def _under_placegroup(work: Path, site: Path) -> str:
    """The venv's python, whose ``placegroup run -m`` sees paddlerec."""
    return str(next(site.parents[2].glob("bin/python")))


@pytest.mark.paddle
@pytest.mark.parametrize("model", ["ctr_dnn", "din_like"])
def test_our_models_train_over_two_places_as_on_fluid(tmp_path, paddlerec, fluid18_python, model):
    if model == "ctr_dnn":
        _ctr_data(tmp_path / "data", files=1, lines=64, seed=1)
    else:
        _din_data(tmp_path / "data", lines=64, seed=2)
    (tmp_path / "dump.py").write_text(INIT_DUMP)
    init = tmp_path / "init"
    _run(fluid18_python, ["dump.py", "-m", _config(tmp_path, model, "dump")], tmp_path, paddlerec,
         env={"INIT_DIR": str(init)}, finish=False)  # it stops after the startup
    assert any(init.iterdir())
    _run(fluid18_python, ["-m", "paddlerec.run", "-m", _config(tmp_path, model, "fluid", init=str(init))],
         tmp_path, paddlerec)
    _run(_under_placegroup(tmp_path, paddlerec), ["-m", "placegroup", "run", "-m", "paddlerec.run", "-m",
                                                  _config(tmp_path, model, "ours", init=str(init))], tmp_path, paddlerec)
    theirs = json.loads((tmp_path / "fluid.json_epoch_0").read_text())
    ours = json.loads((tmp_path / "ours.json_epoch_0").read_text())
    assert len(ours) == len(theirs) == 8  # 64 samples, 4 a batch, 2 places a step
    losses = {tag: np.array([step[_loss_var(tmp_path / f"{tag}.json_epoch_0", step)] for step in run])
              for tag, run in (("ours", ours), ("fluid", theirs))}
    assert losses["ours"].shape == (8, 2)  # one loss per place, as Fluid fetches it
    np.testing.assert_allclose(losses["ours"], losses["fluid"], rtol=1e-5, atol=1e-7)
    # the auc counters are shared by the places (PaddleRec compiles thread_num > 1 with
    # ReduceStrategy.Reduce), and Fluid's two threads update them in whichever order they run,
    # so the AUCs are compared through the parameters they come from: saved after the epoch
    for name in os.listdir(tmp_path / "ckpt_fluid" / "0"):
        if name.startswith("_generated_var") or name.startswith("learning_rate"):
            continue
        saved = (tmp_path / "ckpt_fluid" / "0" / name).read_bytes()
        want = parse_fluid(saved, name, [name])[name]
        start = parse_fluid((init / name).read_bytes(), name, [name])[name]
        got = read(str(tmp_path / "ckpt_ours" / "0" / name), name)[name]
        assert np.linalg.norm(got - want) <= 1e-5 * np.linalg.norm(want - start) + 1e-7, name


def _loss_var(dump: Path, step: dict) -> str:
    """The fetched loss's name in a dump: the one metric that is no auc output."""
    names = [n for n in step if not n.startswith("auc")]
    assert len(names) == 1, (dump, sorted(step))
    return names[0]


def test_the_ctr_model_trains_in_paddlerecs_local_cluster(tmp_path, paddlerec):
    """2 pservers and 2 trainers (one a data file), each trainer over 2 places: every process
    ends, each trainer's loss is finite at every batch and lower at the end."""
    _ctr_data(tmp_path / "data", files=2, lines=320, seed=3)
    _run(_under_placegroup(tmp_path, paddlerec), ["-m", "placegroup", "run", "-m", "paddlerec.run", "-m",
                                                  _config(tmp_path, "ctr_dnn", "cluster", cluster=True)],
         tmp_path, paddlerec, timeout=900, finish=False)  # the launcher; its processes say it below
    logs = tmp_path / "logs"
    workers = sorted(logs.glob("worker.*"))
    assert len(workers) == 2 and len(list(logs.glob("server.*"))) == 2
    for w in workers:
        text = w.read_text()
        assert "PaddleRec Finish" in text, text[-3000:]
    steps = json.loads((tmp_path / "cluster.json_epoch_0").read_text())
    losses = np.array([s[_loss_var(tmp_path, s)] for s in steps])
    assert losses.shape[1] == 2 and np.isfinite(losses).all()
    assert losses[-10:].mean() < losses[:10].mean()


@pytest.mark.parametrize("module", ["test_auc_metrics", "test_pairwise_pn", "test_precision_recall_metrics",
                                    "test_recall_k"])
def test_paddlerecs_own_tests_pass(tmp_path, paddlerec, module):
    done = subprocess.run([_under_placegroup(tmp_path, paddlerec), "-m", "placegroup", "run", "-m", "unittest",
                           f"paddlerec.tests.{module}"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(paddlerec)})
    assert done.returncode == 0, done.stderr[-3000:]
