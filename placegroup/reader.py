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
raises ``ComposeNotAligned`` on readers of different lengths, and so on. Two small departures,
both additions: ``shuffle`` takes an optional ``seed``, and ``buffered`` re-raises in the
consumer an exception raised by the wrapped reader (Paddle's thread died silently and the
consumer hung).

Thread-safety: a decorated reader holds no state between calls except ``shuffle``'s seeded
generator, so call a seeded ``shuffle`` reader from one thread at a time.
"""
from __future__ import annotations

import itertools
import queue
import random
import threading
from typing import Any, Callable, Iterator

__all__ = ["ComposeNotAligned", "batch", "buffered", "cache", "chain", "compose", "firstn",
           "map_readers", "shuffle"]

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
