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
(slice_var_up, min_block_size, split_method, staleness, ...); the transpiler gets it with the
strategy's mode as its ``sync_mode``. The trainer and server runtime configurations tune
Fluid's communicator and RPC threads, which placegroup does not have: they are kept, and have
no effect. Every config is set as in Fluid 1.8.5: by assignment on what a getter returns, or
through a setter with a config or a dict of its fields (placegroup/util/fields.py checks each).

Example::

    strategy = StrategyFactory.create_sync_strategy()
    strategy.set_program_config({"slice_var_up": False})
    optimizer = fleet.distributed_optimizer(fluid.optimizer.SGD(0.01), strategy)
"""
from __future__ import annotations

import difflib
import logging

import numpy as np

from placegroup import config as env_config
from placegroup.tools.compat import install_gaps
from placegroup.model.compiler import BuildStrategy, ExecutionStrategy
from placegroup.util.fields import Field, Fields, notice
from placegroup.transpiler.config import DistributedMode, DistributeTranspilerConfig, ServerRuntimeConfig

__all__ = ["TrainerRuntimeConfig", "DistributedStrategy", "SyncStrategy", "AsyncStrategy",
           "HalfAsyncStrategy", "GeoStrategy", "StrategyFactory"]

log = logging.getLogger("placegroup.fleet")


_COMMUNICATOR = ("it tunes Fluid's communicator (its send threads, queues and RPC deadlines), which "
                 "placegroup does not have")


def _runtime_defaults() -> dict:
    """Fluid 1.8.5's communicator settings, as the strings Fluid reads from the environment (the
    ``FLAGS_communicator_*`` variables are not read: they change nothing here)."""
    n = str(env_config.get("CPU_NUM"))
    return {"communicator_max_merge_var_num": n, "communicator_send_queue_size": n,
            "communicator_independent_recv_thread": "1", "communicator_min_send_grad_num_before_recv": n,
            "communicator_thread_pool_size": "5", "communicator_send_wait_times": "5",
            "communicator_is_sgd_optimizer": "1", "rpc_deadline": "180000", "rpc_retry_times": "3"}


# the keys Fluid's get_communicator_flags gives in each mode (all of them: None or ASYNC)
_MODE_KEYS = {
    DistributedMode.SYNC: ("communicator_max_merge_var_num", "communicator_send_wait_times",
                           "communicator_thread_pool_size", "communicator_send_queue_size"),
    DistributedMode.GEO: ("communicator_thread_pool_size", "communicator_send_wait_times"),
}
_MODE_KEYS[DistributedMode.HALF_ASYNC] = _MODE_KEYS[DistributedMode.SYNC]


class TrainerRuntimeConfig(Fields):
    """Fluid's communicator settings (``runtime_configs``, a dict of Fluid 1.8.5's keys): kept,
    with no effect here; ``mode`` is the ``DistributedMode`` a named strategy records."""

    _OPEN = True
    _FIELDS = {
        "mode": Field("any", None),
        "runtime_configs": Field(dict, {}, _COMMUNICATOR),
    }

    def __init__(self) -> None:
        super().__init__()
        self._assign(runtime_configs=_runtime_defaults())

    def get_communicator_flags(self) -> dict:
        """The settings Fluid's communicator would read in this mode, as strings."""
        keys = _MODE_KEYS.get(self.mode, tuple(self.runtime_configs))
        return {k: str(self.runtime_configs[k]) for k in keys if k in self.runtime_configs}

    def __repr__(self) -> str:
        rows = "\n".join(f"{k:<45s}{v}" for k, v in self.get_communicator_flags().items())
        return f"TrainerRuntimeConfig ({'no mode' if self.mode is None else f'mode {self.mode}'}):\n{rows}"


