"""Fluid 1.8's ``fluid.contrib.memory_usage_calc``: ``memory_usage``, an estimate of the memory
a program's values take at a given batch size.

Example::

    lower, upper, unit = fluid.contrib.memory_usage(fluid.default_main_program(), batch_size=10)
    print("memory usage is about %.3f - %.3f %s" % (lower, upper, unit))
"""
from __future__ import annotations

import numpy as np

from placegroup.ir.framework import LOD_TENSOR, Program

__all__ = ["memory_usage"]


def memory_usage(program, batch_size: int):
    """The memory of every dense var the global block's ops write, once each, at
    ``batch_size``, plus 5% to 10%, as Fluid 1.8 estimates it.

    A dim of -1 counts ``batch_size`` (a dim -k counts ``k * batch_size``, as in Fluid); a var
    of unknown shape counts nothing. The unit is B, KB or MB, chosen by the size.

    Args:
        program: the Program.
        batch_size: a positive int.

    Returns:
        (lower estimate, upper estimate, unit): the sum times 1.05 and times 1.1.

    Raises:
        TypeError: ``program`` is not a Program.
        ValueError: ``batch_size`` <= 0, or a var with two unknown dims.
    """
    if not isinstance(program, Program):
        raise TypeError(f"Calculating Memory Usage requires Program as its Parameter.But you passed in "
                        f"{type(program)}")
    if batch_size <= 0:
        raise ValueError("The batch size need to be positive.")
    block = program.global_block()
    total = 0.0
    seen = {"@EMPTY@"}
    for op in block.ops:
        for name in op.output_arg_names:
            if name in seen:
                continue
            seen.add(name)
            var = block.var(name)
            if var.type != LOD_TENSOR or var.shape is None:
                continue
            count, unknown = 1, 0
            for d in var.shape:
                if d < 0:
                    unknown += 1
                    if unknown > 1:
                        raise ValueError(f"Var {name} has more than one negative dim.")
                    count *= batch_size * (-d)
                else:
                    count *= d
            total += count * np.dtype(var.dtype).itemsize
    unit = "B"
    if total > 1024:
        total /= 1024
        unit = "KB"
        if total > 1024:
            total /= 1024
            unit = "MB"
    return total * 1.05, total * 1.1, unit
