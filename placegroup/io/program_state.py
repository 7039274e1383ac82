"""A program's state as files and dicts: Fluid 1.8's ``fluid.io.save`` / ``load`` /
``load_program_state`` / ``set_program_state``.

``save(program, "ckpt/model")`` writes Fluid 1.8's three files, in placegroup's own formats
(NOTE(no-pickle): Paddle pickles the first two; placegroup never writes nor reads a pickle):

* ``ckpt/model.pdparams``: every parameter, as a var file (var_files.py: msgpack headers, raw
  little-endian bytes, a blake2b checksum per var);
* ``ckpt/model.pdopt``: every other persistable var except data vars (optimizer moments,
  learning rates, step counters: Fluid's ``is_belong_to_optimizer``), a var file too, written
  even when empty as in 1.8;
* ``ckpt/model.pdmodel``: the program as prog.bin (files.py), where Paddle writes its protobuf.

Each is written atomically (NOTE(atomic-write)). A ``.pdparams``/``.pdopt`` that Paddle wrote is
a pickle: loading it raises ``SerializationError`` saying so and how to convert it to a ``.npz``
(which ``load_program_state`` reads, with ``allow_pickle=False``). Where no ``.pdparams`` exists,
``load`` and ``load_program_state`` read what ``save_vars`` / ``save_params`` /
``save_persistables`` wrote, as 1.8 does: a directory of per-var files, or one file with
``var_list``.

Example::

    fluid.io.save(main, "ckpt/model")
    ...
    exe.run(startup)
    fluid.io.load(main, "ckpt/model", exe)                  # or:
    fluid.io.set_program_state(main, fluid.io.load_program_state("ckpt/model"))

Thread-safety: these read and write the global scope; call them between steps.
"""
from __future__ import annotations

import os
import warnings
from typing import Sequence

import numpy as np

from placegroup.errors import SerializationError, UserError
from placegroup.executor.scope import global_scope, to_numpy
from placegroup.util.atomic_files import atomic_write
from placegroup.io.var_files import is_parameter, is_persistable, load_vars
from placegroup.util.var_format import parse, records

__all__ = ["ProgramStateError", "get_program_parameter", "get_program_persistable_vars", "load",
           "load_program_state", "save", "set_program_state"]

_SUFFIXES = (".pdparams", ".pdopt", ".pdmodel")


class ProgramStateError(UserError, ValueError):
    """A saved or given value does not fit the program: a missing var, another shape or dtype."""


def get_program_parameter(program) -> list:
    """The program's parameters, in program order (``fluid.io.get_program_parameter``)."""
    return list(filter(is_parameter, program.list_vars()))


def get_program_persistable_vars(program) -> list:
    """The program's persistable vars, in program order."""
    return list(filter(is_persistable, program.list_vars()))


def _is_optimizer_var(var) -> bool:
    # Fluid 1.8's is_belong_to_optimizer: persistable, neither a parameter nor a fed data var.
    return bool(var.persistable) and not var.is_parameter and not var.is_data


def _optimizer_vars(program) -> list:
    return list(filter(_is_optimizer_var, program.list_vars()))


def _prefix(model_path: str) -> str:
    for suffix in _SUFFIXES:
        if model_path.endswith(suffix):
            return model_path[:-len(suffix)]
    return model_path


def _values(vars_: Sequence, what: str, part: bool = False) -> list[tuple[str, np.ndarray]]:
    scope, out = global_scope(), []
    if part and scope.settle is not None:  # a trainer's parameters still on their way (NOTE(end-of-step))
        scope.settle()
    for v in vars_:
        found = scope.find_var(v.name)
        if found is None and part:
            continue  # one process's part of a distributed program: the rest is held elsewhere
        if found is None:
            raise ProgramStateError(f"fluid.io.save: {what} {v.name!r} has no value in the global "
                                    f"scope; run the startup program (and train) first")
        arr = to_numpy(np.asarray(found.get_tensor()))
        if not isinstance(arr, np.ndarray):
            raise SerializationError(f"fluid.io.save: var {v.name!r} holds a "
                                     f"{type(arr).__name__}, not a dense array")
        out.append((v.name, arr))
    return out


