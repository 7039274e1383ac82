"""Random initializers: uniform_random, gaussian_random, from a counter-based generator.

NOTE(counter-rng): the value at flat index ``i`` of the *whole* var is ``f(seed, i)``
(splitmix64 of ``seed`` and ``i``), so any box of the var (a row block on a pserver, a column
shard of a model-parallel fc) or strided row set (the rows ``k, k+M, k+2M, ...`` of an
embedding table's shard k) is generated alone, exactly equal to the same slice of the whole
var, without ever making the whole var. ``whole_shape``,
``offsets`` and ``strides`` say which part this op makes: along dim d, indices
``offsets[d] + strides[d] * arange(shape[d])``; empty means the op's own shape, offset 0, step 1.
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, register

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)


def _mix(xp, z):
    z = (z ^ (z >> np.uint64(30))) * _M1
    z = (z ^ (z >> np.uint64(27))) * _M2
    return z ^ (z >> np.uint64(31))


def flat_indices(xp, shape, whole_shape=(), offsets=(), strides=()):
    """Flat indices, in the whole var, of the part ``shape`` at ``offsets`` with ``strides``."""
    shape = tuple(int(d) for d in shape)
    whole = tuple(int(d) for d in whole_shape) or shape
    offs = tuple(int(o) for o in offsets) or (0,) * len(shape)
    steps = tuple(int(s) for s in strides) or (1,) * len(shape)
    if not len(whole) == len(offs) == len(steps) == len(shape):
        raise ValueError(f"part {list(shape)} at {list(offs)} step {list(steps)} does not fit whole "
                         f"shape {list(whole)}")
    for n, o, st, w in zip(shape, offs, steps, whole):
        if o < 0 or st < 1 or (n and o + st * (n - 1) >= w):
            raise ValueError(f"part {list(shape)} at {list(offs)} step {list(steps)} lies outside whole "
                             f"shape {list(whole)}")
    idx = xp.zeros(shape, dtype=np.uint64)
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        r = (offs[d] + steps[d] * xp.arange(shape[d], dtype=np.uint64)) * np.uint64(stride)
        idx = idx + r.reshape((-1,) + (1,) * (len(shape) - 1 - d))
        stride *= whole[d]
    return idx


def uniform01(xp, seed: int, idx):
    """Uniform [0, 1) float64 values, one per uint64 counter in ``idx``."""
    with np.errstate(over="ignore"):
        key = _mix(xp, xp.asarray(np.uint64(seed & 0xFFFFFFFFFFFFFFFF)) * _GOLDEN + _GOLDEN)
        z = _mix(xp, key + (idx + np.uint64(1)) * _GOLDEN)
    return (z >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


_RAND_ATTRS = {"shape": [1], "dtype": "float32", "seed": 0, "whole_shape": [], "offsets": [], "strides": [],
               "rank_axis": -1}


def _infer(ins, a):
    return {"Out": Meta(tuple(a["shape"]), a["dtype"])}


CHUNK = 1 << 20  # elements generated at a time: a 10M-row table never needs 10x its size


def _generate(xp, a, rank: int, values) -> dict:
    """Out, made ``CHUNK`` elements of rows at a time by ``values(idx) -> float64 array``;
    ``rank``: this executor's index among those that run the op (``KernelContext.rank``)."""
    shape = tuple(int(d) for d in a["shape"])
    out = xp.empty(shape, dtype=a["dtype"])
    if not shape or out.size == 0:
        out[...] = values(flat_indices(xp, shape, a["whole_shape"], a["offsets"], a["strides"]))
        return {"Out": out}
    whole = tuple(int(d) for d in a["whole_shape"]) or shape
    offs = tuple(int(o) for o in a["offsets"]) or (0,) * len(shape)
    if a["rank_axis"] >= 0:  # a model-parallel shard: the rank-th part along rank_axis
        ax = a["rank_axis"]
        offs = offs[:ax] + (offs[ax] + rank * shape[ax],) + offs[ax + 1:]
    steps = tuple(int(st) for st in a["strides"]) or (1,) * len(shape)
    per_row = max(1, out.size // shape[0])
    rows = max(1, CHUNK // per_row)
    for r0 in range(0, shape[0], rows):
        n = min(rows, shape[0] - r0)
        idx = flat_indices(xp, (n,) + shape[1:], whole, (offs[0] + steps[0] * r0,) + offs[1:], steps)
        out[r0:r0 + n] = values(idx)
    return {"Out": out}


@register("uniform_random", ins=(), outs=("Out",), attrs={**_RAND_ATTRS, "min": -1.0, "max": 1.0},
          infer=_infer, role="init")
def uniform_random(xp, ins, a, ctx):
    """Out ~ U[min, max), value at whole-var index i = f(seed, i)."""
    lo, span = a["min"], a["max"] - a["min"]
    return _generate(xp, a, ctx.rank, lambda idx: lo + span * uniform01(xp, a["seed"], idx))


@register("gaussian_random", ins=(), outs=("Out",), attrs={**_RAND_ATTRS, "mean": 0.0, "std": 1.0},
          infer=_infer, role="init")
def gaussian_random(xp, ins, a, ctx):
    """Out ~ N(mean, std²) by Box-Muller on counters 2i and 2i+1."""

    def values(idx):
        idx = idx * np.uint64(2)
        u1 = uniform01(xp, a["seed"], idx)
        u2 = uniform01(xp, a["seed"], idx + np.uint64(1))
        return a["mean"] + a["std"] * xp.sqrt(-2.0 * xp.log1p(-u1)) * xp.cos(2.0 * np.pi * u2)

    return _generate(xp, a, ctx.rank, values)
