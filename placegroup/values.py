"""Values that cross the wire, shared by ops, comm and the executor (they import nothing of
placegroup's): ``SelectedRows``, ``LoDTensor``, and ``as_host`` / ``to_device`` to move values
between a device and the host.

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

from typing import Any, NamedTuple

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


def put_rows(xp, dst, rows, src) -> None:
    """``dst[rows] = src`` for unique ``rows`` of a C-contiguous numpy ``dst``, each row moved as
    one item (a void view): 2x quicker than numpy's row-wise fancy assignment."""
    if xp is numpy and dst.ndim == 2 and dst.flags.c_contiguous and dst.shape[1]:
        item = numpy.dtype((numpy.void, dst.dtype.itemsize * dst.shape[1]))
        dst.view(item).reshape(-1)[rows] = numpy.ascontiguousarray(src, dtype=dst.dtype).view(item).reshape(-1)
        return
    dst[rows] = src


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


def _stable_order(rows, height: int):
    """``(order, rows[order])`` with ``order`` the stable argsort of int64 ``rows``.

    NOTE(packed-sort): numpy's ``sort`` of int64 is vectorised and 5-9x quicker than its stable
    ``argsort`` (1.2 ms against 11 ms for 130,000 ids), so where ``height`` and the count fit
    together in 63 bits each row is packed with its position, ``row << b | i``, and the packed
    keys are sorted: equal rows then keep their order, which is the stable argsort's.
    """
    n = rows.shape[0]
    bits = max(int(n - 1).bit_length(), 1)
    if int(height).bit_length() + bits > 63:
        order = numpy.argsort(rows, kind="stable")
        return order, rows[order]
    keys = numpy.sort((rows << bits) | numpy.arange(n, dtype=numpy.int64))
    return keys & ((1 << bits) - 1), keys >> bits


