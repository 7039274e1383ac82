"""``fluid.create_lod_tensor`` and ``fluid.create_random_int_lodtensor``: LoD tensors built in
Python, as Fluid 1.8's fluid/lod_tensor.py builds them.

A LoD tensor holds a batch of sequences: the rows of all sequences stacked in one array, and
their lengths (``recursive_seq_lens``, one list per LoD level). Feed one to a var declared with
``lod_level`` equal to the number of levels (placegroup/values.py has the type,
executor/executor.py NOTE(lod-feed) the rules).

Example::

    import numpy as np
    import placegroup as fluid
    # two sentences, of 2 and 3 word ids
    t = fluid.create_lod_tensor(np.array([[1], [2], [3], [4], [5]], "int64"), [[2, 3]], fluid.CPUPlace())
    t.lod()                                   # [[0, 2, 5]]
    t = fluid.create_lod_tensor([[1, 2], [3, 4, 5]], [[2, 3]], fluid.CPUPlace())   # the same, from lists
    r = fluid.create_random_int_lodtensor([[2, 3]], base_shape=[30], place=fluid.CPUPlace(), low=0, high=10)
    r.shape()                                 # [5, 30]

Thread-safety: both functions build new values and touch no shared state but numpy's global
random generator (``create_random_int_lodtensor``, as Fluid's).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from placegroup.values import LoDTensor

__all__ = ["create_lod_tensor", "create_random_int_lodtensor"]


def create_lod_tensor(data: Any, recursive_seq_lens, place) -> LoDTensor:
    """A LoDTensor holding ``data`` with the sequence lengths ``recursive_seq_lens``.

    Args:
        data: a numpy array (the rows of all sequences stacked), a LoDTensor (its data is
            taken), or a list with one list per sequence (per top-level sequence, nested once
            per LoD level), whose innermost items become the rows; as in Fluid 1.8, a list
            gets a trailing dim of 1 (``[[1, 2], [3]]`` gives data of shape [3, 1]).
        recursive_seq_lens: one list of lengths per LoD level, top level first, e.g.
            ``[[2, 3]]`` for two sequences of 2 and 3 rows.
        place: ``fluid.CPUPlace()`` or ``fluid.CUDAPlace(i)``: where the data is stored.

    Returns:
        A new LoDTensor (the data copied).

    Raises:
        ValueError: lengths that do not fit the data (naming both), or lists whose lengths
            differ from ``recursive_seq_lens``.
        TypeError: ``data`` of another type.
    """
    if isinstance(data, LoDTensor):
        return create_lod_tensor(np.array(data), recursive_seq_lens, place)
    if isinstance(data, list):
        depth = len(recursive_seq_lens)
        found, rows = _nested_lengths(data, depth)
        if [list(map(int, level)) for level in recursive_seq_lens] != found:
            raise ValueError(f"create_lod_tensor: the lists hold sequences of lengths {found}, but "
                             f"recursive_seq_lens is {recursive_seq_lens}")
        arr = np.array(rows)
        arr = arr.reshape(arr.shape + (1,))  # Fluid 1.8 appends a dim of 1 to list data
        return create_lod_tensor(arr, recursive_seq_lens, place)
    if isinstance(data, np.ndarray) or hasattr(data, "__cuda_array_interface__"):
        tensor = LoDTensor()
        tensor.set(data, place)
        tensor.set_recursive_sequence_lengths([list(level) for level in recursive_seq_lens])
        return tensor
    raise TypeError(f"create_lod_tensor: data should be a LoDTensor, a numpy array or a list, "
                    f"got {type(data).__name__}")


def _nested_lengths(data: list, depth: int) -> tuple[list, list]:
    """The lengths of the ``depth`` levels of nested lists ``data`` (one list per top-level
    sequence) and the innermost items (the rows), in order.

    Raises:
        ValueError: a list nested less deeply than ``depth``.
    """
    lengths: list[list[int]] = []
    items = data
    for level in range(depth):
        for k, seq in enumerate(items):
            if not hasattr(seq, "__len__") or isinstance(seq, (str, bytes)):
                raise ValueError(f"create_lod_tensor: item {k} of LoD level {level} is {seq!r:.40}, not a list: "
                                 f"the lists are nested {level} level(s) deep, but recursive_seq_lens "
                                 f"has {depth}")
        lengths.append([len(seq) for seq in items])
        items = [x for seq in items for x in seq]
    return lengths, items


def create_random_int_lodtensor(recursive_seq_lens, base_shape, place, low: int, high: int) -> LoDTensor:
    """A LoDTensor of random int64 in ``[low, high]`` (both included) with the sequence lengths
    ``recursive_seq_lens``; its data has shape ``[sum of the last level's lengths] +
    base_shape``. Draws from numpy's global generator as Fluid 1.8 does (``np.random.seed``
    repeats it).

    Raises:
        TypeError: ``base_shape`` is not a list (Fluid asserts it).
    """
    if not isinstance(base_shape, list):
        raise TypeError(f"create_random_int_lodtensor: base_shape should be a list, got {base_shape!r}")
    overall_shape = [sum(recursive_seq_lens[-1])] + base_shape
    # Fluid's np.random.random_integers(low, high, shape): numpy draws it as randint(low, high + 1)
    data = np.random.randint(low, high + 1, overall_shape).astype("int64")
    return create_lod_tensor(data, recursive_seq_lens, place)
