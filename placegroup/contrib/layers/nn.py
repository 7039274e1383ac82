"""Fluid 1.8's ``fluid.contrib.layers.nn``: ``shuffle_batch``.

Building a program is single-threaded, as in Fluid.
"""
from __future__ import annotations

from placegroup.initializer import ConstantInitializer
from placegroup.ir import unique_name
from placegroup.ir.framework import Variable
from placegroup.layer_helper import LayerHelper
from placegroup.layers.tensor import _op_seed

__all__ = ["shuffle_batch"]


def shuffle_batch(x, seed=None):
    """The rows of ``x`` (its last dim; the others flattened) in a random order, new each step.

    Word2vec's negative samples are the batch's own true-word embeddings shuffled. The gradient
    goes back to each row where it came from. Out keeps ``x``'s LoD; the op's permutations are
    not Fluid's numbers (NOTE(shuffle-batch) in ops/random.py).

    Args:
        x: a Variable of at least 1 dim (float32, float64, int32 or int64).
        seed: an int (the start of the draws), an int64 [1] Variable holding it, or None: the
            program's ``random_seed`` when it is set, as in Fluid (every such op then draws the
            same permutations of equally many rows), else a seed of the op's own.

    Returns:
        Variable: ``x``'s rows permuted, of its shape and dtype.

    Raises:
        ValueError: ``seed`` is of another kind.

    Example::

        x = fluid.layers.data(name="x", shape=[-1, 4])
        out = fluid.contrib.layers.shuffle_batch(x)
    """
    helper = LayerHelper("shuffle_batch")
    out = helper.create_variable_for_type_inference(x.dtype)
    idx = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    start = 0
    if seed is None:
        program = helper.main_program
        k = sum(op.type == "shuffle_batch" for b in program.blocks for op in b.ops)
        start = program.random_seed or _op_seed(0, "shuffle_batch", k)
    elif isinstance(seed, int) and not isinstance(seed, bool):
        start = seed
    elif not isinstance(seed, Variable):
        raise ValueError(f"shuffle_batch: seed must be an int, an int64 Variable or None, got {seed!r}")
    if not isinstance(seed, Variable):  # Fluid's persistable seed var, here started at startup_seed
        seed = helper.create_global_variable(name=unique_name.generate("shuffle_batch_seed"), persistable=True,
                                             shape=[1], dtype="int64", stop_gradient=True)
        helper.set_variable_initializer(seed, ConstantInitializer(float(start)))
    helper.append_op("shuffle_batch", {"X": [x], "Seed": [seed]},
                     {"Out": [out], "ShuffleIdx": [idx], "SeedOut": [seed]}, {"startup_seed": start})
    return out