class SelectedRows:
    """Rows ``rows`` of a var of ``height`` rows, holding ``values``.

    Args:
        rows: 1-D integer row numbers in ``[0, height)``; may repeat, any order. Stored int64.
        values: an array ``[len(rows), ...]``; the trailing dims are the var's.
        height: the number of rows of the whole var.
        weights: None, or a 1-D float32 array, one per entry: how much each entry counts as a
            sighting of its row. Only the gradient of a table admitted by show and click
            (``ShowClickEntry``) has them (NOTE(sighting-weights) in ops/dynamic.py). They
            ride with the entries: joins concatenate them, ``with_values`` (a scale, a clip)
            keeps them unscaled, ``merged`` sums a repeated row's.

    Raises:
        ValueError: if ``rows`` is not 1-D, ``values`` (or ``weights``) has another row count
            or ``values`` no dims, or ``height`` is negative.
    """

    __slots__ = ("rows", "values", "height", "weights", "_index")

    def __init__(self, rows, values, height: int, weights=None) -> None:
        xp = array_module(values)
        rows = xp.asarray(rows)
        if rows.ndim != 1:
            raise ValueError(f"SelectedRows: rows must be 1-D, got shape {list(rows.shape)}")
        if values.ndim < 1 or values.shape[0] != rows.shape[0]:
            raise ValueError(f"SelectedRows: values{list(values.shape)} must have one row per "
                             f"entry of rows ({rows.shape[0]})")
        if int(height) < 0:
            raise ValueError(f"SelectedRows: height {height} must be >= 0")
        if weights is not None:
            weights = xp.asarray(weights).astype(xp.float32, copy=False)
            if weights.shape != rows.shape:
                raise ValueError(f"SelectedRows: weights{list(weights.shape)} must be 1-D, one per entry of "
                                 f"rows ({rows.shape[0]})")
        self.rows = rows.astype(xp.int64, copy=False)
        self.values = values
        self.height = int(height)
        self.weights = weights
        self._index = None  # built by positions(), once

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
        if n > 1 and bool((self.rows[1:] > self.rows[:-1]).all()):
            return self  # already sorted and unique: a prefetch's rows, block after block
        if xp is numpy and n:
            # a stable sort finds the groups; scatter_add sums them (NOTE(merge-flat-add-at)),
            # entries adding up in their original order
            order, rows = _stable_order(self.rows, self.height)
            first = numpy.empty(n, dtype=bool)
            first[0] = True
            numpy.not_equal(rows[1:], rows[:-1], out=first[1:])
            if first.all():  # nothing repeats
                w = None if self.weights is None else self.weights[order]
                return SelectedRows(rows, self.values[order], self.height, w)
            group = numpy.empty(n, dtype=numpy.int64)
            group[order] = numpy.cumsum(first) - 1
            uniq = rows[first]
        else:
            uniq, group = xp.unique(self.rows, return_inverse=True)
            group = group.reshape(-1)
        vals = xp.zeros((uniq.shape[0],) + tuple(self.values.shape[1:]), dtype=self.values.dtype)
        scatter_add(xp, vals, group, self.values)
        w = None
        if self.weights is not None:
            w = xp.zeros(uniq.shape[0], dtype=xp.float32)
            scatter_add(xp, w, group, self.weights)
        return SelectedRows(uniq, vals, self.height, w)

    def positions(self, ids):
        """``(pos, found)`` for 1-D ids in ``[0, height)``: ``rows[pos[i]] == ids[i]`` where
        ``found[i]``; ``pos`` is 0 where not.

        NOTE(row-index): the index over ``rows`` is built on the first call and kept, so the
        lookups that read one prefetched SelectedRows (26 slots sharing a table) share it.
        Where the height is small next to the rows (at most 4M, or 16 per row) it is a dense
        map from row number to entry, an int32 array of ``height`` (4 MB for 1M rows): one
        gather per call, 7 us for 5,000 ids against 620 us for ``searchsorted`` over 53,000
        rows. Taller tables (a hashed id space) keep the sorted rows and search them. ``rows``
        and ``values`` are never written after construction, so the index stays true.
        """
        xp = array_module(self.values)
        n = self.rows.shape[0]
        if n == 0:
            return xp.zeros(ids.shape, dtype=xp.int64), xp.zeros(ids.shape, dtype=bool)
        if self._index is None:
            self._index = self._build_index(xp, n)
        kind, index = self._index
        if kind == "dense":
            pos = index[ids]  # entries of ids not among rows are left unset: checked below
            pos = xp.where((pos >= 0) & (pos < n), pos, 0)
            return pos, self.rows[pos] == ids
        order, ordered = index
        pos = xp.minimum(xp.searchsorted(ordered, ids), n - 1)
        found = ordered[pos] == ids
        return (pos if order is None else order[pos]), found

    def _build_index(self, xp, n: int):
        if self.height <= max(1 << 22, 16 * n) and n < (1 << 31):
            index = xp.empty(self.height, dtype=xp.int32)
            index[self.rows] = xp.arange(n, dtype=xp.int32)
            return "dense", index
        if bool((self.rows[1:] > self.rows[:-1]).all()):
            return "sorted", (None, self.rows)
        order = xp.argsort(self.rows)
        return "sorted", (order, self.rows[order])

    def to_host(self) -> "SelectedRows":
        """The same SelectedRows with numpy arrays (copied from the device for cupy ones):
        what a fetch returns, without densifying a tall var."""
        if array_module(self.values) is numpy:
            return self
        return SelectedRows(self.rows.get(), self.values.get(), self.height,
                            None if self.weights is None else self.weights.get())

    def with_values(self, values) -> "SelectedRows":
        """The same rows, height and weights holding other ``values`` (e.g. scaled)."""
        return SelectedRows(self.rows, values, self.height, self.weights)

    def __repr__(self) -> str:
        n = self.rows.shape[0]
        shown = ", ".join(str(int(r)) for r in self.rows[:8].tolist()) + (", ..." if n > 8 else "")
        weighted = "" if self.weights is None else ", weighted"
        return (f"SelectedRows(height={self.height}, rows=[{shown}], values={self.dtype}{list(self.values.shape)}"
                f"{weighted})")


# -- LoDTensor -------------------------------------------------------------------------------


def lengths_to_offsets(lengths) -> numpy.ndarray:
    """Sequence lengths -> offsets: ``[2, 0, 3]`` -> ``array([0, 2, 2, 5])`` (int64)."""
    out = numpy.zeros(len(lengths) + 1, dtype=numpy.int64)
    numpy.cumsum(numpy.asarray(lengths, dtype=numpy.int64), out=out[1:])
    return out


