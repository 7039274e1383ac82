"""Random ops from a counter-based generator: the initializers uniform_random,
gaussian_random and truncated_gaussian_random, and the forward draws
uniform/gaussian_random_batch_size_like, randint, randperm, sampling_id, random_crop and
shuffle_batch.

NOTE(counter-rng): the value at flat index ``i`` of the *whole* var is ``f(seed, i)``
(splitmix64 of ``seed`` and ``i``), so any box of the var (a row block on a pserver, a column
shard of a model-parallel fc) or strided row set (the rows ``k, k+M, k+2M, ...`` of an
embedding table's shard k) is generated alone, exactly equal to the same slice of the whole
var, without ever making the whole var. ``whole_shape``,
``offsets`` and ``strides`` say which part this op makes: along dim d, indices
``offsets[d] + strides[d] * arange(shape[d])``; empty means the op's own shape, offset 0, step 1.
Forward draws also key on the step (NOTE(random-steps)).
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Cut, Meta, Slot, check, grad_of, register
from placegroup.ops.tensor import SHAPE_INS, run_ints, static_shape
from placegroup.util.normal_ppf import PHI_HI, PHI_LO, normal_ppf
from placegroup.values import LoDTensor

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


def cut_counter(a, cut: Cut) -> dict:
    """NOTE(init-cut) for a counter-based op: the part's indices in the whole var, composed
    with the part this op already makes (a cut of a cut stays a box of the whole var)."""
    shape = tuple(int(d) for d in a["shape"])
    cut.check(f"cut of a random op of shape {list(shape)}", shape)
    if a["rank_axis"] >= 0:
        raise ValueError(f"a random op that makes a per-rank part (rank_axis {a['rank_axis']}) cannot be cut again")
    whole = [int(d) for d in a["whole_shape"]] or list(shape)
    offs = [int(o) for o in a["offsets"]] or [0] * len(shape)
    steps = [int(st) for st in a["strides"]] or [1] * len(shape)
    return {**a, "shape": list(cut.shape), "whole_shape": whole, "rank_axis": cut.rank_axis,
            "offsets": [o + st * co for o, st, co in zip(offs, steps, cut.offsets)],
            "strides": [st * cs for st, cs in zip(steps, cut.strides)]}


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
    steps = tuple(int(st) for st in a["strides"]) or (1,) * len(shape)
    if a["rank_axis"] >= 0:  # a model-parallel shard: the rank-th part along rank_axis
        ax = a["rank_axis"]
        offs = offs[:ax] + (offs[ax] + steps[ax] * rank * shape[ax],) + offs[ax + 1:]
    per_row = max(1, out.size // shape[0])
    rows = max(1, CHUNK // per_row)
    for r0 in range(0, shape[0], rows):
        n = min(rows, shape[0] - r0)
        idx = flat_indices(xp, (n,) + shape[1:], whole, (offs[0] + steps[0] * r0,) + offs[1:], steps)
        out[r0:r0 + n] = values(idx)
    return {"Out": out}


# -- draws that change every step ------------------------------------------------------------

# NOTE(random-steps): Fluid 1.8's random ops draw from a fresh engine on every run when their
# seed is 0 and from an engine seeded with ``seed`` on every run otherwise (the same numbers
# each step). Here a forward random op has ``per_step``: its generator key is
# ``step_seed(seed, ctx.step)``, so step k draws the same numbers in one process and on
# every trainer (``ctx.step`` counts alike, NOTE(dropout-masks) in ops/dropout.py), and a
# new key each step. The layers (placegroup/layers/tensor.py) set ``per_step`` when the user
# gives no seed, and then give the op a seed of its own from the program's ``random_seed``
# (NOTE(layer-seeds) there). Initializers never set it: their values depend on the seed alone.
# An op whose output rows are examples of the batch (``*_batch_size_like`` with
# ``input_dim_idx`` 0, ``sampling_id``, ``random_crop``) keys those rows by their index in the
# whole batch, ``ctx.rank * n + i``, so data-parallel trainers draw one process's values.

_MASK = (1 << 64) - 1


def step_seed(seed: int, step: int) -> int:
    """The generator key of a ``per_step`` op with ``seed`` at ``step`` (NOTE(random-steps))."""
    z = (int(seed) * 0x9E3779B97F4A7C15 + (int(step) + 1) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 31)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 29)


def op_key(a, ctx) -> int:
    """The key an op with attrs ``a`` draws from in this run."""
    return step_seed(a["seed"], ctx.step) if a.get("per_step") else int(a["seed"])


def _normal(xp, key: int, idx, mean: float = 0.0, std: float = 1.0):
    """N(mean, std²) values by Box-Muller on counters 2i and 2i+1."""
    idx = idx * np.uint64(2)
    u1 = uniform01(xp, key, idx)
    u2 = uniform01(xp, key, idx + np.uint64(1))
    return mean + std * xp.sqrt(-2.0 * xp.log1p(-u1)) * xp.cos(2.0 * np.pi * u2)


def _shaped_infer(op: str):
    """``infer`` of a random op that may read its shape at run time (NOTE(run-time-ints) in
    ops/tensor.py)."""
    return lambda ins, a: {"Out": Meta(static_shape(op, ins, a), a["dtype"])}


def _run_shape(ins, a) -> dict:
    """a with the shape read from ShapeTensor / ShapeTensorList when the op has them."""
    if ins.get("ShapeTensor") is None and not ins.get("ShapeTensorList"):
        return a
    return {**a, "shape": run_ints(ins, "ShapeTensor", "ShapeTensorList", a["shape"])}


@register("uniform_random", ins=SHAPE_INS, outs=("Out",),
          attrs={**_RAND_ATTRS, "min": -1.0, "max": 1.0, "per_step": False},
          infer=_shaped_infer("uniform_random"), role="init", cut=cut_counter, uses_step=True)
def uniform_random(xp, ins, a, ctx):
    """Out ~ U[min, max), value at whole-var index i = f(seed, i) (f(seed, step, i) with
    ``per_step``, NOTE(random-steps)); the shape may be read at run time."""
    lo, span, key = a["min"], a["max"] - a["min"], op_key(a, ctx)
    return _generate(xp, _run_shape(ins, a), ctx.rank, lambda idx: lo + span * uniform01(xp, key, idx))


@register("gaussian_random", ins=SHAPE_INS, outs=("Out",),
          attrs={**_RAND_ATTRS, "mean": 0.0, "std": 1.0, "per_step": False},
          infer=_shaped_infer("gaussian_random"), role="init", cut=cut_counter, uses_step=True)
def gaussian_random(xp, ins, a, ctx):
    """Out ~ N(mean, std²) by Box-Muller on counters 2i and 2i+1; the shape may be read at run
    time."""
    key = op_key(a, ctx)
    return _generate(xp, _run_shape(ins, a), ctx.rank, lambda idx: _normal(xp, key, idx, a["mean"], a["std"]))


# -- truncated_gaussian_random (TruncatedNormal) ---------------------------------------------

# NOTE(truncated-normal): Fluid 1.8's kernel maps one uniform u (in [FLT_MIN, 1)) per value
# through the inverse normal CDF restricted to [-2, 2]: z = Phi^-1(p) with
# p = Phi(-2) + (Phi(2) - Phi(-2)) * u, so |z| <= 2 by construction, no resampling. It then
# returns (z + mean) * std, not z * std + mean (later Paddle versions changed that); the two
# agree for mean 0, the initializers' default. We follow 1.8. Phi^-1 is Acklam's rational
# approximation (placegroup/util/normal_ppf.py), in float64, rounded once to the output dtype.


@register("truncated_gaussian_random", ins=(), outs=("Out",), attrs={**_RAND_ATTRS, "mean": 0.0, "std": 1.0},
          infer=_infer, role="init", cut=cut_counter)
def truncated_gaussian_random(xp, ins, a, ctx):
    """Out = (z + mean) * std with z ~ N(0, 1) truncated to [-2, 2] by the inverse CDF, as
    Fluid 1.8 (NOTE(truncated-normal)); value at whole-var index i = f(seed, i)."""

    def values(idx):
        u = uniform01(xp, a["seed"], idx)
        u = xp.maximum(u, np.finfo(np.float32).tiny)  # Fluid draws u from [FLT_MIN, 1)
        z = normal_ppf(xp, PHI_LO + (PHI_HI - PHI_LO) * u)
        return (xp.clip(z, -2.0, 2.0) + a["mean"]) * a["std"]

    return _generate(xp, a, ctx.rank, values)


# -- shaped like the batch: *_batch_size_like ------------------------------------------------


def _bsl_shape(op: str, in_shape, a) -> tuple:
    shape, i, o = [int(d) for d in a["shape"]], a["input_dim_idx"], a["output_dim_idx"]
    check(bool(shape) and 0 <= o < len(shape) and 0 <= i < len(in_shape),
          f"{op}: input_dim_idx {i} must name a dim of Input{list(in_shape)} and output_dim_idx {o} one of "
          f"shape {shape}")
    shape[o] = in_shape[i]
    return tuple(shape)


def _bsl_infer(op: str):
    def infer(ins, a):
        return {"Out": Meta(_bsl_shape(op, ins["Input"].shape, a), np.dtype(a["dtype"]).name)}

    return infer


def _batch_like(xp, ins, a, ctx, op: str, values) -> dict:
    """Out of ``shape`` with dim ``output_dim_idx`` = Input's dim ``input_dim_idx``; when that
    is Input's batch dim its entries are keyed by their index in the whole batch
    (NOTE(random-steps)). ``values(key, idx) -> float64 array``."""
    shape = _bsl_shape(op, ins["Input"].shape, a)
    o = a["output_dim_idx"]
    offs = [0] * len(shape)
    if a["input_dim_idx"] == 0:
        offs[o] = ctx.rank * shape[o]
    whole = tuple(s + f for s, f in zip(shape, offs))
    idx = flat_indices(xp, shape, whole, offs)
    return {"Out": values(op_key(a, ctx), idx).astype(a["dtype"])}


_BSL_ATTRS = {"shape": [1], "input_dim_idx": 0, "output_dim_idx": 0, "seed": 0, "dtype": "float32",
              "per_step": False}
_INPUT = Slot("Input", no_grad=True)


@register("uniform_random_batch_size_like", ins=(_INPUT,), outs=("Out",),
          attrs={**_BSL_ATTRS, "min": -1.0, "max": 1.0}, infer=_bsl_infer("uniform_random_batch_size_like"),
          uses_step=True)
def uniform_random_batch_size_like(xp, ins, a, ctx):
    """Out ~ U[min, max) of ``shape`` with Input's batch size put in (Fluid's op of that name)."""
    return _batch_like(xp, ins, a, ctx, "uniform_random_batch_size_like",
                       lambda key, idx: a["min"] + (a["max"] - a["min"]) * uniform01(xp, key, idx))


@register("gaussian_random_batch_size_like", ins=(_INPUT,), outs=("Out",),
          attrs={**_BSL_ATTRS, "mean": 0.0, "std": 1.0}, infer=_bsl_infer("gaussian_random_batch_size_like"),
          uses_step=True)
def gaussian_random_batch_size_like(xp, ins, a, ctx):
    """Out ~ N(mean, std²) of ``shape`` with Input's batch size put in."""
    return _batch_like(xp, ins, a, ctx, "gaussian_random_batch_size_like",
                       lambda key, idx: _normal(xp, key, idx, a["mean"], a["std"]))


