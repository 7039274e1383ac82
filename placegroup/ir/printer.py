"""The stable, diffable text form of a Program (grammar in docs/ir.md).

One header line, then per block its vars (sorted by name) and its ops (in program order)::

    program seed=0 executor=- passes=[]
    block 0 parent=-1
      var fc_0.w_0 : float32[13, 1] param persistable @pserver/127.0.0.1:7164
      var words : int64[-1, 1] lod_level=1 data
      #0 mul(X=%x, Y=%fc_0.w_0) -> (Out=%fc_0.tmp_0) {x_num_col_dims=1, y_num_col_dims=1} @trainer
"""
from __future__ import annotations

from typing import Any

from placegroup.ops.registry import CROSS_PARAM, ROUND_END


def _fmt_attr(v: Any) -> str:
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_attr(x) for x in v) + "]"
    if isinstance(v, str):
        return repr(v)
    return str(v)


def _fmt_slots(slots: dict) -> str:
    parts = []
    for slot in sorted(slots):
        names = slots[slot]
        vals = ", ".join("%" + n for n in names)
        parts.append(f"{slot}=[{vals}]" if len(names) != 1 else f"{slot}={vals}")
    return ", ".join(parts)


def format_op(op, index: int | None = None) -> str:
    attrs = ", ".join(f"{k}={_fmt_attr(op.attrs[k])}" for k in sorted(op.attrs)
                      if not k.startswith("_"))
    head = f"#{index} " if index is not None else ""
    role = "" if op.role == op.opdef.role else f" role={op.role}"
    if op.param is not None:
        role += f" param={op.param}"
    if op.edges:
        role += " edges={" + ", ".join(f"{k}:{op.edges[k]}" for k in sorted(op.edges)) + "}"
    if op.attrs.get(ROUND_END):
        role += " round_end"
    if op.attrs.get(CROSS_PARAM):
        role += " cross_param"
    place = f" @{op.place}" if op.place is not None else ""
    return (f"{head}{op.type}({_fmt_slots(op.inputs)}) -> ({_fmt_slots(op.outputs)})"
            f" {{{attrs}}}{role}{place}")


def format_var(v) -> str:
    shape = "?" if v.shape is None else "[" + ", ".join(str(d) for d in v.shape) + "]"
    flags = []
    if v.type != "lod_tensor":
        flags.append(v.type)
    if v.lod_level:  # a sequence var (NOTE(lod-rule) in ops/registry.py)
        flags.append(f"lod_level={v.lod_level}")
    if v.is_parameter:
        flags.append("param" if v.trainable else "param(frozen)")
    if v.persistable:
        flags.append("persistable")
    if v.is_data:
        flags.append("data")
    if v.stop_gradient and not v.is_parameter and not v.is_data:
        flags.append("stop_gradient")
    for k in sorted(v.attrs):
        flags.append(f"{k}={_fmt_attr(v.attrs[k])}")
    place = f" @{v.place}" if v.place is not None else ""
    return f"var {v.name} : {v.dtype}{shape}{''.join(' ' + f for f in flags)}{place}"


def format_program(program) -> str:
    ex = str(program.executor) if program.executor is not None else "-"
    extra = "".join(f" {k}={_fmt_attr(program.extra[k])}" for k in sorted(program.extra))
    lines = [f"program seed={program.random_seed} executor={ex} passes={list(program.provenance)}{extra}"]
    for b in program.blocks:
        lines.append(f"block {b.idx} parent={b.parent_idx}")
        lines += ["  " + format_var(b.vars[n]) for n in sorted(b.vars)]
        lines += ["  " + format_op(op, i) for i, op in enumerate(b.ops)]
    return "\n".join(lines) + "\n"
