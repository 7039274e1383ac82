"""Fleet in collective mode (Fluid 1.8 ``fluid.incubate.fleet.collective``): ``fleet``.

No pservers: the trainers form a group and each step all-reduce their gradients, so every
trainer applies the same mean gradient to the same parameters. ``fleet.distributed_optimizer
(opt, strategy).minimize(loss)`` runs the optimizer's minimize, then transpiles the programs
with no pservers and the role maker's trainer endpoints (placegroup's collective data
parallel: the ``allreduce`` pass, docs/distributed.md), rewriting them in place into this
trainer's part as Fluid's transpiler does. ``fleet.main_program`` is then that program (the
strategy's ``mode = "collective"``) or, for Fluid's default ``"nccl2"``, a ``CompiledProgram``
of it; ``exe.run`` runs either.

Example (each trainer, with ``PADDLE_TRAINER_ID`` and ``PADDLE_TRAINER_ENDPOINTS`` set, as
``placegroup launch --pservers 0`` sets them)::

    fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
    opt = fleet.distributed_optimizer(fluid.optimizer.SGD(0.1), DistributedStrategy())
    opt.minimize(loss)
    exe.run(fleet.startup_program)
    for xb, yb in my_share_of_each_batch: exe.run(fleet.main_program, feed=..., fetch_list=[loss])

What Fluid's strategy offers that is not here raises when set: LocalSGD (``use_local_sgd``,
``collective_mode = "local_sgd"``), distributed FC (``use_dist_fc``) and mixed precision
(``use_amp``). ``forward_recompute`` wraps the optimizer in ``RecomputeOptimizer``, as in
Fluid; the NCCL fields are kept, inert.

Thread-safety: one fleet per process, driven by the script's thread.
"""
from __future__ import annotations

import json
import logging
import os

from placegroup.tools.compat import install_gaps
from placegroup.model.compiler import BuildStrategy, CompiledProgram, ExecutionStrategy
from placegroup.errors import ConfigError
from placegroup.executor import Executor
from placegroup.util.fields import Field
from placegroup.incubate.fleet.base.fleet_base import DistributedOptimizer, Fleet, Mode
from placegroup.incubate.fleet.base.role_maker import PaddleCloudRoleMaker, RoleMakerBase
from placegroup.incubate.fleet.utils.fs_wrapper import BDFS, LocalFS  # Fluid binds them here
from placegroup.io import inference, var_files
from placegroup.ir.framework import Program, default_startup_program
from placegroup.model.optimizer_wrappers import RecomputeOptimizer
from placegroup.transpiler import DistributeTranspiler

__all__ = ["BDFS", "LocalFS", "Collective", "CollectiveOpBasedOptimizer", "CollectiveOptimizer", "DistFCConfig",
           "DistributedStrategy", "LambConfig", "TrainStatus", "fleet"]

log = logging.getLogger("placegroup.fleet")


class LambConfig:
    """Fluid 1.8's placeholder for LAMB settings of collective fleet: it has no fields."""


class DistFCConfig:
    """Fluid 1.8's placeholder for distributed-FC settings: it has no fields (and
    ``use_dist_fc`` is refused here)."""


class TrainStatus:
    """Which epoch a checkpoint completed (``save_check_point`` / ``load_check_point``).

    Args:
        epoch_no: the last completed epoch (-1: none).

    Example::

        status = fleet.load_check_point(exe, "ckpt", trainer_id=0) or TrainStatus()
        for epoch in range(status.next(), epochs): ...
    """

    def __init__(self, epoch_no: int = -1) -> None:
        self._epoch_no = epoch_no

    def next(self) -> int:
        """The epoch to run next."""
        return self._epoch_no + 1

    def __eq__(self, t) -> bool:
        return isinstance(t, TrainStatus) and self._epoch_no == t._epoch_no

    def __ne__(self, t) -> bool:
        return not self == t

    __hash__ = None


