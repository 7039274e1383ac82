"""The executors of a transpiled program, and which of them hold a var or run an op.

``Cluster.from_program(program)`` lists every executor the program names: trainers
``trainer:0..N-1`` (with their endpoints when trainers were given as a list) and one pserver
per endpoint. A var with no PlaceGroup, or an op with none, belongs to everyone (a
single-process program). These answers are what the placement check and the executor's
edges (``classify``, by the edge table of placegroup/ir/edges.py) are computed from.
``ClusterSchema`` is the typed record of the job (trainers, pservers, mode, merge_steps, digest)
that a transpiled program carries as ``program.cluster``.
"""
from __future__ import annotations

import dataclasses

import pydantic

from placegroup.errors import PlacementError
from placegroup.ir.edges import recognise
from placegroup.ir.place_group import ExecutorId, ExecutorRole, PlaceGroup


class ClusterSchema(pydantic.BaseModel):
    """Who takes part in a transpiled job, and how it trains: ``program.cluster``.

    The transpiler sets it on every program it returns; prog.bin stores it as it is; every
    executor reads it to find its peers and its version policy.

    Attributes:
        trainers: how many trainers there are (``trainer:0`` .. ``trainer:N-1``).
        trainer_endpoints: the trainers' ``ip:port``, in id order, when they were given as a
            list (collectives between trainers need them); empty otherwise.
        pservers: the pservers' ``ip:port``, in order.
        sync_mode: True: the pservers merge every trainer's gradient of a step (sync, or
            bounded staleness); False: each gradient is applied alone as it arrives (async).
        staleness: how many versions behind the newest a trainer's read of a parameter may
            be: with ``sync_mode``, behind the slowest trainer (0: sync, to the bit); in async
            mode, behind the answer to its own last update (0: it waits for that answer).
        merge_steps: how many trainer steps' gradients make one update (a round).
        digest: of the whole transpiled job; peers running another program are refused.
        startup: this is the job's startup program (its values have version -1).
        pserver_mesh: an op on one pserver reads a value another pserver holds (a global-norm
            gradient clip), so the pservers connect to one another too.
    """

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)
    trainers: int = 1
    trainer_endpoints: list[str] = []
    pservers: list[str] = []
    sync_mode: bool = True
    staleness: int = 0
    merge_steps: int = 1
    digest: str = ""
    startup: bool = False
    pserver_mesh: bool = False


@dataclasses.dataclass(frozen=True)
class Cluster:
    executors: tuple  # ExecutorId, trainers first in id order, then pservers

    @classmethod
    def from_program(cls, program) -> "Cluster":
        c = program.cluster or ClusterSchema()
        eps = c.trainer_endpoints
        trainers = [ExecutorId.parse("trainer", eps[i] if i < len(eps) else None, rank=i)
                    for i in range(c.trainers)]
        pservers = [ExecutorId.parse("pserver", ep) for ep in c.pservers]
        return cls(tuple(trainers + pservers))

    def matching(self, place: PlaceGroup | None) -> list:
        if place is None:
            return list(self.executors)
        return [e for e in self.executors if place.matches(e)]

    def find(self, executor: ExecutorId) -> ExecutorId:
        """This cluster's entry for ``executor`` (matched by role and rank or endpoint)."""
        for e in self.executors:
            if e.role == executor.role and (
                    (executor.rank is not None and e.rank == executor.rank) or
                    (executor.endpoint is not None and e.endpoint == executor.endpoint)):
                return e
        raise PlacementError(f"executor {executor} is not part of the program's cluster "
                             f"({', '.join(map(str, self.executors))})")


@dataclasses.dataclass(frozen=True)
class Edge:
    """How executor ``reader`` gets input ``var`` of op #``op_index``."""

    kind: str            # local | broadcast | gather | each
    var: str
    slot: str
    sources: tuple       # the executors it waits for (empty when local)


def classify(cluster: Cluster, op, slot: str, var, reader: ExecutorId, op_index: int) -> Edge:
    """The edge of ``op``'s input ``var`` for ``reader``, by the first rule of the edge table
    that recognises it (placegroup/ir/edges.py), or PlacementError naming both places."""
    holders = cluster.matching(var.place)

    def invalid() -> str:
        return (f"op #{op_index} `{op.type}` @{op.place} reads {var.name!r} @{var.place}, which "
                f"{len(holders)} executors hold ({', '.join(map(str, holders)) or 'none'}); executor "
                f"{reader} holds none of them, and the op declares no gather/each edge for {slot!r}")

    kind = recognise(op, slot, holders, reader, invalid)
    return Edge(kind, var.name, slot, () if kind == "local" else tuple(holders))


def reads_across_pservers(program) -> bool:
    """Whether an op run on a pserver reads a var that only other pservers hold."""
    cluster = Cluster.from_program(program)
    for block in program.blocks:
        for op in block.ops:
            runners = [e for e in cluster.matching(op.place) if e.role == ExecutorRole.PSERVER]
            for n in (op.input_arg_names if runners else ()):
                holders = set(cluster.matching(block.var(n).place))
                if any(r not in holders for r in runners) and all(h.role == ExecutorRole.PSERVER for h in holders):
                    return True
    return False


def check_placement(program) -> None:
    """Every cross-placement read of every op is a valid edge (raises PlacementError)."""
    cluster = Cluster.from_program(program)
    for block in program.blocks[:1]:  # a sub-block has no edge: its owning op's inputs carry them
        for i, op in enumerate(block.ops):
            runners = cluster.matching(op.place)
            for slot, names in op.inputs.items():
                for n in names:
                    var = block.var(n)
                    for r in runners:
                        classify(cluster, op, slot, var, r, i)

