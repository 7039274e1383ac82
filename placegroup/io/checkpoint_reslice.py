"""Re-slicing checkpoint pieces into the parts a new placement holds (docs/checkpoint.md).

Every value a checkpoint holds, and every value a process wants back, is a set of rows of one
*original* var ``O`` (``var.attrs["slice_of"]``, placegroup/transpiler/parts.py):

* ``O`` itself, or a copy of it (an Adam beta power repeated per block): rows ``0 .. n-1``;
* a seed-000 row block ``[a, b)``: rows ``a, a+1, ..., b-1`` (stride 1);
* row shard k of M of a distributed table: rows ``k, k+M, k+2M, ...`` (stride M).

Each is an arithmetic progression of row indices (``RowSet``), so filling a wanted part from
the saved ones is intersecting progressions (``overlap``, by the Chinese remainder theorem):
the common rows of two progressions are a progression again, and both sides of the copy are
basic strided slices. Nothing builds an index array, and a saved piece is read a span of
rows at a time (``CHUNK`` bytes, ``Piece.read``) and only where it overlaps: re-sharding a
10M-row table from M to M' shards holds the new shard and one span, never the table.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Iterable

import numpy as np

from placegroup.errors import SerializationError

CHUNK = 1 << 26  # bytes of a saved piece read at once


@dataclasses.dataclass(frozen=True)
class RowSet:
    """Rows ``first, first + stride, ...`` (``count`` of them) of an original var.

    Example:
        >>> list(RowSet(1, 3, 4).rows())   # row shard 1 of 3 of a 10-row table
        [1, 4, 7, 10]
    """

    first: int
    stride: int
    count: int

    def __post_init__(self) -> None:
        if self.first < 0 or self.stride < 1 or self.count < 0:
            raise ValueError(f"not a row set: first {self.first}, stride {self.stride}, count {self.count}")

    @property
    def last(self) -> int:
        return self.first + self.stride * (self.count - 1)

    def rows(self) -> range:
        return range(self.first, self.first + self.stride * self.count, self.stride)


def overlap(a: RowSet, b: RowSet) -> tuple[slice, slice] | None:
    """The rows ``a`` and ``b`` share, as ``(positions in a, positions in b)``, or None.

    Example:
        >>> overlap(RowSet(0, 1, 10), RowSet(1, 3, 3))   # rows 1, 4, 7 of a block of 10
        (slice(1, 8, 3), slice(0, 3, 1))
    """
    if a.count == 0 or b.count == 0:
        return None
    d = math.gcd(a.stride, b.stride)
    if (b.first - a.first) % d:
        return None
    step = a.stride // d * b.stride  # lcm: the common rows are this far apart
    # the smallest g >= a.first with g = a.first (mod a.stride) and g = b.first (mod b.stride)
    k = ((b.first - a.first) // d * pow(a.stride // d, -1, b.stride // d)) % (b.stride // d)
    g = a.first + a.stride * k
    lo, hi = max(a.first, b.first), min(a.last, b.last)
    if g < lo:
        g += -(-(lo - g) // step) * step
    if g > hi:
        return None
    n = (hi - g) // step + 1
    ia, da = (g - a.first) // a.stride, step // a.stride
    ib, db = (g - b.first) // b.stride, step // b.stride
    return slice(ia, ia + da * (n - 1) + 1, da), slice(ib, ib + db * (n - 1) + 1, db)


@dataclasses.dataclass
class Piece:
    """A saved value: which rows of the original it holds, where, and how to read it."""

    rows: RowSet
    shape: tuple
    dtype: str
    where: str                                # the file, for error messages
    read: Callable[[int, int], np.ndarray]    # (start, stop) -> its rows start..stop-1


def assemble(name: str, want: RowSet, shape: tuple, dtype: str, pieces: Iterable[Piece]) -> np.ndarray:
    """The value of var ``name`` (``want``'s rows of its original; ``shape``, ``dtype``) put
    together from ``pieces``, earlier pieces first (a row several pieces hold is taken from
    the first: replicas are equal in sync mode).

    Raises:
        SerializationError: a piece of another dtype or row width (naming its file), or rows
            that no piece holds (naming the first few).
    """
    shape = tuple(shape)
    out = np.empty(shape, dtype=dtype)
    flat = out.reshape(1) if len(shape) == 0 else out  # a 0-d var is one row
    filled = np.zeros(want.count, dtype=bool)
    row_bytes = out.itemsize * math.prod(shape[1:])
    for p in pieces:
        hit = overlap(want, p.rows)
        if hit is None or filled[hit[0]].all():
            continue
        if p.dtype != dtype or tuple(p.shape[1:]) != shape[1:]:
            raise SerializationError(f"var {name!r}: {p.where} holds {p.dtype}{list(p.shape)}, which "
                                     f"cannot fill {dtype}{list(shape)} (another dtype or row width)")
        mine, theirs = hit
        n = len(range(want.count)[mine])
        per = max(1, CHUNK // max(1, row_bytes * theirs.step))  # common rows per span read
        for t in range(0, n, per):
            k = min(per, n - t)
            dst = flat[mine.start + mine.step * t: mine.start + mine.step * (t + k - 1) + 1: mine.step]
            first = theirs.start + theirs.step * t
            src = np.asarray(p.read(first, first + theirs.step * (k - 1) + 1)).reshape((-1,) + shape[1:])[::theirs.step]
            todo = ~filled[mine][t:t + k]
            if todo.all():
                dst[...] = src
            else:  # rows an earlier piece gave already (a replica): keep those
                dst[todo] = src[todo]
        filled[mine] = True
        if filled.all():
            return out
    if want.count and not filled.all():
        missing = [want.first + want.stride * int(j) for j in np.flatnonzero(~filled)[:5]]
        raise SerializationError(f"var {name!r}: rows {missing}{' ...' if (~filled).sum() > 5 else ''} "
                                 f"are in no saved piece (it needs {want.count} rows from "
                                 f"{want.first} by {want.stride})")
    return out
