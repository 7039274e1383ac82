"""``fluid.CompiledProgram``, ``fluid.BuildStrategy``, ``fluid.ExecutionStrategy`` and the place
lists (``fluid.cpu_places``, ``cuda_places``, ``cuda_pinned_places``), as in Fluid 1.8.

In Fluid, compiling a program turns it into a graph that fuses ops, reuses memory and, with
``with_data_parallel``, runs on several devices. Here the program itself is what runs:
``exe.run(compiled, ...)`` runs ``compiled``'s program, and the strategies only say what a
script asked for. Each field is one of three kinds (the tables below):

* honoured: the same numbers as Fluid (``reduce_strategy``: whether the places keep their own
  copy of the state forward ops update; ``gradient_scale_strategy`` ``CoeffNumDevice`` or
  ``One``);
* inert: it tunes Fluid's engine (fusion, memory reuse, threads, ...) and changes no number;
  set to anything but its default it is named once per process in a ``StrategyNotice``
  warning, never silently ignored;
* refused when the program runs: a value whose meaning placegroup does not have
  (``num_trainers > 1``, a ``Customized`` gradient scale, ``num_iteration_per_run > 1``)
  raises ``NotImplementedError`` saying what to do instead.

A field Fluid does not have is an AttributeError naming it, a value of the wrong type a
TypeError, as Fluid's pybind objects do.

Data parallelism: ``with_data_parallel`` over N places runs each step as Fluid does, one batch
per place with its own LoD, the places' gradients reduced into one update
(NOTE(data-parallel) in placegroup/model/data_parallel.py says how, and what a fetch gives).

Thread-safety: strategies and compiled programs are built in one thread; a compiled program is
then only read, except for the scope it remembers for ``share_vars_from``.
"""
from __future__ import annotations

import enum
from typing import Any

from placegroup import config
from placegroup.errors import ProgramError
from placegroup.util.fields import Field as _Field
from placegroup.util.fields import Fields as _Strategy
from placegroup.util.fields import StrategyNotice
from placegroup.ir.framework import Program
from placegroup.ir.place_group import ExecutorRole
from placegroup.ir.places import CPUPlace, CUDAPinnedPlace, CUDAPlace
from placegroup.datafeed.reader_registry import reader_batches
from placegroup.model.data_parallel import Expanded, expand, split_feed

__all__ = ["BuildStrategy", "CompiledProgram", "ExecutionStrategy", "StrategyNotice", "cpu_places",
           "cuda_pinned_places", "cuda_places"]


# -- places ------------------------------------------------------------------------------------

def _setting(name: str, default: Any) -> Any:
    # CPU_NUM and FLAGS_selected_gpus are Fluid's environment variables, read through placegroup.config
    return config.get(name)


def cpu_places(device_count: int | None = None) -> list:
    """``device_count`` CPU places (default: ``CPU_NUM``, 1 when unset, as Fluid 1.8)."""
    n = int(_setting("CPU_NUM", 1) if device_count is None else device_count)
    return [CPUPlace() for _ in range(n)]


def cuda_pinned_places(device_count: int | None = None) -> list:
    """``device_count`` pinned-host places (default: ``CPU_NUM``, 1 when unset)."""
    n = int(_setting("CPU_NUM", 1) if device_count is None else device_count)
    return [CUDAPinnedPlace() for _ in range(n)]


def cuda_places(device_ids=None) -> list:
    """A CUDA place per device id (default: ``FLAGS_selected_gpus``, else every visible device).

    Raises:
        RuntimeError: no CUDA device (or no cupy) here.
    """
    if device_ids is None:
        chosen = str(_setting("FLAGS_selected_gpus", "") or "")
        if chosen:
            device_ids = [int(s) for s in chosen.split(",") if s.strip()]
        else:
            try:
                import cupy

                device_ids = range(cupy.cuda.runtime.getDeviceCount())
            except Exception:  # noqa: BLE001 - no cupy or no driver: no device
                device_ids = []
    elif not isinstance(device_ids, (list, tuple)):
        device_ids = [device_ids]
    if not device_ids:
        raise RuntimeError("cuda_places: placegroup sees no CUDA device (it needs cupy and a GPU: "
                           "pip install 'placegroup[gpu]')")
    return [CUDAPlace(i) for i in device_ids]


# -- strategies ----------------------------------------------------------------------------------
# Each is a table of fields; placegroup/util/fields.py checks every assignment against it (types,
# the once-per-process notices, AttributeError for a name that is no field, as pybind gives).

_FUSE = "placegroup runs the program's ops as they are, unfused"


