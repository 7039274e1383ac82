"""``fluid.core``: the part of Fluid's C++ core that placegroup has, its places and ``Scope``.

Fluid 1.x scripts reach these through ``fluid.core`` as well (``fluid.core.CPUPlace()``,
``fluid.core.is_compiled_with_cuda()``); here they are placegroup's own, with
``EOFException``, which ``exe.run`` raises at the end of a reader's data
(placegroup/datafeed/data_loader.py), and ``LoDTensor`` (also ``Tensor``): the value type of
placegroup/values.py itself, so what ``fluid.create_lod_tensor`` makes, what ``DataFeeder``
feeds and what ``exe.run(..., return_numpy=False)`` returns are one class, and ``LoDTensorArray``, a list of
them. The rest raise ``NotImplementedInPlacegroup`` (docs/fluid_compat.md).

Example::

    import placegroup as fluid
    place = fluid.core.CUDAPlace(0) if fluid.core.is_compiled_with_cuda() else fluid.core.CPUPlace()
    t = fluid.core.LoDTensor()
    t.set(np.arange(5, dtype="int64").reshape(5, 1), place)
    t.set_recursive_sequence_lengths([[2, 3]])   # two sequences: rows 0-1 and 2-4
    t.lod()                                      # [[0, 2, 5]]
"""
from __future__ import annotations

import enum

from placegroup.executor import Scope
from placegroup.ir.places import CPUPlace, CUDAPinnedPlace, CUDAPlace, is_compiled_with_cuda
from placegroup.datafeed.reader_registry import EOFException
from placegroup.values import LoDTensor

__all__ = ["CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "EOFException", "LoDTensor", "LoDTensorArray", "Scope",
           "Tensor", "VarDesc", "is_compiled_with_cuda"]


Tensor = LoDTensor


class _VarType(str, enum.Enum):
    """Fluid's ``core.VarDesc.VarType``: the data types and the kinds of variable.

    Each member is the string placegroup itself uses (``VarType.FP32 == "float32"``,
    ``VarType.SELECTED_ROWS == "selected_rows"``), so a script may pass one wherever a dtype or
    var type goes (``fluid.layers.cast(x, fluid.core.VarDesc.VarType.FP32)``) and compare
    ``var.dtype == core.VarDesc.VarType.INT64``. ``int()`` of one is not Fluid's proto number.
    """
    __str__ = str.__str__
    __format__ = str.__format__

    BOOL = "bool"
    UINT8 = "uint8"
    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FP16 = "float16"
    FP32 = "float32"
    FP64 = "float64"
    LOD_TENSOR = "lod_tensor"
    SELECTED_ROWS = "selected_rows"
    FEED_MINIBATCH = "feed_minibatch"
    FETCH_LIST = "fetch_list"
    STEP_SCOPES = "step_scopes"
    LOD_RANK_TABLE = "lod_rank_table"
    LOD_TENSOR_ARRAY = "lod_tensor_array"
    PLACE_LIST = "place_list"
    READER = "reader"
    RAW = "raw"


class VarDesc:
    """What Fluid scripts use of ``core.VarDesc``: its ``VarType`` enum."""
    VarType = _VarType


class LoDTensorArray:
    """An array of ``LoDTensor``s, as Fluid's ``core.LoDTensorArray``: ``append``, ``len``,
    ``[i]`` (read and write) and iteration.

    What a fetch of a tensor-array var would give; placegroup's programs have no such vars, so
    ``exe.run(..., return_numpy=False)`` never returns one, and ``isinstance(out,
    fluid.core.LoDTensorArray)`` (which Fluid programs ask of each fetched value) is False for
    every fetched ``LoDTensor``. Like Fluid's, it is not a ``list``. Not thread-safe.

    Example::

        arr = fluid.core.LoDTensorArray()
        t = fluid.core.LoDTensor()
        t.set(np.ones([2, 3], "float32"), fluid.CPUPlace())
        arr.append(t)
        len(arr), arr[0].shape()          # 1, [2, 3]
    """

    def __init__(self) -> None:
        self._items: list = []

    @staticmethod
    def _checked(tensor) -> LoDTensor:
        if not isinstance(tensor, LoDTensor):
            raise TypeError(f"LoDTensorArray holds LoDTensors, got {type(tensor).__name__}; wrap an array a as "
                            f"t = fluid.LoDTensor(); t.set(a, fluid.CPUPlace())")
        return tensor

    def append(self, tensor) -> None:
        """Append ``tensor`` (a LoDTensor) to the end.

        Raises:
            TypeError: ``tensor`` is not a LoDTensor.
        """
        self._items.append(self._checked(tensor))

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i: int) -> LoDTensor:
        return self._items[i]

    def __setitem__(self, i: int, tensor) -> None:
        self._items[i] = self._checked(tensor)

    def __iter__(self):
        return iter(self._items)

    def _move_to_list(self) -> list:
        """The tensors as a list; the array is left empty (Fluid's name)."""
        items, self._items = self._items, []
        return items

    def __repr__(self) -> str:
        return f"LoDTensorArray({len(self._items)} tensors)"
