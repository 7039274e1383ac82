"""Distributed checkpoints: saved every N steps, resumed onto any number of pservers.

Each executor that holds persistable vars (parameters, their blocks and shards, optimizer
state, lr counters) saves what it holds, and only that, into its own part of the step::

    <dirname>/step-<S>/<tag>/manifest.json   S: global steps done; tag: pserver.0, trainer.1, local
                             0000-<var>      one var file each (docs/prog_bin.md's format)

A part is written in a hidden temporary directory, fsynced, then renamed into place
(NOTE(atomic-part)); step S is *complete* when every part its manifests expect is there. Each
manifest entry says which rows of which original var the value is (``var.attrs["slice_of"]``),
so ``load_checkpoint`` fills whatever the loading program's placement holds (another pserver
count: other blocks, other shards) from the pieces (placegroup/io/checkpoint_reslice.py). Saving
and loading is automatic with ``Executor(checkpoint=CheckpointConfig(...))`` or the
environment (``CheckpointConfig.from_env``); docs/checkpoint.md has the whole story.

Example (one process; a cluster does the same in every process)::

    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fluid.io.save_checkpoint(exe, "ckpt", main, step=100)
    fluid.io.load_checkpoint(exe, "ckpt", main)   # -> 100, the newest complete step

Thread-safety: call between steps, while no executor writes the scope.
"""
from __future__ import annotations

import logging
import os
import time
from urllib.parse import quote

import numpy as np
import pydantic

from placegroup.io import var_files as _io
from placegroup.util import var_format
from placegroup.io.checkpoint_reslice import Piece, RowSet, assemble
from placegroup.io.checkpoint_tables import KIND as TABLE, is_table, load_table, where
from placegroup.util.dynamic_table import state_records
from placegroup.io.checkpoint_store import (FORMAT, STEP, VERSION, Entry, Manifest, SEALED, complete,
                                            in_background, latest_checkpoint, prune, wait_sealed, write_part)
from placegroup import config
from placegroup.errors import ProgramError, SerializationError
from placegroup.executor.executor import register_step_hooks
from placegroup.executor.scope import to_numpy
from placegroup.ir.cluster import Cluster, ClusterSchema

log = logging.getLogger("placegroup.checkpoint")
SAVE = "(checkpoint save)"  # its row in PLACEGROUP_PROFILE's table


class CheckpointConfig(pydantic.BaseModel):
    """When an Executor saves and whether it resumes (frozen).

    Attributes:
        dirname: where the checkpoints go (shared by every process of the job).
        every: save after every ``every`` global steps (0: never by itself).
        resume: after the startup program, load the newest complete checkpoint, if any.
        keep: complete checkpoints kept; each process removes its parts of older ones.

    Example::

        exe = fluid.Executor(fluid.CPUPlace(), checkpoint=fluid.io.CheckpointConfig(
            dirname="ckpt", every=100, resume=True))
    """

    model_config = pydantic.ConfigDict(frozen=True, extra="forbid")
    dirname: str
    every: int = pydantic.Field(0, ge=0)
    resume: bool = False
    keep: int = pydantic.Field(3, ge=1)

    @classmethod
    def from_env(cls, base: "CheckpointConfig | None" = None) -> "CheckpointConfig | None":
        """``base`` with the environment's settings over it (so a launcher can turn resume on
        without editing the script): ``PLACEGROUP_CHECKPOINT_DIR``, ``_EVERY``, ``_KEEP`` and
        ``PLACEGROUP_RESUME`` (1/0). None when neither names a directory.

        ``PLACEGROUP_RESUME=1`` alone, without a directory, is a warning and no checkpoints:
        nothing was saved, so the run starts at step 0 (NOTE(resume-without-dir)).

        Raises:
            ProgramError: ``_EVERY`` (or ``_KEEP``) without a directory.
        """
        fields = dict(base) if base is not None else {}
        named = []
        for key, field in (("PLACEGROUP_CHECKPOINT_DIR", "dirname"), ("PLACEGROUP_CHECKPOINT_EVERY", "every"),
                           ("PLACEGROUP_CHECKPOINT_KEEP", "keep"), ("PLACEGROUP_RESUME", "resume")):
            if not config.is_set(key):
                continue
            try:
                value = config.get(key)
            except ValueError as e:
                raise ProgramError(str(e)) from None
            fields[field] = value
            named += [key] if field == "dirname" or value else []
        if "dirname" not in fields:
            # NOTE(resume-without-dir): resuming with no directory is resuming with nothing saved
            # yet: step 0, as with an empty directory. ``placegroup launch --max-restarts`` sets
            # PLACEGROUP_RESUME=1 on every restart because only the script may know its directory
            # (Executor(checkpoint=...)); a job with none restarts from step 0 (NOTE(restarts)).
            if named == ["PLACEGROUP_RESUME"]:
                log.warning("resume: no checkpoint directory (PLACEGROUP_CHECKPOINT_DIR or Executor("
                            "checkpoint=...)); starting at step 0")
            elif named:
                raise ProgramError(f"{', '.join(named)} set without a checkpoint directory: set "
                                   f"PLACEGROUP_CHECKPOINT_DIR or pass Executor(checkpoint=...)")
            return None
        return cls(**fields)


