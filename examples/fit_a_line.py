"""fit_a_line: linear regression, Fluid's classic first model, trained in one process.

    data x -> fc(size=1) -> square_error_cost(label y) -> mean -> SGD (or Momentum)

It trains on UCI housing when its file is present (``placegroup.dataset.uci_housing`` says
where it looks; nothing is downloaded) and otherwise on scikit-learn's bundled diabetes set,
printing which one and why. It prints the mean training loss of every pass, the test-set loss,
and, for scale, the lowest training loss any linear model can reach (least squares, solved
with numpy): a converged run ends close to it.

The same script trains distributed, unchanged, when Fluid's launch environment variables say so
(``TRAINING_ROLE``, ``PADDLE_INIT_PSERVERS``, ``PADDLE_INIT_TRAINERS``, ``POD_IP``,
``PADDLE_INIT_PORT``, ``PADDLE_TRAINER_ID``; docs/launch.md): every process builds the model,
transpiles it, and runs its part; trainer t is fed the t-th contiguous 1/N of every batch, and
pservers serve until the trainers are done.

Run::

    python examples/fit_a_line.py                       # SGD, defaults below
    python examples/fit_a_line.py --optimizer momentum  # Momentum + piecewise_decay
    python examples/fit_a_line.py --passes 5 --save-dir /tmp/fit_a_line
    placegroup launch --trainers 2 --pservers 2 examples/fit_a_line.py   # a local cluster

``train(...)`` is the same run as a function (tests call it in-process) and returns the losses.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import placegroup as fluid
from placegroup import dataset, reader  # Fluid 1.x: paddle.dataset, paddle.reader
from placegroup.data_feeder import DataFeeder  # Fluid 1.x: fluid.DataFeeder
from placegroup.tools.progress import progress as show_progress

# Per data set: the default learning rate of plain SGD at batch size 20. With these, the
# default passes end within about 1% (diabetes) and 3% (uci_housing) of the least-squares
# optimum; larger rates leave the last passes noisier, smaller ones get there later.
DEFAULT_LR = {"uci_housing": 0.05, "diabetes": 0.01}
DEFAULT_PASSES = 100


def pick_dataset(name: str = "auto"):
    """``(module, why)``: uci_housing when its file is found, else diabetes (or as asked)."""
    if name == "diabetes":
        return dataset.diabetes, "asked for with --data diabetes"
    try:
        path = dataset.uci_housing.data_file()
    except FileNotFoundError:
        if name == "uci_housing":
            raise
        return dataset.diabetes, ("uci_housing's housing.data was not found (the docstring of "
                                  "placegroup.dataset.uci_housing says where to put it), so "
                                  "scikit-learn's bundled diabetes set is used instead")
    return dataset.uci_housing, f"found {path}"


def _rows(sample_reader) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = zip(*sample_reader())
    return np.stack(xs).astype(np.float64), np.stack(ys).astype(np.float64)


def least_squares_loss(sample_reader) -> float:
    """The lowest mean squared error a linear model (with bias) reaches on these samples."""
    x, y = _rows(sample_reader)
    a = np.hstack([x, np.ones((len(x), 1))])
    coef, *_ = np.linalg.lstsq(a, y, rcond=None)
    return float(np.mean((a @ coef - y) ** 2))


def build(n_features: int, optimizer: str, lr: float, total_steps: int):
    """The model in the default programs; returns ``(x, y, avg_cost, test_program)``."""
    x = fluid.layers.data(name="x", shape=[n_features], dtype="float32")
    y_predict = fluid.layers.fc(input=x, size=1, act=None)
    y = fluid.layers.data(name="y", shape=[1], dtype="float32")
    cost = fluid.layers.square_error_cost(input=y_predict, label=y)
    avg_cost = fluid.layers.mean(cost)
    # Cloned before minimize, so the test program has the forward ops only.
    test_program = fluid.default_main_program().clone(for_test=True)
    if optimizer == "sgd":
        opt = fluid.optimizer.SGD(learning_rate=lr)
    else:
        # Fluid's distributed fit_a_line writes Momentum(piecewise_decay([3, 6, 9],
        # [0.1, 0.2, 0.3, 0.4]), 0.9), an increasing rate that diverges on these data; this
        # schedule decays instead: lr for the first half of the steps, lr/2 to three quarters,
        # then lr/10.
        if not (hasattr(fluid.optimizer, "Momentum") and hasattr(fluid.layers, "piecewise_decay")):
            raise SystemExit("--optimizer momentum needs fluid.optimizer.Momentum and "
                             "fluid.layers.piecewise_decay, which this placegroup lacks")
        bounds = [max(total_steps // 2, 1), max(total_steps * 3 // 4, 2)]
        rate = fluid.layers.piecewise_decay(boundaries=bounds, values=[lr, lr / 2, lr / 10])
        opt = fluid.optimizer.Momentum(learning_rate=rate, momentum=0.9)
    opt.minimize(avg_cost)
    return x, y, avg_cost, test_program


def distribute(exe, main, startup, mode: str = "sync"):
    """Transpile for the cluster Fluid's launch environment names, if it names one, and run the
    startup program (``fluid.transpile_from_env``: the boilerplate of Fluid's distributed
    scripts, once).

    Returns ``(main_program, role, trainer_id, trainer_num)``; ``role`` is None in one process.
    A pserver serves here until every trainer is done.
    """
    return fluid.transpile_from_env(exe, main, startup, sync_mode=mode != "async",
                                    staleness=2 if mode == "ssp" else 0)


def evaluate(exe, program, feeder, batches, avg_cost) -> float:
    """The mean loss over every sample of ``batches`` (each batch weighted by its size)."""
    total, count = 0.0, 0
    for data in batches():
        loss, = exe.run(program, feed=feeder.feed(data), fetch_list=[avg_cost])
        total += float(loss[0]) * len(data)
        count += len(data)
    return total / count


def train(passes: int = DEFAULT_PASSES, batch_size: int = 20, lr: float | None = None,
          optimizer: str = "sgd", use_cuda: bool = False, save_dir: str | None = None,
          data: str = "auto", seed: int = 1, progress: bool | None = None, log=print,
          drop_last: bool = False, mode: str = "sync") -> dict:
    """Train fit_a_line and return what happened.

    Args:
        passes: passes over the training set.
        batch_size: samples per step.
        lr: learning rate (default: ``DEFAULT_LR`` of the data set; Momentum's first value).
        optimizer: ``"sgd"`` or ``"momentum"``.
        use_cuda: run on ``CUDAPlace(0)`` (needs cupy).
        save_dir: when given, save the trained program (and its persistables) there.
        data: ``"auto"``, ``"uci_housing"`` or ``"diabetes"``.
        seed: the programs' random seed (initial weights) and the shuffle seed.
        progress: show a progress bar (None: only on a terminal; under ``placegroup
            launch`` on a terminal the launcher draws one per trainer; False: a compact line
            every 10 s).
        mode: in a cluster, "sync", "ssp" (bounded staleness 2) or "async".
        drop_last: skip each pass's last, short batch. Distributed sync training equals the
            one-process run exactly when every batch splits evenly over the trainers.
        log: called with each line of the report.

    Returns:
        A dict with ``dataset``, ``pass_losses`` (mean training loss per pass, taken while
        training), ``first_batch_loss``, ``train_loss`` (of the trained model over the whole
        training set), ``test_loss``, ``lstsq_loss`` (the least-squares optimum of the
        training loss), ``seconds`` and ``saved`` (paths written).
    """
    module, why = pick_dataset(data)
    name = module.__name__.rsplit(".", 1)[-1]
    lr = DEFAULT_LR[name] if lr is None else lr
    n_features = len(next(module.train()())[0])
    n_train = sum(1 for _ in module.train()())
    steps_per_pass = n_train // batch_size if drop_last else -(-n_train // batch_size)

    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = seed
    scope = fluid.Scope()
    with fluid.scope_guard(scope), fluid.unique_name.guard(), fluid.program_guard(main, startup):
        x, y, avg_cost, test_program = build(n_features, optimizer, lr, passes * steps_per_pass)
        place = fluid.CUDAPlace(0) if use_cuda else fluid.CPUPlace()
        exe = fluid.Executor(place)
        feeder = DataFeeder(place=place, feed_list=[x, y])
        train_reader = reader.batch(reader.shuffle(module.train(), buf_size=500, seed=seed),
                                    batch_size=batch_size, drop_last=drop_last)
        test_reader = reader.batch(module.test(), batch_size=batch_size)
        main_run, role, tid, n = distribute(exe, main, startup, mode)
        if role == "PSERVER":
            return {"dataset": name, "role": role}
        if tid == 0:  # one process says it for the job
            log(f"data set: {name} ({why})")
            if role is not None:
                log(f"{n} trainers, each fed its contiguous 1/{n} of every batch")
        start = exe.resumed_step  # after a restart: the steps the checkpoint holds
        if start:
            log(f"trainer {tid}: resumed at step {start} (pass {start // steps_per_pass}, "
                f"batch {start % steps_per_pass}) from the checkpoint")

        pass_losses, first_batch_loss = [], None
        report_every = max(1, passes // 10)  # about ten pass lines, however many passes
        t0 = time.perf_counter()
        with show_progress(passes * steps_per_pass, desc=f"trainer {tid}" if role else "",
                           enabled=progress) as bar:
            say = bar.write if bar.mode == "bar" else log  # above a bar, or as the report's lines
            if start:
                bar.step(n=start)
            step = 0
            for pass_id in range(passes):
                total, count = 0.0, 0
                for data_batch in train_reader():
                    step += 1
                    if step <= start:
                        continue  # run before the restart; the checkpoint holds its update
                    data_batch = data_batch[tid * len(data_batch) // n:(tid + 1) * len(data_batch) // n]
                    loss, = exe.run(main_run, feed=feeder.feed(data_batch), fetch_list=[avg_cost])
                    value = float(loss[0])
                    if first_batch_loss is None:
                        first_batch_loss = value
                    total += value * len(data_batch)
                    count += len(data_batch)
                    bar.step(value)
                if count:
                    pass_losses.append(total / count)
                    if tid == 0 and ((pass_id + 1) % report_every == 0 or pass_id == passes - 1):
                        say(f"pass {pass_id:3d}  train loss {pass_losses[-1]:.4f}")
        seconds = time.perf_counter() - t0
        train_loss = evaluate(exe, test_program, feeder,
                              reader.batch(module.train(), batch_size=batch_size), avg_cost)
        test_loss = evaluate(exe, test_program, feeder, test_reader, avg_cost)
        lstsq = least_squares_loss(module.train())
        if tid == 0:  # in sync mode every trainer ends with the same parameters
            if pass_losses:
                log(f"train loss: first batch {first_batch_loss:.4f}, pass 0 mean {pass_losses[0]:.4f}, "
                    f"last pass mean {pass_losses[-1]:.4f}")
            log(f"train loss of the trained model {train_loss:.6f}; the least-squares optimum is "
                f"{lstsq:.4f} ({100 * (train_loss / lstsq - 1):.1f}% above it)")
            log(f"test loss {test_loss:.4f}  ({passes} passes, {passes * steps_per_pass - start} steps in "
                f"{seconds:.2f} s)")

        if role is not None:
            exe.close()  # tells the pservers this trainer is done
        saved = []
        if save_dir and tid == 0:
            try:  # placegroup.io is newer than this example; say so if it is missing
                from placegroup import io
            except ImportError:
                io = None
            if io is None or not hasattr(io, "save_program"):
                log("--save-dir: placegroup.io.save_program is not available; nothing saved")
            else:
                os.makedirs(save_dir, exist_ok=True)
                path = os.path.join(save_dir, "prog.bin")
                io.save_program(main_run, path)  # transpiled: its placements, for placegroup dump
                saved.append(path)
                if hasattr(io, "save_persistables"):
                    names = io.save_persistables(exe, save_dir, main_run)
                    saved += [os.path.join(save_dir, n) for n in names]
                log(f"saved the trained program to {path}" +
                    (" and its persistables beside it" if len(saved) > 1 else ""))
    return {"dataset": name, "role": role, "pass_losses": pass_losses, "first_batch_loss": first_batch_loss,
            "train_loss": train_loss, "test_loss": test_loss, "lstsq_loss": lstsq,
            "seconds": seconds, "saved": saved}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--passes", type=int, default=DEFAULT_PASSES, help="passes over the training set")
    p.add_argument("--batch-size", type=int, default=20)
    p.add_argument("--lr", type=float, default=None,
                   help=f"learning rate (default per data set: {DEFAULT_LR})")
    p.add_argument("--optimizer", choices=("sgd", "momentum"), default="sgd")
    p.add_argument("--use-cuda", action="store_true", help="train on CUDAPlace(0) (needs cupy)")
    p.add_argument("--save-dir", default=None, help="save the trained program here")
    p.add_argument("--data", choices=("auto", "uci_housing", "diabetes"), default="auto",
                   help="auto: uci_housing when its file is present, else diabetes")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--drop-last", action="store_true", help="skip each pass's last, short batch")
    p.add_argument("--mode", choices=("sync", "ssp", "async"), default="sync", help="in a cluster")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    a = p.parse_args(argv)
    train(passes=a.passes, batch_size=a.batch_size, lr=a.lr, optimizer=a.optimizer,
          use_cuda=a.use_cuda, save_dir=a.save_dir, data=a.data, seed=a.seed, drop_last=a.drop_last, mode=a.mode,
          progress=False if a.no_progress else None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
