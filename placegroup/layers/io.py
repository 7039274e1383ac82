"""Data layers: where fed values enter the program."""
from __future__ import annotations

from placegroup.ir.framework import default_main_program

__all__ = ["data"]


def data(name: str, shape, dtype: str = "float32", lod_level: int = 0, append_batch_size: bool = True,
         stop_gradient: bool = True, type=None):
    """A var fed by ``exe.run(feed={name: array})``.

    With ``append_batch_size`` (the default) the batch dimension is prepended:
    ``data("x", shape=[13])`` has shape ``[-1, 13]``.
    """
    shape = [int(d) for d in shape]
    if append_batch_size:
        shape = [-1] + shape
    return default_main_program().global_block().create_var(
        name, shape=shape, dtype=dtype, is_data=True, stop_gradient=stop_gradient, lod_level=lod_level)
