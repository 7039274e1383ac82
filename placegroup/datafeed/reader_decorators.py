"""Reader decorators, as in PaddlePaddle 1.x's ``paddle.reader`` (and ``paddle.batch``).

A *reader* is a zero-argument callable that returns a fresh iterator over samples; a sample
is usually a tuple such as ``(features, label)``. A *decorator* takes readers and returns a new
reader. Nothing runs until the returned reader is called, so a reader can be iterated once per
pass::

    import placegroup as paddle
    train_reader = paddle.batch(
        paddle.reader.shuffle(paddle.dataset.uci_housing.train(), buf_size=500),
        batch_size=20)
    for pass_id in range(10):
        for minibatch in train_reader():  # a list of up to 20 samples
            ...

The semantics follow Paddle 1.x's ``python/paddle/reader/decorator.py`` and
``python/paddle/batch.py``: ``shuffle`` shuffles within consecutive windows of ``buf_size``
samples (not globally), ``batch`` keeps the last short batch unless ``drop_last``, ``compose``
raises ``ComposeNotAligned`` on readers of different lengths, and so on. Small departures,
all additions: ``shuffle`` takes an optional ``seed``, and ``buffered`` and ``xmap_readers``
re-raise in the consumer an exception raised by the wrapped reader or mapper (Paddle's thread
died silently and the consumer hung).

Two decorators work in parallel: ``xmap_readers`` maps samples in threads, and
``multiprocess_reader`` runs readers in forked processes whose samples cross as msgpack, never
as pickles (NOTE(reader-codec) in placegroup/util/sample_codec.py). ``fluid.io`` re-exports all of
these as 1.8 does.

``placegroup.reader`` (``paddle.reader`` and Fluid's ``fluid.reader``) re-exports them with the
loaders (NOTE(fluid-reader-home) there); placegroup.io imports them from here.

Thread-safety: a decorated reader holds no state between calls except ``shuffle``'s seeded
generator, so call a seeded ``shuffle`` reader from one thread at a time.
"""
from __future__ import annotations

import itertools
import queue
import random
import threading
from typing import Any, Callable, Iterator

from placegroup.util.sample_codec import pack as _pack
from placegroup.util.sample_codec import unpack as _unpack

__all__ = ["ComposeNotAligned", "batch", "buffered", "cache", "chain", "compose", "firstn",
           "map_readers", "multiprocess_reader", "shuffle", "xmap_readers"]

Reader = Callable[[], Iterator[Any]]


def shuffle(reader: Reader, buf_size: int, seed: int | None = None) -> Reader:
    """Shuffle the samples of ``reader`` within windows of ``buf_size``.

    Samples are read into a buffer; each time it holds ``buf_size`` samples it is shuffled
    and emptied, and the remainder is shuffled at the end (Paddle's semantics: with
    ``buf_size`` >= the data size this is a full shuffle).

    Args:
        reader: the reader to shuffle.
        buf_size: the window size, a positive int.
        seed: when given, a ``random.Random(seed)`` made once here drives every pass, so the
            sequence of passes is reproducible (pass 2's order differs from pass 1's); when
            None the global ``random`` module is used, as in Paddle (``random.seed`` controls it).

    Returns:
        The shuffled reader.

    Raises:
        ValueError: if ``buf_size`` is not a positive int.

    Example::

        r = shuffle(lambda: iter(range(10)), buf_size=4, seed=1)
        sorted(r()) == list(range(10))  # True
    """
    buf_size = int(buf_size)
    if buf_size <= 0:
        raise ValueError(f"shuffle: buf_size must be a positive int, got {buf_size}")
    rng = random.Random(seed) if seed is not None else random

    def shuffled_reader():
        buf = []
        for sample in reader():
            buf.append(sample)
            if len(buf) >= buf_size:
                rng.shuffle(buf)
                yield from buf
                buf = []
        if buf:
            rng.shuffle(buf)
            yield from buf

    return shuffled_reader