_LOCAL_SGD = ("LocalSGD (each trainer updates alone, the parameters are averaged every step) is not in "
              "placegroup; leave it off: the trainers then all-reduce their gradients")


class DistributedStrategy(BuildStrategy):
    """Collective fleet's strategy: Fluid's ``BuildStrategy`` fields plus these (Fluid 1.8.5's
    defaults). As Fluid's (a Python subclass), it keeps any other attribute set on it.

    ``mode``: ``"nccl2"`` (``fleet.main_program`` is a ``CompiledProgram``) or ``"collective"``
    (the program itself); both all-reduce gradients. ``collective_mode``: None or
    ``"grad_allreduce"``. ``forward_recompute`` with ``recompute_checkpoints``: wrap the optimizer
    in ``RecomputeOptimizer``. ``exec_strategy``: the ``ExecutionStrategy`` of the compiled program.

    Raises:
        ConfigError: (on assignment) ``use_local_sgd``, ``use_dist_fc``, ``use_amp`` or
            ``collective_mode = "local_sgd"``, which placegroup has not.
    """

    _OPEN = True
    _FIELDS = {
        **BuildStrategy._FIELDS,
        "use_local_sgd": Field(bool, False, refused={True: _LOCAL_SGD}),
        "use_dist_fc": Field(bool, False, refused={True: "distributed FC (fc weights sliced over the trainers' "
                                                         "GPUs) is not in placegroup; fc(..., model_parallel=True) "
                                                         "slices an fc over the trainers (docs/model_parallel.md)"}),
        "dist_fc_config": Field("any", None),
        "mode": Field(str, "nccl2", choices=("nccl2", "collective")),
        "collective_mode": Field("optstr", None, refused={"local_sgd": _LOCAL_SGD}),
        "forward_recompute": Field(bool, False),
        "recompute_checkpoints": Field("any", []),
        "use_amp": Field(bool, False, refused={True: "mixed precision (fluid.contrib.mixed_precision) is not in "
                                                     "placegroup: train in float32"}),
        "amp_loss_scaling": Field("any", 2 ** 15),
        "exec_strategy": Field(ExecutionStrategy, None),
        "_ut4grad_allreduce": Field(bool, False),
    }

    def __init__(self) -> None:
        super().__init__()
        self._assign(exec_strategy=ExecutionStrategy(), recompute_checkpoints=[])


