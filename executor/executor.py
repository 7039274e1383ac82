"""The Executor: what a user calls to run a Program, in one process or as one executor of many.

``Executor(place).run(program, feed=..., fetch_list=...)`` feeds the named vars, runs one step
of the program and returns the fetched values as numpy arrays (Fluid's contract), or as
``LoDTensor``s with ``return_numpy=False``. Whether the
program runs alone or as one executor of a cluster, ``run`` is one path: the same interpreter
over a plan compiled once per program (executor/plan.py, executor/interpreter.py), through a
link that counts the steps. A distributed program (one ``t.get_program(endpoint, role)``
returned) has a link to the peers (executor/link.py) and the version policy of its mode
(executor/policy.py); one process has the null link (``LocalLink``) and ``Sync``.

NOTE(pserver-run): a plan that *serves* (a pserver's main program) serves the whole job at
its first ``run``: it runs its ops step after step until every trainer has said done. As
Fluid's classic training scripts run the trainers' loop on pservers too, later calls return at
once, and each fetch is the value this pserver holds, or None for a var held elsewhere.

NOTE(lod-feed): a var declared with ``lod_level >= 1`` holds a batch of sequences. It is fed a
``LoDTensor`` (``fluid.create_lod_tensor``, ``DataFeeder``) whose LoD has exactly that many
levels and fits its data; anything else (a plain array, a LoDTensor without LoD, another depth,
offsets that do not fit) is a ProgramError naming the feed, raised before any op runs (Fluid
1.8 takes some of these and fails later in a sequence op, or not at all). A LoDTensor fed to a
var declared ``lod_level=0`` (``fluid.data``'s default, which Fluid 1.8 says users need not
set) keeps its LoD, as in Fluid: the step runs with the plan for that depth (NOTE(lod-run) in
executor/plan.py). A fetched sequence var needs ``return_numpy=False`` (Fluid 1.8's
``as_numpy`` refuses to drop a LoD), which returns every fetched value as a ``LoDTensor``.

Thread-safety: one executor runs one program at a time; use one executor per thread.
"""
from __future__ import annotations

import atexit
import functools
import weakref
from typing import Any, Sequence

import numpy as np

from placegroup.model.compiler import prepare_run
from placegroup.errors import ConfigError, PlacementError, ProgramError
from placegroup.executor.dataset_loop import run_from_dataset
from placegroup.executor.feed import fed_array
from placegroup.executor.fetched import FetchedArray
from placegroup.executor.interpreter import Interpreter
from placegroup.executor.link import Link, LocalLink
from placegroup.executor.plan import Plan, compile_plan, fetch_edge
from placegroup.executor.policy import policy_for
from placegroup.executor.scope import Scope, global_scope, to_numpy
from placegroup.ir.cluster import Cluster
from placegroup.ir.evaluate import register_runner
from placegroup.ir.framework import default_main_program, transpiled_job
from placegroup.ir.place_group import ExecutorRole
from placegroup.ir.places import CPUPlace
from placegroup.ir.variable import DYNAMIC_TABLE
from placegroup.util.dynamic_table import DynamicTable
from placegroup.datafeed.reader_registry import reader_feed
from placegroup.values import LoDTensor, check_lod, is_selected_rows


# NOTE(step-hooks): persistence lies above the executor (placegroup.io reads and writes its
# Scope), so the executor never imports it. When imported, placegroup.io.checkpoint registers
# here the factory of an executor's step hook: ``factory(checkpoint) -> hook or None``, called at
# an executor's first run with the ``checkpoint=`` it was made with (the environment may add to
# it). A hook has ``resumed_step``, ``after_startup(exe, program, scope)``, ``due(steps_done)``
# and ``after_step(exe, program, scope, steps_done)``.
_STEP_HOOKS: list = []


def register_step_hooks(factory) -> None:
    """Make ``factory`` the maker of every executor's step hook (NOTE(step-hooks)); the last
    registered wins."""
    _STEP_HOOKS[:] = [factory]


def _evaluate(program, name: str):
    """Run ``program`` once as a startup program (step -1) on the host and return ``name``'s
    value: how the model-building API computes a value now (placegroup/ir/evaluate.py)."""
    vals: dict = {}
    Interpreter(xp=np).run_step(compile_plan(program, None, None, np), vals, -1)
    return vals[name]


register_runner(_evaluate)


def _fetch_name(f: Any) -> str:
    return f if isinstance(f, str) else f.name