# -- who holds what ---------------------------------------------------------------------------
def _tags(program) -> tuple[str, str | None, list[str]]:
    """(this executor's tag, its endpoint, the tags of every executor that holds state)."""
    if program.executor is None or program.cluster is None:
        return "local", None, ["local"]

    cluster = Cluster.from_program(program)

    def tag(e) -> str:  # by role and index, never by endpoint: a restarted job has new ports
        return f"{e.role.value}.{[x for x in cluster.executors if x.role == e.role].index(e)}"
    holders = {e for v in program.list_vars() if v.persistable for e in cluster.matching(v.place)}
    me = cluster.find(program.executor)
    return tag(me), me.endpoint, sorted(tag(e) for e in holders)


def _describe(var) -> tuple[str, str, RowSet]:
    """(original var, kind, its rows): a block or shard from ``slice_of``, a copy (an Adam
    beta power per block, ``slice_of`` row -1) or the var itself: all its rows."""
    shape = list(var.shape or [])
    rows = RowSet(0, 1, int(shape[0]) if shape else 1)
    if var.attrs.get("model_parallel"):
        return var.name, "own", rows
    part = var.attrs.get("slice_of")
    if part and int(part[2]) >= 0:
        return part[0], "rows", RowSet(int(part[2]), int(part[3]), rows.count)
    return (part[0] if part else var.name), "rows", rows


def _held(program) -> list:
    return _io._select(program, None, _io.is_persistable)


# -- saving -------------------------------------------------------------------------------------
def save_checkpoint(executor, dirname: str, main_program, step: int, *, scope=None,
                    keep: int | None = None, resumed_from: int | None = None,
                    background: bool = False) -> str | None:
    """Save what this executor holds of ``main_program``'s persistable vars as its part of
    step ``step`` (global steps done), atomically.

    Args:
        executor: the Executor whose scope holds the values.
        dirname: the checkpoint directory (created if missing; shared by every process).
        main_program: the program this executor runs (None: ``default_main_program()``).
        step: global steps done; ``resumed_step`` after loading it.
        keep: also remove this executor's parts of complete checkpoints older than the
            ``keep`` newest (None: remove nothing).
        resumed_from: the step this run resumed from (what tells two runs' parts apart).
        background: return once the values are written; check, fsync and publish the part
            (and prune) in a thread (NOTE(save-cost)). ``wait_sealed()`` waits for it.

    Returns:
        The part's directory, or None when this executor holds no persistable var.

    Raises:
        SerializationError: a held var with no value, or not a plain numeric array.

    Example:
        >>> save_checkpoint(exe, "ckpt", main, step=10)  # doctest: +SKIP
        'ckpt/step-10/local'
    """
    program = _io._program(main_program)
    scope = _io._scope(executor, scope)
    held = _held(program)
    if not held:
        return None
    wait_sealed()  # one save at a time: the previous one is complete first
    if scope.settle is not None:  # a trainer's parameters still on their way (NOTE(end-of-step))
        scope.settle()
    tag, endpoint, expected = _tags(program)
    who = tag if program.executor is None else str(program.executor)  # the runtime's name, not the file's
    entries, values = [], []
    for v in held:
        if v.name not in scope.vars:
            raise SerializationError(f"{who}: var {v.name!r} has no value to save at step {step} (run "
                                     f"the startup program first)")
        if is_table(scope.vars[v.name]):  # NOTE(table-reshard) in checkpoint_tables.py
            for name, arr in state_records(v.name, scope.vars[v.name]):
                entries.append(Entry(name=name, of=where(v)[0], kind=TABLE, first=0, stride=1,
                                     count=arr.shape[0], shape=list(arr.shape), dtype=arr.dtype.name,
                                     file=f"{len(entries):04d}-{quote(name, safe='@')}"))
                values.append(arr)
            continue
        arr = to_numpy(scope.vars[v.name])
        if not isinstance(arr, np.ndarray):
            raise SerializationError(f"{who}: var {v.name!r}: cannot checkpoint a {type(arr).__name__}")
        of, kind, rows = _describe(v)
        entries.append(Entry(name=v.name, of=of, kind=kind, first=rows.first, stride=rows.stride,
                              count=rows.count, shape=list(arr.shape), dtype=arr.dtype.name,
                              file=f"{len(entries):04d}-{quote(v.name, safe='@')}"))
        values.append(arr)
    cluster = program.cluster
    manifest = Manifest(format=FORMAT, version=VERSION, step=step, executor=tag, endpoint=endpoint,
                         expected=expected, digest=cluster.digest if cluster is not None else "",
                         resumed_from=resumed_from,
                         cluster={} if cluster is None else cluster.model_dump(
                             include={"trainers", "pservers", "sync_mode", "staleness"}),
                         written_at=time.time(), vars=entries)
    seal = write_part(os.path.join(dirname, f"{STEP}{step}"), tag, entries, values, manifest)

    def finish() -> str:
        final = seal()
        if keep is not None:
            prune(dirname, keep, tag)
        return final
    if background:
        in_background(finish)
        return os.path.join(dirname, f"{STEP}{step}", tag)
    return finish()