# -- integers: randint, randperm -------------------------------------------------------------


def _randint_infer(ins, a):
    check(a["low"] < a["high"], f"randint: low {a['low']} must be less than high {a['high']}")
    check(np.dtype(a["dtype"]).kind == "i", f"randint: dtype must be int32 or int64, got {a['dtype']}")
    return {"Out": Meta(tuple(a["shape"]), np.dtype(a["dtype"]).name)}


@register("randint", ins=(), outs=("Out",), attrs={"shape": [1], "low": 0, "high": 1, "seed": 0, "dtype": "int64",
                                                  "per_step": False}, infer=_randint_infer, uses_step=True)
def randint(xp, ins, a, ctx):
    """Out = integers uniform in [low, high): low + floor(u * (high - low))."""
    shape = tuple(int(d) for d in a["shape"])
    u = uniform01(xp, op_key(a, ctx), flat_indices(xp, shape))
    span = int(a["high"]) - int(a["low"])
    return {"Out": (int(a["low"]) + xp.minimum(xp.floor(u * span), span - 1)).astype(a["dtype"])}


def _randperm_infer(ins, a):
    check(a["n"] > 0, f"randperm: n must be > 0, got {a['n']}")
    check(np.dtype(a["dtype"]).kind == "i", f"randperm: dtype must be int32 or int64, got {a['dtype']}")
    return {"Out": Meta((int(a["n"]),), np.dtype(a["dtype"]).name)}


