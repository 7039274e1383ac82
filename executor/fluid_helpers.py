"""The helpers Fluid 1.8's ``fluid.executor`` module defines beside ``Executor``: a fetched
tensor as numpy (``as_numpy``), the feed checks (``check_feed_shape_type`` and the dtype and
dimension tests under it), whether a program already has its feed and fetch targets
(``has_feed_operators``, ``has_fetch_operators``), and ``FetchHandler``, which
``train_from_dataset(fetch_handler=...)`` calls every ``period_secs`` with the vars it names.

NOTE(feed-fetch-targets) in placegroup/ir/framework_helpers.py says how a program records its
feed and fetch targets here: names in ``Program.extra``, where Fluid has ``feed`` and ``fetch``
ops; no holder var exists, so the holder names the two ``has_*`` functions take are not checked.

Example::

    fluid.executor.as_numpy(scope.find_var("fc_0.w_0").get_tensor())
    fluid.executor.dimension_is_compatible_with([-1, 3], [8, 3])    # True

Thread-safety: pure functions; a FetchHandler keeps only its arguments.
"""
from __future__ import annotations

import sys
from typing import Any, Sequence

import numpy as np

from placegroup.errors import ProgramError
from placegroup.executor.feed import check_fluid_data_shape
from placegroup.executor.scope import Tensor
from placegroup.ir.framework_helpers import FEED_TARGETS, FETCH_TARGETS, convert_np_dtype_to_dtype_
from placegroup.values import LoDTensor

__all__ = ["FetchHandler", "as_numpy", "check_feed_shape_type", "dimension_is_compatible_with",
           "dtype_is_compatible_with", "has_feed_operators", "has_fetch_operators"]


def as_numpy(tensor: Any):
    """A fetched tensor as a numpy array: a ``LoDTensor``, a scope's tensor view
    (``scope.find_var(name).get_tensor()``) or a numpy array; a list or ``LoDTensorArray``
    of them gives a list. A tensor that holds no value gives None.

    Raises:
        RuntimeError: the tensor has a LoD (Fluid's message: fetch it with
            ``return_numpy=False`` to keep the LoD).
    """
    if isinstance(tensor, list) or (hasattr(tensor, "append") and hasattr(tensor, "__iter__")):
        return [as_numpy(t) for t in tensor]  # a list or a fluid.core.LoDTensorArray
    if isinstance(tensor, (LoDTensor, Tensor)):
        try:
            lod = tensor.lod()
        except ValueError:  # a scope's view of a var with no value yet
            return None
        if lod:
            raise RuntimeError("Some of your fetched tensors hold LoD information. They can not be completely "
                               "cast to Python ndarray. Please set the parameter 'return_numpy' as 'False' to "
                               "return LoDTensor itself directly.")
        if isinstance(tensor, LoDTensor) and tensor.data is None:
            return None
    return np.array(tensor)


def dtype_is_compatible_with(first: Any, second: Any) -> bool:
    """Whether two dtypes (any numpy form, or a Variable's dtype) are the same Fluid dtype.

    Raises:
        ValueError: a dtype Fluid has no VarType for (``convert_np_dtype_to_dtype_``).
    """
    return convert_np_dtype_to_dtype_(first) == convert_np_dtype_to_dtype_(second)


def dimension_is_compatible_with(first: Sequence, second: Sequence) -> bool:
    """Whether two shapes agree: the same rank, and equal dims wherever both are known (None
    or a negative dim is unknown)."""
    if len(first) != len(second):
        return False
    return all(a is None or b is None or a < 0 or b < 0 or a == b for a, b in zip(first, second))


def check_feed_shape_type(var: Any, feed: Any, num_places: int = 1) -> bool:
    """Check a value fed to ``var`` as Fluid 1.8 does, for a ``fluid.data`` var only: its shape
    by NOTE(feed-shape) in executor/feed.py (with ``num_places`` > 1, dim 0 is each device's
    share), and its dtype equal to the var's. A ``fluid.layers.data`` var takes anything.

    Args:
        var: the Variable fed.
        feed: the value (a LoDTensor, a scope's tensor view or a numpy array).
        num_places: the devices the batch is split over.

    Returns:
        True.

    Raises:
        ValueError: the shape or dtype does not fit, with Fluid's message (and why).
    """
    if not var.attrs.get("need_check_feed"):
        return True
    arr = feed.data if isinstance(feed, LoDTensor) else np.asarray(feed)
    shape = list(arr.shape)
    if num_places > 1 and shape:
        shape[0] //= num_places
    try:
        check_fluid_data_shape(var.name, tuple(var.shape), shape)
    except ProgramError as e:
        raise ValueError(f"The fed Variable {var.name!r} should have dimensions = {len(var.shape)}, shape = "
                         f"{tuple(var.shape)!r}, but received fed shape {shape!r} on each device ({e})") from None
    if not dtype_is_compatible_with(arr.dtype, var.dtype):
        raise ValueError(f"The data type of fed Variable {var.name!r} must be {var.dtype!r}, but received "
                         f"{np.dtype(arr.dtype).name!r}")
    return True


