"""What ``placegroup dump`` prints: a Program as text, JSON or graphviz, whole or as one
executor sees it (``docs/ir.md``, "placegroup dump").

The rendering lives here, apart from the click wiring in ``cli.py``, so that tests and
notebooks can call it on a Program directly.

Example:
    >>> pserver = ExecutorId.parse("pserver", "127.0.0.1:7164")
    >>> print(render(program, "text", pserver))  # doctest: +SKIP
"""
from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from placegroup.ir.variable import DYNAMIC_TABLE
from placegroup.util.dynamic_table import CountFilterEntry, ShowClickEntry, TableConfig
from placegroup.executor.transfers import render as render_transfers
from placegroup.executor.transfers import transfers
from placegroup.ir.cluster import Cluster
from placegroup.ir.framework import plain_value
from placegroup.ops.registry import EMPTY_VAR
from placegroup.ir.place_group import ExecutorId, PlaceGroup
from placegroup.ir.printer import format_op, format_var
from placegroup.ir.serialize import SCHEMA_VERSION
from placegroup.tools import dump_executors

FORMATS = ("text", "json", "dot")
JSON_FORMAT = "placegroup.dump/1"
NO_PLACE = "-"


class View:
    """The ops and vars one executor runs and holds, or all of them (``executor=None``).

    An op or var without a place is run or held by everyone: that is how single-process
    programs, which have no places, read.
    """

    def __init__(self, program, executor: ExecutorId | None = None) -> None:
        self.program = program
        self.executor = executor

    def sees(self, place: PlaceGroup | None) -> bool:
        return self.executor is None or place is None or place.matches(self.executor)

    def ops(self, block) -> list[tuple[int, Any]]:
        """(index in the block, op) for the ops in view; the index is the printed ``#i``."""
        return [(i, op) for i, op in enumerate(block.ops) if self.sees(op.place)]

    def vars(self, block) -> list:
        return [block.vars[n] for n in sorted(block.vars) if self.sees(block.vars[n].place)]

    def summary(self) -> list[tuple[str, int, int]]:
        """(placement text, ops, vars) in view, per distinct PlaceGroup; no place last."""
        count: dict[str, list[int]] = {}
        for b in self.program.blocks:
            for _, op in self.ops(b):
                count.setdefault(_place_text(op.place), [0, 0])[0] += 1
            for v in self.vars(b):
                count.setdefault(_place_text(v.place), [0, 0])[1] += 1
        keys = sorted(k for k in count if k != NO_PLACE) + ([NO_PLACE] if NO_PLACE in count else [])
        return [(k, count[k][0], count[k][1]) for k in keys]


def _place_text(place: PlaceGroup | None) -> str:
    return NO_PLACE if place is None else str(place)


def covers(a: PlaceGroup, b: PlaceGroup) -> bool:
    """Whether every executor ``b`` matches is matched by ``a`` (devices are not compared)."""
    if not set(b.roles) <= set(a.roles):
        return False
    return a.is_replicated or (not b.is_replicated and
                               {n.endpoint for n in b.nodes} <= {n.endpoint for n in a.nodes})


def crosses(var_place: PlaceGroup | None, op_place: PlaceGroup | None, is_input: bool) -> bool:
    """Whether the edge between a var and an op crosses placements (docs/ir.md, "Cross edges").

    An input edge stays local when every executor that runs the op holds the var (an
    instance of its own, for a replicated var); an output edge when every executor that holds
    the var runs the op. Two unplaced ends are local; exactly one unplaced end crosses (in a
    placed program an unplaced var or op is a gap worth seeing).

    Example:
        >>> crosses(PlaceGroup.parse("pserver"), PlaceGroup.parse("pserver/127.0.0.1:7164"), True)
        False
    """
    if var_place is None or op_place is None:
        return var_place is not op_place
    return not (covers(var_place, op_place) if is_input else covers(op_place, var_place))


def placements(program) -> list[PlaceGroup | None]:
    """Every distinct PlaceGroup of ``program``'s ops and vars, sorted by text, None last."""
    seen = {v.place for v in program.list_vars()} | {
        op.place for b in program.blocks for op in b.ops}
    return sorted((p for p in seen if p is not None), key=str) + ([None] if None in seen else [])


