"""The smaller helpers of Fluid 1.8's ``fluid.io``: marking an inference program's feed and
fetch targets (``prepend_feed_ops``, ``append_fetch_ops``), reading one parameter's value
(``get_parameter_value``, ``get_parameter_value_by_name``), and ``is_belong_to_optimizer``.

Fluid prepends ``feed`` ops and appends ``fetch`` ops; here the targets' names are recorded in
``Program.extra`` (NOTE(feed-fetch-targets) in placegroup/ir/framework_helpers.py), as
``save_inference_model`` records them, so a program marked this way and saved with
``save_program`` loads with ``load_inference_model``. The executor feeds and fetches by name
whatever a program records.

Example::

    prepend_feed_ops(program, ["x"]); append_fetch_ops(program, [pred.name])
    w = get_parameter_value_by_name("fc_0.w_0", exe)     # numpy array

Thread-safety: as the executor's: read values between steps.
"""
from __future__ import annotations

from typing import Any, Sequence

from placegroup.errors import ProgramError
from placegroup.io.var_files import is_parameter, is_persistable
from placegroup.ir.framework import Program, default_main_program
from placegroup.ir.framework_helpers import FEED_TARGETS, FETCH_TARGETS

__all__ = ["append_fetch_ops", "get_parameter_value", "get_parameter_value_by_name", "is_belong_to_optimizer",
           "prepend_feed_ops"]


def _checked_names(program: Program, names: Sequence[str], what: str) -> list[str]:
    block = program.global_block()
    names = [getattr(n, "name", n) for n in names]
    for n in names:
        if not block.has_var(n):
            raise ProgramError(f"{what}: {n!r} is not a var of the program's global block")
    return names


def prepend_feed_ops(inference_program: Program, feed_target_names: Sequence[str],
                     feed_holder_name: str = "feed") -> None:
    """Record ``feed_target_names`` as the program's feed targets, in order (nothing for none).

    ``feed_holder_name`` names Fluid's holder var, which placegroup has no use for.

    Raises:
        ProgramError: a name that is not a var of the program.
    """
    if not feed_target_names:
        return
    inference_program.extra[FEED_TARGETS] = _checked_names(inference_program, feed_target_names, "prepend_feed_ops")
    inference_program._bump()


def append_fetch_ops(inference_program: Program, fetch_target_names: Sequence[str],
                     fetch_holder_name: str = "fetch") -> None:
    """Record ``fetch_target_names`` as the program's fetch targets, in order.

    Raises:
        ProgramError: a name that is not a var of the program.
    """
    inference_program.extra[FETCH_TARGETS] = _checked_names(inference_program, fetch_target_names,
                                                            "append_fetch_ops")
    inference_program._bump()


def get_parameter_value(para: Any, executor: Any):
    """The value of parameter ``para`` in the executor's scope (the global scope), as a numpy
    array: what ``executor.run`` fetches for it from a program holding only that var.

    Raises:
        TypeError: ``para`` is not a parameter.
        MissingInput: it has no value yet (run the startup program first).
    """
    if not is_parameter(para):
        raise TypeError(f"The input variable is not parameter: {para!r}")
    program = Program()
    v = program.global_block().create_var(para.name, shape=para.shape, dtype=para.dtype, persistable=True)
    return executor.run(program, feed={}, fetch_list=[v])[0]


def get_parameter_value_by_name(name: str, executor: Any, program: Program | None = None):
    """``get_parameter_value`` of the parameter ``name`` of ``program`` (default: the default
    main program).

    Raises:
        ProgramError: no var ``name`` in the program; TypeError: it is not a parameter.
    """
    program = program if program is not None else default_main_program()
    return get_parameter_value(program.global_block().var(name), executor)


def is_belong_to_optimizer(var: Any) -> bool:
    """Whether ``var`` is optimizer state: persistable, and neither a parameter nor a
    ``fluid.data`` var (a learning rate, a moment, a beta power, a step counter)."""
    if is_parameter(var) or var.attrs.get("need_check_feed"):
        return False
    return is_persistable(var)
