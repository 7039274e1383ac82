"""Version policies: the training *mode* of one executor, whole, in one class per mode.

An executor runs its ops step after step; each value it sends is tagged with a version and
each remote input waits for one. Which ones, and what follows from that, is the mode's whole
meaning, and it lives here. The interpreter (executor/interpreter.py) calls every hook below
unconditionally and never branches on the mode itself, in the manner of torch.fx's
Interpreter, whose subclasses override one method per kind of node:

==================  ===========================================================================
version arithmetic  ``wire`` (the version a value made at a step is sent as), ``wanted`` (the
                    version an input waits for), ``round_end``, ``oldest_allowed``,
                    ``reply_version`` (the version an each-edge answer is sent as)
taking              ``take``: a policy may take a loop-carried input itself (stale reads);
                    otherwise the interpreter waits for the keys of the edge's rule
each edges          ``instances`` (which instances a pass may take), ``next_instance`` (wait
                    for one, or end the pass), ``answered`` (after an instance's answer was
                    posted: when it leaves, what is counted)
steps               ``begin_step``, ``end_step`` (what the step posted: when it leaves),
                    ``serving`` and ``pass_ready`` (a serving pserver: when a pass may start)
outbox              ``superseded``: the vars of which only the newest answer waiting to leave
                    is sent
dump                ``label``, ``reply_label``, ``cadence``, ``reply_cadence``: the same rules
                    in words, for ``placegroup dump``
==================  ===========================================================================

The modes:

===============  =============================================================================
``Sync``         op #i reading V at step s waits for V of step s when V's last writer comes
                 before i in program order (``SAME``), else of step s-1 (``CARRIED``: a
                 parameter the optimizer writes later; step -1 is the startup program); a var
                 the program never writes (``CONSTANT``) is waited for once, at version -1.
                 Every wait points earlier in (step, program order): sync cannot deadlock.
                 An each edge (a prefetch) answers every source's instance of this step.
``Bounded(k)``   (sync) as Sync, but a loop-carried read at step s takes the newest value that
                 arrived if it is at least version s-1-k, and waits only when none is: a fast
                 trainer runs at most k steps ahead of the slowest (stale synchronous parallel).
``Async``        an *each* edge takes whichever instance arrives first, of any version, one
                 per pass over the program, and answers it with that instance's version; a
                 pass starts only when an instance is there. A trainer in async mode reads as
                 in Sync: it waits for the answer to its own update.
``Bounded(k)``   (async, a trainer with staleness k) NOTE(async-staleness): the pservers
                 apply each gradient alone as in ``Async``, but the trainer does not wait for
                 the answer to its last update: step s computes on the newest parameters that
                 have arrived, as long as they answer its update s-1-k or a later one. What
                 it posts leaves every ceil(k/2) steps, in one message per pserver (a wait
                 sends at once), and a pserver sends the trainer only the newest of the
                 parameters it has for it: half the bound covers the round trip, and there are
                 k/2 times fewer messages.
``Rounds(m, p)`` a trainer with ``merge_steps`` m: steps r*m .. r*m+m-1 are round r. Values it
                 sends are tagged r, ops marked round-end (the accumulated gradient's mean, the
                 update, the lr schedule) run only at a round's last step, and the loop-carried
                 values change only between rounds; the versions inside ``p`` count rounds.
===============  =============================================================================

A pserver counts its own steps, which are the trainers' rounds; so a pserver's policy is its
base mode, never ``Rounds`` (``counts_rounds`` only changes how dump names its versions).

Adding a mode is one subclass here (or anywhere: the interpreter takes any object with these
hooks; tests/test_policy_hooks.py trains with one defined in the test).

Example::

    policy = policy_for(program.cluster, ExecutorRole.TRAINER)   # Rounds(2, Bounded(1)), say
    policy.wanted(CARRIED, 5)     # 1: round 2 reads round 1's parameters

Thread-safety: a policy belongs to one interpreter (it holds that executor's per-run facts:
the versions it has, the staleness it saw).
"""
from __future__ import annotations

from placegroup.ir.edges import RULES
from placegroup.values import to_device