@register("randperm", ins=(), outs=("Out",), attrs={"n": 1, "seed": 0, "dtype": "int64", "per_step": False},
          infer=_randperm_infer, uses_step=True)
def randperm(xp, ins, a, ctx):
    """Out = a random permutation of 0..n-1: the order that sorts n uniform keys."""
    n = int(a["n"])
    keys = uniform01(xp, op_key(a, ctx), xp.arange(n, dtype=np.uint64))
    return {"Out": xp.argsort(keys).astype(a["dtype"])}  # 53-bit keys: a tie is vanishingly rare


# -- sampling_id -----------------------------------------------------------------------------


def _sampling_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) == 2, f"sampling_id: X must be [batch, width] probabilities, got X{list(x.shape)}")
    return {"Out": Meta((x.shape[0],), "int64")}


# NOTE(sampling-id): the id of row i is the first j whose running sum of X[i, :j+1] exceeds
# r ~ U[min, max) (the last id if none does), as Fluid's kernel subtracts probabilities from r.
# The output is int64 ids, what Paddle's kernel writes whatever dtype the layer asked for
# (the layer's var is int64 here). r is keyed by the row's index in the whole batch.
@register("sampling_id", ins=(Slot("X", no_grad=True),), outs=("Out",),
          attrs={"min": 0.0, "max": 1.0, "seed": 0, "per_step": False}, infer=_sampling_infer, uses_step=True)
