"""The placement pass (the generic part): every op and var gets a PlaceGroup.

Rules, in order:
1. Each parameter (or parameter block) with an optimizer is dealt to a pserver by the
   dispatcher (RoundRobin / HashName), in the order its ops appear, unless a pass pinned it
   (``var.attrs["pinned"]``: embedding shard k lives on pserver k). The ops that belong to it
   (``op.param``: its update, a shard's prefetch) run there, and the vars they write live there.
2. An op that combines several parameters' updates (``_cross_param``: a global-norm clip's
   factor) runs where the updates that read it run: on their one pserver, or on every
   pserver, each reading the others' inputs (NOTE(clip-placement) in placegroup/model/clip.py).
3. Learning-rate ops (role ``lr_sched``) run on every pserver (``pserver``, replicated), and
   the vars they write live on every pserver: each pserver keeps its own step counter. When a
   trainer's op reads one too (a model-parallel shard's update), they run, and their vars
   live, on every trainer as well: each executor counts the same steps.
4. A persistable var that only pserver-side ops read and nothing in the main program writes
   (a constant learning rate) lives with its readers: on the one pserver that reads it, or
   replicated on all pservers; read by both roles, it is replicated on both.
5. Everything else runs on, and lives on, every trainer (``trainer``, replicated).
With no pservers (collective data parallel) everything is ``trainer``.
The startup program's vars take their main-program places and its ops run where their output
lives. Then every edge is checked (``placegroup.ir.cluster.check_placement``).
"""
from __future__ import annotations

import hashlib

from placegroup.ir.cluster import check_placement, reads_across_pservers
from placegroup.errors import PlacementError
from placegroup.ir.place_group import PlaceGroup
from placegroup.ops.registry import CROSS_PARAM
from placegroup.transpiler.passes import Job, PassResult

TRAINER = PlaceGroup.parse("trainer")
PSERVERS = PlaceGroup.parse("pserver")
BOTH = PlaceGroup(roles=("pserver", "trainer"))


def _place_ops(block, ctx) -> dict:
    """Ops get their places; returns param block -> its pserver PlaceGroup."""
    dispatcher = ctx.split_method(list(ctx.pservers))
    homes: dict[str, PlaceGroup] = {}
    for op in block.ops:
        if op.param is not None and block.var(op.param).attrs.get("model_parallel"):
            op.place = TRAINER  # a column shard stays with its trainer (the model-parallel pass)
        elif op.param is not None:
            if op.param not in homes:
                pinned = block.var(op.param).attrs.get("pinned")
                homes[op.param] = PlaceGroup.of("pserver", pinned or dispatcher.dispatch([op.param])[0])
            op.place = homes[op.param]
        elif op.role == "lr_sched":
            op.place = PSERVERS
        elif op.attrs.get(CROSS_PARAM):
            continue  # placed below, with its readers
        else:
            op.place = TRAINER
    for op in block.ops:
        if op.attrs.get(CROSS_PARAM):
            out = set(op.output_arg_names)
            places = {o.place for o in block.ops if out & set(o.input_arg_names)}
            op.place = places.pop() if len(places) == 1 else PSERVERS
    lr_out = {n for op in block.ops if op.role == "lr_sched" for n in op.output_arg_names}
    if any(op.place == TRAINER and lr_out & set(op.input_arg_names) for op in block.ops):
        for op in block.ops:
            if op.role == "lr_sched":
                op.place = BOTH
    return homes


def _place_vars(block) -> None:
    writers: dict[str, set] = {}
    readers: dict[str, set] = {}
    for op in block.ops:
        for n in op.output_arg_names:
            writers.setdefault(n, set()).add(op.place)
        for n in op.input_arg_names:
            readers.setdefault(n, set()).add(op.place)
    for name, var in block.vars.items():
        w = writers.get(name, set())
        r = readers.get(name, set())
        if len(w) > 1:
            raise PlacementError(f"var {name!r} is written on {sorted(map(str, w))}; a var lives in "
                                 f"one place")
        if w:
            var.place = next(iter(w))
        elif var.persistable and r and all(pg.roles == PSERVERS.roles for pg in r):
            var.place = next(iter(r)) if len(r) == 1 else PSERVERS
        elif var.persistable and r and len({pg.roles for pg in r}) > 1:
            # a constant both roles read (the learning rate of pserver-held and of
            # model-parallel parameters): each executor of each role keeps its own copy
            var.place = PlaceGroup(roles=tuple(sorted({role for pg in r for role in pg.roles})))
        else:
            var.place = TRAINER


def _place_startup(startup, main) -> None:
    mb = main.global_block()
    for name, var in startup.global_block().vars.items():
        var.place = mb.var(name).place if mb.has_var(name) else TRAINER
    for op in startup.global_block().ops:
        outs = {startup.global_block().var(n).place for n in op.output_arg_names}
        if len(outs) != 1:
            raise PlacementError(f"startup op `{op.type}` writes vars in several places: "
                                 f"{sorted(map(str, outs))}")
        op.place = outs.pop()


def _place_block(program, owner) -> None:
    """A control-flow op's block runs where the op runs (NOTE(sub-blocks) in executor/blocks.py):
    its ops and vars take the op's place. The block has no edge of its own, so every outer var it
    reads must be an input of the op, which waits for it before the op runs."""
    block = program.block(owner.attrs["sub_block"])
    given = set(owner.input_arg_names)
    for op in block.ops:
        op.place = owner.place
        for n in op.input_arg_names:
            if n not in block.vars and n not in given and not _declared_between(program, block, n, owner.block):
                raise PlacementError(f"block {block.idx} of `{owner.type}` reads {n!r}, which is not an input of the "
                                     f"op: a block has no edge of its own, so list {n!r} in the op's inputs")
        if op.opdef.sub_block:
            _place_block(program, op)
    for var in block.vars.values():
        var.place = owner.place


def _declared_between(program, block, name: str, outer) -> bool:
    """Whether ``name`` is declared by a block between ``block`` and ``outer`` (exclusive)."""
    b = program.block(block.parent_idx) if block.parent_idx >= 0 else None
    while b is not None and b.idx != outer.idx:
        if name in b.vars:
            return True
        b = program.block(b.parent_idx) if b.parent_idx >= 0 else None
    return False


def place(job: Job, ctx) -> PassResult:
    job = job.copy()
    block = job.main.global_block()
    if ctx.pservers:
        _place_ops(block, ctx)
        _place_vars(block)
    else:  # collective data parallel: the trainers are the group, everything replicated on them
        if not ctx.trainer_endpoints and ctx.trainers > 1:
            raise PlacementError("with no pservers the trainers form the group, and trainer-to-trainer "
                                 "edges need their endpoints: pass trainers='ip:port,ip:port,...'")
        for op in block.ops:
            op.place = TRAINER
        for var in block.vars.values():
            var.place = TRAINER
    for op in block.ops:
        if op.opdef.sub_block:
            _place_block(job.main, op)
    _place_startup(job.startup, job.main)
    digest = hashlib.blake2b((str(job.main) + str(job.startup)).encode(), digest_size=16).hexdigest()
    job.main.cluster = ctx.cluster(digest=digest)
    mesh = reads_across_pservers(job.main)  # both programs say so: one link serves both
    for p, startup in ((job.main, False), (job.startup, True)):
        p.cluster = ctx.cluster(digest=digest, startup=startup, pserver_mesh=mesh)
        p._bump()
        check_placement(p)
    return PassResult(job, True)
