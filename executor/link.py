"""An executor's link to its peers: the transport and mailbox it talks through, who it
talks to, what it accepts, the fetches it answers, and how it says done or failed.

``Link(program, me, cluster, transport=...)`` opens the sockets (or, with a
``LoopbackNetwork``, an in-process transport: several executors in one process) the first
time a distributed program runs; the interpreter (executor/interpreter.py) sends and waits
through ``link.mailbox`` (the data path), and the link sends the control messages through
its session (``fetch``, ``done``, ``error``). A pserver binds its endpoint and each trainer connects to every
pserver; trainers listed with endpoints (for collectives) bind theirs too, and of two such
trainers the one with the smaller name connects to the other, so each pair shares exactly
one connection. Pservers pair up the same way when an op on one reads a value another holds
(a global-norm clip).

NOTE(deferred-flush): ``mailbox.post`` batches what a step sends per peer; it leaves at the
next wait (the parameter pull that ends a dense step, the next step's prefetch, a fetch) or
at close, in one message per peer: a sparse step's gradients travel with the next step's ids.

NOTE(peer-lost): a wait lasts while the awaited peer is alive; ``peer_timeout`` is how long a
silent peer counts as alive, ``wait_timeout`` (None: no limit) a safety net for bugs.

Thread-safety: a link belongs to the executor thread that made it.
"""
from __future__ import annotations

import logging

from placegroup import config
from placegroup.comm.collectives import RingCommunicator
from placegroup.comm.expect import Expectations, message_limit
from placegroup.comm.mailbox import Mailbox
from placegroup.comm.security import Security
from placegroup.comm.transport import open_transport
from placegroup.executor.plan import fetch_edge
from placegroup.executor.policy import Sync
from placegroup.errors import PlacegroupError, PlacementError
from placegroup.ir.cluster import Cluster
from placegroup.ir.edges import RULES
from placegroup.ir.framework import SELECTED_ROWS
from placegroup.ir.variable import DYNAMIC_TABLE
from placegroup.ir.place_group import ExecutorRole
from placegroup.util.sched import set_sched
from placegroup.values import as_host, to_device

log = logging.getLogger("placegroup.executor")
FAILED_LINGER_MS = 200


def peer_links(cluster: Cluster, me, pserver_mesh: bool = False) -> tuple[dict, str | None]:
    """``(connect, bind)`` of executor ``me``: the peers it connects to (name -> endpoint) and
    the endpoint it binds, if any (module docstring). With ``pserver_mesh`` (the program has
    pserver-to-pserver edges) the pservers pair up as endpoint-named trainers do."""
    connect = {}
    if me.role == ExecutorRole.TRAINER:
        connect = {e.name: e.endpoint for e in cluster.executors if e.role == ExecutorRole.PSERVER}
    if me.endpoint is not None and (me.role == ExecutorRole.TRAINER or pserver_mesh):
        connect.update({e.name: e.endpoint for e in cluster.executors
                        if e.role == me.role and e.endpoint and e.name > me.name})
    return connect, me.endpoint


def linked_peers(cluster: Cluster, me, pserver_mesh: bool = False) -> set:
    """The executors linked to ``me``: those it connects to, and those that connect to it."""
    return set(peer_links(cluster, me, pserver_mesh)[0]) | {
        e.name for e in cluster.executors if me.name in peer_links(cluster, e, pserver_mesh)[0]}


