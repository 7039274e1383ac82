"""The argument checks of Fluid 1.8's layers (``fluid.data_feeder``'s ``check_type``,
``check_dtype``, ``check_variable_and_dtype``) and its dtype names (``convert_dtype``).

Layer code calls them first thing, so a wrong argument fails where it was given, with Fluid's
message: ``The data type of 'x' in fc must be ['float32', 'float64'], but received int64.``

Example::

    check_variable_and_dtype(x, "x", ["float32", "float64"], "my_layer")
    convert_dtype(np.float32)        # 'float32'

Thread-safety: pure functions.
"""
from __future__ import annotations

import warnings
from typing import Any, Sequence

import numpy as np

from placegroup.ir.variable import Variable

__all__ = ["check_dtype", "check_type", "check_variable_and_dtype", "convert_dtype"]

# the dtypes Fluid 1.8's convert_dtype names; anything else is refused
_NAMES = ("bool", "float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8")


def convert_dtype(dtype: Any) -> str:
    """The name of a dtype Fluid 1.8 knows: ``"float32"`` for ``"float32"``, ``np.float32`` or
    ``np.dtype("float32")`` (a Variable's ``dtype`` is already such a name here).

    Python's ``float`` and ``int`` and names like ``"float"`` are refused, as Fluid refuses them;
    ``np.bool_`` is taken as ``"bool"`` (Fluid 1.8 takes ``np.bool``, which was Python's ``bool``).

    Raises:
        ValueError: any other dtype, with Fluid's message.
    """
    name = None
    if isinstance(dtype, str):
        name = dtype
    elif isinstance(dtype, type):
        if dtype is bool or dtype is np.bool_:
            name = "bool"
        elif issubclass(dtype, np.generic):
            name = np.dtype(dtype).name
    elif isinstance(dtype, np.dtype):
        name = dtype.name
    if name in _NAMES:
        return name
    raise ValueError("dtype must be any of [bool, float16, float32, float64, int8, int16, int32, int64, uint8]")


def check_type(input: Any, input_name: str, expected_type: type | tuple, op_name: str,
               extra_message: str = "") -> None:
    """Refuse ``input`` unless it is an instance of ``expected_type``.

    Raises:
        TypeError: ``The type of 'x' in fc must be <class ...>, but received <class ...>.``
    """
    if not isinstance(input, expected_type):
        raise TypeError(f"The type of '{input_name}' in {op_name} must be {expected_type}, but received "
                        f"{type(input)}. {extra_message}")


def check_dtype(input_dtype: Any, input_name: str, expected_dtype: Sequence[str], op_name: str,
                extra_message: str = "") -> None:
    """Refuse a dtype not among ``expected_dtype`` (names); float16 also warns that only GPU
    kernels take it, as in Fluid.

    Raises:
        TypeError: ``The data type of 'x' in fc must be [...], but received int64.``
        ValueError: ``input_dtype`` is no dtype Fluid knows (``convert_dtype``).
    """
    name = convert_dtype(input_dtype)
    if name == "float16":
        warnings.warn(f"The data type of '{input_name}' in {op_name} only support float16 in GPU now. "
                      f"{extra_message}")
    if name not in expected_dtype:
        raise TypeError(f"The data type of '{input_name}' in {op_name} must be {expected_dtype}, but received "
                        f"{name}. {extra_message}")


def check_variable_and_dtype(input: Any, input_name: str, expected_dtype: Sequence[str], op_name: str,
                             extra_message: str = "") -> None:
    """``check_type(input, ..., Variable, ...)``, then ``check_dtype(input.dtype, ...)``.

    Raises:
        TypeError: ``input`` is not a Variable, or its dtype is not expected.
    """
    check_type(input, input_name, Variable, op_name, extra_message)
    check_dtype(input.dtype, input_name, expected_dtype, op_name, extra_message)
