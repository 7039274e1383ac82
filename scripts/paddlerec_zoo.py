"""PaddleRec 1.8.5's model zoo through PaddleRec's own entry, on placegroup and on Fluid 1.8.5.

For each model of a PaddleRec v1.8.5 checkout this script:

1. writes a config beside the zoo's: its first CPU train runner, one epoch, every batch's
   metrics dumped (``runner_result_dump_path``), nothing saved;
2. runs PaddleRec on Fluid 1.8.5 once to save the startup's values (the initial parameters);
3. runs PaddleRec on Fluid 1.8.5 and on placegroup (``placegroup run -m paddlerec.run``) from
   those values, Python's and numpy's random seeded (the din reader shuffles, the tagspace and
   word2vec readers draw negatives);
4. compares the two runs' metrics batch by batch;

and, with ``--cluster``, runs each model in PaddleRec's local cluster (2 pservers, a trainer
per data file) on both and says which finish.

Usage::

    python scripts/paddlerec_zoo.py --zoo ~/PaddleRec --paddlerec /path/holding/paddlerec \\
        --fluid-python ~/.cache/placegroup/fluid-1.8.5/env/bin/python [--batches 20] [--cluster]

``--paddlerec`` is a folder holding the ``paddlerec`` package (``pip install --no-deps
--target DIR paddle-rec==1.8.5.1``); the zoo is not in that wheel, so ``--zoo`` is a checkout of
PaddlePaddle/PaddleRec at v1.8.5. Work files go to ``--work`` (a temporary folder by default).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import yaml

MODELS = ["rank/dnn", "rank/wide_deep", "rank/deepfm", "rank/xdeepfm", "rank/dcn", "rank/din",
          "match/multiview-simnet", "recall/word2vec", "contentunderstanding/tagspace"]

SEEDED = '''
import os, random, runpy, sys
import numpy
import paddle.fluid as fluid
if os.environ.get("INIT_DIR"):  # save what the startup made, then stop
    import paddlerec.core.trainers.framework as fw
    sys.path.append(os.path.dirname(fw.__file__))
    import startup  # the module PaddleRec's trainer imports by file name
    run = startup.SingleStartup.startup
    def save_and_stop(self, context):
        run(self, context)
        for phase in context["phases"]:
            model = context["model"][phase["name"]]
            with fluid.scope_guard(model["scope"]):
                fluid.io.save_persistables(context["exe"], os.environ["INIT_DIR"], model["main_program"])
        sys.stdout.flush()
        os._exit(0)
    startup.SingleStartup.startup = save_and_stop
random.seed(0)
numpy.random.seed(0)
sys.argv = ["paddlerec.run"] + sys.argv[1:]
runpy.run_module("paddlerec.run", run_name="__main__", alter_sys=True)
'''


def _config(zoo: Path, model: str, work: Path, tag: str, init: str = "", cluster: bool = False) -> Path:
    cfg = yaml.safe_load((zoo / "models" / model / "config.yaml").read_text())
    train = next(r for r in cfg["runner"] if r.get("class") == "train" and r.get("device", "cpu") == "cpu")
    runner = {"name": "zoo_check", "class": "local_cluster_train" if cluster else "train", "epochs": 1,
              "device": "cpu", "print_interval": 1, "init_model_path": init, "save_checkpoint_interval": 100,
              "save_checkpoint_path": str(work / f"ckpt_{tag}"),
              "runner_result_dump_path": str(work / f"{model.replace('/', '_')}.{tag}.json")}
    if cluster:
        runner.update(fleet_mode="ps", worker_num=2, server_num=2)
    if "phases" in train:
        runner["phases"] = train["phases"]
    cfg["runner"].append(runner)
    cfg["mode"] = ["zoo_check"]
    path = zoo / "models" / model / f"config_zoo_check_{tag}.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def _run(cmd: list, zoo: Path, paddlerec: str, env: dict | None = None) -> tuple[bool, str]:
    full = {**os.environ, "PYTHONPATH": paddlerec, **(env or {})}
    full.pop("CPU_NUM", None)
    done = subprocess.run(cmd, cwd=zoo, env=full, capture_output=True, text=True, timeout=900)
    return done.returncode == 0 and "PaddleRec Finish" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


def _compare(a: list, b: list, batches: int) -> tuple[float, str]:
    worst, where = 0.0, ""
    for i, (x, y) in enumerate(zip(a[:batches], b[:batches])):
        for k in y:
            if k not in x:
                return float("inf"), f"batch {i}: no {k!r} on placegroup (it has {sorted(x)})"
            u, v = np.asarray(x[k], float), np.asarray(y[k], float)
            r = float("inf") if u.shape != v.shape else float(np.max(np.abs(u - v) / np.maximum(np.abs(v), 1e-6)))
            if r > worst:
                worst, where = r, f"batch {i} {k}: {x[k]} vs {y[k]}"
    return worst, where


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--zoo", type=Path, required=True, help="a PaddlePaddle/PaddleRec checkout at v1.8.5")
    ap.add_argument("--paddlerec", required=True, help="a folder holding the paddlerec package (1.8.5.1)")
    ap.add_argument("--fluid-python", required=True, help="a python with paddlepaddle==1.8.5")
    ap.add_argument("--work", type=Path, default=None, help="where the work files go (default: a temporary folder)")
    ap.add_argument("--batches", type=int, default=20, help="how many first batches to compare")
    ap.add_argument("--cluster", action="store_true", help="also run each model in PaddleRec's local cluster")
    ap.add_argument("--models", nargs="*", default=MODELS)
    a = ap.parse_args()
    work = a.work or Path(tempfile.mkdtemp(prefix="paddlerec_zoo_"))
    work.mkdir(parents=True, exist_ok=True)
    (work / "seeded.py").write_text(SEEDED)
    seeded = str(work / "seeded.py")
    ours = [sys.executable, "-m", "placegroup", "run", seeded]
    for model in a.models:
        t = model.replace("/", "_")
        init = work / "init" / t
        shutil.rmtree(init, ignore_errors=True)
        ok, log = _run([a.fluid_python, seeded, "-m", str(_config(a.zoo, model, work, "init"))], a.zoo, a.paddlerec,
                       {"INIT_DIR": str(init)})
        if not init.is_dir():
            print(f"{model:32s} Fluid 1.8.5 saved no initial values:\n{log}")
            continue
        runs = {}
        for tag, cmd in (("fluid", [a.fluid_python, seeded]), ("placegroup", ours)):
            ok, log = _run([*cmd, "-m", str(_config(a.zoo, model, work, tag, init=str(init)))], a.zoo, a.paddlerec)
            dump = work / f"{t}.{tag}.json_epoch_0"
            runs[tag] = json.loads(dump.read_text()) if ok and dump.exists() else None
            if runs[tag] is None:
                print(f"{model:32s} {tag} failed:\n{log}")
        if runs["fluid"] is not None and runs["placegroup"] is not None:
            worst, where = _compare(runs["placegroup"], runs["fluid"], a.batches)
            print(f"{model:32s} batches {len(runs['placegroup'])} (Fluid {len(runs['fluid'])}), largest relative "
                  f"difference over the first {a.batches}: {worst:.2e}" + (f"  [{where}]" if worst > 1e-4 else ""))
        if a.cluster:
            finished = {}
            for tag, cmd in (("fluid", [a.fluid_python, seeded]), ("placegroup", ours)):
                shutil.rmtree(a.zoo / "logs", ignore_errors=True)
                _run([*cmd, "-m", str(_config(a.zoo, model, work, tag + "_cluster", cluster=True))], a.zoo,
                     a.paddlerec)
                workers = sorted((a.zoo / "logs").glob("worker.*"))
                finished[tag] = f"{sum('PaddleRec Finish' in w.read_text() for w in workers)}/{len(workers)}"
            print(f"{model:32s} local cluster, trainers that finished: Fluid {finished['fluid']}, "
                  f"placegroup {finished['placegroup']}")


if __name__ == "__main__":
    main()
