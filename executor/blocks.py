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

A sub-block has no edge of its own: a value another executor holds reaches it as an input of
the op that owns the block (Fluid lists every outer var a block reads in that op's ``X`` or
``Input``), which the op waits for before it runs, like any op's.

Thread-safety: a plan is built once and then only read; a BlockScope lives for one run.
"""
from __future__ import annotations

from collections.abc import MutableMapping


class BlockScope(MutableMapping):
    """The values a block's ops see: its own vars (``own``) here, every other var in ``outer``."""

    __slots__ = ("outer", "own", "local")

    def __init__(self, outer, own: frozenset) -> None:
        self.outer, self.own, self.local = outer, own, {}

    def __getitem__(self, name: str):
        local = self.local
        return local[name] if name in local else self.outer[name]

    def __setitem__(self, name: str, value) -> None:
        if name in self.own:
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


def run_block(body: list, own: frozenset, vals, where: str) -> None:
    """Run the planned ops ``body`` of a block once over ``vals`` (a fresh scope for the
    block's own vars ``own``); ``where`` names the run in an error ("iteration 3 of block 1")."""
    scope = BlockScope(vals, own)
    for p in body:
        try:
            p.run(scope)
        except Exception as e:  # the block's op and the run; the owning op adds its own context
            raise RuntimeError(f"in {where}: {p.explain(scope, e)}") from e
