"""A program compiled for one executor, once: which ops it runs, their kernels, and every
transfer a step makes.

``compile_plan(program, me, cluster, xp)`` resolves everything that does not change between
steps, so that the interpreter's loop only moves values (NOTE(lean-loop) in
executor/interpreter.py):

* the ops ``me`` runs, in program order, each a ``PlannedOp`` with its kernel, its slot ->
  name lists, its attrs and its ``KernelContext``;
* for each input held elsewhere, an ``InEdge``: its rule (broadcast, gather, each, fetch;
  placegroup/ir/edges.py), its sources and whether it reads this step's value, the last step's
  (loop-carried) or a constant's;
* after each op, the ``OutEdge``s of the values it is the last to write that other executors
  read, and the values others read before this program writes them (sent once, at version -1);
* the vars others may fetch from here, and the holders of every var (for fetches and errors).

One process is the same plan with no remote edges: ``me`` is None and every op runs here.

NOTE(lod-run): LoD costs nothing to a program without it. The plan walks the program once
(``lod_walk``: each op's LoD rule, NOTE(lod-rule) in ops/registry.py, from the data vars'
declared lod_level and what the feed gave) and knows which vars hold ``LoDTensor`` values at
run time. Only an op that reads or writes such a var, or whose kernel wants a LoD, becomes a
``LoDOp``: it hands its kernel the data of each LoD input (the LoDTensor itself for the slots
of ``OpDef.wants_lod``) and wraps each sequence output in the LoD of the input it shares it
with (that input's offsets, not a copy). Every other op is the ``PlannedOp`` it always was,
so dense ops never see a LoDTensor and the lean loop (NOTE(lean-loop)) is unchanged.

Thread-safety: a plan is built once and then only read.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np

from placegroup.errors import PlacementError
from placegroup.executor.blocks import BlockGrad, record, run_block, run_grad
from placegroup.ir.edges import RULES, InEdge, OutEdge
from placegroup.executor.policy import CARRIED, CONSTANT, SAME
from placegroup.ir.cluster import Cluster, classify
from placegroup.ir.framework import infer_lod
from placegroup.ir.place_group import ExecutorRole
from placegroup.ops.control_flow import BLOCK_SLOTS, truthy
from placegroup.ops.registry import EMPTY_VAR, ROUND_END, KernelContext
from placegroup.values import LoDTensor


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

    def gathered_inputs(self, vals: dict, gathered: dict) -> dict:
        """The inputs with those taken from other executors (``gathered``) in place."""
        return {**{s: ([vals[n] for n in names] if dup else vals[names[0]])
                   for s, names, dup in self.ins if s not in gathered}, **gathered}

    def run(self, vals: dict) -> None:
        self.call(self.inputs(vals), vals)

    def missing(self, vals: dict) -> list:
        """This op's inputs that have no value in ``vals`` (a feed not given, a parameter not made)."""
        return [n for _, names, _ in self.ins for n in names if n not in vals]

    def explain(self, vals: dict, err: BaseException) -> str:
        """Why ``run`` failed, in the user's terms."""
        from placegroup.ir.printer import format_op

        head = f"While executing op #{self.index} `{self.op.type}`: {format_op(self.op)}"
        if isinstance(err, KeyError):
            missing = self.missing(vals)
            if missing:
                return (f"{head}\n  input {missing[0]!r} has no value: feed it, or run the startup "
                        f"program first")
            return f"{head}\n  the kernel did not produce output {err}"
        shapes = {n: _shape_of(vals.get(n)) for _, names, _ in self.ins for n in names}
        return f"{head}\n  input shapes {shapes}\n  {type(err).__name__}: {err}"