def check_lod(offsets, rows: int | None = None) -> str | None:
    """What is wrong with ``offsets`` as the LoD of ``rows`` rows (None: not known yet), or
    None when it is valid: Fluid's ``CheckLoD``, made strict about the rows.

    Each level is a 1-D offsets array that starts at 0 and never decreases; an upper level
    ends at the number of sequences of the level below (its length minus one); the last
    level ends at ``rows``.
    """
    for k, o in enumerate(offsets):
        if o.ndim != 1 or o.shape[0] < 1:
            return f"level {k} holds no offsets (shape {list(o.shape)}); it needs at least the offset 0"
        if int(o[0]) != 0:
            return f"level {k} starts at {int(o[0])}, not at 0"
        down = numpy.flatnonzero(o[1:] < o[:-1])
        if down.shape[0]:
            i = int(down[0])
            return (f"level {k} is not monotone: offset {int(o[i])} at position {i} is followed by "
                    f"{int(o[i + 1])}")
        if k + 1 < len(offsets) and int(o[-1]) != offsets[k + 1].shape[0] - 1:
            return (f"level {k} ends at {int(o[-1])}, but level {k + 1} holds "
                    f"{offsets[k + 1].shape[0] - 1} sequences (an upper level's last offset counts "
                    f"the sequences of the level below)")
    if rows is not None and offsets and int(offsets[-1][-1]) != rows:
        return f"the last level ends at {int(offsets[-1][-1])}, but the data has {rows} rows"
    return None


def _as_offsets(lod) -> tuple:
    """Offsets as Fluid's ``set_lod`` takes them (lists or arrays, top level first) -> a tuple
    of 1-D int64 numpy arrays."""
    if lod is None:
        return ()
    if not isinstance(lod, (list, tuple)):
        raise ValueError(f"a LoD is a list of offset lists, one per level; got {type(lod).__name__}")
    out = []
    for k, level in enumerate(lod):
        a = numpy.asarray(level.get() if hasattr(level, "get") and not isinstance(level, (list, tuple))
                          else level)
        if a.size and a.dtype.kind not in "iu":
            raise ValueError(f"LoD level {k} holds {a.dtype} values {a.tolist()[:8]}; offsets are integers")
        out.append(a.astype(numpy.int64, copy=False).reshape(-1) if a.ndim <= 1 else a)
    return tuple(out)


