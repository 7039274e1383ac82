"""``Executor.train_from_dataset`` / ``infer_from_dataset``: run a program once per batch of a
Dataset (placegroup/datafeed/dataset_factory.py), as Fluid 1.8 does.

Each batch is one ``exe.run(program, feed=batch)``: in one process and on a trainer of a
distributed job alike (a trainer's program then talks to its pservers as with ``exe.run``;
give each trainer its own files, as Fluid users do with ``fleet.split_files``). Every
``print_period`` batches each fetched var is printed as ``<fetch_info>: <value>``.

NOTE(infer-from-dataset): Fluid 1.8's ``infer_from_dataset`` runs the whole program and in
one process still applies its optimizer ops (only a distributed worker stops pushing
gradients). Updating parameters while "inferring" is never what a script wants, so
placegroup refuses a program with optimizer ops there: pass ``program.clone(for_test=True)``
taken before ``minimize``, or use ``train_from_dataset``.
"""
from __future__ import annotations

import time

import numpy as np

from placegroup.errors import ConfigError
from placegroup.executor.scope import global_scope, to_numpy
from placegroup.ir.framework import default_main_program

__all__ = ["run_from_dataset"]


def run_from_dataset(exe, program, dataset, scope, is_infer: bool, debug: bool, fetch_list,
                     fetch_info, print_period: int, fetch_handler) -> None:
    """The loop of ``train_from_dataset`` (``is_infer=False``) and ``infer_from_dataset``."""
    if dataset is None:
        raise ConfigError("train_from_dataset: dataset is needed: make one with "
                          "fluid.DatasetFactory().create_dataset(...)")
    if not hasattr(dataset, "batches"):
        raise ConfigError(f"train_from_dataset: dataset is a {type(dataset).__name__}, expected a "
                          f"QueueDataset or InMemoryDataset from fluid.DatasetFactory")
    if is_infer:
        _check_no_optimizer(program)
    fetch_list = list(fetch_list or [])
    names = [f if isinstance(f, str) else f.name for f in fetch_list]
    info = list(fetch_info) if fetch_info else names
    if len(info) != len(names):
        raise ConfigError(f"train_from_dataset: fetch_info has {len(info)} entries for {len(names)} "
                          f"fetch_list vars; give one label per var")
    period = max(int(print_period or 1), 1)
    handler_vars = dict(getattr(fetch_handler, "var_dict", None) or {})
    handler_every = float(getattr(fetch_handler, "period_secs", 60))
    last_handled = start = time.time()
    batches = instances = 0
    for feed in dataset.batches():
        got = exe.run(program, feed=feed, fetch_list=fetch_list, scope=scope, return_numpy=False)
        batches += 1
        instances += _count(feed)
        if names and batches % period == 0:
            for label, value in zip(info, got):
                print(f"{label}: {_show(value)}", flush=True)
        if fetch_handler is not None and time.time() - last_handled >= handler_every:
            last_handled = time.time()
            fetch_handler.handler(_from_scope(scope, handler_vars))
    if debug:
        spent = time.time() - start
        print(f"{'infer' if is_infer else 'train'}_from_dataset: {batches} batches, {instances} instances "
              f"in {spent:.3f}s ({instances / spent if spent else 0.0:.1f} instances/s)", flush=True)


def _check_no_optimizer(program) -> None:
    """NOTE(infer-from-dataset)."""
    prog = program if program is not None else default_main_program()
    prog = getattr(prog, "_program", prog)  # a CompiledProgram's program
    for block in prog.blocks:
        for i, op in enumerate(block.ops):
            if op.role == "optimize":
                raise ConfigError(f"infer_from_dataset: the program has optimizer op #{i} `{op.type}`, which "
                                  f"would update parameters (Fluid 1.8 applies it in one process); pass "
                                  f"main.clone(for_test=True) taken before minimize(), or use train_from_dataset")


def _count(feed: dict) -> int:
    first = next(iter(feed.values()), None)
    if first is None:
        return 0
    offsets = getattr(first, "offsets", None)
    return len(offsets[0]) - 1 if offsets else len(first)


def _show(value) -> str:
    arr = np.asarray(getattr(value, "data", value) if hasattr(value, "offsets") else value)
    return str(arr.reshape(-1)[0]) if arr.size == 1 else np.array2string(arr.reshape(-1), threshold=20)


def _from_scope(scope, var_dict: dict) -> dict:
    vals = (scope if scope is not None else global_scope()).vars
    return {key: (to_numpy(getattr(vals[name], "data", vals[name])) if name in vals else None)
            for key, var in var_dict.items() for name in [var if isinstance(var, str) else var.name]}
