"""Programs as files, and the checks of a saved (pruned) model (Fluid 1.8
``fluid.incubate.fleet.utils.utils``).

A program file is in one of placegroup's two forms, where Fluid has a ProgramDesc in protobuf
binary or text:

* binary: prog.bin (``Program.to_bytes``: msgpack, schema-versioned, checksummed;
  docs/prog_bin.md), what ``fluid.io`` writes and ``load_inference_model`` reads;
* text: the same dict as indented JSON (NOTE(program-text)), which a person can read and edit
  and which is checked against the same schema when read back.

``program_type_trans`` turns one into the other; ``check_saved_vars_try_dump`` loads a dumped
inference model, checks its vars against the program and runs it once on random or given
feeds. ``append_save_op`` / ``append_load_op`` append the ``save`` and ``load`` ops
(ops/file_io.py), which ``save_var`` / ``load_var`` run.

Example::

    save_program(main, "model.txt", is_text=True)
    name = program_type_trans(".", "model.txt", is_text=True)   # "model.txt.bin"
    prog = load_program(name)

Thread-safety: the functions share no state; ``save_var``/``load_var`` run their own programs
on the global scope.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
from collections import OrderedDict

import numpy as np
import pydantic

from placegroup.tools.compat import install_gaps
from placegroup.errors import SerializationError
from placegroup.executor import Executor
from placegroup.executor.scope import Scope, global_scope, scope_guard
from placegroup.io import inference, is_persistable
from placegroup.util.atomic_files import atomic_write
from placegroup.io.files import load_program as _load_binary
from placegroup.ir.framework import Program, program_from_dict, program_guard, program_to_dict
from placegroup.ir.places import CPUPlace
from placegroup.ir.serialize import ProgramSchema
from placegroup.ops.file_io import LOAD_OP, SAVE_OP  # importing it registers them (NOTE(file-io-ops))
from placegroup.tools.dump import render_dot

__all__ = ["load_program", "save_program", "program_type_trans", "check_saved_vars_try_dump", "parse_program",
           "check_pruned_program_vars", "graphviz"]

logger = logging.getLogger(__name__)

persistable_vars_out_fn = "vars_persistable.log"
all_vars_out_fn = "vars_all.log"
ops_out_fn = "ops.log"
not_expected_op_types = ["lookup_table"]


# NOTE(program-text): Fluid's text form is protobuf's text format of the ProgramDesc, and
# `str(program)` prints it. placegroup's `str(program)` is its IR printer (one op per line,
# docs/ir.md), which is for reading, not for reading back; the text form here is the program's
# dict (what prog.bin holds) as indented JSON, validated against `ProgramSchema` on load, so a
# text file round-trips to the same program, placement and cluster included.
def _program_text(program: Program) -> str:
    return json.dumps(program_to_dict(program), indent=1, sort_keys=True) + "\n"


def _program_of_text(text: str, path: str) -> Program:
    try:
        d = ProgramSchema.model_validate(json.loads(text)).model_dump()
    except json.JSONDecodeError as e:
        raise SerializationError(f"{path}: not a program in text form (JSON): {e}") from None
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"])
        raise SerializationError(f"{path}: not a program in text form: field {where!r}: {err['msg']}") from None
    try:
        return program_from_dict(d, validate=True)
    except SerializationError as e:
        raise SerializationError(f"{path}: {e}") from None


def load_program(model_filename: str, is_text: bool = False) -> Program:
    """The program in ``model_filename``, in text form (``is_text``) or binary.

    Raises:
        OSError: the file cannot be read.
        SerializationError: naming the file and what is wrong with it.
    """
    return load_program_text(model_filename) if is_text else load_program_binary(model_filename)


def load_program_binary(model_filename: str) -> Program:
    """The program in a prog.bin file (``save_program``, ``fluid.io.save_program``, an
    inference model's ``__model__``)."""
    return _load_binary(model_filename)


def load_program_text(model_filename: str) -> Program:
    """The program in a text-form file (NOTE(program-text))."""
    with open(model_filename) as f:
        return _program_of_text(f.read(), model_filename)


def save_program(program: Program, model_filename: str = "__model__", is_text: bool = False) -> None:
    """Write ``program`` to ``model_filename`` (atomically), as text (NOTE(program-text)) or
    prog.bin."""
    data = _program_text(program).encode() if is_text else program.to_bytes()
    atomic_write(model_filename, [data])


def program_type_trans(prog_dir: str, prog_fn: str, is_text: bool) -> str:
    """Write the program in ``prog_dir/prog_fn`` in the other form, beside it.

    Args:
        is_text: the file is in text form (it becomes ``<prog_fn>.bin``); else binary (it
            becomes ``<prog_fn>.pbtxt``, Fluid's name for the text form).

    Returns:
        the new file's name (in ``prog_dir``).
    """
    prog = load_program(os.path.join(prog_dir, prog_fn), is_text)
    out = prog_fn + ".bin" if is_text else prog_fn + ".pbtxt"
    save_program(prog, os.path.join(prog_dir, out), not is_text)
    return out


def check_pruned_program_vars(train_prog: Program, pruned_prog: Program) -> bool:
    """Whether every persistable var of ``pruned_prog`` has the shape and dtype it has in
    ``train_prog``. As in Fluid, a var ``train_prog`` lacks is logged as an error and skipped
    (it does not make the result False)."""
    is_match = True
    pruned = OrderedDict((v.name, v) for v in pruned_prog.list_vars() if is_persistable(v))
    logger.info("persistable vars in pruned program: %s", list(pruned))
    block = train_prog.global_block()
    for name, var in pruned.items():
        if not block.has_var(name):
            logger.error("not find variable '%s' in train program. please check pruning.", name)
            continue
        train_var = block.var(name)
        if tuple(var.shape) != tuple(train_var.shape) or var.dtype != train_var.dtype:
            logger.error("variable: %s not match. in pruned program shape: %s dtype:%s, in train program shape: "
                         "%s dtype: %s", name, var.shape, var.dtype, train_var.shape, train_var.dtype)
            is_match = False
    return is_match


def graphviz(block, output_dir: str = "", filename: str = "debug") -> None:
    """Draw ``block``'s program: ``<filename>.dot`` (graphviz source), then ``<filename>.pdf``
    with graphviz's ``dot``.

    Raises:
        FileNotFoundError: ``dot`` is not installed (the .dot file is written first).
    """
    dot_path = os.path.join(output_dir, filename + ".dot")
    pdf_path = os.path.join(output_dir, filename + ".pdf")
    with open(dot_path, "w") as f:
        f.write(render_dot(block.program))
    if shutil.which("dot") is None:
        raise FileNotFoundError(f"graphviz wrote {dot_path}, but its `dot` program, which draws {pdf_path}, is "
                                f"not installed (apt-get install graphviz, brew install graphviz or conda "
                                f"install graphviz)")
    subprocess.run(["dot", "-Tpdf", dot_path, "-o", pdf_path], capture_output=True)


def append_save_op(block, var, path: str) -> None:
    """Append a ``save`` op writing ``var`` to ``path`` when the program runs."""
    block.append_op(type=SAVE_OP, inputs={"X": [var]}, outputs={}, attrs={"file_path": path})


def append_load_op(block, var, path: str) -> None:
    """Append a ``load`` op setting ``var`` from ``path`` (a ``save`` op's file) when the
    program runs."""
    block.append_op(type=LOAD_OP, inputs={}, outputs={"Out": [var]}, attrs={"file_path": path})


def save_var(np_array, var_name: str, shape_list, dtype: str, save_path: str) -> None:
    """Write ``np_array`` (a batch of ``shape_list``-shaped rows) to ``save_path``, by
    running a program of a data var ``var_name`` and a ``save`` op."""
    program = Program()
    exe = Executor(CPUPlace())
    with program_guard(program):
        from placegroup.layers.io import data

        d0_data = data(var_name, shape=shape_list, dtype=dtype)
        append_save_op(program.global_block(), d0_data, save_path)
        exe.run(program, feed={var_name: np_array}, fetch_list=[])


def load_var(var_name: str, shape_list, dtype: str, save_path: str) -> list:
    """``[value]``: the value ``save_var`` wrote to ``save_path``, read by a ``load`` op."""
    program = Program()
    exe = Executor(CPUPlace())
    with program_guard(program):
        from placegroup.layers.io import data

        d0_data = data(var_name, shape=shape_list, dtype=dtype)
        append_load_op(program.global_block(), d0_data, save_path)
        return exe.run(program, feed={}, fetch_list=[d0_data])


def reader(batch_size: int, fn: str, dim) -> list:
    """The batches in text file ``fn``: space-separated numbers, cut into ``batch_size`` rows
    of ``dim`` (an int, or a shape) numbers each; a line's numbers that do not fill a batch
    are dropped, as in Fluid.

    Returns:
        a list of float64 arrays of shape ``[batch_size] + dim``.
    """
    shape = list(dim) if isinstance(dim, (list, tuple)) else [dim]
    n = int(np.prod(shape)) * batch_size
    out = []
    with open(fn) as f:
        for line in f:
            fields = [float(d) for d in line.strip().split(" ")]
            while len(fields) >= n:
                out.append(np.array(fields[:n]).reshape([batch_size] + shape))
                fields = fields[n:]
    return out


def feed_gen(batch_size: int, feeded_vars_dims, feeded_vars_filelist) -> list:
    """``reader(batch_size, file_i, dims_i)`` for each var's file."""
    return [reader(batch_size, fn, feeded_vars_dims[i]) for i, fn in enumerate(feeded_vars_filelist)]


def _checked_feed_dims(program: Program, feed_config) -> None:
    names, dims, types = (feed_config.feeded_vars_names, feed_config.feeded_vars_dims,
                          feed_config.feeded_vars_types)
    if not len(names) == len(dims) == len(types):
        raise ValueError(f"feed_config: {len(names)} feeded_vars_names, {len(dims)} feeded_vars_dims and "
                         f"{len(types)} feeded_vars_types: give one of each per var")
    for i, name in enumerate(names):
        want = tuple(dims[i]) if isinstance(dims[i], (list, tuple)) else (dims[i],)
        dims[i] = want
        have = tuple(program.global_block().var(name).shape[1:])
        if want != have:
            raise RuntimeError(f"feed variable '{name}' shape not match. infer program  shape: {have}. feed "
                               f"tensor shape: {want}")


def _random_feed(program: Program, feed_config, batch_size: int, place) -> list:
    from placegroup.datafeed.lod_tensor import create_lod_tensor

    out = []
    for name, dims, dtype in zip(feed_config.feeded_vars_names, feed_config.feeded_vars_dims,
                                 feed_config.feeded_vars_types):
        var = program.global_block().var(name)
        t = np.array(np.random.random(tuple([batch_size] + list(dims))), dtype=dtype)
        if var.lod_level == 0:
            out.append(t)
        elif var.lod_level == 1:
            out.append(create_lod_tensor(t, [[1] * batch_size], place))
        else:
            raise RuntimeError("vars with lod_level >= 2 is not supported now in this infer program check tool.")
    return out


def try_load_model_vars(dump_dir: str, dump_prog_fn: str, is_text_dump_program: bool, batch_size: int,
                        feed_config, fetch_config, save_filename, saved_params) -> list:
    """Load the inference model in ``dump_dir`` (program ``dump_prog_fn``, values in
    ``save_filename``), check the loaded values' shapes against ``saved_params``, and run it
    once, in a scope of its own.

    ``feed_config`` has ``feeded_vars_names``, ``feeded_vars_dims``, ``feeded_vars_types`` and
    ``feeded_vars_filelist`` (empty: random feeds of ``batch_size`` rows; else each var's
    file, read by ``feed_gen``, every whole batch of it fed at once); ``fetch_config`` has
    ``fetch_vars_names``. Names that differ from the model's own win, with a warning.

    Returns:
        the fetched values.

    Raises:
        RuntimeError: a loaded value's or a feed's shape does not match the program's.
        ValueError: the feed config's lists differ in length.
    """
    place = CPUPlace()
    exe = Executor(place)
    with scope_guard(Scope()):
        if is_text_dump_program:
            dump_prog_fn = program_type_trans(dump_dir, dump_prog_fn, is_text_dump_program)
        program, feed_names, fetch_targets = inference.load_inference_model(
            dump_dir, exe, model_filename=dump_prog_fn, params_filename=save_filename)
        for var in saved_params:
            found = global_scope().find_var(var.name)
            if found is None:
                raise RuntimeError(f"can't not find var: {var.name}")
            got = np.array(found.get_tensor()).shape
            if got != tuple(var.shape):
                raise RuntimeError(f"Shape not matching: the Program requires a parameter with a shape of "
                                   f"({tuple(var.shape)}), while the loaded parameter (namely [ {var.name} ]) has a "
                                   f"shape of  ({got}).")
        fetch_names = [v.name for v in fetch_targets]
        if not feed_names:
            logger.warning("no feed targets in program.")
        if not fetch_names:
            logger.warning("no fetch targets in program.")
        fetch_list, feed_name_list = fetch_targets, feed_names
        if feed_config.feeded_vars_names is not None and feed_names != feed_config.feeded_vars_names:
            logger.warning("feed vars in program and config are diff: feed in program: %s. feed in config %s.",
                           feed_names, feed_config.feeded_vars_names)
            feed_name_list = feed_config.feeded_vars_names
        if fetch_config.fetch_vars_names is not None and fetch_names != fetch_config.fetch_vars_names:
            logger.warning("fetch vars in program and config are diff: fetch in program: %s. fetch in config %s.",
                           fetch_names, fetch_config.fetch_vars_names)
            fetch_list = [program.global_block().var(n) for n in fetch_config.fetch_vars_names]
        return_numpy = all(v.lod_level == 0 for v in fetch_list)
        _checked_feed_dims(program, feed_config)
        if not feed_config.feeded_vars_filelist:
            logger.info("generate random feed vars.")
            tensors = _random_feed(program, feed_config, batch_size, place)
            feed = {name: tensors[i] for i, name in enumerate(feed_name_list)}
        else:
            logger.info("load feed vars from files: %s.", feed_config.feeded_vars_filelist)
            batches = feed_gen(batch_size, feed_config.feeded_vars_dims, feed_config.feeded_vars_filelist)
            feed = {}
            for i, name in enumerate(feed_config.feeded_vars_names):
                if not batches[i]:
                    raise ValueError(f"{feed_config.feeded_vars_filelist[i]} holds no whole batch of {batch_size} "
                                     f"rows of {feed_config.feeded_vars_dims[i]} for {name!r}")
                feed[name] = np.concatenate(batches[i]).astype(feed_config.feeded_vars_types[i])
        results = exe.run(program, feed=feed, fetch_list=fetch_list, return_numpy=return_numpy)
        for v, r in zip(fetch_list, results):
            logger.info("fetch_targets name: %s", v.name)
            logger.info("fetch_targets: %s", r)
        return results


def check_not_expected_ops(prog: Program) -> None:
    """Warn once per type about ops a pruned inference program should not hold (``lookup_table``)."""
    seen = set()
    for op in prog.global_block().ops:
        if op.type in not_expected_op_types and op.type not in seen:
            logger.warning("find op type '%s' in program, please check if your program is pruned correctly !",
                           op.type)
            seen.add(op.type)


def check_saved_vars_try_dump(dump_dir: str, dump_prog_fn: str, is_text_dump_program: bool, feed_config,
                              fetch_config, batch_size: int = 1, save_filename=None) -> list:
    """Load the dumped program, warn about unexpected ops, then ``try_load_model_vars`` with
    its persistable vars.

    Returns:
        the fetched values of the one run.
    """
    dump_prog = load_program(os.path.join(dump_dir, dump_prog_fn), is_text_dump_program)
    saved_params = [v for v in dump_prog.list_vars() if is_persistable(v)]
    logger.info("persistable vars in dump program: %s", [v.name for v in saved_params])
    check_not_expected_ops(dump_prog)
    return try_load_model_vars(dump_dir, dump_prog_fn, is_text_dump_program, batch_size, feed_config,
                               fetch_config, save_filename, saved_params)


def parse_program(program: Program, output_dir: str) -> None:
    """Write ``program``'s persistable vars, all vars and ops, one per line, to
    ``vars_persistable.log``, ``vars_all.log`` and ``ops.log`` in ``output_dir``."""
    def var_line(v, with_type: bool) -> dict:
        d = {"name": str(v.name), "shape": str(v.shape), "lod_level": int(v.lod_level), "dtype": str(v.dtype)}
        return {**d, "type": str(v.type)} if with_type else d

    persistable = [var_line(v, True) for v in program.list_vars() if is_persistable(v)]
    every = [var_line(v, False) for v in program.list_vars()]
    ops = [{"type": op.type, "input_arg_names": str(op.input_arg_names),
            "output_arg_names": str(op.output_arg_names)} for op in program.global_block().ops]
    for fn, title, rows in ((persistable_vars_out_fn, "persistable vars:", persistable),
                            (all_vars_out_fn, "all vars:", every), (ops_out_fn, "ops:", ops)):
        with open(os.path.join(output_dir, fn), "w") as f:
            f.write(title + "\n" + "".join(str(r) + "\n" for r in rows))


install_gaps()