class LoDTensor:
    """A tensor whose rows form sequences: ``data`` (rows along dim 0) and its LoD, Fluid's
    ``LoDTensor``. ``fluid.core.LoDTensor`` (and ``fluid.LoDTensor``) is this class.

    NOTE(lod-offsets): the LoD is kept as Fluid's offset-based form, ``offsets``: a tuple of
    levels, top level first, each a 1-D int64 numpy array on the host (on a GPU place too:
    they are small and kernels do index arithmetic with them). Sequence ``i`` of the last
    level is ``data[o[i]:o[i + 1]]``; an upper level groups the sequences of the level
    below. ``recursive_sequence_lengths()`` gives the length-based form Fluid's Python API
    prefers (``[[2, 3]]`` for offsets ``[[0, 2, 5]]``). A value is never changed in place by
    the executor or a kernel: an op that keeps the rows of its input shares the input's
    ``offsets`` tuple (``with_data``), and a value crossing the wire is its data plus one
    offsets array per level.

    Args:
        data: the rows (a numpy or cupy array), or None for an empty tensor to ``set``
            later. A list of lists here, alone, is Fluid's ``LoDTensor(recursive_sequence_lengths)``.
        lod: the offsets, top level first (lists or arrays); ``()`` for none.
        check: validate ``lod`` against ``data`` (``check_lod``).

    Raises:
        ValueError: naming what is wrong with the LoD (a level not starting at 0, not
            monotone, not ending at the rows or at the level below's sequence count).

    Example::

        import numpy as np
        from placegroup.values import LoDTensor
        t = LoDTensor.from_lengths(np.arange(5.0).reshape(5, 1), [[2, 3]])
        t.lod()                          # [[0, 2, 5]]
        t.recursive_sequence_lengths()   # [[2, 3]]
        t.set_recursive_sequence_lengths([[4, 4]])   # ValueError: ... ends at 8, but the data has 5 rows

    Thread-safety: a plain value; share it between threads only while nobody calls ``set``
    or ``set_lod`` on it.
    """

    __slots__ = ("data", "offsets")

    def __init__(self, data=None, lod=(), *, check: bool = True) -> None:
        if isinstance(data, (list, tuple)) and not lod:  # LoDTensor(recursive_sequence_lengths)
            data, lod = None, [lengths_to_offsets(level) for level in data]
        self.data = data
        self.offsets = lod if type(lod) is tuple and not check else _as_offsets(lod)
        if check:
            self.validate()

    @classmethod
    def from_lengths(cls, data, lengths) -> "LoDTensor":
        """``data`` with the LoD of ``lengths`` (Fluid's recursive sequence lengths)."""
        return cls(data, [lengths_to_offsets(level) for level in lengths])

    # -- what placegroup reads ---------------------------------------------------------------
    @property
    def lod_level(self) -> int:
        """How many levels the LoD has (0: none)."""
        return len(self.offsets)

    @property
    def dtype(self):
        return self._held().dtype

    @property
    def ndim(self) -> int:
        return self._held().ndim

    def validate(self) -> None:
        """Raise ValueError naming what is wrong with the LoD (against the rows once ``data`` is set)."""
        why = check_lod(self.offsets, self._rows())
        if why is not None:
            raise ValueError(f"invalid LoD {self.lod()}: {why}")

    def with_data(self, data) -> "LoDTensor":
        """``data`` with this LoD (shared, not copied): what an op that keeps its rows makes."""
        return LoDTensor(data, self.offsets, check=False)

    def sequences(self, lo: int, hi: int) -> "LoDTensor":
        """Top-level sequences ``lo:hi`` (with every level below them and their rows), offsets
        rebased to 0: how a batch of sequences is cut into per-trainer shares.

        Example: ``LoDTensor.from_lengths(x, [[2, 3, 1]]).sequences(1, 3)`` holds rows 2..5 of
        ``x`` with lengths ``[[3, 1]]``."""
        levels, a, b = [], lo, hi
        for o in self.offsets:
            levels.append(o[a:b + 1] - o[a])
            a, b = int(o[a]), int(o[b])
        return LoDTensor(self._held()[a:b], tuple(levels), check=False)

    def to_host(self) -> "LoDTensor":
        """The same LoDTensor with its data on the host (numpy)."""
        if self.data is None or isinstance(self.data, numpy.ndarray):
            return self
        return LoDTensor(self.data.get(), self.offsets, check=False)

    def _rows(self) -> int | None:
        return None if self.data is None else (int(self.data.shape[0]) if self.data.ndim else 1)

    def _held(self):
        if self.data is None:
            raise ValueError("this LoDTensor holds no value yet: call set(array, place) first")
        return self.data

    # -- Fluid's Python API ------------------------------------------------------------------
    def set(self, array, place=None) -> None:
        """Hold a copy of ``array`` (on ``place``'s device; the host when None). The LoD is
        kept, as in Fluid: set it again if the rows changed."""
        arr = array.copy() if hasattr(array, "__cuda_array_interface__") else numpy.array(array)
        if place is not None and getattr(place, "device", "cpu") == "gpu":
            arr = place.array_module().asarray(arr)
        self.data = arr

    def shape(self) -> list:
        """The data's shape, as a list (Fluid's ``LoDTensor.shape()``)."""
        return list(self._held().shape)

    def _dtype(self):
        return self._held().dtype

    def _is_initialized(self) -> bool:
        return self.data is not None

    def __array__(self, dtype=None, copy=None):
        held = self._held()
        a = held if isinstance(held, numpy.ndarray) else held.get()
        return a.astype(dtype) if dtype is not None else a

    def lod(self) -> list:
        """The offset-based LoD as lists of ints, top level first (``[]``: none)."""
        return [o.tolist() for o in self.offsets]

    def set_lod(self, lod) -> None:
        """Set the offset-based LoD (e.g. ``[[0, 2, 5]]``).

        Raises:
            ValueError: naming what is wrong (checked against the rows when data is set).
        """
        offsets = _as_offsets(lod)
        why = check_lod(offsets, self._rows())
        if why is not None:
            raise ValueError(f"set_lod({lod!r}): {why}")
        self.offsets = offsets

    def recursive_sequence_lengths(self) -> list:
        """The length-based LoD: ``[[2, 3]]`` for offsets ``[[0, 2, 5]]``."""
        return [numpy.diff(o).tolist() for o in self.offsets]

    def set_recursive_sequence_lengths(self, lengths) -> None:
        """Set the LoD from sequence lengths (``[[2, 3]]``: two sequences of 2 and 3 rows).

        Raises:
            ValueError: naming what is wrong, e.g. lengths that do not add up to the rows.
        """
        if not isinstance(lengths, (list, tuple)) or not all(isinstance(x, (list, tuple, numpy.ndarray))
                                                            for x in lengths):
            raise ValueError(f"set_recursive_sequence_lengths({lengths!r}): give one list of lengths per "
                             f"level, e.g. [[2, 3]]")
        if any(int(n) < 0 for level in lengths for n in level):
            raise ValueError(f"set_recursive_sequence_lengths({lengths!r}): lengths must be >= 0")
        offsets = tuple(lengths_to_offsets(level) for level in lengths)
        why = check_lod(offsets, self._rows())
        if why is not None:
            raise ValueError(f"set_recursive_sequence_lengths({lengths!r}): {why}")
        self.offsets = offsets

    def has_valid_recursive_sequence_lengths(self) -> bool:
        """Whether the LoD is valid for the data (an empty LoD is)."""
        return check_lod(self.offsets, self._rows()) is None

    def __repr__(self) -> str:
        held = "no data" if self.data is None else f"{self.data.dtype}{list(self.data.shape)}"
        return f"LoDTensor({held}, recursive_sequence_lengths={self.recursive_sequence_lengths()})"


