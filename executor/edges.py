"""Edge rules: how an op's input held elsewhere is taken, and where its outputs go.

For op O run by executor e, each input var V is one of the kinds below (computed once per
program by ``placegroup.ir.cluster.classify``). Each kind is one entry of ``RULES``, in the
manner of a rule table: the interpreter asks the entry of an edge what to wait for
(``keys``), where the values it got go (``put``), whether the op runs once per arriving
instance (``per_instance``), and where the op's outputs are delivered (``replies``: to the
instance that triggered it, or to every consumer). Versions are not the rules' business:
the version policy (executor/policy.py) picks them.

============  ================================================================================
local         e holds V: nothing to take or send.
broadcast     V lives on one other executor; e waits for its value.
gather        V is replicated on the trainers and O, on one pserver, takes every instance (the
              ``sum`` that merges gradients in sync mode): it waits for all, in trainer-id
              order; a trainer that has said done contributes nothing.
each          as gather, but O runs once per arriving instance, and what O makes goes back to
              the instance that triggered it (async updates; rows prefetched for a trainer).
collective    O is a collective op (allreduce, allgather, reduce-scatter) over a group; each
              member contributes its own instance through the op's communicator, so the
              interpreter takes nothing: the kernel does.
fetch         a trainer's fetch of a var another executor holds: it asks the holder for the
              value of its step, which the holder answers once it has finished that step.
============  ================================================================================

Thread-safety: the table is immutable.
"""
from __future__ import annotations

import dataclasses
from typing import Callable



@dataclasses.dataclass(frozen=True)
class InEdge:
    """A remote input of one planned op: slot ``slot`` reads ``var`` by rule ``kind`` from
    ``sources`` (wire names, trainer-id order); ``when`` is ``same``, ``carried`` or
    ``constant`` (executor/policy.py)."""

    slot: str
    var: str
    kind: str
    sources: tuple
    when: str


@dataclasses.dataclass(frozen=True)
class OutEdge:
    """A value this executor sends after the op that last writes it: ``var`` to ``peers``,
    each of which reads it by rule ``kind``."""

    var: str
    peers: tuple
    kind: str


def _one(edge: InEdge, version: int) -> list:
    return [(edge.var, version, edge.sources[0])]


def _every(edge: InEdge, version: int) -> list:
    return [(edge.var, version, src) for src in edge.sources]


def _none(edge: InEdge, version: int) -> list:
    return []


def _put_value(edge: InEdge, values: list, vals: dict, gathered: dict) -> None:
    vals[edge.var] = values[0]


def _put_list(edge: InEdge, values: list, vals: dict, gathered: dict) -> None:
    gathered[edge.slot] = [v for v in values if v is not None]   # None: a source that is done


def _put_slot(edge: InEdge, values: list, vals: dict, gathered: dict) -> None:
    gathered[edge.slot] = values[0]


@dataclasses.dataclass(frozen=True)
class EdgeRule:
    """One kind of edge (module docstring)."""

    kind: str
    keys: Callable[[InEdge, int], list]   # (var, version, source) keys to wait for
    put: Callable | None                   # (edge, values, vals, gathered): where they go
    per_instance: bool = False             # the op runs once per arriving instance
    replies: bool = False                  # outputs go back to the triggering instance only
    remote: bool = True                    # the executor waits for something from elsewhere


RULES: dict[str, EdgeRule] = {r.kind: r for r in (
    EdgeRule("local", _none, None, remote=False),
    EdgeRule("broadcast", _one, _put_value),
    EdgeRule("gather", _every, _put_list),
    EdgeRule("each", _every, _put_slot, per_instance=True, replies=True),
    EdgeRule("collective", _none, None, remote=False),
    EdgeRule("fetch", _one, _put_value),
)}