class BlockOp(PlannedOp):
    """A control-flow op with its sub-block planned (NOTE(sub-blocks) in executor/blocks.py):
    ``while`` runs the block while its Condition holds, ``conditional_block`` once if its Cond
    does, each keeping its runs when the program differentiates through it; their ``_grad``
    ops run the gradient block over those runs (NOTE(step-records))."""

    __slots__ = ("body", "own", "cond", "loop", "scalar", "keep", "written", "grad", "runs")

    def __init__(self, index: int, op, xp, rank: int, body: list, own: frozenset) -> None:
        super().__init__(index, op, xp, rank)
        self.body, self.own = body, own
        x_slot, runs_slot = BLOCK_SLOTS[op.type]
        self.grad = BlockGrad(op, body, own, x_slot) if op.opdef.role == "backward" else None
        self.runs = ((op.inputs if self.grad else op.outputs).get(runs_slot) or [None])[0]
        self.loop = "Condition" in op.inputs
        self.cond = list(op.inputs.get("Condition") or op.inputs.get("Cond", ()))
        self.scalar = self.loop or bool(op.attrs.get("is_scalar_condition"))
        read = {n for b in op.block.program.blocks for o in b.ops for n in o.input_arg_names}
        self.keep = self.runs if self.grad is None and self.runs in read else None  # a gradient op reads them
        self.written = tuple(sorted({n for p in body for n in p.op.output_arg_names} - own))

    def call(self, ins: dict, vals) -> None:
        kind, block = self.op.type, self.attrs["sub_block"]
        if self.grad is not None:
            runs = vals.get(self.runs)
            if runs is None:
                raise RuntimeError(f"{kind}: the forward op kept no runs to differentiate (was it run with "
                                   f"is_test, or in another program?)")
            run_grad(self.xp, self.grad, vals, runs, f"block {block}")
            return
        runs = []
        if not self.loop:
            if truthy(kind, [vals[c] for c in self.cond], self.scalar):
                local = run_block(self.body, self.own, vals, f"block {block}")
                if self.keep:
                    runs.append(record(local, vals, self.written))
            else:  # a branch not taken leaves its outputs unset, as Fluid does (select_input skips them)
                for n in self.op.outputs.get("Out", ()):
                    vals.setdefault(n, None)
        else:
            n = 0
            while truthy(kind, vals[self.cond[0]]):
                local = run_block(self.body, self.own, vals, f"iteration {n} of block {block}")
                if self.keep:
                    runs.append(record(local, vals, self.written))
                n += 1
        if self.keep:
            vals[self.keep] = runs

    def run(self, vals) -> None:
        self.call({}, vals)


def _shape_of(value) -> tuple | str:
    if isinstance(value, LoDTensor):  # its data's shape and sequence lengths
        return f"{tuple(value.data.shape)} lod={value.recursive_sequence_lengths()}"
    return tuple(getattr(value, "shape", ()))


def _data(value):
    return value.data if type(value) is LoDTensor else value


class LoDOp(PlannedOp):
    """A PlannedOp that reads or writes sequences (NOTE(lod-run)): its kernel gets the data of
    each LoD input (the LoDTensor for the slots its OpDef ``wants_lod``), and each output that
    shares an input's LoD gets it back."""

    __slots__ = ("keep", "wrap", "flat")

    def __init__(self, index: int, op, xp, rank: int, levels: dict, sources: dict) -> None:
        super().__init__(index, op, xp, rank)
        self.keep = frozenset(op.opdef.wants_lod)
        outs = op.output_arg_names
        # (output, the input whose LoD it keeps) for the "share" outputs; outputs that are no
        # sequences, to unwrap should a kernel return a LoDTensor there
        self.wrap = tuple((n, sources[n]) for n in outs if levels.get(n, 0) > 0 and n in sources)
        self.flat = tuple(n for n in outs if levels.get(n, 0) == 0)

    def inputs(self, vals: dict, gathered: dict | None = None) -> dict:
        keep, ins = self.keep, {}
        for slot, names, dup in self.ins:
            if gathered and slot in gathered:  # from other executors (a LoD value travels whole)
                got = gathered[slot]
                ins[slot] = got if slot in keep else [_data(v) for v in got] if isinstance(got, list) else _data(got)
            elif dup:
                ins[slot] = [vals[n] for n in names] if slot in keep else [_data(vals[n]) for n in names]
            else:
                ins[slot] = vals[names[0]] if slot in keep else _data(vals[names[0]])
        return ins

    def gathered_inputs(self, vals: dict, gathered: dict) -> dict:
        return self.inputs(vals, gathered)

    def call(self, ins: dict, vals: dict) -> None:
        sources = [vals.get(src) for _, src in self.wrap]  # before the kernel may replace one
        super().call(ins, vals)
        for (name, _), src in zip(self.wrap, sources):
            value = vals.get(name)
            # the output keeps the rows it shares the LoD of (a reshape may not: left plain)
            if (type(src) is LoDTensor and src.offsets and value is not None and type(value) is not LoDTensor
                    and getattr(value, "ndim", 0) and value.shape[0] == src.offsets[-1][-1]):
                vals[name] = src.with_data(value)
        for name in self.flat:
            if type(vals.get(name)) is LoDTensor:
                vals[name] = vals[name].data


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
    startup: bool                   # a startup program: the job's (its values are version -1), or
                                    # in one process one of init ops only (checkpoints resume after it)
    initializes: bool               # only init ops
    trains: bool                    # has optimize ops
    answers: frozenset = frozenset()  # vars others may fetch from here
    serves: bool = False            # a pserver's main program: its first run serves the whole job
    counted: bool = False           # its runs are the training steps checkpoints count

    def remote_of(self, name: str) -> bool:
        """Whether ``name`` is held elsewhere, not here."""
        holders = self.holders.get(name)
        return bool(holders) and self.me is not None and self.me not in holders