def _refuse_training_alone(program) -> None:
    """NOTE(in-place-transpile) in placegroup/transpiler/distribute_transpiler.py: after this
    process was transpiled for a job with pservers, an unplaced program that would update
    parameters (optimizer ops, or any op but an initializer writing one) would train alone while
    the pservers wait. A forward-only program (a ``clone(for_test=True)``) runs locally.

    Raises:
        ConfigError: naming the op and the programs to run instead.
    """
    job = transpiled_job()
    if job is None:
        return
    params = {v.name for v in program.list_vars() if v.is_parameter}
    for block in program.blocks:
        for op in block.ops:
            if op.role == "init":
                continue
            written = [n for names in op.outputs.values() for n in names if n in params]
            if op.role == "optimize" or written:
                what = f"writes parameter {written[0]!r}" if written else "is an optimizer op"
                raise ConfigError(
                    f"this process belongs to a job with pservers {list(job.pservers)}, but the program "
                    f"it runs was not transpiled: op #{block.ops.index(op)} `{op.type}` (block {block.idx}) "
                    f"{what}, so it would train alone while the pservers wait. Run the program "
                    f"transpile() was given (by default fluid.default_main_program(), which it rewrote "
                    f"into this process's part) or t.get_trainer_program(); build the model in that "
                    f"program, or pass it as transpile(program=...)")


def _held_elsewhere(program, plan: Plan, member: _Member, names) -> dict:
    """NOTE(save-gather): the values of ``names`` that this trainer does not hold, asked of
    their holders at its last step by the fetch rule. A var is asked for itself where another
    executor holds it (a pserver's block or shard), or as its row blocks put back together
    where the trainer reads it only through them (a table it prefetches rows of:
    NOTE(block-prefetch) in transpiler/slice.py); a table keyed by raw ids is asked of every
    pserver, its shards' rows joined into one table. So ``save_persistables``,
    ``save_inference_model`` and a ``fetch_list`` on a trainer get what Fluid's trainer, which
    pulls such a table whole every step, would have held. Before the first step there is
    nothing to ask."""
    step = member.link.step - 1
    if step < 0 or member.link.closed:
        return {}
    block = program.global_block()
    blocks: dict[str, list] = {}
    tables: dict[str, list] = {}  # a table keyed by raw ids: its hash shards, each a table
    for v in block.vars.values():
        of = v.attrs.get("slice_of")
        if of and of[0] in names and v.type == DYNAMIC_TABLE and plan.remote_of(v.name):
            tables.setdefault(of[0], []).append(v)
        elif of and of[0] in names and of[3] == 1 and plan.remote_of(v.name):
            blocks.setdefault(of[0], []).append((of[2], v.name))
    direct = [n for n in names if n not in blocks and n not in tables and plan.remote_of(n)]
    asked = list(dict.fromkeys(direct + [p for parts in blocks.values() for _, p in parts] +
                               [v.name for shards in tables.values() for v in shards]))
    if not asked:
        return {}
    got = member.link.fetch([fetch_edge(plan, n) for n in asked], step, np,
                            member.interp.describe(None, step))
    # a table keyed by raw ids comes as the SelectedRows of its rows (DynamicTable.as_wire)
    out = {n: DynamicTable.from_wire([got[n]], block.var(n).attrs["table_config"])
           if block.var(n).type == DYNAMIC_TABLE else got[n] for n in direct}
    for whole, parts in blocks.items():
        out[whole] = np.concatenate([got[p] for _, p in sorted(parts)])
    for whole, shards in tables.items():  # the shards' rows, one table again
        out[whole] = DynamicTable.from_wire([got[v.name] for v in shards], shards[0].attrs["table_config"])
    return out


