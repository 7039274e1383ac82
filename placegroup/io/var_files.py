"""Saving and loading var values: Fluid 1.x's ``fluid.io`` save/load functions.

The files are documented in ``docs/prog_bin.md`` and never pickled (programs, prog.bin, are
written by files.py):

* var values: ``save_persistables`` / ``save_params`` / ``save_vars`` write the values that the
  executor's scope holds, one file per var named after it in ``dirname`` (``filename=None``)
  or all in one file ``dirname/filename``, in the var-file format of var_format.py.

Example::

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    ...train...
    fluid.io.save_program(main, "ckpt/prog.bin")
    fluid.io.save_persistables(exe, "ckpt", main)
    # later, perhaps in another process:
    main = fluid.io.load_program("ckpt/prog.bin")
    fluid.io.load_persistables(exe, "ckpt", main)

Every write is atomic (NOTE(atomic-write)). Loading checks every file before it sets any
value, so a failed load leaves the scope as it was.

Thread-safety: saving reads the scope while no executor writes it; call these between steps.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Sequence

import numpy as np

from placegroup.errors import SerializationError
from placegroup.executor.scope import Scope, global_scope, to_numpy
from placegroup.ir.cluster import Cluster
from placegroup.util.atomic_files import atomic_write
from placegroup.util.fluid_tensor_file import FluidVars
from placegroup.util.dynamic_table import DynamicTable, state_of_records, state_records
from placegroup.util.var_format import file_of, read, records
from placegroup.ir.variable import DYNAMIC_TABLE
from placegroup.ir.framework import default_main_program

__all__ = ["is_parameter", "is_persistable", "load_params", "load_persistables", "load_vars",
           "save_params", "save_persistables", "save_vars"]


# -- Fluid's save/load API ------------------------------------------------------------------
def is_persistable(var) -> bool:
    """Fluid's predicate: vars that live across steps (params, optimizer state, counters)."""
    return bool(var.persistable)


def is_parameter(var) -> bool:
    """Fluid's predicate: parameters only."""
    return bool(var.is_parameter)


def _program(main_program):

    return main_program if main_program is not None else default_main_program()


def _select(program, vars, predicate) -> list:
    """The vars to save or load, once each, in program order."""
    if vars is not None:
        block = program.global_block()
        chosen = [block.var(v) if isinstance(v, str) else v for v in vars]
    else:
        chosen = [v for v in program.list_vars() if predicate is None or predicate(v)]
        if program.executor is not None and program.cluster is not None:
            # a program made for one executor (get_program): only what that executor holds,
            # so each pserver saves and loads its own blocks and shards

            cluster = Cluster.from_program(program)
            me = cluster.find(program.executor)
            chosen = [v for v in chosen if me in cluster.matching(v.place)]
    seen: dict[str, Any] = {}
    for v in chosen:
        seen.setdefault(v.name, v)
    return list(seen.values())


def _scope(executor, scope: Scope | None) -> Scope:
    if scope is None:
        own = getattr(executor, "scope", None)  # a distributed executor may own its scope
        scope = own if isinstance(own, Scope) else global_scope()
    if scope.settle is not None:  # a trainer's parameters still on their way (NOTE(end-of-step))
        scope.settle()
    return scope


def held_elsewhere(scope: Scope, names: list) -> dict:
    """The values of ``names`` a trainer's pservers hold for it (NOTE(save-gather) in
    executor/executor.py); {} in one process or on a pserver."""
    return scope.held_elsewhere(names) if names and scope.held_elsewhere is not None else {}


# NOTE(table-files): a table keyed by raw ids (sparse_embedding) is saved as the arrays of its
# state, records named ``<var>:<array>`` (``state_records``), in the var's one file or in the
# combined one: keys, values and, unless only its rows are wanted (an inference model), the
# optimizer's state, counts and candidates. Loading makes the table again from them; an
# inference model's then serves lookups, an id it lacks reading zeros.
def save_vars(executor, dirname: str, main_program=None, vars: Sequence | None = None,
              predicate: Callable | None = None, filename: str | None = None, *,
              scope: Scope | None = None, table_rows_only: bool = False) -> list[str]:
    """Save the values of some vars of ``main_program`` that the scope holds.

    Args:
        executor: the Executor whose scope holds the values (``global_scope()`` unless it has
            its own ``scope``).
        dirname: the directory, created if missing.
        main_program: the program (default: ``default_main_program()``).
        vars: Variables (or names) to save; when None, every var with ``predicate(var)``
            (every var when ``predicate`` is None too, as in Fluid).
        filename: None for one file per var (named after it), else one file for all.
        scope: overrides the executor's scope.
        table_rows_only: a table keyed by raw ids keeps only its keys and rows
            (NOTE(table-files)).

    Returns:
        The names saved, in program order. A selected var the scope holds no value for is
        skipped (in a distributed run a process holds only its part), except that a trainer
        asks its pservers for the parameters they hold for it (NOTE(save-gather) in
        executor/executor.py).

    Raises:
        SerializationError: a value that is not a plain numeric array, or a var name that
            cannot be a file name (with ``filename=None``).

    Example:
        >>> save_vars(exe, "ckpt", main, predicate=is_parameter)  # doctest: +SKIP
        ['fc_0.w_0', 'fc_0.b_0']
    """
    sc = _scope(executor, scope)
    selected = list(_select(_program(main_program), vars, predicate))
    values = {**sc.vars, **held_elsewhere(sc, [v.name for v in selected if v.name not in sc.vars])}
    items: dict[str, list] = {}  # var -> its records: the array, or a table's arrays
    for v in selected:
        if v.name not in values:
            continue
        if isinstance(values[v.name], DynamicTable):  # NOTE(table-files)
            items[v.name] = state_records(v.name, values[v.name], rows_only=table_rows_only)
            continue
        arr = to_numpy(values[v.name])
        if not isinstance(arr, np.ndarray):
            raise SerializationError(f"var {v.name!r}: cannot save a {type(arr).__name__} value")
        items[v.name] = [(v.name, arr)]
    os.makedirs(dirname, exist_ok=True)
    if filename is not None:
        atomic_write(os.path.join(dirname, filename), records([r for recs in items.values() for r in recs]))
    else:
        paths = {name: file_of(dirname, name) for name in items}  # every name checked before a file is written
        for name, recs in items.items():
            os.makedirs(os.path.dirname(paths[name]), exist_ok=True)
            atomic_write(paths[name], records(recs))
    return list(items)