def batch(reader: Reader, batch_size: int, drop_last: bool = False) -> Reader:
    """Group the samples of ``reader`` into lists of ``batch_size`` (``paddle.batch``).

    Args:
        reader: the sample reader.
        batch_size: samples per batch, a positive int.
        drop_last: drop a final batch shorter than ``batch_size`` (default: keep it).

    Returns:
        A reader whose items are lists of samples.

    Raises:
        ValueError: if ``batch_size`` is not a positive int.

    Example::

        list(batch(lambda: iter(range(5)), 2)())  # [[0, 1], [2, 3], [4]]
    """
    batch_size = int(batch_size)
    if batch_size <= 0:
        raise ValueError(f"batch: batch_size must be a positive int, got {batch_size}")

    def batch_reader():
        b = []
        for sample in reader():
            b.append(sample)
            if len(b) == batch_size:
                yield b
                b = []
        if b and not drop_last:
            yield b

    return batch_reader


class _End:
    """Marks the end of a ``buffered`` reader's queue (a class, so no sample can equal it)."""


class _Failed:
    def __init__(self, error: BaseException) -> None:
        self.error = error


def buffered(reader: Reader, size: int) -> Reader:
    """Read ``reader`` ahead in a daemon thread, keeping up to ``size`` samples queued.

    Useful when producing a sample (decoding, augmenting) is slow and releases the GIL. An
    exception in the wrapped reader is re-raised by the consumer. A consumer that stops
    early leaves the thread blocked on the full queue until the process exits (as in Paddle).

    Args:
        reader: the reader to read ahead.
        size: the most samples held in the queue (``<= 0`` means unbounded).

    Example::

        list(buffered(lambda: iter(range(3)), size=2)())  # [0, 1, 2]
    """

    def worker(it, q):
        try:
            for sample in it:
                q.put(sample)
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises
            q.put(_Failed(e))
            return
        q.put(_End)

    def buffered_reader():
        q: queue.Queue = queue.Queue(maxsize=max(int(size), 0))
        threading.Thread(target=worker, args=(reader(), q), daemon=True,
                         name="placegroup-buffered-reader").start()
        while True:
            item = q.get()
            if item is _End:
                return
            if isinstance(item, _Failed):
                raise item.error
            yield item

    return buffered_reader


def chain(*readers: Reader) -> Reader:
    """All samples of the first reader, then of the second, and so on.

    Example::

        list(chain(lambda: iter([1, 2]), lambda: iter([3]))())  # [1, 2, 3]
    """

    def chained_reader():
        return itertools.chain(*[r() for r in readers])

    return chained_reader


class ComposeNotAligned(ValueError):
    """``compose``'s readers ran out at different samples."""


def _as_tuple(x: Any) -> tuple:
    return x if isinstance(x, tuple) else (x,)


def compose(*readers: Reader, check_alignment: bool = True) -> Reader:
    """Zip readers sample by sample, flattening each sample into one tuple.

    ``compose(a, b)`` yields ``(a0, b0)``; a reader whose samples are tuples contributes all
    their elements: ``((1, 2), 3) -> (1, 2, 3)``.

    Args:
        readers: the readers to zip.
        check_alignment: raise ``ComposeNotAligned`` when the readers have different lengths
            (default); when False, stop at the shortest, silently.

    Raises:
        ComposeNotAligned: on readers of different lengths, with ``check_alignment``.

    Example::

        list(compose(lambda: iter([1, 2]), lambda: iter("ab"))())  # [(1, 'a'), (2, 'b')]
    """
    missing = object()

    def composed_reader():
        its = [r() for r in readers]
        if not check_alignment:
            for outputs in zip(*its):
                yield sum(map(_as_tuple, outputs), ())
            return
        for i, outputs in enumerate(itertools.zip_longest(*its, fillvalue=missing)):
            ended = [k for k, o in enumerate(outputs) if o is missing]
            if ended:
                raise ComposeNotAligned(f"compose: readers {ended} ended at sample {i} while "
                                        f"the others went on; their outputs are not aligned")
            yield sum(map(_as_tuple, outputs), ())

    return composed_reader


def firstn(reader: Reader, n: int) -> Reader:
    """Only the first ``n`` samples of ``reader``.

    Example::

        list(firstn(lambda: iter(range(10)), 3)())  # [0, 1, 2]
    """

    def firstn_reader():
        return itertools.islice(reader(), int(n))

    return firstn_reader


