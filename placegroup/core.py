"""``fluid.core``: the part of Fluid's C++ core that placegroup has, its places and ``Scope``.

Fluid 1.x scripts reach these through ``fluid.core`` as well (``fluid.core.CPUPlace()``,
``fluid.core.is_compiled_with_cuda()``); here they are placegroup's own, with
``EOFException``, which ``exe.run`` raises at the end of a reader's data
(placegroup/io/data_loader.py), and ``LoDTensor`` (also ``Tensor``): the value type of
placegroup/values.py itself, so what ``fluid.create_lod_tensor`` makes, what ``DataFeeder``
feeds and what ``exe.run(..., return_numpy=False)`` returns are one class. The rest raise
``NotImplementedInPlacegroup`` (docs/fluid_compat.md).

Example::

    import placegroup as fluid
    place = fluid.core.CUDAPlace(0) if fluid.core.is_compiled_with_cuda() else fluid.core.CPUPlace()
    t = fluid.core.LoDTensor()
    t.set(np.arange(5, dtype="int64").reshape(5, 1), place)
    t.set_recursive_sequence_lengths([[2, 3]])   # two sequences: rows 0-1 and 2-4
    t.lod()                                      # [[0, 2, 5]]
"""
from __future__ import annotations

from placegroup.executor import Scope
from placegroup.ir.places import CPUPlace, CUDAPinnedPlace, CUDAPlace, is_compiled_with_cuda
from placegroup.reader_registry import EOFException
from placegroup.values import LoDTensor

__all__ = ["CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "EOFException", "LoDTensor", "Scope", "Tensor",
           "is_compiled_with_cuda"]


Tensor = LoDTensor
