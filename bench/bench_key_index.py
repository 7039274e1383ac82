"""KeyIndex (placegroup/util/key_index.py): inserts and lookups per second against numpy's
np.unique and a Python dict over the same batches, in the same run (issue 31).

Ids as the issue draws them: ``(x * 0x9E3779B97F4A7C15) mod 2**63`` over x below 2**40. Inserts:
distinct x (1..N, shuffled; the multiplier is odd, so distinct ids), 64k new ids per call until
N are in. Lookups: x ~ zipf(1.1) folded into 1..N, so every id exists, 64k per call. Floors, on
the same insert batches: ``np.unique`` of each batch (a sort, less than an insert must do) and a
dict handing out rows in first-appearance order (``d.setdefault(k, len(d))`` per id, numpy in
and out). Printed: ids/s of each, the ratios, and the index's bytes per live id. Target: at
least 1M inserts/s.

    python bench/bench_key_index.py [--ids 4000000] [--batch 65536]
"""
from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from placegroup.util.key_index import KeyIndex

MUL, LOW63 = np.uint64(0x9E3779B97F4A7C15), np.uint64(2 ** 63 - 1)


def ids_of(x: np.ndarray) -> np.ndarray:
    """The issue's ids for x below 2**40."""
    return ((x.astype(np.uint64) * MUL) & LOW63).view(np.int64)


def rate(fn, batches: list[np.ndarray]) -> float:
    """Ids per second of ``fn`` over ``batches``, called in order."""
    t0 = time.perf_counter()
    for b in batches:
        fn(b)
    return sum(b.size for b in batches) / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ids", type=int, default=4_000_000, help="distinct ids inserted in all")
    ap.add_argument("--batch", type=int, default=65536, help="new ids per insert call")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    new = ids_of(rng.permutation(a.ids) + 1)
    ins = [new[i:i + a.batch] for i in range(0, a.ids, a.batch)]
    look = [ids_of((rng.zipf(1.1, a.batch) - 1) % a.ids + 1) for _ in range(max(1, len(ins)))]

    ix = KeyIndex()
    ins_rate = rate(ix.insert, ins)
    per_id = ix.nbytes / len(ix)
    look_rate = rate(ix.lookup, look)
    if not np.array_equal(ix.lookup(new[:a.batch]), np.arange(min(a.batch, a.ids))):
        sys.exit("wrong rows")  # the figures mean nothing if the index is wrong
    uniq_rate = rate(np.unique, ins)
    d: dict[int, int] = {}
    dict_rate = rate(lambda b: np.array([d.setdefault(k, len(d)) for k in b.tolist()], np.int64), ins)

    print(f"KeyIndex, {a.ids:,} distinct ids in calls of {a.batch:,} new ids "
          f"({ix.slots:,} slots at the end, load {len(ix) / ix.slots:.2f}):")
    print(f"  inserts: {ins_rate:,.0f} ids/s  [target >= 1,000,000]")
    print(f"  lookups of existing zipf(1.1) ids: {look_rate:,.0f} ids/s")
    print(f"  memory: {per_id:.1f} bytes per live id ({ix.nbytes / 2 ** 20:,.1f} MiB)")
    print(f"floors on the same insert batches: np.unique {uniq_rate:,.0f} ids/s, "
          f"dict.setdefault {dict_rate:,.0f} ids/s ({sys.getsizeof(d) / len(d):.1f} bytes per id "
          f"for the dict's table alone, without its int objects)")
    print(f"  inserts / np.unique = {ins_rate / uniq_rate:.2f}; inserts / dict = {ins_rate / dict_rate:.2f}; "
          f"lookups / dict inserts = {look_rate / dict_rate:.2f}")


if __name__ == "__main__":
    main()
