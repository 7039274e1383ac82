"""Where a map-style ``fluid.io.DataLoader``'s batches come from (Fluid 1.8's
``fluid.dataloader.dataloader_iter``): ``default_collate_fn``, the ``ParentWatchDog`` of its
worker processes, and the two batch sources ``DataLoader`` (placegroup/datafeed/data_loader.py)
puts behind its queue:

* ``single_process_batches``: in this process, ``collate_fn([dataset[i] for i in indices])``
  for each index list of the batch sampler;
* ``multi_process_batches``: the same in ``num_workers`` forked processes, index lists dealt
  round robin, batches handed back in the sampler's order (NOTE(loader-workers)).

NOTE(loader-workers): as Fluid's, each worker is a child process that calls
``worker_init_fn(worker_id)`` once, then turns index lists into collated batches until it is
told to stop or its parent dies (``ParentWatchDog``). Fluid sends batches through
multiprocessing queues, that is as pickles (or shared memory); here a worker's batches cross
its pipe as msgpack (NOTE(reader-codec) in placegroup/util/sample_codec.py), so a collated batch
must be numbers, strings, lists, tuples, dicts or numeric numpy arrays. An error in a worker
(its dataset's, its collate_fn's, its worker_init_fn's) is raised in the parent as a
RuntimeError carrying the worker's traceback; a worker that dies raises RuntimeError naming its
pid. At most ``2 * num_workers`` index lists are out at a time. ``use_shared_memory`` changes
nothing. Workers need the ``fork`` start method (Linux; Fluid falls back to one process on
macOS and Windows, and so does this, with a warning).

Thread-safety: a source is iterated by the loader's one reading thread.
"""
from __future__ import annotations

import itertools
import logging
import multiprocessing
import os
import traceback
from multiprocessing.connection import wait

import numpy as np

from placegroup.util.sample_codec import pack, unpack

__all__ = ["ParentWatchDog", "default_collate_fn", "multi_process_batches", "single_process_batches"]

# how often (seconds) a worker checks its parent and the parent checks its workers while waiting
MP_INDICES_CHECK_INTERVAL = 5


def default_collate_fn(batch: list) -> list:
    """Fluid 1.8's ``fluid.io.default_collate_fn``: stack each field of a batch of samples.

    ``[[f1, f2], [f1, f2], ...]`` becomes ``[stack of f1, stack of f2]``; a batch of bare arrays
    becomes ``[stack]``.

    Example::

        default_collate_fn([(np.zeros(2), 1), (np.ones(2), 2)])
        # [array([[0., 0.], [1., 1.]]), array([1, 2])]
    """
    if isinstance(batch[0], np.ndarray):
        return [np.stack(batch, axis=0)]
    slots: list[list] = []
    for items in batch:
        for i, item in enumerate(items):
            if len(slots) < len(items):
                slots.append([item])
            else:
                slots[i].append(item)
    return [np.stack(slot, axis=0) for slot in slots]


class ParentWatchDog:
    """In a child process: whether the process that started it is still alive (its parent
    pid has not changed; an orphan is adopted by another process).

    Example::

        dog = ParentWatchDog()
        while dog.is_alive():
            ...  # serve the parent
    """

    def __init__(self) -> None:
        self._parent_pid = os.getppid()
        self._parent_alive = True

    def is_alive(self) -> bool:
        """False from the first check after the parent died, for good."""
        if self._parent_alive:
            self._parent_alive = os.getppid() == self._parent_pid
        return self._parent_alive


def single_process_batches(dataset, batch_sampler, collate_fn):
    """The collated batches of ``dataset`` over ``batch_sampler``'s index lists, here."""
    collate = collate_fn or default_collate_fn
    for indices in batch_sampler:
        yield collate([dataset[i] for i in indices])


