"""A sparse model trained single-process or as one process of a cluster:

    ids [N, 1] -> embedding([vocab, dim], is_sparse, is_distributed) -> fc(2) -> softmax CE -> mean

Ids follow a Zipf law, so batches repeat ids and hit the small (hot) ids most. Writes
``<out>/<role><id>.npz``: trainers their per-step losses and fc parameters, pservers their
table shards (so the test can put the table together and compare it with one process's).
``--checkpoint-dir``/``--checkpoint-every``/``--resume`` as in train_model.py: a resumed trainer
trains only the batches after the checkpoint and records the first as ``start``.
"""
import argparse
import os

import numpy as np

import placegroup as fluid


def build(vocab: int, dim: int, optimizer: str, lazy: bool, distributed: bool = True):
    fluid.default_startup_program().random_seed = 11
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(input=ids, size=[vocab, dim], is_sparse=True, is_distributed=distributed,
                                 param_attr=fluid.ParamAttr(name="emb", initializer=fluid.initializer.Uniform(-0.5, 0.5)))
    logits = fluid.layers.fc(input=emb, size=2)
    cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=label))
    opt = {"sgd": lambda: fluid.optimizer.SGD(0.5),
           "momentum": lambda: fluid.optimizer.Momentum(0.1, momentum=0.9),
           "adagrad": lambda: fluid.optimizer.Adagrad(0.2),
           "adam": lambda: fluid.optimizer.Adam(0.05, lazy_mode=lazy)}[optimizer]()
    opt.minimize(cost)
    return cost


def batches(vocab: int, steps: int, batch: int):
    rng = np.random.default_rng(5)
    out = []
    for _ in range(steps):
        ids = (rng.zipf(1.3, size=(batch, 1)) - 1) % vocab
        label = (ids * 2654435761 % 7 < 3).astype(np.int64)
        out.append((ids.astype(np.int64), label))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--optimizer", default="sgd")
    ap.add_argument("--lazy", action="store_true")
    ap.add_argument("--async", dest="async_", action="store_true", help="sync_mode=False")
    ap.add_argument("--blocks", action="store_true",
                    help="is_distributed=False: the sparse table is sliced into row blocks instead")
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--out", required=True)
    ap.add_argument("--checkpoint-dir", default=None)
    ap.add_argument("--checkpoint-every", type=int, default=0)
    ap.add_argument("--resume", action="store_true", help="continue from the newest complete checkpoint")
    a = ap.parse_args()
    cost = build(a.vocab, a.dim, a.optimizer, a.lazy, distributed=not a.blocks)
    ckpt = None if a.checkpoint_dir is None else fluid.io.CheckpointConfig(
        dirname=a.checkpoint_dir, every=a.checkpoint_every, resume=a.resume)
    exe = fluid.Executor(fluid.CPUPlace(), checkpoint=ckpt)
    role = os.environ.get("TRAINING_ROLE")
    n, tid, prog = 1, 0, fluid.default_main_program()
    if role is None:
        exe.run(fluid.default_startup_program())
        tag = "local0"
    else:
        endpoint = os.environ["POD_IP"] + ":" + os.environ["PADDLE_INIT_PORT"]
        t = fluid.DistributeTranspiler()
        t.transpile(pservers=os.environ["PADDLE_INIT_PSERVERS"], trainers=os.environ["PADDLE_INIT_TRAINERS"],
                    sync_mode=not a.async_)
        prog = t.get_program(endpoint, role)
        exe.run(t.get_startup_program(endpoint, role))
        if role == "PSERVER":
            exe.run(prog)
            k = t.pserver_endpoints.index(endpoint)
            # each pserver checkpoints its own shard, and loads it back into a fresh scope
            ckpt = os.path.join(a.out, f"ckpt{k}")
            saved = fluid.io.save_persistables(exe, ckpt, prog)
            fresh = fluid.Scope()
            fluid.io.load_persistables(exe, ckpt, prog, scope=fresh)
            same = all(np.array_equal(np.array(fresh.find_var(n).get_tensor()),
                                      np.array(fluid.global_scope().find_var(n).get_tensor())) for n in saved)
            print(f"pserver {k} checkpoint: {sorted(saved)} reloaded {'equal' if same else 'DIFFERENT'}")
            shards = {n: np.array(fluid.global_scope().find_var(n).get_tensor())
                      for n in fluid.global_scope().local_var_names() if n.startswith("emb.")}
            np.savez(os.path.join(a.out, f"pserver{k}.npz"), **shards)
            exe.close()
            return
        n, tid = t.trainer_num, t.trainer_id
        tag = f"trainer{tid}"
        if not a.blocks:
            assert fluid.global_scope().find_var("emb") is None, "the whole table must never be on a trainer"
    losses = []
    start = exe.resumed_step  # the checkpoint holds the state after this many steps
    for ids, label in batches(a.vocab, a.steps, a.batch)[start:]:
        lo, hi = tid * len(ids) // n, (tid + 1) * len(ids) // n
        loss, = exe.run(prog, feed={"ids": ids[lo:hi], "label": label[lo:hi]}, fetch_list=[cost])
        losses.append(float(loss[0]))
    scope = fluid.global_scope()
    values = {p: np.array(scope.find_var(p).get_tensor()) for p in ("fc_0.w_0", "fc_0.b_0", "emb")
              if scope.find_var(p) is not None}
    exe.close()
    np.savez(os.path.join(a.out, tag + ".npz"), losses=np.array(losses), start=start, **values)


if __name__ == "__main__":
    main()