# -- text -----------------------------------------------------------------------------------
UNEVEN_MIN_BYTES = 1 << 20  # below this, no pserver waits long enough for balance to matter


def load_report(program) -> list[str]:
    """Per pserver: bytes of parameters and of optimizer state it holds, and a warning when
    the heaviest holds more than 1.5x the lightest (uneven load makes every sync step wait
    for the slowest pserver)."""
    pservers = program.cluster.pservers if program.cluster is not None else []
    if not pservers:
        return []
    cluster = Cluster.from_program(program)
    load = {ep: [0, 0] for ep in pservers}
    for v in program.global_block().vars.values():
        if not v.persistable or v.shape is None or any(d < 0 for d in v.shape):
            continue
        nbytes = v.numel * np.dtype(v.dtype).itemsize
        for e in cluster.matching(v.place):
            if e.endpoint in load:
                load[e.endpoint][0 if v.is_parameter else 1] += nbytes
    lines = [f"// {'pserver':<22} {'param bytes':>12} {'state bytes':>12}"]
    lines += [f"// {ep:<22} {p:>12,} {st:>12,}" for ep, (p, st) in load.items()]
    totals = [p + st for p, st in load.values()]
    if len(totals) > 1 and min(totals) * 1.5 < max(totals) and max(totals) >= UNEVEN_MIN_BYTES:
        lines.append(f"// WARNING: uneven load: the heaviest pserver holds {max(totals):,} bytes, the "
                     f"lightest {min(totals):,}; consider slice_var_up=True or a smaller min_block_size")
    return lines


def table_report(program, view) -> list[str]:
    """A line per table keyed by raw ids (sparse_embedding) the view holds: its config in words."""
    lines = []
    for v in view.vars(program.global_block()):
        if v.type != DYNAMIC_TABLE or "table_config" not in v.attrs:
            continue
        c = TableConfig.from_json(v.attrs["table_config"])
        scored = isinstance(c.entry, ShowClickEntry)
        entry = ("at first sight" if c.entry is None else f"after {c.entry.count} sightings"
                 if isinstance(c.entry, CountFilterEntry) else
                 f"at a show/click score of {c.entry.threshold:g} ({c.entry.show_name!r}, {c.entry.click_name!r}; "
                 f"non-click {c.entry.nonclk_coeff:g}, click {c.entry.click_coeff:g})" if scored else
                 f"with probability {c.entry.probability} an update")
        count = "score" if scored else "count"
        evict = [f"unseen for {c.ttl} updates" if c.ttl else "", f"{count} below {c.min_count}" if c.min_count else ""]
        evict = " or ".join(e for e in evict if e) or "never"
        lines.append(f"// table {v.name}: dim {c.dim} {c.dtype}, {c.optimizer} (lr {c.lr:g}), rows admitted {entry}, "
                     f"dropped when {evict}, {count}s x{c.decay:g} each round of {c.round_steps} updates, seed {c.seed}")
    return lines


def render_text(program, executor: ExecutorId | None = None) -> str:
    """``//`` comment lines (executor, view, per-placement counts), then the IR text."""
    view = View(program, executor)
    n_ops = sum(len(b.ops) for b in program.blocks)
    n_vars = sum(len(b.vars) for b in program.blocks)
    lines = [f"// placegroup dump: {n_ops} ops, {n_vars} vars, {program.num_blocks} block(s)"]
    if program.executor is not None:
        lines.append(f"// made for executor: {program.executor}")
    if program.cluster is not None:
        c = program.cluster.model_dump()
        lines.append("// cluster: " + " ".join(f"{k}={c[k]}" for k in sorted(c)))
        lines.append(dump_executors.header(program))
    if executor is not None:
        k_ops = sum(len(view.ops(b)) for b in program.blocks)
        k_vars = sum(len(view.vars(b)) for b in program.blocks)
        lines.append(f"// view: what {executor} runs and holds: {k_ops} of {n_ops} ops, "
                     f"{k_vars} of {n_vars} vars")
    rows = view.summary()
    width = max([len("placement")] + [len(p) for p, _, _ in rows])
    lines.append(f"// {'placement'.ljust(width)}  {'ops':>5}  {'vars':>5}")
    lines += [f"// {p.ljust(width)}  {o:>5}  {v:>5}" for p, o, v in rows]
    lines += load_report(program)
    lines += table_report(program, view)
    lines += render_transfers(_seen_transfers(program, executor))
    if executor is None:
        return "\n".join(lines) + "\n" + str(program)
    # The lines str(program) prints, minus what the executor does not see; ops keep their
    # index in the whole program so the two texts can be compared.
    lines.append(str(program).partition("\n")[0])  # the header line, as the printer has it
    for b in program.blocks:
        lines.append(f"block {b.idx} parent={b.parent_idx}")
        lines += ["  " + format_var(v) for v in view.vars(b)]
        lines += ["  " + format_op(op, i) for i, op in view.ops(b)]
    return "\n".join(lines) + "\n"