def map_readers(func: Callable, *readers: Reader) -> Reader:
    """``func`` applied to the readers' samples side by side (Python's ``map``).

    Example::

        list(map_readers(lambda a, b: a + b, lambda: iter([1, 2]), lambda: iter([10, 20]))())
        # [11, 22]
    """

    def mapped_reader():
        return map(func, *[r() for r in readers])

    return mapped_reader


def cache(reader: Reader) -> Reader:
    """Read ``reader`` once, now, and replay its samples on every call.

    Example::

        r = cache(lambda: iter(range(3)))
        list(r()) == list(r()) == [0, 1, 2]  # True
    """
    samples = tuple(reader())

    def cached_reader():
        return iter(samples)

    return cached_reader


# -- parallel decorators ---------------------------------------------------------------------
def xmap_readers(mapper: Callable, reader: Reader, process_num: int, buffer_size: int,
                 order: bool = False) -> Reader:
    """``mapper`` applied to the samples of ``reader`` by ``process_num`` threads.

    One thread reads ``reader`` into a queue of ``buffer_size`` samples; the workers map them
    into a second queue of that size, which the returned reader drains. Worth it when
    ``mapper`` releases the GIL (decoding, numpy). Threads, as in Paddle (whose name says
    "process" but whose workers are threads too).

    Args:
        mapper: called on each sample; its result is the new sample.
        reader: the source reader.
        process_num: worker threads, a positive int.
        buffer_size: each queue's capacity, a positive int.
        order: keep the source order (a worker waits for its turn to hand a result over);
            when False, samples come in whatever order the workers finish.

    Returns:
        The mapped reader.

    Raises:
        ValueError: a non-positive ``process_num`` or ``buffer_size``.
        Any exception of ``reader`` or ``mapper``: re-raised by the consumer (Paddle's thread
            died and the consumer hung).

    Example::

        r = xmap_readers(lambda x: x * 2, lambda: iter(range(5)), 2, 4, order=True)
        list(r())  # [0, 2, 4, 6, 8]

    Thread-safety: ``mapper`` runs in several threads at once. A consumer that stops early
    leaves the threads blocked until the process exits (as ``buffered``).
    """
    process_num, buffer_size = int(process_num), int(buffer_size)
    if process_num <= 0 or buffer_size <= 0:
        raise ValueError(f"xmap_readers: process_num and buffer_size must be positive ints, got "
                         f"{process_num} and {buffer_size}")

    def read_worker(in_q: queue.Queue, out_q: queue.Queue) -> None:
        try:
            for i, sample in enumerate(reader()):
                in_q.put((i, sample))
        except BaseException as e:  # noqa: BLE001 - handed to the consumer, which re-raises
            out_q.put(_Failed(e))
        for _ in range(process_num):
            in_q.put(_End)

    def map_worker(in_q: queue.Queue, out_q: queue.Queue, turn: list, cond: threading.Condition):
        while True:
            item = in_q.get()
            if item is _End:
                out_q.put(_End)
                return
            i, sample = item
            try:
                result = mapper(sample)
            except BaseException as e:  # noqa: BLE001
                result = _Failed(e)
            if order:  # hand results over in the source's order
                with cond:
                    cond.wait_for(lambda: turn[0] == i or turn[1])
                if turn[1]:
                    return  # the consumer stopped on an error
                # not under the lock: a full queue must not keep the consumer from aborting
                out_q.put(result)
                with cond:
                    turn[0] += 1
                    cond.notify_all()
            else:
                out_q.put(result)

    def xreader():
        in_q: queue.Queue = queue.Queue(buffer_size)
        out_q: queue.Queue = queue.Queue(buffer_size)
        turn, cond = [0, False], threading.Condition()  # next index to hand over; aborted
        threads = [threading.Thread(target=read_worker, args=(in_q, out_q), daemon=True,
                                    name="placegroup-xmap-read")]
        threads += [threading.Thread(target=map_worker, args=(in_q, out_q, turn, cond),
                                     daemon=True, name=f"placegroup-xmap-{k}")
                    for k in range(process_num)]
        for t in threads:
            t.start()
        finished = 0
        while finished < process_num:
            item = out_q.get()
            if item is _End:
                finished += 1
            elif isinstance(item, _Failed):
                with cond:  # release workers waiting for a turn that will never come
                    turn[1] = True
                    cond.notify_all()
                raise item.error
            else:
                yield item

    return xreader


