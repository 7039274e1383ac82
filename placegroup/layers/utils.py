"""Fluid 1.8's ``fluid.layers.utils``: nested structures (lists, tuples, namedtuples, dicts of
Variables) flattened, mapped and packed back, as the RNN and control-flow layers carry their
states; and ``convert_to_list`` for a layer's int-or-list arguments.

A *structure* is a leaf, or a sequence (list, tuple, namedtuple; not a str) or dict of
structures. A dict's entries are visited in sorted key order, so a dict and an OrderedDict with
the same keys flatten alike; packing keeps the structure's own key order.

Example::

    flatten({"b": [1, (2, 3)], "a": 4})                      # [4, 1, 2, 3]
    pack_sequence_as({"b": [1, (2, 3)], "a": 4}, [9, 8, 7, 6])  # {'b': [8, (7, 6)], 'a': 9}
    map_structure(lambda a, b: a + b, [1, (2, 3)], [10, (20, 30)])   # [11, (22, 33)]
    convert_to_list(3, 2, "stride")                          # [3, 3]

Thread-safety: pure functions.
"""
from __future__ import annotations

import collections.abc
import copy
from typing import Any, Callable, Iterator

from placegroup.datafeed import dtype_checks
from placegroup.model import layer_helper
from placegroup.ir import framework


__all__ = ["assert_same_structure", "convert_to_list", "copy_mutable_vars", "flatten", "hold_mutable_vars",
           "is_sequence", "map_structure", "pack_sequence_as"]

# what Fluid 1.8's layers.utils imports, and so binds, besides its own names
Variable, LayerHelper = framework.Variable, layer_helper.LayerHelper
check_type, check_dtype = dtype_checks.check_type, dtype_checks.check_dtype
check_variable_and_dtype, convert_dtype = dtype_checks.check_variable_and_dtype, dtype_checks.convert_dtype


def convert_to_list(value: Any, n: int, name: str, dtype: type = int) -> list:
    """``[value] * n`` for a single ``dtype`` value, else ``list(value)`` checked to hold ``n``
    values that ``dtype`` takes.

    Raises:
        ValueError: with Fluid's messages: not iterable, not ``n`` long, or an element ``dtype``
            refuses.
    """
    if isinstance(value, dtype):
        return [value] * n
    try:
        values = list(value)
    except TypeError:
        raise ValueError(f"The {name}'s type must be list or tuple. Received: {value}") from None
    if len(values) != n:
        raise ValueError(f"The {name}'s length must be {n}. Received: {value}")
    for v in values:
        try:
            dtype(v)
        except (ValueError, TypeError):
            raise ValueError(f"The {name}'s type must be a list or tuple of {n} {dtype} . Received: {value} "
                             f"including element {v} of type {type(v)}") from None
    return values


def is_sequence(seq: Any) -> bool:
    """Whether ``seq`` is a structure to descend into: a dict, or a sequence that is not a str."""
    return isinstance(seq, dict) or (isinstance(seq, collections.abc.Sequence) and not isinstance(seq, str))


def _keys(d: dict) -> list:
    try:
        return sorted(d)
    except TypeError:
        raise TypeError("nest only supports dicts with sortable keys.") from None


def _children(nest: Any) -> Iterator:
    if isinstance(nest, dict):
        return (nest[k] for k in _keys(nest))
    return iter(nest)


def flatten(nest: Any) -> list:
    """The leaves of ``nest`` in order (a dict's in sorted key order); ``[nest]`` for a leaf."""
    if not is_sequence(nest):
        return [nest]
    out = []
    for child in _children(nest):
        out.extend(flatten(child))
    return out


def _like(instance: Any, args: list) -> Any:
    """``args`` as a sequence of ``instance``'s type (a dict's values given in sorted key order)."""
    if isinstance(instance, dict):
        by_key = dict(zip(_keys(instance), args))
        return type(instance)((k, by_key[k]) for k in instance)
    if isinstance(instance, tuple) and isinstance(getattr(instance, "_fields", None), collections.abc.Sequence):
        return type(instance)(*args)  # a namedtuple
    return type(instance)(args)


def _pack(structure: Any, flat: list, index: int) -> tuple[int, list]:
    packed = []
    for child in _children(structure):
        if is_sequence(child):
            index, sub = _pack(child, flat, index)
            packed.append(_like(child, sub))
        else:
            packed.append(flat[index])
            index += 1
    return index, packed


def pack_sequence_as(structure: Any, flat_sequence: Any) -> Any:
    """``flat_sequence``'s values in the shape of ``structure``.

    Raises:
        TypeError: ``flat_sequence`` is not a sequence.
        ValueError: it does not hold one value per leaf of ``structure``.
    """
    if not is_sequence(flat_sequence):
        raise TypeError("flat_sequence must be a sequence")
    if not is_sequence(structure):
        if len(flat_sequence) != 1:
            raise ValueError(f"Structure is a scalar but len(flat_sequence) == {len(flat_sequence)} > 1")
        return flat_sequence[0]
    leaves = len(flatten(structure))
    if leaves != len(flat_sequence):
        raise ValueError(f"Could not pack sequence. Structure had {leaves} elements, but flat_sequence had "
                         f"{len(flat_sequence)} elements.  Structure: {structure}, flat_sequence: {flat_sequence}.")
    return _like(structure, _pack(structure, list(flat_sequence), 0)[1])


def map_structure(func: Callable, *structure: Any) -> Any:
    """``func`` applied to the leaves of the structures in step, in the shape of the first."""
    flats = [flatten(s) for s in structure]
    return pack_sequence_as(structure[0], [func(*leaves) for leaves in zip(*flats)])


def hold_mutable_vars(structure: Any) -> bool:
    """Whether an element of ``structure`` is itself a structure (a list, tuple or dict)."""
    return any(is_sequence(s) for s in structure)


def copy_mutable_vars(structure: Any) -> Any:
    """A new structure of ``structure``'s shape over the same leaves."""
    return pack_sequence_as(structure, copy.copy(flatten(structure)))


def _same(nest1: Any, nest2: Any, check_types: bool) -> None:
    seq1 = is_sequence(nest1)
    if seq1 != is_sequence(nest2):
        raise ValueError(f"The two structures don't have the same nested structure.\n\nFirst structure: {nest1}"
                         f"\n\nSecond structure: {nest2}.")
    if not seq1:
        return
    if check_types:
        if type(nest1) is not type(nest2):
            raise TypeError(f"The two structures don't have the same sequence type. First structure has type "
                            f"{type(nest1)}, while second structure has type {type(nest2)}.")
        if isinstance(nest1, dict) and set(nest1) != set(nest2):
            raise ValueError(f"The two dictionaries don't have the same set of keys. First structure has keys "
                             f"{set(nest1)}, while second structure has keys {set(nest2)}.")
    for a, b in zip(_children(nest1), _children(nest2)):
        _same(a, b, check_types)


def assert_same_structure(nest1: Any, nest2: Any, check_types: bool = True) -> None:
    """Refuse two structures of different shape (or, with ``check_types``, sequence types).

    Raises:
        ValueError: a different number of leaves, nesting, or dict keys.
        TypeError: with ``check_types``, a list where the other has a tuple (and the like).
    """
    n1 = len(flatten(nest1)) if is_sequence(nest1) else 1
    n2 = len(flatten(nest2)) if is_sequence(nest2) else 1
    if n1 != n2:
        raise ValueError(f"The two structures don't have the same number of elements.\n\nFirst structure "
                         f"({n1} elements): {nest1}\n\nSecond structure ({n2} elements): {nest2}")
    _same(nest1, nest2, check_types)
