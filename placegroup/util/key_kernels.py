"""The compiled loops of ``KeyIndex`` (placegroup/util/key_index.py) and of a table's rows
(placegroup/util/dynamic_table.py: new rows' draws, the SGD update), in numba.

NOTE(key-kernels): a hash table's probe is a short loop per id whose length depends on the id:
numpy can only run it as rounds over the ids still unresolved, a dozen numpy calls per round.
For a prefetch's few hundred ids that cost 190 us against 3.4 us for the same probe compiled
(411 ids at load 0.47, on 2 cores). numba compiles these loops on first use and caches the
machine code beside this file (``cache=True``), so a process pays the compile (about a second
per kernel) only the first time on a machine. They release the GIL (``nogil``), read and write
only the arrays they are given, and follow the rules in KeyIndex's docstring exactly.

Slots: int32; ``EMPTY`` (-1), ``TOMB`` (-2) or a row. ``row_key``: int64 per row, -1 if free.
Probing is linear (wrapping) from ``home(id) = ((mix64(id) >> 32)·n) >> 32`` for n slots: the
top 32 bits of the mix scaled onto 0..n-1 (Lemire's multiply-shift range reduction), so n need
not be a power of two and the index can grow by 1.5x (NOTE(slot-growth) in key_index.py).
"""
from __future__ import annotations

import functools

import numpy as np
from numba import njit

EMPTY, TOMB = -1, -2
_PHI = 0x9E3779B97F4A7C15


@njit(cache=True, nogil=True, inline="always")
def _mix(z):
    """splitmix64's finalizer on one uint64 (key_index.mix64 on an array)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


@njit(cache=True, nogil=True, inline="always")
def _home(k, n):
    """The first slot of id ``k``'s probe among ``n`` slots (n <= 2**32)."""
    return np.int64(((_mix(np.uint64(k)) >> np.uint64(32)) * np.uint64(n)) >> np.uint64(32))


@njit(cache=True, nogil=True, inline="always")
def _find(slots, row_key, k, n):
    """(what, slot) where id ``k``'s probe ends: its row and slot, or EMPTY and the first empty
    slot of its run (tombstones are stepped over)."""
    p = _home(k, n)
    while True:
        s = slots[p]
        if s == EMPTY or (s >= 0 and row_key[s] == k):
            return s, p
        p += 1
        if p == n:
            p = 0


@njit(cache=True, nogil=True)
def probe(slots, row_key, ids, rows, end):
    """Per id: ``rows[i]`` its row or -1, ``end[i]`` its slot or the empty slot its probe stopped at."""
    n = slots.size
    for i in range(ids.size):
        rows[i], end[i] = _find(slots, row_key, ids[i], n)  # EMPTY is -1


@njit(cache=True, nogil=True)
def insert(slots, row_key, ids, start, rows, free, used, n_rows, room):
    """Rows of ``ids[start:]`` into ``rows``, placing absent ids in the first empty slot of their
    probe with the next free row (``free[used:]``, ascending), then fresh rows from ``n_rows``;
    an id repeated in the batch finds the row its first appearance got. Stops before placing a
    new id once ``room`` ids were placed. Returns (where it stopped, used, n_rows, placed).
    ``row_key`` must have room for every fresh row."""
    n = slots.size
    placed = 0
    for i in range(start, ids.size):
        k = ids[i]
        s, p = _find(slots, row_key, k, n)
        if s >= 0:
            rows[i] = s
            continue
        if placed == room:
            return i, used, n_rows, placed
        if used < free.size:
            r = free[used]
            used += 1
        else:
            r = n_rows
            n_rows += 1
        row_key[r] = k
        slots[p] = r
        rows[i] = r
        placed += 1
    return ids.size, used, n_rows, placed


@njit(cache=True, nogil=True)
def remove(slots, row_key, rows, end):
    """Tombstone the slots ``end[i]`` of the rows ``rows[i]`` (>= 0) a probe found, and free
    the rows; a row listed twice goes once. Returns how many went."""
    gone = 0
    for i in range(rows.size):
        r = rows[i]
        if r >= 0 and slots[end[i]] == r:
            slots[end[i]] = TOMB
            row_key[r] = -1
            gone += 1
    return gone


@njit(cache=True, nogil=True)
def fill(slots, row_key, rows):
    """Place ``rows`` (their ids in ``row_key``), in order, into an index with no entries."""
    n = slots.size
    for i in range(rows.size):
        r = rows[i]
        p = _home(row_key[r], n)
        while slots[p] != EMPTY:
            p += 1
            if p == n:
                p = 0
        slots[p] = r


@njit(cache=True, nogil=True)
def uniform24(key, ids, out, low, scale):
    """``out[i, j] = low + scale·u`` with u the float32 draws of dynamic_table.initial_rows:
    ``x = mix64(mix64(id ^ key) + (j // 2 + 1)·φ)``, element 2m the top 24 bits of x_m, element
    2m + 1 bits 8..31, each times 2**-24 (float32 arithmetic, as the numpy form)."""
    dim = out.shape[1]
    for i in range(ids.size):
        h = _mix(np.uint64(ids[i]) ^ key)
        for m in range((dim + 1) // 2):
            x = _mix(h + np.uint64(m + 1) * np.uint64(_PHI))
            out[i, 2 * m] = np.float32(x >> np.uint64(40)) * scale + low
            if 2 * m + 1 < dim:
                out[i, 2 * m + 1] = np.float32((x >> np.uint64(8)) & np.uint64(0xFFFFFF)) * scale + low


@njit(cache=True, nogil=True)
def sgd_rows(values, rows, grads, neg_lr):
    """``values[rows[i]] += neg_lr·grads[i]`` for each i in turn (the sgd kernel's
    NOTE(sgd-add-at): a repeated row takes its entries in order), in the values' dtype."""
    for i in range(rows.size):
        r = rows[i]
        for j in range(values.shape[1]):
            values[r, j] += neg_lr * grads[i, j]


@functools.cache
def warm() -> None:
    """Load (or compile) every kernel for the types a table uses, once per process: a table's
    maker pays it (a startup program), not its first training step, which in sync training
    every trainer would wait for."""
    slots, row_key = np.full(16, EMPTY, np.int32), np.full(16, -1, np.int64)
    ids, rows, end = np.arange(2, dtype=np.int64), np.empty(2, np.int64), np.empty(2, np.int64)
    insert(slots, row_key, ids, 0, rows, np.zeros(0, np.int64), 0, 0, 2)
    probe(slots, row_key, ids, rows, end)
    remove(slots, row_key, rows, end)
    fill(np.full(16, EMPTY, np.int32), row_key, np.zeros(0, np.int32))
    uniform24(np.uint64(1), ids, np.empty((2, 2), np.float32), np.float32(0), np.float32(1))
    for t in (np.float32, np.float64):
        sgd_rows(np.zeros((2, 2), t), rows, np.zeros((2, 2), t), t(0))