def _seen_transfers(program, executor: ExecutorId | None) -> list:
    """The program's transfers (executor/transfers.py) that ``executor`` sends or receives."""
    items = transfers(program)
    if executor is None or program.cluster is None:
        return items
    name = Cluster.from_program(program).find(executor).name
    return [t for t in items if t.src == name or name in t.dst]


# -- json -----------------------------------------------------------------------------------
def _json_leaf(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)  # "nan", "inf", "-inf"
    if isinstance(v, bytes):
        return v.hex()
    return v


def _jsonable(v: Any) -> Any:
    """Attr values as strict JSON (no NaN): the program's plain values, non-finite floats as text."""
    return plain_value(v, _json_leaf)


def var_flags(v) -> list[str]:
    """The var's flags, in the printer's words (``param``, ``frozen``, ``persistable``, ...)."""
    flags = []
    if v.is_parameter:
        flags += ["param"] if v.trainable else ["param", "frozen"]
    if v.persistable:
        flags.append("persistable")
    if v.is_data:
        flags.append("data")
    if v.stop_gradient:
        flags.append("stop_gradient")
    return flags


def _executor_doc(ex: ExecutorId | None) -> dict | None:
    return None if ex is None else dict(role=str(ex.role), endpoint=ex.endpoint, rank=ex.rank)


def program_document(program, executor: ExecutorId | None = None) -> dict:
    """The JSON document of ``render_json`` as a dict (schema in docs/ir.md)."""
    view = View(program, executor)
    blocks = []
    for b in program.blocks:
        vars_ = [dict(name=v.name, shape=None if v.shape is None else list(v.shape), dtype=v.dtype,
                      type=v.type, flags=var_flags(v), lod_level=v.lod_level,
                      place=None if v.place is None else str(v.place), attrs=_jsonable(v.attrs))
                 for v in view.vars(b)]
        ops = [dict(index=i, type=op.type, inputs=op.inputs, outputs=op.outputs,
                    attrs=_jsonable(op.attrs), role=op.role, param=op.param, edges=dict(op.edges),
                    place=None if op.place is None else str(op.place))
               for i, op in view.ops(b)]
        blocks.append(dict(idx=b.idx, parent_idx=b.parent_idx, vars=vars_, ops=ops))
    return dict(
        format=JSON_FORMAT, schema_version=SCHEMA_VERSION, random_seed=program.random_seed,
        executor=_executor_doc(program.executor),
        cluster=None if program.cluster is None else _jsonable(program.cluster.model_dump()),
        provenance=list(program.provenance), view=_executor_doc(executor),
        transfers=[dict(src=t.src, dst=list(t.dst), var=t.var, rule=t.kind,
                        after_op=None if t.op is None else t.op[0], where=t.where, version=t.version, when=t.when)
                   for t in _seen_transfers(program, executor)],
        placements=[dict(place=None if p == NO_PLACE else p, ops=o, vars=n)
                    for p, o, n in view.summary()],
        blocks=blocks)


def render_json(program, executor: ExecutorId | None = None) -> str:
    """A stable JSON document: keys sorted, vars by name, ops in program order."""
    return json.dumps(program_document(program, executor), indent=2, sort_keys=True,
                      allow_nan=False) + "\n"


