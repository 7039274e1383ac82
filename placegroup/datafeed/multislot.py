"""Fluid's MultiSlot text format: parse it into instances, and batch instances into feeds.

NOTE(multislot-format): one line is one instance. For each var of ``set_use_var``, in order,
it holds a count ``n`` and then ``n`` values: ids (``int64`` vars) or floats (``float32``
vars). ``1 0 3 12 7 9 2 0.5 1.5`` is, for ``[click, slot1, dense]``: click ``[0]``, slot1
``[12, 7, 9]``, dense ``[0.5, 1.5]``. A var with ``lod_level=1`` becomes a LoDTensor whose
sequences are the instances' values (their counts are the sequence lengths); a var with
``lod_level=0`` must have the same count on every line, the width of one instance of the var
(its shape past the batch dimension), and becomes a plain ``[batch, width]`` array. As in
Fluid, a count of 0 is an error (pad the slot in the data generator), and so is a line with
values left after its last var.

Parsing is vectorised per file and var: each line is split once and its counts walked in
Python, and every var's values of the whole file become one numpy array in one conversion.
Only when that conversion fails is the file walked again, line by line, to name the bad line.

Example::

    slots = [Slot("click", "int64", 0, (1,)), Slot("words", "int64", 1, (1,))]
    inst = parse_text("1 0 3 12 7 9\\n1 1 1 4\\n", slots, "part-0")
    feed = inst.feed(slots, np.arange(2))  # {"click": int64 [2, 1], "words": LoDTensor [4, 1]}

Thread-safety: an ``Instances`` is never changed after it is made; share it freely.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from placegroup.errors import ConfigError
from placegroup.values import LoDTensor, lengths_to_offsets

__all__ = ["Slot", "Instances", "parse_text", "slot_of"]


class MultiSlotFormatError(ConfigError):
    """A line of a data file is not in the MultiSlot format; the message names file and line."""


@dataclass(frozen=True)
class Slot:
    """One var of ``set_use_var``: its name, dtype (int64 or float32), lod level and the
    shape of one instance (the var's shape past the batch dimension)."""
    name: str
    dtype: str
    lod_level: int
    inner: tuple

    @property
    def width(self) -> int | None:
        """The count every line must have for a ``lod_level=0`` var (None: any count)."""
        if self.lod_level or -1 in self.inner:
            return None
        return math.prod(self.inner)


def slot_of(var) -> Slot:
    """The Slot of a data var, checked as Fluid's ``set_use_var`` does (and more: depth)."""
    dtype = np.dtype(var.dtype).name
    if dtype not in ("int64", "float32"):
        raise ConfigError(f"set_use_var: var {var.name!r} is {dtype}; the MultiSlot format carries only "
                          f"int64 ids and float32 values (as Fluid's dataset)")
    lod = int(getattr(var, "lod_level", 0) or 0)
    if lod > 1:
        raise ConfigError(f"set_use_var: var {var.name!r} has lod_level={lod}; a MultiSlot line gives each "
                          f"var one sequence per instance, so lod_level 0 or 1")
    shape = tuple(var.shape or ())
    inner = shape[1:] if shape and shape[0] in (-1, None) else shape
    return Slot(var.name, dtype, lod, tuple(inner) or (1,))


class Instances:
    """Instances of a list of slots: per slot, all values in one array and the offsets of
    each instance's values (``offsets[s][i]:offsets[s][i + 1]``)."""

    def __init__(self, values: list, offsets: list) -> None:
        self.values, self.offsets = values, offsets

    def __len__(self) -> int:
        return len(self.offsets[0]) - 1 if self.offsets else 0

    @staticmethod
    def concat(parts: list, slots: list) -> "Instances":
        """One Instances of ``parts`` in order (an empty one for no parts)."""
        parts = [p for p in parts if len(p)]
        if not parts:
            return Instances([np.zeros(0, s.dtype) for s in slots], [np.zeros(1, np.int64) for _ in slots])
        if len(parts) == 1:
            return parts[0]
        values, offsets = [], []
        for s in range(len(slots)):
            values.append(np.concatenate([p.values[s] for p in parts]))
            counts = np.concatenate([np.diff(p.offsets[s]) for p in parts])
            offsets.append(lengths_to_offsets(counts))
        return Instances(values, offsets)

    def take(self, idx: np.ndarray) -> "Instances":
        """The instances ``idx`` (an int array), in that order."""
        values, offsets = [], []
        for vals, off in zip(self.values, self.offsets):
            starts, counts = off[idx], off[idx + 1] - off[idx]
            new_off = lengths_to_offsets(counts)
            # each taken instance's values: its start, then one step per value
            pos = np.repeat(starts - new_off[:-1], counts) + np.arange(new_off[-1])
            values.append(vals[pos])
            offsets.append(new_off)
        return Instances(values, offsets)

    def feed(self, slots: list, idx: np.ndarray) -> dict:
        """The feed dict of the instances ``idx``: a LoDTensor per lod var, an array per other."""
        part = self.take(idx)
        feed = {}
        for slot, vals, off in zip(slots, part.values, part.offsets):
            shape = slot.inner if -1 not in slot.inner else (-1,)
            if slot.lod_level:
                feed[slot.name] = LoDTensor(vals.reshape((-1,) + shape), [off], check=False)
            else:
                feed[slot.name] = vals.reshape((len(idx),) + shape)
        return feed


def parse_text(text: str, slots: list, source: str) -> Instances:
    """Parse MultiSlot ``text`` (the lines of data file ``source``) into Instances.

    Raises:
        MultiSlotFormatError: naming ``source``, the line (1-based) and what is wrong.
    """
    lines = [ln for ln in text.splitlines()]
    tokens: list[list[str]] = [[] for _ in slots]
    counts: list[list[int]] = [[] for _ in slots]
    for lineno, line in enumerate(lines, 1):
        words = line.split()
        if not words:
            continue
        pos = 0
        for s, slot in enumerate(slots):
            n = _count(words, pos, slot, source, lineno)
            if pos + 1 + n > len(words):
                raise _bad(source, lineno, f"var {slot.name!r} has count {n} but only "
                                           f"{len(words) - pos - 1} values follow")
            tokens[s].extend(words[pos + 1:pos + 1 + n])
            counts[s].append(n)
            pos += 1 + n
        if pos != len(words):
            raise _bad(source, lineno, f"{len(words) - pos} values are left after the last var "
                                       f"{slots[-1].name!r} ({len(slots)} vars were set with set_use_var)")
    values, offsets = [], []
    for s, slot in enumerate(slots):
        try:
            values.append(_to_array(tokens[s], slot.dtype))
        except ValueError:
            _find_bad_value(lines, slots, s, source)
            raise
        offsets.append(lengths_to_offsets(counts[s]))
    return Instances(values, offsets)


def _to_array(tokens: list, dtype: str) -> np.ndarray:
    if dtype == "float32":
        return np.array(tokens, dtype=np.float64).astype(np.float32)
    try:
        return np.array(tokens, dtype=np.int64)
    except OverflowError:  # feasigns are uint64 in Fluid, kept as int64 of the same bits
        return np.array(tokens, dtype=np.uint64).view(np.int64)


def _count(words: list, pos: int, slot: Slot, source: str, lineno: int) -> int:
    if pos >= len(words):
        raise _bad(source, lineno, f"the line ends before var {slot.name!r} (a count, then the values)")
    try:
        n = int(words[pos])
    except ValueError:
        raise _bad(source, lineno, f"the count of var {slot.name!r} is {words[pos]!r}, not an integer") from None
    if n <= 0:
        raise _bad(source, lineno, f"var {slot.name!r} has count {n}; every var needs at least one value "
                                   f"(pad it in the data generator, as Fluid requires)")
    width = slot.width
    if width is not None and n != width:
        raise _bad(source, lineno, f"var {slot.name!r} is lod_level=0 with {width} values per instance "
                                   f"(shape {list(slot.inner)}), but the line gives {n}")
    return n


def _find_bad_value(lines: list, slots: list, s: int, source: str) -> None:
    """Walk the lines again to name the first value of slot ``s`` that is no number."""
    convert = float if slots[s].dtype == "float32" else int
    for lineno, line in enumerate(lines, 1):
        words, pos = line.split(), 0
        for k, slot in enumerate(slots):
            if not words:
                break
            n = int(words[pos])
            if k == s:
                for w in words[pos + 1:pos + 1 + n]:
                    try:
                        convert(w)
                    except ValueError:
                        raise _bad(source, lineno, f"var {slot.name!r} ({slot.dtype}) has value {w!r}, "
                                                   f"which is not {'a number' if convert is float else 'an integer id'}"
                                   ) from None
            pos += 1 + n


def _bad(source: str, lineno: int, why: str) -> MultiSlotFormatError:
    return MultiSlotFormatError(f"{source}, line {lineno}: {why} (MultiSlot format: per var, a count then "
                                f"that many values)")
