"""Fleet's parameter-server mode (Fluid 1.8 ``...parameter_server.distribute_transpiler``): ``fleet``.

A thin layer over placegroup's ``DistributeTranspiler``: ``fleet.distributed_optimizer(opt,
strategy).minimize(loss)`` runs the optimizer's minimize, then transpiles for this process's
role (the role maker's) in the strategy's mode; ``fleet.main_program`` and
``fleet.startup_program`` are this process's placed programs.

Example (a Fluid 1.8 CTR script, unchanged)::

    fleet.init(role_maker.PaddleCloudRoleMaker())
    optimizer = fleet.distributed_optimizer(fluid.optimizer.SGD(0.01), StrategyFactory.create_sync_strategy())
    optimizer.minimize(loss)
    if fleet.is_server():
        fleet.init_server(); fleet.run_server()           # serves until every trainer is done
    elif fleet.is_worker():
        fleet.init_worker()
        exe = fluid.Executor(fluid.CPUPlace()); exe.run(fleet.startup_program)
        for feed in batches: exe.run(fleet.main_program, feed=feed, fetch_list=[loss])
        fleet.stop_worker()

The transpiler rewrites the programs minimize was given into this process's part, as Fluid's
does, so a Fluid script may as well run ``fluid.default_main_program()`` after minimize: it is
the same program as ``fleet.main_program``.

Thread-safety: one fleet per process, driven by the script's thread.
"""
from __future__ import annotations

from placegroup.tools.compat import install_gaps
from placegroup.errors import ConfigError
from placegroup.executor import Executor
from placegroup.executor.executor import close_distributed
from placegroup.incubate.fleet.base.fleet_base import DistributedOptimizer, Fleet, Mode
from placegroup.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy import (  # noqa: F401
    AsyncStrategy, DistributedStrategy, GeoStrategy, HalfAsyncStrategy, StrategyFactory, SyncStrategy,
    TrainerRuntimeConfig)
from placegroup.io import inference, var_files
from placegroup.ir.framework import Program, default_startup_program
from placegroup.model.optimizer_base import Optimizer
from placegroup.transpiler import DistributeTranspiler, DistributeTranspilerConfig

__all__ = ["DistributedTranspiler", "TranspilerOptimizer", "fleet"]


