"""The interpreter: one loop over a plan, for one process and for one executor of many.

``Interpreter.run_step(plan, vals, step)`` runs the plan's ops in program order. Before an op
runs, its remote inputs are taken by their edge rules (placegroup/ir/edges.py) at the versions
the policy picks (executor/policy.py); after it runs, what it is the last to write goes to the
executors that read it. The mode is the policy's alone: the loop calls its hooks (``take``,
``instances``, ``next_instance``, ``answered``, ``begin_step``, ``end_step``, ``pass_ready``)
unconditionally and never asks which mode it runs. A one-process plan has no remote edges, so the same loop is a plain
run of kernels. Every failure comes out as one ``OpError`` that names the executor, the step
and the op ("While executing op #12 `mul` ..."), with the original chained; ``hook``, when
set, is called before each op (``PLACEGROUP_DEBUG=1`` logs the ops through it).

NOTE(lean-loop): the per-op cost of the loop is what every later figure stands on. An op with
no remote input, no push, no communicator and no round to mind is ``plain``: its kernel is
called straight, with nothing else looked at; all the rest was resolved once, in the plan.

NOTE(end-of-step): after step s, the loop-carried values a trainer reads remotely (the fresh
parameters) are *pending* at version s: the next step's first op that reads one waits for it
there, so the next step's first messages (its prefetch ids) leave before that wait and one
round trip serves both. Whoever looks earlier gets the value after update s all the same:
``find_var(...).get_tensor()``, a fetch and ``exe.close()`` ``settle`` the pending values first.

NOTE(each-batching): in sync mode, an each-edge op (a prefetch) answers each trainer as its
instance arrives, but what it sends a trainer not yet answered waits briefly (EACH_HOLD_S in
executor/policy.py) to leave in one message with that trainer's answer.

Thread-safety: an interpreter belongs to the executor thread that runs it.
"""
from __future__ import annotations

import functools

import logging
import sys
import time
from typing import Callable

from placegroup import config
from placegroup.comm.mailbox import PeersDone
from placegroup.errors import MissingInput, OpError
from placegroup.executor.plan import Plan, PlannedOp
from placegroup.executor.policy import CARRIED, CONSTANT, Sync
from placegroup.executor.profile import END, SWITCH, Profile
from placegroup.ir.edges import RULES, InEdge
from placegroup.ir.printer import format_op
from placegroup.values import as_host, to_device

log = logging.getLogger("placegroup.executor")


def debug_hook(who: str) -> Callable:
    """The ``PLACEGROUP_DEBUG=1`` hook: one log line per op run."""
    def hook(op: PlannedOp, step: int) -> None:
        print(f"[{who} step {step}] run {format_op(op.op, op.index)}", file=sys.stderr)
    return hook


def _profiling(profile: Profile, then: Callable | None) -> Callable:
    """The hook that marks each op's start in ``profile`` (then calls ``then``, if any)."""
    def hook(op: PlannedOp, step: int) -> None:
        profile.mark(op.op.type)
        if then is not None:
            then(op, step)
    return hook


