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

import weakref
from typing import Any, Callable, Sequence

import numpy as np

from placegroup.errors import OpError, ProgramError
from placegroup.executor.scope import Scope, global_scope, to_numpy
from placegroup.ops.registry import EMPTY_VAR


class Step:
    """One op, resolved: ``run(vals)`` reads its inputs from ``vals`` and writes its outputs."""

    __slots__ = ("index", "op", "kernel", "ins", "outs", "attrs", "xp", "want")

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
        self.want = frozenset(slot for slot, _, _ in self.outs) if opdef.wants_outputs else None

    def run(self, vals: dict) -> None:
        ins = {}
        for slot, names, dup in self.ins:
            ins[slot] = [vals[n] for n in names] if dup else vals[names[0]]
        if self.want is None:
            outs = self.kernel(self.xp, ins, self.attrs)
        else:
            outs = self.kernel(self.xp, ins, self.attrs, self.want)
        for slot, names, dup in self.outs:
            value = outs[slot]
            if dup:
                for n, v in zip(names, value):
                    if n != EMPTY_VAR:
                        vals[n] = v
            elif names[0] != EMPTY_VAR:
                vals[names[0]] = value

    def explain(self, vals: dict, err: BaseException) -> str:
        """Why ``run`` failed, in the user's terms."""
        from placegroup.printer import format_op

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
        # name -> (var, numpy dtype, declared shape): a feed is checked against these each step
        self.feed_meta = {name: (v, np.dtype(v.dtype), v.shape) for name, v in block.vars.items()}


def _fetch_name(f: Any) -> str:
    return f if isinstance(f, str) else f.name


class Executor:
    """Runs programs on one place.

    Args:
        place: ``CPUPlace()`` (default) or ``CUDAPlace(i)``.

    Example::

        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(fluid.default_startup_program())
        loss, = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[avg_cost])
    """

    def __init__(self, place: Any = None) -> None:
        from placegroup.places import CPUPlace

        self.place = place if place is not None else CPUPlace()
        self.xp = self.place.array_module()
        self._plans: dict[int, tuple[Any, int, Plan]] = {}

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
        from placegroup.framework import default_main_program

        program = program if program is not None else default_main_program()
        scope = scope if scope is not None else global_scope()
        plan = self._plan(program)
        vals = scope.vars
        if feed:
            self._feed(plan, vals, feed)
        for step in plan.steps:
            try:
                step.run(vals)
            except Exception as e:  # wrapped with the op's context, original chained
                raise OpError(step.explain(vals, e)) from e
        out = []
        for f in fetch_list or ():
            name = _fetch_name(f)
            if name not in vals:
                raise ProgramError(f"fetch {name!r} has no value after the step; is it a var of "
                                   f"this program?")
            out.append(to_numpy(vals[name]) if return_numpy else vals[name])
        return out

    def close(self) -> None:
        """Release what the executor holds (its compiled plans)."""
        self._plans.clear()
