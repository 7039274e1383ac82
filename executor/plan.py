"""A program compiled for one executor, once: which ops it runs, their kernels, and every
transfer a step makes.

``compile_plan(program, me, cluster, xp)`` resolves everything that does not change between
steps, so that the interpreter's loop only moves values (NOTE(lean-loop) in
executor/interpreter.py):

* the ops ``me`` runs, in program order, each a ``PlannedOp`` with its kernel, its slot ->
  name lists, its attrs and its ``KernelContext``;
* for each input held elsewhere, an ``InEdge``: its rule (broadcast, gather, each, fetch;
  executor/edges.py), its sources and whether it reads this step's value, the last step's
  (loop-carried) or a constant's;
* after each op, the ``OutEdge``s of the values it is the last to write that other executors
  read, and the values others read before this program writes them (sent once, at version -1);
* the vars others may fetch from here, and the holders of every var (for fetches and errors).

One process is the same plan with no remote edges: ``me`` is None and every op runs here.

Thread-safety: a plan is built once and then only read.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from placegroup.errors import PlacementError
from placegroup.executor.edges import RULES, InEdge, OutEdge
from placegroup.executor.policy import CARRIED, CONSTANT, SAME
from placegroup.ir.cluster import Cluster, classify
from placegroup.ir.place_group import ExecutorRole
from placegroup.ops.registry import EMPTY_VAR, ROUND_END, KernelContext


class LocalComm:
    """The communicator of a one-member group: what a collective op sees in one process."""

    rank, size = 0, 1

    def allreduce(self, x, op, tag, step):
        return x.copy()

    def allgather(self, x, axis, tag, step):
        return x.copy()

    def reducescatter(self, x, axis, tag, step):
        return x.copy()


LOCAL_COMM = LocalComm()


class PlannedOp:
    """One op, resolved: ``run(vals)`` reads its inputs from ``vals`` and writes its outputs."""

    __slots__ = ("index", "op", "kernel", "ins", "outs", "attrs", "xp", "ctx", "remote", "each",
                 "pushes", "group", "round_end", "plain")

    def __init__(self, index: int, op, xp, rank: int = 0) -> None:
        opdef = op.opdef
        self.index = index
        self.op = op
        self.xp = xp
        self.kernel: Callable = opdef.kernels["gpu" if xp is not np else "cpu"]
        self.ins = tuple((s.name, tuple(op.inputs.get(s.name, ())), s.duplicable)
                         for s in opdef.inputs if op.inputs.get(s.name))
        self.outs = tuple((s.name, tuple(op.outputs.get(s.name, ())), s.duplicable)
                          for s in opdef.outputs if op.outputs.get(s.name))
        self.attrs = dict(op.attrs)
        self.ctx = KernelContext(outputs=[slot for slot, _, _ in self.outs], rank=rank, tag=f"op{index}")
        self.remote: tuple = ()      # InEdges waited for before the op runs (not each)
        self.each: InEdge | None = None
        self.pushes: tuple = ()      # OutEdges sent after the op runs
        # a collective's group, wire names in rank order (None: not a collective); the
        # interpreter binds a communicator to ctx.comm
        self.group: tuple | None = () if opdef.wants_comm else None
        self.round_end = bool(op.attrs.get(ROUND_END))
        self.plain = True

    def settle_edges(self) -> None:
        """Whether the op can run straight, with no edge, push, communicator, round or step to
        mind (an op whose kernel reads ``ctx.step``, ``OpDef.uses_step``, is never plain)."""
        self.plain = (not self.remote and self.each is None and not self.pushes and self.group is None
                      and not self.round_end and not self.op.opdef.uses_step)

    def inplace_vars(self) -> set[str]:
        """The vars this op replaces in place by its OpDef (ParamOut over Param, ...)."""
        pairs = self.op.opdef.inplace
        return {n for out, inp in pairs.items() for n in self.op.outputs.get(out, ())
                if n in self.op.inputs.get(inp, ())}

    def grant_inplace(self, unsafe: set[str]) -> None:
        """Let the kernel write its in-place vars when none is in ``unsafe``: a value another
        executor receives zero-copy is never overwritten (NOTE(sparse-copy) in ops/optimizer.py)."""
        mine = self.inplace_vars()
        self.ctx.inplace = bool(mine) and not mine & unsafe

    def inputs(self, vals: dict) -> dict:
        ins = {}
        for slot, names, dup in self.ins:
            ins[slot] = [vals[n] for n in names] if dup else vals[names[0]]
        return ins

    def call(self, ins: dict, vals: dict) -> None:
        """Run the kernel on ``ins`` and write its outputs into ``vals``."""
        outs = self.kernel(self.xp, ins, self.attrs, self.ctx)
        for slot, names, dup in self.outs:
            value = outs[slot]
            if dup:
                for n, v in zip(names, value):
                    if n != EMPTY_VAR:
                        vals[n] = v
            elif names[0] != EMPTY_VAR:
                vals[names[0]] = value

    def run(self, vals: dict) -> None:
        self.call(self.inputs(vals), vals)

    def explain(self, vals: dict, err: BaseException) -> str:
        """Why ``run`` failed, in the user's terms."""
        from placegroup.ir.printer import format_op

        head = f"While executing op #{self.index} `{self.op.type}`: {format_op(self.op)}"
        if isinstance(err, KeyError):
            missing = [n for _, names, _ in self.ins for n in names if n not in vals]
            if missing:
                return (f"{head}\n  input {missing[0]!r} has no value: feed it, or run the startup "
                        f"program first")
            return f"{head}\n  the kernel did not produce output {err}"
        shapes = {n: tuple(getattr(vals.get(n), "shape", ())) for _, names, _ in self.ins for n in names}
        return f"{head}\n  input shapes {shapes}\n  {type(err).__name__}: {err}"