def save(program, model_path: str) -> None:
    """Write ``model_path`` + ``.pdparams``, ``.pdopt`` and ``.pdmodel`` (see the module doc).

    Args:
        program: the program whose parameters and optimizer vars the global scope holds.
        model_path: ``dirname/prefix``; the directory is created if missing.

    Raises:
        ValueError: ``model_path`` ends in a separator (no file prefix), as in Fluid.
        ProgramStateError: a var has no value in the scope yet (in one process; a transpiled
            process's part saves what it holds, NOTE(save-a-part)).

    Example:
        >>> fluid.io.save(main, "ckpt/model")  # doctest: +SKIP
    """
    if not os.path.basename(model_path):
        raise ValueError(f"fluid.io.save: model_path must be dirname/filename, got "
                         f"{model_path!r} (no file name)")
    dirname = os.path.dirname(model_path)
    if dirname:
        os.makedirs(dirname, exist_ok=True)
    # NOTE(save-a-part): a transpiled process's program (a trainer's or a pserver's part) saves
    # what this process holds, as Fluid's trainer saves the parameters it received and none of
    # the optimizer state its pservers keep; a var it holds no value for is skipped, not an error,
    # and so are the blocks of a sliced parameter it holds whole
    part = program.executor is not None and program.cluster is not None
    params = _values(get_program_parameter(program), "parameter", part)
    whole = {name for name, _ in params}
    params = [(name, a) for name, a in params if program.global_block().var(name).attrs.get("slice_of", [""])[0]
              not in whole]
    opt = _values(_optimizer_vars(program), "optimizer var", part)
    atomic_write(model_path + ".pdparams", records(params))
    atomic_write(model_path + ".pdopt", records(opt))
    atomic_write(model_path + ".pdmodel", [program.to_bytes()])


def _read_state_file(path: str) -> dict[str, np.ndarray]:
    """A ``.pdparams``/``.pdopt`` var file; a pickle (Paddle's format) gets its own error."""
    with open(path, "rb") as f:
        data = f.read()
    if data[:1] == b"\x80" and data[1:2] in (b"\x02", b"\x03", b"\x04", b"\x05"):
        prefix = _prefix(path)
        raise SerializationError(
            f"{path} is a Python pickle, as PaddlePaddle's fluid.io.save writes it; placegroup "
            f"does not load pickles, for safety (unpickling runs code the file names). Convert it "
            f"once with PaddlePaddle itself, in a Python you trust with the file:\n"
            f"  import numpy as np, paddle.fluid as fluid\n"
            f"  np.savez('{prefix}.npz', **fluid.io.load_program_state('{prefix}'))\n"
            f"then in placegroup: fluid.io.set_program_state(program, "
            f"fluid.io.load_program_state('{prefix}.npz'))")
    return parse(data, path)


def _fit(var, arr: np.ndarray, source: str) -> None:
    """Raise naming the var, the source and both shapes (or dtypes) unless ``arr`` fits ``var``."""
    want = var.shape
    if want is not None and (len(want) != arr.ndim or any(
            d != -1 and d != a for d, a in zip(want, arr.shape))):
        raise ProgramStateError(f"var {var.name!r}: {source} has shape {list(arr.shape)}, but the "
                                f"program declares {list(want)} (-1 is any size)")
    if arr.dtype.name != var.dtype:
        raise ProgramStateError(f"var {var.name!r}: {source} is {arr.dtype.name}, but the program "
                                f"declares {var.dtype}")


def _load_saved_vars(program, model_path: str, executor, var_list) -> None:
    """1.8's fallback: files written by save_vars / save_params / save_persistables."""
    if executor is None:
        raise ValueError("fluid.io.load: an executor is needed to load files saved with "
                         "save_params / save_persistables / save_vars")
    names = None if var_list is None else {getattr(v, "name", v) for v in var_list}
    if os.path.isdir(model_path):
        chosen = [v for v in program.list_vars() if (names is None or v.name in names)
                  and os.path.isfile(os.path.join(model_path, v.name))]
        load_vars(executor, model_path, program, vars=chosen)
    elif os.path.isfile(model_path):
        if var_list is None:
            raise ValueError(f"fluid.io.load: {model_path} is one file of several vars; "
                             f"var_list must name the vars to load from it")
        dirname, filename = os.path.split(model_path)
        load_vars(executor, dirname, program, vars=list(var_list), filename=filename)
    else:
        raise FileNotFoundError(f"fluid.io.load: neither {_prefix(model_path)}.pdparams (from "
                                f"fluid.io.save) nor {model_path} (from save_vars) exists")


def load(program, model_path: str, executor=None, var_list=None) -> None:
    """Set the program's parameters and optimizer vars from ``save``'s files.

    Args:
        program: the program to load into (its vars' names, shapes and dtypes).
        model_path: the prefix given to ``save`` (a ``.pdparams``/``.pdopt``/``.pdmodel``
            suffix is dropped), or, as in 1.8, a directory or file of ``save_vars``.
        executor: its place receives the values; needed for the ``save_vars`` fallback.
        var_list: for the ``save_vars`` fallback: the vars to load (required for one file).

    Raises:
        ProgramStateError: a var missing from a file, or of another shape or dtype than the
            program declares (naming the var, the file and both). Nothing is set then.
        SerializationError: a corrupted, foreign or pickled (Paddle's) file.
        FileNotFoundError: no ``.pdparams`` and no ``save_vars`` output at ``model_path``.
    """
    prefix = _prefix(model_path)
    if not os.path.exists(prefix + ".pdparams"):
        _load_saved_vars(program, model_path, executor, var_list)
        return
    groups = [(get_program_parameter(program), prefix + ".pdparams")]
    opt = _optimizer_vars(program)
    if opt:
        groups.append((opt, prefix + ".pdopt"))
    ready = []
    for vars_, path in groups:  # check everything before setting anything
        if not os.path.exists(path):
            raise FileNotFoundError(f"fluid.io.load: the program has optimizer vars "
                                    f"({[v.name for v in vars_][:5]}...) but {path} is missing")
        saved = _read_state_file(path)
        for v in vars_:
            if v.name not in saved:
                raise ProgramStateError(f"var {v.name!r} is not in {path} (it holds "
                                        f"{sorted(saved)[:10]}...)")
            _fit(v, saved[v.name], path)
            ready.append((v.name, saved[v.name]))
    scope, place = global_scope(), getattr(executor, "place", None)
    for name, arr in ready:
        scope.var(name).get_tensor().set(arr, place)