class Interpreter:
    """Runs plans step by step for executor ``me`` (None: one process).

    Args:
        me: the ``ExecutorId`` it runs as, or None for one process.
        policy: the version policy (``Sync()`` for one process); it holds the mode's state.
        link: the executor's ``Link`` to its peers (executor/link.py), or None.
        xp: numpy or cupy.

    What a policy's hooks may use of it: ``me``, ``mailbox``, ``xp``, ``timeout`` (a wait's
    safety net) and ``describe(op, step)``.
    """

    def __init__(self, me=None, policy=None, link=None, xp=None) -> None:
        self.me = me
        self.policy = policy if policy is not None else Sync()
        self.link = link
        self.mailbox = link.mailbox if link is not None else None
        self.timeout = link.wait_timeout if link is not None else None
        self.xp = xp
        self.who = str(me) if me is not None else "local"
        self.hook: Callable | None = debug_hook(self.who) if config.DEBUG else None
        # PLACEGROUP_PROFILE (executor/profile.py): every op is marked through the hook
        self.profile = Profile(self.who, self.mailbox) if config.get("PLACEGROUP_PROFILE") else None
        if self.profile is not None:
            self.hook = _profiling(self.profile, self.hook)
        self.profile_gen = -1  # fluid.profiler's switch as last followed (_follow_switch)
        self.unprofiled_hook = self.hook
        self.pending: dict = {}          # var -> (InEdge, step): carried values not taken yet
        self.vals: dict | None = None
        self.initial_sent: set = set()

    # -- one step ------------------------------------------------------------------------------
    def run_step(self, plan: Plan, vals: dict, step: int) -> None:
        """Run every op of ``plan`` once, as step ``step`` (-1: the job's startup program)."""
        self.vals = vals
        self.policy.begin_step()
        if self.profile_gen != SWITCH.generation:
            self._follow_switch()
        link = self.link
        if link is not None and step <= 0 and id(plan) not in self.initial_sent:
            self.initial_sent.add(id(plan))
            self._deliver_all(plan.initial, vals, -1)
        hook = self.hook
        round_end = self.policy.round_end(step)
        for op in plan.ops:
            if op.plain and hook is None:  # NOTE(lean-loop)
                try:
                    op.run(vals)
                except Exception as e:
                    raise self._op_error(op, vals, step, e) from e
                continue
            if op.round_end and not round_end:
                continue   # mid-round (executor/policy.py, Rounds)
            if hook is not None:
                hook(op, step)
            gathered: dict = {}
            if op.remote:
                self._take(vals, op, op.remote, step, gathered)
            if op.each is not None:
                self._run_each(op, vals, step, gathered)
                continue
            self._call(op, vals, step, gathered)
            if op.pushes and round_end:  # a value made mid-round is no round's (Rounds)
                self._deliver_all(op.pushes, vals, self.policy.wire(step))
        if self.profile is not None:
            self.profile.mark(END)
        if link is not None:
            self._end_step(plan, step)
        if self.profile is not None:
            self.profile.step_done(plan.startup or plan.initializes)
            if plan.startup or plan.initializes:  # the tables keyed by raw ids it made: their line
                for name, v in vals.items():
                    if hasattr(v, "profile_line"):
                        self.profile.extra.setdefault(f"table {name}", functools.partial(v.profile_line, name))

    def _follow_switch(self) -> None:
        """fluid.profiler was started or stopped: profile from this step on, or stop (a profile
        from PLACEGROUP_PROFILE stays)."""
        self.profile_gen = SWITCH.generation
        if SWITCH.on and self.profile is None:
            self.profile = Profile(self.who, self.mailbox)
            SWITCH.profiles.append(self.profile)
            self.hook = _profiling(self.profile, self.unprofiled_hook)
        elif not SWITCH.on and self.profile is not None and self.profile in SWITCH.profiles:
            self.profile.mark(None)
            self.profile, self.hook = None, self.unprofiled_hook
            if self.mailbox is not None:
                self.mailbox.stats(timed=False)

    def _end_step(self, plan: Plan, step: int) -> None:
        # NOTE(deferred-flush) in executor/link.py: what this step posted leaves at the next wait
        # (the parameter pull that ends a dense step, the next step's prefetch, a fetch) or at
        # close, in one message per peer, unless the policy sends it now
        self.policy.end_step(self, step)
        self.link.step_done(self.policy.wire(step) if step >= 0 else step, self.vals)
        if plan.carried and not plan.startup and self.policy.round_end(step):
            self.settle()  # values the step did not read (none, normally): no mixing versions
            self.pending = {e.var: (e, step) for e in plan.carried}

    def _call(self, op: PlannedOp, vals: dict, step: int, gathered: dict) -> None:
        ctx = op.ctx
        ctx.step = step
        if op.group is not None and ctx.comm is None:  # a collective: its group's communicator, once
            ctx.comm = self.link.communicator(op.group, lambda missing: self.describe(op, ctx.step)(missing))
        try:
            op.call(op.inputs(vals) if not gathered else op.gathered_inputs(vals, gathered), vals)
        except Exception as e:
            raise self._op_error(op, vals, step, e) from e

    def _op_error(self, op: PlannedOp, vals: dict, step: int, err: BaseException) -> OpError:
        """``err`` from ``op``'s kernel with the op's context (the caller chains the original)."""
        where = f"[{self.me}, step {step}] " if self.me is not None else ""
        cls = MissingInput if isinstance(err, KeyError) and op.missing(vals) else OpError  # NOTE(user-errors)
        return cls(where + op.explain(vals, err))

    def _deliver_all(self, outs, vals: dict, version: int) -> None:
        for out in outs:
            value = as_host(vals[out.var])  # a LoDTensor travels with its offsets (NOTE(lod-frame))
            for peer in out.peers:
                self.mailbox.post(peer, out.var, version, value)

    # -- taking remote inputs --------------------------------------------------------------------
    def describe(self, op: PlannedOp | None, step: int):
        """What a wait of ``op`` (None: the end of the step) at ``step`` is for, for errors."""
        def describe(missing) -> str:
            var, ver, src = missing[0]
            where = f"op #{op.index} `{op.op.type}`" if op is not None else "the end of the step"
            return f"executor {self.me} was waiting in {where} at step {step} for {var!r} version {ver} from {src}"
        return describe

    def _version(self, edge: InEdge, op: PlannedOp | None, step: int, vals: dict) -> int | None:
        """The version ``edge`` waits for at ``step`` (None: nothing to take now)."""
        if edge.when == CONSTANT:
            return None if edge.var in vals else -1  # a constant from the startup program: once
        if op is None:  # settling a pending value: the step it was pending at
            return self.policy.wire(step)
        if edge.when == CARRIED and step > 0 and self.pending.pop(edge.var, None) is None:
            return None  # settled already (NOTE(end-of-step))
        if step < 0:
            return step
        version = self.policy.wanted(edge.when, step)
        if version is None and edge.var not in vals:
            version = self.policy.wire(step)  # mid-round, and nothing in hand yet
        return version

    def _take(self, vals: dict, op: PlannedOp | None, edges, step: int, gathered: dict) -> None:
        keys, spans = [], []
        policy = self.policy
        for e in edges:
            version = self._version(e, op, step, vals)
            if version is None or policy.take(self, vals, e, version, op):
                continue
            rule = RULES[e.kind]
            ks = rule.keys(e, version)
            spans.append((e, rule, len(keys), len(ks)))
            keys += ks
        if not keys:
            return
        t0 = time.perf_counter() if self.profile is not None else 0.0
        got = self.mailbox.wait(keys, self.link.wait_timeout, self.describe(op, step))
        if self.profile is not None:
            self.profile.wait(time.perf_counter() - t0)
        xp = self.xp
        for e, rule, at, n in spans:
            rule.put(e, [to_device(xp, v) for v in got[at:at + n]], vals, gathered)

    def settle(self, names=None) -> None:
        """Take the pending loop-carried values (all, or those of ``names``) into the scope
        (NOTE(end-of-step))."""
        if not self.pending or self.vals is None:
            return
        wanted = [n for n in (self.pending if names is None else names) if n in self.pending]
        by_step: dict[int, list] = {}
        for n in wanted:
            e, step = self.pending.pop(n)
            by_step.setdefault(step, []).append(e)
        for step, edges in by_step.items():
            self._take(self.vals, None, edges, step, {})

    def settle_one(self, name: str) -> None:
        """The scope's hook before it hands out ``name``'s value."""
        if name in self.pending:
            self.settle([name])

    # -- each edges ------------------------------------------------------------------------------
    def _run_each(self, op: PlannedOp, vals: dict, step: int, gathered: dict) -> None:
        """The op runs once per arriving instance of its each edge, and what it makes goes where
        the edge's rule routes it (back to the instance that triggered it). Which instances, in
        what order, and the version and timing of the answers are the policy's."""
        e = op.each
        rule = RULES[e.kind]
        policy, mb = self.policy, self.mailbox
        keys = policy.instances(self, rule.keys(e, policy.wanted(e.when, step) if step >= 0 else step))
        describe = self.describe(op, step)
        ran = 0
        while keys:
            t0 = time.perf_counter() if self.profile is not None else 0.0
            try:
                got = policy.next_instance(self, keys, ran, describe)
            except PeersDone:
                if ran:
                    return
                raise
            finally:
                if self.profile is not None:
                    self.profile.wait(time.perf_counter() - t0)
            if got is None:
                return
            key, value = got
            src = key[2]
            keys = [k for k in keys if k[2] != src]
            if value is None:  # that instance is done
                continue
            rule.put(e, [to_device(self.xp, value)], vals, gathered)
            self._call(op, vals, step, gathered)
            ran += 1
            reply = policy.reply_version(step, key[1])
            for out in op.pushes:
                for peer in rule.route(out.peers, src):
                    mb.post(peer, out.var, reply, as_host(vals[out.var]))
            policy.answered(self, op, src)

    # -- serving (a pserver's exe.run) -------------------------------------------------------------
    def serve(self, plan: Plan, vals: dict, after_step: Callable | None = None) -> None:
        """Steps until every trainer has said done. A pass starts when the policy says it may
        (async: once an each-edge instance is there). ``after_step(n)``, if given, runs after
        each step (n steps done): the checkpoint hook."""
        self.vals = vals
        if id(plan) not in self.initial_sent:
            self.initial_sent.add(id(plan))
            self._deliver_all(plan.initial, vals, -1)
        policy = self.policy
        policy.serving(plan)
        if not plan.ops:  # nothing is placed here (more pservers than blocks): nothing ends a step
            self.mailbox.await_any([("", t) for t in self.link.trainers],  # but every trainer's done
                                   f"executor {self.me} (which runs no op) was waiting for the trainers to finish")
            return
        step = 0
        try:
            while True:
                if not policy.pass_ready(self, step):
                    return
                self.link.step = step  # what its messages' headers say
                try:
                    self.run_step(plan, vals, step)
                except PeersDone:
                    return
                step += 1
                if after_step is not None:
                    after_step(step)
        finally:
            if policy.staleness_seen:
                log.info("%s: staleness of the updates it applied (lag: count): %s", self.me,
                         dict(sorted(policy.staleness_seen.items())))


__all__ = ["Interpreter"]
