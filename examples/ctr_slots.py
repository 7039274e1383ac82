"""A CTR model over 26 sparse id slots (LoD ids), the classic Fluid 1.x pserver job.

    C0..C25 (lod_level=1 ids) -> one shared embedding "SparseFeatFactors" ([vocab, dim], is_sparse)
        -> sequence_pool(sum) per slot                                          (deep part)
    sequence_concat(C0..C25) -> embedding "wide" ([vocab, 1], is_sparse, is_distributed)
        -> sequence_pool(sum)                                                   (wide part)
    concat(deep, wide, 13 dense features) -> fc(64, relu) -> fc(32, relu) -> fc(2, softmax)
        -> cross_entropy -> mean -> Adagrad;  metric: fluid.layers.auc over the softmax

Each example has, in every slot, 1 + Poisson(2) ids (a variable-length list: a LoD sequence).
With ``--tables per-slot`` every slot gets its own ``is_sparse`` table ``emb_C{i}`` instead. In
a cluster the deep tables live on the pservers (cut into row blocks when big) and the wide table
is row-sharded over them, each trainer prefetching only its batch's rows (docs/sparse.md).

The data are a SYNTHETIC click log made here, no download: slot ids follow a Zipf law inside
each slot's own id range, every id has a hidden weight (a fixed function of the id), and an
example clicks with the sigmoid of its ids' mean weights plus two dense features. A model that
learns the frequent ids' weights beats the base rate's loss, which the example prints.

The loss is a mean over examples, so trainer t fed the t-th contiguous 1/N of every batch gives,
in sync mode, the one-process losses (the mean of the trainers' losses, tests/test_lod_examples.py).
AUC is each trainer's own: it counts the examples that trainer saw.

Run::

    python examples/ctr_slots.py                                              # one process
    placegroup launch --trainers 2 --pservers 2 examples/ctr_slots.py         # sync
    placegroup launch --trainers 2 --pservers 2 examples/ctr_slots.py --async

Its embeddings' gradients are sparse, so it needs pservers: with ``--pservers 0`` it stops
with one line that says so (the trainers alone all-reduce dense gradients only).
"""
from __future__ import annotations

import argparse

import numpy as np

import placegroup as fluid
from placegroup.values import LoDTensor

SLOTS, DENSE = 26, 13


def click_log(steps: int, batch: int, vocab: int = 100_000, seed: int = 0) -> list:
    """``steps`` batches, each a list of ``batch`` examples ``(slot id lists, dense [13], click)``.
    Slot i's ids lie in its own range ``[i * vocab // 26, (i + 1) * vocab // 26)``."""
    rng = np.random.default_rng(seed)
    per = vocab // SLOTS
    out = []
    for _ in range(steps):
        counts = 1 + rng.poisson(2, size=(batch, SLOTS))
        flat = (rng.zipf(1.3, size=int(counts.sum())) - 1) % per
        flat = flat + np.repeat(np.tile(np.arange(SLOTS) * per, batch), counts.ravel())
        weight = ((flat * 2654435761) % 1000) / 250.0 - 2.0  # the hidden weight of each id
        ends = np.cumsum(counts.ravel())
        mean_w = np.add.reduceat(weight, ends - counts.ravel()) / counts.ravel()
        dense = rng.normal(size=(batch, DENSE)).astype(np.float32)
        score = mean_w.reshape(batch, SLOTS)[:, :4].sum(1) + dense[:, 0] - 0.5 * dense[:, 1]
        click = (rng.random(batch) < 1 / (1 + np.exp(-score))).astype(np.int64)
        ids = np.split(flat.astype(np.int64), ends[:-1])
        out.append([([ids[b * SLOTS + i] for i in range(SLOTS)], dense[b], int(click[b]))
                    for b in range(batch)])
    return out


def feed(samples: list) -> dict:
    """The feed of a list of examples: one LoDTensor per slot, ``dense`` and ``label``."""
    out = {}
    for i in range(SLOTS):
        seqs = [s[0][i] for s in samples]
        out[f"C{i}"] = LoDTensor.from_lengths(np.concatenate(seqs).reshape(-1, 1), [[len(q) for q in seqs]])
    out["dense"] = np.stack([s[1] for s in samples]).astype(np.float32)
    out["label"] = np.array([[s[2]] for s in samples], np.int64)
    return out


