"""Data parallelism over places, as Fluid 1.8 runs ``CompiledProgram.with_data_parallel``.

NOTE(data-parallel): Fluid runs a data-parallel step on N places at once: each place runs the
forward and backward ops on its own batch (its own LoD, its own padding), in its own scope;
the places' gradients are reduced into one; the optimizer ops update the parameters once with
it. ``expand`` writes that step as one program that this executor runs place after place:

* the ops that run per place (this executor's forward, loss and backward ops) are repeated N
  times, one after the other, each copy reading and writing its place's vars ``v@PLACE<i>``.
  A place's data vars are ``x@PLACE<i>``: ``exe.run`` takes one feed dict per place, or one
  dict that it splits as Fluid does (``split_feed``), and a reader gives one batch per place;
* the gradient a place seeds its backward with is ``1/N`` (``GradientScaleStrategy.
  CoeffNumDevice``, the default) or 1 (``One``), as Fluid's scale-loss-grad step does;
* a per-place value that another op reads (a gradient the optimizer or a pserver takes, ids a
  sparse table's prefetch takes) is first joined under its own name by one op: a gradient is
  the sum of the places' (a ``sum``, place 0 first: Fluid's reduce), any other value the
  places' parts joined along dim 0 (``concat_places``). So a trainer sends one merged
  gradient a step, and a pserver sees the same program it would without places;
* forward ops whose every value goes to another executor (a distributed table's id split)
  run once over the joined batch, so the pserver looks each id up once;
* state that forward ops update (batch_norm's moving mean, auc's counters): with
  ``ReduceStrategy.AllReduce`` (the default) each place keeps its own copy, place 0's being
  the var itself and place i's ``v@PLACE<i>``, which starts as a copy of the var at the first
  run (Fluid's broadcast of the parameters to the places); with ``Reduce`` the places share
  the var, each updating it in turn;
* a fetch gives every place's value joined along dim 0, as Fluid's: a [1] loss gives [N], a
  var that is not per place (a parameter) N copies of it;
* a loop's or branch's block (and its gradient block) is written out per place too, reading
  and writing the place's vars (``_place_block``); the ops that make what a place's op writes
  over (a loop's counter, an empty tensor array) run per place as well.

The numbers are Fluid's: the per-place ops compute what they compute on one place, and the
places' gradients are summed in place order. Running places one after the other instead of
on N threads changes only the order in which shared state (``Reduce``) is updated.

Thread-safety: an expansion is built once per (program version, number of places) and then
only read.
"""
from __future__ import annotations

import copy
import dataclasses
from collections import defaultdict

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ir.cluster import Cluster
from placegroup.ir.framework import Program
from placegroup.ops.registry import EMPTY_VAR, GRAD_SUFFIX, grad_name
from placegroup.values import LoDTensor, concat_lod_tensors

_PER_PLACE_ROLES = ("forward", "loss", "backward")


def place_name(name: str, i: int) -> str:
    """The name of place ``i``'s copy of var ``name``."""
    return f"{name}@PLACE{i}"


@dataclasses.dataclass(frozen=True)
class Expanded:
    """A program written out for ``n`` places (module docstring) and how to feed and fetch it.

    Attributes:
        program: what the executor runs.
        n: the number of places.
        per_place: the vars each place has its own copy of, named ``place_name(v, i)``.
        own_state: persistable vars each place keeps its own copy of (place 0's is the var).
        summed: per-place vars joined as a sum under their own name (the gradients others read).
    """

    program: Program
    n: int
    per_place: frozenset
    own_state: frozenset
    summed: frozenset

    def names(self, name: str) -> list[str]:
        """Each place's name for var ``name``, place 0 first."""
        if name in self.per_place and name not in self.summed:  # a summed one: N copies of the sum
            return [place_name(name, i) for i in range(self.n)]
        if name in self.own_state:
            return [name] + [place_name(name, i) for i in range(1, self.n)]
        return [name] * self.n

    def feed(self, feeds: list[dict]) -> dict:
        """One feed dict per place -> the feed of the expanded program.

        Raises:
            ProgramError: the places' dicts name different vars.
        """
        keys = set(feeds[0])
        out = {}
        for i, d in enumerate(feeds):
            if set(d) != keys:
                raise ProgramError(f"feed for place {i} gives {sorted(d)}, place 0 gives {sorted(keys)}")
            for name, value in d.items():
                out[place_name(name, i) if name in self.per_place else name] = value
        return out

    def join(self, fetched: list) -> list:
        """The values of a fetch list ``names`` gave, each fetch's places' values joined."""
        return [merge_fetched(fetched[i:i + self.n]) for i in range(0, len(fetched), self.n)]

    def init_state(self, vals: dict) -> None:
        """Give each place its own copy of the state it keeps, from the var's value, the first
        time (as Fluid copies the parameters to the places when it first runs)."""
        for name in self.own_state:
            if name not in vals:
                continue
            for i in range(1, self.n):
                if place_name(name, i) not in vals:
                    vals[place_name(name, i)] = copy.deepcopy(vals[name])


