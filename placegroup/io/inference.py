"""Inference models: Fluid 1.8's ``fluid.io.save_inference_model`` and ``load_inference_model``.

An inference model is a directory holding a program pruned to what computes the targets from
the feeds (prog.bin's format, ``__model__`` by default) and the persistable vars that program
reads (var files, one per var by default or one ``params_filename``): docs/prog_bin.md,
"Inference models". Nothing is pickled.

Example::

    exe = fluid.Executor(fluid.CPUPlace())
    ...train...
    fluid.io.save_inference_model("model", ["x"], [prediction], exe)
    # later, perhaps in another process:
    program, feed_names, fetch_targets = fluid.io.load_inference_model("model", exe)
    out, = exe.run(program, feed={feed_names[0]: x}, fetch_list=fetch_targets)

Thread-safety: as var_files.py: save and load between steps, while no executor writes the scope.
"""
from __future__ import annotations

import os
import warnings
from typing import Sequence

from placegroup.errors import ProgramError, SerializationError
from placegroup.io.files import load_program, save_program
from placegroup.io.var_files import (
    _scope,
    held_elsewhere,
    load_persistables,
    save_persistables,
)
from placegroup.ir.framework import Program, Variable, default_main_program
from placegroup.ir.framework_helpers import FEED_TARGETS, FETCH_TARGETS

__all__ = ["load_inference_model", "prune_for_inference", "save_inference_model"]

FEED_KEY, FETCH_KEY = FEED_TARGETS, FETCH_TARGETS  # keys of Program.extra, NOTE(feed-fetch-targets)
PASS_NAME = "prune_for_inference"


# NOTE(inference-prune): what an inference program keeps. It starts from clone(for_test=True)
# (forward and init ops only, is_test set) with every placement fact dropped (the executor,
# the cluster, each var's and op's place and edges), so a transpiled trainer program becomes a
# one-process one that reads whole parameters from the scope. A walk back from the targets then
# keeps the ops that write a needed var; a feed is a source, so what computes a feed (a reader)
# goes. What is left must read only feeds, persistable vars (saved beside it) and what its own
# earlier ops wrote; anything else is an error naming the var and, where the training program
# computed it by an op the clone drops (an lr schedule, say), that op. A forward collective (a
# model-parallel layer, whose weight each trainer holds only its columns of) is refused. A
# lookup of rows a trainer prefetched from a table's blocks (NOTE(block-prefetch)) reads the
# whole table again, which the trainer asks its pservers for (NOTE(save-gather)).
def prune_for_inference(program: Program, feed_names: Sequence[str], target_names: Sequence[str],
                        shown: dict[str, str] | None = None) -> Program:
    """A one-process copy of ``program`` that computes ``target_names`` from ``feed_names``
    (NOTE(inference-prune)); ``program`` is not changed. ``shown`` maps a target to the name its
    errors give (the var a fetch scale op copies).

    Raises:
        ProgramError: a feed or target that is not a var, a var the targets need that is neither
            fed, persistable nor computed, or a target that does not depend on any feed.
    """
    block = program.global_block()
    for what, names in (("feeded_var_names", feed_names), ("target_vars", target_names)):
        for n in names:
            if not block.has_var(n):
                data = sorted(v.name for v in block.vars.values() if v.is_data)
                raise ProgramError(f"{what}: {n!r} is not a var of the program (its data vars: {data})")
    p = program.clone(for_test=True)
    p.executor, p.cluster = None, None
    for v in p.list_vars():
        v.place = None
    b = p.global_block()
    for op in (op for blk in p.blocks for op in blk.ops):
        op.place, op.edges = None, {}
    for op in b.ops:  # a lookup of rows prefetched from a table's blocks reads the table again
        for slot, names in op.inputs.items():
            whole = [b.var(n).attrs.get("prefetch_of") if b.has_var(n) else None for n in names]
            op.inputs[slot] = [w if w and b.has_var(w) else n for n, w in zip(names, whole)]
    feeds, needed, keep = set(feed_names), set(target_names), []
    for op in reversed(b.ops):
        if set(op.output_arg_names) & (needed - feeds):
            keep.append(op)
            needed.update(op.input_arg_names)
    keep.reverse()
    for i, op in enumerate(keep):  # e.g. a model-parallel fc: its weight is this trainer's columns
        if op.opdef.wants_comm:
            raise ProgramError(f"op #{i} `{op.type}` of the inference program is a collective over "
                               f"{op.attrs.get('nranks', 'several')} trainers (a model-parallel layer): "
                               f"an inference model runs in one process; save the untranspiled program")
    # Which feeds each value depends on, and whether each read is fed, saved or computed.
    deps: dict[str, frozenset] = {n: frozenset([n]) for n in feeds}
    for i, op in enumerate(keep):
        for n in op.input_arg_names:
            if n not in deps and not b.var(n).persistable:
                raise ProgramError(_unmade(program, n, op, i, feed_names))
        got = frozenset().union(*(deps.get(n, frozenset()) for n in op.input_arg_names))
        for n in op.output_arg_names:
            deps[n] = deps.get(n, frozenset()) | got
    for n in target_names:
        if not deps.get(n):
            n = (shown or {}).get(n, n)
            raise ProgramError(f"target {n!r} does not depend on the feeds {list(feed_names)}: "
                               f"an inference model computes its targets from what it is fed")
    b.ops = keep
    used = feeds | set(target_names) | {n for op in keep for n in op.input_arg_names + op.output_arg_names}
    b.vars = {n: v for n, v in b.vars.items() if n in used}
    _keep_used_blocks(p)
    p.provenance.append(PASS_NAME)
    p.extra.update({FEED_KEY: list(feed_names), FETCH_KEY: list(target_names)})
    p._bump()
    p.verify()
    return p


