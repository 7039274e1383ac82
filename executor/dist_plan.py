"""The plan of one executor for one placed program (DESIGN.md §4), computed once.

Which ops run here, in program order; for each input held elsewhere, the edge (broadcast,
gather, each), its sources and which version to wait for (NOTE(versions) in
executor/distributed.py); after each op, which executors its outputs go to.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from placegroup.ir.cluster import Cluster, classify
from placegroup.comm.expect import Expectations
from placegroup.errors import PlacementError
from placegroup.executor.executor import Step
from placegroup.ir.framework import SELECTED_ROWS
from placegroup.ops.registry import ROUND_END
from placegroup.ir.place_group import ExecutorRole

CARRIED, SAME, CONSTANT = "carried", "same", "constant"


@dataclasses.dataclass
class RemoteIn:
    slot: str
    var: str
    kind: str        # broadcast | gather
    sources: tuple   # wire names, trainer-id order
    when: str        # same | carried | constant


class DistStep:
    """A local op with its remote inputs and the pushes of its outputs."""

    __slots__ = ("step", "remote", "each", "pushes", "plain")

    def __init__(self, step: Step, remote: list, pushes: list) -> None:
        self.step = step
        each = [r for r in remote if r.kind == "each"]
        if len(each) > 1:
            raise PlacementError(f"op #{step.index} `{step.op.type}` has {len(each)} each-edges; "
                                 f"an op runs once per arriving instance of one input")
        self.each = each[0] if each else None
        self.remote = [r for r in remote if r.kind != "each"]
        self.pushes = pushes  # [(var, [peer names])]
        # NOTE(lean-loop) (executor/executor.py), distributed: most ops of a step read and write
        # only local values; run_step calls their kernels directly, skipping the others' checks
        self.plain = (not self.remote and self.each is None and not pushes and step.ctx.comm is None
                      and not step.op.attrs.get(ROUND_END))


def _last_writers(block) -> dict[str, int]:
    last = {}
    for i, op in enumerate(block.ops):
        for n in op.output_arg_names:
            last[n] = i
    return last


class DistPlan:
    def __init__(self, program, me, cluster: Cluster, xp) -> None:
        block = program.global_block()
        self.me = me
        self.startup = program.cluster.startup
        last = _last_writers(block)
        runners = [cluster.matching(op.place) for op in block.ops]
        # consumers[v] = executors that read v but do not hold it (computed once, DESIGN.md §4)
        consumers: dict[str, set] = {}
        for i, op in enumerate(block.ops):
            for slot, names in op.inputs.items():
                for n in names:
                    for r in runners[i]:
                        edge = classify(cluster, op, slot, block.var(n), r, i)
                        if edge.kind != "local" and me in edge.sources:
                            consumers.setdefault(n, set()).add(r.name)
        self.steps: list[DistStep] = []
        self.initial: list[tuple[str, list]] = []
        taken: set[str] = set()  # a value waited for once per step serves every later reader
        for i, op in enumerate(block.ops):
            if me not in runners[i]:
                continue
            remote = []
            for slot, names in op.inputs.items():
                for n in names:
                    edge = classify(cluster, op, slot, block.var(n), me, i)
                    if edge.kind == "local":
                        continue
                    if any(s.role == ExecutorRole.PSERVER for s in edge.sources) and me.role == ExecutorRole.PSERVER:
                        raise PlacementError(f"op #{i} `{op.type}` on {me} reads {n!r} from another pserver; "
                                             f"pserver-to-pserver edges are not supported yet")
                    when = SAME if last.get(n, i) < i else (CARRIED if n in last else CONSTANT)
                    if edge.kind == "broadcast":
                        if n in taken:
                            continue
                        taken.add(n)
                    remote.append(RemoteIn(slot, n, edge.kind, tuple(s.name for s in edge.sources), when))
            pushes = [(n, sorted(consumers[n])) for n in op.output_arg_names
                      if last.get(n) == i and n in consumers]
            st = Step(i, op, xp)
            st.ctx.rank = runners[i].index(me)
            if st.ctx.comm is not None:  # a collective: every member contributes its own instance
                st.ctx.comm = [e.name for e in runners[i]]  # the group, in rank order; bound at run time
            self.steps.append(DistStep(st, remote, pushes))
        # values held here that others read before this program writes them: sent at start
        held = {n for n, v in block.vars.items() if me in cluster.matching(v.place)}
        for n in sorted(held & set(consumers)):
            first_read = min(i for i, op in enumerate(block.ops) if n in op.input_arg_names)
            if n not in last or last[n] >= first_read:
                self.initial.append((n, sorted(consumers[n])))
        self.carried = [r for s in self.steps for r in s.remote if r.when == CARRIED]
        sent = {n for s in self.steps for n, _ in s.pushes} | {n for n, _ in self.initial}
        for s in self.steps:  # a var another executor receives zero-copy is never overwritten
            s.step.grant_inplace(sent)
        self.persistable = {name for name, v in block.vars.items() if v.persistable}
        self.feed_meta = {name: (v, np.dtype(v.dtype), v.shape) for name, v in block.vars.items()}
        self.holders = {n: cluster.matching(v.place) for n, v in block.vars.items()}


def expectations(plan: DistPlan, senders) -> Expectations:
    """What executor ``plan.me`` accepts while running ``plan`` (comm/expect.py): each remote
    input (broadcast, gather, each) from its sources with the var's declared dtype and shape;
    the wire vars of each collective from its group; and, for a trainer, any var another
    executor holds, from its first holder (the answer to a fetch, ``Runtime.fetch_remote``).
    ``senders``: the names that may send anything (the executors it is linked to)."""
    exp = Expectations(senders)
    meta = plan.feed_meta

    def allow(n: str, src: str) -> None:
        v = meta[n][0]
        exp.allow(n, src, meta[n][1], v.shape, v.type == SELECTED_ROWS)

    for ds in plan.steps:
        for r in ds.remote + ([ds.each] if ds.each is not None else []):
            for src in r.sources:
                allow(r.var, src)
        group = getattr(ds.step.ctx.comm, "members", ds.step.ctx.comm)  # a list until bound at run time
        if isinstance(group, (list, tuple)):
            for src in group:
                if src != plan.me.name:
                    exp.allow_collective(ds.step.ctx.tag, src)
    if plan.me.role != ExecutorRole.PSERVER:
        for n, holders in plan.holders.items():
            if holders and plan.me not in holders:
                allow(n, holders[0].name)
    return exp
