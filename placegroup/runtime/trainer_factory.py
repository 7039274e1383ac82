"""Fluid 1.8's ``TrainerFactory`` (which trainer describes a ``train_from_dataset`` run) and
``FetchHandlerMonitor`` (a thread that hands a ``FetchHandler`` the values of its vars every
``period_secs``).

``TrainerFactory()._create_trainer(opt_info)`` picks what Fluid's executor picks for a program:
``MultiTrainer`` + ``Hogwild`` for a program no fleet optimized (``opt_info`` None or empty),
otherwise the classes named by ``opt_info["trainer"]`` and ``opt_info["device_worker"]`` (what
pslib's fleet and the PipelineOptimizer put in ``program._fleet_opt`` /
``program._pipeline_opt``), with the debug and table settings the dict gives. The trainer is a
description (placegroup/runtime/trainer_desc.py, NOTE(trainer-desc-text)).

Example::

    trainer = TrainerFactory()._create_trainer(getattr(main, "_fleet_opt", None))
    monitor = FetchHandlerMonitor(fluid.global_scope(), handler)  # handler: a fluid.executor.FetchHandler
    monitor.start()
    ...                                                            # train
    monitor.stop()
"""
from __future__ import annotations

import logging
import threading

import numpy as np

from placegroup.runtime.device_worker import DownpourSGD, DownpourSGDOPT, Hogwild, Section
from placegroup.ir.framework import Variable
from placegroup.runtime.trainer_desc import DistMultiTrainer, MultiTrainer, PipelineTrainer

__all__ = ["TrainerFactory", "FetchHandlerMonitor"]

_log = logging.getLogger(__name__)

_TRAINERS = {c.__name__: c for c in (MultiTrainer, DistMultiTrainer, PipelineTrainer)}
_WORKERS = {c.__name__: c for c in (Hogwild, DownpourSGD, Section, DownpourSGDOPT)}
# opt_info key -> the trainer's setter, applied when the key is given (Fluid's order)
_DEBUG = ("dump_slot", "mpi_rank", "mpi_size", "dump_fields", "dump_fields_path", "dump_file_num", "dump_converter",
          "dump_param")
_FLEET = (("use_cvm", "_set_use_cvm"), ("no_cvm", "_set_no_cvm"), ("scale_datanorm", "_set_scale_datanorm"),
          ("adjust_ins_weight", "_set_adjust_ins_weight"), ("copy_table", "_set_copy_table_config"),
          ("check_nan_var_names", "_set_check_nan_var_names"), ("loss_names", "_set_loss_names"))


class TrainerFactory:
    """Makes the trainer description Fluid's executor would (module docstring)."""

    def _create_trainer(self, opt_info=None):
        """The trainer for a program whose ``_fleet_opt`` (or ``_pipeline_opt``) is ``opt_info``.

        Args:
            opt_info: None/empty (MultiTrainer + Hogwild), or a dict with ``trainer`` and
                ``device_worker`` class names and optional settings (``dump_fields``,
                ``fleet_desc``, ``use_cvm``, ``copy_table``, ...).

        Returns:
            A ``TrainerDesc`` subclass with its device worker set.

        Raises:
            KeyError: ``opt_info`` lacks ``trainer``/``device_worker`` or names an unknown class.
        """
        if not opt_info:
            trainer = MultiTrainer()
            trainer._set_device_worker(Hogwild())
            return trainer
        trainer = _pick(_TRAINERS, opt_info["trainer"], "trainer")()
        worker = _pick(_WORKERS, opt_info["device_worker"], "device worker")()
        for key in _DEBUG:
            if opt_info.get(key) is not None:
                getattr(trainer, f"_set_{key}")(opt_info[key])
        if "fleet_desc" in opt_info:
            worker._set_fleet_desc(opt_info["fleet_desc"])
            trainer._set_fleet_desc(opt_info["fleet_desc"])
            for key, setter in _FLEET:
                if opt_info.get(key) is not None:
                    getattr(trainer, setter)(opt_info[key])
        trainer._set_device_worker(worker)
        return trainer


def _pick(table: dict, name: str, what: str):
    if name not in table:
        raise KeyError(f"{name!r}: no {what} of that name; Fluid 1.8 has {sorted(table)}")
    return table[name]


class FetchHandlerMonitor:
    """Calls ``handler.handler(values)`` every ``handler.period_secs`` seconds on a daemon
    thread, with ``values`` a dict ``key -> numpy array`` of the vars of ``handler.var_dict``
    (``key -> Variable``; a var name is taken too) read from ``scope``, None for a var with
    no value yet. As Fluid's, it starts with ``start()`` and ends with ``stop()``.

    Args:
        scope: the scope the vars are read from (``fluid.global_scope()``).
        handler: a ``fluid.executor.FetchHandler`` (``var_dict``, ``period_secs``, ``handler``).

    Attributes:
        error: the exception that ended the thread early (a var holding a LoD, which an array
            cannot carry, as Fluid refuses; or the handler's own), else None.

    Thread-safety: ``start`` and ``stop`` from one thread. The values are read while the
    executor may be writing them (placegroup/executor/scope.py: the last value written).
    """

    def __init__(self, scope, handler) -> None:
        self.fetch_instance = handler
        self.fetch_thread = threading.Thread(target=self.handler_launch_func, args=(scope, handler), daemon=True,
                                             name="placegroup-fetch-handler")
        self.running_lock = threading.RLock()  # held while the handler runs: stop() waits for it
        self.running = False
        self.error: BaseException | None = None
        self._stopped = threading.Event()

    def handler_launch_func(self, scope, handler) -> None:
        """The thread's loop: wait ``period_secs``, read the vars, call the handler."""
        names = {}
        for key, var in handler.var_dict.items():
            if isinstance(var, (Variable, str)):
                names[var if isinstance(var, str) else var.name] = key
            else:
                _log.warning("the value of %s is not a Variable", key)
        period = float(handler.period_secs)
        while not self._stopped.wait(period):
            with self.running_lock:
                if not self.running:
                    return
                try:
                    handler.handler(self._read(scope, names))
                except BaseException as e:  # noqa: BLE001 - kept on self.error; the thread ends
                    self.error = e
                    _log.error("FetchHandlerMonitor stopped: %s", e)
                    self.running = False
                    return

    @staticmethod
    def _read(scope, names: dict) -> dict:
        out = {}
        for name, key in names.items():
            var = scope.find_var(name)
            if var is None:
                _log.warning("%s value currently not available", key)
                out[key] = None
                continue
            tensor = var.get_tensor()
            if tensor.lod():
                raise RuntimeError(f"fetched var {name!r} (key {key!r}) holds LoD information, which a numpy array "
                                   f"cannot carry; fetch another var")
            out[key] = np.array(tensor)
        return out

    def start(self) -> None:
        """Start the thread.

        Raises:
            RuntimeError: started before (a thread starts once).
        """
        with self.running_lock:
            self.running = True
        self.fetch_thread.start()

    def stop(self) -> None:
        """Stop: no handler call begins after this returns (one running finishes first)."""
        with self.running_lock:
            self.running = False
        self._stopped.set()
        if self.fetch_thread.is_alive() and self.fetch_thread is not threading.current_thread():
            self.fetch_thread.join()