def _keep_used_blocks(p: Program) -> None:
    """Drop the blocks no kept op runs (a loop's gradient block, a branch the targets do not
    need), with their ancestors kept, and number the rest again in order."""
    used, todo = {0}, [0]
    while todo:
        for op in p.blocks[todo.pop()].ops:
            idx = op.attrs.get("sub_block", -1) if op.opdef.sub_block else -1
            while idx >= 0 and idx not in used:
                used.add(idx)
                todo.append(idx)
                idx = p.blocks[idx].parent_idx
    order = sorted(used)
    new = {old: i for i, old in enumerate(order)}
    p.blocks = [p.blocks[i] for i in order]
    for blk in p.blocks:
        blk.idx, blk.parent_idx = new[blk.idx], new.get(blk.parent_idx, -1)
        for op in blk.ops:
            if op.opdef.sub_block:
                op.attrs["sub_block"] = new[op.attrs["sub_block"]]


def _unmade(program: Program, name: str, op, index: int, feed_names) -> str:
    head = f"op #{index} `{op.type}` of the inference program reads {name!r}, which"
    var = program.global_block().var(name)
    if var.is_data:
        return f"{head} is a data var not among the feeds {list(feed_names)}: feed it, or choose other targets"
    writers = [(i, o) for i, o in enumerate(program.global_block().ops) if name in o.output_arg_names]
    if writers:
        i, w = writers[0]
        return (f"{head} only op #{i} `{w.type}` (role {w.role}) of the training program computes; an "
                f"inference model keeps forward ops only and runs in one process (NOTE(inference-prune))")
    return f"{head} is neither fed, persistable nor computed by any op"


def _lacking(lacking: list) -> str:
    parts = [v for v in lacking if v.attrs.get("slice_of")]
    if parts:  # a distributed table's shards are read where the pservers held them
        v = parts[0]
        return (f"the inference program reads {v.name!r}, part {v.attrs['slice_of'][1]} of "
                f"{v.attrs['slice_of'][0]!r}, which the pservers held (a distributed lookup table): this "
                f"scope has no value for it. Load its parts into this scope first (from the pservers' "
                f"checkpoint), or save the untranspiled program from a scope holding the whole table")
    return (f"the inference program reads persistable vars {[v.name for v in lacking]} that the "
            f"executor's scope holds no value for: run the startup program (and train) in that "
            f"scope before saving")


def _fluid_targets(program: Program, target_vars) -> list[str]:
    """Fluid 1.8 fetches each target through ``scale(t, 1.0, name="save_infer_model/scale_i")``
    and returns those names; the same ops are appended here, to ``program`` (a copy)."""
    block = program.global_block()
    names = []
    for i, t in enumerate(target_vars):
        name = f"save_infer_model/scale_{i}"
        if t.name != name:  # a loaded inference model saved again fetches the same names
            if block.has_var(name):
                raise ProgramError(f"target_vars: the program already has a var {name!r}, the name "
                                   f"Fluid gives the fetch of target {i} ({t.name!r})")
            src = block.var(t.name)
            block.create_var(name=name, shape=src.shape, dtype=src.dtype)
            block.append_op("scale", {"X": [t.name]}, {"Out": [name]}, {"scale": 1.0})
        names.append(name)
    return names