class Link:
    """The peers of executor ``me`` in ``cluster``, and the sockets to reach them.

    Args:
        program: the placed program (its digest and largest var size the transport).
        me: this executor (an entry of ``cluster``).
        cluster: the job's executors.
        peer_timeout: seconds a silent peer counts as alive (default PLACEGROUP_PEER_TIMEOUT).
        network: a ``LoopbackNetwork`` to run over in one process; None: ZeroMQ over TCP.
        policy: the executor's version policy (executor/policy.py): the versions its fetches
            and ``done`` name (a trainer that merges steps names rounds, which the pservers
            count) and the vars of which only the newest answer leaves.
    """

    def __init__(self, program, me, cluster: Cluster, peer_timeout: float | None = None,
                 network=None, policy=None) -> None:
        self.me = me
        self.cluster = cluster
        self.peer_timeout = peer_timeout or config.get("PLACEGROUP_PEER_TIMEOUT")
        self.wait_timeout = config.get("PLACEGROUP_WAIT_TIMEOUT") or None
        self.step = 0            # the steps this executor ran (message headers carry it)
        self.policy = policy if policy is not None else Sync()
        mesh = program.cluster.pserver_mesh
        connect, bind = peer_links(cluster, me, mesh)
        digest = program.cluster.digest
        if network is None:  # NOTE(sched-batch): before the sockets, so their IO thread inherits it
            set_sched(0, config.get("PLACEGROUP_SCHED"))
        self.transport = open_transport(me.name, bind, connect, digest=digest, network=network,
                                        max_message=message_limit(program),  # NOTE(max-message)
                                        peer_timeout=self.peer_timeout,
                                        security=Security.from_env() if network is None else None)
        # the executors linked to this one: those it connects to, and those that connect to it
        self.linked = linked_peers(cluster, me, mesh)
        self.transport.members = self.linked
        self.mailbox = Mailbox(self.transport, lambda: self.step, on_fetch=self._on_fetch,
                               describe_peer=self.describe_peer,
                               start_timeout=config.get("PLACEGROUP_START_TIMEOUT"),
                               supersede=self.policy.superseded(program))
        self.session = self.mailbox.session
        self.trainers = [e.name for e in cluster.executors if e.role == ExecutorRole.TRAINER]
        self.fetches: list = []  # (peer, var, version) asked for before that version was done
        self.completed = -2      # the last version this executor finished (-1: startup)
        self.vals: dict | None = None
        self.failed = False
        self.closed = False

    def describe_peer(self, name: str) -> str:
        """``trainer:1 (trainer 1, from 127.0.0.1)``: a peer's role and endpoint, for errors."""
        e = next((e for e in self.cluster.executors if e.name == name), None)
        if e is None:
            return name
        where = e.endpoint or getattr(self.transport, "address", {}).get(name)
        role = "pserver" if e.role == ExecutorRole.PSERVER else f"trainer {e.rank}"
        return f"{name} ({role}{f', at {where}' if where else ''})"

    # -- steps ---------------------------------------------------------------------------------
    def begin_step(self, program, plan) -> int:
        """The step a run of ``plan`` is: -1 for the job's startup program, else the next of
        this member's steps (its messages' headers say it)."""
        return -1 if plan.startup else self.step

    def end_step(self, step: int) -> None:
        if step >= 0:
            self.step = step + 1

    def expect(self, plan) -> None:
        """NOTE(hostile-input): from now on the mailbox takes only what a plan waits for, and
        only from the executors linked to this one (together with earlier plans)."""
        self.mailbox.expect(expectations(plan, self.linked))

    def communicator(self, group: tuple, describe) -> RingCommunicator:
        """A collective op's communicator over ``group`` (wire names, rank order)."""
        return RingCommunicator(self.mailbox, list(group), self.me.name, self.wait_timeout, describe)

    # -- fetches: a peer asks for a var this executor holds ------------------------------------
    def _on_fetch(self, peer: str, wanted) -> None:
        self.fetches += [(peer, var, version) for var, version in wanted]
        self._answer_fetches()

    def step_done(self, version: int, vals: dict) -> None:
        """This executor finished ``version``: answer the fetches waiting for it."""
        self.completed = version
        self.vals = vals
        if self.fetches:
            self._answer_fetches()

    def _answer_fetches(self) -> None:
        """Answer the fetches whose version is done (the fetch rule, placegroup/ir/edges.py). In sync
        mode the asker cannot let this executor finish a later step before the answer, so the
        value is that step's."""
        later = []
        for peer, var, version in self.fetches:
            if version > self.completed or self.vals is None:
                later.append((peer, var, version))
            elif var in self.vals:
                self.mailbox.post(peer, var, version, as_host(self.vals[var]))
            else:
                self.session.say_error([peer], self.step, f"{self.me} holds no value of {var!r}")
        self.fetches = later
        self.mailbox.flush()

    def fetch(self, edges: list, step: int, xp, describe) -> dict:
        """The values of fetch ``edges`` (vars held elsewhere) at trainer ``step``, asked of one
        holder each, by the fetch rule (placegroup/ir/edges.py) at the version the policy sends
        that step's values as (the holder counts rounds)."""
        rule = RULES["fetch"]
        version = self.policy.wire(step)
        keys = []
        for e in edges:
            ks = rule.keys(e, version)
            for var, v, holder in ks:
                self.session.ask(holder, self.step, [(var, v)])
            keys += ks
        got = self.mailbox.wait(keys, self.wait_timeout, describe)
        return {e.var: to_device(xp, v) for e, v in zip(edges, got)}

    # -- shutting down -------------------------------------------------------------------------
    def fail(self, err: BaseException) -> None:
        """Tell every peer this executor failed, so nobody waits for it until a timeout."""
        self.failed = True
        try:
            self.mailbox.flush()
            self.session.say_error(sorted(self.linked), self.step, f"{type(err).__name__}: {err}")
        except Exception:  # noqa: BLE001 - already failing; the original error is what matters
            pass

    def close(self, settle=None) -> None:
        """Say done (a trainer) and close the sockets; ``settle`` first takes the values still on
        their way (the scope keeps the parameters after the last update)."""
        if self.closed:
            return
        if not self.failed and settle is not None:
            try:
                settle()
            except PlacegroupError as e:  # a pserver already gone: closing must not hang on it
                log.warning("%s: closing without the last parameters: %s", self.me, e)
        self.closed = True
        self.mailbox.flush()
        if self.me.role == ExecutorRole.TRAINER:  # with the last version whose values it sent
            self.session.say_done([e.name for e in self.cluster.executors if e.role == ExecutorRole.PSERVER],
                                  self.policy.wire(self.step) - 1)
        # a failed executor's `error` messages leave at once to live peers; a dead peer's
        # queue must not hold the exit up for the whole linger (NOTE(peer-lost))
        self.mailbox.close(FAILED_LINGER_MS if self.failed else None)