SAME, CARRIED, CONSTANT = "same", "carried", "constant"
EACH_HOLD_S = 0.002  # NOTE(each-batching)
REPLY_BATCH = 16     # NOTE(reply-batching)


class Sync:
    """Every version exactly (module docstring).

    Attributes:
        staleness_seen: lag -> how many loop-carried reads (a stale-reading trainer) or updates
            (an async pserver) had it.
        current_staleness: how far behind the newest the values this step read were.
        counts_rounds: a pserver of trainers that merge steps: its steps are their rounds.
    """

    name = "sync"
    staleness = 0
    round = 1

    def __init__(self) -> None:
        self.staleness_seen: dict = {}
        self.current_staleness = 0
        self.counts_rounds = False

    # -- version arithmetic ------------------------------------------------------------------------
    def wire(self, step: int) -> int:
        """The version a value made at ``step`` is sent as."""
        return step

    def round_end(self, step: int) -> bool:
        """Whether ``step`` ends a round: round-end ops run, loop-carried values change."""
        return True

    def wanted(self, when: str, step: int) -> int | None:
        """The version an input of kind ``when`` waits for at ``step``; None: none this step
        (keep the value in hand)."""
        if when == CONSTANT:
            return -1
        v = self.wire(step)
        return v if when == SAME else v - 1

    def oldest_allowed(self, version: int) -> int:
        """The oldest version a loop-carried read of ``version`` may take instead."""
        return version

    def reply_version(self, step: int, instance_version: int) -> int:
        """The version an each-edge answer is sent as, for an instance of ``instance_version``."""
        return self.wire(step)

    # -- taking ----------------------------------------------------------------------------------
    def take(self, io, vals: dict, edge, version: int, op) -> bool:
        """Take ``edge``'s value of ``version`` into ``vals`` here (True), or leave it to the
        interpreter, which waits for its rule's keys (False). ``io``: the interpreter (its
        ``mailbox``, ``xp``, ``timeout`` and ``describe``); ``op``: the reader (None: the end of
        the step settling a pending value)."""
        return False

    # -- each edges ------------------------------------------------------------------------------
    def instances(self, io, keys: list) -> list:
        """The each-edge keys (one per source) a pass may take instances of."""
        return keys

    def next_instance(self, io, keys: list, ran: int, describe):
        """``(key, value)`` of the next instance to run the op on (value None: its source is
        done), or None: the pass goes on without more. Sync: every source's instance of this
        step, as it arrives; what waits for a source not answered yet is held briefly to leave
        with its answer (NOTE(each-batching) in executor/interpreter.py)."""
        return io.mailbox.take_any(keys, io.timeout, describe, hold=EACH_HOLD_S)

    def answered(self, io, op, src: str) -> None:
        """The answer to ``src``'s instance is posted: sync sends it now."""
        io.mailbox.flush([src])

    # -- steps -----------------------------------------------------------------------------------
    def begin_step(self) -> None:
        self.current_staleness = 0

    def end_step(self, io, step: int) -> None:
        """After step ``step``: NOTE(deferred-flush) in executor/link.py, what it posted leaves
        at the next wait; a policy that may not wait for a while sends it now."""

    def serving(self, plan) -> None:
        """A pserver starts serving ``plan``."""

    def pass_ready(self, io, step: int) -> bool:
        """Whether a serving pserver's pass ``step`` may start (False: every trainer is done)."""
        return True

    # -- outbox ----------------------------------------------------------------------------------
    def superseded(self, program) -> set:
        """The vars of which a newer answer replaces an older one still waiting to leave."""
        return set()

    # -- in words, for placegroup dump -----------------------------------------------------------
    def label(self) -> str:
        """How ``wire`` tags a value."""
        return "step (a round)" if self.counts_rounds else "step"

    def reply_label(self) -> str:
        """How ``reply_version`` tags an each-edge answer."""
        return self.label()

    def cadence(self, round_end: bool) -> str:
        """When a value pushed after an op (a round-end op's, if ``round_end``) leaves."""
        return "every step"

    def reply_cadence(self) -> str:
        """When each-edge answers are made and leave."""
        return "per arriving instance, every source's of each step, each answer sent at once"

    def asker_unit(self) -> str:
        """What a fetch names: the asker's step or round."""
        return "round" if self.counts_rounds else "step"

    def __repr__(self) -> str:
        return self.name


