"""``program.verify()``: the IR's lint, run after every transpiler pass.

Checks, per block, in program order:
* every op's slots and attrs against its OpDef;
* def-before-use: a non-persistable, non-data var is written by an earlier op before it is
  read (persistable vars are loop-carried: the step before, or the startup program, wrote them);
* one writer per value: a non-persistable var has at most one writer (backward renames
  fan-in, so a second writer is a bug);
* shapes: each op's ``infer`` agrees with the declared shapes of its outputs (``-1`` matches
  anything);
* placements, once the program is transpiled (``program.cluster`` is set): every read of a
  var held elsewhere is a broadcast, gather, each or collective edge (``cluster.check_placement``).
An error shows the ops around the bad one.
"""
from __future__ import annotations

from placegroup.errors import ProgramError
from placegroup.ir.cluster import check_placement
from placegroup.ir.operator import infer_op, validate_op
from placegroup.ops.registry import EMPTY_VAR
from placegroup.ir.printer import format_op


def _context(block, i: int, radius: int = 2) -> str:
    lo, hi = max(0, i - radius), min(len(block.ops), i + radius + 1)
    return "\n".join(("-> " if j == i else "   ") + format_op(block.ops[j], j) for j in range(lo, hi))


def _fail(block, i: int, msg: str) -> None:
    raise ProgramError(f"block {block.idx}, op #{i} `{block.ops[i].type}`: {msg}\n"
                       f"{_context(block, i)}")


def _shapes_agree(declared, inferred) -> bool:
    if declared is None or inferred is None:
        return True
    if len(declared) != len(inferred):
        return False
    return all(a == b or a == -1 or b == -1 for a, b in zip(declared, inferred))


def verify_program(program) -> None:
    seen: set[int] = set()
    _verify_block(program, program.global_block(), set(), seen)
    for block in program.blocks:  # a block no op runs still holds valid ops
        if block.idx not in seen:
            _verify_block(program, block, set(), seen)
    if program.cluster is not None:  # transpiled: every cross-placement read is a valid edge
        check_placement(program)


def _verify_block(program, block, outer: set, seen: set) -> None:
    """Check ``block``'s ops; ``outer``: the vars written before it runs (a sub-block reads the
    vars its owning op's block wrote before the op, NOTE(sub-blocks) in executor/blocks.py)."""
    seen.add(block.idx)
    written: set[str] = set(outer)
    writers: dict[str, int] = {}
    for i, op in enumerate(block.ops):
        opdef = op.opdef
        try:
            validate_op(opdef, op.inputs, op.outputs, op.attrs)
        except ProgramError as e:
            _fail(block, i, str(e))
        for name in op.input_arg_names:
            if not block.has_var(name):
                _fail(block, i, f"reads var {name!r}, which is not declared")
            v = block.var(name)
            if not (v.persistable or v.is_data or name in written):
                _fail(block, i, f"reads {name!r} before any op writes it (and it is neither "
                                f"persistable nor fed data)")
        for name in op.output_arg_names:
            if not block.has_var(name):
                _fail(block, i, f"writes var {name!r}, which is not declared")
            v = block.var(name)
            if not v.persistable and name in writers and name not in op.input_arg_names:
                _fail(block, i, f"writes {name!r}, already written by op #{writers[name]}; "
                                f"a non-persistable var has one writer")
            writers.setdefault(name, i)
            written.add(name)
        if opdef.sub_block and 0 <= op.attrs.get("sub_block", -1) < len(program.blocks):
            sub = program.block(op.attrs["sub_block"])
            before = written
            if opdef.role == "backward" and sub.parent_idx >= 0:  # a gradient block reads its forward block's
                before = written | {n for o in program.block(sub.parent_idx).ops for n in o.output_arg_names}
            _verify_block(program, sub, before, seen)
        if opdef.infer is not None:
            try:
                metas = infer_op(op)
            except ProgramError as e:
                _fail(block, i, str(e))
            for slot, names in op.outputs.items():
                got = metas.get(slot)
                got = got if isinstance(got, list) else [got] * len(names)
                for name, meta in zip(names, got):
                    if meta is None or name == EMPTY_VAR:
                        continue
                    declared = block.var(name).shape
                    if not _shapes_agree(declared, tuple(meta.shape)):
                        _fail(block, i, f"output {slot}={name!r} is declared {list(declared)} "
                                        f"but the op makes {list(meta.shape)}")