class LocalLink:
    """The null link of one process: no peers, nothing to expect, send or fetch. Each program
    counts its own runs, which are the step its kernels see (dropout's masks, a sampler's
    draws), so a forward-only program that samples draws anew on each run."""

    step = 0

    def __init__(self) -> None:
        self.runs: dict[int, int] = {}  # id(program) -> its runs so far

    def begin_step(self, program, plan) -> int:
        n = self.runs.get(id(program), 0)
        self.runs[id(program)] = n + 1
        return n

    def end_step(self, step: int) -> None:
        pass

    def expect(self, plan) -> None:
        pass

    def fetch(self, edges: list, step: int, xp, describe) -> dict:
        raise PlacementError(f"one process holds every var; nothing to fetch ({[e.var for e in edges]})")

    def fail(self, err: BaseException) -> None:
        pass

    def close(self, settle=None) -> None:
        pass


def expectations(plan, senders) -> Expectations:
    """What executor ``plan.me`` accepts while running ``plan`` (comm/expect.py): each remote
    input (broadcast, gather, each) from its sources with the var's declared dtype and shape;
    the messages of each collective from its group; and, for a trainer, any var another
    executor holds, from its first holder (the answer to a fetch). Each var's values carry a
    LoD of its lod_level (the plan's run-time one where it knows it). ``senders``: the names
    that may send anything (the executors it is linked to)."""
    exp = Expectations(senders)
    meta = plan.feed_meta

    levels = getattr(plan, "lod_levels", None) or {}  # NOTE(lod-expect) in comm/expect.py

    def allow(n: str, src: str) -> None:
        v = meta[n][0]
        # a table keyed by raw ids travels as the SelectedRows of its rows (DynamicTable.as_wire)
        exp.allow(n, src, meta[n][1], v.shape, v.type in (SELECTED_ROWS, DYNAMIC_TABLE), levels.get(n, v.lod_level))

    for p in plan.ops:
        for e in p.remote + ((p.each,) if p.each is not None else ()):
            for src in RULES[e.kind].senders(e):
                allow(e.var, src)
        for src in p.group or ():
            if src != plan.me.name:
                for call in p.op.opdef.collective_calls:
                    exp.allow_collective(p.ctx.tag + call, src)
    if plan.me.role != ExecutorRole.PSERVER:  # what it may fetch, by the fetch rule
        for n, holders in plan.holders.items():
            if holders and plan.me not in holders:
                for src in RULES["fetch"].senders(fetch_edge(plan, n)):
                    allow(n, src)
    return exp

