"""Running one shared, placed program as one executor of many (DESIGN.md §4).

``DistPlan`` (executor/dist_plan.py) is computed once per program and executor. ``Runtime``
owns the executor's sockets and mailbox and runs plans step by step.

NOTE(versions): op #i reading V at step s waits for V's value of step s when V's last writer
in program order comes before i, else of step s-1 (loop-carried: a parameter the optimizer
writes later), where step -1 is the startup program. A var the program never writes (a
constant made by the startup program) is waited for once, at version -1, and kept. Every wait
points to something earlier in (step, program order), so sync training cannot deadlock.

NOTE(end-of-step): after step s, the loop-carried values a trainer reads remotely (the fresh
parameters) are *pending* at version s: the next step's first op that reads one waits for it
there, so the next step's first messages (its prefetch ids) leave before that wait and one
round trip serves both. Whoever looks earlier gets the value after update s all the same
(DESIGN.md §4, "What a trainer's scope holds"): ``find_var(...).get_tensor()``, a fetch and
``exe.close()`` settle the pending values first.
"""
from __future__ import annotations

import atexit
import logging
import sys
import weakref

import numpy as np

from placegroup import config
from placegroup.ir.cluster import Cluster
from placegroup.comm.expect import message_limit
from placegroup.comm.mailbox import Mailbox, PeersDone
from placegroup.values import as_host, to_device
from placegroup.comm.security import Security
from placegroup.comm.transport import Transport
from placegroup.errors import CommTimeout, OpError, PlacegroupError
from placegroup.executor.dist_plan import CARRIED, CONSTANT, SAME, DistPlan, DistStep, RemoteIn, expectations
from placegroup.executor.serving import Serving
from placegroup.ops.registry import ROUND_END
from placegroup.ir.place_group import ExecutorRole
from placegroup.ir.printer import format_op

log = logging.getLogger("placegroup.executor")
FAILED_LINGER_MS = 200


def peer_links(cluster: Cluster, me) -> tuple[dict, str | None]:
    """``(connect, bind)`` of executor ``me`` (DESIGN.md §6): pservers bind their endpoint and
    trainers connect to every pserver; trainers listed with endpoints (for collectives) bind
    theirs too, and of two such trainers the one with the smaller name connects to the other,
    so each pair shares exactly one connection."""
    connect = {}
    if me.role == ExecutorRole.TRAINER:
        connect = {e.name: e.endpoint for e in cluster.executors if e.role == ExecutorRole.PSERVER}
        if me.endpoint is not None:
            connect.update({e.name: e.endpoint for e in cluster.executors
                            if e.role == ExecutorRole.TRAINER and e.endpoint and e.name > me.name})
    return connect, me.endpoint


