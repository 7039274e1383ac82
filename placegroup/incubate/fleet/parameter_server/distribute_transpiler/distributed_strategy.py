"""Fleet's strategies (Fluid 1.8 ``...distribute_transpiler.distributed_strategy``): which mode runs.

A strategy is what ``fleet.distributed_optimizer(optimizer, strategy)`` is told; each answers one
question, ``sync_mode()``, which picks placegroup's mode (docs/distributed.md, "Modes"):

| Fluid 1.8 strategy | placegroup runs |
|---|---|
| ``SyncStrategy`` (``create_sync_strategy()``) | sync: the pservers merge every trainer's gradient each step |
| ``AsyncStrategy`` (``create_async_strategy()``) | async: each trainer's gradient is applied alone as it comes |
| ``HalfAsyncStrategy`` (``create_half_async_strategy()``) | async, with a one-line warning |
| ``GeoStrategy`` (``create_geo_strategy(k)``) | async, with a one-line warning |

Half-async (Fluid's pserver applies gradients as they come, its trainers wait for each other)
and GEO-SGD (trainers train alone and push parameter deltas every k steps) have no
placegroup mode of their own; async is the closest, and the warning says so. The program
configuration (``get/set_program_config``) is placegroup's ``DistributeTranspilerConfig``
(slice_var_up, min_block_size, split_method, staleness, ...); its ``sync_mode`` is the
strategy's. The trainer and server runtime configurations tune Fluid's communicator threads,
which placegroup does not have: they are kept, and have no effect.

Example::

    strategy = StrategyFactory.create_sync_strategy()
    strategy.set_program_config({"slice_var_up": False})
    optimizer = fleet.distributed_optimizer(fluid.optimizer.SGD(0.01), strategy)
"""
from __future__ import annotations

import logging

from placegroup.compat import install_gaps
from placegroup.compiler import BuildStrategy, ExecutionStrategy
from placegroup.transpiler import DistributeTranspilerConfig

__all__ = ["TrainerRuntimeConfig", "DistributedStrategy", "SyncStrategy", "AsyncStrategy",
           "HalfAsyncStrategy", "GeoStrategy", "StrategyFactory"]

log = logging.getLogger("placegroup.fleet")


class TrainerRuntimeConfig:
    """Fluid's communicator settings (``runtime_configs``, a dict): kept, with no effect here."""

    def __init__(self) -> None:
        self.mode = None
        self.runtime_configs: dict = {}

    def get_communicator_flags(self) -> dict:
        return {k: str(v) for k, v in self.runtime_configs.items()}


def _updated(target, config, kind: type, what: str):
    """``config`` if it is a ``kind``, else ``target`` with a dict's keys set (each must exist)."""
    if isinstance(config, kind):
        return config
    if not isinstance(config, dict):
        raise TypeError(f"{what} only accept input type: dict or {kind.__name__}")
    for key, value in config.items():
        if not hasattr(target, key):
            raise ValueError(f"{kind.__name__} doesn't have key: {key}")
        setattr(target, key, value)
    return target


