"""Sub-blocks: how the executor runs a control-flow op's block.

NOTE(sub-blocks): a control-flow op (``OpDef.sub_block``: ``while``, ``conditional_block``)
names a block of the program in its attr ``sub_block``. When the plan of the op's own block is
compiled, the sub-block's ops are planned too, once (``plan_block``), and the op becomes a
``BlockOp`` that runs them with the loop that runs any plain op (``PlannedOp.run``): ``while``
while its ``Condition`` holds, ``conditional_block`` once when its ``Cond`` does.

Scoping is Fluid's. A block reads the vars of the blocks around it. A var the block declares
lives in the block's own scope for one run of it (one iteration), and a var of an outer block
that the block writes is written there: that is how ``increment(i)`` and the loop's condition
reach the next iteration, and how a branch hands out its result. ``BlockScope`` is that view.

NOTE(step-records): when the program differentiates through the op (a ``while_grad`` or
``conditional_block_grad`` reads its ``StepScopes`` / ``Scope`` var), each run of the block is
kept as a record: the run's own vars, and the values the vars of outer blocks it writes had at
the end of the run, all by reference (a value is never changed in place once written, but for
a tensor array, which the gradient does not read). The gradient op runs its gradient block once
per record, last first, in a scope whose own values start as the record: so a gradient op reads
what its forward op saw, and the ``assign`` ops append_backward adds to both blocks put back an
outer var a forward op overwrote (``i`` before ``increment(i)``), as Fluid's ``increment`` grad
does for a counter. The output gradients reach each run through ``carry``: a var of an outer
block the block reads and writes passes on the gradient of its value at the start of the run
(what the gradient block wrote under its gradient name); a var it only writes passes zero, since
the run overwrote it. A var it only reads sums its gradient over the runs.

A sub-block has no edge of its own: a value another executor holds reaches it as an input of
the op that owns the block (Fluid lists every outer var a block reads in that op's ``X`` or
``Input``), which the op waits for before it runs, like any op's.

Thread-safety: a plan is built once and then only read; a BlockScope lives for one run.
"""
from __future__ import annotations

from collections.abc import MutableMapping

from placegroup.ops.registry import EMPTY_VAR, GRAD_SUFFIX, grad_name
from placegroup.values import TensorArray, is_lod_tensor


class BlockScope(MutableMapping):
    """The values a block's ops see: its own vars (``own``) here, every other var in ``outer``."""

    __slots__ = ("outer", "own", "local")

    def __init__(self, outer, own: frozenset, local: dict | None = None) -> None:
        self.outer, self.own, self.local = outer, own, {} if local is None else local

    def __getitem__(self, name: str):
        local = self.local
        return local[name] if name in local else self.outer[name]

    def __setitem__(self, name: str, value) -> None:
        if name in self.own or name in self.local:
            self.local[name] = value
        else:
            self.outer[name] = value

    def __delitem__(self, name: str) -> None:
        if name in self.local:
            del self.local[name]
        else:
            del self.outer[name]

    def __contains__(self, name) -> bool:
        return name in self.local or name in self.outer

    def __iter__(self):
        yield from self.local
        yield from (n for n in self.outer if n not in self.local)

    def __len__(self) -> int:
        return len(set(self.local) | set(self.outer))


def run_block(body: list, own: frozenset, vals, where: str, local: dict | None = None) -> dict:
    """Run the planned ops ``body`` of a block once over ``vals`` (a fresh scope for the
    block's own vars ``own``, starting as ``local``); ``where`` names the run in an error
    ("iteration 3 of block 1"). Returns the scope's own values."""
    scope = BlockScope(vals, own, local)
    for p in body:
        try:
            p.run(scope)
        except Exception as e:  # the block's op and the run; the owning op adds its own context
            raise RuntimeError(f"in {where}: {p.explain(scope, e)}") from e
    return scope.local


def record(local: dict, vals, written: tuple) -> dict:
    """NOTE(step-records): a run's own values and the end values of the outer vars it writes."""
    for n in written:
        if n not in local and n in vals:
            local[n] = vals[n]
    return local


def _zeros_like(xp, value):
    if value is None or isinstance(value, TensorArray):
        return None if value is None else TensorArray()
    data = value.data if is_lod_tensor(value) else value
    return xp.zeros_like(data)