def has_feed_operators(block: Any, feed_targets: dict, feed_holder_name: str) -> bool:
    """Whether ``block``'s program records its feed targets (NOTE(feed-fetch-targets)), and if
    so, that they are the keys of ``feed_targets``.

    Raises:
        ProgramError: a recorded target not in ``feed_targets``, or a different number of them.
    """
    names = block.program.extra.get(FEED_TARGETS) if block.idx == 0 else None
    if not names:
        return False
    for name in names:
        if name not in feed_targets:
            raise ProgramError(f"'feed_targets' does not have {name} variable (the program's feed targets are "
                               f"{list(names)})")
    if len(names) != len(feed_targets):
        raise ProgramError(f"Feed operators in program desc do not match 'feed_targets': the program feeds "
                           f"{list(names)}, feed_targets has {sorted(feed_targets)}")
    return True


def has_fetch_operators(block: Any, fetch_targets: Sequence, fetch_holder_name: str) -> bool:
    """Whether ``block``'s program records its fetch targets (NOTE(feed-fetch-targets)), and if
    so, that they are ``fetch_targets`` (Variables or names), in that order.

    Raises:
        ProgramError: a recorded target not in ``fetch_targets``, at another position, or a
            different number of them.
    """
    names = block.program.extra.get(FETCH_TARGETS) if block.idx == 0 else None
    if not names:
        return False
    given = [getattr(t, "name", t) for t in fetch_targets]
    for col, name in enumerate(names):
        if name not in given:
            raise ProgramError(f"'fetch_targets' does not have {name} variable (the program's fetch targets are "
                               f"{list(names)})")
        if col < len(given) and given[col] != name:
            raise ProgramError(f"fetch target {col} of the program is {name!r}, but fetch_targets[{col}] is "
                               f"{given[col]!r}")
    if len(names) != len(given):
        raise ProgramError(f"Fetch operators in program desc do not match 'fetch_targets': the program fetches "
                           f"{list(names)}, fetch_targets has {given}")
    return True


class FetchHandler:
    """What ``train_from_dataset(fetch_handler=...)`` calls every ``period_secs`` seconds with
    ``{key: value}`` of the vars of ``var_dict`` (numpy arrays; None for a var with no value yet).
    Subclass it and override ``handler``; the default prints each value's first element.

    Args:
        var_dict: ``{key: Variable or var name}``.
        period_secs: seconds between calls.

    Raises:
        ValueError: no ``var_dict``.

    Example::

        class ShowAuc(fluid.executor.FetchHandler):
            def handler(self, res_dict):
                print("auc:", res_dict["auc"])

        exe.train_from_dataset(main, dataset, fetch_handler=ShowAuc({"auc": auc_var}, period_secs=30))
    """

    def __init__(self, var_dict: dict | None = None, period_secs: float = 60) -> None:
        if var_dict is None:
            raise ValueError("FetchHandler: var_dict is needed ({key: Variable})")
        self.var_dict = var_dict
        self.period_secs = period_secs

    def handler(self, res_dict: dict) -> None:
        """Print ``<key>[0]: <value[0]>`` for each numpy value, on one line."""
        for key, value in res_dict.items():
            if type(value) is np.ndarray:
                sys.stdout.write(f"{key}[0]: {value[0]} ")
        sys.stdout.write("\n")

    @staticmethod
    def help() -> None:
        """Print an example of a FetchHandler subclass."""
        print('''
class FetchHandlerExample(FetchHandler):
    def handler(self, res_dict):
        print(res_dict["auc"])
        print("auc: {}, {}".format(res_dict["auc"], time.ctime()))

auc = Variable()
var_dict = {"auc": auc}
handler = FetchHandlerExample(var_dict=var_dict)
''')