class Bounded(Sync):
    """Stale synchronous parallel with bound ``k``: loop-carried reads may be k versions old.
    ``send_every``: what the trainer posts leaves every that many steps (NOTE(async-staleness))."""

    def __init__(self, k: int, send_every: int = 1) -> None:
        super().__init__()
        if k < 0:
            raise ValueError(f"staleness must be >= 0, got {k}")
        self.staleness = k
        self.send_every = send_every
        self.have: dict = {}   # loop-carried var -> the version in the scope
        self.name = f"bounded({k})" if send_every == 1 else f"bounded({k}, sent every {send_every} steps)"

    def send_now(self, step: int) -> bool:
        """Whether what a step posted leaves at its end (else with a later step's, or at the
        first wait)."""
        return (step + 1) % self.send_every == 0

    def oldest_allowed(self, version: int) -> int:
        return version - self.staleness

    def take(self, io, vals: dict, edge, version: int, op) -> bool:
        """A loop-carried value of ``version`` may be any newer than ``oldest_allowed`` that has
        arrived: the newest is taken, older ones dropped, and how far behind it was is recorded
        (``staleness_seen``). The startup program's values are waited for as they are."""
        if edge.when != CARRIED or not RULES[edge.kind].newest_ok:
            return False
        if version <= -1:
            self.have[edge.var] = version
            return False
        mb, src = io.mailbox, edge.sources[0]
        have = self.have.get(edge.var, -2)
        newer = mb.newest(edge.var, src, have + 1)  # never waits
        if newer is not None:
            have, value = newer
            vals[edge.var] = to_device(io.xp, value)
        oldest = self.oldest_allowed(version)
        if have < oldest:  # too stale: wait for one recent enough
            have, value = mb.newest(edge.var, src, oldest, wait=True, timeout=io.timeout,
                                    describe=io.describe(op, version))
            vals[edge.var] = to_device(io.xp, value)
        self.have[edge.var] = have
        lag = max(0, version - have)
        self.staleness_seen[lag] = self.staleness_seen.get(lag, 0) + 1
        self.current_staleness = max(self.current_staleness, lag) if op is not None else lag
        return True

    def end_step(self, io, step: int) -> None:
        if self.send_now(step):
            io.mailbox.flush()

    def cadence(self, round_end: bool) -> str:
        if self.send_every == 1:
            return "every step, sent at the step's end"
        return (f"every step, leaving every {self.send_every} steps in one message per peer "
                f"(or at a wait that comes first)")


