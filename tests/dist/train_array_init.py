"""A model whose parameters start from arrays (``NumpyArrayInitializer``, as pretrained weights
do), trained single-process or as one process of a cluster::

    x [N, 20] -> fc(16, tanh), weight W [20, 16] from an array: 2 row blocks on 2 pservers
    ids [N, 1] -> embedding [50, 4] from an array, is_sparse + is_distributed: 2 row shards
    concat -> fc(1) -> square error -> mean, Adagrad

``min_block_size`` is 64 so that W is sliced. Writes ``<out>/<role><id>.npz``: one process
(``local0``) and the trainers their per-step losses and ``w`` at the start and the end (and the
local run the table); the pservers the parts they hold, at the start (``start_<part>``) and
the end (``<part>``).
"""
import argparse
import os

import numpy as np

import placegroup as fluid

W = (0.3 * np.random.default_rng(1).normal(size=(20, 16))).astype(np.float32)
TABLE = (0.5 * np.random.default_rng(2).normal(size=(50, 4))).astype(np.float32)
STEPS, BATCH = 4, 16


def build():
    fluid.default_startup_program().random_seed = 3
    init = fluid.initializer.NumpyArrayInitializer
    x = fluid.layers.data(name="x", shape=[20])
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    y = fluid.layers.data(name="y", shape=[1])
    hidden = fluid.layers.fc(x, size=16, act="tanh", param_attr=fluid.ParamAttr(name="w", initializer=init(W)))
    emb = fluid.layers.embedding(ids, size=list(TABLE.shape), is_sparse=True, is_distributed=True,
                                 param_attr=fluid.ParamAttr(name="emb", initializer=init(TABLE)))
    pred = fluid.layers.fc(fluid.layers.concat([hidden, emb], axis=1), size=1)
    cost = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
    fluid.optimizer.Adagrad(0.1).minimize(cost)
    return cost


def batches():
    rng = np.random.default_rng(5)
    out = []
    for _ in range(STEPS):
        x = rng.normal(size=(BATCH, 20)).astype(np.float32)
        ids = rng.integers(0, len(TABLE), size=(BATCH, 1)).astype(np.int64)
        out.append((x, ids, (x[:, :1] + (ids % 3 - 1)).astype(np.float32)))
    return out


def _parts(scope) -> dict:
    """The parts of ``w`` and ``emb`` this pserver holds."""
    return {n: np.array(scope.find_var(n).get_tensor()) for n in scope.local_var_names()
            if n.startswith(("w.block", "emb.shard"))}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    out = ap.parse_args().out
    cost = build()
    exe = fluid.Executor(fluid.CPUPlace())
    scope = fluid.global_scope()
    role = os.environ.get("TRAINING_ROLE")
    n, tid, prog, tag = 1, 0, fluid.default_main_program(), "local0"
    if role is None:
        exe.run(fluid.default_startup_program())
    else:
        endpoint = os.environ["POD_IP"] + ":" + os.environ["PADDLE_INIT_PORT"]
        t = fluid.DistributeTranspiler(fluid.DistributeTranspilerConfig(min_block_size=64))
        t.transpile(pservers=os.environ["PADDLE_INIT_PSERVERS"], trainers=os.environ["PADDLE_INIT_TRAINERS"])
        prog = t.get_program(endpoint, role)
        exe.run(t.get_startup_program(endpoint, role))
        if role == "PSERVER":
            start = _parts(scope)
            exe.run(prog)
            end = _parts(scope)
            exe.close()
            k = t.pserver_endpoints.index(endpoint)
            np.savez(os.path.join(out, f"pserver{k}.npz"), **end, **{"start_" + n: v for n, v in start.items()})
            return
        n, tid, tag = t.trainer_num, t.trainer_id, f"trainer{t.trainer_id}"
    held = {p: np.array(scope.find_var(p).get_tensor()) for p in ("w", "emb") if scope.find_var(p) is not None}
    losses = []
    for x, ids, y in batches():
        lo, hi = tid * len(x) // n, (tid + 1) * len(x) // n
        loss, = exe.run(prog, feed={"x": x[lo:hi], "ids": ids[lo:hi], "y": y[lo:hi]}, fetch_list=[cost])
        losses.append(float(loss[0]))
    end = {p: np.array(scope.find_var(p).get_tensor()) for p in ("w", "emb") if scope.find_var(p) is not None}
    exe.close()
    np.savez(os.path.join(out, tag + ".npz"), losses=np.array(losses), **end,
             **{"start_" + p: v for p, v in held.items()})


if __name__ == "__main__":
    main()