def _walk_saved_vars(model_path: str, var_list) -> dict[str, np.ndarray]:
    names = None if var_list is None else {getattr(v, "name", v) for v in var_list}
    if os.path.isfile(model_path):
        if names is None:
            raise ValueError(f"load_program_state: {model_path} is one file of several vars; "
                             f"var_list must name the vars to take from it")
        saved = _read_state_file(model_path)
        lost = sorted(names - set(saved))
        if lost:
            raise ProgramStateError(f"load_program_state: vars {lost} are not in {model_path}")
        return {n: saved[n] for n in saved if n in names}
    if not os.path.isdir(model_path):
        raise FileNotFoundError(f"load_program_state: neither {_prefix(model_path)}.pdparams "
                                f"(from fluid.io.save) nor {model_path} (from save_vars) exists")
    out = {}
    for root, _, files in os.walk(model_path):
        for f in files:
            name = os.path.relpath(os.path.join(root, f), model_path).replace(os.sep, "/")
            if names is not None and name not in names:
                continue
            try:
                saved = _read_state_file(os.path.join(root, f))
            except SerializationError:
                if names is not None:
                    raise
                continue  # not a var file (a program, a note): 1.8 skips what it cannot load
            if name in saved:
                out[name] = saved[name]
    return out


def load_program_state(model_path: str, var_list=None) -> dict[str, np.ndarray]:
    """The saved values as ``{var name: numpy array}``.

    Args:
        model_path: ``save``'s prefix (``.pdparams`` and, when present, ``.pdopt`` are read);
            or a ``.npz`` (placegroup's addition: read with ``allow_pickle=False``, e.g. a
            converted Paddle checkpoint); or, as in 1.8, a directory or file of ``save_vars``.
        var_list: vars (or names) to take from a ``save_vars`` output; required for one file.

    Raises:
        SerializationError: a corrupted, foreign or pickled (Paddle's) file.
        FileNotFoundError: nothing at ``model_path``.

    Example:
        >>> state = fluid.io.load_program_state("ckpt/model")  # doctest: +SKIP
        >>> state["fc_0.w_0"].shape
        (13, 1)
    """
    if model_path.endswith(".npz"):
        with np.load(model_path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    prefix = _prefix(model_path)
    if not os.path.exists(prefix + ".pdparams"):
        return _walk_saved_vars(model_path, var_list)
    state = _read_state_file(prefix + ".pdparams")
    if os.path.exists(prefix + ".pdopt"):
        state.update(_read_state_file(prefix + ".pdopt"))
    return state


def set_program_state(program, state_dict: dict) -> None:
    """Set the program's persistable vars that ``state_dict`` names; warn of the names it
    does not use. Call it after the startup program ran (every var must have a value).

    Raises:
        ProgramStateError: a persistable var with no value in the scope yet, or a value whose
            shape or dtype differs from the var's current one (naming the var and both).
            Nothing is set then.
    """
    scope, ready, used = global_scope(), [], set()
    for var in get_program_persistable_vars(program):
        if var.name not in state_dict:
            continue
        found = scope.find_var(var.name)
        if found is None:
            raise ProgramStateError(f"set_program_state: var {var.name!r} has no value in the "
                                    f"global scope; run the startup program first")
        cur = np.asarray(found.get_tensor())
        new = np.asarray(state_dict[var.name])
        if cur.shape != new.shape:
            raise ProgramStateError(f"set_program_state: var {var.name!r} has shape "
                                    f"{list(cur.shape)} in the program, the state gives "
                                    f"{list(new.shape)}")
        if cur.dtype != new.dtype:
            raise ProgramStateError(f"set_program_state: var {var.name!r} is {cur.dtype} in the "
                                    f"program, the state gives {new.dtype}")
        ready.append((var.name, new))
        used.add(var.name)
    for name, new in ready:
        old = scope.vars.get(name)
        if hasattr(old, "__cuda_array_interface__"):  # keep the value on the device it was on
            import cupy
            scope.vars[name] = cupy.asarray(new)
        else:
            scope.var(name).get_tensor().set(new.copy())
    unused = [k for k in state_dict if k not in used]
    if unused:
        warnings.warn(f"set_program_state: these values were not set, the program has no "
                      f"persistable var of their names: {' '.join(unused)}", stacklevel=2)