# -- dot ------------------------------------------------------------------------------------
def _q(text: str) -> str:
    """A DOT quoted string; ``\\n`` in ``text`` stays a DOT line break."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _colour(i: int) -> str:
    # Golden-ratio hue steps keep any number of placements apart; pale so labels stay legible.
    return f"{(i * 0.618034) % 1.0:.3f} 0.35 0.95"


def render_dot(program, executor: ExecutorId | None = None) -> str:
    """Graphviz: op boxes filled with their placement's colour (legend at the top), var
    ellipses outlined in theirs, edges var -> op -> var; cross-placement edges red, bold and
    labelled ``slot: from -> to``. In an executor's view, a var it reads or writes but does
    not hold is drawn dashed."""
    view = View(program, executor)
    colours = {p: "white" if p is None else _colour(i) for i, p in enumerate(placements(program))}
    title = "program" + (f" made for {program.executor}" if program.executor is not None else "")
    if executor is not None:
        title += f"\nview of {executor}"
    out = ["digraph program {", f"  graph [label={_q(title)}, labelloc=t, rankdir=TB];",
           '  node [fontname="monospace", fontsize=10];',
           '  edge [fontname="monospace", fontsize=9];',
           "  subgraph cluster_legend {", '    label="placements";']
    for i, p in enumerate(colours):
        name = _place_text(p) if p is not None else "(no place)"
        out.append(f"    legend_{i} [shape=box, style=filled, fillcolor={_q(colours[p])}, "
                   f"label={_q(name)}];")
    out.append("  }")
    drawn: set[str] = set()

    def var_node(block, name: str) -> str:
        v = block.var(name) if block.has_var(name) else None
        vid = f"var_{block.idx if v is None else v.block.idx}_{name}"  # parent vars: one node
        if vid not in drawn:
            drawn.add(vid)
            place = None if v is None else v.place
            shape = "?" if v is None or v.shape is None else str(list(v.shape))
            label = f"{name}\n{v.dtype if v is not None else '?'}{shape}\n@{_place_text(place)}"
            dashed = "" if v is not None and view.sees(place) else ", style=dashed"
            out.append(f"  {_q(vid)} [shape=ellipse, color={_q(colours.get(place, 'black'))}, "
                       f"penwidth=2, label={_q(label)}{dashed}];")
        return _q(vid)

    for b in program.blocks:
        for v in view.vars(b):
            var_node(b, v.name)
        for i, op in view.ops(b):
            oid = _q(f"op_{b.idx}_{i}")
            label = f"#{i} {op.type}\n@{_place_text(op.place)}"
            out.append(f"  {oid} [shape=box, style=filled, fillcolor={_q(colours[op.place])}, "
                       f"label={_q(label)}];")
            for is_input, slots in ((True, op.inputs), (False, op.outputs)):
                for slot in sorted(slots):
                    for name in slots[slot]:
                        if name == EMPTY_VAR:
                            continue
                        vnode = var_node(b, name)
                        vplace = b.var(name).place if b.has_var(name) else None
                        src, dst = (vnode, oid) if is_input else (oid, vnode)
                        attrs = f"label={_q(slot)}"
                        if crosses(vplace, op.place, is_input):
                            a, z = (vplace, op.place) if is_input else (op.place, vplace)
                            kind = op.edges.get(slot) if is_input else None
                            how = f"{slot} ({kind})" if kind else slot  # gather / each
                            attrs = (f"label={_q(f'{how}: {_place_text(a)} -> {_place_text(z)}')}, "
                                     f"color=red, fontcolor=red, penwidth=2.5, style=bold")
                        out.append(f"  {src} -> {dst} [{attrs}];")
    out.append("}")
    return "\n".join(out) + "\n"


def render(program, fmt: str = "text", executor: ExecutorId | None = None) -> str:
    """``program`` in ``fmt`` (one of ``FORMATS``), whole or as ``executor`` sees it.

    Raises:
        ValueError: an unknown format.
    """
    renderers = {"text": render_text, "json": render_json, "dot": render_dot}
    if fmt not in renderers:
        raise ValueError(f"unknown dump format {fmt!r}; choose one of {list(FORMATS)}")
    return renderers[fmt](program, executor)