def is_lod_tensor(x) -> bool:
    """True for a ``LoDTensor`` value."""
    return isinstance(x, LoDTensor)


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
        return value.to_host()
    if isinstance(value, LoDTensor):
        return value.to_host()
    wire = getattr(value, "as_wire", None)  # a value that is no array says how it travels (a table)
    if wire is not None:
        return wire()
    return value.get() if hasattr(value, "get") else value


def host_array(value: Any) -> numpy.ndarray:
    """A small array (a condition, ids, lengths) as a numpy array on the host."""
    return numpy.asarray(as_host(value))


def to_device(xp, value: Any) -> Any:
    """A received value on the executor's device (``xp`` numpy: as it is)."""
    if xp is numpy or value is None:
        return value
    if isinstance(value, SelectedRows):
        return SelectedRows(xp.asarray(value.rows), xp.asarray(value.values), value.height)
    if isinstance(value, LoDTensor):  # the offsets stay on the host (NOTE(lod-offsets))
        return value.with_data(xp.asarray(value.data))
    return xp.asarray(value)


__all__ = ["LoDTensor", "SelectedRows", "TensorArray", "array_module", "as_host", "check_lod", "concat_lod_tensors",
           "is_lod_tensor",
           "is_selected_rows", "is_tensor_array", "lengths_to_offsets", "scatter_add", "to_device"]


def concat_lod_tensors(xp, parts: list) -> "LoDTensor":
    """LoD tensors joined along dim 0, their LoDs too: each level's offsets shifted past the
    parts before it (how a data-parallel step's places' batches make one batch)."""
    levels = []
    for k in range(len(parts[0].offsets)):
        pieces, end = [numpy.zeros(1, numpy.int64)], 0
        for t in parts:
            pieces.append(t.offsets[k][1:] + end)
            end += int(t.offsets[k][-1])
        levels.append(numpy.concatenate(pieces))
    return LoDTensor(xp.concatenate([t.data for t in parts], axis=0), tuple(levels), check=False)


class TensorArray(list):
    """The value of a tensor-array var (Fluid's ``LoDTensorArray`` in a program: ``create_array``,
    ``array_write``, ``array_read``): a list of tensors, index i the i-th written. The ops that
    write one give a new list unless the executor lets them update it in place."""


class LoDRankTable(NamedTuple):
    """The value of a ``lod_rank_table`` var: a batch's sequences ranked by length, longest first
    (NOTE(rank-table) in ops/lod_rank.py). ``index[r]`` is the sequence at rank r, ``length[r]``
    its length; both int64 arrays."""

    index: numpy.ndarray
    length: numpy.ndarray


def is_tensor_array(x) -> bool:
    return type(x) is TensorArray