def save_inference_model(dirname: str, feeded_var_names, target_vars, executor, main_program=None,
                         model_filename: str | None = None, params_filename: str | None = None,
                         export_for_deployment: bool = True, program_only: bool = False) -> list[str]:
    """Save the part of ``main_program`` that computes ``target_vars`` from the feeds, and the
    persistable values it reads, for ``load_inference_model``.

    Args:
        dirname: the directory, created if missing.
        feeded_var_names: the names of the vars to feed (a str for one).
        target_vars: the Variables to compute (one Variable, or a list).
        executor: the Executor whose scope holds the values (trained parameters).
        main_program: the program (default: ``default_main_program()``); a transpiled trainer
            program is accepted and saved as a one-process program (NOTE(inference-prune)).
            It is not changed (Fluid appends its fetch scale ops to it; here they go to a copy).
        model_filename: the program's file name in ``dirname`` (default ``__model__``).
        params_filename: None for one file per var, else the one file for every value.
        export_for_deployment: False saves the whole program, unpruned, as
            ``<model_filename>.main_program`` (as Fluid 1.8), with all its persistables.
        program_only: save the program only, no values (Fluid warns; so does this).

    Returns:
        The fetch var names: Fluid's ``save_infer_model/scale_<i>``, one per target.

    Raises:
        ValueError: feeds that are not strs, targets that are not Variables (Fluid's checks).
        ProgramError: a feed that is not a var of the program, a target that does not depend on
            the feeds, or one that needs a var neither fed nor saved; a persistable var it reads
            that the scope holds no value for (run the startup program first).
        SerializationError: a value that cannot be saved.

    Example:
        >>> save_inference_model("model", ["x"], [pred], exe)  # doctest: +SKIP
        ['save_infer_model/scale_0']
    """
    if isinstance(feeded_var_names, str):
        feeded_var_names = [feeded_var_names]
    elif not all(isinstance(n, str) for n in feeded_var_names):
        raise ValueError("'feed_var_names' should be a list of str.")
    if isinstance(target_vars, Variable):
        target_vars = [target_vars]
    elif not target_vars or not all(isinstance(v, Variable) for v in target_vars):
        raise ValueError("'target_vars' should be a list of Variable.")
    program = (main_program if main_program is not None else default_main_program()).clone()
    fetch_names = _fluid_targets(program, target_vars)
    model = os.path.basename(model_filename) if model_filename is not None else "__model__"
    params = os.path.basename(params_filename) if params_filename is not None else None
    if export_for_deployment:
        shown = {f: t.name for f, t in zip(fetch_names, target_vars)}
        program = prune_for_inference(program, feeded_var_names, fetch_names, shown)
    else:
        model += ".main_program"
        program.extra.update({FEED_KEY: list(feeded_var_names), FETCH_KEY: fetch_names})
    if not program_only:
        sc = _scope(executor, None)
        values = {**sc.vars, **held_elsewhere(sc, [v.name for v in program.list_vars()
                                                   if v.persistable and v.name not in sc.vars])}
        lacking = [v for v in program.list_vars() if v.persistable and v.name not in values]
        if lacking and export_for_deployment:
            raise ProgramError(_lacking(lacking))
    os.makedirs(dirname, exist_ok=True)
    save_program(program, os.path.join(dirname, model))
    if program_only:
        warnings.warn("save_inference_model specified the param `program_only` to True, It will not "
                      "save params of Program.", stacklevel=2)
    else:
        save_persistables(executor, dirname, program, params, table_rows_only=export_for_deployment)
    return fetch_names


def load_inference_model(dirname: str, executor, model_filename: str | None = None,
                         params_filename: str | None = None, pserver_endpoints=None) -> list:
    """Load a model ``save_inference_model`` wrote (same ``model_filename`` and
    ``params_filename``), its values into the executor's scope.

    Args:
        dirname: the directory.
        executor: the Executor whose scope receives the values (``global_scope()`` unless it
            has its own ``scope``).
        model_filename, params_filename: as given to ``save_inference_model``.
        pserver_endpoints: Fluid rewrites a distributed lookup table's endpoints with it; an
            inference model here holds every value and runs in one process, so it is unused
            (a warning says so).

    Returns:
        ``[program, feed_target_names, fetch_targets]``: the program, the names to feed, and the
        Variables of ``program`` to fetch.

    Raises:
        FileNotFoundError: ``dirname`` or the program's file does not exist (naming it).
        SerializationError: a damaged or foreign file, a program that records no feed and fetch
            names, or a value that is missing or differs from the program's declaration
            (naming the var and the file). Nothing is loaded unless every value checks out.

    Example:
        >>> prog, feeds, fetches = load_inference_model("model", exe)  # doctest: +SKIP
    """
    if dirname is None:
        raise ValueError("load_inference_model(dirname=None) loads a model from bytes in memory, "
                         "which placegroup does not support yet (#14): write them to a directory")
    if not os.path.isdir(dirname):
        raise FileNotFoundError(f"There is no directory named {dirname!r}")
    path = os.path.join(dirname, os.path.basename(model_filename) if model_filename else "__model__")
    if not os.path.exists(path):
        raise FileNotFoundError(f"no inference model file {path!r} (the directory holds "
                                f"{sorted(os.listdir(dirname))}; pass the model_filename it was saved with)")
    program = load_program(path)
    feeds, fetches = program.extra.get(FEED_KEY), program.extra.get(FETCH_KEY)
    block = program.global_block()
    for what, names in (("feed", feeds), ("fetch", fetches)):
        if not isinstance(names, list) or not all(isinstance(n, str) and block.has_var(n) for n in names):
            raise SerializationError(f"{path}: a program, but not an inference model: its {what} "
                                     f"target names {names!r} are not a list of its vars (save it "
                                     f"with save_inference_model)")
    if pserver_endpoints:
        warnings.warn(f"load_inference_model: pserver_endpoints={pserver_endpoints!r} is unused: the "
                      f"model holds every value and runs in one process", stacklevel=2)
    params = os.path.basename(params_filename) if params_filename is not None else None
    load_persistables(executor, dirname, program, params)
    return [program, list(feeds), [block.var(n) for n in fetches]]
