"""A CTR-style model whose embedding table is far larger than a trainer (sparse, distributed).

    ad (an id slot, lod_level=1)      -> embedding "ad_emb" ([vocab, 64], is_sparse, is_distributed)
                                      -> sequence_pool(sum)
    history (an id slot, lod_level=1) -> embedding "hist_emb" ([vocab, 16], is_sparse, is_distributed)
                                      -> sequence_pool(average)
    concat -> fc(32, relu) -> fc(2) -> softmax_with_cross_entropy -> mean -> Adam (lazy)

Each example's ``ad`` slot holds the shown ad's id (a one-id sequence) and its ``history`` slot
the 1 + Poisson(3) ads the user was shown before: variable-length id lists fed as LoD tensors.

With the default vocabulary of 10,000,000 rows the tables are 2.4 + 0.6 GiB of float32, and
Adam's two moments triple that: each of 2 pservers needs about 4.6 GiB. ``--vocab 1000000``
(about 0.5 GiB per pserver) makes a quick first run. Run as a cluster, they live on the pservers as row shards (shard k holds rows k, k+M, ...); each
trainer fetches only the rows of its batch, sends back only their gradients, and its memory
stays a few tens of MB: the example prints every process's peak resident memory at the end.

The data are a SYNTHETIC click log made here (no real click log ships with any package): ad
ids follow a Zipf law (a few ads are shown very often, most rarely), and each ad has a hidden
click-through rate; a click is drawn from it. A model that learns the frequent ads' rates
beats the base rate, which the example prints next to the model's loss. The history nudges the
rate: a user shown high-rate ads before clicks a little more.

Run::

    placegroup launch --trainers 2 --pservers 2 examples/ctr_sparse.py           # 10M rows: ~4.6 GiB per pserver
    placegroup launch examples/ctr_sparse.py --vocab 1000000                      # a first run: ~0.5 GiB
    python examples/ctr_sparse.py --vocab 1000000                                 # one process

Its embeddings' gradients are sparse, so it needs pservers: with ``--pservers 0`` it stops
with one line that says so (the trainers alone all-reduce dense gradients only).
"""
from __future__ import annotations

import argparse

import numpy as np

import placegroup as fluid
from placegroup.tools.resources import peak_rss_mb
from placegroup.values import LoDTensor

HIST_DIM = 16


def _score(ids: np.ndarray) -> np.ndarray:
    """The hidden logit of each ad id: a fixed function of the id, between -2.5 and 1.5."""
    return (ids * 2654435761 % 1000) / 250.0 - 2.5


def click_log(vocab: int, steps: int, batch: int, seed: int):
    """``steps`` batches of (ad ids [batch, 1], history ids [n], history lengths [batch],
    clicks [batch, 1]) of the synthetic log."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        ids = (rng.zipf(1.2, size=(batch, 1)) - 1) % vocab
        lengths = 1 + rng.poisson(3, size=batch)
        hist = (rng.zipf(1.2, size=int(lengths.sum())) - 1) % vocab
        hist_mean = np.add.reduceat(_score(hist), np.cumsum(lengths) - lengths) / lengths
        # the hidden rate: the ad's own (about 8% to 80%), nudged by the history's
        rate = 1.0 / (1.0 + np.exp(-(_score(ids[:, 0]) + 0.3 * hist_mean)))
        clicks = (rng.random((batch, 1)) < rate[:, None]).astype(np.int64)
        out.append((ids.astype(np.int64), hist.astype(np.int64), lengths, clicks))
    return out


def feed(ids, hist, lengths, clicks, lo: int, hi: int) -> dict:
    """The feed of examples ``lo:hi`` of a batch: both slots as LoDTensors, and the clicks."""
    starts = np.concatenate([[0], np.cumsum(lengths)])
    return {"ad": LoDTensor.from_lengths(ids[lo:hi], [[1] * (hi - lo)]),
            "history": LoDTensor.from_lengths(hist[starts[lo]:starts[hi]].reshape(-1, 1), [lengths[lo:hi].tolist()]),
            "click": clicks[lo:hi]}


def shards_held() -> list:
    """The table shards this process holds (on a pserver, after serving)."""
    return sorted(n for n in fluid.global_scope().local_var_names() if n.startswith(("ad_emb.shard", "hist_emb.shard")))


def build(vocab: int, dim: int):
    ids = fluid.layers.data(name="ad", shape=[1], dtype="int64", lod_level=1)
    history = fluid.layers.data(name="history", shape=[1], dtype="int64", lod_level=1)
    click = fluid.layers.data(name="click", shape=[1], dtype="int64")
    init = fluid.initializer.Normal(0.0, 0.01)
    emb = fluid.layers.embedding(input=ids, size=[vocab, dim], is_sparse=True, is_distributed=True,
                                 param_attr=fluid.ParamAttr(name="ad_emb", initializer=init))
    hist = fluid.layers.embedding(input=history, size=[vocab, HIST_DIM], is_sparse=True, is_distributed=True,
                                  param_attr=fluid.ParamAttr(name="hist_emb", initializer=init))
    pooled = fluid.layers.concat([fluid.layers.sequence_pool(emb, "sum"),
                                  fluid.layers.sequence_pool(hist, "average")], axis=1)
    hidden = fluid.layers.fc(input=pooled, size=32, act="relu")
    logits = fluid.layers.fc(input=hidden, size=2)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=click))
    fluid.optimizer.Adam(learning_rate=0.005, lazy_mode=True).minimize(loss)
    return loss


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=10_000_000)
    ap.add_argument("--dim", type=int, default=64)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch-size", type=int, default=1024)
    a = ap.parse_args()
    fluid.default_startup_program().random_seed = 3
    loss = build(a.vocab, a.dim)
    exe = fluid.Executor(fluid.CPUPlace())
    table_mib = a.vocab * (a.dim + HIST_DIM) * 4 / 2 ** 20
    prog, role, tid, n = fluid.transpile_from_env(exe)  # Fluid's launch environment, if set
    if role == "PSERVER":
        print(f"pserver: held {shards_held()} ({a.vocab:,} rows in all); peak memory {peak_rss_mb():,.0f} MiB")
        return
    log = click_log(a.vocab, a.steps, a.batch_size, seed=0)
    base = np.mean([c.mean() for *_, c in log])
    base_loss = -(base * np.log(base) + (1 - base) * np.log(1 - base))
    window = []
    for step, batch in enumerate(log):
        lo, hi = tid * len(batch[0]) // n, (tid + 1) * len(batch[0]) // n
        value, = exe.run(prog, feed=feed(*batch, lo, hi), fetch_list=[loss])
        window.append(float(value[0]))
        if (step + 1) % 50 == 0:
            print(f"step {step + 1:4d}  loss {np.mean(window):.4f}  (base rate's loss {base_loss:.4f})")
            window = []
    exe.close()
    where = "on the pservers" if role else "in this process"
    print(f"table ad_emb {a.vocab:,} x {a.dim} and hist_emb {a.vocab:,} x {HIST_DIM} = {table_mib:,.0f} MiB "
          f"{where}; this process's peak memory "
          f"{peak_rss_mb():,.0f} MiB")


if __name__ == "__main__":
    main()