def split_feed(feed: dict, n: int) -> list[dict]:
    """One feed dict cut into the places' dicts as Fluid 1.8 cuts it: along the batch (a
    LoDTensor's top-level sequences), ``ceil(batch / n)`` samples a place, so the last place
    may get fewer, and a batch of fewer than ``n`` samples feeds fewer places.

    Raises:
        ProgramError: feeds of different batch sizes.
    """
    sizes = {name: (len(v.offsets[0]) - 1 if isinstance(v, LoDTensor) and v.offsets else len(np.asarray(v)))
             for name, v in feed.items()}
    if len(set(sizes.values())) > 1:
        raise ProgramError(f"feed: the vars have different batch sizes {sizes}, so they cannot be cut into "
                           f"{n} places' batches; give one feed dict per place")
    batch = next(iter(sizes.values()), 0)
    if batch == 0:
        return [dict(feed) for _ in range(n)]
    width = -(-batch // n)
    bounds = list(range(0, batch, width)) + [batch]
    return [{name: _rows(v, lo, hi) for name, v in feed.items()} for lo, hi in zip(bounds, bounds[1:])]


def _rows(value, lo: int, hi: int):
    """Samples ``lo:hi`` of a fed value (a LoDTensor's top-level sequences lo:hi)."""
    if not isinstance(value, LoDTensor) or not value.offsets:
        return (value.data if isinstance(value, LoDTensor) else np.asarray(value))[lo:hi]
    levels, a, b = [], lo, hi
    for o in value.offsets:
        levels.append(o[a:b + 1] - o[a])
        a, b = int(o[a]), int(o[b])
    return LoDTensor(value.data[a:b], tuple(levels), check=False)


def merge_fetched(values: list):
    """The places' values of one fetch joined along dim 0, as Fluid joins them (their LoDs
    too); a value that is not an array (a SelectedRows) is place 0's."""
    if all(isinstance(v, LoDTensor) for v in values):
        return concat_lod_tensors(np, values)
    if all(isinstance(v, np.ndarray) for v in values):  # a fetch's own ndarray type is kept
        return np.concatenate([np.atleast_1d(v) for v in values], axis=0).view(type(values[0]))
    return values[0]


def _local_ops(program: Program) -> list[bool]:
    """Whether this program's executor runs each op (every op when it runs alone)."""
    ops = program.global_block().ops
    if program.executor is None or program.cluster is None:
        return [True] * len(ops)
    cluster = Cluster.from_program(program)
    me = cluster.find(program.executor)
    return [me in cluster.matching(op.place) for op in ops]


def _per_place_ops(block, local: list[bool], seed: str | None) -> set[int]:
    """The ops each place runs: this executor's forward, loss and backward ops that read a
    place's own value (its data, or what such an op made), and the seed of the loss gradient.
    A parameter's gradient is read joined: the ops after it (weight decay, clipping) run once
    on the places' sum, as Fluid runs them after its all-reduce. Forward ops whose values all
    go to other executors' ops (or to ops left out before) run once over the joined batch."""
    ops = block.ops
    whole = {grad_name(v.name) for v in block.vars.values() if v.is_parameter}
    whole |= {n for n in block.vars if n.endswith(GRAD_SUFFIX) and n[:-len(GRAD_SUFFIX)] not in block.vars}
    own = {n for n, v in block.vars.items() if v.is_data}
    chosen = set()
    for i, op in enumerate(ops):
        if not local[i] or op.role not in _PER_PLACE_ROLES:
            continue
        if any(n in own and n not in whole for n in op.input_arg_names) or seed in op.output_arg_names:
            chosen.add(i)
            own.update(op.output_arg_names)
    readers = defaultdict(list)
    for j, op in enumerate(ops):
        for name in op.input_arg_names:
            readers[name].append(j)
    left: set[int] = set()
    changed = True
    while changed:
        changed = False
        for i in sorted(chosen - left, reverse=True):
            if ops[i].role != "forward":
                continue
            outs = [j for name in ops[i].output_arg_names for j in readers[name] if j != i]
            if outs and all(not local[j] or j in left for j in outs):
                left.add(i)
                changed = True
    return chosen - left


def _place_block(program: Program, idx: int, rename, copies: dict, in_place: bool, pristine: dict) -> int:
    """The index of place's copy of block ``idx`` (with the blocks its ops own): its ops read and
    write the place's vars (``rename``); its own vars keep their names, as each run of a block has
    its own. Place 0 renames the blocks themselves (``in_place``); the others get new blocks, a
    gradient block's parent being the place's copy of its forward block (``copies``); every copy
    is made from the block's ops as they were (``pristine``)."""
    src = program.block(idx)
    source_ops = pristine.setdefault(idx, list(src.ops))
    if in_place:
        dst = src
    else:
        dst = program._create_block(parent_idx=copies.get(src.parent_idx, src.parent_idx))
        program._rollback()
        for name, var in src.vars.items():
            dst.vars[name] = copy.copy(var)
            dst.vars[name].block = dst
    copies[idx] = dst.idx
    ops, own = [], src.vars.keys()
    for op in source_ops:
        attrs = dict(op.attrs)
        if op.opdef.sub_block:
            attrs["sub_block"] = _place_block(program, attrs["sub_block"], rename, copies, in_place, pristine)
        twin = dst._make_op(op.type, {k: [x if x in own else rename(x) for x in v] for k, v in op.inputs.items()},
                            {k: [x if x == EMPTY_VAR or x in own else rename(x) for x in v]
                             for k, v in op.outputs.items()}, attrs, op.role, op.place, infer=False)
        twin.edges, twin.param = dict(op.edges), op.param
        ops.append(twin)
    dst.ops = ops
    return dst.idx


def expand(program: Program, n: int, loss_name: str | None, coeff: float, own_state: bool) -> Expanded:
    """``program`` written out for ``n`` places (module docstring).

    Args:
        program: the program (a distributed job's executor view too).
        n: the number of places.
        loss_name: the loss var, whose gradient each place seeds with ``coeff``.
        coeff: ``1/n`` (CoeffNumDevice) or 1 (One).
        own_state: each place keeps its own copy of the state forward ops update (AllReduce).

    Returns:
        The expanded program with its names.
    """
    p = program.clone()
    p.executor = program.executor
    block = p.global_block()
    ops = list(block.ops)
    seed = grad_name(loss_name) if loss_name else None
    local = _local_ops(p)
    per_op = _per_place_ops(block, local, seed)
    while True:  # an op that makes what a place's op writes over (a loop's counter, an empty array) is a place's too
        written = {name for i in per_op for name in ops[i].output_arg_names}
        read = {name for i in per_op for name in ops[i].input_arg_names}
        per_place = {v for v in written if not block.var(v).persistable}
        per_place |= {v for v in read if block.has_var(v) and block.var(v).is_data}
        more = {j for j, op in enumerate(ops) if j not in per_op and local[j] and op.role in _PER_PLACE_ROLES
                and per_place.intersection(op.output_arg_names)}
        if not more:
            break
        per_op |= more
    state = {v for v in written if block.var(v).persistable} if own_state else set()
    for v in sorted(per_place | state):
        var = block.var(v)
        for i in range(0 if v in per_place else 1, n):
            block.create_var(name=place_name(v, i), shape=var.shape, dtype=var.dtype, type=var.type,
                             lod_level=var.lod_level, is_data=var.is_data, stop_gradient=var.stop_gradient,
                             persistable=var.persistable, place=var.place, attrs=dict(var.attrs))
    # a per-place value another op reads is joined right before its first such reader
    join_at: dict[int, list] = defaultdict(list)
    summed = set()
    for v in sorted(per_place):
        outside = [j for j, op in enumerate(ops) if j not in per_op and v in op.input_arg_names]
        if outside:
            if GRAD_SUFFIX in v:
                summed.add(v)
            join_at[min(outside)].append(v)
    writer = {name: ops[i] for i in sorted(per_op) for name in ops[i].output_arg_names}
    blocks: list[dict] = [{} for _ in range(n)]  # per place: a block's index -> its place's copy
    pristine: dict = {}  # a block's index -> its ops before place 0 renamed them
    new_ops = []
    for j, op in enumerate(ops):
        for v in join_at.get(j, ()):
            src = writer.get(v) or next(ops[i] for i in sorted(per_op) if v in ops[i].input_arg_names)
            kind = "sum" if v in summed else "concat_places"
            new_ops.append(block._make_op(kind, {"X": [place_name(v, i) for i in range(n)]}, {"Out": [v]}, None,
                                          src.role, src.place, infer=False))
        if j not in per_op:
            new_ops.append(op)
            continue
        for i in range(n):
            def rename(name: str, i: int = i) -> str:
                if name in per_place:
                    return place_name(name, i)
                return place_name(name, i) if name in state and i > 0 else name
            attrs = op.attrs
            if op.opdef.sub_block:  # a loop's or branch's block, written out for the place too
                attrs = {**attrs, "sub_block": _place_block(p, attrs["sub_block"], rename, blocks[i], i == 0,
                                                                 pristine)}
            twin = block._make_op(op.type, {k: [rename(x) for x in v] for k, v in op.inputs.items()},
                                  {k: [x if x == EMPTY_VAR else rename(x) for x in v] for k, v in op.outputs.items()},
                                  attrs, op.role, op.place, infer=False)
            twin.edges, twin.param = dict(op.edges), op.param
            if seed is not None and op.type == "fill_constant" and op.output_arg_names == [seed]:
                twin.attrs["value"] = float(coeff)
            new_ops.append(twin)
    block.ops = new_ops
    p.extra = {k: v for k, v in p.extra.items() if k != "readers"}
    p.provenance = [*p.provenance, f"data_parallel({n})"]
    p._bump()
    return Expanded(p, n, frozenset(per_place), frozenset(state), frozenset(summed))