class BuildStrategy(_Strategy):
    """``fluid.BuildStrategy``: how Fluid builds the graph of a CompiledProgram; the fields
    and enums of Fluid 1.8 (module docstring for what each does here).

    Example::

        build_strategy = fluid.BuildStrategy()
        build_strategy.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
        build_strategy.enable_inplace = True   # a StrategyNotice: changes nothing here
        build_strategy.fuse_all_reduce = True  # AttributeError: ... did you mean 'fuse_all_reduce_ops'?
    """

    class ReduceStrategy(enum.Enum):
        AllReduce = 0
        Reduce = 1

    class GradientScaleStrategy(enum.Enum):
        CoeffNumDevice = 0
        One = 1
        Customized = 2

    _FIELDS = {
        "reduce_strategy": _Field(ReduceStrategy, ReduceStrategy.AllReduce),
        "gradient_scale_strategy": _Field(GradientScaleStrategy, GradientScaleStrategy.CoeffNumDevice),
        "num_trainers": _Field(int, 1),
        "trainer_id": _Field(int, 0),
        "trainers_endpoints": _Field("strs", [], "it is read only with num_trainers > 1 (NCCL2 training)"),
        "nccl_comm_num": _Field(int, 1, "there is no NCCL here"),
        "use_hierarchical_allreduce": _Field(bool, False, "there is no NCCL here"),
        "hierarchical_allreduce_inter_nranks": _Field(int, 0, "there is no NCCL here"),
        "sync_batch_norm": _Field(bool, False, "each place's batch_norm takes its own batch's statistics, as "
                                               "on Fluid's CPU places, where sync_batch_norm does not apply"),
        "fuse_elewise_add_act_ops": _Field(bool, False, _FUSE),
        "fuse_bn_act_ops": _Field(bool, False, _FUSE),
        "fuse_relu_depthwise_conv": _Field(bool, False, _FUSE),
        "fuse_broadcast_ops": _Field(bool, False, _FUSE),
        "fuse_all_optimizer_ops": _Field(bool, False, _FUSE),
        "fuse_all_reduce_ops": _Field(bool, False, _FUSE),
        "enable_auto_fusion": _Field(bool, False, _FUSE),
        "memory_optimize": _Field("bools", None, "memory is not reused across vars here"),
        "enable_inplace": _Field(bool, True, "kernels choose for themselves when to write in place"),
        "enable_sequential_execution": _Field(bool, False, "ops always run one at a time, in program order"),
        "remove_unnecessary_lock": _Field(bool, True, "ops always run one at a time, in program order"),
        "enable_backward_optimizer_op_deps": _Field(bool, True, "ops always run one at a time, in program order"),
        "cache_runtime_context": _Field(bool, False, "the executor compiles each program once anyway"),
        "mkldnn_enabled_op_types": _Field("set", frozenset(), "there is no MKL-DNN here"),
        "debug_graphviz_path": _Field(str, "", "there is no graph to draw; print(program) or `placegroup dump` "
                                               "shows the program"),
        "is_distribution": _Field(bool, False, "a transpiled program says itself where it runs"),
        "async_mode": _Field(bool, False, "a transpiled program says itself how it trains"),
    }


class ExecutionStrategy(_Strategy):
    """``fluid.ExecutionStrategy``: how Fluid's engine runs the graph; the fields of Fluid 1.8.
    Only ``num_iteration_per_run`` has a meaning here (1, or it is refused)."""

    _FIELDS = {
        "num_threads": _Field(int, 0, "ops run one at a time, on the caller's thread"),
        "use_cuda": _Field(bool, False, "the executor's place says where ops run"),
        "allow_op_delay": _Field(bool, False, "ops run one at a time, in program order"),
        "num_iteration_per_drop_scope": _Field(int, 100, "a step's temporaries are dropped as it ends"),
        "num_iteration_per_run": _Field(int, 1),
        "use_thread_barrier": _Field(bool, False, "ops run one at a time, on the caller's thread"),
        "use_experimental_executor": _Field(bool, False, "placegroup has one executor"),
    }


# -- CompiledProgram ------------------------------------------------------------------------------

def _check_type(value: Any, cls: type, what: str) -> None:
    if value is not None and not isinstance(value, cls):
        raise TypeError(f"{what} must be a fluid.{cls.__name__}, got {value!r}")


def _place_list(places: Any) -> list:
    return list(places) if isinstance(places, (list, tuple)) else [places]


