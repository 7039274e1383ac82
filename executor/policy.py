"""Version policies: the one place that says which version an edge waits for and which
version a value is sent as (the training *mode*).

An executor runs its ops step after step; each value it sends is tagged with a version and
each remote input waits for one. Which ones is the mode's whole meaning, and it lives here,
one class per mode, one method per question; the interpreter asks and never branches on the
mode itself:

===============  =============================================================================
``Sync``         op #i reading V at step s waits for V of step s when V's last writer comes
                 before i in program order (``SAME``), else of step s-1 (``CARRIED``: a
                 parameter the optimizer writes later; step -1 is the startup program); a var
                 the program never writes (``CONSTANT``) is waited for once, at version -1.
                 Every wait points earlier in (step, program order): sync cannot deadlock.
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
base mode, never ``Rounds``.

Example::

    policy = policy_for(program.cluster, ExecutorRole.TRAINER)   # Rounds(2, Bounded(1)), say
    policy.wanted(CARRIED, 5)     # 1: round 2 reads round 1's parameters

Thread-safety: a policy is immutable; an executor's per-run facts (what it has, what it saw)
are the interpreter's.
"""
from __future__ import annotations

SAME, CARRIED, CONSTANT = "same", "carried", "constant"


class Sync:
    """Every version exactly (module docstring)."""

    name = "sync"
    staleness = 0
    any_version = False   # an each edge waits for this step's instance of every source
    round = 1

    def wire(self, step: int) -> int:
        """The version a value made at ``step`` is sent as."""
        return step

    def round_end(self, step: int) -> bool:
        """Whether ``step`` ends a round: round-end ops run, loop-carried values change."""
        return True

    def send_now(self, step: int) -> bool:
        """Whether a trainer that may not wait for a while (bounded staleness) sends what
        ``step`` posted at its end."""
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

    def waits_for_instance(self) -> bool:
        """Whether a pass over the program starts only when an each-edge instance is there."""
        return False

    def reply_version(self, step: int, instance_version: int) -> int:
        """The version an each-edge answer is sent as, for an instance of ``instance_version``."""
        return self.wire(step)

    def label(self) -> str:
        """How ``wire`` tags a value, in words (for ``placegroup dump``)."""
        return "step"

    def reply_label(self) -> str:
        """How ``reply_version`` tags an each-edge answer, in words."""
        return self.label()

    def __repr__(self) -> str:
        return self.name


class Bounded(Sync):
    """Stale synchronous parallel with bound ``k``: loop-carried reads may be k versions old.
    ``send_every``: what the trainer posts leaves every that many steps (NOTE(async-staleness))."""

    def __init__(self, k: int, send_every: int = 1) -> None:
        if k < 0:
            raise ValueError(f"staleness must be >= 0, got {k}")
        self.staleness = k
        self.send_every = send_every
        self.name = f"bounded({k})" if send_every == 1 else f"bounded({k}, sent every {send_every} steps)"

    def send_now(self, step: int) -> bool:
        """Whether what a step posted leaves at its end (else with a later step's, or at the
        first wait)."""
        return (step + 1) % self.send_every == 0

    def oldest_allowed(self, version: int) -> int:
        return version - self.staleness


class Async(Sync):
    """Each gradient applied alone as it arrives; its sender gets the answer tagged with its own
    version (the version it waits for)."""

    name = "async"
    any_version = True

    def waits_for_instance(self) -> bool:
        return True

    def reply_version(self, step: int, instance_version: int) -> int:
        return instance_version

    def reply_label(self) -> str:
        return "the version of the instance it answers"


class Rounds(Sync):
    """A trainer merging ``m`` steps into one update (``merge_steps``), over ``inner``'s rules
    counted in rounds."""

    def __init__(self, m: int, inner: Sync) -> None:
        if m < 1:
            raise ValueError(f"merge_steps must be >= 1, got {m}")
        self.round = m
        self.inner = inner
        self.staleness = inner.staleness
        self.name = f"rounds({m}, {inner.name})"

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

    def label(self) -> str:
        return f"round (step // {self.round})"


def policy_for(cluster, role) -> Sync:
    """The policy of an executor of ``role`` in a job described by ``cluster`` (a
    ``ClusterSchema``; None: one process, ``Sync``)."""
    if cluster is None:
        return Sync()
    trainer = getattr(role, "value", role) == "trainer"
    if not cluster.sync_mode:  # NOTE(async-staleness)
        k = cluster.staleness
        base = Bounded(k, send_every=max(1, (k + 1) // 2)) if k and trainer else Async()
    else:
        base = Bounded(cluster.staleness) if cluster.staleness else Sync()
    if cluster.merge_steps > 1 and trainer:
        return Rounds(cluster.merge_steps, base)
    return base