class DistributedTranspiler(Fleet):
    """The parameter-server fleet; ``fleet`` is its one instance.

    Attributes:
        main_program: this process's program (None before ``minimize``).
        startup_program: this process's startup program (None before ``minimize``).
    """

    def __init__(self) -> None:
        super().__init__(Mode.TRANSPILER)
        self._strategy: DistributedStrategy | DistributeTranspilerConfig | None = None
        self._transpiler: DistributeTranspiler | None = None
        self._origin_program: Program | None = None
        self.main_program: Program | None = None
        self.startup_program: Program | None = None

    def _need_programs(self, what: str) -> None:
        if self.main_program is None:
            raise ConfigError(f"fleet.{what}() needs this process's programs: call "
                              f"fleet.distributed_optimizer(optimizer, strategy).minimize(loss) first")

    def init_worker(self) -> None:
        """Get the trainer ready. Nothing to start here: Fluid's communicator threads are the
        executor's link to the pservers, made at its first distributed ``run``.

        Raises:
            ConfigError: ``minimize`` has not run.
        """
        self._need_programs("init_worker")

    def init_server(self, model_dir: str | None = None) -> None:
        """Run this pserver's startup program on the fleet's executor.

        Args:
            model_dir: refused (Fluid loads a saved model into the pserver): a pserver holds
                blocks of parameters here, not the files a trainer saves.

        Raises:
            ConfigError: ``minimize`` has not run, or a ``model_dir`` was given.
        """
        self._need_programs("init_server")
        if model_dir:
            raise ConfigError(f"fleet.init_server(model_dir={model_dir!r}): placegroup's pservers do not load "
                              f"a saved model; resume a job from its checkpoints instead "
                              f"(PLACEGROUP_CHECKPOINT_DIR and PLACEGROUP_RESUME=1, docs/checkpoint.md)")
        self._executor.run(self.startup_program)

    def run_server(self) -> None:
        """Serve: run this pserver's program until every trainer has said done, then close
        the fleet's executor (NOTE(pserver-run) in executor/executor.py)."""
        self._need_programs("run_server")
        self._executor.run(self.main_program)
        self._executor.close()

    def stop_worker(self) -> None:
        """Say this trainer is done, so the pservers stop serving when every trainer has.

        As Fluid's ``Executor.close`` (whose RPC client is one per process), this closes every
        distributed executor of the process: each takes its last parameters, tells the
        pservers it is done and closes its sockets. Run no distributed program after it.
        """
        self._executor.close()
        # NOTE(exit-done) in executor/executor.py: the open distributed executors, closed at exit
        close_distributed()

    def distributed_optimizer(self, optimizer, strategy=None) -> "TranspilerOptimizer":
        """Wrap ``optimizer``; its ``minimize`` makes this process's programs.

        Args:
            optimizer: a ``fluid.optimizer`` instance.
            strategy: a strategy of ``distributed_strategy`` (None: sync) or a
                ``fluid.DistributeTranspilerConfig`` (its ``sync_mode`` decides).

        Raises:
            ValueError: ``optimizer`` is no optimizer, or ``fleet.init`` has not run.
            TypeError: ``strategy`` is neither a strategy nor a config.
        """
        if not isinstance(optimizer, Optimizer):
            raise ValueError("optimizer must be an instance of Optimizer")
        if not self._is_initialized:
            raise ValueError("use fleet.init(role) to initialize the role of current node before "
                             "optimizer.minimize(loss)")
        self._optimizer = TranspilerOptimizer(optimizer, strategy)
        self._optimizer._fleet = self
        return self._optimizer

    def _transpile(self, strategy, main: Program, startup: Program) -> None:
        """Transpile ``main``/``startup`` for this process's role; set the two programs."""
        if isinstance(strategy, DistributedStrategy):
            config = strategy.transpiler_config()
        else:
            config = strategy
        self._strategy, self._origin_program = strategy, main.clone()
        t = self._transpiler = DistributeTranspiler(config)
        servers = self.server_endpoints(to_string=True)
        # NOTE(in-place-transpile) in placegroup/transpiler/distribute_transpiler.py: transpile
        # rewrites `main` and `startup` into this process's part (a server's, by the role maker),
        # so fleet's programs and the default ones a Fluid script may run are the same objects.
        if self.is_server():
            endpoint = self.server_endpoints()[self.server_index()]
            t.transpile(trainer_id=0, program=main, pservers=servers, trainers=self.worker_num(),
                        startup_program=startup, current_endpoint=endpoint)
            t.rewrite_in_place(endpoint, "pserver")  # the role maker's word, whatever the environment says
        else:
            t.transpile(trainer_id=self.worker_index(), program=main, pservers=servers,
                        trainers=self.worker_num(), startup_program=startup)
        self.main_program, self.startup_program = main, startup

    def save_inference_model(self, executor, dirname: str, feeded_var_names, target_vars, main_program=None,
                             export_for_deployment: bool = True) -> list[str]:
        """``fluid.io.save_inference_model`` of the one-process program (or ``main_program``),
        with the parameters this trainer holds after its last step.

        Raises:
            TypeError: ``executor`` is no Executor.
        """
        _check_executor(executor, "save_inference_model")
        program = main_program if main_program is not None else self._origin_program
        return inference.save_inference_model(dirname, feeded_var_names, target_vars, executor, program,
                                              export_for_deployment=export_for_deployment)

    def save_persistables(self, executor, dirname: str, main_program=None) -> list[str]:
        """``fluid.io.save_persistables`` of this process's program (or ``main_program``): the
        persistable vars this process holds (a trainer: the parameters after its last step; a
        pserver: its blocks and their optimizer state).

        Raises:
            TypeError: ``executor`` is no Executor.
        """
        _check_executor(executor, "save_persistables")
        return var_files.save_persistables(executor, dirname, main_program or self.main_program)


def _check_executor(executor, what: str) -> None:
    if not isinstance(executor, Executor):
        raise TypeError(f"in fleet.{what}() function, executor must be as Executor type")


fleet = DistributedTranspiler()


class TranspilerOptimizer(DistributedOptimizer):
    """The optimizer ``fleet.distributed_optimizer`` returns.

    Args:
        optimizer: a ``fluid.optimizer`` instance.
        strategy: as ``fleet.distributed_optimizer``'s (None: ``SyncStrategy``).

    Raises:
        TypeError: ``strategy`` is neither a strategy nor a ``DistributeTranspilerConfig``.
    """

    def __init__(self, optimizer, strategy=None) -> None:
        super().__init__(optimizer, strategy)
        self._fleet = fleet  # the fleet whose programs minimize makes (its distributed_optimizer's)
        if strategy is None:
            self._strategy = StrategyFactory.create_sync_strategy()
        elif not isinstance(strategy, (DistributedStrategy, DistributeTranspilerConfig)):
            raise TypeError("strategy must be an instance of DistributeTranspilerConfig, SyncStrategy, "
                            "HalfAsyncStrategy, AsyncStrategy, or GeoStrategy")

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        return self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set, callbacks)

    def apply_gradients(self, params_grads):
        return self._optimizer.apply_gradients(params_grads)

    def minimize(self, loss, scopes=None, startup_program=None, parameter_list=None, no_grad_set=None):
        """The optimizer's ``minimize``, then the transpile for this process's role.

        Returns:
            ``(optimize_ops, params_grads)``, as the optimizer's.

        Raises:
            TypeError: a list of losses or of startup programs.
            ConfigError, PassError: the transpiler's (docs/distributed.md).
        """
        if isinstance(loss, list):
            raise TypeError("DistributedTranspiler's minimize can not accept loss with list")
        if isinstance(startup_program, list):
            raise TypeError("DistributedTranspiler's minimize can not accept program with list")
        result = self._optimizer.minimize(loss, startup_program, parameter_list, no_grad_set)
        self._fleet._transpile(self._strategy, loss.block.program, startup_program or default_startup_program())
        return result


install_gaps()