def _check(var, arr: np.ndarray, path: str, fluid: bool) -> None:
    if arr.dtype.name != var.dtype:
        raise SerializationError(f"var {var.name!r} in {path!r} is {arr.dtype.name}, but the "
                                 f"program declares {var.dtype}")
    # a file Fluid wrote (``fluid``) loads in its own shape, as Fluid's load op takes it
    if var.shape is not None and not fluid and (len(var.shape) != arr.ndim or any(
            d != -1 and d != a for d, a in zip(var.shape, arr.shape))):
        raise SerializationError(f"var {var.name!r} in {path!r} has shape {list(arr.shape)}, but "
                                 f"the program declares {list(var.shape)} (-1 is any size)")


def load_vars(executor, dirname: str, main_program=None, vars: Sequence | None = None,
              predicate: Callable | None = None, filename: str | None = None, *,
              scope: Scope | None = None) -> list[str]:
    """Load values saved by ``save_vars`` (same ``dirname`` and ``filename``) into the scope.

    Args: as ``save_vars``. Values go to the executor's place (its GPU for ``CUDAPlace``).

    Returns:
        The names loaded, in program order.

    Raises:
        SerializationError: naming the var and the file, for a var that no file holds, a
            dtype or shape that differs from the program's declaration, or a truncated,
            corrupted or foreign file. Nothing is set unless every var checks out.

    Example:
        >>> load_vars(exe, "ckpt", main, predicate=is_persistable)  # doctest: +SKIP
    """
    chosen = _select(_program(main_program), vars, predicate)
    loaded: dict[str, Any] = {}
    tables = [v for v in chosen if v.type == DYNAMIC_TABLE]
    chosen = [v for v in chosen if v.type != DYNAMIC_TABLE]
    for v in tables:  # NOTE(table-files)
        path = os.path.join(dirname, filename) if filename is not None else file_of(dirname, v.name)
        try:
            table = DynamicTable.from_state(state_of_records(v.name, read(path, v.name)))
        except ValueError as e:
            raise SerializationError(f"{path!r}: {e}") from None
        want = (v.shape[-1], v.dtype)
        if (table.config.dim, table.config.dtype) != want:
            raise SerializationError(f"table {v.name!r} in {path!r} has rows of {table.config.dim} {table.config.dtype}, "
                                     f"but the program declares {want[0]} {want[1]}")
        loaded[v.name] = table
    if filename is not None and chosen:
        path = os.path.join(dirname, filename)
        saved = read(path, names=sorted(v.name for v in chosen))  # Fluid's combined file: sorted names
        for v in chosen:
            if v.name not in saved:
                raise SerializationError(f"var {v.name!r} is not in {path!r}, which holds "
                                         f"{sorted(saved)}")
            _check(v, saved[v.name], path, isinstance(saved, FluidVars))
            loaded[v.name] = saved[v.name]
    else:
        for v in chosen:
            path = file_of(dirname, v.name)
            saved = read(path, v.name)
            if v.name not in saved:
                raise SerializationError(f"{path!r} holds {sorted(saved)}, not var {v.name!r}")
            _check(v, saved[v.name], path, isinstance(saved, FluidVars))
            loaded[v.name] = saved[v.name]
    target = _scope(executor, scope)
    place = getattr(executor, "place", None)
    for name, arr in loaded.items():
        if isinstance(arr, DynamicTable):
            target.vars[name] = arr
        else:
            target.var(name).get_tensor().set(arr, place)
    return list(loaded)


def save_params(executor, dirname: str, main_program=None, filename: str | None = None, *,
                scope: Scope | None = None) -> list[str]:
    """``save_vars`` of the parameters (``is_parameter``); see ``save_vars``."""
    return save_vars(executor, dirname, main_program, None, is_parameter, filename, scope=scope)


def load_params(executor, dirname: str, main_program=None, filename: str | None = None, *,
                scope: Scope | None = None) -> list[str]:
    """``load_vars`` of the parameters (``is_parameter``); see ``load_vars``."""
    return load_vars(executor, dirname, main_program, None, is_parameter, filename, scope=scope)


def save_persistables(executor, dirname: str, main_program=None, filename: str | None = None, *,
                      scope: Scope | None = None, table_rows_only: bool = False) -> list[str]:
    """``save_vars`` of every persistable var: parameters, optimizer state, lr, counters.

    Saving these after a step and loading them before the next resumes training exactly.
    """
    return save_vars(executor, dirname, main_program, None, is_persistable, filename, scope=scope,
                     table_rows_only=table_rows_only)


def load_persistables(executor, dirname: str, main_program=None, filename: str | None = None, *,
                      scope: Scope | None = None) -> list[str]:
    """``load_vars`` of every persistable var; see ``save_persistables``."""
    return load_vars(executor, dirname, main_program, None, is_persistable, filename, scope=scope)


