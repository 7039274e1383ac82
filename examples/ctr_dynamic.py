"""The CTR model of examples/ctr_slots.py over raw 64-bit feature ids, in tables that grow.

    C0..C25 (lod_level=1 raw ids) -> one shared sparse_embedding "SparseFeatFactors" ([-, dim])
        -> sequence_pool(sum) per slot                                          (deep part)
    sequence_concat(C0..C25) -> sparse_embedding "wide" ([-, 1]) -> sequence_pool(sum)   (wide)
    concat(deep, wide, 13 dense features) -> fc(64, relu) -> fc(32, relu) -> fc(2, softmax)
        -> cross_entropy -> mean -> Adagrad;  metric: fluid.layers.auc over the softmax

A feature id is whatever 64-bit key the log has (here each slot's id scrambled over 0..2**63 - 1
by an odd multiplier, as hashed feature strings look): no vocabulary, no ``% vocab``, no two
features sharing a row. A feature gets a row once it has been seen ``--admit-after`` times
(``CountFilterEntry``), or with ``--entry show-click`` once its examples' show/click scores add
up to ``--admit-after`` / 10 (``ShowClickEntry``: each example is shown once, and its label is
the click, so an unclicked sighting scores 0.1 and a clicked one 1), and loses it when unseen
for ``--ttl`` updates; a round of eviction runs every ``--round-steps`` updates. In a cluster both tables live only on the pservers,
sharded by a 64-bit mix of the id; each trainer fetches its batch's distinct ids once a step
(docs/sparse.md, "Tables that grow"). The click log is examples/ctr_slots.py's synthetic one.

Run::

    python examples/ctr_dynamic.py                                              # one process
    placegroup launch --trainers 2 --pservers 2 examples/ctr_dynamic.py         # sync
    placegroup launch --trainers 2 --pservers 2 examples/ctr_dynamic.py --entry show-click
    PLACEGROUP_PROFILE=1 placegroup launch --trainers 2 --pservers 2 examples/ctr_dynamic.py
                                                        # each pserver prints its tables' rows

In sync mode the mean of the trainers' losses equals one process's, admission and eviction
included (tests/test_sparse_embedding.py).
"""
from __future__ import annotations

import argparse
import importlib.util
import os

import numpy as np

import placegroup as fluid
import placegroup.distributed as dist
from placegroup.contrib.layers import sparse_embedding

_SPEC = importlib.util.spec_from_file_location("ctr_slots", os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                                          "ctr_slots.py"))
ctr_slots = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ctr_slots)  # the click log and its feed (examples/ is no package)
SLOTS, DENSE = ctr_slots.SLOTS, ctr_slots.DENSE
_SCRAMBLE = np.uint64(0x9E3779B97F4A7C15)


def raw_ids(ids: np.ndarray) -> np.ndarray:
    """The log's small ids as 64-bit feature keys: ``(id * 0x9E3779B97F4A7C15) mod 2**63``."""
    return ((ids.astype(np.uint64) * _SCRAMBLE) & np.uint64(2 ** 63 - 1)).view(np.int64)


def feed(samples: list, show: bool = False) -> dict:
    """examples/ctr_slots.py's feed with every slot's ids made raw 64-bit keys; with ``show``, a
    show of 1 per example (for ``--entry show-click``)."""
    out = ctr_slots.feed(samples)
    for i in range(SLOTS):
        out[f"C{i}"] = out[f"C{i}"].with_data(raw_ids(out[f"C{i}"].data))
    if show:
        out["show"] = np.ones_like(out["label"])
    return out


def build(dim: int = 8, admit_after: int = 2, ttl: int | None = 2000, round_steps: int = 100, lr: float = 0.05,
          entry: str = "count"):
    """The model in the default programs; returns ``(feeds, loss, auc)``."""
    slots = [fluid.layers.data(name=f"C{i}", shape=[1], dtype="int64", lod_level=1) for i in range(SLOTS)]
    dense = fluid.layers.data(name="dense", shape=[DENSE], dtype="float32")
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    init = fluid.initializer.Uniform(-0.1, 0.1)
    feeds = slots + [dense, label]
    if entry == "show-click":  # the label is the click; every example is shown once
        feeds.append(fluid.layers.data(name="show", shape=[1], dtype="int64"))
        entry = dist.ShowClickEntry("show", "label", threshold=admit_after / 10)
    else:
        entry = dist.CountFilterEntry(admit_after) if admit_after > 1 else None
    tables = dist.SparseTableConfig(ttl=ttl, round_steps=round_steps)
    pooled = []
    for ids in slots:  # one table, shared by every slot through its name (as Paddle's ctr_dnn)
        emb = sparse_embedding(ids, size=[1_000_000, dim], entry=entry, table_config=tables,
                               param_attr=fluid.ParamAttr(name="SparseFeatFactors", initializer=init))
        pooled.append(fluid.layers.sequence_pool(emb, "sum"))
    wide = sparse_embedding(fluid.layers.sequence_concat(slots), size=[1_000_000, 1], entry=entry, table_config=tables,
                            param_attr=fluid.ParamAttr(name="wide", initializer=init))
    pooled.append(fluid.layers.sequence_pool(wide, "sum"))
    loss, auc = ctr_slots.head(pooled + [dense], label, lr)
    return feeds, loss, auc


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vocab", type=int, default=100_000, help="distinct features in the synthetic log")
    ap.add_argument("--dim", type=int, default=8)
    ap.add_argument("--entry", choices=("count", "show-click"), default="count",
                    help="admit a feature by its count of sightings, or by its examples' show/click scores")
    ap.add_argument("--admit-after", type=int, default=2,
                    help="sightings before a feature gets a row (show-click: a score of a tenth of this)")
    ap.add_argument("--ttl", type=int, default=2000, help="updates a row may go unseen")
    ap.add_argument("--round-steps", type=int, default=100, help="updates between eviction rounds")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--sync", dest="sync", action="store_true", default=True, help="sync mode (default)")
    ap.add_argument("--async", dest="sync", action="store_false", help="async mode, in a cluster")
    a = ap.parse_args(argv)
    fluid.default_startup_program().random_seed = 3
    _, loss, auc = build(a.dim, a.admit_after, a.ttl, a.round_steps, entry=a.entry)
    exe = fluid.Executor(fluid.CPUPlace())
    prog, role, tid, n = fluid.transpile_from_env(exe, sync_mode=a.sync)  # Fluid's launch environment, if set
    if role == "PSERVER":
        print("pserver: every trainer is done")
        return
    value = ctr_slots.train(exe, prog, loss, auc, ctr_slots.click_log(a.steps, a.batch_size, a.vocab),
                            lambda samples: feed(samples, show=a.entry == "show-click"), tid, n)
    if role is None:
        for name in ("SparseFeatFactors", "wide"):
            table = fluid.global_scope().vars[name]
            print(f"table {name}: {len(table):,} rows ({table.admitted:,} admitted, {table.evicted:,} evicted)")
    exe.close()
    print(f"final AUC {value:.4f} over the {a.steps * a.batch_size // n:,} "
          f"examples this {'trainer' if role else 'process'} saw")


if __name__ == "__main__":
    main()
