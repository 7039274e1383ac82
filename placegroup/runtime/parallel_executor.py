"""``fluid.ParallelExecutor``: Fluid 1.x's multi-device executor, as an Executor running a
``CompiledProgram`` with data parallel (NOTE(data-parallel) in placegroup/model/data_parallel.py).

Example::

    pe = fluid.ParallelExecutor(use_cuda=False, loss_name=avg_cost.name, main_program=main)
    loss, = pe.run(fetch_list=[avg_cost.name], feed={"x": xs, "y": ys})

Thread-safety: as an Executor: one run at a time.
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

from placegroup.model.compiler import BuildStrategy, CompiledProgram, ExecutionStrategy, cpu_places, cuda_places
from placegroup.executor import Executor, global_scope
from placegroup.ir.framework import default_main_program
from placegroup.ir.places import CPUPlace, CUDAPlace

__all__ = ["ParallelExecutor"]


class ParallelExecutor:
    """Runs ``main_program`` data parallel on every CPU place (``CPU_NUM``) or CUDA device.

    Args:
        use_cuda: run on CUDAPlace(0) (the CUDA devices), or on the CPU.
        loss_name: the loss var's name; required when the program trains.
        main_program: the program (default: ``default_main_program()``).
        share_vars_from: another ParallelExecutor, run before this one, whose scope this one uses.
        exec_strategy: an ``ExecutionStrategy``.
        build_strategy: a ``BuildStrategy``; ``num_trainers`` and ``trainer_id`` here override its own.
        num_trainers, trainer_id: Fluid's NCCL2 training (num_trainers > 1 is refused unless the
            program was transpiled, placegroup/model/compiler.py).
        scope: where values live (default: ``global_scope()``).

    Raises:
        TypeError: share_vars_from is not a ParallelExecutor.
        NotImplementedError: a strategy value placegroup cannot honour.
    """

    def __init__(self, use_cuda: bool, loss_name: str | None = None, main_program=None, share_vars_from=None,
                 exec_strategy: ExecutionStrategy | None = None, build_strategy: BuildStrategy | None = None,
                 num_trainers: int = 1, trainer_id: int = 0, scope=None) -> None:
        build_strategy = build_strategy if build_strategy is not None else BuildStrategy()
        if num_trainers != 1 and build_strategy.num_trainers != num_trainers:
            sys.stderr.write(f"The value of build_strategy.num_trainers[{build_strategy.num_trainers}] is "
                             f"overwritten by the passed num_trainers[{num_trainers}].\n")
            build_strategy.num_trainers = num_trainers
        if trainer_id != 0 and build_strategy.trainer_id != trainer_id:
            sys.stderr.write(f"The value of build_strategy.trainer_id[{build_strategy.trainer_id}] is "
                             f"overwritten by the passed trainer_id[{trainer_id}].\n")
            build_strategy.trainer_id = trainer_id
        if share_vars_from is not None and not isinstance(share_vars_from, ParallelExecutor):
            raise TypeError(f"ParallelExecutor: share_vars_from must be a ParallelExecutor, got {share_vars_from!r}")
        self._places = cuda_places() if use_cuda else cpu_places()
        self._scope = scope if scope is not None else global_scope()
        program = main_program if main_program is not None else default_main_program()
        self._compiled_program = CompiledProgram(program).with_data_parallel(
            loss_name=loss_name, build_strategy=build_strategy, exec_strategy=exec_strategy,
            share_vars_from=share_vars_from._compiled_program if share_vars_from is not None else None,
            places=self._places)
        self._exe = Executor(CUDAPlace(0) if use_cuda else CPUPlace())

    def run(self, fetch_list: Sequence, feed: Any = None, feed_dict: Any = None, return_numpy: bool = True) -> list:
        """One step; note Fluid's argument order, ``fetch_list`` first.

        Args:
            fetch_list: vars or names to return.
            feed: a feed dict, or a list of one per place; ``feed_dict`` is its old name.
            return_numpy: numpy arrays (True) or the raw values.

        Returns:
            One value per ``fetch_list`` entry, the places' values joined (NOTE(data-parallel)).

        Raises:
            As ``Executor.run``, ``fluid.core.EOFException`` among them.
        """
        if feed is None and feed_dict is not None:
            feed = feed_dict
            print("`feed_dict` is deprecated. Please use `feed=`", file=sys.stderr)
        return self._exe.run(self._compiled_program, feed=feed, fetch_list=fetch_list, scope=self._scope,
                             return_numpy=return_numpy)

    @property
    def device_count(self) -> int:
        """How many places Fluid would split each batch over."""
        return len(self._places)

    def drop_local_exe_scopes(self) -> None:
        """Fluid frees its per-device scopes here; placegroup has none (a step's temporaries
        go as it ends)."""

    def close(self) -> None:
        """Close the underlying Executor (what a distributed trainer must do at the end)."""
        self._exe.close()
