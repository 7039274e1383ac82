"""Fluid 1.8's block split of dense vars (``slice_variable``), its name helpers and ``log``,
which ``fluid.transpiler.distribute_transpiler`` exposes.

NOTE(fluid-block-split): Fluid splits a var of ``numel`` elements over ``slice_count`` pservers
into blocks of whole rows (dim 0), counted in elements::

    split_count = min(slice_count, max(1, floor(numel / min_block_size)))
    block_size  = ceil(numel / split_count), rounded up to a multiple of the row width
                  prod(shape[1:]) when the var has 2 or more dims
    split_count = ceil(numel / block_size)      # every block is block_size but the last

placegroup's own slice pass (slice.py, ``parts.block_parts``) counts with ``ceil(numel /
min_block_size)``, so a var of between one and two ``min_block_size`` gets 2 blocks there and 1
in Fluid (a 10 x 1000 weight over 3 pservers with the default 8192: 2 blocks here, 1 in Fluid);
``slice_variable`` answers as Fluid does, for tools that reason about Fluid's layout.
"""
from __future__ import annotations

import math
from typing import Sequence

__all__ = ["VarBlock", "log", "same_or_split_var", "slice_variable"]

PRINT_LOG = False  # Fluid's switch for ``log`` (set ``placegroup.transpiler.var_blocks.PRINT_LOG``)


def log(*args) -> None:
    """Print ``args`` (as a tuple, as Fluid does) when ``PRINT_LOG`` is True."""
    if PRINT_LOG:
        print(args)


class VarBlock:
    """One block of a split var: ``offset`` is the block's index (its first element is
    ``offset * size`` of the full blocks), ``size`` its number of elements."""

    def __init__(self, varname: str, offset: int, size: int) -> None:
        self.varname = varname
        self.offset = offset
        self.size = size

    def __str__(self) -> str:
        return "%s:%d:%d" % (self.varname, self.offset, self.size)


def same_or_split_var(p_name: str, var_name: str) -> bool:
    """Whether ``p_name`` is ``var_name`` or one of its blocks by Fluid's naming (``w.block0``)."""
    return p_name == var_name or p_name.startswith(var_name + ".block")


def slice_variable(var_list: Sequence, slice_count: int, min_block_size: int) -> list[str]:
    """Fluid's split of each var into blocks (NOTE(fluid-block-split)).

    Args:
        var_list: vars (anything with ``name`` and a fully known ``shape``).
        slice_count: how many pservers share them.
        min_block_size: the smallest block worth sending, in elements (Fluid's default 8192).

    Returns:
        ``["name:block_id:elements", ...]``, every var's blocks in order.

    Raises:
        ValueError: ``slice_count`` or ``min_block_size`` below 1, or a var with no elements or
            an unknown (-1 or None) dim.

    Example::

        w = main.global_block().var("fc_0.w_0")                # 100 x 300 floats
        slice_variable([w], 3, 8192)    # ['fc_0.w_0:0:10200', 'fc_0.w_0:1:10200', 'fc_0.w_0:2:9600']
    """
    if int(slice_count) < 1 or int(min_block_size) < 1:
        raise ValueError(f"slice_variable: slice_count ({slice_count}) and min_block_size ({min_block_size}) "
                         f"must be at least 1")
    blocks = []
    for var in var_list:
        shape = list(var.shape or [])
        numel = math.prod(shape)
        if not shape or numel <= 0:
            raise ValueError(f"slice_variable: var {var.name!r} has shape {shape}: it needs known dims "
                             f"and at least one element")
        split_count = min(int(slice_count), max(1, numel // int(min_block_size)))
        block_size = math.ceil(numel / split_count)
        if len(shape) >= 2:
            width = math.prod(shape[1:])
            block_size += -block_size % width
        split_count = math.ceil(numel / block_size)
        for block_id in range(split_count):
            blocks.append(str(VarBlock(var.name, block_id, min(block_size, numel - block_id * block_size))))
    return blocks
