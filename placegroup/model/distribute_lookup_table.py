"""Fluid 1.8's ``fluid.distribute_lookup_table``: find a program's distributed embedding table
and the ids and outputs of its lookups.

A table is distributed when a lookup asked for it (``embedding(is_distributed=True)``): the
layer marks the parameter (``attrs["distributed"]``) and the lookup op (``is_distributed``), and
the transpiler's sparse pass shards it over the pservers (placegroup/transpiler/sparse.py). A
lookup is an op with ``Ids`` and ``W`` inputs and an ``Out`` output (``lookup_table``,
``lookup_table_v2``), where Fluid looks at ``lookup_table`` ops only; Fluid supports one
distributed table, and so do these functions (the sparse pass itself shards any number).

Example::

    emb = fluid.layers.embedding(ids, size=[10000, 8], is_sparse=True, is_distributed=True)
    name = find_distributed_lookup_table(fluid.default_main_program())     # 'embedding_0.w_0'
    find_distributed_lookup_table_inputs(fluid.default_main_program(), name)  # [ids]

Thread-safety: read a program no thread is changing.
"""
from __future__ import annotations

from typing import Any

__all__ = ["find_distributed_lookup_table", "find_distributed_lookup_table_inputs",
           "find_distributed_lookup_table_outputs"]


def _lookups(program: Any, table_name: str | None = None) -> list:
    """The global block's lookup ops (of ``table_name`` only, when given)."""
    ops = [op for op in program.global_block().ops
           if op.role == "forward" and op.input("W") and op.input("Ids") and op.output("Out")]
    return [op for op in ops if table_name is None or op.input("W")[0] == table_name]


def _distributed(program: Any, op: Any) -> bool:
    block = program.global_block()
    w = op.input("W")[0]
    return bool(op.attrs.get("is_distributed")) or (block.has_var(w) and bool(block.var(w).attrs.get("distributed")))


def find_distributed_lookup_table(program: Any) -> str | None:
    """The name of the table the lookups of ``program`` read as distributed, or None.

    Raises:
        RuntimeError: two distributed tables (Fluid's message: it supports one).
    """
    name = None
    for op in _lookups(program):
        if not _distributed(program, op):
            continue
        w = op.input("W")[0]
        if name is not None and name != w:
            raise RuntimeError(f"all distributed lookup_table_ops should have only one table: {name!r} and {w!r}")
        name = w
    return name


def find_distributed_lookup_table_inputs(program: Any, table_name: str) -> list:
    """The ids Variables of every lookup of ``table_name``, in program order."""
    vars_ = program.current_block().vars
    return [vars_[n] for op in _lookups(program, table_name) for n in op.input("Ids")]


def find_distributed_lookup_table_outputs(program: Any, table_name: str) -> list:
    """The output Variables of every lookup of ``table_name``, in program order."""
    vars_ = program.current_block().vars
    return [vars_[n] for op in _lookups(program, table_name) for n in op.output("Out")]