class CompiledProgram:
    """A program with the strategies a Fluid script compiled it with: ``exe.run(compiled)``
    runs the program (module docstring; NOTE(data-parallel) for ``with_data_parallel``).

    Args:
        program_or_graph: the Program (placegroup has no IrGraph).
        build_strategy: a ``BuildStrategy`` (default: Fluid's defaults).

    Raises:
        TypeError: not a Program, or not a BuildStrategy.

    Example::

        compiled = fluid.CompiledProgram(main).with_data_parallel(loss_name=avg_cost.name)
        loss, = exe.run(compiled, feed={"x": xs, "y": ys}, fetch_list=[avg_cost])
    """

    def __init__(self, program_or_graph: Program, build_strategy: BuildStrategy | None = None) -> None:
        if not isinstance(program_or_graph, Program):
            raise TypeError(f"CompiledProgram: expected a Program (placegroup has no IrGraph), got "
                            f"{type(program_or_graph).__name__}")
        _check_type(build_strategy, BuildStrategy, "CompiledProgram: build_strategy")
        self._program = program_or_graph
        self._build_strategy = build_strategy
        self._exec_strategy: ExecutionStrategy | None = None
        self._is_data_parallel = False
        self._loss_name: str | None = None
        self._share_vars_from: CompiledProgram | None = None
        self._places: list | None = None
        self._scope = None  # the scope of the last run, for those that share_vars_from this one
        self._expansion: tuple | None = None  # ((program version, places), Expanded) of the last run

    @property
    def program(self) -> Program:
        return self._program

    def with_data_parallel(self, loss_name: str | None = None, build_strategy: BuildStrategy | None = None,
                           exec_strategy: ExecutionStrategy | None = None,
                           share_vars_from: "CompiledProgram | None" = None, places=None) -> "CompiledProgram":
        """Run data parallel over ``places`` (default: ``CPU_NUM`` CPU places, or every CUDA
        device for a CUDA executor), one batch per place each step (NOTE(data-parallel)).

        Args:
            loss_name: the loss var's name; required when the program has backward ops.
            build_strategy: replaces the one given at construction.
            exec_strategy: an ``ExecutionStrategy``.
            share_vars_from: a CompiledProgram run before this one: this one runs in its scope
                (the scope passed to ``exe.run`` is then not used, as in Fluid).
            places: a place or a list of places.

        Returns:
            self.

        Raises:
            ValueError: called twice; no loss_name for a training program.
            ProgramError: loss_name is not a var of the program.
            TypeError: a strategy or share_vars_from of the wrong type.
            NotImplementedError: a strategy value placegroup cannot honour (module docstring).
        """
        if self._is_data_parallel:
            raise ValueError("with_data_parallel: already compiled with data parallel; make a new CompiledProgram")
        _check_type(build_strategy, BuildStrategy, "with_data_parallel: build_strategy")
        _check_type(exec_strategy, ExecutionStrategy, "with_data_parallel: exec_strategy")
        _check_type(share_vars_from, CompiledProgram, "with_data_parallel: share_vars_from")
        loss_name = getattr(loss_name, "name", loss_name)
        block = self._program.global_block()
        if loss_name is None and any(op.role == "backward" for op in block.ops):
            raise ValueError("with_data_parallel: the program has backward ops, so loss_name must name its loss")
        if loss_name is not None and not block.has_var(loss_name):
            raise ProgramError(f"with_data_parallel: loss_name {loss_name!r} is not a var of the program")
        self._is_data_parallel = True
        self._build_strategy = build_strategy or self._build_strategy
        self._exec_strategy, self._loss_name, self._share_vars_from = exec_strategy, loss_name, share_vars_from
        self._places = None if places is None else _place_list(places)
        self._check(len(self._places) if self._places else 1)
        return self

    def _check(self, n_places: int) -> None:
        """Refuse what placegroup cannot honour (module docstring)."""
        bs, es = self._build_strategy or BuildStrategy(), self._exec_strategy or ExecutionStrategy()
        scale = BuildStrategy.GradientScaleStrategy
        if bs.gradient_scale_strategy == scale.Customized:
            raise NotImplementedError("BuildStrategy.gradient_scale_strategy = Customized (you feed the loss "
                                      "gradient) is not supported: placegroup seeds it with 1; use CoeffNumDevice")
        if bs.num_trainers > 1 and self._program.cluster is None:
            raise NotImplementedError(
                f"BuildStrategy.num_trainers = {bs.num_trainers} (NCCL2 collective training) is not how placegroup "
                "trains on several processes: transpile with fluid.DistributeTranspiler, with no pservers and "
                "trainers='ip:port,...', and run each trainer's t.get_program(endpoint, 'trainer')")
        if not 0 <= bs.trainer_id < max(bs.num_trainers, 1):
            raise ValueError(f"BuildStrategy.trainer_id = {bs.trainer_id} is not in [0, {bs.num_trainers})")
        if es.num_iteration_per_run != 1:
            raise NotImplementedError(f"ExecutionStrategy.num_iteration_per_run = {es.num_iteration_per_run}: "
                                      "placegroup runs one iteration per exe.run; call exe.run that many times")

    def _prepare(self, place: Any, feed: Any, scope: Any) -> tuple:
        """(program, one feed dict or None, scope, the Expanded places or None) for one
        ``exe.run``: over several places, the program written out for them (NOTE(data-parallel)),
        with the places' feeds (given, split, or one batch per place from the readers)."""
        n = 1
        if self._is_data_parallel and not _serves(self._program):
            places = self._places or (cuda_places() if isinstance(place, CUDAPlace) else cpu_places())
            n = len(places)
        self._check(n)
        if self._share_vars_from is not None:
            scope = self._share_vars_from._scope
            if scope is None:
                raise ValueError("with_data_parallel: share_vars_from names a CompiledProgram that has not "
                                 "run yet, so there are no vars to share: run it first")
        self._scope = scope
        if n == 1:
            return self._program, one_feed(feed), scope, None
        feeds = _place_feeds(feed, n)
        batches = reader_batches(self._program, feeds[0] if feeds else None, None, n)
        if batches:  # a reader's batches (at its end maybe fewer than places: so many places run)
            feeds = [{**(feeds[i] if feeds else {}), **b} for i, b in enumerate(batches)]
        if not feeds and not any(v.is_data for v in self._program.global_block().vars.values()):
            return self._program, None, scope, None  # nothing to split: one place runs it
        if not feeds:
            raise ProgramError(f"with_data_parallel over {n} places: nothing feeds the program (no feed and no "
                               f"started reader)")
        expanded = self._expanded(len(feeds))
        expanded.init_state(scope.vars)
        return expanded.program, expanded.feed(feeds), scope, expanded

    def _expanded(self, n: int) -> Expanded:
        key = (self._program._version, n)
        if self._expansion is None or self._expansion[0] != key:
            bs = self._build_strategy or BuildStrategy()
            coeff = 1.0 / n if bs.gradient_scale_strategy == BuildStrategy.GradientScaleStrategy.CoeffNumDevice else 1.0
            own = bs.reduce_strategy == BuildStrategy.ReduceStrategy.AllReduce
            self._expansion = (key, expand(self._program, n, self._loss_name, coeff, own))
        return self._expansion[1]


