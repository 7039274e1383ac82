"""The Program IR: Program -> Block -> Variable / Operator, in Fluid's shape.

Every op and var may carry a ``PlaceGroup`` (``place``) saying which executors run or hold
it (DESIGN.md §3). ``str(program)`` prints the stable text form described in ``docs/ir.md``;
``program.verify()`` checks def-before-use, one writer per value, shapes against each op's
``infer`` and the PlaceGroups.

Example::

    import placegroup as fluid
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[13])
        y = fluid.layers.fc(input=x, size=1)
    print(main)

Thread-safety: building a program is single-threaded (like Fluid's); a finished program is
read-only to the executor and may be shared by threads.
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ops.registry import EMPTY_VAR, Meta, get_op_def
from placegroup.place_group import PlaceGroup

LOD_TENSOR = "lod_tensor"
SELECTED_ROWS = "selected_rows"


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
    (e.g. ``slice_of``); names are for people only (STYLE.md rule 6).
    """

    def __init__(self, block: "Block", name: str, shape: Sequence[int] | None = None,
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

    # Fluid's layers accept Python operators on vars (x * 2, a + b); they append ops.
    def _binary(self, other, op_type: str, reverse: bool = False):
        from placegroup.layers import math_op_patch

        return math_op_patch.binary(self, other, op_type, reverse)

    def __add__(self, o): return self._binary(o, "elementwise_add")
    def __radd__(self, o): return self._binary(o, "elementwise_add", True)
    def __sub__(self, o): return self._binary(o, "elementwise_sub")
    def __rsub__(self, o): return self._binary(o, "elementwise_sub", True)
    def __mul__(self, o): return self._binary(o, "elementwise_mul")
    def __rmul__(self, o): return self._binary(o, "elementwise_mul", True)
    def __truediv__(self, o): return self._binary(o, "elementwise_div")
    def __rtruediv__(self, o): return self._binary(o, "elementwise_div", True)


class Parameter(Variable):
    """A trainable, persistable var. ``trainable=False`` keeps it out of the optimizer."""

    is_parameter = True

    def __init__(self, block: "Block", name: str, shape: Sequence[int], dtype: Any = "float32",
                 trainable: bool = True, optimize_attr: Mapping[str, Any] | None = None,
                 regularizer: Any = None, **kw: Any) -> None:
        kw.setdefault("persistable", True)
        super().__init__(block, name, shape, dtype, **kw)
        self.trainable = trainable
        self.stop_gradient = not trainable
        self.optimize_attr = dict(optimize_attr or {"learning_rate": 1.0})
        self.regularizer = regularizer


class Operator:
    """One op: a type from the registry, slot -> var-name maps, attrs, a role and a place."""

    def __init__(self, block: "Block", type: str, inputs: Mapping[str, Sequence[str]],
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
        # instance, in trainer-id order) or "each" (once per arriving instance); DESIGN.md §4
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
        from placegroup.printer import format_op

        return format_op(self)


def _validate_op(opdef, inputs, outputs, attrs) -> None:
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


def _names(v: Any) -> list[str]:
    """Slot argument -> list of var names (accepts Variables, names, or lists of either)."""
    if v is None:
        return []
    if isinstance(v, (list, tuple)):
        return [x.name if isinstance(x, Variable) else str(x) for x in v]
    return [v.name if isinstance(v, Variable) else str(v)]


class Block:
    """An ordered list of ops over a table of vars."""

    def __init__(self, program: "Program", idx: int, parent_idx: int = -1) -> None:
        self.program = program
        self.idx = idx
        self.parent_idx = parent_idx
        self.vars: dict[str, Variable] = {}
        self.ops: list[Operator] = []

    # -- vars -------------------------------------------------------------------------------
    def create_var(self, name: str | None = None, **kw: Any) -> Variable:
        """Create (or return the existing) var ``name``; a fresh ``tmp`` name when None."""
        from placegroup import unique_name

        name = name or unique_name.generate("_generated_var")
        if name in self.vars:
            return self.vars[name]
        var = Variable(self, name, **kw)
        self.vars[name] = var
        self.program._bump()
        return var

    def create_parameter(self, name: str, shape: Sequence[int], dtype: Any = "float32",
                         **kw: Any) -> Parameter:
        if name in self.vars:
            raise ProgramError(f"parameter {name!r} already exists in block {self.idx}")
        p = Parameter(self, name, shape, dtype, **kw)
        self.vars[name] = p
        self.program._bump()
        return p

    def var(self, name: str) -> Variable:
        """The var ``name`` in this block or an ancestor.

        Raises:
            ProgramError: naming the var and the block.
        """
        b: Block | None = self
        while b is not None:
            if name in b.vars:
                return b.vars[name]
            b = self.program.blocks[b.parent_idx] if b.parent_idx >= 0 else None
        raise ProgramError(f"var {name!r} is not in block {self.idx} or its parents")

    def has_var(self, name: str) -> bool:
        try:
            self.var(name)
            return True
        except ProgramError:
            return False

    def all_parameters(self) -> list[Parameter]:
        return [v for v in self.vars.values() if v.is_parameter]

    def remove_var(self, name: str) -> None:
        self.vars.pop(name, None)
        self.program._bump()

    # -- ops --------------------------------------------------------------------------------
    def _make_op(self, type: str, inputs: Mapping[str, Any] | None, outputs: Mapping[str, Any] | None,
                 attrs: Mapping[str, Any] | None, role: str | None, place: Any, infer: bool) -> Operator:
        opdef = get_op_def(type)
        ins = {k: _names(v) for k, v in (inputs or {}).items() if _names(v)}
        outs = {k: _names(v) for k, v in (outputs or {}).items() if _names(v)}
        attrs = dict(attrs or {})
        _validate_op(opdef, ins, outs, attrs)
        op = Operator(self, type, ins, outs, attrs, role, place)
        if infer:
            self._infer_outputs(op)
        return op

    def append_op(self, type: str, inputs: Mapping[str, Any] | None = None,
                  outputs: Mapping[str, Any] | None = None, attrs: Mapping[str, Any] | None = None,
                  role: str | None = None, place: Any = None, infer: bool = True) -> Operator:
        """Append an op, validated against its OpDef; output vars without a shape get the
        shape and dtype its ``infer`` gives.

        Raises:
            ProgramError: unknown type, slot or attr, a missing required slot, or a shape error.
        """
        op = self._make_op(type, inputs, outputs, attrs, role, place, infer)
        self.ops.append(op)
        self.program._bump()
        return op

    def insert_op(self, index: int, type: str, inputs=None, outputs=None, attrs=None,
                  role: str | None = None, place: Any = None, infer: bool = True) -> Operator:
        op = self._make_op(type, inputs, outputs, attrs, role, place, infer)
        self.ops.insert(index, op)
        self.program._bump()
        return op

    def prepend_op(self, *a: Any, **kw: Any) -> Operator:
        return self.insert_op(0, *a, **kw)

    def remove_op(self, index: int) -> None:
        del self.ops[index]
        self.program._bump()

    def _infer_outputs(self, op: Operator) -> None:
        opdef = op.opdef
        if opdef.infer is None:
            return
        metas = infer_op(op)
        for slot, names in op.outputs.items():
            got = metas.get(slot)
            if got is None:
                continue
            got_list = got if isinstance(got, list) else [got]
            if len(got_list) != len(names):
                raise ProgramError(f"op {op.type!r}: output slot {slot!r} names {len(names)} vars "
                                   f"({names}) but the op makes {len(got_list)}")
            for name, meta in zip(names, got_list):
                if name == EMPTY_VAR:
                    continue
                var = self.var(name) if self.has_var(name) else self.create_var(name)
                if var.shape is None:
                    var.shape = tuple(meta.shape)
                    var.dtype = normalize_dtype(meta.dtype)


def infer_op(op: Operator) -> dict:
    """Run ``op``'s infer on the metas of its input vars; errors name the op."""
    opdef = op.opdef
    ins: dict[str, Any] = {}
    for s in opdef.inputs:
        names = op.inputs.get(s.name, [])
        metas = [op.block.var(n).meta for n in names]
        if any(m.shape is None for m in metas):
            raise ProgramError(f"op {op.type!r}: input {s.name!r} ({names}) has no shape yet")
        ins[s.name] = metas if s.duplicable else (metas[0] if metas else None)
    try:
        return opdef.infer(ins, op.attrs)
    except ProgramError as e:
        raise ProgramError(f"shape inference of op {op.type!r} "
                           f"(inputs {op.inputs}) failed: {e}") from None


class Program:
    """A list of blocks; block 0 is global. What every executor runs.

    Attributes:
        random_seed: the seed initializers use (0 means "pick one", as in Fluid; placegroup
            then uses a fixed default so every process agrees).
        executor: the ``ExecutorId`` this program was made for by ``get_program`` (or None).
        provenance: the passes that made this program, in order.
    """

    def __init__(self) -> None:
        self.blocks: list[Block] = [Block(self, 0)]
        self.current_block_idx = 0
        self.random_seed = 0
        self.executor = None
        # set by the transpiler: {"trainers": N, "trainer_endpoints": [...], "pservers": [...],
        # "sync_mode": bool, "staleness": k} (serialize.ClusterSchema)
        self.cluster: dict | None = None
        self.provenance: list[str] = []
        self._version = 0

    def _bump(self) -> None:
        self._version += 1

    def global_block(self) -> Block:
        return self.blocks[0]

    def block(self, idx: int) -> Block:
        return self.blocks[idx]

    def current_block(self) -> Block:
        return self.blocks[self.current_block_idx]

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def list_vars(self) -> Iterable[Variable]:
        for b in self.blocks:
            yield from b.vars.values()

    def all_parameters(self) -> list[Parameter]:
        return self.global_block().all_parameters()

    # -- copies and text ---------------------------------------------------------------------
    def clone(self, for_test: bool = False) -> "Program":
        """A deep copy. With ``for_test=True`` only forward ops are kept (no backward,
        optimizer or lr-schedule ops) and ops with an ``is_test`` attr get it set."""
        from placegroup.serialize import program_from_dict, program_to_dict

        p = program_from_dict(program_to_dict(self))
        if for_test:
            for b in p.blocks:
                b.ops = [op for op in b.ops if op.role in ("forward", "init")]
                for op in b.ops:
                    if "is_test" in op.attrs:
                        op.attrs["is_test"] = True
            p._bump()
        return p

    def to_bytes(self) -> bytes:
        """This program as prog.bin bytes (msgpack, schema-versioned, checksummed)."""
        from placegroup.serialize import program_to_bytes

        return program_to_bytes(self)

    @staticmethod
    def from_bytes(data: bytes) -> "Program":
        """Parse prog.bin bytes. Raises SerializationError naming what is wrong."""
        from placegroup.serialize import program_from_bytes

        return program_from_bytes(data)

    def verify(self) -> None:
        """Check def-before-use, single writers, shapes and placements.

        Raises:
            ProgramError: showing the ops around the bad one.
        """
        from placegroup.verify import verify_program

        verify_program(self)

    def __str__(self) -> str:
        from placegroup.printer import format_program

        return format_program(self)

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        return str(self)


# -- default programs and program_guard (Fluid's global state) ------------------------------

_main_program = Program()
_startup_program = Program()


def default_main_program() -> Program:
    """The program layers append to outside any ``program_guard``."""
    return _main_program


def default_startup_program() -> Program:
    """The program initializers append to outside any ``program_guard``."""
    return _startup_program


def switch_main_program(program: Program) -> Program:
    global _main_program
    old, _main_program = _main_program, program
    return old


def switch_startup_program(program: Program) -> Program:
    global _startup_program
    old, _startup_program = _startup_program, program
    return old


@contextlib.contextmanager
def program_guard(main_program: Program, startup_program: Program | None = None):
    """Inside the block, layers append to ``main_program`` and initializers to
    ``startup_program`` (when given)."""
    if not isinstance(main_program, Program):
        raise TypeError(f"program_guard: main_program must be a Program, got {type(main_program)}")
    old_main = switch_main_program(main_program)
    old_startup = switch_startup_program(startup_program) if startup_program is not None else None
    try:
        yield
    finally:
        switch_main_program(old_main)
        if old_startup is not None:
            switch_startup_program(old_startup)