def _child(reader: Reader, conn) -> None:
    """In a child process: send each sample (b"S"), then the end (b"E") or the error (b"X")."""
    import traceback

    try:
        for sample in reader():
            if sample is None:
                raise ValueError("multiprocess_reader: a reader yielded None, which Paddle "
                                 "refuses too (it marks the end)")
            conn.send_bytes(b"S" + _pack(sample))
        conn.send_bytes(b"E")
    except BaseException:  # noqa: BLE001 - carried to the parent as text
        conn.send_bytes(b"X" + traceback.format_exc().encode())
    finally:
        conn.close()


def multiprocess_reader(readers, use_pipe: bool = True, queue_size: int = 1000) -> Reader:
    """Run each reader in a child process of its own and merge their samples.

    Samples cross in a safe format (NOTE(reader-codec)), not Paddle's: Paddle sends JSON through
    pipes (``use_pipe=True``, tuples become lists and arrays fail) or pickles through a queue.
    With ``use_pipe=True`` the samples are merged round robin, one from each live reader in
    turn (Paddle's order); with ``False`` in the order they arrive. ``queue_size`` is accepted
    and unused (the pipes buffer what the OS gives them).

    Args:
        readers: a non-empty list or tuple of readers; each must work in a forked process.
        use_pipe: the merge order, as above.
        queue_size: unused.

    Returns:
        The merged reader. A child's error is re-raised by the consumer with the child's
        traceback; a consumer that stops early ends the children.

    Raises:
        ValueError: ``readers`` is not a non-empty list or tuple.
        NotImplementedError: on a platform without ``fork`` (Windows, as in Paddle).

    Example::

        r = multiprocess_reader([lambda: iter([1, 2]), lambda: iter([3])])
        sorted(r())  # [1, 2, 3]

    Thread-safety: forks the calling process, so call it where forking is safe (before
    starting threads that hold locks the readers need).
    """
    import multiprocessing
    from multiprocessing.connection import wait

    if not isinstance(readers, (list, tuple)) or not readers:
        raise ValueError(f"multiprocess_reader: readers must be a non-empty list or tuple, got "
                         f"{readers!r}")
    if "fork" not in multiprocessing.get_all_start_methods():
        raise NotImplementedError("multiprocess_reader needs the fork start method, which this "
                                  "platform lacks (Paddle does not support it there either)")
    ctx = multiprocessing.get_context("fork")

    def merged():
        conns, procs = [], []
        try:
            for k, r in enumerate(readers):
                recv, send = ctx.Pipe(duplex=False)
                p = ctx.Process(target=_child, args=(r, send), daemon=True,
                                name=f"placegroup-multiprocess-reader-{k}")
                p.start()
                send.close()  # only the child writes: its exit then reads as EOF here
                conns.append((k, recv))
                procs.append(p)
            live = list(conns)
            while live:
                ready = [c for _, c in live] if use_pipe else wait([c for _, c in live])
                for k, conn in [kc for kc in live if kc[1] in ready]:
                    try:
                        msg = conn.recv_bytes()
                    except EOFError:
                        raise RuntimeError(f"multiprocess_reader: reader {k}'s process ended "
                                           f"(exit code {procs[k].exitcode}) before its last "
                                           f"sample") from None
                    if msg[:1] == b"S":
                        yield _unpack(msg[1:])
                        continue
                    live.remove((k, conn))
                    if msg[:1] == b"X":
                        raise RuntimeError(f"multiprocess_reader: reader {k} failed in its "
                                           f"process:\n{msg[1:].decode(errors='replace')}")
        finally:
            for _, conn in conns:
                conn.close()
            for p in procs:
                if p.is_alive():
                    p.terminate()
                p.join()

    return merged
