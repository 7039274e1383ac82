"""The Executor: runs a Program's ops in program order over a Scope.

``Executor(place).run(program, feed=..., fetch_list=...)`` feeds the named vars, runs every
op of block 0 once, and returns the fetched values as numpy arrays (Fluid's contract).

NOTE(lean-loop): the per-op cost of ``run`` is what every later figure stands on, so
everything that does not change between steps (the kernel, the slot -> name lists, the attrs,
the array module) is resolved once per program version into a ``Plan`` of ``Step`` objects;
``run`` only moves values between the scope's dict and the kernels. A program edit bumps
``program._version`` and the plan is rebuilt on the next run.

Thread-safety: one executor runs one program at a time; use one executor per thread.
"""
from __future__ import annotations

import sys
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from placegroup import config
from placegroup.errors import OpError, ProgramError
from placegroup.executor.scope import Scope, global_scope, to_numpy
from placegroup.ops.registry import EMPTY_VAR, KernelContext
from placegroup.ir.printer import format_op



class LocalComm:
    """The communicator of a one-member group: what a collective op sees in one process."""

    rank, size = 0, 1

    def allreduce(self, x, op, tag, step):
        return x.copy()

    def allgather(self, x, axis, tag, step):
        return x.copy()

    def reducescatter(self, x, axis, tag, step):
        return x.copy()


class Step:
    """One op, resolved: ``run(vals)`` reads its inputs from ``vals`` and writes its outputs."""

    __slots__ = ("index", "op", "kernel", "ins", "outs", "attrs", "xp", "ctx")

    def __init__(self, index: int, op, xp) -> None:
        opdef = op.opdef
        self.index = index
        self.op = op
        self.xp = xp
        self.kernel: Callable = opdef.kernels["gpu" if xp is not np else "cpu"]
        self.ins = tuple((s.name, tuple(op.inputs.get(s.name, ())), s.duplicable)
                         for s in opdef.inputs if op.inputs.get(s.name))
        self.outs = tuple((s.name, tuple(op.outputs.get(s.name, ())), s.duplicable)
                          for s in opdef.outputs if op.outputs.get(s.name))
        self.attrs = dict(op.attrs)
        # a collective op's communicator: one member here; a distributed plan sets its group and
        # the real rank (0 in one process)
        self.ctx = KernelContext(outputs=(slot for slot, _, _ in self.outs), rank=0, tag=f"op{index}",
                                 comm=LocalComm() if getattr(opdef, "wants_comm", False) else None,
                                 inplace=False)

    def inplace_vars(self) -> set[str]:
        """The vars this op replaces in place by its OpDef (ParamOut over Param, ...)."""
        pairs = self.op.opdef.inplace
        return {n for out, inp in pairs.items() for n in self.op.outputs.get(out, ())
                if n in self.op.inputs.get(inp, ())}

    def grant_inplace(self, unsafe: set[str]) -> None:
        """Let the kernel write its in-place vars when none is in ``unsafe`` (NOTE(sparse-copy))."""
        mine = self.inplace_vars()
        if mine and not mine & unsafe:
            self.ctx.inplace = True

    def inputs(self, vals: dict) -> dict:
        ins = {}
        for slot, names, dup in self.ins:
            ins[slot] = [vals[n] for n in names] if dup else vals[names[0]]
        return ins

    def call(self, ins: dict, vals: dict) -> None:
        """Run the kernel on ``ins`` and write its outputs into ``vals``."""
        outs = self.kernel(self.xp, ins, self.attrs, self.ctx)
        for slot, names, dup in self.outs:
            value = outs[slot]
            if dup:
                for n, v in zip(names, value):
                    if n != EMPTY_VAR:
                        vals[n] = v
            elif names[0] != EMPTY_VAR:
                vals[names[0]] = value

    def run(self, vals: dict) -> None:
        self.call(self.inputs(vals), vals)

    def explain(self, vals: dict, err: BaseException) -> str:
        """Why ``run`` failed, in the user's terms."""
        from placegroup.ir.printer import format_op

        head = f"While executing op #{self.index} `{self.op.type}`: {format_op(self.op)}"
        if isinstance(err, KeyError):
            missing = [n for _, names, _ in self.ins for n in names if n not in vals]
            if missing:
                return (f"{head}\n  input {missing[0]!r} has no value: feed it, or run the startup "
                        f"program first")
            return f"{head}\n  the kernel did not produce output {err}"
        shapes = {n: tuple(getattr(vals.get(n), "shape", ())) for _, names, _ in self.ins for n in names}
        return f"{head}\n  input shapes {shapes}\n  {type(err).__name__}: {err}"