def load_checkpoint(executor, dirname: str, main_program=None, step: int | None = None, *,
                    scope=None) -> int:
    """Fill the persistable vars this executor holds of ``main_program`` from checkpoint
    ``step`` (default: the newest complete one), re-slicing blocks and shards saved under
    another placement; returns the step.

    Args:
        executor: the Executor whose scope gets the values (on its place).
        dirname: the checkpoint directory.
        main_program: the program this executor runs now (None: ``default_main_program()``);
            its placement may differ from the one that saved.
        step: which step to load (None: ``latest_checkpoint(dirname)``).
        scope: overrides the executor's scope.

    Raises:
        SerializationError: naming the file or the var, for no complete checkpoint, a
            corrupted or truncated file, a var no piece holds, or a dtype that differs. Nothing
            is set unless every var loads.

    Example:
        >>> load_checkpoint(exe, "ckpt", main)  # doctest: +SKIP
        20
    """
    program = _io._program(main_program)
    scope = _io._scope(executor, scope)
    if step is None:
        step = latest_checkpoint(dirname)
        if step is None:
            raise SerializationError(f"{dirname}: no complete checkpoint ({STEP}<S>/ with every part its "
                                     f"manifests expect)")
    parts = complete(dirname, step) if os.path.isdir(os.path.join(dirname, f"{STEP}{step}")) else None
    if parts is None:
        raise SerializationError(f"{os.path.join(dirname, f'{STEP}{step}')}: not a complete checkpoint")
    tag = _tags(program)[0]
    pieces: dict[str, list] = {}
    for name in sorted(parts, key=lambda t: (t != tag, t)):  # this executor's own part first
        folder, m = parts[name]
        for e in m.vars:
            pieces.setdefault(e.of, []).append((name, e, os.path.join(folder, e.file)))
    index: dict[str, dict] = {}

    def reader(path: str, var: str):
        def read(start: int, stop: int) -> np.ndarray:  # rows start..stop-1, nothing more
            if path not in index:
                index[path] = var_format.index_vars(path)  # checks the whole file once, in chunks
            if var not in index[path]:
                raise SerializationError(f"{path}: holds {sorted(index[path])}, not var {var!r} as "
                                         f"its manifest says")
            offset, dtype, shape = index[path][var]
            row = dtype.itemsize * int(np.prod(shape[1:], dtype=np.int64))
            if not shape:  # a 0-d value is one row
                return np.fromfile(path, dtype, 1, offset=offset)
            return np.fromfile(path, dtype, (stop - start) * row // dtype.itemsize,
                               offset=offset + start * row).reshape([stop - start] + shape[1:])
        return read

    values = {}
    for v in _held(program):
        if is_table(scope.vars.get(v.name)):
            found = {e.name: (e, path) for _, e, path in pieces.get(where(v)[0], []) if e.kind == TABLE}
            values[v.name] = load_table(v, scope.vars[v.name], [e for e, _ in found.values()],
                                        lambda e: reader(found[e.name][1], e.name)(0, e.count))
            continue
        of, kind, want = _describe(v)
        found = pieces.get(of, [])
        if kind == "own":  # a model-parallel shard goes back to the trainer that held it
            found = [p for p in found if p[0] == tag and p[1].name == v.name]
        if not found:
            why = "; model-parallel shards restore only onto the same trainers" if kind == "own" else ""
            raise SerializationError(f"var {v.name!r}{f' (rows of {of!r})' if of != v.name else ''}: "
                                     f"checkpoint {dirname}/{STEP}{step} holds no piece of it (parts: "
                                     f"{sorted(parts)}){why}")
        shape = tuple(int(d) for d in (v.shape or ()))
        if any(d < 0 for d in shape):
            raise SerializationError(f"var {v.name!r}: a persistable var needs a whole shape, not {list(shape)}")
        values[v.name] = assemble(v.name, want, shape, v.dtype, [
            Piece(RowSet(e.first, e.stride, e.count), tuple(e.shape), e.dtype, path, reader(path, e.name))
            for _, e, path in found])
    place = getattr(executor, "place", None)
    for name, arr in values.items():
        if is_table(arr):
            scope.vars[name] = arr
            continue
        scope.var(name).get_tensor().set(arr, place)
    return step


