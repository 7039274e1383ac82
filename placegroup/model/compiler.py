"""``fluid.CompiledProgram``, ``fluid.BuildStrategy``, ``fluid.ExecutionStrategy`` and the place
lists (``fluid.cpu_places``, ``cuda_places``, ``cuda_pinned_places``), as in Fluid 1.8.

In Fluid, compiling a program turns it into a graph that fuses ops, reuses memory and, with
``with_data_parallel``, runs on several devices. Here the program itself is what runs:
``exe.run(compiled, ...)`` runs ``compiled``'s program, and the strategies only say what a
script asked for. Each field is one of three kinds (the tables below):

* honoured: the same numbers as Fluid (``reduce_strategy``, the default
  ``gradient_scale_strategy``);
* inert: it tunes Fluid's engine (fusion, memory reuse, threads, ...) and changes no number;
  set to anything but its default it is named once per process in a ``StrategyNotice``
  warning, never silently ignored;
* refused when the program runs: a value whose meaning placegroup does not have
  (``num_trainers > 1``, a ``Customized`` gradient scale, ``num_iteration_per_run > 1``)
  raises ``NotImplementedError`` saying what to do instead.

A field Fluid does not have is an AttributeError naming it, a value of the wrong type a
TypeError, as Fluid's pybind objects do.

NOTE(data-parallel): Fluid splits each batch over the places of ``with_data_parallel`` and
averages the places' gradients. Here one place runs the whole batch: a list of per-place feeds
is put together along the batch dimension, and a reader gives one batch per place, put
together too. When the loss is a mean over equal shares of the batch, the averaged gradient is
the gradient of the whole batch's mean, so the updates are Fluid's. What differs, and is said
in a notice when there is more than one place: ops that take batch statistics (batch_norm) see
the whole batch, as with ``sync_batch_norm``; and a fetch gives one value for the whole batch,
where Fluid gives one per place.

Thread-safety: strategies and compiled programs are built in one thread; a compiled program is
then only read, except for the scope it remembers for ``share_vars_from``.
"""
from __future__ import annotations

import enum
from typing import Any

import numpy as np

from placegroup import config
from placegroup.errors import ProgramError
from placegroup.util.fields import Field as _Field
from placegroup.util.fields import Fields as _Strategy
from placegroup.util.fields import StrategyNotice, notice
from placegroup.ir.framework import Program
from placegroup.ir.places import CPUPlace, CUDAPinnedPlace, CUDAPlace

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
_ONE_PLACE = "one place runs each step (NOTE(data-parallel) in placegroup/model/compiler.py)"


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
        "reduce_strategy": _Field(ReduceStrategy, ReduceStrategy.AllReduce,
                                  "every parameter is updated on the one place that holds it, which gives "
                                  "the same numbers as either strategy"),
        "gradient_scale_strategy": _Field(GradientScaleStrategy, GradientScaleStrategy.CoeffNumDevice),
        "num_trainers": _Field(int, 1),
        "trainer_id": _Field(int, 0),
        "trainers_endpoints": _Field("strs", [], "it is read only with num_trainers > 1 (NCCL2 training)"),
        "nccl_comm_num": _Field(int, 1, "there is no NCCL here"),
        "use_hierarchical_allreduce": _Field(bool, False, "there is no NCCL here"),
        "hierarchical_allreduce_inter_nranks": _Field(int, 0, "there is no NCCL here"),
        "sync_batch_norm": _Field(bool, False, "one place runs the whole batch, so batch_norm's statistics "
                                               "are already over every sample, as sync_batch_norm makes them"),
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

    @property
    def program(self) -> Program:
        return self._program

    def with_data_parallel(self, loss_name: str | None = None, build_strategy: BuildStrategy | None = None,
                           exec_strategy: ExecutionStrategy | None = None,
                           share_vars_from: "CompiledProgram | None" = None, places=None) -> "CompiledProgram":
        """Run data parallel over ``places`` (default: ``CPU_NUM`` CPU places, or every CUDA
        device for a CUDA executor): one place over the whole batch here (NOTE(data-parallel)).

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
        if bs.gradient_scale_strategy == scale.One and n_places > 1:
            raise NotImplementedError(f"BuildStrategy.gradient_scale_strategy = One over {n_places} places sums "
                                      "the places' gradients, which one place over the whole batch cannot do; "
                                      "use CoeffNumDevice, or one place")
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
        """(program, one feed dict or None, scope, batches per reader) for one ``exe.run``."""
        n = 1
        if self._is_data_parallel:
            places = self._places or (cuda_places() if isinstance(place, CUDAPlace) else cpu_places())
            n = len(places)
            if n > 1:
                notice("with_data_parallel", f"with_data_parallel over {n} places: {_ONE_PLACE}")
        self._check(n)
        if self._share_vars_from is not None:
            scope = self._share_vars_from._scope
            if scope is None:
                raise ValueError("with_data_parallel: share_vars_from names a CompiledProgram that has not "
                                 "run yet, so there are no vars to share: run it first")
        self._scope = scope
        return self._program, one_feed(feed, n), scope, n


def one_feed(feed: Any, places: int = 1) -> dict | None:
    """A feed for one place: a dict as it is, or a list of one dict per place put together
    along the batch dimension (NOTE(data-parallel)).

    Raises:
        ProgramError: a list whose length is not the number of places, or whose dicts name
            different vars.
    """
    if not isinstance(feed, (list, tuple)):
        return feed
    if len(feed) != places:
        raise ProgramError(f"feed is a list of {len(feed)} feeds, one per place, but the program runs on "
                           f"{places} place{'s' if places > 1 else ''}; pass {places} dict{'s' if places > 1 else ''} "
                           f"(CompiledProgram(...).with_data_parallel(places=...) sets the places)")
    if places == 1:
        return feed[0]
    names = set(feed[0])
    for i, d in enumerate(feed):
        if set(d) != names:
            raise ProgramError(f"feed for place {i} gives {sorted(d)}, place 0 gives {sorted(names)}")
    return {n: np.concatenate([np.asarray(d[n]) for d in feed], axis=0) for n in feed[0]}


def prepare_run(program: Any, feed: Any, scope: Any, place: Any) -> tuple:
    """What ``Executor.run`` runs for ``program`` (a Program or a CompiledProgram): (program,
    feed dict or None, scope, batches each reader gives per run)."""
    if isinstance(program, CompiledProgram):
        return program._prepare(place, feed, scope)
    if program is not None and not isinstance(program, Program):
        raise TypeError(f"Executor.run: program must be a Program or CompiledProgram, got {type(program).__name__}")
    return program, one_feed(feed), scope, 1
