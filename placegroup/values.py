"""Values that cross the wire, shared by ops, comm and the executor (they import nothing of
placegroup's): ``SelectedRows``, and ``as_host`` / ``to_device`` to move values between a
device and the host.

SelectedRows: some rows of a tall var, as Fluid's ``SelectedRows`` (the value of a var
whose ``Variable.type`` is ``"selected_rows"``).

A SelectedRows stands for a dense ``[height, *values.shape[1:]]`` array that is zero except
in the listed rows: row ``rows[i]`` holds ``values[i]``, and a row listed twice holds the sum
of its entries (a gradient: two ids of a batch hitting one embedding row). It is how an
embedding's gradient and a prefetched slice of a sharded table travel: only the touched rows
exist, never the whole table.

It works on numpy and cupy alike: every method uses the array module of ``values`` (or the
``xp`` it is given) and nothing else, and it imports nothing from the framework.

Example::

    import numpy as np
    from placegroup.values import SelectedRows
    g = SelectedRows(np.array([3, 0, 3]), np.ones((3, 2), np.float32), height=5)
    g.shape                 # (5, 2)
    g.merged().rows         # array([0, 3]); its values are [[1, 1], [2, 2]]
    g.to_dense()[3]         # array([2., 2.], dtype=float32)

Thread-safety: a SelectedRows is a plain value; its methods never write into its arrays.
"""
from __future__ import annotations

from typing import Any

import numpy


def array_module(a):
    """numpy or cupy: the module that made the array ``a``."""
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return numpy


def scatter_add(xp, dst, idx, src) -> None:
    """``dst[idx[i]] += src[i]`` in place, repeats adding up in index order.

    NOTE(merge-flat-add-at): on numpy, rows of a C-contiguous ``dst`` go through ``add.at`` on
    the flattened arrays, whose 1-D fast path is 5x quicker than a 2-D ``add.at`` (or
    ``add.reduceat``) over rows; each element still adds its entries in index order, so the
    sums are the same to the bit. numpy and cupy >= 13 have ``xp.add.at``; older cupy has
    ``cupyx.scatter_add``.
    """
    if xp is numpy and dst.ndim > 1 and dst.flags.c_contiguous and len(idx):
        width = dst.size // max(dst.shape[0], 1)
        flat = (numpy.asarray(idx, dtype=numpy.int64)[:, None] * width + numpy.arange(width)).reshape(-1)
        numpy.add.at(dst.reshape(-1), flat, numpy.ascontiguousarray(src, dtype=dst.dtype).reshape(-1))
        return
    at = getattr(getattr(xp, "add", None), "at", None)
    if at is not None:
        at(dst, idx, src)
    else:  # older cupy
        import cupyx

        cupyx.scatter_add(dst, idx, src)


def sorted_unique(xp, a):
    """The sorted unique values of 1-D ``a``. NOTE(sort-unique): numpy 2's ``unique`` hashes,
    which is 10x slower than a sort on a batch of ids; a sort and a mask give the same."""
    s = xp.sort(a)
    if s.shape[0] < 2:
        return s
    keep = xp.empty(s.shape, dtype=bool)
    keep[0] = True
    xp.not_equal(s[1:], s[:-1], out=keep[1:])
    return s[keep]