class Plan:
    def __init__(self, program, xp) -> None:
        block = program.global_block()
        self.steps = [Step(i, op, xp) for i, op in enumerate(block.ops)]
        for st in self.steps:  # one process: nobody else can see a value (NOTE(sparse-copy))
            st.grant_inplace(set())
        # name -> (var, numpy dtype, declared shape): a feed is checked against these each step
        self.feed_meta = {name: (v, np.dtype(v.dtype), v.shape) for name, v in block.vars.items()}
        self.persistable = {name for name, v in block.vars.items() if v.persistable}
        # what the checkpoint schedule asks of a program run by one process (placegroup/io/checkpoint.py):
        # a startup program only initializes; a training step optimizes
        self.initializes = bool(block.ops) and all(op.role == "init" for op in block.ops)
        self.trains = any(op.role == "optimize" for op in block.ops)


def _fetch_name(f: Any) -> str:
    return f if isinstance(f, str) else f.name


class Executor:
    """Runs programs on one place.

    Args:
        place: ``CPUPlace()`` (default) or ``CUDAPlace(i)``.
        peer_timeout: seconds a distributed executor waits for a silent peer.
        checkpoint: a ``fluid.io.CheckpointConfig``: after the startup program, resume from
            the newest complete checkpoint; after every N training steps, save this process's
            part (docs/checkpoint.md). The ``PLACEGROUP_CHECKPOINT_*`` and ``PLACEGROUP_RESUME``
            environment variables override its fields, or stand for it.

    Example::

        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(fluid.default_startup_program())
        loss, = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[avg_cost])
    """

    def __init__(self, place: Any = None, peer_timeout: float | None = None, checkpoint: Any = None) -> None:
        from placegroup.ir.places import CPUPlace

        self.place = place if place is not None else CPUPlace()
        self.xp = self.place.array_module()
        self._plans: dict[int, tuple[Any, int, Plan]] = {}
        self._runtime = None  # the sockets of a distributed executor, made at its first run
        self.peer_timeout = peer_timeout
        self._checkpoint = checkpoint
        self._ckpt: Any = False  # the Checkpointer (None: no schedule), made at the first run
        self._steps_done = 0     # training steps this executor ran (one process)

    def _checkpointer(self):
        if self._ckpt is False:  # the environment is read at the first run, not at construction
            from placegroup.io.checkpoint import Checkpointer, CheckpointConfig

            config = CheckpointConfig.from_env(self._checkpoint)
            self._ckpt = Checkpointer(config) if config is not None else None
        return self._ckpt

    @property
    def resumed_step(self) -> int:
        """The global step this run resumed from (0 when it did not): the checkpoint holds the
        state after that many steps, so a trainer skips that many batches (docs/checkpoint.md)."""
        ck = self._checkpointer()
        return ck.resumed_step if ck is not None else 0

    def _plan(self, program) -> Plan:
        key = id(program)
        hit = self._plans.get(key)
        if hit is not None and hit[0]() is program and hit[1] == program._version:
            return hit[2]
        plan = Plan(program, self.xp)
        self._plans[key] = (weakref.ref(program), program._version, plan)
        return plan

    def _feed(self, plan: Plan, vals: dict, feed: dict) -> None:
        xp = self.xp
        for name, value in feed.items():
            meta = plan.feed_meta.get(name)
            if meta is None:
                raise ProgramError(f"feed {name!r} is not a var of the program; its data vars are "
                                   f"{sorted(n for n, m in plan.feed_meta.items() if m[0].is_data)}")
            _, dtype, shape = meta
            arr = value if hasattr(value, "__cuda_array_interface__") else np.asarray(value)
            if arr.dtype != dtype:
                arr = arr.astype(dtype)
            if shape is not None:
                if len(arr.shape) != len(shape) or any(
                        d != -1 and d != a for d, a in zip(shape, arr.shape)):
                    raise ProgramError(f"feed {name!r} has shape {list(arr.shape)}, but the var is "
                                       f"declared {list(shape)} (-1 is any size)")
            vals[name] = xp.asarray(arr) if xp is not np else arr

    def run(self, program=None, feed: dict | None = None, fetch_list: Sequence | None = None,
            scope: Scope | None = None, return_numpy: bool = True, **_compat: Any) -> list:
        """Run one step of ``program`` and return the fetched values.

        Args:
            program: the Program (default: ``default_main_program()``).
            feed: var name -> array (or list) for the program's data vars.
            fetch_list: vars or names to return after the step.
            scope: where values live (default: ``global_scope()``).
            return_numpy: return numpy arrays (True) or the raw values.

        Returns:
            A list with one value per ``fetch_list`` entry.

        Raises:
            ProgramError: on a feed that is not a var or has the wrong shape.
            OpError: "While executing op #i `type`: ..." when a kernel fails.
        """
        from placegroup.ir.framework import default_main_program

        program = program if program is not None else default_main_program()
        scope = scope if scope is not None else global_scope()
        if program.executor is not None and program.cluster is not None:
            return self._run_distributed(program, feed, fetch_list, scope, return_numpy)
        if scope.settle is not None:  # parameters still on their way from the pservers
            scope.settle()
        plan = self._plan(program)
        vals = scope.vars
        if feed:
            self._feed(plan, vals, feed)
        for step in plan.steps:
            if config.DEBUG:
                print(f"[placegroup] run {format_op(step.op, step.index)}", file=sys.stderr)
            try:
                step.run(vals)
            except Exception as e:  # wrapped with the op's context, original chained
                raise OpError(step.explain(vals, e)) from e
        ck = self._checkpointer()
        if ck is not None and plan.initializes:
            ck.after_startup(self, program, scope)
        elif ck is not None and plan.trains:
            self._steps_done += 1
            ck.after_step(self, program, scope, self._steps_done)
        return [self._fetch(vals, f, return_numpy, plan) for f in fetch_list or ()]

    def _run_distributed(self, program, feed, fetch_list, scope: Scope, return_numpy: bool) -> list:
        from placegroup.executor.distributed import Runtime
        from placegroup.ir.place_group import ExecutorRole

        rt = self._runtime
        if rt is None:
            rt = self._runtime = Runtime(program, self.xp, self.peer_timeout)
        elif rt.cluster.find(program.executor) != rt.me:
            raise ProgramError(f"this executor is {rt.me}; the program was made for {program.executor}: "
                               f"use one Executor per role")
        plan = rt.plan(program)
        vals = scope.vars
        scope.set_guard = _set_guard(plan, rt.me)
        scope.get_hook = rt.settle_one
        scope.settle = rt.settle
        ck = self._checkpointer()
        try:
            if feed:
                self._feed(plan, vals, feed)
            if plan.startup:
                rt.run_step(plan, vals, -1)
                if ck is not None:
                    ck.after_startup(self, program, scope)
            elif rt.me.role == ExecutorRole.PSERVER:
                # NOTE(pserver-run): the first call serves the whole job; as seed 002 §3.5 runs
                # the trainers' loop on pservers too, later calls return at once, and each
                # fetch is the value this pserver holds, or None for a var held elsewhere.
                if not rt.served:
                    rt.serve(plan, vals, None if ck is None else _saver(self, ck, rt, program, scope))
                    rt.served = True
                return [self._fetch(vals, f, return_numpy, plan) if _fetch_name(f) in vals else None
                        for f in fetch_list or ()]
            else:
                rt.run_step(plan, vals, rt.step)
                rt.step += 1
                if ck is not None and ck.due(rt.step):  # after the pservers' update (it settles)
                    ck.after_step(self, program, scope, rt.step)
            names = [_fetch_name(f) for f in fetch_list or ()]
            rt.settle([n for n in names if n in rt.pending])
            remote = [n for n in names if n not in vals and plan.holders.get(n) and rt.me not in plan.holders[n]]
            if remote:  # a var held elsewhere: its holder's value of this step (DESIGN.md §4)
                got = rt.fetch_remote(plan, remote, rt.step - 1)
                return [(to_numpy(got[n]) if return_numpy else got[n]) if n in got
                        else self._fetch(vals, n, return_numpy, plan) for n in names]
        except BaseException as e:
            rt.fail(e)
            raise
        return [self._fetch(vals, n, return_numpy, plan) for n in names]

    @staticmethod
    def _fetch(vals: dict, f: Any, return_numpy: bool, plan=None):
        name = _fetch_name(f)
        if name not in vals:
            holders = getattr(plan, "holders", {}).get(name)
            where = f" (held by {', '.join(map(str, holders))})" if holders else ""
            raise ProgramError(f"fetch {name!r} has no value after the step{where}; is it a var of "
                               f"this program?")
        if not return_numpy:
            return vals[name]
        value = to_numpy(vals[name])
        # an op may update a persistable var in place later (NOTE(sparse-copy)): hand out a copy
        return value.copy() if value is vals[name] and plan is not None and name in plan.persistable else value

    @property
    def staleness(self) -> int:
        """How many versions behind the newest the parameters this trainer's last step read
        were (0 in sync mode; at most k with ``staleness=k``)."""
        return self._runtime.current_staleness if self._runtime is not None else 0

    @property
    def staleness_seen(self) -> dict:
        """lag -> how many loop-carried reads of this executor had it (bounded staleness)."""
        return dict(self._runtime.staleness_seen) if self._runtime is not None else {}

    def close(self) -> None:
        """Release what the executor holds. A distributed trainer tells the pservers it is
        done (they stop serving when every trainer has); its sockets close."""
        self._plans.clear()
        if self._runtime is not None:
            self._runtime.close()
            self._runtime = None


def _saver(exe, ck, rt, program, scope):
    """The checkpoint hook after each step of a distributed executor: when a save is due, what
    the step posted leaves first, so the peers go on while this one writes."""
    def after_step(steps_done: int) -> None:
        if ck.due(steps_done):
            rt.mailbox.flush()
            ck.after_step(exe, program, scope, steps_done)
    return after_step


def _set_guard(plan, me):
    """``Tensor.set`` on a var this executor does not hold raises PlacementError."""
    from placegroup.errors import PlacementError

    def guard(name: str) -> None:
        holders = plan.holders.get(name)
        if holders is not None and me not in holders:
            raise PlacementError(f"{name!r} is held by {', '.join(map(str, holders))}, not by {me}: "
                                 f"set it there")
    return guard