def lod_walk(block, fed: dict | None = None, outer: dict | None = None) -> tuple[dict, dict] | None:
    """NOTE(lod-run): var -> lod_level at run time, and var -> the input var whose LoD it
    shares, from one walk over ``block``'s ops in program order; ``fed`` gives the lod_level of
    data vars fed a deeper LoD than declared (Executor._feed); ``outer``: the levels of the
    blocks around a sub-block. None for a program with no LoD anywhere (no var declares one,
    nothing fed has one, no op makes one)."""
    if not fed and not any(outer.values() if outer else ()) and not any(
            v.lod_level for v in block.vars.values()) and not any(
            callable(op.opdef.lod) or op.opdef.wants_lod for op in block.ops):
        return None
    levels = {**(outer or {}), **{n: v.lod_level for n, v in block.vars.items()}}
    levels.update(fed or {})
    sources: dict[str, str] = {}
    for op in block.ops:
        for name, (level, src) in infer_lod(op, levels).items():
            v = block.vars.get(name)
            if v is not None and v.is_data:
                continue
            levels[name] = level
            if src is not None:
                sources[name] = src
            else:
                sources.pop(name, None)
    return levels, sources


def planned_op(index: int, op, xp, rank: int, lod: tuple | None) -> PlannedOp:
    """A BlockOp for a control-flow op (its sub-block planned once, NOTE(sub-blocks)), a LoDOp
    where the op touches a sequence (NOTE(lod-run)), else a PlannedOp."""
    if op.opdef.sub_block:
        block = op.block.program.block(op.attrs["sub_block"])
        inner = lod_walk(block, outer=lod[0] if lod is not None else None)
        body = []
        for i, sub in enumerate(block.ops):
            p = planned_op(i, sub, xp, rank, inner)
            p.grant_inplace(set())
            p.settle_edges()  # one process's op: a block has no edge of its own
            body.append(p)
        return BlockOp(index, op, xp, rank, body, frozenset(block.vars))
    if lod is not None:
        levels, sources = lod
        if op.opdef.wants_lod or any(levels.get(n, 0) for n in op.input_arg_names + op.output_arg_names):
            return LoDOp(index, op, xp, rank, levels, sources)
    return PlannedOp(index, op, xp, rank)


def _last_writers(block) -> dict[str, int]:
    last = {}
    for i, op in enumerate(block.ops):
        for n in op.output_arg_names:
            last[n] = i
    return last


def compile_plan(program, me, cluster: Cluster | None, xp, fed_lod: dict | None = None) -> Plan:
    """The plan of executor ``me`` (None: one process) for ``program``; ``fed_lod``: data vars
    fed a deeper LoD than they declare, var -> lod_level (NOTE(lod-run))."""
    block = program.global_block()
    lod = lod_walk(block, fed_lod)
    meta = {name: (v, np.dtype(v.dtype), v.shape) for name, v in block.vars.items()}
    persistable = {name for name, v in block.vars.items() if v.persistable}
    ops = block.ops
    facts = dict(feed_meta=meta, persistable=persistable,
                 initializes=bool(ops) and all(op.role == "init" for op in ops),
                 trains=any(op.role == "optimize" for op in ops))
    if me is None:
        planned = [planned_op(i, op, xp, 0, lod) for i, op in enumerate(ops)]
        for p in planned:  # one process: nobody else can see a value
            p.grant_inplace(set())
            if p.group is not None:  # a group of one
                p.group, p.ctx.comm = None, LOCAL_COMM
            p.settle_edges()
        return Plan(None, planned, [], [], {}, startup=facts["initializes"], counted=facts["trains"], **facts)
    return _distributed(program, block, me, cluster, xp, facts, lod)


def _distributed(program, block, me, cluster: Cluster, xp, facts: dict, lod) -> Plan:
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
                rule = RULES[edge.kind]
                if not rule.remote:
                    continue
                when = SAME if last.get(n, i) < i else (CARRIED if n in last else CONSTANT)
                if rule.once_per_step:
                    if n in taken:
                        continue
                    taken.add(n)
                e = InEdge(slot, n, edge.kind, tuple(s.name for s in edge.sources), when)
                (each if rule.per_instance else remote).append(e)
        if len(each) > 1:
            raise PlacementError(f"op #{i} `{op.type}` has {len(each)} each-edges; an op runs once per "
                                 f"arriving instance of one input")
        p = planned_op(i, op, xp, runners[i].index(me), lod)
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
    startup = program.cluster.startup
    serves = me.role == ExecutorRole.PSERVER and not startup
    return Plan(me, planned, initial, [e for p in planned for e in p.remote if e.when == CARRIED], holders,
                startup=startup, answers=answers, serves=serves, counted=not startup and not serves, **facts)


def _kind(readers: dict) -> str:
    """The rule by which the consumers of one var read it (one var, one rule)."""
    kinds = set(readers.values())
    return kinds.pop() if len(kinds) == 1 else "+".join(sorted(kinds))


def fetch_edge(plan: Plan, name: str) -> InEdge:
    """The fetch of ``name`` (held elsewhere) from its first holder (placegroup/ir/edges.py)."""
    return InEdge("Out", name, "fetch", (plan.holders[name][0].name,), SAME)
