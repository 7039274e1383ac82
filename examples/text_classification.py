"""Text classification over variable-length sentences (LoD word ids): a text CNN or bag of words.

    words (lod_level=1) -> embedding([dict, 32], is_sparse)
        cnn: -> sequence_conv_pool(filter 3, tanh, sqrt) and sequence_conv_pool(filter 4, tanh,
             sqrt) -> fc(classes, softmax)        (Fluid 1.x book's convolution_net)
        bow: -> sequence_pool(sum) -> tanh -> fc(64, tanh) -> fc(classes, softmax)
    -> cross_entropy -> mean -> Adagrad;  metric: accuracy

The sentences are SYNTHETIC, made here (no download): 6 to 23 words each, mostly filler words,
with one two-word phrase of its class (one of the class's key words followed by the class's
"marker") placed anywhere, and three key words or markers of any class scattered as distractors.

The loss is a mean over sentences (examples), so trainer t fed the t-th contiguous 1/N of every
batch's sentences gives, in sync mode, the one-process losses as the mean of the trainers'
losses (tests/test_lod_examples.py).

Run::

    python examples/text_classification.py                   # text CNN, one process
    python examples/text_classification.py --model bow
    placegroup launch --trainers 2 --pservers 2 examples/text_classification.py          # sync
    placegroup launch --trainers 2 --pservers 2 examples/text_classification.py --async

Its embeddings' gradients are sparse, so it needs pservers: with ``--pservers 0`` it stops
with one line that says so (the trainers alone all-reduce dense gradients only).
"""
from __future__ import annotations

import argparse

import numpy as np

import placegroup as fluid
from placegroup.values import LoDTensor

KEYS = 4  # key words per class; word ids below classes * (KEYS + 1) are keys and markers


def sentences(steps: int, batch: int, dict_size: int = 2000, classes: int = 4, seed: int = 0) -> list:
    """``steps`` batches, each a list of ``batch`` ``(word id list, class)``."""
    rng = np.random.default_rng(seed)
    first_filler = classes * (KEYS + 1)
    out = []
    for _ in range(steps):
        samples = []
        for _ in range(batch):
            c = int(rng.integers(0, classes))
            words = list(rng.integers(first_filler, dict_size, size=int(rng.integers(1, 18))))
            at = int(rng.integers(0, len(words) + 1))
            words[at:at] = [c * (KEYS + 1) + int(rng.integers(0, KEYS)), c * (KEYS + 1) + KEYS]  # phrase
            for other in rng.integers(0, classes * (KEYS + 1), size=3):  # distractors, any class
                words.insert(int(rng.integers(0, len(words) + 1)), int(other))
            samples.append(([int(w) for w in words], c))
        out.append(samples)
    return out


def feed(samples: list) -> dict:
    """The feed of a list of ``(word ids, class)``: ``words`` as a LoDTensor, ``label``."""
    ids = np.array([w for s, _ in samples for w in s], np.int64).reshape(-1, 1)
    return {"words": LoDTensor.from_lengths(ids, [[len(s) for s, _ in samples]]),
            "label": np.array([[c] for _, c in samples], np.int64)}


def build(dict_size: int = 2000, classes: int = 4, dim: int = 32, model: str = "cnn", lr: float = 0.02):
    """The model in the default programs; returns ``(feeds, loss, accuracy)``.

    NOTE(adagrad-roundoff): Adagrad scales a coordinate's first update to about ``lr`` whatever
    the gradient's size, so a gradient that is a near-cancelling sum (different in its last bits
    when summed as two halves on two trainers) moves by a large, different step. At lr 0.05 the
    CNN's 2x2 losses drifted 1e-5 from one process's within 8 steps; at 0.02 they stay within
    3e-7, and the model learns as well.
    """
    words = fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(words, size=[dict_size, dim], is_sparse=True)
    if model == "cnn":
        convs = [fluid.nets.sequence_conv_pool(emb, num_filters=32, filter_size=k, act="tanh", pool_type="sqrt")
                 for k in (3, 4)]
        probs = fluid.layers.fc(convs, classes, act="softmax")
    else:
        bow = fluid.layers.tanh(fluid.layers.sequence_pool(emb, "sum"))
        probs = fluid.layers.fc(fluid.layers.fc(bow, 64, act="tanh"), classes, act="softmax")
    loss = fluid.layers.mean(fluid.layers.cross_entropy(probs, label))
    acc = fluid.layers.accuracy(probs, label)
    fluid.optimizer.Adagrad(learning_rate=lr).minimize(loss)
    return [words, label], loss, acc


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("cnn", "bow"), default="cnn")
    ap.add_argument("--dict-size", type=int, default=2000)
    ap.add_argument("--classes", type=int, default=4)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--sync", dest="sync", action="store_true", default=True, help="sync mode (default)")
    ap.add_argument("--async", dest="sync", action="store_false", help="async mode, in a cluster")
    a = ap.parse_args(argv)
    fluid.default_startup_program().random_seed = 3
    _, loss, acc = build(a.dict_size, a.classes, model=a.model, lr=a.lr)
    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, tid, n = fluid.transpile_from_env(exe, sync_mode=a.sync)  # Fluid's launch environment, if set
    if role == "PSERVER":
        print("pserver: every trainer is done")
        return
    window, accs = [], []
    for step, samples in enumerate(sentences(a.steps, a.batch_size, a.dict_size, a.classes)):
        part = samples[tid * len(samples) // n:(tid + 1) * len(samples) // n]
        got, right = exe.run(prog, feed=feed(part), fetch_list=[loss, acc])
        window.append(float(np.array(got).ravel()[0]))
        accs.append(float(np.array(right).ravel()[0]))
        if (step + 1) % 25 == 0:
            print(f"step {step + 1:4d}  loss {np.mean(window):.4f}  (uniform guess {np.log(a.classes):.4f})")
            window = []
    exe.close()
    print(f"final accuracy {np.mean(accs[-20:]):.4f} over the last 20 steps (a uniform guess: {1 / a.classes:.4f})")


if __name__ == "__main__":
    main()
