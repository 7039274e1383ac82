"""Collectives among a group of executors over their mailboxes: allreduce, allgather, reducescatter.

``RingCommunicator`` is what a collective op's kernel receives as its communicator in a cluster
(``executor/link.py``, ``Link.communicator``, makes one per op and group; ``LocalComm`` in
executor/plan.py is the one-member stand-in). Every member calls the same method with the same ``tag`` and ``step``;
each value of that call is the mailbox key ``((tag, f"{phase}{r}"), step, source)``, and
travels with its tag in a header field of its own, so calls with other tags or steps, before
or after, never mix with it. docs/protocol.md, "Collectives", lists the phases.

NOTE(ring): how a call moves its data.
  1. Every rank posts a *header* to every peer (phase ``h``): an empty array of the rank's dtype
     whose shape is ``(0, *x.shape)``, so the message header carries the dtype and shape and no
     byte more. In the same message a rank whose part is small (below) sends the part itself
     (phase ``x``), and one whose part is large its first ring step. Every rank then waits for
     every header, so all ranks learn all shapes at once: a mismatch raises the same
     ``CollectiveError`` on every rank before any data is read (nobody hangs), and the choice
     of algorithm, made from the shapes, is the same on every rank.
  2. Small (``x.nbytes < DIRECT_BYTES``, 64 KiB; for allgather, each rank's part on its own):
     the direct exchange of step 1 is all; one latency hop instead of the ring's 2(K-1).
     reducescatter sends each peer only its part, so it moves (K-1)/K of x either way.
  3. Large: allreduce is a ring reduce-scatter then a ring allgather over x's flattened elements
     split into K chunks as ``numpy.array_split`` would (each rank sends 2(K-1)/K of the bytes:
     bandwidth-optimal). reducescatter is the ring reduce-scatter over the ``axis`` parts; in
     allgather each large part goes round the ring (K-1 hops; each rank sends (K-1)/K of the
     result, which is also optimal). Ring step t: rank i sends to i+1 and receives from i-1;
     in the reduce-scatter it sends chunk (i-t-1) mod K and adds its own part to the received
     chunk (i-t-2) mod K, so after K-1 steps it holds chunk i, reduced.

NOTE(ring-pipeline): a ring chunk travels as segments of about SEGMENT_BYTES (4 MiB), each its
own message, and a segment moves on as soon as it is reduced (or received, in the allgather),
so adding one segment overlaps with the transfer of the next and the allgather of a chunk
starts before its reduce-scatter ends. Segments are split from the shapes alone, the same on
every rank. Each message costs some 50 us of Python and a wake-up; 4 MiB measured faster than
1 MiB with 2 to 4 ranks on 2 cores (bench/bench_collectives.py), where loopback TCP is bound by
the CPU and fewer, larger messages win.

NOTE(bitwise): every rank gets the same bits. Direct path: every rank reduces the K parts in
rank order, ``((x0 + x1) + x2) + ...``, the same operations on the same inputs. Ring: chunk c is
reduced once, at rank c, in the fixed ring order ``((x_{c+1} + x_{c+2}) + ...) + x_c``, and the
allgather copies those bits to every rank. Both orders are fixed, so a call is also
reproducible run to run; for K >= 3 the two paths may round floats differently from each other.

NOTE(zero-copy-sends): the transport sends arrays of 64 KiB or more without a copy (from
``DIRECT_BYTES`` on, which must not exceed the transport's ``ZERO_COPY_BYTES``), so such an
array must not change until the receiver has it. The caller's ``x`` is only sent where the
receipt is known before the call returns (a ring chunk at step s of 2(K-1) steps has reached
rank i+1 when rank i receives step s+K-1, which depends on it); elsewhere (allgather's own
part, reducescatter's first chunk) a copy leaves. Every other value sent is a fresh array of
this call or a received frame, which nobody writes.

Thread-safety: a communicator belongs to the executor thread of its mailbox.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from placegroup.comm.mailbox import PeersDone
from placegroup.errors import CollectiveError, CommTimeout

DIRECT_BYTES = 64 * 1024  # NOTE(ring)
SEGMENT_BYTES = 4 << 20  # NOTE(ring-pipeline)
_REDUCE = {"sum": np.add, "max": np.maximum}



class RingCommunicator:
    """Collectives among ``members`` (wire names in rank order) over ``mailbox``.

    Args:
        mailbox: this executor's ``Mailbox``; every member must be able to reach every other.
        members: the group's wire names in rank order, e.g. ``["trainer:0", "trainer:1"]``.
        me: this executor's name, one of ``members``.
        timeout: seconds a wait may last before ``CommTimeout``.
        describe: optional ``describe(missing_keys) -> str`` from the executor (which op, which
            step); the communicator adds the collective, tag and ranks to what it says.

    Every member calls the same methods in the same order with the same ``tag`` and ``step``;
    inputs are host numpy arrays and outputs new arrays of the input dtype, bitwise the same on
    every rank (NOTE(bitwise)). A group of one sends nothing and returns a copy.

    Example (one process per member, ``mb`` each one's Mailbox)::

        comm = RingCommunicator(mb, ["trainer:0", "trainer:1"], "trainer:0", timeout=60)
        total = comm.allreduce(np.ones(4, np.float32), "sum", tag="op7", step=0)  # all 2.0

    Raises (each method):
        CollectiveError: shapes or dtypes differ between ranks (every rank raises it), an
            unknown ``op`` or an ``axis`` out of range.
        CommTimeout: a peer sent nothing for ``timeout`` seconds; names tag, step and ranks.
    """

    def __init__(self, mailbox, members: Sequence[str], me: str, timeout: float,
                 describe: Callable | None = None) -> None:
        members = list(members)
        if me not in members or len(set(members)) != len(members):
            raise CollectiveError(f"{me!r} must be one of the group's distinct members {members}")
        self.mailbox = mailbox
        self.members = members
        self.me = me
        self.rank = members.index(me)
        self.size = len(members)
        self.timeout = timeout
        self.describe = describe

    # -- the collectives -------------------------------------------------------------------------
    def allreduce(self, x, op: str, tag: str, step: int) -> np.ndarray:
        """Elementwise ``op`` ("sum" or "max"; max propagates NaN) of every rank's ``x``."""
        reduce = _REDUCE.get(op)
        if reduce is None:
            raise CollectiveError(f"allreduce {tag!r}: op {op!r} is not one of {sorted(_REDUCE)}")
        x = np.asarray(x)
        if self.size == 1:
            return x.copy()
        c = _Call(self, "allreduce", tag, step)
        if x.nbytes < DIRECT_BYTES:
            c.post_header(x, x)
            c.check_same(c.headers(x), x)
            return _in_rank_order(reduce, c.gather("x", 0, x))
        k, i = self.size, self.rank
        flat = x.reshape(-1)
        b = _bounds(flat.size, k)
        segs = [_segments(flat[b[j]:b[j + 1]]) for j in range(k)]
        c.post_header(x, None)
        self._ring_start(c, "rs", segs[(i - 1) % k])
        c.check_same(c.headers(x), x)
        out = np.empty(flat.size, x.dtype)
        outs = [_segments(out[b[j]:b[j + 1]]) for j in range(k)]  # the same split as segs

        def reduced(s, v):  # a segment of chunk i is final: it starts round the ring at once
            outs[i][s][...] = v
            c.post((i + 1) % k, "ag", f"0.{s}", v)

        self._ring_reduce_scatter(c, segs, reduce, reduced)
        self._ring_allgather(c, [len(g) for g in segs], [True] * k,
                             lambda j, s, v: outs[j][s].__setitem__(Ellipsis, v))
        return out.reshape(x.shape)

    def allgather(self, x, axis: int, tag: str, step: int) -> np.ndarray:
        """Every rank's ``x`` concatenated along ``axis`` in rank order; the ranks' parts may
        differ in length along ``axis`` only."""
        x = np.asarray(x)
        axis = _axis(x, axis, "allgather", tag)
        if self.size == 1:
            return x.copy()
        c = _Call(self, "allgather", tag, step)
        k, i = self.size, self.rank
        c.post_header(x, x if x.nbytes < DIRECT_BYTES else None)
        if x.nbytes >= DIRECT_BYTES:  # a copy leaves: NOTE(zero-copy-sends)
            self._ring_start(c, "ag", [np.array(v) for v in _segments(x, axis)])
        heads = c.headers(x)
        c.check_same(heads, x, but=axis)
        big = [math.prod(h.shape[1:]) * x.itemsize >= DIRECT_BYTES for h in heads]
        parts: list = [[] for _ in range(k)]
        parts[i] = [x]
        small = [j for j in range(k) if not big[j] and j != i]
        for j, v in zip(small, c.recv("x", 0, small)):
            parts[j] = [v]
        if any(big):
            nsegs = [_nseg(h.shape[1:], x.itemsize, axis) for h in heads]
            self._ring_allgather(c, nsegs, big, lambda j, s, v: parts[j].append(v))
        return np.concatenate([v for p in parts for v in p], axis=axis)

    def reducescatter(self, x, axis: int, tag: str, step: int) -> np.ndarray:
        """The elementwise sum of every rank's ``x``, split along ``axis`` into ``size`` parts
        as ``numpy.array_split`` would; this rank's part (part ``rank``)."""
        x = np.asarray(x)
        axis = _axis(x, axis, "reducescatter", tag)
        if self.size == 1:
            return x.copy()
        c = _Call(self, "reducescatter", tag, step)
        parts = np.array_split(x, self.size, axis=axis)
        if x.nbytes < DIRECT_BYTES:
            c.post_header(x, parts)
            c.check_same(c.headers(x), x)
            return _in_rank_order(np.add, c.gather("x", 0, parts[self.rank]))
        segs = [_segments(p, axis) for p in parts]
        c.post_header(x, None)
        # chunk rank-1 is only ever sent from here, first and as a copy (NOTE(zero-copy-sends))
        self._ring_start(c, "rs", [np.array(v) for v in segs[(self.rank - 1) % self.size]])
        c.check_same(c.headers(x), x)
        done: list = []
        self._ring_reduce_scatter(c, segs, np.add, lambda s, v: done.append(v))
        return np.concatenate(done, axis=axis)

    # -- the rings (NOTE(ring)) --------------------------------------------------------------------
    def _ring_start(self, c: "_Call", phase: str, segs: list) -> None:
        """Ring step 0's sends, posted before the headers are checked so that they travel with
        them (if the shapes differ, every rank raises before reading any of them)."""
        for s, v in enumerate(segs):
            c.post((self.rank + 1) % self.size, phase, f"0.{s}", v)

    def _ring_reduce_scatter(self, c: "_Call", segs: list, reduce, reduced: Callable) -> None:
        """K-1 ring steps over this rank's chunks (``segs[j]``: chunk j's segments, chunk
        rank-1's posted already by ``_ring_start``); each segment of chunk ``rank`` goes to
        ``reduced(s, value)`` as soon as it is final."""
        k, i = self.size, self.rank
        for t in range(k - 1):
            for s, mine in enumerate(segs[(i - t - 2) % k]):
                got, = c.recv("rs", f"{t}.{s}", [(i - 1) % k])
                acc = np.asarray(reduce(got, mine))  # a new array: nobody else writes it
                if t < k - 2:
                    c.post((i + 1) % k, "rs", f"{t + 1}.{s}", acc)
                else:
                    reduced(s, acc)

    def _ring_allgather(self, c: "_Call", nsegs: list, moving: list, place: Callable) -> None:
        """K-1 ring steps after chunk ``rank``'s segments were posted (``_ring_start``): each received
        segment goes to ``place(j, s, value)`` and on to rank+1. Chunks j with ``moving[j]``
        false are not in the ring; ``nsegs[j]`` is chunk j's segment count."""
        k, i = self.size, self.rank
        for t in range(k - 1):
            j = (i - t - 1) % k
            if not moving[j]:
                continue
            for s in range(nsegs[j]):
                got, = c.recv("ag", f"{t}.{s}", [(i - 1) % k])
                place(j, s, got)
                if t < k - 2:  # a received frame: forwarded as it is, without a copy
                    c.post((i + 1) % k, "ag", f"{t + 1}.{s}", got)


class _Call:
    """One collective call: its mailbox keys, sends, waits and error messages."""

    def __init__(self, comm: RingCommunicator, what: str, tag: str, step: int) -> None:
        self.comm, self.what, self.tag, self.step = comm, what, tag, int(step)
        self.peers = [k for k in range(comm.size) if k != comm.rank]

    def post(self, dst: int, phase: str, r, value) -> None:
        self.comm.mailbox.post(self.comm.members[dst], (self.tag, f"{phase}{r}"), self.step, value)

    def post_header(self, x: np.ndarray, data) -> None:
        """Phase h to every peer, with the direct data (one array, or a list by rank) if any;
        they leave, in one message per peer, at the next ``recv``'s flush."""
        head = np.empty((0,) + x.shape, x.dtype)
        for k in self.peers:
            self.post(k, "h", 0, head)
            if data is not None:
                self.post(k, "x", 0, data[k] if isinstance(data, list) else data)

    def recv(self, phase: str, r, srcs: Sequence[int]) -> list:
        mb, members = self.comm.mailbox, self.comm.members
        keys = [((self.tag, f"{phase}{r}"), self.step, members[k]) for k in srcs]
        mb.flush()
        try:
            vals = mb.wait(keys, self.comm.timeout, self._describe)
        except PeersDone:
            vals = [None] * len(keys)
        gone = [k for k, v in zip(srcs, vals) if v is None]
        if gone:
            raise CommTimeout(f"{self.where()}: rank(s) {gone} ({[members[k] for k in gone]}) said done "
                              f"before taking part")
        return vals

    def gather(self, phase: str, r, mine) -> list:
        """Every rank's value of ``phase``, in rank order, with ``mine`` at this rank."""
        vals = self.recv(phase, r, self.peers)
        vals.insert(self.comm.rank, mine)
        return vals

    def headers(self, x: np.ndarray) -> list:
        """Every rank's header (NOTE(ring) 1), in rank order; this rank's own made from x."""
        return self.gather("h", 0, np.empty((0,) + x.shape, x.dtype))

    def check_same(self, heads: list, x: np.ndarray, but: int | None = None) -> None:
        """Raise the same CollectiveError on every rank unless every header matches ``x``'s
        dtype and shape (every dim but ``but``, the allgather axis, and the rank count)."""
        def key(h):
            shape = list(h.shape[1:])
            if but is not None and len(shape) == x.ndim:
                shape[but] = None
            return h.dtype.str, tuple(shape)

        if len({key(h) for h in heads}) == 1:
            return
        groups: dict = {}
        for k, h in enumerate(heads):
            groups.setdefault((h.dtype.name, h.shape[1:]), []).append(k)
        said = "; ".join(f"rank{'s' * (len(ks) > 1)} {', '.join(map(str, ks))}: {dt}{list(sh)}"
                         for (dt, sh), ks in groups.items())
        need = (f"the same dtype and shape but along axis {but}" if but is not None
                else "the same dtype and shape")
        raise CollectiveError(f"{self.what} {self.tag!r} at step {self.step}: the ranks' arrays differ "
                              f"({said}); every rank must pass {need}")

    def where(self) -> str:
        return (f"{self.what} {self.tag!r} at step {self.step} on {self.comm.me} "
                f"(rank {self.comm.rank} of {self.comm.size})")

    def _describe(self, missing) -> str:
        missing = [(f"{tag}@{part}", version, src) for (tag, part), version, src in missing]  # for people
        var, _, src = missing[0]
        j = self.comm.members.index(src)
        what = f"{self.where()}, waiting for rank {j} ({src})"
        if self.comm.describe is not None:
            return f"{self.comm.describe(missing)} [{what}]"
        return (f"{what}: nothing came for {var!r} in {self.comm.timeout:g}s "
                f"(does rank {j} run this collective with this tag and step?)")


def _in_rank_order(reduce, vals: list) -> np.ndarray:
    """``reduce`` of ``vals`` left to right (NOTE(bitwise)), as a new array."""
    acc = np.asarray(reduce(vals[0], vals[1]))  # a 0-d reduce gives a scalar: made an array again
    for v in vals[2:]:
        reduce(acc, v, out=acc)
    return acc


def _nseg(shape: tuple, itemsize: int, axis: int) -> int:
    """How many segments an array of ``shape`` travels the ring in (NOTE(ring-pipeline))."""
    if not shape:
        return 1
    return max(1, min(shape[axis], -(-math.prod(shape) * itemsize // SEGMENT_BYTES)))


def _segments(a: np.ndarray, axis: int = 0) -> list:
    return np.array_split(a, _nseg(a.shape, a.itemsize, axis), axis=axis) if a.ndim else [a]


def _bounds(n: int, k: int) -> list:
    """Chunk starts of ``numpy.array_split(range(n), k)``, and n."""
    q, r = divmod(n, k)
    return [j * q + min(j, r) for j in range(k + 1)]


def _axis(x: np.ndarray, axis: int, what: str, tag: str) -> int:
    if not -x.ndim <= axis < x.ndim:
        raise CollectiveError(f"{what} {tag!r}: axis {axis} is out of range for an array of shape "
                              f"{list(x.shape)}")
    return axis % x.ndim


__all__ = ["RingCommunicator", "CollectiveError", "DIRECT_BYTES"]