class SelectedRows:
    """Rows ``rows`` of a var of ``height`` rows, holding ``values``.

    Args:
        rows: 1-D integer row numbers in ``[0, height)``; may repeat, any order. Stored int64.
        values: an array ``[len(rows), ...]``; the trailing dims are the var's.
        height: the number of rows of the whole var.

    Raises:
        ValueError: if ``rows`` is not 1-D, ``values`` has another row count or no dims, or
            ``height`` is negative.
    """

    __slots__ = ("rows", "values", "height")

    def __init__(self, rows, values, height: int) -> None:
        xp = array_module(values)
        rows = xp.asarray(rows)
        if rows.ndim != 1:
            raise ValueError(f"SelectedRows: rows must be 1-D, got shape {list(rows.shape)}")
        if values.ndim < 1 or values.shape[0] != rows.shape[0]:
            raise ValueError(f"SelectedRows: values{list(values.shape)} must have one row per "
                             f"entry of rows ({rows.shape[0]})")
        if int(height) < 0:
            raise ValueError(f"SelectedRows: height {height} must be >= 0")
        self.rows = rows.astype(xp.int64, copy=False)
        self.values = values
        self.height = int(height)

    @property
    def shape(self) -> tuple:
        """The whole var's shape: ``(height, *values.shape[1:])``."""
        return (self.height,) + tuple(self.values.shape[1:])

    @property
    def dtype(self):
        return self.values.dtype

    @property
    def ndim(self) -> int:
        return self.values.ndim

    def to_dense(self, xp=None):
        """The dense ``[height, ...]`` array: zeros, plus ``values`` added at ``rows``."""
        xp = xp or array_module(self.values)
        out = xp.zeros(self.shape, dtype=self.values.dtype)
        scatter_add(xp, out, self.rows, self.values)
        return out

    def merged(self, xp=None) -> "SelectedRows":
        """The same var with each row listed once: rows sorted and unique, the values of a
        repeated row summed (in the order they appear)."""
        xp = xp or array_module(self.values)
        n = self.rows.shape[0]
        if xp is numpy and n:
            # a stable sort finds the groups; scatter_add sums them (NOTE(merge-flat-add-at)),
            # entries adding up in their original order
            order = numpy.argsort(self.rows, kind="stable")
            rows = self.rows[order]
            first = numpy.empty(n, dtype=bool)
            first[0] = True
            numpy.not_equal(rows[1:], rows[:-1], out=first[1:])
            if first.all():  # nothing repeats
                return SelectedRows(rows, self.values[order], self.height)
            group = numpy.empty(n, dtype=numpy.int64)
            group[order] = numpy.cumsum(first) - 1
            uniq = rows[first]
            vals = numpy.zeros((uniq.shape[0],) + tuple(self.values.shape[1:]), dtype=self.values.dtype)
            scatter_add(numpy, vals, group, self.values)
            return SelectedRows(uniq, vals, self.height)
        uniq, inv = xp.unique(self.rows, return_inverse=True)
        vals = xp.zeros((uniq.shape[0],) + tuple(self.values.shape[1:]), dtype=self.values.dtype)
        scatter_add(xp, vals, inv.reshape(-1), self.values)
        return SelectedRows(uniq, vals, self.height)

    def to_host(self) -> "SelectedRows":
        """The same SelectedRows with numpy arrays (copied from the device for cupy ones):
        what a fetch returns, without densifying a tall var."""
        if array_module(self.values) is numpy:
            return self
        return SelectedRows(self.rows.get(), self.values.get(), self.height)

    def with_values(self, values) -> "SelectedRows":
        """The same rows and height holding other ``values`` (e.g. scaled)."""
        return SelectedRows(self.rows, values, self.height)

    def __repr__(self) -> str:
        n = self.rows.shape[0]
        shown = ", ".join(str(int(r)) for r in self.rows[:8].tolist()) + (", ..." if n > 8 else "")
        return f"SelectedRows(height={self.height}, rows=[{shown}], values={self.dtype}{list(self.values.shape)})"


def is_selected_rows(x) -> bool:
    """True for a ``SelectedRows`` value (False for dense arrays and everything else)."""
    return isinstance(x, SelectedRows)


def as_host(value: Any) -> Any:
    """A host value for the wire (cupy arrays, and SelectedRows of them, copied to the host)."""
    if isinstance(value, numpy.ndarray):
        return value
    if isinstance(value, SelectedRows):
        if isinstance(value.values, numpy.ndarray):
            return value
        return SelectedRows(as_host(value.rows), as_host(value.values), value.height)
    return value.get() if hasattr(value, "get") else value


def to_device(xp, value: Any) -> Any:
    """A received value on the executor's device (``xp`` numpy: as it is)."""
    if xp is numpy or value is None:
        return value
    if isinstance(value, SelectedRows):
        return SelectedRows(xp.asarray(value.rows), xp.asarray(value.values), value.height)
    return xp.asarray(value)


__all__ = ["SelectedRows", "array_module", "as_host", "is_selected_rows", "scatter_add", "to_device"]
