"""Variables of the IR: a named value in a block, dense (``lod_tensor``) or ``selected_rows``.

Python operators on a Variable (``x * 2``, ``a + b``) are not defined here: the layers API
installs them (placegroup/layers/math_op_patch.py), since they append layer ops.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ir.place_group import PlaceGroup
from placegroup.ops.registry import Meta

LOD_TENSOR = "lod_tensor"
SELECTED_ROWS = "selected_rows"
TENSOR_ARRAY = "lod_tensor_array"
RANK_TABLE = "lod_rank_table"
DYNAMIC_TABLE = "dynamic_table"  # a table keyed by raw ids (sparse_embedding): a DynamicTable


def normalize_dtype(dtype: Any) -> str:
    """``"float32"``, ``np.float32``, ``np.dtype("f4")`` -> ``"float32"``."""
    try:
        return np.dtype(dtype).name
    except TypeError as e:
        raise ProgramError(f"unknown dtype {dtype!r}") from e


def _place(place: PlaceGroup | str | None) -> PlaceGroup | None:
    if place is None or isinstance(place, PlaceGroup):
        return place
    return PlaceGroup.parse(place)


class Variable:
    """A named value in a block: a dense tensor or SelectedRows, with static shape and dtype.

    ``persistable`` vars live across steps in the scope (parameters, optimizer state, counters);
    the others are recomputed each step. ``attrs`` holds typed facts that passes set and read
    (e.g. ``slice_of``); names are for people only: no code parses them.
    """

    def __init__(self, block, name: str, shape: Sequence[int] | None = None,
                 dtype: Any = "float32", persistable: bool = False, stop_gradient: bool = False,
                 type: str = LOD_TENSOR, is_data: bool = False, place: PlaceGroup | str | None = None,
                 attrs: Mapping[str, Any] | None = None, lod_level: int = 0) -> None:
        self.block = block
        self.name = name
        self.shape = None if shape is None else tuple(int(d) for d in shape)
        self.dtype = normalize_dtype(dtype)
        self.persistable = persistable
        self.stop_gradient = stop_gradient
        self.type = type
        self.is_data = is_data
        self.place = _place(place)
        self.attrs = dict(attrs or {})
        self.lod_level = lod_level

    is_parameter = False

    @property
    def meta(self) -> Meta:
        return Meta(self.shape, self.dtype)

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape)) if self.shape else 1

    def __repr__(self) -> str:
        return f"Variable({self.name}: {self.dtype}{list(self.shape or [])})"


class Parameter(Variable):
    """A trainable, persistable var. ``trainable=False`` keeps it out of the optimizer."""

    is_parameter = True

    def __init__(self, block, name: str, shape: Sequence[int], dtype: Any = "float32",
                 trainable: bool = True, optimize_attr: Mapping[str, Any] | None = None,
                 regularizer: Any = None, **kw: Any) -> None:
        kw.setdefault("persistable", True)
        super().__init__(block, name, shape, dtype, **kw)
        self.trainable = trainable
        self.stop_gradient = not trainable
        self.optimize_attr = dict(optimize_attr or {"learning_rate": 1.0})
        self.regularizer = regularizer
