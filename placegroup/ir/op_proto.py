"""Fluid's view of an op type, its ``OpProto``, made from placegroup's OpDef (``fluid.framework``'s
``OpProtoHolder`` and ``get_all_op_protos``), and an op's ``OpDesc`` as protobuf text.

Fluid 1.8 code asks an op type's proto for its slots and attrs: ``layer_function_generator``
builds a layer function from it, ``templatedoc`` a docstring, ``fluid.op`` an op from keyword
arguments. Here each proto is read off the op registry (ops/registry.py): what an OpDef knows,
in the fields Fluid's proto has.

* ``inputs`` / ``outputs``: one ``VarProto`` per slot, in the OpDef's order, with ``duplicable``
  and ``dispensable`` from the slot;
* ``attrs``: one ``AttrProto`` per attr, its ``type`` named as Fluid's ``AttrType`` is (``INT``,
  ``FLOAT``, ``STRING``, ``BOOLEAN``, ``LONG``, ``INTS``, ``FLOATS``, ``STRINGS``, ``BOOLEANS``)
  from its default value (``ANY`` where the default is None, ``INTS`` for an empty list), plus
  that ``default``; an attr whose name starts with ``_`` (set by placegroup's passes) is
  ``generated``, as Fluid's op_role and op_callstack are;
* ``comment``: the kernel's docstring; each slot's and attr's comment says what it is.

NOTE(intermediate): Fluid marks the outputs a layer does not hand back (dropout's Mask,
batch_norm's SavedMean) ``intermediate``. An OpDef has no such flag; an output is taken as
intermediate when it never carries a gradient (``Slot.no_grad``) and is not an in-place update of
an input (batch_norm's MeanOut): dropout's Mask, layer_norm's Mean and Variance, lrn's MidOut,
gru's batch buffers. Outputs Fluid marks intermediate that do not fit that rule (reshape2's
XShape, smooth_l1_loss's Diff) are not intermediate here.

Example::

    proto = OpProtoHolder.instance().get_op_proto("scale")
    [i.name for i in proto.inputs], [a.name for a in proto.attrs]   # ['X'], ['scale', 'bias', ...]

Thread-safety: protos are immutable; ``OpProtoHolder.instance()`` is made once per process.
"""
from __future__ import annotations

import dataclasses
import difflib
import numbers
from typing import Any

import numpy as np

from placegroup.ops.registry import OpDef, get_op_def, registered_ops

__all__ = ["AttrProto", "OpProto", "OpProtoHolder", "VarProto", "attr_type", "get_all_op_protos", "op_desc_text"]

_INT32 = range(-2 ** 31, 2 ** 31)


@dataclasses.dataclass(frozen=True)
class VarProto:
    """One input or output slot, as Fluid's ``OpProto.Var``."""

    name: str
    comment: str
    duplicable: bool = False
    intermediate: bool = False
    dispensable: bool = False


@dataclasses.dataclass(frozen=True)
class AttrProto:
    """One attr, as Fluid's ``OpProto.Attr``, with its ``default``."""

    name: str
    type: str
    comment: str
    generated: bool = False
    default: Any = None


@dataclasses.dataclass(frozen=True)
class OpProto:
    """An op type's slots and attrs, as Fluid's ``OpProto``."""

    type: str
    comment: str
    inputs: tuple[VarProto, ...]
    outputs: tuple[VarProto, ...]
    attrs: tuple[AttrProto, ...]

    @classmethod
    def of(cls, opdef: OpDef) -> "OpProto":
        """The proto of ``opdef`` (module docstring; NOTE(intermediate))."""
        def var(slot, kind: str, intermediate: bool = False) -> VarProto:
            many = " (one or more Variables)" if slot.duplicable else ""
            optional = ", optional" if slot.dispensable else ""
            return VarProto(slot.name, f"The {kind} {slot.name} of {opdef.type}{many}{optional}.",
                            slot.duplicable, intermediate, slot.dispensable)

        ins = tuple(var(s, "input") for s in opdef.inputs)
        outs = tuple(var(s, "output", s.no_grad and s.name not in opdef.inplace) for s in opdef.outputs)
        attrs = tuple(AttrProto(name, attr_type(v), f"The attribute {name} of {opdef.type} (default {v!r}).",
                                name.startswith("_"), v) for name, v in opdef.attrs.items())
        return cls(opdef.type, opdef.doc.strip(), ins, outs, attrs)


