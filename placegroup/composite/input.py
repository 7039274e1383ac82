"""The top-level input layers of Fluid 1.8: ``fluid.data``, ``fluid.embedding``, ``fluid.one_hot``.

They differ from their ``fluid.layers`` namesakes the way Fluid 1.8's do:

* ``fluid.data(name, shape)`` adds no batch dim (``None`` or -1 marks any size), and a feed
  is checked against its shape as Fluid 1.8 checks it, while ``fluid.layers.data`` prepends -1
  and takes a feed of any shape (NOTE(feed-shape) in executor/feed.py);
* ``fluid.embedding`` keeps every dim of its ids (``lookup_table_v2``: ids [N, 1] give
  [N, 1, D]); ``fluid.layers.embedding`` drops a trailing 1 ([N, D]);
* ``fluid.one_hot`` appends the depth dim (``one_hot_v2``: [N] -> [N, depth]);
  ``fluid.layers.one_hot`` replaces a trailing 1.

Example::

    ids = fluid.data(name="ids", shape=[None, 5], dtype="int64")
    emb = fluid.embedding(ids, size=[1000, 16], is_sparse=True)   # [-1, 5, 16]
"""
from __future__ import annotations

from placegroup.ir.framework import default_main_program
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers.nn import lookup

__all__ = ["data", "embedding", "one_hot"]


def data(name: str, shape, dtype: str = "float32", lod_level: int = 0):
    """A var fed by ``exe.run(feed={name: array})``, of exactly ``shape`` (no batch dim added;
    ``None`` or -1 is any size). A feed is checked as Fluid 1.8 checks it: no more dims than
    declared, each equal to the declared dim at its place unless that is -1; anything else is
    refused before any op runs (NOTE(feed-shape) in executor/feed.py).

    Example::

        x = fluid.data(name="x", shape=[None, 13], dtype="float32")
    """
    dims = [-1 if d is None else int(d) for d in shape]
    return default_main_program().global_block().create_var(
        name, shape=dims, dtype=dtype, is_data=True, stop_gradient=True, lod_level=lod_level,
        attrs={"need_check_feed": True})


def embedding(input, size, is_sparse: bool = False, is_distributed: bool = False, padding_idx=None,
              param_attr=None, dtype: str = "float32"):
    """Rows of a [V, D] table for every id of ``input``: shape ``input.shape + [D]``. The
    arguments are ``fluid.layers.embedding``'s.

    Example::

        emb = fluid.embedding(fluid.data("ids", [None, 1], "int64"), size=[100, 8])  # [-1, 1, 8]
    """
    return lookup("lookup_table_v2", input, size, is_sparse, is_distributed, padding_idx, param_attr, dtype)


def one_hot(input, depth: int, allow_out_of_range: bool = False):
    """float32 one-hot codes of the int ids ``input``: ``input.shape + [depth]``. An id outside
    [0, depth) is an error at run time, or a row of zeros with ``allow_out_of_range``.

    Example::

        fluid.one_hot(fluid.data("label", [None], "int64"), depth=10)   # [-1, 10]
    """
    helper = LayerHelper("one_hot_v2")
    out = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    helper.append_op("one_hot_v2", {"X": [input]}, {"Out": [out]},
                     {"depth": int(depth), "allow_out_of_range": bool(allow_out_of_range)})
    return out
