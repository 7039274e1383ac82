"""The Program IR: Program -> Block -> Variable / Operator, in Fluid's shape.

Every op and var may carry a ``PlaceGroup`` (``place``) saying which executors run or hold
it. ``str(program)`` prints the stable text form described in ``docs/ir.md``;
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

from placegroup.errors import ProgramError, SerializationError
from placegroup.ir import serialize, unique_name
from placegroup.ir.cluster import ClusterSchema
from placegroup.ir.framework_helpers import (NameScope, convert_np_dtype_to_dtype_, dtype_is_floating,
                                             generate_control_dev_var_name, grad_var_name, switch_device,
                                             wrap_decorator)
from placegroup.ir.op_proto import OpProtoHolder, get_all_op_protos
from placegroup.ir.operator import Operator, infer_op, validate_op
from placegroup.ir.place_group import ExecutorId
from placegroup.ir.printer import format_program
from placegroup.ir.variable import LOD_TENSOR, SELECTED_ROWS, TENSOR_ARRAY, Parameter, Variable, normalize_dtype
from placegroup.ir.verify import verify_program
from placegroup.ops.registry import EMPTY_VAR, ROLES, get_op_def

__all__ = ["Block", "Operator", "Parameter", "Program", "Variable", "LOD_TENSOR", "SELECTED_ROWS", "TENSOR_ARRAY",
           "default_main_program", "default_startup_program", "infer_lod", "infer_op", "normalize_dtype",
           "note_transpiled_job", "program_guard", "switch_main_program", "switch_startup_program",
           "transpiled_job"]
# Fluid 1.8's helpers of fluid.framework (placegroup/ir/framework_helpers.py, op_proto.py)
__all__ += ["NameScope", "OpProtoHolder", "convert_np_dtype_to_dtype_", "dtype_is_floating",
            "generate_control_dev_var_name", "get_all_op_protos", "grad_var_name", "switch_device", "wrap_decorator"]


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
        validate_op(opdef, ins, outs, attrs)
        guard = self.program._role_guard
        op = Operator(self, type, ins, outs, attrs, guard if guard and role in (None, "forward") else role, place)
        if infer:
            self._infer_outputs(op)
        for name, (level, _) in infer_lod(op).items():  # NOTE(lod-rule) in ops/registry.py
            if self.has_var(name) and not self.var(name).is_data:
                self.var(name).lod_level = level
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


def infer_lod(op: Operator, levels: Mapping[str, int] | None = None) -> dict[str, tuple[int, str | None]]:
    """The LoD rule of ``op`` (NOTE(lod-rule) in ops/registry.py): output var -> (its
    lod_level, the input var whose LoD it shares at run time, or None).

    ``levels`` (var -> lod_level) stands in for the vars' declared ``lod_level`` where it names
    them: the executor's walk over a whole program (NOTE(lod-run) in executor/plan.py).
    """
    block = op.block

    def level(name: str) -> int:
        if levels is not None and name in levels:
            return levels[name]
        return block.var(name).lod_level if block.has_var(name) else 0

    opdef = op.opdef
    if opdef.sub_block:  # its block's ops say what the vars it writes hold (NOTE(sub-blocks))
        return {}
    rule = opdef.lod
    outs = [(s.name, n) for s in opdef.outputs for n in op.outputs.get(s.name, ()) if n != EMPTY_VAR]
    if rule == "drop":
        return {n: (0, None) for _, n in outs}
    if callable(rule):
        got = rule({s.name: [level(n) for n in op.inputs.get(s.name, ())] for s in opdef.inputs}, op.attrs)
        return {n: (int(got.get(slot, 0)), None) for slot, n in outs}
    sources = [(n, lv) for s in opdef.inputs for n in op.inputs.get(s.name, ()) if (lv := level(n)) > 0]
    result: dict[str, tuple[int, str | None]] = {}
    for _, n in outs:
        result[n] = (0, None)
        v = block.var(n) if sources and block.has_var(n) else None
        if v is None or v.type == SELECTED_ROWS or not v.shape:
            continue
        for src, lv in sources:  # the first sequence input whose rows the output keeps
            shape = block.var(src).shape if block.has_var(src) else None
            if shape and shape[0] == v.shape[0]:
                result[n] = (lv, src)
                break
    return result


class Program:
    """A list of blocks; block 0 is global. What every executor runs.

    Attributes:
        random_seed: the seed initializers use (0 means "pick one", as in Fluid; placegroup
            then uses a fixed default so every process agrees).
        executor: the ``ExecutorId`` this program was made for by ``get_program`` (or None).
        cluster: who takes part and how (``ClusterSchema``), set by the transpiler; None
            for a program one process runs alone.
        provenance: the passes that made this program, in order.
        extra: facts that need no schema version (prog.bin's ``extra``), e.g. an inference
            model's ``feed_target_names`` and ``fetch_target_names`` (placegroup/io/inference.py).
    """

    def __init__(self) -> None:
        self.blocks: list[Block] = [Block(self, 0)]
        self.current_block_idx = 0
        self.random_seed = 0
        self.executor = None
        # who takes part, and how: set by the transpiler (``placegroup.ir.cluster.ClusterSchema``)
        self.cluster: ClusterSchema | None = None
        self.provenance: list[str] = []
        self.extra: dict[str, Any] = {}
        self._version = 0
        self._role_guard: str | None = None  # the role of ops appended under _lr_schedule_guard

    def _bump(self) -> None:
        self._version += 1

    def global_block(self) -> Block:
        return self.blocks[0]

    def block(self, idx: int) -> Block:
        return self.blocks[idx]

    def current_block(self) -> Block:
        return self.blocks[self.current_block_idx]

    def _create_block(self, parent_idx: int | None = None) -> Block:
        """A new block whose parent is ``parent_idx`` (the current block when None); it becomes
        the current block, where layers append, until ``_rollback`` (Fluid's, for control flow)."""
        parent = self.current_block() if parent_idx is None else self.block(parent_idx)
        self.blocks.append(Block(self, len(self.blocks), parent.idx))
        self.current_block_idx = len(self.blocks) - 1
        self._bump()
        return self.current_block()

    @contextlib.contextmanager
    def _lr_schedule_guard(self, is_with_opt: bool = False):
        """Ops appended meanwhile (in any block) that name no role but the forward one are
        learning-rate schedule ops (role ``lr_sched``), as under Fluid's guard of that name: a
        schedule written by hand (a ``Switch`` over the step counter) runs where the
        transpiler runs schedules, with the optimizers on the pservers."""
        saved, self._role_guard = self._role_guard, "lr_sched"
        try:
            yield
        finally:
            self._role_guard = saved

    def _rollback(self) -> None:
        """Make the current block's parent current again."""
        self.current_block_idx = self.current_block().parent_idx

    @property
    def num_blocks(self) -> int:
        return len(self.blocks)

    def list_vars(self) -> Iterable[Variable]:
        for b in self.blocks:
            yield from b.vars.values()

    def all_parameters(self) -> list[Parameter]:
        return self.global_block().all_parameters()

    # -- copies, bytes and text ---------------------------------------------------------------
    def clone(self, for_test: bool = False) -> "Program":
        """A deep copy. With ``for_test=True`` only forward ops are kept (no backward,
        optimizer or lr-schedule ops) and ops with an ``is_test`` attr get it set."""
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
        return serialize.encode(program_to_dict(self))

    @staticmethod
    def from_bytes(data: bytes) -> "Program":
        """Parse prog.bin bytes. Raises SerializationError naming what is wrong."""
        return program_from_dict(serialize.decode(data), validate=True)

    def verify(self) -> None:
        """Check each op against its OpDef, def-before-use, single writers, shapes, and, for a
        transpiled program, that every cross-placement read is a valid edge.

        Raises:
            ProgramError: showing the ops around the bad one.
            PlacementError: naming the op, the var and both PlaceGroups.
        """
        verify_program(self)

    def __str__(self) -> str:
        return format_program(self)

    def to_string(self, throw_on_error: bool = False, with_details: bool = False) -> str:
        return str(self)

    # -- the in-place rewrite -------------------------------------------------------------------
    def rewrite_from(self, other: "Program") -> None:
        """Make this program hold ``other``'s blocks, vars, ops and placement, keeping its own
        identity: what ``DistributeTranspiler.transpile`` does to the program it was given
        (NOTE(in-place-transpile) in placegroup/transpiler/distribute_transpiler.py).

        The Block objects stay (a block the rewrite adds is new), and a var the caller holds
        (``avg_cost``, a data var) stays the object found under its name, updated to the
        rewritten var's fields; so ``fetch_list=[avg_cost]`` and ``DataFeeder(feed_list=[x, y])``
        go on working. Executors compile the program anew at its next run.

        ``other`` is consumed: its vars and ops move here.
        """
        blocks = []
        for src in other.blocks:
            keep = self.blocks[src.idx] if src.idx < len(self.blocks) else Block(self, src.idx)
            keep.parent_idx = src.parent_idx
            vars_ = {}
            for name, v in src.vars.items():
                held = keep.vars.get(name)
                if held is not None and type(held) is type(v):
                    held.__dict__.update(v.__dict__)
                    v = held
                v.block = keep
                vars_[name] = v
            for op in src.ops:
                op.block = keep
            keep.vars, keep.ops = vars_, list(src.ops)
            blocks.append(keep)
        self.blocks = blocks
        self.current_block_idx = 0
        self.random_seed, self.executor, self.cluster = other.random_seed, other.executor, other.cluster
        self.provenance, self.extra = list(other.provenance), dict(other.extra)
        self._bump()


# -- the dict form (what prog.bin holds, placegroup/ir/serialize.py) ----------------------------

def plain_value(v: Any, leaf=None) -> Any:
    """Attr values as msgpack-able plain Python: tuples to lists, numpy scalars to Python ones;
    ``leaf``, if given, maps each scalar once more (``placegroup dump`` makes them strict JSON)."""
    if isinstance(v, (list, tuple)):
        return [plain_value(x, leaf) for x in v]
    if isinstance(v, dict):
        return {str(k): plain_value(x, leaf) for k, x in v.items()}
    if hasattr(v, "item") and not isinstance(v, (bool, int, float, str)):
        v = v.item()
    return v if leaf is None else leaf(v)


def program_to_dict(program: Program) -> dict:
    """``program`` as plain data in the shape of ``serialize.ProgramSchema``."""
    blocks = []
    for b in program.blocks:
        vars_ = []
        for v in b.vars.values():
            d = dict(name=v.name, shape=None if v.shape is None else list(v.shape), dtype=v.dtype,
                     type=v.type, persistable=v.persistable, stop_gradient=v.stop_gradient,
                     is_data=v.is_data, is_parameter=v.is_parameter, lod_level=v.lod_level,
                     place=None if v.place is None else str(v.place), attrs=plain_value(v.attrs))
            if v.is_parameter:
                d.update(trainable=v.trainable, optimize_attr=plain_value(v.optimize_attr))
            vars_.append(d)
        ops = [dict(type=op.type, inputs=op.inputs, outputs=op.outputs, attrs=plain_value(op.attrs),
                    role=op.role, place=None if op.place is None else str(op.place),
                    edges=dict(op.edges), param=op.param)
               for op in b.ops]
        blocks.append(dict(idx=b.idx, parent_idx=b.parent_idx, vars=vars_, ops=ops))
    ex = program.executor
    d = dict(random_seed=program.random_seed, blocks=blocks, provenance=list(program.provenance),
             executor=None if ex is None else dict(role=ex.role.value, endpoint=ex.endpoint,
                                                   rank=ex.rank),
             cluster=None if program.cluster is None else program.cluster.model_dump())
    if program.extra:  # left out when empty, so the bytes of every other program stay as they were
        d["extra"] = plain_value(program.extra)
    return d


def program_from_dict(d: dict, *, validate: bool = False) -> Program:
    """A Program from its dict form. With ``validate`` (what came from a file), a value the IR
    rejects (a place, a dtype, an op's slots or role, the executor) is a SerializationError
    naming it."""
    if not validate:
        return _build(d, False)
    try:
        return _build(d, True)
    except (ValueError, ProgramError) as e:
        raise SerializationError(f"prog.bin holds a value the IR rejects: {e}") from None


def _build(d: dict, validate: bool) -> Program:
    p = Program()
    p.blocks = []
    for bd in d["blocks"]:
        b = Block(p, bd["idx"], bd["parent_idx"])
        for vd in bd["vars"]:
            v = _var_from_dict(b, vd)
            b.vars[v.name] = v
        for od in bd["ops"]:
            try:
                op = Operator(b, od["type"], od["inputs"], od["outputs"], od.get("attrs"),
                              od.get("role"), od.get("place"))
                if validate:
                    validate_op(op.opdef, op.inputs, op.outputs, op.attrs)
                    if op.role not in ROLES:
                        raise ProgramError(f"op {op.type!r} has unknown role {op.role!r}")
            except ProgramError as e:
                raise SerializationError(f"prog.bin block {bd['idx']}: {e}") from None
            op.edges = dict(od.get("edges") or {})
            op.param = od.get("param")
            b.ops.append(op)
        p.blocks.append(b)
    p.random_seed = d.get("random_seed", 0)
    p.provenance = list(d.get("provenance") or [])
    p.extra = dict(d.get("extra") or {})
    ex = d.get("executor")
    p.executor = None if ex is None else ExecutorId.parse(ex["role"], ex.get("endpoint"),
                                                           rank=ex.get("rank"))
    p.cluster = None if d.get("cluster") is None else ClusterSchema.model_validate(d["cluster"])
    return p


def _var_from_dict(b: Block, vd: dict) -> Variable:
    common = dict(shape=vd["shape"], dtype=vd["dtype"], type=vd.get("type", LOD_TENSOR),
                  is_data=vd.get("is_data", False), place=vd.get("place"),
                  attrs=vd.get("attrs") or {}, lod_level=vd.get("lod_level", 0))
    if vd.get("is_parameter"):
        v = Parameter(b, vd["name"], trainable=vd.get("trainable", True),
                      optimize_attr=vd.get("optimize_attr"),
                      persistable=vd.get("persistable", True), **common)
    else:
        v = Variable(b, vd["name"], persistable=vd.get("persistable", False),
                     stop_gradient=vd.get("stop_gradient", False), **common)
    v.stop_gradient = vd.get("stop_gradient", v.stop_gradient)
    return v


# -- default programs and program_guard (Fluid's global state) ------------------------------

_main_program = Program()
_startup_program = Program()


def default_main_program() -> Program:
    """The program layers append to outside any ``program_guard``."""
    return _main_program


def default_startup_program() -> Program:
    """The program initializers append to outside any ``program_guard``."""
    return _startup_program


# NOTE(in-place-transpile): the job this process transpiled for, when it has pservers. A
# trainer of such a job that runs an unplaced program which would update parameters would train
# alone while its pservers wait; the executor asks ``transpiled_job()`` and refuses, naming the fix.
_transpiled_job: ClusterSchema | None = None


def note_transpiled_job(cluster: ClusterSchema | None) -> None:
    """Record (``None``: forget) the job the transpiler rewrote this process's programs for."""
    global _transpiled_job
    _transpiled_job = cluster


def transpiled_job() -> ClusterSchema | None:
    """The job with pservers this process's programs were transpiled for, or None."""
    return _transpiled_job


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
