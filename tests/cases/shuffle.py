"""OpCases for shuffle_batch (NOTE(shuffle-batch) in ops/random.py); tests/op_cases.py gathers them.

The references recompute the permutation from the counter-based formula (the order that sorts
``uniform01(step_seed(seed, step), r)`` over the rows r) and move the rows with numpy, Out row
idx[i] = X row i, as Fluid 1.8.5's kernel does. ``check`` tests what holds for any generator:
Out is a permutation of X's rows with each row intact, the same (seed, step) draws the same
permutation, another step or seed another one, and Seed's value wins over ``startup_seed``.
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ops.random import step_seed, uniform01
from placegroup.ops.registry import KernelContext, get_op_def
from placegroup.values import LoDTensor
from tests.op_case import N, OpCase, spec


def perm(seed: int, step: int, n: int) -> np.ndarray:
    """The permutation the op draws over ``n`` rows, from the formula."""
    return np.argsort(uniform01(np, step_seed(seed, step), np.arange(n, dtype=np.uint64)))


def ref(ins, a, step: int = 0):
    """Out row idx[i] = X row i, idx drawn from Seed (else startup_seed) at ``step``."""
    x = ins["X"]
    data = x.data if isinstance(x, LoDTensor) else x
    rows = data.reshape(int(np.prod(data.shape[:-1])), -1)
    seed = int(ins["Seed"][0]) if "Seed" in ins else a["startup_seed"]
    idx = perm(seed, step, len(rows))
    out = rows[np.argsort(idx)].reshape(data.shape)  # row idx[i] of Out is row i of X
    got = {"Out": x.with_data(out) if isinstance(x, LoDTensor) else out, "ShuffleIdx": idx}
    if "Seed" in ins:
        got["SeedOut"] = ins["Seed"]
    return got


def run(ins, attrs, step: int = 0) -> dict:
    """The kernel with ``ctx.step`` set, as an executor calls it."""
    d = get_op_def("shuffle_batch")
    outs = ("Out", "ShuffleIdx") + (("SeedOut",) if "Seed" in ins else ())
    return d.kernels["cpu"](np, ins, {**d.attrs, **attrs}, KernelContext(outputs=outs, step=step))


def _rows_check(_run, _attrs):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4, 3))
    seed = {"Seed": np.array([21], np.int64)}
    first = run({"X": x, **seed}, {})
    rows, out = x.reshape(20, 3), first["Out"].reshape(20, 3)
    idx = first["ShuffleIdx"]
    assert idx.dtype == np.int64 and sorted(idx.tolist()) == list(range(20))
    np.testing.assert_array_equal(out[idx], rows)  # every row intact, where idx sends it
    assert not np.array_equal(idx, np.arange(20))
    np.testing.assert_array_equal(run({"X": x, **seed}, {})["ShuffleIdx"], idx)  # same seed, same step
    assert not np.array_equal(run({"X": x, **seed}, {}, step=1)["ShuffleIdx"], idx)  # another step
    assert not np.array_equal(run({"X": x, "Seed": np.array([22], np.int64)}, {})["ShuffleIdx"], idx)
    np.testing.assert_array_equal(run({"X": x, **seed}, {"startup_seed": 5})["ShuffleIdx"], idx)  # Seed wins
    np.testing.assert_array_equal(run({"X": x}, {"startup_seed": 21})["ShuffleIdx"], idx)  # else startup_seed
    for k in range(4):
        np.testing.assert_array_equal(run({"X": x, **seed}, {}, step=k)["ShuffleIdx"], perm(21, k, 20))
    ints = np.arange(12, dtype=np.int32).reshape(6, 2)
    got = run({"X": ints}, {"startup_seed": 1})["Out"]
    assert got.dtype == np.int32 and sorted(map(tuple, got.tolist())) == sorted(map(tuple, ints.tolist()))
    np.testing.assert_array_equal(run({"X": np.arange(4.0)}, {})["Out"], np.arange(4.0))  # 1-D: one row


def _lod(r):
    return {"X": LoDTensor.from_lengths(N(r, 6, 2), [[2, 4]]), "Seed": np.array([9], np.int64)}


CASES: list[OpCase] = [
    OpCase("shuffle_batch", lambda r: {"X": N(r, 4, 3, 2), "Seed": np.array([11], np.int64)}, ref, grad=("X",),
           name="rows",
           errors=(({"X": spec()}, {}, ProgramError, "X must have at least 1 dim"),
                   ({"X": spec(4, 2), "Seed": spec(1)}, {}, ProgramError, "Seed must be int64, got float32"))),
    OpCase("shuffle_batch", lambda r: {"X": N(r, 7, 5), "Seed": np.array([-3], np.int64)}, ref, grad=("X",),
           name="2d"),
    OpCase("shuffle_batch", _lod, ref, grad=("X",), name="lod"),
    OpCase("shuffle_batch", check=_rows_check, name="properties"),
]