class _Member:
    """What an executor runs programs as: a link (which counts the steps), an interpreter over
    it with the version policy of its mode, and whether it has served. One process is the
    member with the null link (``alone``)."""

    def __init__(self, link, interp, me=None, cluster=None) -> None:
        self.link, self.interp, self.me, self.cluster = link, interp, me, cluster
        self.served = False
        self.key = None

    @classmethod
    def alone(cls, xp) -> "_Member":
        return cls(LocalLink(), Interpreter(xp=xp))

    @staticmethod
    def key_of(program, network) -> tuple:
        """Which member of which job, over which network, ``program`` is run as."""
        return program.cluster.digest, str(program.executor), id(network)

    @classmethod
    def shared(cls, program, xp, peer_timeout, network) -> "_Member":
        """The open member of the job that ``program`` is run as, made at its first run.

        NOTE(one-link-per-process): this process is one member of the job (``trainer:0``,
        say), and its peers know it by that name: Fluid's communicator is process-wide, and
        Fluid scripts run the startup program with one Executor and train with another (a
        second ``fluid.Executor``, a ``ParallelExecutor``). So every Executor that runs a
        program of the same job as the same member shares one member: one link, one step
        count, one interpreter; the first Executor's place and peer timeout hold. A second
        link under the same name would never be answered. Executors of other members (the
        loopback tests run a whole job in one process) each have their own."""
        key = cls.key_of(program, network)
        member = _open.get(key)
        if member is None:
            cluster = Cluster.from_program(program)
            me = cluster.find(program.executor)
            policy = policy_for(program.cluster, me.role)
            link = Link(program, me, cluster, peer_timeout, network, policy=policy)
            member = _open[key] = cls(link, Interpreter(me, policy, link, xp), me, cluster)
            member.key = key
            _Member.opened = True  # this process ran a distributed program (NOTE(exit-record))
        return member

    @property
    def closed(self) -> bool:
        return self.key is not None and _open.get(self.key) is not self

    def close(self) -> None:
        if self.key is not None and _open.get(self.key) is self:
            del _open[self.key]
        self.link.close(self.interp.settle)