def attr_type(value: Any) -> str:
    """Fluid's ``AttrType`` name for an attr value: ``INT``, ``LONG``, ``FLOAT``, ``STRING``,
    ``BOOLEAN``, their list forms (``INTS`` ...; an empty list is ``INTS``), or ``ANY`` (None)."""
    if isinstance(value, (list, tuple)):
        kinds = {attr_type(v) for v in value} or {"INT"}
        for group, name in (({"INT"}, "INTS"), ({"INT", "LONG"}, "LONGS"), ({"INT", "LONG", "FLOAT"}, "FLOATS"),
                            ({"BOOLEAN"}, "BOOLEANS"), ({"STRING"}, "STRINGS")):
            if kinds <= group:
                return name
        return "ANY"
    if isinstance(value, (bool, np.bool_)):
        return "BOOLEAN"
    if isinstance(value, numbers.Integral):
        return "INT" if int(value) in _INT32 else "LONG"
    if isinstance(value, numbers.Real):
        return "FLOAT"
    if isinstance(value, str):
        return "STRING"
    return "ANY"


def get_all_op_protos() -> list[OpProto]:
    """The proto of every registered op type, sorted by type."""
    return [OpProto.of(get_op_def(t)) for t in registered_ops()]


class OpProtoHolder:
    """The protos of all op types by type (Fluid's singleton; get it with ``instance()``).

    Raises:
        RuntimeError: constructing a second holder (use ``instance()``).
    """

    @classmethod
    def instance(cls) -> "OpProtoHolder":
        if "_instance" not in cls.__dict__:
            cls._instance = cls()
        return cls._instance

    def __init__(self) -> None:
        if "_instance" in type(self).__dict__:
            raise RuntimeError("Please use `instance()` to get OpProtoHolder object!")
        self.op_proto_map: dict[str, OpProto] = {p.type: p for p in get_all_op_protos()}

    def has_op_proto(self, type: str) -> bool:
        """Whether op type ``type`` is registered."""
        return type in self.op_proto_map or type in registered_ops()

    def get_op_proto(self, type: str) -> OpProto:
        """The proto of op type ``type`` (one registered after the holder was made included).

        Raises:
            ValueError: ``Operator "x" has not been registered.``, with the closest types.
        """
        if type not in self.op_proto_map:
            if type not in registered_ops():
                near = difflib.get_close_matches(type, list(self.op_proto_map), n=3)
                hint = f" Did you mean {', '.join(near)}?" if near else ""
                raise ValueError(f'Operator "{type}" has not been registered.{hint}')
            self.op_proto_map[type] = OpProto.of(get_op_def(type))
        return self.op_proto_map[type]

    def update_op_proto(self) -> None:
        """Add the protos of op types registered since the holder was made."""
        for t in registered_ops():
            if t not in self.op_proto_map:
                self.op_proto_map[t] = OpProto.of(get_op_def(t))

    @staticmethod
    def generated_op_attr_names() -> set[str]:
        """The attrs Fluid adds to every op itself (its role, name scope, call stack, device);
        placegroup's ops carry none of them, so they never show in an op's attrs here."""
        return {"op_role", "op_role_var", "op_namescope", "op_callstack", "op_device"}


# -- an op as protobuf text (Fluid's str(OpDesc proto)) ------------------------------------------

_FIELD = {"INT": "i", "LONG": "l", "FLOAT": "f", "STRING": "s", "BOOLEAN": "b", "INTS": "ints",
          "LONGS": "longs", "FLOATS": "floats", "STRINGS": "strings", "BOOLEANS": "bools"}


def _text(v: Any) -> str:
    if isinstance(v, (bool, np.bool_)):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'
    if not isinstance(v, numbers.Integral):
        return str(np.float32(v))  # a proto's float is 32-bit; its text is the shortest form
    return str(int(v))


def op_desc_text(op: Any) -> str:
    """``op`` (an Operator, or anything with ``type``, ``inputs``, ``outputs`` and ``attrs``)
    as Fluid prints an ``OpDesc`` proto: every slot of the op type in name order (an unused one
    with no arguments), the type, then each attr with its type and value, in name order.

    Raises:
        ValueError: ``op``'s type is not registered.
    """
    proto = OpProtoHolder.instance().get_op_proto(op.type)
    lines = []
    for kind, slots, given in (("inputs", proto.inputs, op.inputs), ("outputs", proto.outputs, op.outputs)):
        for slot in sorted(s.name for s in slots):
            lines += [f"{kind} {{", f'  parameter: "{slot}"']
            lines += [f"  arguments: {_text(n)}" for n in given.get(slot, ())]
            lines.append("}")
    lines.append(f'type: "{op.type}"')
    defaults = {a.name: a.default for a in proto.attrs}
    for name, value in sorted({**defaults, **dict(op.attrs)}.items()):
        kind = attr_type(value) if value is not None or name not in defaults else attr_type(defaults[name])
        if kind == "ANY":
            continue  # unset (a None default): Fluid's desc has no such attr either
        lines += ["attrs {", f'  name: "{name}"', f"  type: {kind}"]
        values = list(value) if isinstance(value, (list, tuple)) else [value]
        lines += [f"  {_FIELD[kind]}: {_text(v)}" for v in values]
        lines.append("}")
    return "\n".join(lines) + "\n"
