"""Edge rules: how an op's input held elsewhere is taken, and where its outputs go.

For op O run by executor e, each input var V is one of the kinds below. Each kind is one row
of ``RULES``, and the row says everything about it: how such an edge is recognised
(``recognise``, in table order: the first row that says yes), whether a plan takes its value
once per step for every later reader (``once_per_step``), the keys a wait takes (``keys``),
where the values go (``put``), whether the op runs once per arriving instance
(``per_instance``), to whom the op's outputs go (``route``), which senders the receiver
accepts the var from (``senders``), whether a policy that may read stale values may take the
newest one instead (``newest_ok``), and how ``placegroup dump`` calls a message of it and an
answer to one (``label``, ``answer_label``). Versions are not the rules' business: the version policy
(executor/policy.py) picks them. A new kind of edge is one row.

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
              interpreter takes nothing: the kernel does. Never recognised from a read: the
              plan marks collective ops by their OpDef.
fetch         a trainer's fetch of a var another executor holds: it asks the holder for the
              value of its step, which the holder answers once it has finished that step.
              Never recognised from a read: ``fetch_list`` makes it.
============  ================================================================================

Thread-safety: the table is immutable.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

from placegroup.errors import PlacementError


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


def _to_all(peers: tuple, trigger: str | None) -> tuple:
    return peers


def _to_trigger(peers: tuple, trigger: str | None) -> tuple:
    return (trigger,) if trigger in peers else ()


def _all_sources(edge: InEdge) -> tuple:
    return edge.sources


def _first_source(edge: InEdge) -> tuple:
    return edge.sources[:1]


def _never(op, slot: str, holders: list, reader) -> bool:
    return False


def _declared(kind: str) -> Callable:
    def recognise(op, slot: str, holders: list, reader) -> bool:
        return op.edges.get(slot) == kind
    return recognise


@dataclasses.dataclass(frozen=True)
class EdgeRule:
    """One kind of edge (module docstring)."""

    kind: str
    recognise: Callable        # (op, slot, holders, reader) -> whether a read is of this kind
    keys: Callable[[InEdge, int], list]   # (var, version, source) keys to wait for
    put: Callable | None       # (edge, values, vals, gathered): where they go
    label: str                 # what placegroup dump calls one of its messages
    remote: bool = True        # the executor waits for something from elsewhere
    once_per_step: bool = False  # one wait per step serves every later reader of the var
    per_instance: bool = False   # the op runs once per arriving instance
    route: Callable = _to_all    # (an OutEdge's peers, the triggering source) -> who gets an output
    senders: Callable = _all_sources  # InEdge -> the sources its receiver accepts the var from
    newest_ok: bool = False      # a stale-reading policy may take the newest value instead
    answer_label: str = ""       # what placegroup dump calls the answer of a per-instance op


RULES: dict[str, EdgeRule] = {r.kind: r for r in (
    EdgeRule("local", lambda op, slot, holders, reader: reader in holders, _none, None, "local", remote=False),
    EdgeRule("gather", _declared("gather"), _every, _put_list, "gather"),
    EdgeRule("each", _declared("each"), _every, _put_slot, "each", per_instance=True, route=_to_trigger,
             answer_label="each answer (to the instance that triggered it)"),
    EdgeRule("broadcast", lambda op, slot, holders, reader: len(holders) == 1, _one, _put_value, "broadcast",
             once_per_step=True, newest_ok=True),
    EdgeRule("collective", _never, _none, None, "collective", remote=False),
    EdgeRule("fetch", _never, _one, _put_value, "fetch", senders=_first_source),
)}


def recognise(op, slot: str, holders: list, reader, describe: Callable[[], str]) -> str:
    """The kind of the edge by which ``reader`` reads ``op``'s input ``slot`` of a var that
    ``holders`` hold: the first rule of ``RULES`` that recognises it. ``describe()`` says
    the read for the PlacementError when none does."""
    for rule in RULES.values():
        if rule.recognise(op, slot, holders, reader):
            return rule.kind
    raise PlacementError(describe())


def label(kind: str) -> str:
    """What ``placegroup dump`` calls a message of edge kind ``kind`` (``a+b``: several)."""
    return "+".join(RULES[k].label for k in kind.split("+"))
