"""``fluid.transpiler.details.vars_distributed``: records of which part of which var lives on
which pserver, and searches over them.

A ``VarDistributed`` pairs an origin var with one of its slices (or the whole var) and where it
lives; ``VarsDistributed`` is a list of them with Fluid's lookups. They are plain records that
tools fill and read. The transpiler's own facts are typed attributes of the program:
``var.attrs["slice_of"]`` and ``var.place`` (docs/distributed.md).

Example::

    vd = VarsDistributed()
    vd.add_distributed_var(VarStruct("w", (10, 4), "float32", "lod_tensor", 0, True),
                           VarStruct("w.block0", (5, 4), "float32", "lod_tensor", 0, True),
                           block_id=0, offset=0, vtype="Param", endpoint="127.0.0.1:7164")
    vd.get_distributed_vars_by_ep("127.0.0.1:7164")[0].is_slice     # True

Thread-safety: none; fill a VarsDistributed in one thread.
"""
from __future__ import annotations

from typing import Any

from placegroup.ir.variable import Variable
from placegroup.transpiler.details.program_utils import type_repr

__all__ = ["VarDistributed", "VarStruct", "VarsDistributed"]


class VarStruct:
    """The properties of a var that a ``VarDistributed`` keeps."""

    def __init__(self, name: str, shape: Any, dtype: Any, type: Any, lod_level: int, persistable: bool) -> None:
        self.name = name
        self.shape = shape
        self.dtype = dtype
        self.type = type
        self.lod_level = lod_level
        self.persistable = persistable


def _struct(var: Any) -> Any:
    if isinstance(var, Variable):
        return VarStruct(var.name, var.shape, var.dtype, var.type, var.lod_level, var.persistable)
    return var


class VarDistributed:
    """One slice (or the whole) of an origin var, and where it lives.

    Args:
        origin_var, slice_var: ``Variable`` or ``VarStruct``.
        is_slice: whether it is a slice; None: it is unless the two vars are equal.
        block_id: which block of the origin var (default 0).
        offset: how many elements of the origin var come before it (default 0).
        vtype: a tag (``"Param"``, ``"Optimizer"``, ``"RemotePrefetch"``).
        endpoint: the pserver holding it, ``ip:port``.
    """

    def __init__(self, origin_var, slice_var, is_slice: bool | None = None, block_id: int | None = None,
                 offset: int | None = None, vtype: str | None = None, endpoint: str | None = None) -> None:
        self.origin = _struct(origin_var)
        self.slice = _struct(slice_var)
        self.is_slice = not self.equal(self.origin, self.slice) if is_slice is None else is_slice
        self.block_id = 0 if block_id is None else block_id
        self.offset = 0 if offset is None else offset
        self.vtype = vtype
        self.endpoint = endpoint

    @staticmethod
    def equal(var1: VarStruct, var2: VarStruct) -> bool:
        """Whether two VarStructs have the same name, type, shape, dtype, lod_level and persistability.

        Raises:
            TypeError: either is not a VarStruct.
        """
        for v in (var1, var2):
            if not isinstance(v, VarStruct):
                raise TypeError(f"VarDistributed.equal compares VarStructs, got {type(v).__name__}")
        return VarsDistributed.equal(var1, var2)

    def __str__(self) -> str:
        o, s = self.origin, self.slice
        origin = "{} : fluid.{}.shape{}.astype({})".format(o.name, type_repr(o.type), o.shape, type_repr(o.dtype))
        slice_ = ("{} : fluid.{}.shape{}.astype({}).slice({}).block({}).offset({})".format(
            s.name, type_repr(s.type), s.shape, type_repr(s.dtype), self.is_slice, self.block_id, self.offset))
        return "var owned: {}, origin var: ( {} ), slice var: ( {} ), endpoint: {} ".format(
            self.vtype, origin, slice_, self.endpoint)


class VarsDistributed:
    """The ``VarDistributed`` records of a job, with lookups by slice, origin and endpoint, tag."""

    def __init__(self) -> None:
        self.distributed_vars: list[VarDistributed] = []

    def add_distributed_var(self, origin_var, slice_var, is_slice: bool | None = None, block_id: int | None = None,
                            offset: int | None = None, vtype: str | None = None, endpoint: str | None = None) -> None:
        """Add a record (arguments as ``VarDistributed``'s)."""
        self.distributed_vars.append(VarDistributed(origin_var, slice_var, is_slice, block_id, offset, vtype,
                                                    endpoint))

    def get_distributed_var_by_slice(self, var_name: str) -> VarDistributed | None:
        """The record whose slice is named ``var_name``, or None."""
        return next((v for v in self.distributed_vars if v.slice.name == var_name), None)

    @staticmethod
    def equal(var1, var2) -> bool:
        """Whether two vars (or VarStructs) agree in name, type, shape, dtype, lod_level and persistability."""
        return all(getattr(var1, k) == getattr(var2, k)
                   for k in ("name", "type", "shape", "dtype", "lod_level", "persistable"))

    def get_distributed_var_by_origin_and_ep(self, origin_var_name: str, endpoint: str) -> VarDistributed | None:
        """The record of origin var ``origin_var_name`` on ``endpoint``, or None."""
        return next((v for v in self.distributed_vars
                     if v.origin.name == origin_var_name and v.endpoint == endpoint), None)

    def get_distributed_vars_by_vtypes(self, vtypes, groupby: bool = False):
        """The records whose tag is in ``vtypes``: a list, or with ``groupby`` a dict origin name -> list."""
        found = [v for v in self.distributed_vars if v.vtype in vtypes]
        if not groupby:
            return found
        grouped: dict[str, list] = {}
        for v in found:
            grouped.setdefault(v.origin.name, []).append(v)
        return grouped

    def get_distributed_vars_by_ep(self, endpoint: str, vtype: str | None = None) -> list:
        """The records on ``endpoint`` (with ``vtype``: only those with that tag)."""
        return [v for v in self.distributed_vars if v.endpoint == endpoint and (not vtype or v.vtype == vtype)]

    def overview(self) -> str:
        """Every record, one per line."""
        return "\n".join(str(v) for v in self.distributed_vars)
