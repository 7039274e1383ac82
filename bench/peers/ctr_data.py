"""The synthetic CTR data every framework of bench_ctr.py trains on, with numpy only.

bench/peers/ctr_fluid1.py (under placegroup and Fluid 1.8.5) feeds the batches of
``make_batches`` directly; bench/peers/paddle26_ctr.py (Paddle 2.6.2, which has no paddle.fluid)
reads the same batches from MultiSlot text files that ``write_multislot`` writes, so both train
on the same examples in the same order. This module imports nothing but numpy, so that any of
those pythons (3.8 for Fluid 1.8.5, 3.11 for placegroup and Paddle 2.6.2) can import it.

A batch is ``(dense, slots, lens, click)``: ``dense`` float32 [batch, 13]; ``slots`` 26 int64
arrays [n_s, 1], slot-major (slot s holds, example by example, that example's ids of slot s);
``lens`` 26 lists of ``batch`` lengths (each 1 + Poisson(4)); ``click`` int64 [batch, 1]. Ids
are ``(zipf(1.1) * 2654435761) % 1,000,000``; the click is drawn from the sigmoid of the ids'
hidden weights (first 4 slots) plus two dense features.

    batches = make_batches(trainer_id, 20, 1000)
    write_multislot("/tmp/data0.txt", batches, [i % 20 for i in range(60)])
"""
import numpy as np

SLOTS, DENSE, VOCAB, DIM = 26, 13, 1000000, 10

# The order of the slots in a MultiSlot line, as the reader's use_var lists them.
SLOT_NAMES = ["dense_input"] + ["C" + str(i) for i in range(1, SLOTS + 1)] + ["label"]


def make_batches(trainer_id, n, batch):
    """``n`` batches of ``batch`` examples: (dense, [26 id arrays], [26 lengths], click)."""
    rng = np.random.RandomState(1234 + trainer_id)
    out = []
    for _ in range(n):
        counts = 1 + rng.poisson(4, size=(batch, SLOTS))
        flat = (rng.zipf(1.1, size=int(counts.sum())).astype(np.int64) * 2654435761) % VOCAB
        weight = ((flat * 40503) % 1000) / 250.0 - 2.0
        ends = np.cumsum(counts.ravel())
        mean_w = np.add.reduceat(weight, ends - counts.ravel()) / counts.ravel()
        dense = rng.normal(size=(batch, DENSE)).astype(np.float32)
        score = mean_w.reshape(batch, SLOTS)[:, :4].sum(1) + dense[:, 0] - 0.5 * dense[:, 1]
        click = (rng.random_sample(batch) < 1 / (1 + np.exp(-score))).astype(np.int64).reshape(-1, 1)
        # slot-major: slot s holds, example by example, that example's ids of slot s
        per_example = np.split(flat, ends[:-1])
        slots, lens = [], []
        for s in range(SLOTS):
            chunk = [per_example[e * SLOTS + s] for e in range(batch)]
            slots.append(np.concatenate(chunk).reshape(-1, 1))
            lens.append([len(c) for c in chunk])
        out.append((dense, slots, lens, click))
    return out


def multislot_lines(b):
    """One batch as MultiSlot text, one example a line, slots in ``SLOT_NAMES`` order:
    ``13 d1 .. d13  n1 ids..  ..  n26 ids..  1 click``. Floats are written with repr, so they
    read back as the same float32 values."""
    dense, slots, lens, click = b
    batch = len(dense)
    starts = [np.concatenate([[0], np.cumsum(ln)]) for ln in lens]
    flat = [s.ravel() for s in slots]
    lines = []
    for e in range(batch):
        parts = [str(DENSE)] + [repr(float(v)) for v in dense[e]]
        for s in range(SLOTS):
            ids = flat[s][starts[s][e]:starts[s][e + 1]]
            parts.append(str(len(ids)))
            parts.extend(str(int(v)) for v in ids)
        parts.append("1 " + str(int(click[e, 0])))
        lines.append(" ".join(parts) + "\n")
    return "".join(lines)


def write_multislot(path, batches, order):
    """Write the batches ``batches[i]`` for ``i`` in ``order`` to ``path`` as MultiSlot text
    (read with batch_size equal to the batches' size, each file batch is one of them)."""
    text = {}
    with open(path, "w") as f:
        for i in order:
            if i not in text:
                text[i] = multislot_lines(batches[i])
            f.write(text[i])
