"""A var's value computed while a model is built, by the executor's own loop.

The model-building API lies below the executor, so it cannot import it; but a layer may need
a value now (NOTE(weight-norm) in placegroup/model/layer_helper_base.py: a weight's norm from its
initial value). The executor registers its runner here when it is imported (``import
placegroup`` imports it), and ``evaluate`` compiles the ops into a plan and runs them with
``run_step``, as the startup program's step (-1): the same kernels and the same loop as
``exe.run(startup)``, not a second interpreter.

Example::

    value = evaluate(sblock.ops[first:], sblock, "fc_0.w_0_v")
"""
from __future__ import annotations

from typing import Callable

from placegroup.ir.framework import Program

_RUNNER: list[Callable] = []


def register_runner(runner: Callable) -> None:
    """``runner(program, name) -> value``: run ``program`` once as a startup program, on the
    host, and return var ``name``'s value (the executor registers it)."""
    _RUNNER[:] = [runner]


def evaluate(ops, block, name: str):
    """The value that ``ops`` (of ``block``) give var ``name``, computed now on the host."""
    if not _RUNNER:
        raise RuntimeError("placegroup.executor is not imported: nothing can run ops while the model is built")
    program = Program()
    scratch = program.global_block()
    for op in ops:
        for n in op.input_arg_names + op.output_arg_names:
            if not scratch.has_var(n):
                v = block.var(n)
                scratch.create_var(n, shape=v.shape, dtype=v.dtype, persistable=v.persistable)
        scratch.append_op(op.type, inputs=op.inputs, outputs=op.outputs, attrs=op.attrs, role="init", infer=False)
    return _RUNNER[0](program, name)
