"""A bag-of-words classifier whose sequence pooling is placed by hand on the pserver, so LoD
tensors cross between processes both ways: the trainer's word embeddings (with the sentences'
LoD) go to the pserver, which pools them, and the pserver's gradient of the embeddings (with the
same LoD) comes back.

    words (lod_level 1) -> embedding -> sequence_pool average [on the pserver] -> fc softmax -> CE

Run with no TRAINING_ROLE: one process. Under ``placegroup launch --trainers 1 --pservers 1``:
the two processes of the placed program. Writes ``<out>/<role><id>.npz`` with the per-step
losses and, for the trainer, the embedding gradient it fetched from the pserver each step (its
rows, and the sentence lengths of the LoD it came with).
"""
import argparse
import os

import numpy as np

import placegroup as fluid
from placegroup.ir.place_group import PlaceGroup

V, D, C = 40, 6, 3


def build():
    fluid.default_startup_program().random_seed = 7
    words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
    label = fluid.layers.data("label", [1], dtype="int64")
    emb = fluid.layers.embedding(words, size=[V, D])
    probs = fluid.layers.fc(fluid.layers.sequence_pool(emb, "average"), C, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(probs, label))
    fluid.optimizer.SGD(0.5).minimize(loss)
    return loss, emb


def place_pooling(prog, pserver: str) -> None:
    """Put sequence_pool, its gradient and what they make on ``pserver`` (every process does
    the same to its program, so they agree on it)."""
    where = PlaceGroup.parse("pserver/" + pserver)
    block = prog.global_block()
    for op in block.ops:
        if op.type in ("sequence_pool", "sequence_pool_grad"):
            op.place = where
            for name in sum(op.outputs.values(), []):
                block.var(name).place = where


def batches(steps: int, batch: int = 8):
    """``steps`` feeds of ``batch`` sentences of 1..6 word ids, the class a function of the first."""
    rng = np.random.default_rng(3)
    out = []
    for _ in range(steps):
        lengths = rng.integers(1, 7, size=batch).tolist()
        ids = rng.integers(0, V, size=(sum(lengths), 1)).astype(np.int64)
        first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        out.append({"words": fluid.create_lod_tensor(ids, [lengths], fluid.CPUPlace()),
                    "label": (ids[first] % C).astype(np.int64)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    loss, emb = build()
    exe = fluid.Executor(fluid.CPUPlace())
    role = os.environ.get("TRAINING_ROLE")
    if role is None:
        tag, prog, startup = "local0", fluid.default_main_program(), fluid.default_startup_program()
    else:
        endpoint = os.environ["POD_IP"] + ":" + os.environ["PADDLE_INIT_PORT"]
        pserver = os.environ["PADDLE_INIT_PSERVERS"].split(",")[0]
        t = fluid.DistributeTranspiler()
        t.transpile(trainer_id=0, pservers=pserver, trainers=1)
        prog, startup = t.get_program(endpoint, role), t.get_startup_program(endpoint, role)
        place_pooling(prog, pserver)
        tag = role.lower() + "0"
    exe.run(startup)
    if role == "PSERVER":
        exe.run(prog)
        exe.close()
        return
    losses, grads, lengths = [], [], []
    for feed in batches(a.steps):
        got, g = exe.run(prog, feed=feed, fetch_list=[loss, emb.name + "@GRAD"], return_numpy=False)
        losses.append(float(np.array(got).ravel()[0]))
        grads.append(np.array(g))
        lod = g.recursive_sequence_lengths() if isinstance(g, fluid.LoDTensor) else []
        lengths += lod[0] if len(lod) == 1 else [-1]  # -1: it came without its one-level LoD
    exe.close()
    np.savez(os.path.join(a.out, tag + ".npz"), losses=np.array(losses), grads=np.concatenate(grads),
             lengths=np.array(lengths))


if __name__ == "__main__":
    main()