# -- what an Executor does by itself ------------------------------------------------------------
class Checkpointer:
    """An Executor's checkpoint schedule (docs/checkpoint.md): ``after_startup`` resumes,
    ``after_step`` saves every ``config.every`` global steps. ``resumed_step`` is the step
    the run resumed from (0 for a fresh start): a trainer skips that many batches."""

    def __init__(self, config: CheckpointConfig) -> None:
        self.config = config
        self.resumed_step = 0
        self.resumed_from: int | None = None
        self.saved_bytes = 0

    def check(self, program) -> None:
        """NOTE(checkpoint-modes): a checkpoint is one moment of the whole job. In sync mode
        every executor's step S is the same moment (each pserver merged every trainer's
        gradients of steps 0..S-1). Async pservers apply updates at their own pace, so no step
        is one moment: the schedule is refused. SSP pservers merge as in sync, so their parts
        are consistent and a resumed run loses and repeats no update; but SSP itself is not
        deterministic, so the resumed run is not bit-equal to an uninterrupted one."""
        c = program.cluster or ClusterSchema()
        if not self.config.every:
            return
        if not c.sync_mode:
            raise ProgramError("checkpoint every N steps needs sync mode (or bounded staleness): async "
                               "pservers apply updates at their own pace, so no step is one moment of the "
                               "job; save each process's own state with fluid.io.save_persistables instead")
        if c.merge_steps > 1:
            raise ProgramError("checkpoint every N steps with merge_steps > 1 is not supported yet "
                               "(a pserver's step is a round of merge_steps trainer steps)")
        if c.staleness:
            log.warning("checkpoints with bounded staleness: pserver state is consistent at each "
                        "step and a resumed run loses or repeats no update, but it is not bit-equal to "
                        "an uninterrupted run (NOTE(checkpoint-modes) in placegroup/io/checkpoint.py)")

    def after_startup(self, executor, program, scope) -> None:
        """Called after the startup program ran: check the mode, and with ``resume`` load the
        newest complete checkpoint (none: a warning, and step 0)."""
        self.check(program)
        if not self.config.resume:
            return
        step = latest_checkpoint(self.config.dirname)
        if step is None:
            log.warning("resume: no complete checkpoint in %s; starting at step 0", self.config.dirname)
            return
        self.resumed_step = self.resumed_from = load_checkpoint(executor, self.config.dirname, program,
                                                                step, scope=scope)
        # a warning only so that Python prints it without any logging set up: say where it resumed
        log.warning("resume: loaded checkpoint step %d from %s", step, self.config.dirname)

    def due(self, steps_done: int) -> bool:
        """Whether a save is due after ``steps_done`` steps of this run."""
        return bool(self.config.every) and (self.resumed_step + steps_done) % self.config.every == 0

    def after_step(self, executor, program, scope, steps_done: int) -> None:
        """Called after each step of this run (``steps_done`` of them so far): a due save
        writes, then seals in the background (NOTE(save-cost)). With ``PLACEGROUP_PROFILE``
        the executor's profile shows its time, as ``(checkpoint save)``, and its bytes."""
        done = self.resumed_step + steps_done
        if not self.due(steps_done):
            return
        profile = getattr(executor, "profile", None)
        if profile is None:
            save_checkpoint(executor, self.config.dirname, program, done, scope=scope, keep=self.config.keep,
                            resumed_from=self.resumed_from, background=True)
            return
        was = profile.current
        profile.mark(SAVE)
        profile.extra.setdefault(SAVE, lambda: (f"{SAVE}: {self.saved_bytes:,} bytes written; sealing "
                                                f"them took {SEALED[0]:.3f} s in the background"))
        save_checkpoint(executor, self.config.dirname, program, done, scope=scope, keep=self.config.keep,
                        resumed_from=self.resumed_from, background=True)
        self.saved_bytes += sum(to_numpy(scope.vars[v.name]).nbytes for v in _held(program))
        profile.mark(was)

    @staticmethod
    def wait() -> None:
        """Wait until the saves are complete on disk (``Executor.close`` does)."""
        wait_sealed()


def _step_hook(checkpoint: "CheckpointConfig | None") -> "Checkpointer | None":
    """An executor's checkpoint schedule: ``checkpoint`` with the environment over it, or None."""
    config = CheckpointConfig.from_env(checkpoint)
    return Checkpointer(config) if config is not None else None


register_step_hooks(_step_hook)  # NOTE(step-hooks) in executor/executor.py