def _serves(program: Program) -> bool:
    """Whether ``program`` is a pserver's view (a pserver runs no places)."""
    return program.executor is not None and program.executor.role == ExecutorRole.PSERVER


def _place_feeds(feed: Any, places: int) -> list[dict]:
    """The places' feed dicts: a list of one per place, or one dict split over them."""
    if feed is None or (isinstance(feed, dict) and not feed):
        return []
    if isinstance(feed, (list, tuple)):
        if len(feed) != places:
            raise ProgramError(f"feed is a list of {len(feed)} feeds, one per place, but the program runs on "
                               f"{places} places; pass {places} dicts (CompiledProgram(...).with_data_parallel("
                               f"places=...) sets the places)")
        return [dict(d) for d in feed]
    return split_feed(feed, places)


def one_feed(feed: Any) -> dict | None:
    """The feed of a run on one place: a dict as it is, or a list of one dict.

    Raises:
        ProgramError: a list of more than one dict.
    """
    if not isinstance(feed, (list, tuple)):
        return feed
    if len(feed) != 1:
        raise ProgramError(f"feed is a list of {len(feed)} feeds, one per place, but the program runs on one "
                           f"place; pass one dict, or run CompiledProgram(program).with_data_parallel(places=...) "
                           f"over {len(feed)} places")
    return feed[0]


def prepare_run(program: Any, feed: Any, scope: Any, place: Any) -> tuple:
    """What ``Executor.run`` runs for ``program`` (a Program or a CompiledProgram): (program,
    feed dict or None, scope, the Expanded places or None: NOTE(data-parallel))."""
    if isinstance(program, CompiledProgram):
        return program._prepare(place, feed, scope)
    if program is not None and not isinstance(program, Program):
        raise TypeError(f"Executor.run: program must be a Program or CompiledProgram, got {type(program).__name__}")
    return program, one_feed(feed), scope, None