def sampling_id(xp, ins, a, ctx):
    """Out[i] = a draw from row i's distribution X[i] (NOTE(sampling-id))."""
    x = ins["X"]
    n, width = x.shape
    rows = xp.arange(n, dtype=np.uint64) + np.uint64(ctx.rank * n)
    r = (a["min"] + (a["max"] - a["min"]) * uniform01(xp, op_key(a, ctx), rows)).astype(x.dtype)
    below = (r[:, None] - xp.cumsum(x, axis=1)) >= 0  # r still >= 0 after subtracting X[i, :j+1]
    return {"Out": xp.minimum(below.sum(axis=1), width - 1).astype(np.int64)}


# -- random_crop -----------------------------------------------------------------------------


def _crop_infer(ins, a):
    x, shape = ins["X"], [int(d) for d in a["shape"]]
    k = len(x.shape) - len(shape)
    check(bool(shape) and k >= 1, f"random_crop: shape {shape} must leave at least one batch dim of X{list(x.shape)}")
    for d, (have, want) in enumerate(zip(x.shape[k:], shape)):
        check(have == -1 or 0 < want <= have, f"random_crop: shape {shape} does not fit in X{list(x.shape)} "
                                              f"(dim {k + d}: {want} > {have})")
    outs = {"Out": Meta(tuple(x.shape[:k]) + tuple(shape), x.dtype)}
    if ins.get("Seed") is not None:
        outs["SeedOut"] = ins["Seed"]
    return outs


# NOTE(random-crop): Fluid's op carries its generator state in a Seed var (the layer makes a
# persistable one, read at first from ``startup_seed``, and writes the next state to SeedOut),
# so every run crops anew. Here the crop of instance g (its index in the whole batch) at step
# s has offsets f(key(seed, s), g * k + d) along each of its k cropped dims d, seed being
# Seed's value if given, else ``startup_seed``; SeedOut is Seed unchanged.
@register("random_crop", ins=("X", Slot("Seed", dispensable=True, no_grad=True)),
          outs=("Out", Slot("SeedOut", dispensable=True)), attrs={"shape": [1], "startup_seed": 0},
          infer=_crop_infer, inplace={"SeedOut": "Seed"}, uses_step=True)
def random_crop(xp, ins, a, ctx):
    """Out = a window of ``shape`` at a random place in each instance of X (NOTE(random-crop))."""
    x, shape = ins["X"], tuple(int(d) for d in a["shape"])
    k = x.ndim - len(shape)
    lead = x.shape[:k]
    n = int(np.prod(lead)) if lead else 1
    flat = x.reshape((n,) + x.shape[k:])
    seed = int(ins["Seed"].reshape(-1)[0]) if ins.get("Seed") is not None else int(a["startup_seed"])
    g = xp.arange(n, dtype=np.uint64) + np.uint64(ctx.rank * n)
    picks = [xp.arange(n).reshape((n,) + (1,) * len(shape))]
    for d, (have, want) in enumerate(zip(x.shape[k:], shape)):
        u = uniform01(xp, step_seed(seed, ctx.step), g * np.uint64(len(shape)) + np.uint64(d))
        start = xp.minimum(xp.floor(u * (have - want + 1)), have - want).astype(np.int64)
        view = (1,) + tuple(want if e == d else 1 for e in range(len(shape)))
        picks.append(start.reshape((n,) + (1,) * len(shape)) + xp.arange(want).reshape(view))
    out = {"Out": flat[tuple(picks)].reshape(lead + shape)}
    if "SeedOut" in ctx.outputs and ins.get("Seed") is not None:
        out["SeedOut"] = ins["Seed"]
    return out


