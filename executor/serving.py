"""A pserver's side of running a placed program: *each* edges and the serving loop.

``Serving`` is mixed into ``Runtime`` (executor/distributed.py), whose sockets, mailbox, plans
and step counters these methods use; it holds no state of its own.
"""
from __future__ import annotations

import logging

from placegroup.comm.mailbox import PeersDone
from placegroup.values import as_host, to_device
from placegroup.executor.dist_plan import SAME, DistPlan, DistStep
from placegroup.ir.place_group import ExecutorRole

log = logging.getLogger("placegroup.executor")
EACH_HOLD_S = 0.002  # NOTE(each-batching)


class Serving:
    """``serve`` (a pserver's ``exe.run``) and the *each*-edge ops it runs (DESIGN.md §4)."""

    def _run_each(self, ds: DistStep, vals: dict, step: int, gathered: dict) -> None:
        """An *each* edge (DESIGN.md §4): the op runs once per arriving instance, in arrival
        order, and what it makes goes back to the instance that triggered it.

        NOTE(async-each): in sync mode every instance of this step's version is waited for. In
        async mode (``sync_mode=False``) trainers run at their own pace: a pass over the program
        starts only when some instance has arrived (``serve``), and each each-op then answers
        at most one, of any version, oldest first; what it sends back is tagged with the version
        it answered, which is the version the asking trainer waits for. So a pass is one
        trainer's update, and the lr schedule's step counter, run once per pass, counts them."""
        r = ds.each
        version = step if r.when == SAME else step - 1
        keys = [(r.var, version, src) for src in r.sources]
        ran = 0
        if self.async_mode:  # a trainer's instances are answered in its own order (its step)
            keys = [k for k in keys if self._in_order(k[0], k[2])]
        while keys:
            if self.async_mode and (ran or not any(self.mailbox.oldest(k[0], k[2]) for k in keys)):
                return  # async: one instance per pass (serve() waits until one is there)
            try:
                # NOTE(each-batching): in sync mode, what waits for a trainer not yet answered
                # (a parameter update) is held back briefly, to leave with that trainer's answer
                key, value = self.mailbox.wait_any(keys, self.wait_timeout, self._describe(ds, step),
                                                   any_version=self.async_mode,
                                                   hold=0.0 if self.async_mode else EACH_HOLD_S)
            except PeersDone:
                if ran:
                    return
                raise
            keys = [k for k in keys if k[2] != key[2]]
            if value is None:  # that instance is done
                continue
            gathered[r.slot] = to_device(self.xp, value)
            self._call(ds, vals, step, gathered)
            ran += 1
            src = key[2]
            if self.async_mode:  # how many others' updates came in since src last got this value
                done = self.updates.get(ds.step.index, 0)
                lag = done - self.last_seen.get((ds.step.index, src), done)
                self.updates[ds.step.index] = done + 1
                self.last_seen[(ds.step.index, src)] = done + 1
                self.staleness_seen[lag] = self.staleness_seen.get(lag, 0) + 1
            for n, peers in ds.pushes:
                if src in peers:
                    self.mailbox.post(src, n, key[1] if self.async_mode else step, as_host(vals[n]))
            if not self.async_mode:
                self.mailbox.flush_peer(src)

    def _in_order(self, var: str, src: str) -> bool:
        """Async: ``src``'s oldest ``var`` is not newer than anything else it has pending for
        this executor's each-ops, so one trainer's gradient of step s is applied before its
        prefetch of step s+1 is answered (it reads its own update, as in one process)."""
        mine = self.mailbox.oldest(var, src)
        if mine is None:
            return True
        return all((other := self.mailbox.oldest(v, src)) is None or other[1] >= mine[1]
                   for v in self.each_vars)

    def serve(self, plan: DistPlan, vals: dict, after_step=None) -> None:
        """A pserver's ``exe.run``: steps until every trainer has said done. ``after_step(n)``,
        if given, runs after each step (n steps done): the checkpoint hook (docs/checkpoint.md)."""
        self._send_initial(plan, vals)
        trainers = {e.name for e in self.cluster.executors if e.role == ExecutorRole.TRAINER}
        each = [(ds.each.var, src) for ds in plan.steps if ds.each is not None for src in ds.each.sources]
        self.each_vars = {v for v, _ in each}
        try:
            while True:
                while self.async_mode and not any(self.mailbox.oldest(v, src) for v, src in each):
                    if trainers <= set(self.mailbox.done):  # NOTE(async-each): wait for an instance
                        return
                    self.mailbox.flush()
                    if not self.mailbox.pump_once(1.0):
                        self.mailbox.check_peers(sorted(trainers), f"executor {self.me} was waiting for any "
                                                 f"trainer's update (async mode) at pass {self.step}")
                try:
                    self.run_step(plan, vals, self.step)
                except PeersDone:
                    return
                self.step += 1
                if after_step is not None:
                    after_step(self.step)
        finally:
            if self.staleness_seen:  # issue #6: the distribution of staleness it saw
                log.info("%s: staleness of the updates it applied (lag: count): %s", self.me,
                         dict(sorted(self.staleness_seen.items())))
