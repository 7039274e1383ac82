"""``fluid.core``: the part of Fluid's C++ core that placegroup has, its places and ``Scope``.

Fluid 1.x scripts reach these through ``fluid.core`` as well (``fluid.core.CPUPlace()``,
``fluid.core.is_compiled_with_cuda()``); here they are placegroup's own, with
``EOFException``, which ``exe.run`` raises at the end of a reader's data
(placegroup/io/data_loader.py). ``LoDTensor`` and the rest raise ``NotImplementedInPlacegroup``
(docs/fluid_compat.md).

Example::

    import placegroup as fluid
    place = fluid.core.CUDAPlace(0) if fluid.core.is_compiled_with_cuda() else fluid.core.CPUPlace()
"""
from placegroup.executor import Scope
from placegroup.ir.places import CPUPlace, CUDAPinnedPlace, CUDAPlace, is_compiled_with_cuda
from placegroup.reader_registry import EOFException

__all__ = ["CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "EOFException", "Scope", "is_compiled_with_cuda"]