class Executor:
    """Runs programs on one place.

    Args:
        place: ``CPUPlace()`` (default) or ``CUDAPlace(i)``.
        peer_timeout: seconds a distributed executor waits for a silent peer.
        checkpoint: a ``fluid.io.CheckpointConfig``: after the startup program, resume from
            the newest complete checkpoint; after every N training steps, save this process's
            part (docs/checkpoint.md). The ``PLACEGROUP_CHECKPOINT_*`` and ``PLACEGROUP_RESUME``
            environment variables override its fields, or stand for it.
        network: a ``placegroup.comm.loopback.LoopbackNetwork`` to reach the other executors
            of a distributed program in this process (each on its own thread); None: ZeroMQ
            over TCP, one process per executor.

    Example::

        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(fluid.default_startup_program())
        loss, = exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[avg_cost])
    """

    def __init__(self, place: Any = None, peer_timeout: float | None = None, checkpoint: Any = None,
                 network: Any = None) -> None:
        self.place = place if place is not None else CPUPlace()
        self.xp = self.place.array_module()
        self.peer_timeout = peer_timeout
        self.network = network
        self._plans: dict[int, tuple[Any, int, Plan]] = {}
        self._alone = _Member.alone(self.xp)      # what unplaced programs run as
        self._dist: _Member | None = None         # a distributed program's, made at its first run
        self._checkpoint = checkpoint
        self._ckpt: Any = False  # the Checkpointer (None: no schedule), made at the first run

    def _checkpointer(self):
        if self._ckpt is False:  # the environment is read at the first run, not at construction
            self._ckpt = _STEP_HOOKS[0](self._checkpoint) if _STEP_HOOKS else None
        return self._ckpt

    @property
    def profile(self):
        """The PLACEGROUP_PROFILE timings of this executor's interpreter (None: not profiling)."""
        return (self._dist or self._alone).interp.profile

    @property
    def resumed_step(self) -> int:
        """The global step this run resumed from (0 when it did not): the checkpoint holds the
        state after that many steps, so a trainer skips that many batches (docs/checkpoint.md)."""
        ck = self._checkpointer()
        return ck.resumed_step if ck is not None else 0

    def _plan(self, program, member: _Member | None = None, fed_lod: dict | None = None) -> Plan:
        """The plan of ``program`` (compiled once per version) for ``member`` (None: this
        process alone); ``fed_lod``: data vars fed a deeper LoD than declared get a plan of
        their own (NOTE(lod-feed))."""
        member = member if member is not None else self._alone
        key = id(program) if not fed_lod else (id(program), tuple(sorted(fed_lod.items())))
        hit = self._plans.get(key)
        if hit is not None and hit[0]() is program and hit[1] == program._version:
            return hit[2]
        if member.me is None:
            _refuse_training_alone(program)
        plan = compile_plan(program, member.me, member.cluster, self.xp, fed_lod)
        member.link.expect(plan)
        self._plans[key] = (weakref.ref(program), program._version, plan)
        return plan

    def _feed(self, plan: Plan, vals: dict, feed: dict) -> dict | None:
        """Put ``feed`` into ``vals``, checked (NOTE(lod-feed)); return the vars declared
        lod_level=0 that were fed a LoD, var -> its depth (None when there are none)."""
        xp = self.xp
        deeper = None
        for name, value in feed.items():
            meta = plan.feed_meta.get(name)
            if meta is None:
                raise ProgramError(f"feed {name!r} is not a var of the program; its data vars are "
                                   f"{sorted(n for n, m in plan.feed_meta.items() if m[0].is_data)}")
            var, dtype, shape = meta
            lod = None
            if type(value) is LoDTensor:
                if value.data is None:
                    raise ProgramError(f"feed {name!r} is a LoDTensor that holds no data: call "
                                       f"set(array, place) on it first")
                lod, value = value.offsets or None, value.data
                if var.lod_level and lod is None:
                    raise ProgramError(_not_sequences(name, var, "a LoDTensor with no LoD"))
            if var.lod_level and lod is None:
                raise ProgramError(_not_sequences(name, var, _describe(value)))
            arr = fed_array(name, var, dtype, shape, value)  # NOTE(feed-dtype) in executor/feed.py
            arr = xp.asarray(arr) if xp is not np else arr
            if lod is None:
                vals[name] = arr
                continue
            _check_fed_lod(name, var, lod, arr)
            if not var.lod_level:
                deeper = {**(deeper or {}), name: len(lod)}
            vals[name] = LoDTensor(arr, lod, check=False)
        return deeper

    def run(self, program=None, feed: dict | None = None, fetch_list: Sequence | None = None,
            scope: Scope | None = None, return_numpy: bool = True, **_compat: Any) -> list:
        """Run one step of ``program`` and return the fetched values.

        Args:
            program: the Program (default: ``default_main_program()``), or a
                ``fluid.CompiledProgram`` of one (placegroup/compiler.py).
            feed: var name -> array (or list) for the program's data vars; or a list of such
                dicts, one per place. Vars a started reader fills (``py_reader``, a
                non-iterable ``DataLoader``) take its next batch unless fed here.
            fetch_list: vars or names to return after the step; on a trainer, a var another
                executor holds too (its holder's value of this step).
            scope: where values live (default: ``global_scope()``).
            return_numpy: return numpy arrays (True) or the raw values.

        Returns:
            A list with one value per ``fetch_list`` entry.

        Raises:
            EOFException: a reader of the program is at the end of its data (``fluid.core``).
            ProgramError: on a feed that is not a var, or whose dtype or shape the var does
                not take (``feed 'x': ...``; the rules are Fluid 1.8's, NOTE(feed-dtype) in
                executor/feed.py).
            OpError: "While executing op #i `type`: ..." when a kernel fails.
            PeerLost, RemoteError, CommTimeout: a distributed run lost a peer, or a peer failed.
        """
        program, feed, scope, places = prepare_run(program if program is not None else default_main_program(),
                                                   feed, scope if scope is not None else global_scope(), self.place)
        member = self._member(program)
        plan = self._plan(program, member)
        link, interp = member.link, member.interp
        vals = scope.vars
        if member.me is None:
            if scope.settle is not None:  # parameters still on their way from the pservers
                scope.settle()
        else:
            scope.set_guard = _set_guard(plan, member.me)
            scope.get_hook = interp.settle_one
            scope.settle = interp.settle
            if plan.counted:
                scope.held_elsewhere = functools.partial(_held_elsewhere, program, plan, member)
        ck = self._checkpointer()
        # before the step, outside the try: the end of a trainer's data is no failure to tell its peers
        feed = reader_feed(program, feed, plan.remote_of)
        try:
            if feed:
                fed_lod = self._feed(plan, vals, feed)
                if fed_lod:
                    plan = self._plan(program, member, fed_lod)
            if plan.serves:  # NOTE(pserver-run)
                if not member.served:
                    interp.serve(plan, vals, None if ck is None else _saver(self, ck, link, program, scope))
                    member.served = True
                return [self._fetch(vals, f, return_numpy, plan) if _fetch_name(f) in vals else None
                        for f in fetch_list or ()]
            step = link.begin_step(program, plan)
            interp.run_step(plan, vals, step)
            link.end_step(step)
            if ck is not None and plan.startup:
                ck.after_startup(self, program, scope)
            elif ck is not None and plan.counted and ck.due(step + 1):  # after the update (it settles)
                ck.after_step(self, program, scope, step + 1)
            names = [_fetch_name(f) for f in fetch_list or ()]
            names = [m for n in names for m in places.names(n)] if places else names  # NOTE(data-parallel)
            interp.settle([n for n in names if n in interp.pending])
            remote = [fetch_edge(plan, n) for n in dict.fromkeys(names) if n not in vals and plan.remote_of(n)]
            got = link.fetch(remote, step, self.xp, interp.describe(None, step)) if remote else {}  # the fetch rule
            unheld = [n for n in dict.fromkeys(names) if n not in vals and n not in got]
            if unheld and plan.counted:  # a table this trainer only prefetches rows of
                got.update(_held_elsewhere(program, plan, member, unheld))
        except BaseException as e:
            link.fail(e)
            raise
        out = [_fetched(n, got[n], return_numpy, False) if n in got else self._fetch(vals, n, return_numpy, plan)
               for n in names]
        return places.join(out) if places else out

    def _member(self, program) -> _Member:
        """What ``program`` runs as: this process alone, or its member of a distributed job."""
        if program.executor is None or program.cluster is None:
            return self._alone
        dist = self._dist
        if dist is None or dist.closed:
            dist = self._dist = _Member.shared(program, self.xp, self.peer_timeout, self.network)
        elif dist.cluster.find(program.executor) != dist.me:
            raise ProgramError(f"this executor is {dist.me}; the program was made for {program.executor}: "
                               f"use one Executor per role")
        return dist

    def train_from_dataset(self, program=None, dataset=None, scope=None, thread=0, debug=False,
                           fetch_list=None, fetch_info=None, print_period=100, fetch_handler=None):
        """Run ``program`` once per batch of ``dataset`` (a ``fluid.DatasetFactory`` dataset),
        printing ``<fetch_info>: <value>`` of ``fetch_list`` every ``print_period`` batches; as
        Fluid 1.8 (executor/dataset_loop.py, docs/datasets.md). ``thread`` is accepted (one
        reader). Returns None."""
        run_from_dataset(self, program, dataset, scope, False, debug, fetch_list, fetch_info,
                         print_period, fetch_handler)

    def infer_from_dataset(self, program=None, dataset=None, scope=None, thread=0, debug=False,
                           fetch_list=None, fetch_info=None, print_period=100, fetch_handler=None):
        """As ``train_from_dataset`` for a program without optimizer ops; one with them is
        refused (NOTE(infer-from-dataset) in executor/dataset_loop.py). Returns None."""
        run_from_dataset(self, program, dataset, scope, True, debug, fetch_list, fetch_info,
                         print_period, fetch_handler)

    @staticmethod
    def _fetch(vals: dict, f: Any, return_numpy: bool, plan: Plan):
        name = _fetch_name(f)
        if name not in vals:
            holders = plan.holders.get(name)
            where = f" (held by {', '.join(map(str, holders))})" if holders else ""
            raise ProgramError(f"fetch {name!r} has no value after the step{where}; is it a var of "
                               f"this program?")
        value = vals[name]
        if return_numpy and type(value) is np.ndarray:  # the common case, first
            # an op may update a persistable var in place later (NOTE(sparse-copy)): hand out a copy;
            # float(loss) of a shape-[1] fetch works on any numpy (NOTE(fetched-scalars))
            return (value.copy() if name in plan.persistable else value).view(FetchedArray)
        return _fetched(name, value, return_numpy, name in plan.persistable)

    @property
    def staleness(self) -> int:
        """How many versions behind the newest the parameters this trainer's last step read
        were (0 in sync mode; at most k with ``staleness=k``)."""
        return self._dist.interp.policy.current_staleness if self._dist is not None else 0

    @property
    def staleness_seen(self) -> dict:
        """lag -> how many loop-carried reads of this executor had it (bounded staleness), or,
        on an async pserver, how many updates had it."""
        return dict(self._dist.interp.policy.staleness_seen) if self._dist is not None else {}

    @property
    def link(self) -> Link | None:
        """A distributed executor's link to its peers (its transport's byte counters, say)."""
        return self._dist.link if self._dist is not None else None

    def close(self) -> None:
        """Release what the executor holds. A distributed trainer takes the parameters still
        on their way, tells the pservers it is done (they stop serving when every trainer
        has), and closes its sockets."""
        self._plans.clear()
        if self._ckpt:  # its saves sealing in the background are complete when it returns
            self._ckpt.wait()
        if self._alone.interp.profile is not None:  # PLACEGROUP_PROFILE
            self._alone.interp.profile.report()
        if self._dist is not None:
            if not self._dist.closed:  # another Executor of this member may have closed it
                self._dist.close()
                if self._dist.interp.profile is not None:
                    self._dist.interp.profile.report()
            self._dist = None