def _worker_loop(dataset, conn, collate_fn, init_fn, worker_id: int) -> None:
    """A worker process (NOTE(loader-workers)): ``[idx, indices]`` in, ``S[idx, batch]`` or
    ``X[idx, traceback]`` out; an empty message or the parent's death ends it."""
    init_error = None
    if init_fn is not None:
        try:
            init_fn(worker_id)
        except BaseException:  # noqa: BLE001 - carried to the parent with the first batch
            init_error = f"init_fn failed in worker {worker_id}:\n{traceback.format_exc()}"
    collate = collate_fn or default_collate_fn
    dog = ParentWatchDog()
    try:
        while dog.is_alive():
            if not conn.poll(MP_INDICES_CHECK_INTERVAL):
                continue
            msg = conn.recv_bytes()
            if not msg:
                return
            idx, indices = unpack(msg)
            try:
                if init_error is not None:
                    raise RuntimeError(init_error)
                conn.send_bytes(b"S" + pack([idx, collate([dataset[i] for i in indices])]))
            except BaseException:  # noqa: BLE001 - carried to the parent as text
                init_error = None
                conn.send_bytes(b"X" + pack([idx, traceback.format_exc()]))
    except (EOFError, OSError, KeyboardInterrupt):  # the parent closed the pipe or was interrupted
        return


def multi_process_batches(dataset, batch_sampler, collate_fn, num_workers: int, worker_init_fn=None):
    """The batches of ``single_process_batches``, made by ``num_workers`` forked processes
    (NOTE(loader-workers)); the workers end when the iteration ends or is dropped.

    Raises:
        RuntimeError: a worker failed (its traceback) or died.
    """
    if "fork" not in multiprocessing.get_all_start_methods():
        logging.warning("multi-process mode not support MacOs and Windows currently. use signle-process with "
                        "num_workers = 0 instead")
        yield from single_process_batches(dataset, batch_sampler, collate_fn)
        return
    ctx = multiprocessing.get_context("fork")
    conns, procs = [], []
    try:
        for i in range(num_workers):
            mine, theirs = ctx.Pipe()
            p = ctx.Process(target=_worker_loop, args=(dataset, theirs, collate_fn, worker_init_fn, i), daemon=True,
                            name=f"placegroup-dataloader-worker-{i}")
            p.start()
            theirs.close()  # only the child holds its end: its exit reads as EOF here
            conns.append(mine)
            procs.append(p)
        sampler, turn = iter(batch_sampler), itertools.cycle(range(num_workers))
        sent = received = 0
        ready: dict = {}

        def send_next() -> None:
            nonlocal sent
            indices = next(sampler, None)
            if indices is not None:
                conns[next(turn)].send_bytes(pack([sent, list(indices)]))
                sent += 1

        for _ in range(2 * num_workers):
            send_next()
        while received < sent:
            while received not in ready:
                _receive(conns, procs, ready)
            yield ready.pop(received)
            received += 1
            send_next()
    finally:
        for conn in conns:
            try:
                conn.send_bytes(b"")
            except OSError:
                pass
            conn.close()
        for p in procs:
            p.join(timeout=MP_INDICES_CHECK_INTERVAL)
            if p.is_alive():
                p.terminate()
                p.join()


def _receive(conns: list, procs: list, ready: dict) -> None:
    """Wait for some workers' batches and file them under their index in ``ready``."""
    got = wait(conns, timeout=MP_INDICES_CHECK_INTERVAL)
    if not got:
        dead = [p for p in procs if not p.is_alive()]
        if dead:
            raise RuntimeError(f"DataLoader {len(dead)} workers exit unexpectedly, pids: "
                               f"{', '.join(str(p.pid) for p in dead)}")
        return
    for conn in got:
        k = conns.index(conn)
        try:
            msg = conn.recv_bytes()
        except EOFError:
            raise RuntimeError(f"DataLoader worker {k} (pid {procs[k].pid}) exited unexpectedly (exit code "
                               f"{procs[k].exitcode})") from None
        idx, value = unpack(msg[1:])
        if msg[:1] == b"X":
            raise RuntimeError(f"DataLoader worker {k} failed on batch {idx}:\n{value}")
        ready[idx] = value