class Collective(Fleet):
    """The collective fleet; ``fleet`` is its one instance.

    Attributes:
        main_program: this trainer's program after ``minimize`` (a ``CompiledProgram`` in
            ``"nccl2"`` mode), None before.
        startup_program: the startup program ``minimize`` was given (rewritten in place).
    """

    def __init__(self) -> None:
        super().__init__(Mode.COLLECTIVE)
        self._local_ip = 0
        self.startup_program: Program | None = None
        self._origin_program: Program | None = None
        self._transpiled_program: Program | None = None
        self.main_program = None
        self._checkoint_prefix = "__paddle_fleet_checkpoint__"  # Fluid's spelling, its directories' names
        self._param_file_name = "_paddle_fleet_param__"

    def init(self, role_maker: RoleMakerBase | None = None) -> None:
        """As ``Fleet.init``; None: ``PaddleCloudRoleMaker(is_collective=True)``."""
        super().init(role_maker if role_maker is not None else PaddleCloudRoleMaker(is_collective=True))

    def _nothing(self, what: str) -> None:
        log.warning("You should not call '%s' method for collective mode.", what)

    def init_worker(self) -> None:
        self._nothing("init_worker")

    def run_worker(self, main_programs=None, scopes=None) -> None:
        self._nothing("run_worker")

    def init_server(self, model_dir=None) -> None:
        self._nothing("init_server")

    def run_server(self) -> None:
        self._nothing("run_server")

    def stop_worker(self) -> None:
        self._nothing("stop_worker")

    def distributed_optimizer(self, optimizer, strategy=None) -> "CollectiveOptimizer":
        """Wrap ``optimizer``; its ``minimize`` makes this trainer's programs.

        Raises:
            TypeError: ``optimizer`` is no optimizer, ``strategy`` no ``DistributedStrategy``.
        """
        self._optimizer = CollectiveOptimizer(optimizer, strategy)
        return self._optimizer

    def save_inference_model(self, executor, dirname: str, feeded_var_names=None, target_vars=None,
                             main_program=None, export_for_deployment: bool = True) -> list[str]:
        """``fluid.io.save_inference_model`` of the one-process program (or ``main_program``).

        Raises:
            TypeError: ``executor`` is no Executor, ``main_program`` no Program.
        """
        program = self._program_for("save_inference_model", executor, main_program, self._origin_program)
        return inference.save_inference_model(dirname, feeded_var_names, target_vars, executor, program,
                                              export_for_deployment=export_for_deployment)

    def save_persistables(self, executor, dirname: str, main_program=None, filename: str | None = None) -> list[str]:
        """``fluid.io.save_persistables`` of the one-process program (or ``main_program``):
        every trainer holds every persistable var.

        Raises:
            TypeError: ``executor`` is no Executor, ``main_program`` no Program.
        """
        program = self._program_for("save_persistables", executor, main_program, self._origin_program)
        return var_files.save_persistables(executor, dirname, program, filename=filename)

    @staticmethod
    def _program_for(what: str, executor, main_program, default) -> Program:
        if not isinstance(executor, Executor):
            raise TypeError(f"In fleet.{what}() function, executor must be as Executor type.")
        program = default if main_program is None else main_program
        if not isinstance(program, Program):
            raise TypeError(f"In fleet.{what}() function, main_program must be as Program type (call "
                            f"minimize first, or pass one).")
        return program

    # -- checkpoints: <path>/__paddle_fleet_checkpoint__.<n>/ holds the persistables in one file and
    # fleet_train_status (JSON), as Fluid's; a new one is written under <n>.tmp and renamed.
    def _save_train_status(self, path: str, train_status: TrainStatus) -> None:
        with open(os.path.join(path, "fleet_train_status"), "w") as f:
            json.dump({"epoch_no": train_status._epoch_no}, f)

    def _load_train_status(self, path: str) -> TrainStatus:
        name = os.path.join(path, "fleet_train_status")
        if not os.path.isfile(name):
            return TrainStatus()
        with open(name) as f:
            d = json.load(f)
        if not isinstance(d, dict) or not isinstance(d.get("epoch_no"), int) or d["epoch_no"] < 0:
            raise ConfigError(f"{name}: not a train status (expected {{\"epoch_no\": n >= 0}}), got {d!r}")
        return TrainStatus(d["epoch_no"])

    def _checkpoint_numbers(self, root_path: str, fs) -> list[int]:
        nums = []
        for d in fs.list_dirs(root_path):
            head, _, tail = d.partition(".")
            if head == self._checkoint_prefix and tail.isdigit():
                nums.append(int(tail))
        return nums

    def _get_last_checkpoint_no(self, root_path: str, fs) -> int:
        return max(self._checkpoint_numbers(root_path, fs), default=-1)

    def clean_redundant_check_points(self, root_path: str, fs=None, checkpoint_num: int = 1) -> None:
        """Delete all but the newest ``checkpoint_num`` (at least 1) checkpoints under ``root_path``."""
        fs = fs or LocalFS()
        last = self._get_last_checkpoint_no(root_path, fs)
        for n in self._checkpoint_numbers(root_path, fs):
            if n <= last - max(checkpoint_num, 1):
                fs.delete(f"{root_path}/{self._checkoint_prefix}.{n}")

    def save_check_point(self, executor, path: str, train_status: TrainStatus, main_program=None, fs=None,
                         local_cache_path: str = ".cache", remain_all_checkpoint: bool = True) -> None:
        """Save the persistables and ``train_status`` as checkpoint n+1 under ``path`` (through a
        local copy in ``local_cache_path`` for a file system that needs one).

        Args:
            executor: the Executor whose scope holds the values.
            path: the checkpoints' directory on ``fs`` (made if missing).
            train_status: a ``TrainStatus``.
            main_program: default: this trainer's program.
            fs: ``LocalFS()`` (default) or ``BDFS(...)``.
            remain_all_checkpoint: False: keep only this one.
        """
        fs = fs or LocalFS()
        program = self._program_for("save_check_point", executor, main_program, self._transpiled_program)
        if not fs.stat(path):
            fs.mkdir(path)
        n = self._get_last_checkpoint_no(path, fs) + 1
        real_path = f"{path}/{self._checkoint_prefix}.{n}"
        saved_path = tmp_path = f"{real_path}.tmp"
        local = LocalFS()
        if fs.need_upload_download():
            saved_path = f"{local_cache_path}/{self._checkoint_prefix}.{n}.saved_cache"
            local.mkdir(saved_path)
        self.save_persistables(executor, saved_path, program, filename=self._param_file_name)
        self._save_train_status(saved_path, train_status)
        if fs.need_upload_download():
            fs.delete(tmp_path)
            fs.upload(saved_path, tmp_path)
        fs.mv(tmp_path, real_path)
        if not remain_all_checkpoint:
            self.clean_redundant_check_points(path, fs)

    def load_check_point(self, executor, path: str, trainer_id: int, main_program=None, fs=None,
                         local_cache_path: str = ".cache", ignore_empty: bool = True) -> TrainStatus | None:
        """Load the newest checkpoint under ``path`` into the executor's scope.

        Returns:
            its ``TrainStatus``; None when there is none and ``ignore_empty``.

        Raises:
            FileNotFoundError: there is none and not ``ignore_empty``.
        """
        fs = fs or LocalFS()
        n = self._get_last_checkpoint_no(path, fs)
        if n < 0:
            if not ignore_empty:
                raise FileNotFoundError(f"no checkpoint ({self._checkoint_prefix}.<n>) under {path!r}")
            return None
        program = self._program_for("load_check_point", executor, main_program, self._transpiled_program)
        load_path = f"{path}/{self._checkoint_prefix}.{n}"
        if fs.need_upload_download():
            cache = f"{local_cache_path}/{self._checkoint_prefix}.{n}.load_cache.{trainer_id}"
            LocalFS().delete(cache)
            fs.download(load_path, cache)
            load_path = cache
        var_files.load_persistables(executor, load_path, program, filename=self._param_file_name)
        return self._load_train_status(load_path)