class Runtime(Serving):
    """The sockets, mailbox and step counters of one executor of a cluster; a pserver's side
    (each-edges, the serving loop) is in executor/serving.py."""

    def __init__(self, program, xp, peer_timeout: float | None = None) -> None:
        self.cluster = Cluster.from_program(program)
        self.me = self.cluster.find(program.executor)
        self.digest = program.cluster.digest
        self.async_mode = not program.cluster.sync_mode
        self.staleness = program.cluster.staleness if not self.async_mode else 0
        # NOTE(merge-steps): a trainer merges the gradients of m steps into one push; on the wire
        # its step s is round s // m, which is what pservers count
        self.merge = program.cluster.merge_steps if self.me.role == ExecutorRole.TRAINER else 1
        self.accumulated: dict = {}  # (var, peers) -> sum of this round's values
        self.staleness_seen: dict[int, int] = {}  # lag -> how many loop-carried reads had it
        self.have_version: dict[str, int] = {}  # loop-carried var -> the version in the scope
        self.updates: dict[int, int] = {}       # async pserver: updates applied per each-op
        self.last_seen: dict[tuple, int] = {}   # (each-op, trainer) -> updates when it last got one
        self.each_vars: set = set()
        self.current_staleness = 0
        self.xp = xp
        # NOTE(peer-lost): a wait lasts while the awaited peer is alive; peer_timeout is how long
        # a silent peer counts as alive, wait_timeout (None: no limit) a safety net for bugs
        self.peer_timeout = peer_timeout or config.get("PLACEGROUP_PEER_TIMEOUT")
        self.wait_timeout = config.get("PLACEGROUP_WAIT_TIMEOUT") or None
        connect, bind = peer_links(self.cluster, self.me)
        self.step = 0
        self.transport = Transport(self.me.name, bind, connect, self.digest,
                                   max_message=message_limit(program),  # NOTE(max-message)
                                   peer_timeout=self.peer_timeout,
                                   security=Security.from_env())  # docs/security.md
        # the executors linked to this one: those it connects to, and those that connect to it
        self.linked = set(connect) | {
            e.name for e in self.cluster.executors if self.me.name in peer_links(self.cluster, e)[0]}
        self.transport.members = self.linked
        self.mailbox = Mailbox(self.transport, lambda: self.step)
        self.mailbox.start_timeout = config.get("PLACEGROUP_START_TIMEOUT")
        self.mailbox.describe_peer = self._describe_peer
        self.peers = [e.name for e in self.cluster.executors if e != self.me]
        self.plans: dict[int, tuple] = {}
        self.completed = -2          # the last step this executor finished (-1: startup)
        self.pending: dict = {}      # var -> (RemoteIn, step): carried values not taken yet
        self.fetches: list = []      # (peer, var, version) asked for before that step was done
        self.vals: dict | None = None
        self.mailbox.on_fetch = self._on_fetch
        self.served = False  # a pserver has served the whole job (NOTE(pserver-run))
        self.initial_sent: set = set()
        self.failed = False
        self.closed = False
        _live.add(self)

    def plan(self, program) -> DistPlan:
        hit = self.plans.get(id(program))
        if hit is not None and hit[0]() is program and hit[1] == program._version:
            return hit[2]
        plan = DistPlan(program, self.me, self.cluster, self.xp)
        self.plans[id(program)] = (weakref.ref(program), program._version, plan)
        # NOTE(hostile-input): from now on the mailbox takes only what a plan waits for, and
        # only from the executors linked to this one
        self.mailbox.expect(expectations(plan, self.linked))
        return plan

    # -- one step ----------------------------------------------------------------------------
    def _describe(self, ds: DistStep | None, version: int):
        def describe(missing) -> str:
            var, ver, src = missing[0]
            where = f"op #{ds.step.index} `{ds.step.op.type}`" if ds is not None else "the end of the step"
            return f"executor {self.me} was waiting in {where} at step {self.step} for {var!r} version {ver} from {src}"
        return describe

    def _describe_peer(self, name: str) -> str:
        """``trainer:1 (trainer 1, from 127.0.0.1)``: a peer's role and endpoint, for errors."""
        e = next((e for e in self.cluster.executors if e.name == name), None)
        if e is None:
            return name
        where = e.endpoint or self.transport.address.get(name)
        role = "pserver" if e.role == ExecutorRole.PSERVER else f"trainer {e.rank}"
        return f"{name} ({role}{f', at {where}' if where else ''})"

    def _take(self, vals, ds: DistStep | None, remote: list, step: int, gathered: dict) -> None:
        keys, spans = [], []
        for r in remote:
            if r.when == CONSTANT and r.var in vals:
                continue  # a constant from the startup program: taken once, kept
            if r.when == CARRIED and ds is not None and step > 0:
                if self.pending.pop(r.var, None) is None:
                    continue  # settled already (NOTE(end-of-step))
            version = step if r.when == SAME else (-1 if r.when == CONSTANT or step == 0 else step - 1)
            if ds is None:
                version = step
            if self.merge > 1 and version >= 0:
                if r.when == SAME and (step + 1) % self.merge and r.var in vals:
                    continue  # mid-round: the pservers made nothing new (NOTE(merge-steps))
                version //= self.merge
            if self.staleness and r.when == CARRIED and r.kind == "broadcast" and version > -1:
                self._take_stale(vals, ds, r, version)
                continue
            spans.append((r, len(keys), len(r.sources)))
            keys += [(r.var, version, src) for src in r.sources]
        if not keys:
            return
        got = self.mailbox.wait(keys, self.wait_timeout, self._describe(ds, step))
        xp = self.xp
        for r, at, n in spans:
            values = [to_device(xp, v) for v in got[at:at + n]]
            if r.kind == "gather":
                gathered[r.slot] = [v for v in values if v is not None]
            else:
                vals[r.var] = values[0]
                if r.when == CARRIED:
                    self.have_version[r.var] = keys[at][1]

    def _merge_pushes(self, ds: DistStep, vals: dict, step: int) -> None:
        """NOTE(merge-steps): sum what this op sends over a round of ``merge`` steps, and send
        the mean at the round's last step, as round ``step // merge``."""
        last = (step + 1) % self.merge == 0
        for n, peers in ds.pushes:
            v = as_host(vals[n])
            if not isinstance(v, np.ndarray):
                raise OpError(f"{self.me}: merge_steps needs dense values; {n!r} is a {type(v).__name__}")
            key = (n, tuple(peers))
            acc = self.accumulated.get(key)
            acc = v.astype(v.dtype, copy=True) if acc is None else acc + v
            if not last:
                self.accumulated[key] = acc
                continue
            self.accumulated.pop(key, None)
            mean = (acc / self.merge).astype(v.dtype, copy=False)
            for p in peers:
                self.mailbox.post(p, n, step // self.merge, mean)

    def _take_stale(self, vals, ds, r: RemoteIn, version: int) -> None:
        """NOTE(ssp): bounded staleness k: a loop-carried value of ``version`` may be any newer
        than ``version - k`` that has arrived; the newest is taken, older ones dropped, and
        how far behind it was is recorded (``staleness_seen``)."""
        have = self.have_version.get(r.var, -2)
        newer = self.mailbox.newest(r.var, r.sources[0], have + 1)  # never waits
        if newer is not None:
            have, value = newer
            vals[r.var] = to_device(self.xp, value)
        if have < version - self.staleness:  # too stale: wait for one recent enough
            have, value = self.mailbox.wait_newest(
                r.var, r.sources[0], version - self.staleness, self.wait_timeout, self._describe(ds, version))
            vals[r.var] = to_device(self.xp, value)
        self.have_version[r.var] = have
        lag = max(0, version - have)
        self.staleness_seen[lag] = self.staleness_seen.get(lag, 0) + 1
        self.current_staleness = max(self.current_staleness, lag) if ds is not None else lag

    # -- fetches: a peer asks for a var this executor holds ------------------------------------
    def _on_fetch(self, peer: str, wanted) -> None:
        self.fetches += [(peer, var, version) for var, version in wanted]
        self._answer_fetches()

    def _answer_fetches(self) -> None:
        """Answer the fetches whose step is done. In sync mode the asker cannot let this
        executor finish a later step before the answer, so the value is that step's."""
        later = []
        for peer, var, version in self.fetches:
            if version > self.completed or self.vals is None:
                later.append((peer, var, version))
            elif var in self.vals:
                self.mailbox.post(peer, var, version, as_host(self.vals[var]))
            else:
                self.mailbox.broadcast([peer], "error", f"{self.me} holds no value of {var!r}")
        self.fetches = later
        self.mailbox.flush()

    def fetch_remote(self, plan: DistPlan, names: list, step: int) -> dict:
        """The values of ``names`` (held elsewhere) at ``step``, asked of one holder each."""
        keys = []
        step //= self.merge  # the holder counts rounds (NOTE(merge-steps))
        for n in names:
            holder = plan.holders[n][0].name
            self.mailbox.request(holder, [(n, step)])
            keys.append((n, step, holder))
        got = self.mailbox.wait(keys, self.wait_timeout, self._describe(None, step))
        return {n: to_device(self.xp, v) for n, v in zip(names, got)}

    def run_step(self, plan: DistPlan, vals: dict, step: int) -> None:
        self.vals = vals
        self.current_staleness = 0
        mailbox = self.mailbox
        if step <= 0:
            self._send_initial(plan, vals)
        # NOTE(merge-steps-collective) in placegroup/transpiler/allreduce.py: mid-round, the
        # updates the trainer runs itself wait for the round's last step
        mid_round = (step + 1) % self.merge != 0
        for ds in plan.steps:
            if ds.plain and not config.DEBUG:  # NOTE(lean-loop): DistStep.plain
                try:
                    ds.step.run(vals)
                except Exception as e:
                    raise self._op_error(ds.step, vals, step, e) from e
                continue
            if mid_round and ds.step.op.attrs.get(ROUND_END):
                continue
            gathered: dict = {}
            if ds.remote:
                self._take(vals, ds, ds.remote, step, gathered)
            if ds.each is not None:
                self._run_each(ds, vals, step, gathered)
                continue
            self._call(ds, vals, step, gathered)
            if self.merge > 1 and ds.pushes:
                self._merge_pushes(ds, vals, step)
                continue
            for n, peers in ds.pushes:
                v = as_host(vals[n])
                for p in peers:
                    mailbox.post(p, n, step, v)
        # NOTE(deferred-flush): what this step posted leaves at the next wait (the parameter
        # pull that ends a dense step, the next step's prefetch, a fetch) or at close, in one
        # message per peer: a sparse step's gradients travel with the next step's ids. With
        # bounded staleness a trainer may not wait at all for a while: it sends now.
        if self.staleness:
            mailbox.flush()
        self.completed = step
        if self.fetches:
            self._answer_fetches()
        if plan.carried and not plan.startup and (step + 1) % self.merge == 0:
            self.settle()  # values the step did not read (none, normally): no mixing versions
            self.pending = {r.var: (r, step) for r in plan.carried}

    def settle_one(self, name: str) -> None:
        """The scope's hook before it hands out ``name``'s value (NOTE(end-of-step))."""
        if name in self.pending:
            self.settle([name])

    def settle(self, names=None) -> None:
        """Take the pending loop-carried values (all, or those of ``names``) into the scope."""
        if not self.pending or self.vals is None:
            return
        wanted = [n for n in (self.pending if names is None else names) if n in self.pending]
        by_step: dict[int, list] = {}
        for n in wanted:
            r, step = self.pending.pop(n)
            by_step.setdefault(step, []).append(r)
        for step, remote in by_step.items():
            self._take(self.vals, None, remote, step, {})

    def _call(self, ds: DistStep, vals: dict, step: int, gathered: dict) -> None:
        st = ds.step
        if config.DEBUG:
            print(f"[{self.me} step {step}] run {format_op(st.op, st.index)}", file=sys.stderr)
        if isinstance(st.ctx.comm, list):  # bind the op's group to this runtime once
            from placegroup.comm.collectives import RingCommunicator

            st.ctx.comm = RingCommunicator(self.mailbox, st.ctx.comm, self.me.name, self.wait_timeout,
                                           self._describe(ds, step))
        if st.ctx.comm is not None:
            st.ctx.step = step
        try:
            ins = st.inputs(vals) if not gathered else {
                **{s: ([vals[n] for n in names] if dup else vals[names[0]])
                   for s, names, dup in st.ins if s not in gathered}, **gathered}
            st.call(ins, vals)
        except Exception as e:
            raise self._op_error(st, vals, step, e) from e

    def _op_error(self, st, vals: dict, step: int, err: BaseException) -> OpError:
        """``err`` from op ``st``'s kernel with the op's context (the caller chains the original)."""
        return OpError(f"[{self.me}, step {step}] " + st.explain(vals, err))

    def _send_initial(self, plan: DistPlan, vals: dict) -> None:
        """The values others read before this program writes them (version -1), once."""
        if id(plan) in self.initial_sent:
            return
        self.initial_sent.add(id(plan))
        for n, peers in plan.initial:
            for p in peers:
                self.mailbox.post(p, n, -1, as_host(vals[n]))

    # -- shutting down -------------------------------------------------------------------------
    def fail(self, err: BaseException) -> None:
        """Tell every peer this executor failed, so nobody waits for it until a timeout."""
        self.failed = True
        try:
            self.mailbox.broadcast(self.peers, "error", f"{type(err).__name__}: {err}")
        except Exception:  # noqa: BLE001 - already failing; the original error is what matters
            pass

    def close(self) -> None:
        if self.closed:
            return
        if not self.failed:
            try:
                self.settle()  # the scope keeps the parameters after the last update
            except PlacegroupError as e:  # a pserver already gone: closing must not hang on it
                log.warning("%s: closing without the last parameters: %s", self.me, e)
        self.closed = True
        if self.me.role == ExecutorRole.TRAINER:
            # the last step (round, NOTE(merge-steps)) whose values this trainer sent
            self.mailbox.step_of = lambda: self.step // self.merge - 1
            self.mailbox.broadcast([e.name for e in self.cluster.executors
                                    if e.role == ExecutorRole.PSERVER], "done")
        # a failed executor's `error` messages leave at once to live peers; a dead peer's
        # queue must not hold the exit up for the whole linger (NOTE(peer-lost))
        self.mailbox.close(FAILED_LINGER_MS if self.failed else None)
        _live.discard(self)


_live: "weakref.WeakSet[Runtime]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    """A trainer that exits without ``exe.close()`` still says done (DESIGN.md §4)."""
    for rt in list(_live):
        rt.close()


__all__ = ["DistPlan", "Runtime", "CommTimeout", "PeersDone"]
