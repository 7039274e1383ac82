"""inference: train a small classifier, save it as an inference model, predict in a fresh process.

    data x -> fc(16, relu) -> fc(3, softmax) -> cross_entropy(label y) -> mean -> Adam

The data are synthetic: three Gaussian blobs in 8 dimensions, one per class, drawn from a fixed
seed. After training, ``fluid.io.save_inference_model`` writes the program pruned to
``x -> prediction`` and the parameters it reads; then this script runs itself again in a new
Python process with ``--predict``, which ``load_inference_model``s the directory and predicts
the same inputs. The first process prints whether those predictions equal its own (they do:
the same program, the same values, bit for bit).

The same script trains distributed, unchanged, under the launcher (Fluid's launch environment
variables, docs/launch.md): every process builds the model, transpiles it and runs its part;
trainer t is fed the t-th contiguous 1/N of every batch; trainer 0 predicts, saves the model
(its scope then holds every parameter it read from the pservers) and starts the fresh process.

Run::

    python examples/inference.py                         # into a temporary directory
    python examples/inference.py --model-dir /tmp/mlp    # keep the model
    placegroup launch --trainers 2 --pservers 2 examples/inference.py
    placegroup launch --trainers 2 --pservers 0 examples/inference.py    # trainers only
    python examples/inference.py --predict /tmp/mlp      # what the fresh process runs

``train_and_save(...)`` is the run as a function (tests call it) and returns what happened.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np

import placegroup as fluid

N_FEATURES, N_CLASSES = 8, 3


def make_data(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` samples of three Gaussian blobs: ``(x float32[n, 8], y int64[n, 1])``."""
    rng = np.random.default_rng(seed)
    centers = np.random.default_rng(1234).normal(0.0, 0.7, (N_CLASSES, N_FEATURES))
    y = rng.integers(0, N_CLASSES, n)
    x = centers[y] + rng.normal(0.0, 1.0, (n, N_FEATURES))
    return x.astype("float32"), y.reshape(-1, 1).astype("int64")


def build():
    """The model in the default programs: ``(x, y, prediction, avg_cost, test_program)``."""
    x = fluid.layers.data(name="x", shape=[N_FEATURES], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="int64")
    hidden = fluid.layers.fc(input=x, size=16, act="relu")
    prediction = fluid.layers.fc(input=hidden, size=N_CLASSES, act="softmax")
    avg_cost = fluid.layers.mean(fluid.layers.cross_entropy(input=prediction, label=y))
    test_program = fluid.default_main_program().clone(for_test=True)
    fluid.optimizer.Adam(learning_rate=0.01).minimize(avg_cost)
    return x, y, prediction, avg_cost, test_program


def predict_in_fresh_process(model_dir: str, inputs: np.ndarray) -> np.ndarray:
    """Run ``--predict`` in a new interpreter; the arrays cross as .npy files (no pickle)."""
    np.save(os.path.join(model_dir, "inputs.npy"), inputs, allow_pickle=False)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLE_", "TRAINING_ROLE"))}
    subprocess.run([sys.executable, os.path.abspath(__file__), "--predict", model_dir], check=True, env=env)
    return np.load(os.path.join(model_dir, "predictions.npy"), allow_pickle=False)


def predict(model_dir: str) -> np.ndarray:
    """What the fresh process does: load the inference model and predict ``inputs.npy``."""
    exe = fluid.Executor(fluid.CPUPlace())
    program, feed_names, fetch_targets = fluid.io.load_inference_model(model_dir, exe)
    inputs = np.load(os.path.join(model_dir, "inputs.npy"), allow_pickle=False)
    probs, = exe.run(program, feed={feed_names[0]: inputs}, fetch_list=fetch_targets)
    np.save(os.path.join(model_dir, "predictions.npy"), probs, allow_pickle=False)
    print(f"fresh process {os.getpid()}: loaded {model_dir}, predicted {len(probs)} samples "
          f"(feeds {feed_names}, fetches {[v.name for v in fetch_targets]})")
    return probs


def train_and_save(model_dir: str, passes: int = 10, batch_size: int = 20, seed: int = 1,
                   log=print) -> dict:
    """Train, save the inference model to ``model_dir`` and compare a fresh process's predictions.

    Returns:
        A dict with ``role``, ``accuracy`` (on held-out samples, in this process), ``fetch_names``
        (what ``save_inference_model`` returned) and ``equal`` (the fresh process predicted the
        same probabilities, exactly), the last three on trainer 0 (or alone) only.
    """
    x_train, y_train = make_data(300, seed=0)
    x_test, y_test = make_data(100, seed=1)
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    scope = fluid.Scope()
    with fluid.scope_guard(scope), fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x, y, prediction, avg_cost, test_program = build()
        exe = fluid.Executor(fluid.CPUPlace())
        # one process, or this process's part of the cluster the launch environment names (a
        # pserver serves here until every trainer is done)
        main_run, role, tid, n = fluid.transpile_from_env(exe, main, startup)
        if role == "PSERVER":
            log("pserver: every trainer is done")
            return {"role": role}
        for pass_id in range(passes):
            losses = []
            for i in range(0, len(x_train), batch_size):
                xs, ys = x_train[i:i + batch_size], y_train[i:i + batch_size]
                lo, hi = tid * len(xs) // n, (tid + 1) * len(xs) // n
                loss, = exe.run(main_run, feed={"x": xs[lo:hi], "y": ys[lo:hi]}, fetch_list=[avg_cost])
                losses.append(float(loss[0]))
            log(f"pass {pass_id:2d}  train loss {np.mean(losses):.4f}")
        result: dict = {"role": role}
        if tid == 0:
            # One process's predictions: the forward program, on this scope's trained values.
            probs, = exe.run(test_program, feed={"x": x_test, "y": y_test}, fetch_list=[prediction])
            result["accuracy"] = float(np.mean(probs.argmax(1) == y_test[:, 0]))
            # main_run: in a cluster the transpiled trainer program, saved as a one-process one.
            result["fetch_names"] = fluid.io.save_inference_model(model_dir, ["x"], [prediction], exe, main_run)
            log(f"test accuracy {result['accuracy']:.3f}; saved the inference model to {model_dir} "
                f"(fetches {result['fetch_names']})")
        if role is not None:
            exe.close()  # tells the pservers this trainer is done
    if tid == 0:
        fresh = predict_in_fresh_process(model_dir, x_test)
        result["equal"] = bool(np.array_equal(fresh, probs))
        log(f"the fresh process's predictions equal this process's: {result['equal']}")
    return result


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model-dir", default=None, help="where to save (default: a temporary directory)")
    p.add_argument("--passes", type=int, default=10)
    p.add_argument("--predict", metavar="MODEL_DIR", default=None,
                   help="load MODEL_DIR's inference model and predict its inputs.npy (the fresh process)")
    a = p.parse_args(argv)
    if a.predict:
        predict(a.predict)
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        result = train_and_save(a.model_dir or os.path.join(tmp, "model"), passes=a.passes)
    return 0 if result.get("equal", True) else 1


if __name__ == "__main__":
    sys.exit(main())
