"""Every message a step sends, read off the program: what ``placegroup dump`` lists under
"transfers".

Nothing crosses the wire that the program does not say: each executor's plan
(executor/plan.py) holds its pushes (after the op that last writes a value others read),
its each-edge answers, its collectives and the values it sends once at the start; its
version policy (executor/policy.py) says which version each carries. ``transfers(program)``
compiles every executor's plan and lists them; a fetch of a var held elsewhere is the one
message a step sends only when asked (``fetch_list``), and is listed as such.

Example::

    for t in transfers(program):
        print(t.src, "->", ", ".join(t.dst), t.var, t.kind, t.version)
"""
from __future__ import annotations

import dataclasses

import numpy as np

from placegroup.executor.plan import compile_plan
from placegroup.executor.policy import policy_for
from placegroup.ir.cluster import Cluster


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One message kind: ``var`` from ``src`` to ``dst`` by edge rule ``kind``, sent after op
    ``op`` (its index and type; None: at the start) and tagged ``version``."""

    src: str
    dst: tuple
    var: str
    kind: str
    op: tuple | None
    version: str
    when: str = "every step"


def transfers(program) -> list[Transfer]:
    """The transfers of a transpiled ``program`` (one with ``program.cluster``), per executor in
    cluster order; [] for a program one process runs alone."""
    if program.cluster is None:
        return []
    cluster = Cluster.from_program(program)
    rounds = program.cluster.merge_steps > 1  # a pserver's step is then a round of the trainers'
    out: list[Transfer] = []
    for me in cluster.executors:
        plan = compile_plan(program, me, cluster, np)
        policy = policy_for(program.cluster, me.role)
        label = "step (a round)" if rounds and policy.round == 1 else policy.label()
        for e in plan.initial:
            out.append(Transfer(me.name, e.peers, e.var, e.kind, None, "-1 (the startup program's)", "once"))
        for p in plan.ops:
            where = (p.index, p.op.type)
            when = "once per round" if p.round_end and policy.round > 1 else "every step"
            if p.each is not None:
                reply = policy.reply_label()
                for e in p.pushes:
                    out.append(Transfer(me.name, e.peers, e.var, "each (to the instance that triggered it)",
                                        where, reply, "per arriving instance"))
                continue
            for e in p.pushes:
                out.append(Transfer(me.name, e.peers, e.var, e.kind, where, label, when))
            if p.group is not None:
                out.append(Transfer(me.name, tuple(n for n in p.group if n != me.name), p.op.input_arg_names[0]
                                    if p.op.input_arg_names else "-", "collective", where, "step", when))
        if plan.answers:
            askers = tuple(e.name for e in cluster.executors if e.role != me.role)
            out.append(Transfer(me.name, askers, f"any of its {len(plan.answers)} vars", "fetch", None,
                                f"the asker's {'round' if rounds else 'step'}, once this executor has "
                                f"finished it", "when asked"))
    return out


def render(items: list[Transfer]) -> list[str]:
    """Text lines for ``placegroup dump``."""
    if not items:
        return []
    lines = ["// transfers: every message a step sends (after op #i; tagged with the version shown)"]
    for t in items:
        after = (f"after #{t.op[0]} {t.op[1]}" if t.op is not None else
                 "on request" if t.kind == "fetch" else "at the start")
        lines.append(f"//   {t.src} -> {', '.join(t.dst)}: {t.var} [{t.kind}] {after}, {t.when}, "
                     f"version {t.version}")
    return lines
