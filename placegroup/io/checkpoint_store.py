"""A checkpoint on disk: the manifest, parts written atomically, which steps are complete.

Layout (docs/checkpoint.md)::

    <dirname>/step-<S>/<tag>/manifest.json   S: global steps done; tag: pserver.0, trainer.1, local
                             0000-<var>      one var file each, docs/prog_bin.md's format

Each executor that holds state writes its own part; step S is *complete* when every part its
manifests name in ``expected`` is there, written by the same run (NOTE(atomic-part)).
``placegroup/io/checkpoint.py`` decides what goes in a part and how to load it back.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from typing import Literal, Optional

import pydantic

from placegroup.io import var_files as _io
from placegroup.io.files import atomic_write, fsync_dir
from placegroup.errors import SerializationError

log = logging.getLogger("placegroup.checkpoint")
FORMAT, VERSION, MANIFEST, STEP = "placegroup-checkpoint", 1, "manifest.json", "step-"


class Entry(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    name: str
    of: str                       # the original var
    kind: Literal["rows", "own"]  # rows of the original; own: this executor's alone (model parallel)
    first: pydantic.NonNegativeInt
    stride: pydantic.PositiveInt
    count: pydantic.NonNegativeInt
    shape: list[pydantic.NonNegativeInt]
    dtype: str
    file: str


class Manifest(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", strict=True)
    format: Literal["placegroup-checkpoint"]
    version: int
    step: pydantic.NonNegativeInt
    executor: str
    endpoint: Optional[str]
    expected: list[str]
    digest: str
    resumed_from: Optional[int]
    cluster: dict
    written_at: float
    vars: list[Entry]


# NOTE(atomic-part): a part is complete or absent. Its files and manifest are written into
# ``.<tag>.<random>.tmp`` beside it, each fsynced, then the directory is renamed to ``<tag>``
# and its parent fsynced. Readers skip names starting with ".", so a crash at any moment
# leaves the previous complete step the newest. A part already there (a resumed run saving a
# step again) is renamed aside first; in between, the step lacks this part, so it is
# incomplete, never a mix.
def write_part(step_dir: str, tag: str, entries, values, manifest) -> str:
    os.makedirs(step_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{tag}.", suffix=".tmp", dir=step_dir)
    final = os.path.join(step_dir, tag)
    try:
        for entry, arr in zip(entries, values):
            atomic_write(os.path.join(tmp, entry.file), _io._records([(entry.name, arr)]))
        atomic_write(os.path.join(tmp, MANIFEST), [manifest.model_dump_json(indent=1).encode()])
        aside = None
        if os.path.exists(final):
            aside = tempfile.mkdtemp(prefix=f".{tag}.", suffix=".old", dir=step_dir)
            os.replace(final, aside)
        os.rename(tmp, final)
        fsync_dir(step_dir)
        fsync_dir(os.path.dirname(os.path.abspath(step_dir)))
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)
    return final


def prune(dirname: str, keep: int, tag: str) -> None:
    try:
        saved = sorted(steps(dirname), reverse=True)
        done = [s for s in saved if complete(dirname, s) is not None]
    except SerializationError as e:  # a damaged old step must not stop training
        log.warning("checkpoint: not pruning %s: %s", dirname, e)
        return
    if len(done) < keep:
        return
    for s in (s for s in saved if s < done[keep - 1]):
        step_dir = os.path.join(dirname, f"{STEP}{s}")
        with contextlib.suppress(OSError):  # hidden first, so no reader sees half a part
            gone = tempfile.mkdtemp(prefix=f".{tag}.", suffix=".old", dir=step_dir)
            os.replace(os.path.join(step_dir, tag), gone)
            shutil.rmtree(gone, ignore_errors=True)
        with contextlib.suppress(OSError):  # others' parts may still be there
            os.rmdir(step_dir)


# -- finding complete steps ----------------------------------------------------------------------
def steps(dirname: str) -> list[int]:
    if not os.path.isdir(dirname):
        return []
    return [int(n[len(STEP):]) for n in os.listdir(dirname)
            if n.startswith(STEP) and n[len(STEP):].isdigit() and os.path.isdir(os.path.join(dirname, n))]


def _read_manifest(path: str) -> Manifest:
    try:
        with open(path, "rb") as f:
            data = json.loads(f.read())
    except (FileNotFoundError, NotADirectoryError):
        raise SerializationError(f"{os.path.dirname(path)}: not a checkpoint part: it has no {MANIFEST} "
                                 f"(placed there by hand? remove it)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise SerializationError(f"{path}: not a checkpoint manifest: not JSON ({e})") from None
    if isinstance(data, dict) and data.get("version") not in (None, VERSION):
        raise SerializationError(f"{path}: checkpoint manifest version {data.get('version')}; this "
                                 f"placegroup reads version {VERSION}")
    try:
        return Manifest.model_validate(data)
    except pydantic.ValidationError as e:
        first = e.errors()[0]
        raise SerializationError(f"{path}: malformed checkpoint manifest: {'.'.join(map(str, first['loc']))}: "
                                 f"{first['msg']}") from None


def complete(dirname: str, step: int) -> dict | None:
    """tag -> (part dir, manifest) of step ``step`` if it is complete, else None."""
    step_dir = os.path.join(dirname, f"{STEP}{step}")
    try:
        names = sorted(os.listdir(step_dir))
    except FileNotFoundError:  # pruned meanwhile
        return None
    parts = {}
    for name in names:
        if name.startswith("."):
            continue  # a part being written, or set aside (NOTE(atomic-part))
        path = os.path.join(step_dir, name, MANIFEST)
        try:
            m = _read_manifest(path)
        except SerializationError:
            if not os.path.isdir(os.path.dirname(path)):
                continue  # replaced or pruned since the listing
            raise
        if m.step != step or m.executor != name:
            raise SerializationError(f"{path}: says step {m.step} of {m.executor!r}, but lies in "
                                     f"{STEP}{step}/{name}")
        parts[name] = (os.path.dirname(path), m)
    # parts of one run agree on the program and the step it resumed from (NOTE(atomic-part))
    runs: dict[tuple, set] = {}
    for name, (_, m) in parts.items():
        runs.setdefault((m.digest, m.resumed_from, tuple(m.expected)), set()).add(name)
    done = [key for key, names in runs.items() if set(key[2]) <= names]
    if not done:
        return None
    key = max(done, key=lambda k: max(parts[t][1].written_at for t in k[2]))
    return {t: parts[t] for t in key[2]}


def latest_checkpoint(dirname: str) -> int | None:
    """The newest complete step in ``dirname``, or None when there is none.

    Raises:
        SerializationError: naming the file, for a manifest that is not one.

    Example:
        >>> latest_checkpoint("ckpt")  # doctest: +SKIP
        20
    """
    for step in sorted(steps(dirname), reverse=True):
        if complete(dirname, step) is not None:
            return step
    return None