def _set_keys(target: Fields, values: dict) -> None:
    """Set each key of ``values`` on ``target`` by assignment, as Fluid's strategy setters do.

    Raises:
        ValueError: a key ``target`` has not (Fluid's error), naming the closest field.
        TypeError: a value of the wrong type, naming the key.
    """
    owner = type(target).__name__
    for key, value in values.items():
        if not hasattr(target, key):
            close = difflib.get_close_matches(str(key), list(target._FIELDS), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ValueError(f"{owner} doesn't have key: {key}{hint}")
        setattr(target, key, value)


def _takes(config, kind: type, what: str) -> None:
    if not isinstance(config, (kind, dict)):
        raise TypeError(f"{what} only accept input type: dict or {kind.__name__}, got {type(config).__name__}")


class DistributedStrategy:
    """The base: the program configuration decides the mode (its ``sync_mode``); use
    ``StrategyFactory`` for the named ones.

    Each getter returns the object itself, to be set by assignment; each setter takes such an
    object (which replaces the strategy's) or a dict of its fields (set one by one on the
    strategy's), as in Fluid 1.8.5. A named strategy then sets the fields its mode fixes again,
    as Fluid's ``check_*`` methods do (NOTE(strategy-fields)).

    Example::

        s = DistributedStrategy(); s.set_program_config({"sync_mode": False}); s.sync_mode()  # False
    """

    _sync: bool | None = None  # the mode a named strategy fixes; None: the program config's
    _mode: int | None = None   # the DistributedMode it records in the trainer runtime config

    def __init__(self) -> None:
        self._program_config = DistributeTranspilerConfig()
        self._trainer_runtime_config = TrainerRuntimeConfig()
        self._server_runtime_config = ServerRuntimeConfig()
        self._execute_strategy = ExecutionStrategy()
        self._build_strategy = BuildStrategy()
        # Fluid's defaults for a fleet job: CPU_NUM threads, and Reduce over several of them
        threads = env_config.get("CPU_NUM")
        self._execute_strategy._assign(num_threads=threads)
        if threads > 1:
            self._build_strategy._assign(reduce_strategy=BuildStrategy.ReduceStrategy.Reduce)
        self.debug_opt = None
        self._fix_all()

    # NOTE(strategy-fields): Fluid 1.8.5's named strategies set fields of their configs that say
    # their mode (SyncStrategy: sync_mode = False, runtime_split_send_recv, half_async and
    # completely_not_async = True, and so on), at construction and again after each setter. The
    # same values are set here, without notices (the script did not set them), so a script
    # reading them reads Fluid's. placegroup takes the mode from the strategy itself
    # (``sync_mode()``), and ``transpiler_config()`` hands the transpiler a copy whose sync_mode
    # is that mode.
    def _fix_program_config(self) -> None:
        pass

    def _fix_runtime_config(self) -> None:
        if self._mode is not None:
            self._trainer_runtime_config._assign(mode=self._mode)

    def _fix_execute_strategy(self) -> None:
        pass

    def _fix_build_strategy(self) -> None:
        if self._sync is not None:
            self._build_strategy._assign(async_mode=True)

    def _fix_all(self) -> None:
        self._fix_program_config()
        self._fix_runtime_config()
        self._fix_execute_strategy()
        self._fix_build_strategy()

    def sync_mode(self) -> bool:
        """Whether placegroup runs this strategy in sync mode (else async)."""
        return self._program_config.sync_mode if self._sync is None else self._sync

    def transpiler_config(self) -> DistributeTranspilerConfig:
        """The config the transpiler gets: the program config with this strategy's mode."""
        return self._program_config._copy(sync_mode=self.sync_mode())

    def set_debug_opt(self, opt_info) -> None:
        self.debug_opt = opt_info

    def get_debug_opt(self) -> dict:
        """Fluid's dump options (``set_debug_opt``), with its defaults; placegroup dumps nothing."""
        d = self.debug_opt if isinstance(self.debug_opt, dict) else None
        if d is None:
            return {}
        return {"dump_slot": bool(d.get("dump_slot", 0)), "dump_converter": str(d.get("dump_converter", "")),
                "dump_fields": d.get("dump_fields", []), "dump_file_num": d.get("dump_file_num", 16),
                "dump_fields_path": d.get("dump_fields_path", ""), "dump_param": d.get("dump_param", [])}

    def get_program_config(self) -> DistributeTranspilerConfig:
        return self._program_config

    def set_program_config(self, config) -> None:
        """Set the program configuration: a ``DistributeTranspilerConfig``, or a dict of its fields.

        Raises:
            TypeError: neither; a value of the wrong type (naming the key).
            ValueError: a key the config does not have (naming the closest), or a bad value.
            ConfigError: a value placegroup refuses (DistributeTranspilerConfig's).
        """
        _takes(config, DistributeTranspilerConfig, "program_config")
        if isinstance(config, dict):
            _set_keys(self._program_config, config)
        else:
            self._program_config = config
        self._fix_program_config()

    def get_trainer_runtime_config(self) -> TrainerRuntimeConfig:
        return self._trainer_runtime_config

    def set_trainer_runtime_config(self, config) -> None:
        """Set the communicator settings: a ``TrainerRuntimeConfig``, or a dict of its
        ``runtime_configs`` keys (Fluid 1.8.5's); kept, and they change nothing here.

        Raises:
            TypeError: neither; a value that is not a str, int, float or bool (naming the key).
            ValueError: a key Fluid's runtime configs have not (naming the closest).
        """
        _takes(config, TrainerRuntimeConfig, "trainer_runtime_config")
        if isinstance(config, dict):
            known = self._trainer_runtime_config.runtime_configs
            for key, value in config.items():
                if key not in known:
                    close = difflib.get_close_matches(str(key), list(known), n=1)
                    hint = f"; did you mean {close[0]!r}?" if close else ""
                    raise ValueError(f"TrainerRuntimeConfig doesn't have key: {key}{hint}")
                if not isinstance(value, (str, int, float, np.number, np.bool_)):
                    raise TypeError(f"TrainerRuntimeConfig {key} must be a str or a number, got {value!r} "
                                    f"({type(value).__name__})")
            if any(str(known[k]) != str(v) for k, v in config.items()):
                notice("TrainerRuntimeConfig.runtime_configs",
                       f"TrainerRuntimeConfig.runtime_configs changes nothing in placegroup: {_COMMUNICATOR}")
            known.update(config)
        else:
            self._trainer_runtime_config = config
        self._fix_runtime_config()

    def get_server_runtime_config(self) -> ServerRuntimeConfig:
        return self._server_runtime_config

    def set_server_runtime_config(self, config) -> None:
        """Set the pservers' RPC thread counts: a ``ServerRuntimeConfig`` or a dict of its
        fields (``_rpc_send_thread_num``, ...); kept, and they change nothing here."""
        _takes(config, ServerRuntimeConfig, "server_runtime_config")
        if isinstance(config, dict):
            _set_keys(self._server_runtime_config, config)
        else:
            self._server_runtime_config = config

    def get_execute_strategy(self) -> ExecutionStrategy:
        return self._execute_strategy

    def set_execute_strategy(self, config) -> None:
        """Set the execution strategy: an ``ExecutionStrategy`` or a dict of its fields."""
        _takes(config, ExecutionStrategy, "execute_strategy")
        if isinstance(config, dict):
            _set_keys(self._execute_strategy, config)
        else:
            self._execute_strategy = config
        self._fix_execute_strategy()

    def get_build_strategy(self) -> BuildStrategy:
        return self._build_strategy

    def set_build_strategy(self, config) -> None:
        """Set the build strategy: a ``BuildStrategy`` or a dict of its fields."""
        _takes(config, BuildStrategy, "build_strategy")
        if isinstance(config, dict):
            _set_keys(self._build_strategy, config)
        else:
            self._build_strategy = config
        self._fix_build_strategy()


class SyncStrategy(DistributedStrategy):
    """Sync training: every step's gradients of all trainers merged on the pservers."""
    _sync = True
    _mode = DistributedMode.SYNC

    def _fix_program_config(self) -> None:
        self._program_config._assign(sync_mode=False, runtime_split_send_recv=True, half_async=True,
                                     completely_not_async=True)

    def _fix_execute_strategy(self) -> None:
        self._execute_strategy._assign(use_thread_barrier=True)


class AsyncStrategy(DistributedStrategy):
    """Async training: each trainer's gradient applied alone as it arrives."""
    _sync = False
    _mode = DistributedMode.ASYNC

    def _fix_program_config(self) -> None:
        self._program_config._assign(sync_mode=False, runtime_split_send_recv=True)


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
    _mode = DistributedMode.HALF_ASYNC

    def _fix_program_config(self) -> None:
        self._program_config._assign(sync_mode=False, runtime_split_send_recv=True, half_async=True)

    def _fix_execute_strategy(self) -> None:
        self._execute_strategy._assign(use_thread_barrier=True)


class GeoStrategy(_AsyncStandIn):
    """Fluid's GEO-SGD (push parameter deltas every ``update_frequency`` steps); runs as async
    here, with a warning.

    Args:
        update_frequency: Fluid's push interval, kept as ``update_frequency`` and as the program
            config's ``geo_sgd_need_push_nums``.
    """
    _what = "GeoStrategy (Fluid's GEO-SGD)"
    _mode = DistributedMode.GEO

    def __init__(self, update_frequency: int = 100) -> None:
        self.update_frequency = update_frequency
        super().__init__()
        self._program_config._assign(geo_sgd_need_push_nums=update_frequency)

    def _fix_program_config(self) -> None:
        self._program_config._assign(sync_mode=False, runtime_split_send_recv=True, geo_sgd_mode=True)


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