def _fetched(name: str, value, return_numpy: bool, persistable: bool):
    """A fetched value as ``exe.run`` returns it: a numpy array (``return_numpy``; a
    FetchedArray, NOTE(fetched-scalars) in executor/fetched.py), else a LoDTensor (a
    SelectedRows stays one). NOTE(lod-feed): a value with a LoD is no array."""
    if is_selected_rows(value):
        return value.to_host() if return_numpy else value
    lod = value.offsets if type(value) is LoDTensor else ()
    if lod and return_numpy:
        raise ProgramError(f"fetch {name!r} holds LoD information (sequence lengths "
                           f"{value.recursive_sequence_lengths()}), which a numpy array cannot carry: "
                           f"run with return_numpy=False to get LoDTensors (np.array(t) gives the data, "
                           f"t.recursive_sequence_lengths() the lengths)")
    data = value.data if lod or type(value) is LoDTensor else value
    arr = to_numpy(data)
    # an op may update a persistable var in place later (NOTE(sparse-copy)): hand out a copy
    arr = arr.copy() if arr is data and persistable else arr
    return arr.view(FetchedArray) if return_numpy else LoDTensor(arr, lod, check=False)


def _not_sequences(name: str, var, got: str) -> str:
    """The error for a sequence var fed no LoD (NOTE(lod-feed))."""
    return (f"feed {name!r} is declared lod_level={var.lod_level} (a batch of sequences), but it was fed {got}: "
            f"build it with fluid.create_lod_tensor(data, recursive_seq_lens, place) or feed the samples "
            f"through fluid.DataFeeder, which makes the LoD from lists of lists")


