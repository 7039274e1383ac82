"""DistributeTranspilerConfig and the dispatchers that deal parameter blocks to pservers."""
from __future__ import annotations

import zlib
from typing import Callable, Sequence

import pydantic


class RoundRobin:
    """Deal blocks to pservers in turn, one counter over all blocks.

    Example::

        rr = RoundRobin(["a:1", "b:2"]); [rr.dispatch(n) for n in "xyz"] == ["a:1", "b:2", "a:1"]
    """

    def __init__(self, pserver_endpoints: Sequence[str]) -> None:
        self.eps = list(pserver_endpoints)
        self.i = 0

    def dispatch(self, block_name: str) -> str:
        ep = self.eps[self.i % len(self.eps)]
        self.i += 1
        return ep

    def reset(self) -> None:
        self.i = 0


class HashName:
    """Place a block at ``crc32(name) % #pservers``: stable across processes (never ``hash()``)."""

    def __init__(self, pserver_endpoints: Sequence[str]) -> None:
        self.eps = list(pserver_endpoints)

    def dispatch(self, block_name: str) -> str:
        return self.eps[zlib.crc32(block_name.encode()) % len(self.eps)]

    def reset(self) -> None:
        pass


class DistributeTranspilerConfig(pydantic.BaseModel):
    """What the transpiler may do (frozen; keyword arguments to ``transpile`` override it).

    Attributes:
        slice_var_up: slice big parameters into blocks over the pservers.
        split_method: ``RoundRobin`` or ``HashName`` (a class taking the pserver list).
        min_block_size: the smallest block, in elements.
        staleness: bounded staleness k. Sync mode: a trainer runs at most k steps ahead
            of the slowest (0 = sync). Async mode: a trainer computes on parameters at most k
            of its own updates old, without waiting for the newest (docs/distributed.md, "Modes").
        merge_steps: local steps merged into one update, applied once per round of
            that many steps (NOTE(merge-steps) in merge.py).
        mp_fused: model parallel: softmax cross-entropy over the shards, never the whole logits.
    """

    model_config = pydantic.ConfigDict(frozen=True, arbitrary_types_allowed=True)
    slice_var_up: bool = True
    split_method: Callable = RoundRobin
    min_block_size: int = pydantic.Field(8192, gt=0)
    staleness: int = pydantic.Field(0, ge=0)
    merge_steps: int = pydantic.Field(1, ge=1)
    mp_fused: bool = True  # model parallel: fuse softmax cross-entropy over the column shards
    sync_mode: bool = True