class Async(Sync):
    """Each gradient applied alone as it arrives; its sender gets the answer tagged with its own
    version (the version it waits for). ``newest_replies``: the trainers read only the newest
    parameters (they have a staleness bound), so of the answers waiting to leave for one
    trainer only the newest of each var is sent (NOTE(reply-batching))."""

    name = "async"

    def __init__(self, newest_replies: bool = False) -> None:
        super().__init__()
        self.newest_replies = newest_replies
        self.each: list = []          # (var, source) of every each edge of the served plan
        self.each_vars: set = set()
        self.updates: dict = {}       # each-op index -> updates applied
        self.seen: dict = {}          # (each-op index, trainer) -> updates when it last got one

    def reply_version(self, step: int, instance_version: int) -> int:
        return instance_version

    def serving(self, plan) -> None:
        self.each = [(p.each.var, src) for p in plan.ops if p.each is not None for src in p.each.sources]
        self.each_vars = {v for v, _ in self.each}

    def pass_ready(self, io, step: int) -> bool:
        """A pass starts once some trainer's instance is there."""
        return io.mailbox.await_any(self.each, f"executor {io.me} was waiting for any trainer's update "
                                               f"(async mode) at pass {step}")

    def instances(self, io, keys: list) -> list:
        """A trainer's instances are answered in its own order: ``src``'s oldest ``var`` is
        taken only if nothing older of it waits for another each-op here, so its gradient of
        step s is applied before its prefetch of step s+1 is answered (it reads its own update,
        as in one process)."""
        mb = io.mailbox
        out = []
        for k in keys:
            mine = mb.pending(k[0], k[2])
            if mine is None or all((other := mb.pending(v, k[2])) is None or other[1] >= mine[1]
                                   for v in self.each_vars):
                out.append(k)
        return out

    def next_instance(self, io, keys: list, ran: int, describe):
        """Whichever instance is there first, of any version, one per pass.

        NOTE(reply-batching): the instances that came together are answered in one message
        per trainer: what waits to leave for a trainer leaves once nothing more of it waits
        here to be handled (the instance taken now counts: its answer goes with the others),
        or past REPLY_BATCH values, or when this executor would wait."""
        mb = io.mailbox
        if ran or not any(mb.pending(k[0], k[2]) for k in keys):
            return None
        got = mb.take_any(keys, io.timeout, describe, any_version=True)
        mb.flush(but=mb.waiting_from(self.each_vars) | {got[0][2]}, limit=REPLY_BATCH)
        return got

    def answered(self, io, op, src: str) -> None:
        """Counts how many others' updates came in since ``src`` last got this op's value."""
        done = self.updates.get(op.index, 0)
        lag = done - self.seen.get((op.index, src), done)
        self.updates[op.index] = done + 1
        self.seen[(op.index, src)] = done + 1
        self.staleness_seen[lag] = self.staleness_seen.get(lag, 0) + 1

    def superseded(self, program) -> set:
        return {v.name for v in program.list_vars() if v.persistable} if self.newest_replies else set()

    def reply_label(self) -> str:
        return "the version of the instance it answers"

    def reply_cadence(self) -> str:
        line = ("per arriving instance, any source's, any version, one per pass; the answers to one "
                "trainer leave together once none of its instances waits here")
        if self.newest_replies:
            line += "; of a var's answers waiting to leave, only the newest is sent"
        return line


class Rounds(Sync):
    """A trainer merging ``m`` steps into one update (``merge_steps``), over ``inner``'s rules
    counted in rounds: its state (what it has, the staleness it saw) is ``inner``'s."""

    def __init__(self, m: int, inner: Sync) -> None:
        if m < 1:
            raise ValueError(f"merge_steps must be >= 1, got {m}")
        self.inner, self.counts_rounds = inner, False   # its state is inner's: no Sync.__init__
        self.round = m
        self.staleness = inner.staleness
        self.name = f"rounds({m}, {inner.name})"

    staleness_seen = property(lambda self: self.inner.staleness_seen)
    current_staleness = property(lambda self: self.inner.current_staleness)

    def begin_step(self) -> None:
        self.inner.begin_step()

    def wire(self, step: int) -> int:
        return step // self.round

    def round_end(self, step: int) -> bool:
        return (step + 1) % self.round == 0

    def wanted(self, when: str, step: int) -> int | None:
        if when == SAME and not self.round_end(step):
            return None   # mid-round: the pservers made nothing new
        return super().wanted(when, step)

    def oldest_allowed(self, version: int) -> int:
        return self.inner.oldest_allowed(version)

    def take(self, io, vals: dict, edge, version: int, op) -> bool:
        return self.inner.take(io, vals, edge, version, op)

    def end_step(self, io, step: int) -> None:
        if self.staleness:  # a stale-reading trainer may not wait for a while: it sends now
            io.mailbox.flush()

    def label(self) -> str:
        return f"round (step // {self.round})"

    def cadence(self, round_end: bool) -> str:
        return "once per round" if round_end else "every step"


def policy_for(cluster, role) -> Sync:
    """The policy of an executor of ``role`` in a job described by ``cluster`` (a
    ``ClusterSchema``; None: one process, ``Sync``)."""
    if cluster is None:
        return Sync()
    trainer = getattr(role, "value", role) == "trainer"
    k = cluster.staleness
    if not cluster.sync_mode:  # NOTE(async-staleness)
        base = Bounded(k, send_every=max(1, (k + 1) // 2)) if k and trainer else Async(newest_replies=bool(k))
    else:
        base = Bounded(k) if k else Sync()
    if cluster.merge_steps > 1:
        if trainer:
            return Rounds(cluster.merge_steps, base)
        base.counts_rounds = True
    return base
