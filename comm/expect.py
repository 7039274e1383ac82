"""What an executor accepts, and from whom: the table the mailbox checks arrivals against.

``framing.unpack`` says whether a message is well formed; this says whether it is *wanted*. An
executor's plan (``expectations`` in executor/link.py) knows every value it waits for: the
var, the executors it comes from, its declared dtype and shape. Anything else (a stranger's
message, a var it never receives from that peer, a wrong dtype or shape) is dropped by the
mailbox with a log line before a kernel can see it (docs/protocol.md, "What is dropped").

Example:
    >>> import numpy as np
    >>> t = Expectations({"trainer:0"})
    >>> t.allow("w@GRAD", "trainer:0", np.float32, (13, 1))
    >>> t.check("trainer:0", "w@GRAD", np.zeros((13, 1), np.float32)) is None
    True
    >>> t.check("trainer:0", "w@GRAD", np.zeros((13, 2), np.float32))[0]
    'shape'

Thread-safety: a table is built once per plan and then only read, by the mailbox's thread.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from placegroup import config
from placegroup.values import LoDTensor, SelectedRows

MIN_MESSAGE = 256 << 20  # NOTE(max-message)
MESSAGE_MARGIN = 2

UNEXPECTED, DTYPE, SHAPE, LOD = "unexpected", "dtype", "shape", "lod"


@dataclasses.dataclass(frozen=True)
class Expect:
    """One var this executor receives from one peer."""
    dtype: np.dtype
    shape: tuple | None  # None: any; -1 in a dim: any size there
    rows: bool = False   # a SelectedRows var: its values' row width, and its height, are checked
    lod: int = 0         # the LoD depth its values have (the var's lod_level; 0: a plain tensor)


class Expectations:
    """The senders, vars and collectives one executor accepts (the union over its plans).

    Args:
        senders: the names that may send anything at all (the executors it is linked to); a
            var allowed from a name not among them still arrives from nobody.
    """

    def __init__(self, senders=()) -> None:
        self.senders: set[str] = set(senders)
        self.vars: dict[tuple, Expect] = {}    # (var, src) -> Expect
        self.tags: dict[str, set] = {}         # src -> tags of the collectives it joins with us

    def allow(self, var: str, src: str, dtype, shape, rows: bool = False, lod: int = 0) -> None:
        """``src`` may send ``var`` of ``dtype`` and ``shape`` (-1: any size in that dim), with
        a LoD of ``lod`` levels (NOTE(lod-expect))."""
        self.vars[(var, src)] = Expect(np.dtype(dtype), None if shape is None else tuple(shape), rows, int(lod))

    def allow_collective(self, tag: str, src: str) -> None:
        """``src`` is in the group of the collective call ``tag``: any part of it (their dtypes
        and shapes are the collective's to check, by its header phase). An op whose kernel
        makes several calls per run declares them (``OpDef.collective_calls``), and each is
        allowed by its own tag."""
        self.tags.setdefault(src, set()).add(tag)

    def update(self, other: "Expectations") -> None:
        """Accept what ``other`` accepts, too (a new plan on the same mailbox)."""
        self.senders |= other.senders
        self.vars.update(other.vars)
        for src, tags in other.tags.items():
            self.tags.setdefault(src, set()).update(tags)

    def check(self, src: str, var: str, value) -> tuple[str, str] | None:
        """None if ``value`` of ``var`` from ``src`` is wanted, else ``(reason, detail)``;
        reason is ``UNEXPECTED`` (no plan receives ``var`` from ``src``), ``DTYPE``, ``SHAPE``
        or ``LOD`` (NOTE(lod-expect)).
        A ``var`` that is a ``(tag, part)`` pair is a part of a collective call: wanted when
        ``src`` joins the collective ``tag`` with this executor."""
        if type(var) is tuple:
            tags = self.tags.get(src, ())
            if var[0] in tags:
                return None
            return UNEXPECTED, f"{src} takes part in no collective {var[0][:80]!r} with this executor"
        exp = self.vars.get((var, src))
        if exp is None:
            return UNEXPECTED, f"{var!r} is not a var this executor receives from {src}"
        # NOTE(lod-expect): a LoD that comes with a value has the depth of its var's lod_level:
        # another depth would reach a sequence kernel with levels it does not read, and a LoD on
        # a plain var an op that is no LoDOp (executor/plan.py). A plain tensor is taken for a
        # sequence var: the executor itself makes those where an op "shares" a LoD but not the
        # rows (NOTE(lod-run): split_ids' shard ids of LoD ids), so the sender's plan did too.
        # unpack already checked the offsets against the data.
        depth = value.lod_level if type(value) is LoDTensor else 0
        if depth and depth != exp.lod:
            return LOD, f"{var!r}: a LoD of {depth} level(s), expected {exp.lod} (its lod_level)"
        if depth:
            value = value.data
        rows = isinstance(value, SelectedRows)
        data = np.asarray(value.values) if rows else value
        if not isinstance(data, np.ndarray):
            return DTYPE, f"{var!r}: a {type(value).__name__}, not an array"
        if rows != exp.rows:
            want = "SelectedRows" if exp.rows else "a dense tensor"
            return SHAPE, f"{var!r}: expected {want}, got {'SelectedRows' if rows else 'a dense tensor'}"
        if data.dtype != exp.dtype:
            return DTYPE, f"{var!r}: dtype {data.dtype.str}, expected {exp.dtype.str}"
        if exp.shape is None:
            return None
        # SelectedRows: the values hold some rows of the var, so dim 0 is free and the var's
        # height is checked instead (unpack already checked the row ids against the height)
        got = ((value.height,) + data.shape[1:]) if rows else data.shape
        want = exp.shape
        if got != want and (len(got) != len(want) or any(d >= 0 and d != g for d, g in zip(want, got))):
            what = "height and row width" if rows else "shape"
            return SHAPE, f"{var!r}: {what} {list(got)}, expected {list(exp.shape)}"
        return None


def message_limit(program, env=None) -> int:
    """The largest frame a socket of this executor accepts, in bytes (``Transport(max_message=)``;
    -1: no limit).

    NOTE(max-message): libzmq's ZMQ_MAXMSGSIZE bounds each *frame* (one array here; the header
    is at most 64 KiB), and a peer that sends a larger one has its *connection* dropped (it
    reconnects, the frame is lost). So the limit must fit every legitimate value: by default
    ``MESSAGE_MARGIN`` times the largest var of ``program`` whose shape is fully known, and at
    least ``MIN_MESSAGE`` (256 MiB) for the vars with a -1 dim, whose size the program does not
    say. It keeps a stranger from making the process allocate what it claims (a frame header
    announcing 2^60 bytes). ``PLACEGROUP_MAX_MESSAGE`` (bytes; 0 or -1: no limit) overrides it.

    Example:
        >>> message_limit(fluid.default_main_program(), {"PLACEGROUP_MAX_MESSAGE": "1048576"})
        1048576

    Raises:
        ValueError: ``PLACEGROUP_MAX_MESSAGE`` is not an integer.
    """
    n = config.get("PLACEGROUP_MAX_MESSAGE", env)
    if n is not None:
        return n if n > 0 else -1
    biggest = 0
    for v in program.global_block().vars.values():
        if v.shape is not None and all(d >= 0 for d in v.shape):
            biggest = max(biggest, int(np.prod(v.shape, dtype=np.int64)) * np.dtype(v.dtype).itemsize)
    return max(MIN_MESSAGE, MESSAGE_MARGIN * biggest)