def _describe(value) -> str:
    if hasattr(value, "shape"):
        return f"a {type(value).__name__} of shape {list(value.shape)}"
    return f"a {type(value).__name__}" + (f" of {len(value)} items" if hasattr(value, "__len__") else "")


def _check_fed_lod(name: str, var, lod: tuple, arr) -> None:
    """The fed LoD has the var's depth and fits the data (NOTE(lod-feed))."""
    lengths = [np.diff(o).tolist() for o in lod]
    if var.lod_level and len(lod) != var.lod_level:
        raise ProgramError(f"feed {name!r} has a LoD of {len(lod)} level{'s' if len(lod) > 1 else ''} "
                           f"(sequence lengths {lengths}), but the var is declared lod_level={var.lod_level}")
    why = check_lod(lod, int(arr.shape[0]) if arr.ndim else 1)
    if why is not None:
        raise ProgramError(f"feed {name!r}: its LoD (sequence lengths {lengths}) does not fit its data "
                           f"of shape {list(arr.shape)}: {why}")


def _saver(exe, ck, link: Link, program, scope):
    """The checkpoint hook after each step of a serving pserver: when a save is due, what the
    step posted leaves first, so the peers go on while this one writes."""
    def after_step(steps_done: int) -> None:
        if ck.due(steps_done):
            link.mailbox.flush()
            ck.after_step(exe, program, scope, steps_done)
    return after_step


def _set_guard(plan: Plan, me):
    """``Tensor.set`` on a var this executor does not hold raises PlacementError."""
    def guard(name: str) -> None:
        holders = plan.holders.get(name)
        if holders is not None and me not in holders:
            raise PlacementError(f"{name!r} is held by {', '.join(map(str, holders))}, not by {me}: "
                                 f"set it there")
    return guard


# NOTE(exit-done): the distributed executors not closed yet, held strongly: a trainer that
# exits without ``exe.close()`` (its Executor long collected) must still take its last
# parameters, send what it posted and say done, or its pservers would wait for it.
# the open distributed members of this process, by _Member.key_of (NOTE(one-link-per-process))
_open: "dict[tuple, _Member]" = {}


def ran_distributed() -> bool:
    """Whether this process ever opened a link to its peers (NOTE(exit-record) in
    placegroup/tools/progress.py, which asks at exit)."""
    return getattr(_Member, "opened", False)


@atexit.register
def close_distributed() -> None:
    """Close every distributed executor of this process not closed yet: each takes its last
    parameters, sends what it posted and says done (Fluid's process-wide ``Executor.close``,
    which fleet's ``stop_worker`` calls; also run at exit, NOTE(exit-done))."""
    for dist in list(_open.values()):
        dist.close()