# -- shuffle_batch ---------------------------------------------------------------------------

# NOTE(shuffle-batch): Fluid 1.8's op (fluid.contrib.layers.shuffle_batch) treats X as rows of
# its last dim (all the others flattened; a 1-D X is one row), draws a permutation idx of the
# rows and writes row i of X to row idx[i] of Out; ShuffleIdx is idx (int64, one per row) and
# the gradient un-permutes: X@GRAD row i = Out@GRAD row idx[i]. Fluid draws idx with
# std::shuffle from an engine seeded with Seed's value (``startup_seed`` while Seed holds
# nothing) and writes the engine's next number to SeedOut, so each run draws anew. Here idx is
# the order that sorts ``uniform01(step_seed(seed, ctx.step), r)`` over the rows r, seed being
# Seed's value when given (the layer's Seed var starts at ``startup_seed``), else
# ``startup_seed``: a new permutation each step, the same one for the same (seed, step) in one
# process and on every trainer (NOTE(random-steps)), whatever other programs ran in between.
# SeedOut is Seed unchanged: the step, not the var, moves the draw on. The permutations are not
# Fluid's (another generator). Each trainer of a data-parallel job permutes its own rows, as
# Fluid's trainers do, so such a run matches one process in distribution only. Out keeps X's
# LoD, its rows moved across the sequences, as Fluid's ShareLoD does.


def _shuffle_infer(ins, a):
    x, seed = ins["X"], ins.get("Seed")
    check(len(x.shape) >= 1, f"shuffle_batch: X must have at least 1 dim (rows of its last dim), got X{list(x.shape)}")
    rows = int(np.prod(x.shape[:-1])) if all(d >= 0 for d in x.shape[:-1]) else -1
    outs = {"Out": x, "ShuffleIdx": Meta((rows,), "int64")}
    if seed is not None:
        check(seed.dtype == "int64", f"shuffle_batch: Seed must be int64, got {seed.dtype}; make it with "
                                     "dtype='int64' or give the layer an int seed")
        outs["SeedOut"] = seed
    return outs


def shuffle_rows(xp, seed: int, step: int, n: int):
    """The permutation shuffle_batch draws over ``n`` rows for ``seed`` at ``step`` (int64)."""
    return xp.argsort(uniform01(xp, step_seed(seed, step), xp.arange(n, dtype=np.uint64))).astype(np.int64)


@register("shuffle_batch", ins=("X", Slot("Seed", dispensable=True, no_grad=True)),
          outs=("Out", Slot("ShuffleIdx", no_grad=True), Slot("SeedOut", dispensable=True, no_grad=True)),
          attrs={"startup_seed": 0}, infer=_shuffle_infer, inplace={"SeedOut": "Seed"}, uses_step=True,
          grad=grad_of(("X",), uses=(), outs=("ShuffleIdx",)), wants_lod=("X",),
          lod=lambda levels, a: {"Out": (levels.get("X") or [0])[0]})
def shuffle_batch(xp, ins, a, ctx):
    """Out row idx[i] = X row i for a random permutation idx of X's rows (NOTE(shuffle-batch))."""
    x, seed = ins["X"], ins.get("Seed")
    data = x.data if isinstance(x, LoDTensor) else x
    rows = data.reshape(int(np.prod(data.shape[:-1])), -1)
    idx = shuffle_rows(xp, int(seed.reshape(-1)[0]) if seed is not None else int(a["startup_seed"]), ctx.step,
                       rows.shape[0])
    out = xp.empty_like(rows)
    out[idx] = rows
    out = out.reshape(data.shape)
    got = {"Out": x.with_data(out) if isinstance(x, LoDTensor) else out, "ShuffleIdx": idx}
    if "SeedOut" in ctx.outputs and seed is not None:
        got["SeedOut"] = seed
    return got


@register("shuffle_batch_grad", ins=("ShuffleIdx", "Out@GRAD"), outs=("X@GRAD",), attrs={"startup_seed": 0},
          role="backward")
def shuffle_batch_grad(xp, ins, a, ctx):
    # X@GRAD row i = Out@GRAD row idx[i]: the rows go back where they came from
    g, idx = ins["Out@GRAD"], ins["ShuffleIdx"]
    return {"X@GRAD": g.reshape(idx.shape[0], -1)[idx].reshape(g.shape)}