fleet = Collective()


class CollectiveOpBasedOptimizer(DistributedOptimizer):
    """The base Fluid gives collective optimizers built from ops (its strategy must be a
    ``DistributedStrategy``); ``backward`` and ``apply_gradients`` are the wrapped optimizer's.

    Raises:
        TypeError: ``strategy`` is no ``DistributedStrategy``.
    """

    def __init__(self, optimizer, strategy=None) -> None:
        if not isinstance(strategy, DistributedStrategy):
            raise TypeError("strategy must be DistributedStrategy")
        super().__init__(optimizer, strategy)

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        return self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set, callbacks)

    def apply_gradients(self, params_grads):
        return self._optimizer.apply_gradients(params_grads)


class CollectiveOptimizer(DistributedOptimizer):
    """The optimizer ``fleet.distributed_optimizer`` returns in collective mode.

    Args:
        optimizer: a ``fluid.optimizer`` instance.
        strategy: a ``DistributedStrategy`` (None: a new one).

    Raises:
        TypeError: no optimizer, or a strategy that is no ``DistributedStrategy``.
        ValueError: ``strategy.recompute_checkpoints`` is not a list.
    """

    def __init__(self, optimizer, strategy=None) -> None:
        strategy = DistributedStrategy() if strategy is None else strategy
        if not isinstance(strategy, DistributedStrategy):
            raise TypeError(f"strategy must be a collective DistributedStrategy, got {type(strategy).__name__}")
        super().__init__(optimizer, strategy)
        if not isinstance(strategy.recompute_checkpoints, list):
            raise ValueError("DistStrategy.recompute_checkpoints should be a List")
        self._forward_recompute = strategy.forward_recompute
        self._recompute_checkpoints = strategy.recompute_checkpoints
        self._use_amp = strategy.use_amp
        self._amp_loss_scaling = strategy.amp_loss_scaling
        self.print_config = False
        self._loss = None

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        return self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set, callbacks)

    def apply_gradients(self, params_grads):
        return self._optimizer.apply_gradients(params_grads)

    def _check_collective_mode(self, strategy: DistributedStrategy) -> None:
        if strategy._ut4grad_allreduce:
            strategy._assign(mode="collective", collective_mode="grad_allreduce")
        if strategy.collective_mode == "grad_allreduce" and strategy.mode != "collective":
            raise ConfigError("DistributedStrategy.collective_mode = 'grad_allreduce' needs mode = 'collective'")

    def _transpile(self, startup_program: Program, main_program: Program) -> None:
        """Rewrite the programs in place into this trainer's part of the collective job."""
        endpoints = fleet.worker_endpoints()
        trainer_id = fleet.worker_index()
        if not endpoints:
            raise ConfigError("collective fleet needs the trainers' endpoints: use "
                              "PaddleCloudRoleMaker(is_collective=True) (PADDLE_TRAINER_ENDPOINTS) or "
                              "UserDefinedCollectiveRoleMaker(current_id, worker_endpoints)")
        if self.print_config:
            print(f"worker_endpoints:{endpoints} trainers_num:{len(endpoints)} "
                  f"current_endpoint:{endpoints[trainer_id]} trainer_id:{trainer_id}")
        DistributeTranspiler().transpile(trainer_id=trainer_id, program=main_program, pservers="",
                                         trainers=",".join(endpoints), startup_program=startup_program,
                                         current_endpoint=endpoints[trainer_id])

    def _try_to_compile(self, startup_program: Program, main_program: Program):
        self._transpile(startup_program, main_program)
        if self._strategy.mode == "collective":
            return main_program
        self._strategy._assign(num_trainers=fleet.worker_num(), trainer_id=fleet.worker_index(),
                               trainers_endpoints=fleet.worker_endpoints(), enable_backward_optimizer_op_deps=True)
        return CompiledProgram(main_program).with_data_parallel(
            loss_name=self._loss.name, build_strategy=self._strategy, exec_strategy=self._strategy.exec_strategy)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        """The optimizer's ``minimize``, then the transpile for this trainer
        (``fleet.main_program``, ``fleet.startup_program``).

        Returns:
            ``(optimize_ops, params_grads)``, as the optimizer's.

        Raises:
            ValueError: ``forward_recompute`` without checkpoints, or over an optimizer that
                already recomputes.
            RuntimeError: ``fleet.init`` has not run.
            ConfigError: the role maker names no trainer endpoints; the transpiler's errors.
        """
        if self._forward_recompute:
            if not self._recompute_checkpoints:
                raise ValueError("please set strategy.recompute_checkpoints when set strategy.forward_recompute "
                                 "as True")
            if isinstance(self._optimizer, RecomputeOptimizer):
                raise ValueError("can not use RecomputeOptimizer when you set DistStrategy.forward_recompute as True")
            self._optimizer = RecomputeOptimizer(self._optimizer)
            self._optimizer._set_checkpoints(self._recompute_checkpoints)
        fleet._role()  # fleet.init must have run
        main_program = loss.block.program
        startup_program = startup_program or default_startup_program()
        fleet.startup_program = startup_program
        self._loss = loss
        self._check_collective_mode(self._strategy)
        result = self._optimizer.minimize(loss, startup_program=startup_program, parameter_list=parameter_list,
                                          no_grad_set=no_grad_set)
        fleet._origin_program = main_program.clone(for_test=False)
        fleet._transpiled_program = main_program
        fleet.main_program = self._try_to_compile(startup_program, main_program)
        return result


install_gaps()
