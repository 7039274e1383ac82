"""Every message a job sends, read off the program: what ``placegroup dump`` lists under
"transfers".

Nothing crosses the wire that the program does not say: each executor's plan
(executor/plan.py) holds its pushes (after the op that last writes a value others read), its
each-edge answers, its collectives and the values it sends once at the start; the edge table
(placegroup/ir/edges.py) names each kind; its version policy (executor/policy.py) says which
version each carries and when it leaves (a bounded-async trainer's cadence, an async
pserver's batched and newest-only answers). Beside the values, the control messages: the
``hello`` on every connection, a trainer's ``done``, a fetch's request and answer by var, and
the ``error`` a failing executor sends. ``transfers(program)`` compiles every executor's plan
and lists them all.

Example::

    for t in transfers(program):
        print(t.src, "->", ", ".join(t.dst), t.var, t.kind, t.version, t.when)
"""
from __future__ import annotations

import dataclasses

import numpy as np

from placegroup.executor.link import linked_peers, peer_links
from placegroup.executor.plan import compile_plan
from placegroup.executor.policy import policy_for
from placegroup.ir.cluster import Cluster
from placegroup.ir.edges import RULES, label
from placegroup.ir.place_group import ExecutorRole

# a collective call's phases (NOTE(ring)): (phase, to every peer, else to the next rank; what it carries)
RING_PHASES = (("h", True, "its dtype and shape, first"), ("x", True, "a small part, direct"),
               ("rs", False, "a ring reduce-scatter segment"), ("ag", False, "a ring allgather segment"))


@dataclasses.dataclass(frozen=True)
class Transfer:
    """One message kind: ``var`` from ``src`` to ``dst`` by ``kind`` (an edge rule's label, or
    a control message: hello, done, error, fetch request), sent after op ``op`` (its index and
    type; None: ``where`` says when instead) and tagged ``version``, ``when`` it is sent."""

    src: str
    dst: tuple
    var: str
    kind: str
    op: tuple | None
    version: str
    when: str = "every step"
    where: str = ""


def transfers(program) -> list[Transfer]:
    """The transfers of a transpiled ``program`` (one with ``program.cluster``), per executor in
    cluster order; [] for a program one process runs alone."""
    if program.cluster is None:
        return []
    cluster = Cluster.from_program(program)
    out: list[Transfer] = []
    for me in cluster.executors:
        plan = compile_plan(program, me, cluster, np)
        policy = policy_for(program.cluster, me.role)
        out += _control(program, cluster, me)
        for e in plan.initial:
            out.append(Transfer(me.name, e.peers, e.var, label(e.kind), None, "-1 (the startup program's)", "once",
                                "at the start"))
        for p in plan.ops:
            where = (p.index, p.op.type)
            if p.each is not None:
                for e in p.pushes:
                    out.append(Transfer(me.name, e.peers, e.var, RULES[p.each.kind].answer_label, where,
                                        policy.reply_label(), policy.reply_cadence()))
                continue
            for e in p.pushes:
                out.append(Transfer(me.name, e.peers, e.var, label(e.kind), where, policy.label(),
                                    policy.cadence(p.round_end)))
            if p.group is not None:
                out += _ring(me.name, p, policy.cadence(p.round_end))
        askers = tuple(e.name for e in cluster.executors if e.role != me.role)
        for var in sorted(plan.answers):
            out.append(Transfer(me.name, askers, var, RULES["fetch"].label, None,
                                f"the asker's {policy.asker_unit()}, once this executor has finished it",
                                "when asked", "on request"))
    return out


def _control(program, cluster: Cluster, me) -> list[Transfer]:
    """The control messages of executor ``me`` (docs/protocol.md, "Message kinds")."""
    connect, _ = peer_links(cluster, me, program.cluster.pserver_mesh)
    others = tuple(sorted(linked_peers(cluster, me, program.cluster.pserver_mesh)))
    pservers = tuple(e.name for e in cluster.executors if e.role == ExecutorRole.PSERVER)
    out = []
    if connect:
        out.append(Transfer(me.name, tuple(sorted(connect)), "-", "hello", None, "-1",
                            "once, first on each connection it dials (with the program's digest)", "on connecting"))
    if me.role == ExecutorRole.TRAINER:
        if pservers:
            out.append(Transfer(me.name, pservers, "-", "done", None, "the last version it sent",
                                "once (its pservers stop serving when every trainer has)", "at close"))
            out.append(Transfer(me.name, pservers, "any var a pserver holds", "fetch request", None,
                                "this step's", "when fetch_list names a var held there", "on request"))
    if others:
        out.append(Transfer(me.name, others, "-", "error", None, "-", "once (to every executor linked to it)",
                            "when this executor fails"))
    return out


def _ring(src: str, p, when: str) -> list[Transfer]:
    """The messages of collective op ``p``, by phase (NOTE(ring) in comm/collectives.py)."""
    peers = tuple(n for n in p.group if n != src)
    if not peers:
        return []
    rank = p.group.index(src)
    after = p.group[(rank + 1) % len(p.group)]
    out = []
    for call in p.op.opdef.collective_calls:
        for phase, to_all, what in RING_PHASES:
            out.append(Transfer(src, peers if to_all else (after,), f"{p.ctx.tag}{call}:{phase}",
                                "collective", (p.index, p.op.type), "step", f"{when}: {what}"))
    return out


def render(items: list[Transfer]) -> list[str]:
    """Text lines for ``placegroup dump``."""
    if not items:
        return []
    lines = ["// transfers: every message the job sends (after op #i; tagged with the version shown)"]
    for t in items:
        after = f"after #{t.op[0]} {t.op[1]}" if t.op is not None else t.where
        var = "" if t.var == "-" else f"{t.var} "
        lines.append(f"//   {t.src} -> {', '.join(t.dst)}: {var}[{t.kind}] {after}, {t.when}, version {t.version}")
    return lines
