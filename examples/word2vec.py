"""word2vec, skip-gram: a centre word predicts each word of a fixed window around it.

    centre word id -> embedding([dict, 32], is_sparse) -> fc(dict, softmax)
        -> cross_entropy(context word id) -> mean -> Adagrad;  metric: top-1 accuracy

The corpus is SYNTHETIC, made here (no download): a walk over a dictionary of ``--dict-size``
words in which each word is mostly followed by one of a few words near it (word w by
w + 1, w + 2 or w + 3, mod the dictionary), with the odd random jump. Every position gives
``2 * window`` (centre, context) pairs; a batch is a run of such pairs, shuffled. A model that
learns the neighbourhoods beats the uniform guess's loss, log(dict size), printed beside it.

The loss is a mean over pairs (examples), so trainer t fed the t-th contiguous 1/N of every
batch gives, in sync mode, the one-process losses as the mean of the trainers' losses
(tests/test_lod_examples.py). The embedding's gradient is sparse (SelectedRows): in a cluster
each trainer sends only its batch's rows.

Run::

    python examples/word2vec.py                                               # one process
    placegroup launch --trainers 2 --pservers 2 examples/word2vec.py          # sync
    placegroup launch --trainers 2 --pservers 2 examples/word2vec.py --async

Its embeddings' gradients are sparse, so it needs pservers: with ``--pservers 0`` it stops
with one line that says so (the trainers alone all-reduce dense gradients only).
"""
from __future__ import annotations

import argparse

import numpy as np

import placegroup as fluid


def corpus(length: int, dict_size: int, seed: int = 0) -> np.ndarray:
    """A walk of ``length`` word ids: each step goes 1, 2 or 3 words on, or jumps (1 in 10)."""
    rng = np.random.default_rng(seed)
    steps = rng.integers(1, 4, size=length)
    jumps = rng.random(length) < 0.1
    steps[jumps] = rng.integers(0, dict_size, size=int(jumps.sum()))
    return np.cumsum(steps) % dict_size


def pairs(words: np.ndarray, window: int, batch: int, seed: int = 0) -> list:
    """Shuffled (centre, context) pairs of a fixed ``window`` on each side, cut into batches of
    ``batch``: a list of ``(centre [batch, 1], context [batch, 1])`` int64 arrays."""
    centre, context = [], []
    for off in [o for o in range(-window, window + 1) if o]:  # 2 * window shifts of the corpus
        lo, hi = max(0, -off), len(words) - max(0, off)
        centre.append(words[lo:hi])
        context.append(words[lo + off:hi + off])
    centre, context = np.concatenate(centre), np.concatenate(context)
    order = np.random.default_rng(seed).permutation(len(centre))
    n = len(order) // batch
    return [(centre[order[i * batch:(i + 1) * batch]].reshape(-1, 1).astype(np.int64),
             context[order[i * batch:(i + 1) * batch]].reshape(-1, 1).astype(np.int64)) for i in range(n)]


def feed(batch) -> dict:
    """The feed of a batch ``(centre, context)``."""
    return {"centre": batch[0], "context": batch[1]}


def build(dict_size: int = 1000, dim: int = 32, lr: float = 0.1):
    """The model in the default programs; returns ``(feeds, loss, accuracy)``."""
    centre = fluid.layers.data(name="centre", shape=[1], dtype="int64")
    context = fluid.layers.data(name="context", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(centre, size=[dict_size, dim], is_sparse=True,
                                 param_attr=fluid.ParamAttr(name="word_emb",
                                                            initializer=fluid.initializer.Uniform(-0.5, 0.5)))
    probs = fluid.layers.fc(emb, dict_size, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(probs, context))
    acc = fluid.layers.accuracy(probs, context)
    fluid.optimizer.Adagrad(learning_rate=lr).minimize(loss)
    return [centre, context], loss, acc


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dict-size", type=int, default=1000)
    ap.add_argument("--dim", type=int, default=32)
    ap.add_argument("--window", type=int, default=2, help="context words on each side")
    ap.add_argument("--corpus", type=int, default=20_000, help="words in the synthetic corpus")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--sync", dest="sync", action="store_true", default=True, help="sync mode (default)")
    ap.add_argument("--async", dest="sync", action="store_false", help="async mode, in a cluster")
    a = ap.parse_args(argv)
    fluid.default_startup_program().random_seed = 3
    _, loss, acc = build(a.dict_size, a.dim, a.lr)
    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, tid, n = fluid.transpile_from_env(exe, sync_mode=a.sync)  # Fluid's launch environment, if set
    if role == "PSERVER":
        print("pserver: every trainer is done")
        return
    batches = pairs(corpus(a.corpus, a.dict_size), a.window, a.batch_size)
    batches = (batches * (a.steps // len(batches) + 1))[:a.steps]  # passes over the pairs
    window, accs = [], []
    for step, (centre, context) in enumerate(batches):
        lo, hi = tid * len(centre) // n, (tid + 1) * len(centre) // n
        got, right = exe.run(prog, feed=feed((centre[lo:hi], context[lo:hi])), fetch_list=[loss, acc])
        window.append(float(np.array(got).ravel()[0]))
        accs.append(float(np.array(right).ravel()[0]))
        if (step + 1) % 50 == 0:
            print(f"step {step + 1:4d}  loss {np.mean(window):.4f}  (uniform guess {np.log(a.dict_size):.4f})")
            window = []
    exe.close()
    print(f"final top-1 accuracy of the context word {np.mean(accs[-20:]):.4f} over the last 20 steps "
          f"(a uniform guess: {1 / a.dict_size:.4f})")


if __name__ == "__main__":
    main()
