"""``fluid.core``: the part of Fluid's C++ core that placegroup has, its places and ``Scope``.

Fluid 1.x scripts reach these through ``fluid.core`` as well (``fluid.core.CPUPlace()``,
``fluid.core.is_compiled_with_cuda()``); here they are placegroup's own, with
``EOFException``, which ``exe.run`` raises at the end of a reader's data
(placegroup/io/data_loader.py), and ``LoDTensor``, for now a dense tensor: a value to ``set``
and to feed, with an empty LoD (variable-length data comes with LoD support). The rest raise
``NotImplementedInPlacegroup`` (docs/fluid_compat.md).

Example::

    import placegroup as fluid
    place = fluid.core.CUDAPlace(0) if fluid.core.is_compiled_with_cuda() else fluid.core.CPUPlace()
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import NotImplementedInPlacegroup
from placegroup.executor import Scope
from placegroup.executor.scope import to_numpy
from placegroup.ir.places import CPUPlace, CUDAPinnedPlace, CUDAPlace, is_compiled_with_cuda
from placegroup.reader_registry import EOFException

__all__ = ["CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "EOFException", "LoDTensor", "Scope", "Tensor",
           "is_compiled_with_cuda"]


class LoDTensor:
    """A tensor built in Python: ``t = LoDTensor(); t.set(array, place)``; feed it
    (``exe.run(feed={"x": t})``) or read it with ``numpy.array(t)``. Its LoD is empty: setting
    sequence lengths raises ``NotImplementedInPlacegroup`` until variable-length data exists.

    Example::

        t = fluid.core.LoDTensor()
        t.set(np.ones((2, 3), "float32"), fluid.CPUPlace())
        t.shape()   # [2, 3]
    """

    def __init__(self) -> None:
        self._value = None

    def set(self, array, place=None) -> None:
        """Hold ``array`` (copied to ``place``'s device; the host when None)."""
        arr = array if hasattr(array, "__cuda_array_interface__") else np.array(array)
        if place is not None and getattr(place, "device", "cpu") == "gpu":
            arr = place.array_module().asarray(arr)
        self._value = arr

    def _held(self):
        if self._value is None:
            raise ValueError("this LoDTensor holds no value yet: call set(array, place) first")
        return self._value

    def shape(self) -> list:
        return list(self._held().shape)

    def _dtype(self):
        return self._held().dtype

    def __array__(self, dtype=None, copy=None):
        a = to_numpy(self._held())
        return a.astype(dtype) if dtype is not None else a

    def lod(self) -> list:
        return []

    def recursive_sequence_lengths(self) -> list:
        return []

    def has_valid_recursive_sequence_lengths(self) -> bool:
        return True

    def set_lod(self, lod) -> None:
        self._no_lod(lod)

    def set_recursive_sequence_lengths(self, lengths) -> None:
        self._no_lod(lengths)

    @staticmethod
    def _no_lod(lod) -> None:
        if lod:
            raise NotImplementedInPlacegroup("placegroup does not implement LoD (variable-length sequences) "
                                             "yet: LoDTensor holds dense data only")

    def __repr__(self) -> str:
        return f"LoDTensor({self._value!r})"


Tensor = LoDTensor
