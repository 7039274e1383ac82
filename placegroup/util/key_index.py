"""A key -> row index for tables keyed by raw 64-bit feature ids (issue 31), not a Python dict.

``KeyIndex`` maps non-negative int64 ids to dense rows ``0..n-1`` a batch at a time: every
operation takes an array of ids and hands back an array of rows, one compiled loop over the
batch (key_kernels.py; no Python loop runs over ids). ``mix64`` is the fixed 64-bit mix that
hashes ids here and places them on shards (``mix64(ids) % n_shards``); Python's ``hash`` is
never used, so placement is the same in every process and on every machine.

Of placegroup it imports only its kernels, on first use. Thread-safety: none; the table that
owns an index holds its lock around every call.
"""
from __future__ import annotations

import numpy as np

_M1, _M2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_EMPTY = -1  # an empty slot (-2: a tombstone); a slot >= 0 holds a row
_MAX_ROWS = 2 ** 31 - 3  # rows are int32 in the slots


def mix64(keys: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer over ``keys`` (int64 or uint64), as uint64; exact, so the same on
    every machine.

    Example: ``mix64(np.array([0x9E3779B97F4A7C15], np.uint64))`` is ``[0xE220A8397B1DCDAF]``,
    splitmix64's first output for seed 0.
    """
    z = np.asarray(keys)
    z = z.astype(np.uint64) if z.dtype != np.int64 else z.view(np.uint64)  # wraps, no copy for int64
    z = (z ^ (z >> _S30)) * _M1
    z = (z ^ (z >> _S27)) * _M2
    return z ^ (z >> _S31)


def as_ids(keys) -> np.ndarray:
    """``keys`` as a 1-D int64 array of ids (0 to 2**63 - 1).

    Raises:
        TypeError: ``keys`` are not integers.
        ValueError: an id is negative (or, as uint64, above 2**63 - 1); names the first one.
    """
    a = np.asarray(keys)
    if a.size == 0:
        return np.zeros(0, np.int64)
    if a.dtype == np.bool_ or not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"ids must be integers, got an array of {a.dtype}")
    a = a.reshape(-1)
    bad = a > np.iinfo(np.int64).max if a.dtype == np.uint64 else a < 0
    if bad.any():
        i = int(np.argmax(bad))
        raise ValueError(f"id {int(a[i])} at position {i} is not in 0 to 2**63 - 1")
    return a.astype(np.int64, copy=False)


class KeyIndex:
    """Open-addressing hash table over numpy arrays: int64 ids -> dense int64 rows.

    Layout: ``_slots`` (int32, any length >= 16) holds per slot a row, ``-1`` (empty) or
    ``-2`` (tombstone); ``_row_key`` (int64, one per row) holds each row's id, ``-1`` for a free
    row. A slot keeps only the row, and the id is read through it: the row -> id array is needed
    anyway (checkpoints, and eviction picks rows), and 4-byte slots keep the index small.

    * Probing: linear, from the top 32 bits of ``mix64(id)`` scaled onto the slots, one
      compiled loop per batch (NOTE(key-kernels) in key_kernels.py).
    * Rows: new ids get rows in first-appearance order within the batch, lowest free row first
      (rows freed by ``remove``), then ``len`` upwards, so the row store stays dense; duplicates
      in a batch share one row. NOTE(key-index-determinism): rows depend only on the sequence
      of calls, never on the slot layout or the machine, so two indexes given the same calls
      (a checkpoint's and a resumed one's, of any slot count) hand out the same rows.
    * Growth (NOTE(slot-growth)): before an insert that would push (live + tombstones) / slots
      above ``MAX_LOAD`` = 0.75, the index rebuilds: into ``GROWTH`` = 1.5x the slots (more
      while still above 0.75) when the live ids alone would exceed 0.5 of the slots, else at
      the same size. Inserts alone keep the load in [0.5, 0.75]; removals lower it (the index
      never shrinks yet). 1.5x rather than doubling keeps a slot's share of a live id at 5.3 to
      8 bytes instead of 5.3 to 10.7, which is what holds the index and a table's counters to
      24 bytes per live id, at the price of a rebuild every 1.5x of growth (the rehash work of
      a whole load is 3x its ids instead of 2x; linear probes stay short at 0.75).
    * Deletion: a removed id's slot becomes a tombstone, which probing steps over and which
      counts towards the load; the rebuild above drops them all, so tombstones never lengthen
      probes past what 0.75 load allows, and a churn of inserts and removes rebuilds at the same
      size after at least 0.25 x slots operations. Inserts fill empty slots only.
    * Memory (``nbytes``): 4 bytes per slot + 8 per allocated row (the row array grows by
      1.25x). With inserts only, that is 4/0.75 + 8 = 13.3 to 4/0.5 + 8 = 16 bytes per live id
      with the rows full, and at most 4/0.5 + 8 x 1.25 = 18 just after the row array grew;
      a table's count and last-seen step add 8 (x 1.25 at most).
    * LRU (later): a last-seen stamp per row lives beside the table's per-row counters,
      row-indexed like ``_row_key``; eviction picks stale rows and removes
      ``_row_key[rows]``, so the index needs no change.

    Example:
        >>> ix = KeyIndex()
        >>> ix.insert([7, 2**62, 7]).tolist(), ix.lookup([2**62, 5]).tolist()
        ([0, 1, 0], [1, -1])

    Rows are below 2**31 - 2 (OverflowError beyond). Not thread-safe.
    """

    MAX_LOAD = 0.75
    GROWTH = 1.5
    MIN_SLOTS = 16

    def __init__(self, slots: int = MIN_SLOTS):
        n = max(self.MIN_SLOTS, int(slots))
        self._slots = np.full(n, _EMPTY, np.int32)
        self._row_key = np.full(16, -1, np.int64)  # never empty: probes read row 0 for free slots
        self._free = np.zeros(0, np.int64)  # free rows below _n_rows, ascending
        self._n_rows = 0  # rows ever handed out (live + free)
        self._live = 0
        self._tomb = 0

    def __len__(self) -> int:
        return self._live

    @property
    def nbytes(self) -> int:
        """Bytes of every array the index holds."""
        return self._slots.nbytes + self._row_key.nbytes + self._free.nbytes

    @property
    def slots(self) -> int:
        """The number of slots."""
        return self._slots.size

    def lookup(self, keys) -> np.ndarray:
        """Rows of ``keys`` (any shape; the result has it), ``-1`` where absent.

        Raises:
            TypeError, ValueError: as ``as_ids``.
        """
        ids = as_ids(keys)
        return self._probe(ids)[0].reshape(np.shape(keys))

    def insert(self, keys, with_new: bool = False):
        """Rows of ``keys``, adding the absent ones (rows as the class docstring says); with
        ``with_new``, also a bool array, True where the id was absent before this call (one
        pass serves both: a caller that makes rows for new ids needs no lookup first).

        Raises:
            TypeError, ValueError: as ``as_ids``; nothing is inserted then.
            OverflowError: rows would pass 2**31 - 3.
        """
        k = kernels()
        ids = as_ids(keys)
        n = ids.size
        rows = np.empty(n, np.int64)
        free, n_rows0 = self._free, self._n_rows
        if n_rows0 + n - free.size > _MAX_ROWS:  # it might: count the new ids exactly
            absent = np.unique(ids[self._probe(ids)[0] < 0]).size
            if n_rows0 + absent - free.size > _MAX_ROWS:
                raise OverflowError(f"a KeyIndex holds at most {_MAX_ROWS} rows")
        self._ensure_rows(n_rows0 + n)
        at, used = 0, 0
        while True:
            room = int(self.MAX_LOAD * self._slots.size) - self._live - self._tomb
            at, used, self._n_rows, placed = k.insert(self._slots, self._row_key, ids, at, rows, free, used,
                                                      self._n_rows, max(room, 0))
            self._live += placed
            if at == n:
                break
            self._rebuild(self._live + 1)  # full: grow, or drop tombstones (the class docstring)
        self._free = free[used:]
        if with_new:
            fresh = rows >= n_rows0
            if used:
                fresh |= np.isin(rows, free[:used])
            return rows.reshape(np.shape(keys)), fresh.reshape(np.shape(keys))
        return rows.reshape(np.shape(keys))

    def remove(self, keys) -> np.ndarray:
        """Remove ``keys``; returns the row each had before the call (``-1`` where absent; a
        duplicate reports the same row). The rows become free for later inserts.

        Raises:
            TypeError, ValueError: as ``as_ids``.
        """
        ids = as_ids(keys)
        rows, end = self._probe(ids)
        gone = kernels().remove(self._slots, self._row_key, rows, end)
        if gone:
            self._free = np.union1d(self._free, rows[rows >= 0])
            self._live -= gone
            self._tomb += gone
        return rows.reshape(np.shape(keys))

    def keys_and_rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The live ids and their rows, sorted by row (for checkpoints)."""
        rows = np.flatnonzero(self._row_key[:self._n_rows] >= 0)
        return self._row_key[rows].copy(), rows.astype(np.int64)

    @classmethod
    def from_keys_and_rows(cls, keys, rows) -> "KeyIndex":
        """The index that ``keys_and_rows`` returned; rows absent below the largest are free.

        Raises:
            TypeError, ValueError: ids as ``as_ids``; rows negative, too large or repeated;
                ids repeated; lengths that differ.
        """
        ids, rws = as_ids(keys), np.asarray(rows).reshape(-1)
        if rws.size and not np.issubdtype(rws.dtype, np.integer):
            raise TypeError(f"rows must be integers, got an array of {rws.dtype}")
        rws = rws.astype(np.int64)
        if ids.size != rws.size:
            raise ValueError(f"{ids.size} ids but {rws.size} rows")
        if rws.size and (rws.min() < 0 or rws.max() > _MAX_ROWS):
            raise ValueError(f"rows must be in 0 to {_MAX_ROWS}, got {rws.min()} to {rws.max()}")
        if np.unique(ids).size != ids.size or np.unique(rws).size != rws.size:
            raise ValueError("ids and rows must each be distinct")
        ix = cls(int(ids.size / (cls.MAX_LOAD / cls.GROWTH)) + 1)  # the load just after a growth
        ix._n_rows = int(rws.max()) + 1 if rws.size else 0
        ix._row_key = np.full(max(ix._n_rows, 16), -1, np.int64)
        ix._row_key[rws] = ids
        ix._free = np.flatnonzero(ix._row_key[:ix._n_rows] < 0).astype(np.int64)
        kernels().fill(ix._slots, ix._row_key, rws.astype(np.int32))
        ix._live = ids.size
        return ix

    # -- internals ---------------------------------------------------------------------------

    def _probe(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(rows, slot): per id its row and slot, or -1 and the empty slot its probe ended at."""
        rows = np.empty(ids.size, np.int64)
        end = np.empty(ids.size, np.int64)
        kernels().probe(self._slots, self._row_key, ids, rows, end)
        return rows, end

    def _ensure_rows(self, need: int) -> None:
        """``_row_key`` long enough for ``need`` rows: 1.25x + 16 at a time, in place
        (NOTE(grow-in-place) in dynamic_table.py), new rows free (-1)."""
        old = self._row_key.size
        if need > old:
            self._row_key.resize(max(need, int(old * 1.25) + 16), refcheck=False)
            self._row_key[old:] = -1

    def _rebuild(self, target: int) -> None:
        """Rehash the live ids, dropping tombstones, into slots sized for ``target`` live ids
        (the growth policy in the class docstring)."""
        n = self._slots.size
        if target > self.MAX_LOAD / self.GROWTH * n:
            n = int(n * self.GROWTH)
            while target > self.MAX_LOAD * n:
                n = int(n * self.GROWTH)
        if n > 2 ** 32:  # the range reduction's limit; rows stop at 2**31 first
            raise OverflowError("a KeyIndex holds at most 2**32 slots")
        # in row order: the ids are read in sequence, and only the slot writes land at random
        live = np.flatnonzero(self._row_key[:self._n_rows] >= 0).astype(np.int32)
        self._slots = np.full(n, _EMPTY, np.int32)
        self._tomb = 0
        kernels().fill(self._slots, self._row_key, live)


def kernels():
    """The compiled loops (placegroup/util/key_kernels.py), imported on first use: numba's
    import costs 0.2 s, which a process that never touches a table should not pay."""
    from placegroup.util import key_kernels

    return key_kernels