class DistributedStrategy:
    """The base: the program configuration decides the mode (its ``sync_mode``); use
    ``StrategyFactory`` for the named ones.

    Example::

        s = DistributedStrategy(); s.set_program_config({"sync_mode": False}); s.sync_mode()  # False
    """

    _sync: bool | None = None  # the mode a named strategy fixes; None: the program config's

    def __init__(self) -> None:
        self._program_config = DistributeTranspilerConfig()
        self._trainer_runtime_config = TrainerRuntimeConfig()
        self._server_runtime_config: dict = {}
        self._execute_strategy = ExecutionStrategy()
        self._build_strategy = BuildStrategy()

    def sync_mode(self) -> bool:
        """Whether placegroup runs this strategy in sync mode (else async)."""
        return self._program_config.sync_mode if self._sync is None else self._sync

    def transpiler_config(self) -> DistributeTranspilerConfig:
        """The config the transpiler gets: the program config with this strategy's mode."""
        return self._program_config.model_copy(update={"sync_mode": self.sync_mode()})

    def get_program_config(self) -> DistributeTranspilerConfig:
        return self._program_config

    def set_program_config(self, config) -> None:
        """Set the program configuration: a ``DistributeTranspilerConfig``, or a dict of its fields.

        Raises:
            TypeError: neither.
            ValueError: a key the config does not have (its fields are listed), or a bad value.
        """
        if isinstance(config, DistributeTranspilerConfig):
            self._program_config = config
        elif isinstance(config, dict):
            fields = DistributeTranspilerConfig.model_fields
            unknown = sorted(set(config) - set(fields))
            if unknown:
                raise ValueError(f"DistributeTranspilerConfig doesn't have key: {', '.join(unknown)} "
                                 f"(it has {', '.join(fields)})")
            self._program_config = DistributeTranspilerConfig(**{**self._program_config.model_dump(), **config})
        else:
            raise TypeError("program_config only accept input type: dict or DistributeTranspilerConfig")

    def get_trainer_runtime_config(self) -> TrainerRuntimeConfig:
        return self._trainer_runtime_config

    def set_trainer_runtime_config(self, config) -> None:
        if isinstance(config, dict):
            self._trainer_runtime_config.runtime_configs.update(config)
        else:
            self._trainer_runtime_config = _updated(None, config, TrainerRuntimeConfig, "trainer_runtime_config")

    def get_server_runtime_config(self) -> dict:
        return self._server_runtime_config

    def set_server_runtime_config(self, config: dict) -> None:
        if not isinstance(config, dict):
            raise TypeError("server_runtime_config only accept input type: dict")
        self._server_runtime_config.update(config)

    def get_execute_strategy(self) -> ExecutionStrategy:
        return self._execute_strategy

    def set_execute_strategy(self, config) -> None:
        self._execute_strategy = _updated(self._execute_strategy, config, ExecutionStrategy, "execute_strategy")

    def get_build_strategy(self) -> BuildStrategy:
        return self._build_strategy

    def set_build_strategy(self, config) -> None:
        self._build_strategy = _updated(self._build_strategy, config, BuildStrategy, "build_strategy")


class SyncStrategy(DistributedStrategy):
    """Sync training: every step's gradients of all trainers merged on the pservers."""
    _sync = True


class AsyncStrategy(DistributedStrategy):
    """Async training: each trainer's gradient applied alone as it arrives."""
    _sync = False


class _AsyncStandIn(DistributedStrategy):
    _sync = False
    _what = ""

    def sync_mode(self) -> bool:
        log.warning("%s has no placegroup mode of its own: this job runs async (each trainer's "
                    "gradient applied alone as it arrives)", self._what)
        return False


class HalfAsyncStrategy(_AsyncStandIn):
    """Fluid's half-async mode; runs as async here, with a warning."""
    _what = "HalfAsyncStrategy (Fluid's half-async mode)"


class GeoStrategy(_AsyncStandIn):
    """Fluid's GEO-SGD (push parameter deltas every ``update_frequency`` steps); runs as async
    here, with a warning.

    Args:
        update_frequency: Fluid's push interval, kept as ``update_frequency``.
    """
    _what = "GeoStrategy (Fluid's GEO-SGD)"

    def __init__(self, update_frequency: int = 100) -> None:
        super().__init__()
        self.update_frequency = update_frequency


class StrategyFactory:
    """Fluid's constructors of the named strategies."""

    @staticmethod
    def create_sync_strategy() -> SyncStrategy:
        return SyncStrategy()

    @staticmethod
    def create_half_async_strategy() -> HalfAsyncStrategy:
        return HalfAsyncStrategy()

    @staticmethod
    def create_async_strategy() -> AsyncStrategy:
        return AsyncStrategy()

    @staticmethod
    def create_geo_strategy(update_frequency: int = 100) -> GeoStrategy:
        return GeoStrategy(update_frequency)


install_gaps()
