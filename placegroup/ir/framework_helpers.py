"""Small helpers of Fluid 1.8's ``fluid.framework``: dtype conversion, gradient and control
var names, the name-scope tree and the current-device switch. ``placegroup.ir.framework``
re-exports them, where Fluid defines them.

A Variable's dtype here is a numpy dtype name (``"float32"``), so ``convert_np_dtype_to_dtype_``
gives that name where Fluid gives a ``core.VarDesc.VarType``: ``var.dtype ==
convert_np_dtype_to_dtype_(np.float32)`` and ``create_var(dtype=convert_np_dtype_to_dtype_(...))``
work as in Fluid.

Example::

    convert_np_dtype_to_dtype_(np.float64)   # 'float64'
    dtype_is_floating("int64")               # False
    grad_var_name("fc_0.w_0")                # 'fc_0.w_0@GRAD'

Thread-safety: the current device is process-wide, as in Fluid; set it from one thread.
"""
from __future__ import annotations

import random
from typing import Any

import numpy as np

from placegroup.ops.registry import GRAD_SUFFIX
from placegroup.util.wrapped_decorator import wrap_decorator

__all__ = ["NameScope", "convert_np_dtype_to_dtype_", "dtype_is_floating", "generate_control_dev_var_name",
           "grad_var_name", "switch_device", "wrap_decorator"]

CONTROL_DEP_VAR_PREFIX = "__control_var"  # Fluid's core.kControlDepVarName()
# NOTE(feed-fetch-targets): where Fluid prepends ``feed`` ops and appends ``fetch`` ops to an
# inference program, placegroup records their targets' names in ``Program.extra`` under these
# keys (placegroup/io/inference.py writes them, fluid.io.prepend_feed_ops and append_fetch_ops
# too; fluid.executor.has_feed_operators and has_fetch_operators read them). The executor feeds
# and fetches by name, so no op stands for them.
FEED_TARGETS, FETCH_TARGETS = "feed_target_names", "fetch_target_names"
_FLOATS = ("float16", "float32", "float64")
# numpy dtypes Fluid 1.8 has a VarType for, and the dtype each becomes (uint16 holds bfloat16's
# bits in Fluid, which gives it INT16)
_DTYPES = {"float32": "float32", "float64": "float64", "float16": "float16", "int32": "int32", "int16": "int16",
           "int64": "int64", "bool": "bool", "uint16": "int16", "uint8": "uint8", "int8": "int8"}


def convert_np_dtype_to_dtype_(np_dtype: Any) -> str:
    """The Variable dtype for a numpy dtype (``np.float32``, ``"float32"``, ``np.dtype("f4")``,
    ``float``): placegroup's dtype name, where Fluid gives the matching ``VarType``.

    Raises:
        ValueError: ``Not supported numpy dtype ...`` for a dtype Fluid has no VarType for
            (complex, strings, uint32, ...).
        TypeError: from ``np.dtype`` for what is no dtype at all.
    """
    dtype = np.dtype(np_dtype)
    try:
        return _DTYPES[dtype.name]
    except KeyError:
        raise ValueError(f"Not supported numpy dtype {dtype}") from None


def dtype_is_floating(dtype: Any) -> bool:
    """True for float16, float32 and float64 (a Variable's dtype or any numpy dtype form).

    Raises:
        ValueError: as ``convert_np_dtype_to_dtype_``.
    """
    return convert_np_dtype_to_dtype_(dtype) in _FLOATS


def grad_var_name(var_name: str) -> str:
    """The name of ``var_name``'s gradient: ``var_name + "@GRAD"``."""
    return var_name + GRAD_SUFFIX


def generate_control_dev_var_name() -> str:
    """A fresh name for a control-dependency var, ``__control_var@<random>``, as Fluid makes it."""
    return f"{CONTROL_DEP_VAR_PREFIX}@{random.random()}"


class NameScope:
    """A node of Fluid's name-scope tree: ``child(prefix)`` makes (or, for a prefix used before
    under this node, makes a numbered sibling ``prefix_1``, ``prefix_2``...) a child scope.

    Example::

        root = NameScope()
        a = root.child("s1"); b = root.child("s1")
        a.name(), b.name(), b.parent() is root     # 's1', 's1_1', True
    """

    def __init__(self, name: str = "", parent: "NameScope | None" = None) -> None:
        self._children: dict[str, list[NameScope]] = {}
        self._name = name
        self._parent = parent

    def child(self, prefix: str) -> "NameScope":
        siblings = self._children.setdefault(prefix, [])
        new = NameScope(prefix if not siblings else f"{prefix}_{len(siblings)}", self)
        siblings.append(new)
        return new

    def parent(self) -> "NameScope | None":
        return self._parent

    def name(self) -> str:
        return self._name


_current_device: str | None = None


def switch_device(device: str | None) -> str | None:
    """Make ``device`` (``"cpu"``, ``"gpu"``, ``None``) the current device of new ops and
    return the previous one, as Fluid's ``device_guard`` does with it.

    placegroup records it only: an executor runs every op of its program on its own place
    (``fluid.device_guard`` says so), so the current device places no op.
    """
    global _current_device
    previous, _current_device = _current_device, device
    return previous