def _add(a, b):
    if isinstance(a, TensorArray):
        out = TensorArray(a)
        for i, v in enumerate(b):
            if i >= len(out):
                out.append(v)
            elif v is not None:
                out[i] = v if out[i] is None else out[i] + v
        return out
    if is_lod_tensor(a):  # a static input's gradient: every run's has the input's rows and LoD
        return a.with_data(a.data + (b.data if is_lod_tensor(b) else b))
    return a + b


def run_grad(xp, grad: BlockGrad, vals, records: list, where: str) -> None:
    """Run a ``while_grad`` / ``conditional_block_grad`` (NOTE(step-records)): the gradient
    block once per record, last first; then each input's gradient into ``vals``."""
    carry = {}
    for outer, inner in grad.ogs:
        g = vals.get(outer) if outer is not None else None
        if g is None and inner in grad.like:  # an input the op writes: no gradient reached its last value
            g = _zeros_like(xp, vals.get(grad.like[inner]))
        carry[inner] = TensorArray(g) if isinstance(g, TensorArray) else g
    sums: dict = {}
    local: dict = {}
    for k in range(len(records) - 1, -1, -1):
        local = run_block(grad.body, grad.own, vals, f"{where}, run {k} backwards", {**records[k], **carry})
        carry = {n: (local[n] if n in grad.rewritten else _zeros_like(xp, v)) for n, v in carry.items()}
        for x, out, inner in grad.summed:
            g = local.get(inner)
            if g is not None:
                sums[out] = g if out not in sums else _add(sums[out], g)
    for n in grad.restored:  # the outer vars put back, as the ops before the op saw them
        if n in local:
            vals[n] = local[n]
    for x, out, inner in grad.carried:
        vals[out] = carry[inner]
    for x, out, inner in grad.summed:
        vals[out] = sums[out] if out in sums else _zeros_like(xp, vals.get(x))


class BlockGrad:
    """What ``run_grad`` needs of a gradient op, worked out once when it is planned.

    Attributes:
        body: the gradient block's planned ops; own: its own vars.
        ogs: (outer name or None, name in the block) of each output gradient; one with no value
            is read only by runs that did not happen (a branch not taken), but a carried
            input's starts as zeros of the input (``like``: its name in the block -> it).
        rewritten: the output gradients the block writes (a var it reads and writes).
        restored: the outer vars the block puts back (NOTE(block-grad)); after the first run,
            backwards, they hold what they held before the forward op, as in Fluid, where
            ``increment``'s grad counts the loop's counter back down.
        carried: (input, output gradient var, name in the block) of the inputs the forward block
            also writes, whose gradient is carried from run to run.
        summed: the same for the inputs it only reads, whose gradient sums over the runs.
    """

    __slots__ = ("body", "own", "ogs", "like", "rewritten", "carried", "summed", "restored")

    def __init__(self, op, body: list, own: frozenset, x_slot: str) -> None:
        self.body, self.own = body, own
        outs = set(op.inputs.get("Out", ()))
        outer = op.inputs.get("Out" + GRAD_SUFFIX, [])
        inner = op.attrs.get("original_output_grad") or outer
        ogs = list(zip(outer, inner))
        xs = op.inputs.get(x_slot, ())
        inner_x = op.attrs.get("original_input_grad") or [grad_name(x) for x in xs]
        pairs = [(x, g, i) for x, g, i in zip(xs, op.outputs.get(x_slot + GRAD_SUFFIX, ()), inner_x) if g != EMPTY_VAR]
        self.carried = tuple(p for p in pairs if p[0] in outs)
        self.summed = tuple(p for p in pairs if p[0] not in outs)
        self.like = {i: x for x, _, i in self.carried}
        seeded = {i for _, i in ogs}
        ogs += [(None, i) for _, _, i in self.carried if i not in seeded]  # no gradient from after the op
        self.ogs = tuple(ogs)
        written = {n for p in body for n in p.op.output_arg_names}
        self.rewritten = frozenset(i for _, i in self.ogs if i in written)
        self.restored = tuple(sorted(written - own - {i for _, i in self.ogs}))
