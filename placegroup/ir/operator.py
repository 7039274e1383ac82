"""Operators of the IR: one op type from the registry, its slots, attrs, role and place; the
checks of an op against its OpDef (``validate_op``) and its shape inference (``infer_op``)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from placegroup.errors import ProgramError
from placegroup.ir.place_group import PlaceGroup
from placegroup.ir.printer import format_op
from placegroup.ir.variable import RANK_TABLE, TENSOR_ARRAY, _place
from placegroup.ops.registry import EMPTY_VAR, get_op_def

class Operator:
    """One op: a type from the registry, slot -> var-name maps, attrs, a role and a place."""

    def __init__(self, block, type: str, inputs: Mapping[str, Sequence[str]],
                 outputs: Mapping[str, Sequence[str]], attrs: Mapping[str, Any] | None = None,
                 role: str | None = None, place: PlaceGroup | str | None = None) -> None:
        opdef = get_op_def(type)
        self.block = block
        self.type = type
        self.inputs = {k: list(v) for k, v in inputs.items()}
        self.outputs = {k: list(v) for k, v in outputs.items()}
        self.attrs = {**opdef.attrs, **(attrs or {})}
        self.role = role or opdef.role
        self.place = _place(place)
        # input slot -> how it reads a var held by several executors: "gather" (every
        # instance, in trainer-id order) or "each" (once per arriving instance): docs/ir.md, "Edges"
        self.edges: dict[str, str] = {}
        # the parameter whose update this optimize-role op belongs to (set by the optimizer
        # and the transpiler's passes; Fluid's op_role_var)
        self.param: str | None = None

    @property
    def opdef(self):
        return get_op_def(self.type)

    def input(self, slot: str) -> list[str]:
        return self.inputs.get(slot, [])

    def output(self, slot: str) -> list[str]:
        return self.outputs.get(slot, [])

    @property
    def input_arg_names(self) -> list[str]:
        return [n for names in self.inputs.values() for n in names if n != EMPTY_VAR]

    @property
    def output_arg_names(self) -> list[str]:
        return [n for names in self.outputs.values() for n in names if n != EMPTY_VAR]

    @property
    def idx(self) -> int:
        return self.block.ops.index(self)

    def attr(self, name: str) -> Any:
        return self.attrs[name]

    def _set_attr(self, name: str, value: Any) -> None:
        self.attrs[name] = value
        self.block.program._bump()

    def __repr__(self) -> str:
        return format_op(self)


def validate_op(opdef, inputs, outputs, attrs) -> None:
    for kind, given, slots in (("input", inputs, opdef.inputs), ("output", outputs, opdef.outputs)):
        known = {s.name: s for s in slots}
        for name in given:
            if name not in known:
                raise ProgramError(f"op {opdef.type!r} has no {kind} slot {name!r}; its {kind}s are "
                                   f"{sorted(known)}")
        for s in slots:
            names = given.get(s.name) or []
            if not names and not s.dispensable:
                raise ProgramError(f"op {opdef.type!r}: {kind} slot {s.name!r} is required")
            if len(names) > 1 and not s.duplicable:
                raise ProgramError(f"op {opdef.type!r}: {kind} slot {s.name!r} takes one var, got "
                                   f"{list(names)}")
    for name in attrs:
        if name not in opdef.attrs and not name.startswith("_"):
            raise ProgramError(f"op {opdef.type!r} has no attr {name!r}; its attrs are "
                               f"{sorted(opdef.attrs)}")


def _meta(var):
    """A var's meta for shape inference; a tensor array nothing has written yet, and a rank
    table, are shapeless."""
    if var.shape is None and var.type in (TENSOR_ARRAY, RANK_TABLE):
        return type(var.meta)((), var.dtype)
    return var.meta


def infer_op(op: Operator) -> dict:
    """Run ``op``'s infer on the metas of its input vars; errors name the op."""
    opdef = op.opdef
    ins: dict[str, Any] = {}
    for s in opdef.inputs:
        names = op.inputs.get(s.name, [])
        metas = [_meta(op.block.var(n)) for n in names]
        if any(m.shape is None for m in metas):
            raise ProgramError(f"op {op.type!r}: input {s.name!r} ({names}) has no shape yet")
        ins[s.name] = metas if s.duplicable else (metas[0] if metas else None)
    try:
        return opdef.infer(ins, op.attrs)
    except ProgramError as e:
        raise ProgramError(f"shape inference of op {op.type!r} "
                           f"(inputs {op.inputs}) failed: {e}") from None
