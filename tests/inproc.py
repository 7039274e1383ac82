"""A whole cluster in one process: every executor on its own thread, talking over the loopback
transport (``placegroup.comm.loopback``), each with its own Executor and Scope.

The version rules, modes, staleness, merge_steps and fetches are the executor's, not the
transport's, so tests of them run here, fast; real processes and sockets stay for what only
they prove (heartbeats, kills, CURVE, the launcher).

Example::

    run = run_cluster(build_linear, trainers=2, pservers=2, batches=batches)
    run.losses[0], run.params[1]["fc_0.w_0"]
"""
from __future__ import annotations

import dataclasses
import threading
import time
from typing import Callable

import numpy as np

import placegroup as fluid
from placegroup.comm.loopback import LoopbackNetwork
from placegroup.ir.framework import note_transpiled_job
from placegroup.values import LoDTensor
from tests.conftest import TIME_FACTOR


@dataclasses.dataclass
class Run:
    losses: dict          # trainer id -> [loss per step]
    params: dict          # trainer id -> {parameter: value after the run}
    fetched: dict         # trainer id -> [[extra fetched values] per step]
    staleness_seen: dict  # trainer id -> {lag: count}
    pserver_staleness: dict  # pserver index -> {lag: count}
    pserver_params: dict = dataclasses.field(default_factory=dict)  # pserver index -> {what it holds}


def _held(prog, scope) -> dict:
    """The parameters of ``prog`` that ``scope`` holds, as numpy arrays."""
    return {p.name: np.array(scope.find_var(p.name).get_tensor())
            for p in prog.all_parameters() if scope.find_var(p.name) is not None}


def build_programs(build: Callable) -> tuple:
    """``build()`` in fresh programs and names; returns (main, startup, feeds, cost)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        startup.random_seed = 7
        feeds, cost = build()
    return main, startup, feeds, cost


def share(value, k: int, n: int):
    """Trainer ``k``'s contiguous 1/``n`` of a batch's examples: rows of an array, top-level
    sequences of a LoD tensor."""
    if isinstance(value, LoDTensor):
        count = len(value.offsets[0]) - 1
        return value.sequences(k * count // n, (k + 1) * count // n)
    return value[k * len(value) // n:(k + 1) * len(value) // n]


def feed_of(feeds: list, batch) -> dict:
    """A batch as a feed: a dict (feed name -> value) as it is, else one value per feed var."""
    return batch if isinstance(batch, dict) else dict(zip([f.name for f in feeds], batch))


def over_places(prog, cost, places: int):
    """``prog`` compiled data parallel over ``places`` CPU places (``prog`` itself for one)."""
    if places == 1:
        return prog
    return fluid.CompiledProgram(prog).with_data_parallel(loss_name=cost.name, places=fluid.cpu_places(places))


def run_local(build: Callable, batches: list, fetch: tuple = (), return_numpy: bool = True, places: int = 1) -> Run:
    """One process on the whole batches: the reference (``places``: data parallel over so many)."""
    main, startup, feeds, cost = build_programs(build)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses, fetched = [], []
    run_prog = over_places(main, cost, places)
    for batch in batches:
        loss, *extra = exe.run(run_prog, feed=feed_of(feeds, batch), fetch_list=[cost, *fetch], scope=scope,
                               return_numpy=return_numpy)
        losses.append(float(np.asarray(loss).ravel()[0]))
        fetched.append(extra)
    params = {p.name: np.array(scope.find_var(p.name).get_tensor()) for p in main.all_parameters()}
    return Run({0: losses}, {0: params}, {0: fetched}, {}, {})


def run_cluster(build: Callable, trainers: int, pservers: int, batches: list, *, fetch: tuple = (),
                steps: dict | None = None, slow: dict | None = None, endpoints: bool = False,
                timeout: float = 60.0, config=None, return_numpy: bool = True, places: int = 1,
                after: Callable | None = None, **transpile) -> Run:
    """``trainers`` + ``pservers`` executors on threads over one LoopbackNetwork; trainer t is fed
    the t-th contiguous 1/N of every batch (``share``; a batch is a tuple with one value per feed
    var, or a dict of them by name). ``steps``: trainer id -> how many batches it takes
    (default all); ``slow``: trainer id -> seconds it sleeps after each step; ``endpoints``:
    name the trainers by endpoint (collectives need it; so does having no pservers); ``config``:
    a ``DistributeTranspilerConfig``; ``return_numpy=False``: fetch LoD tensors as they are;
    ``places``: each trainer runs data parallel over so many CPU places; ``after(k, exe, prog,
    scope, main)``: called on trainer k after its last step, before it closes (``main``: the
    untranspiled program); the rest are ``transpile``'s keywords."""
    main, startup, feeds, cost = build_programs(build)
    ps = [f"127.0.0.1:{7100 + i}" for i in range(pservers)]
    tr = [f"127.0.0.1:{7200 + i}" for i in range(trainers)]
    net = LoopbackNetwork()
    jobs, errors = [], []
    run = Run({}, {}, {}, {}, {})

    def program_of(role: str, index: int):
        # each executor stands for a process of its own, which transpiles the model once; transpile
        # rewrites what it is given into that process's part, so each gets a copy, and this test
        # process, which plays every part, is no member of the job (note_transpiled_job)
        t = fluid.DistributeTranspiler(config)
        t.transpile(trainer_id=index if role == "trainer" else 0, program=main.clone(),
                    startup_program=startup.clone(), pservers=",".join(ps),
                    trainers=",".join(tr) if endpoints or not pservers else trainers, **transpile)
        note_transpiled_job(None)
        ep = ps[index] if role == "pserver" else (tr[index] if endpoints or not pservers else None)
        return t.get_program(ep, role), t.get_startup_program(ep, role)

    def pserver(i: int, prog, sprog) -> None:
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        exe.run(prog, scope=scope)
        run.pserver_staleness[i] = exe.staleness_seen
        run.pserver_params[i] = _held(prog, scope)
        exe.close()

    def trainer(k: int, prog, sprog) -> None:
        exe, scope = fluid.Executor(network=net), fluid.Scope()
        exe.run(sprog, scope=scope)
        losses, fetched = [], []
        run_prog = over_places(prog, cost, places)
        for batch in batches[:(steps or {}).get(k, len(batches))]:
            part = {name: share(v, k, trainers) for name, v in feed_of(feeds, batch).items()}
            loss, *extra = exe.run(run_prog, feed=part, fetch_list=[cost, *fetch], scope=scope,
                                   return_numpy=return_numpy)
            losses.append(float(np.asarray(loss).ravel()[0]))
            fetched.append(extra)
            if (slow or {}).get(k):
                time.sleep(slow[k])
        run.losses[k], run.fetched[k] = losses, fetched
        run.params[k] = _held(prog, scope)
        run.staleness_seen[k] = exe.staleness_seen
        if after is not None:
            after(k, exe, prog, scope, main)
        exe.close()

    def guarded(fn, *args) -> None:
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    for i in range(pservers):
        jobs.append(threading.Thread(target=guarded, args=(pserver, i, *program_of("pserver", i)), daemon=True))
    for k in range(trainers):
        jobs.append(threading.Thread(target=guarded, args=(trainer, k, *program_of("trainer", k)), daemon=True))
    for j in jobs:
        j.start()
    for j in jobs:
        j.join(timeout * TIME_FACTOR)
    if errors:
        raise errors[0]
    if any(j.is_alive() for j in jobs):
        raise TimeoutError(f"the in-process cluster did not finish in {timeout * TIME_FACTOR:g}s")
    return run