@dataclasses.dataclass
class Plan:
    """What one executor does with one program (module docstring)."""

    me: object                      # ExecutorId, or None: one process
    ops: list                       # PlannedOp, program order
    initial: list                   # OutEdge: values sent once, at version -1
    carried: list                   # InEdge: loop-carried remote inputs
    holders: dict                   # var -> executors holding it
    feed_meta: dict                 # var -> (Variable, numpy dtype, declared shape)
    persistable: set
    startup: bool                   # the job's startup program (its values are version -1)
    initializes: bool               # only init ops (what the checkpoint schedule asks)
    trains: bool                    # has optimize ops
    answers: frozenset = frozenset()  # vars others may fetch from here

    def remote_of(self, name: str) -> bool:
        """Whether ``name`` is held elsewhere, not here."""
        holders = self.holders.get(name)
        return bool(holders) and self.me is not None and self.me not in holders


def _last_writers(block) -> dict[str, int]:
    last = {}
    for i, op in enumerate(block.ops):
        for n in op.output_arg_names:
            last[n] = i
    return last


def compile_plan(program, me, cluster: Cluster | None, xp) -> Plan:
    """The plan of executor ``me`` (None: one process) for ``program``."""
    block = program.global_block()
    meta = {name: (v, np.dtype(v.dtype), v.shape) for name, v in block.vars.items()}
    persistable = {name for name, v in block.vars.items() if v.persistable}
    ops = block.ops
    facts = dict(feed_meta=meta, persistable=persistable,
                 initializes=bool(ops) and all(op.role == "init" for op in ops),
                 trains=any(op.role == "optimize" for op in ops))
    if me is None:
        planned = [PlannedOp(i, op, xp) for i, op in enumerate(ops)]
        for p in planned:  # one process: nobody else can see a value
            p.grant_inplace(set())
            if p.group is not None:  # a group of one
                p.group, p.ctx.comm = None, LOCAL_COMM
            p.settle_edges()
        return Plan(None, planned, [], [], {}, startup=False, **facts)
    return _distributed(program, block, me, cluster, xp, facts)


def _distributed(program, block, me, cluster: Cluster, xp, facts: dict) -> Plan:
    last = _last_writers(block)
    runners = [cluster.matching(op.place) for op in block.ops]
    # consumers[v] = {executor name: edge kind}: who reads v here-held but does not hold it
    consumers: dict[str, dict] = {}
    for i, op in enumerate(block.ops):
        for slot, names in op.inputs.items():
            for n in names:
                for r in runners[i]:
                    edge = classify(cluster, op, slot, block.var(n), r, i)
                    if edge.kind != "local" and me in edge.sources:
                        consumers.setdefault(n, {})[r.name] = edge.kind
    planned: list[PlannedOp] = []
    taken: set[str] = set()  # a value waited for once per step serves every later reader
    for i, op in enumerate(block.ops):
        if me not in runners[i]:
            continue
        remote, each = [], []
        for slot, names in op.inputs.items():
            for n in names:
                edge = classify(cluster, op, slot, block.var(n), me, i)
                if not RULES[edge.kind].remote:
                    continue
                when = SAME if last.get(n, i) < i else (CARRIED if n in last else CONSTANT)
                if edge.kind == "broadcast":
                    if n in taken:
                        continue
                    taken.add(n)
                e = InEdge(slot, n, edge.kind, tuple(s.name for s in edge.sources), when)
                (each if RULES[edge.kind].per_instance else remote).append(e)
        if len(each) > 1:
            raise PlacementError(f"op #{i} `{op.type}` has {len(each)} each-edges; an op runs once per "
                                 f"arriving instance of one input")
        p = PlannedOp(i, op, xp, rank=runners[i].index(me))
        p.remote, p.each = tuple(remote), (each[0] if each else None)
        p.pushes = tuple(OutEdge(n, tuple(sorted(consumers[n])), _kind(consumers[n]))
                         for n in op.output_arg_names if last.get(n) == i and n in consumers)
        if p.group is not None:  # a collective: every member contributes its own instance
            p.group = tuple(e.name for e in runners[i])
        p.settle_edges()
        planned.append(p)
    # values held here that others read before this program writes them: sent at start
    held = {n for n, v in block.vars.items() if me in cluster.matching(v.place)}
    initial = []
    for n in sorted(held & set(consumers)):
        first_read = min(i for i, op in enumerate(block.ops) if n in op.input_arg_names)
        if n not in last or last[n] >= first_read:
            initial.append(OutEdge(n, tuple(sorted(consumers[n])), _kind(consumers[n])))
    sent = {e.var for p in planned for e in p.pushes} | {e.var for e in initial}
    for p in planned:
        p.grant_inplace(sent)
    holders = {n: cluster.matching(v.place) for n, v in block.vars.items()}
    answers = frozenset(n for n in held if me.role == ExecutorRole.PSERVER)
    return Plan(me, planned, initial, [e for p in planned for e in p.remote if e.when == CARRIED], holders,
                startup=program.cluster.startup, answers=answers, **facts)


def _kind(readers: dict) -> str:
    """The rule by which the consumers of one var read it (one var, one rule)."""
    kinds = set(readers.values())
    return kinds.pop() if len(kinds) == 1 else "+".join(sorted(kinds))


def fetch_edge(plan: Plan, name: str) -> InEdge:
    """The fetch of ``name`` (held elsewhere) from its first holder (executor/edges.py)."""
    return InEdge("Out", name, "fetch", (plan.holders[name][0].name,), SAME)