def build(vocab: int = 100_000, dim: int = 8, tables: str = "shared", lr: float = 0.05):
    """The model in the default programs; returns ``(feeds, loss, auc)``."""
    slots = [fluid.layers.data(name=f"C{i}", shape=[1], dtype="int64", lod_level=1) for i in range(SLOTS)]
    dense = fluid.layers.data(name="dense", shape=[DENSE], dtype="float32")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    init = fluid.initializer.Uniform(-0.1, 0.1)
    pooled = []
    for i, ids in enumerate(slots):  # deep part: every slot pooled on its own
        name = "SparseFeatFactors" if tables == "shared" else f"emb_C{i}"  # Paddle ctr_dnn's name
        emb = fluid.layers.embedding(ids, size=[vocab, dim], is_sparse=True,
                                     param_attr=fluid.ParamAttr(name=name, initializer=init))
        pooled.append(fluid.layers.sequence_pool(emb, "sum"))
    # wide part: one weight per id, all slots' ids of an example together (sequence_concat), in a
    # big table row-sharded over the pservers.
    # NOTE(one-lookup): one lookup over the concatenated slots prefetches each row an example's
    # slots share once; 26 lookups of one distributed table work too (docs/sparse.md), at the
    # cost of a row being fetched once per slot that wants it.
    wide_ids = fluid.layers.sequence_concat(slots)
    wide = fluid.layers.embedding(wide_ids, size=[vocab, 1], is_sparse=True, is_distributed=True,
                                  param_attr=fluid.ParamAttr(name="wide", initializer=init))
    pooled.append(fluid.layers.sequence_pool(wide, "sum"))
    loss, auc = head(pooled + [dense], label, lr)
    return slots + [dense, label], loss, auc


def head(features: list, label, lr: float):
    """concat(features) -> fc(64, relu) -> fc(32, relu) -> fc(2, softmax) -> cross_entropy ->
    mean -> Adagrad(lr); returns ``(loss, auc)``."""
    h = fluid.layers.concat(features, axis=1)
    h = fluid.layers.fc(h, 64, act="relu")
    h = fluid.layers.fc(h, 32, act="relu")
    probs = fluid.layers.fc(h, 2, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(probs, label))
    auc, _batch_auc, _states = fluid.layers.auc(probs, label)
    fluid.optimizer.Adagrad(learning_rate=lr).minimize(loss)
    return loss, auc


def train(exe, prog, loss, auc, log: list, feed, tid: int, n: int):
    """Trainer ``tid`` of ``n`` runs ``prog`` on its share of each batch of ``log``, printing the
    mean loss of every 20 steps; returns the last AUC fetched."""
    base = np.mean([s[2] for b in log for s in b])
    base_loss = -(base * np.log(base) + (1 - base) * np.log(1 - base))
    window, value = [], float("nan")
    for step, samples in enumerate(log):
        part = samples[tid * len(samples) // n:(tid + 1) * len(samples) // n]
        got, value = exe.run(prog, feed=feed(part), fetch_list=[loss, auc])
        window.append(float(np.array(got).ravel()[0]))
        if (step + 1) % 20 == 0:
            print(f"step {step + 1:4d}  loss {np.mean(window):.4f}  (base rate's loss {base_loss:.4f})")
            window = []
    return float(np.array(value).ravel()[0])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--tables", choices=("shared", "per-slot"), default="shared")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--sync", dest="sync", action="store_true", default=True, help="sync mode (default)")
    ap.add_argument("--async", dest="sync", action="store_false", help="async mode, in a cluster")
    a = ap.parse_args(argv)
    fluid.default_startup_program().random_seed = 3
    _, loss, auc = build(a.vocab, a.dim, a.tables)
    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, tid, n = fluid.transpile_from_env(exe, sync_mode=a.sync)  # Fluid's launch environment, if set
    if role == "PSERVER":
        print("pserver: every trainer is done")
        return
    value = train(exe, prog, loss, auc, click_log(a.steps, a.batch_size, a.vocab), feed, tid, n)
    exe.close()
    print(f"final AUC {value:.4f} over the {a.steps * a.batch_size // n:,} "
          f"examples this {'trainer' if role else 'process'} saw")


if __name__ == "__main__":
    main()
