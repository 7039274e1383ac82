"""OpCases of the creation, random, CTR and learning-rate-free ops this wave adds: eye,
linspace, truncated_gaussian_random, the *_batch_size_like draws, randint, randperm,
sampling_id, random_crop, data_norm, cvm, hash, shard_index. tests/op_cases.py gathers them.

Random ops are checked by their properties (``check``: a part equals that slice of the whole,
bounds, moments) or, where a case has inputs, against a numpy recomputation of the
counter-based formula (ops/random.py, NOTE(counter-rng)); degenerate inputs (one-hot rows,
a crop as large as the instance) give references that need no generator at all.
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ops.random import flat_indices, uniform01
from tests.op_case import N, OpCase, away, pos, spec

# -- eye, linspace ---------------------------------------------------------------------------


def _linspace_ref(i, a):
    dt = i["Start"].dtype
    num = int(i["Num"][0])
    start, stop = dt.type(i["Start"][0]), dt.type(i["Stop"][0])
    out = [start]
    for _ in range(num - 1):  # Fluid 1.8's kernel: repeated additions in the output dtype
        out.append(dt.type(out[-1] + (stop - start) / dt.type(num - 1)))
    return {"Out": np.array(out, dt)}


def _linspace_check(run, _attrs):
    """Values against the accumulating reference (the length is known only at run time, so
    the case has no ``ref``: infer says [-1])."""
    for start, stop, num, dt in ((0.0, 1.0, 7, np.float32), (2.5, -1.0, 1, np.float32), (-3.0, 10.0, 33, np.float32),
                                 (0.1, 0.7, 5, np.float64)):
        ins = {"Start": np.array([start], dt), "Stop": np.array([stop], dt), "Num": np.array([num], np.int32)}
        got = run(ins, {})["Out"]
        want = _linspace_ref(ins, {})["Out"]
        assert got.dtype == want.dtype and got.shape == (num,)
        np.testing.assert_array_equal(got, want)


# -- random ops ------------------------------------------------------------------------------


def _trunc_check(run, _attrs):
    base = {"mean": 0.0, "std": 2.0}
    whole = run({}, {**base, "shape": [6, 5], "seed": 7})["Out"]
    box = run({}, {**base, "shape": [2, 3], "whole_shape": [6, 5], "offsets": [3, 1], "seed": 7})["Out"]
    np.testing.assert_array_equal(box, whole[3:5, 1:4])
    rows = run({}, {**base, "shape": [2, 5], "whole_shape": [6, 5], "offsets": [1, 0], "strides": [3, 1],
                    "seed": 7})["Out"]
    np.testing.assert_array_equal(rows, whole[1::3])
    assert not np.array_equal(run({}, {**base, "shape": [6, 5], "seed": 8})["Out"], whole)
    big = run({}, {**base, "shape": [400, 250], "seed": 3})["Out"].astype(np.float64)
    assert big.dtype == np.float64 and np.abs(big).max() <= 4.0 + 1e-6 and np.abs(big).max() > 3.9
    # N(0, 1) cut at +-2: mean 0, std sqrt(1 - 4 phi(2) / (Phi(2) - Phi(-2))) = 0.8796
    sd = math.sqrt(1 - 4 * math.exp(-2) / math.sqrt(2 * math.pi) / math.erf(2 / math.sqrt(2)))
    assert abs(big.mean()) < 0.02 and abs(big.std() - 2.0 * sd) < 0.02
    shifted = run({}, {"mean": 1.0, "std": 0.5, "shape": [100, 100], "seed": 3})["Out"]
    assert 0.5 * (1 - 2) - 1e-6 <= shifted.min() and shifted.max() <= 0.5 * (1 + 2) + 1e-6  # (z + mean) * std
    assert run({}, {**base, "shape": [2], "dtype": "float64", "seed": 1})["Out"].dtype == np.float64


def _bsl_ref(kind: str):
    def ref(i, a):
        shape = list(a["shape"])
        shape[a["output_dim_idx"]] = i["Input"].shape[a["input_dim_idx"]]
        idx = flat_indices(np, shape)
        if kind == "uniform":
            v = a["min"] + (a["max"] - a["min"]) * uniform01(np, a["seed"], idx)
        else:
            u1, u2 = uniform01(np, a["seed"], 2 * idx), uniform01(np, a["seed"], 2 * idx + np.uint64(1))
            v = a["mean"] + a["std"] * np.sqrt(-2.0 * np.log1p(-u1)) * np.cos(2 * np.pi * u2)
        return {"Out": v.astype(a["dtype"])}

    return ref


_BSL_ERRORS = (({"Input": spec(4, 2)}, {"shape": [3, 5], "output_dim_idx": 2}, ProgramError, "output_dim_idx 2"),
               ({"Input": spec(4, 2)}, {"shape": [3, 5], "input_dim_idx": 2}, ProgramError, "input_dim_idx 2"))


def _randint_check(run, _attrs):
    a = {"shape": [300, 40], "low": -3, "high": 4, "seed": 5}
    out = run({}, a)["Out"]
    assert out.dtype == np.int64 and out.min() == -3 and out.max() == 3
    counts = np.bincount(out.ravel() + 3) / out.size
    assert np.abs(counts - 1 / 7).max() < 0.01
    np.testing.assert_array_equal(run({}, a)["Out"], out)
    assert run({}, {**a, "dtype": "int32"})["Out"].dtype == np.int32
    assert not np.array_equal(run({}, {**a, "seed": 6})["Out"], out)


def _randperm_check(run, _attrs):
    for n, seed in ((1, 1), (10, 3), (1000, 4)):
        out = run({}, {"n": n, "seed": seed})["Out"]
        assert out.dtype == np.int64
        np.testing.assert_array_equal(np.sort(out), np.arange(n))
    first = run({}, {"n": 50, "seed": 3})["Out"]
    np.testing.assert_array_equal(run({}, {"n": 50, "seed": 3})["Out"], first)
    assert not np.array_equal(run({}, {"n": 50, "seed": 9})["Out"], first)
    assert run({}, {"n": 5, "seed": 3, "dtype": "int32"})["Out"].dtype == np.int32


def _onehot_rows(r):
    hot = r.integers(0, 5, size=6)
    return {"X": np.eye(5)[hot]}


# -- data_norm, cvm, hash, shard_index -------------------------------------------------------


def _dn_sample(r, n=5, c=6):
    size = r.uniform(50.0, 100.0, size=c)
    return {"X": N(r, n, c), "BatchSize": size, "BatchSum": size * 0.3 * N(r, c),
            "BatchSquareSum": size * pos(r, c)}


def _dn_slots(r, zero_shows: bool):
    ins = _dn_sample(r, 5, 6)
    x = ins["X"]
    x[:, [0, 3]] = away(r, 5, 2)  # slot_dim 3: columns 0 and 3 are the shows
    if zero_shows:
        x[[1, 4], 0] = 0.0
        x[2, 3] = 0.0
    return ins


def _dn_ref(i, a):
    x = i["X"]
    means = i["BatchSum"] / i["BatchSize"]
    scales = np.sqrt(i["BatchSize"] / i["BatchSquareSum"])
    y = (x - means) * scales
    if a["slot_dim"] > 0:
        show = x[:, ::a["slot_dim"]]
        y = np.where(np.repeat(np.abs(show) >= 1e-7, a["slot_dim"], axis=1), y, 0.0)
    return {"Y": y, "Means": means, "Scales": scales}


_DN_ERRORS = (
    ({"X": spec(5, 6, 2), "BatchSize": spec(6), "BatchSum": spec(6), "BatchSquareSum": spec(6)}, {}, ProgramError,
     r"X must be \[batch, channels\]"),
    ({"X": spec(5, 6), "BatchSize": spec(5), "BatchSum": spec(6), "BatchSquareSum": spec(6)}, {}, ProgramError,
     r"BatchSize must be float32\[6\]"),
    ({"X": spec(5, 6), "BatchSize": spec(6), "BatchSum": spec(6), "BatchSquareSum": spec(6)}, {"epsilon": 0.01},
     ProgramError, "epsilon must be in"),
    ({"X": spec(5, 6), "BatchSize": spec(6), "BatchSum": spec(6), "BatchSquareSum": spec(6)}, {"slot_dim": 4},
     ProgramError, "slot_dim 4 does not divide"),
)


def _cvm_ref(i, a):
    x = i["X"]
    if not a["use_cvm"]:
        return {"Y": x[:, 2:]}
    y = x.copy()
    y[:, 0] = np.log(x[:, 0] + 1)
    y[:, 1] = np.log(x[:, 1] + 1) - np.log(x[:, 0] + 1)
    return {"Y": y}


def _cvm_sample(r):
    return {"X": np.concatenate([r.integers(0, 20, size=(4, 2)).astype(np.float64), N(r, 4, 3)], axis=1),
            "CVM": r.integers(0, 5, size=(4, 2)).astype(np.float64)}


def _shard_ref(i, a):
    x = i["X"]
    size = (a["index_num"] + a["nshards"] - 1) // a["nshards"]
    return {"Out": np.where(x // size == a["shard_id"], x % size, a["ignore_value"])}


_IDS = np.array([[0], [7], [10], [19], [13], [9]], np.int64)

CASES: list[OpCase] = [
    OpCase("eye", ref=lambda i, a: {"Out": np.eye(3, 4, dtype=np.float32)}, attrs={"num_rows": 3, "num_columns": 4},
           errors=(({}, {"num_rows": -1}, ProgramError, r"num_rows \(-1\) must be >= 0"),)),
    OpCase("eye", ref=lambda i, a: {"Out": np.eye(2, dtype=np.int64)}, attrs={"num_rows": 2, "dtype": "int64"},
           name="square_int"),
    OpCase("linspace", check=_linspace_check,
           errors=(({"Start": spec(1), "Stop": spec(1, dtype="float64"), "Num": spec(1, dtype="int32")}, {},
                    ProgramError, "Start and Stop must share"),
                   ({"Start": spec(1), "Stop": spec(1), "Num": spec(1)}, {}, ProgramError, "Num must be int32"),
                   ({"Start": np.array([0.0], np.float32), "Stop": np.array([1.0], np.float32),
                     "Num": np.array([0], np.int32)}, {}, ValueError, "Num must be > 0"))),
    OpCase("truncated_gaussian_random", check=_trunc_check),
    *[OpCase(f"{kind}_random_batch_size_like", lambda r: {"Input": N(r, 4, 2)}, _bsl_ref(kind),
             attrs={"shape": [-1, 3], "seed": 11, **extra}, name=name, errors=_BSL_ERRORS if not extra else ())
      for kind in ("uniform", "gaussian")
      for name, extra in (("", {}), ("dim1", {"shape": [5, 7], "input_dim_idx": 1, "output_dim_idx": 1}))],
    OpCase("uniform_random_batch_size_like", lambda r: {"Input": N(r, 4, 2)}, _bsl_ref("uniform"),
           attrs={"shape": [-1, 3], "seed": 11, "min": 2.0, "max": 5.0, "dtype": "float64"}, name="range_f64"),
    OpCase("randint", check=_randint_check,
           errors=(({}, {"low": 3, "high": 3}, ProgramError, "low 3 must be less than high 3"),
                   ({}, {"low": 0, "high": 3, "dtype": "float32"}, ProgramError, "int32 or int64"))),
    OpCase("randperm", check=_randperm_check, errors=(({}, {"n": 0}, ProgramError, "n must be > 0"),)),
    OpCase("sampling_id", _onehot_rows, lambda i, a: {"Out": np.argmax(i["X"], axis=1)}, attrs={"seed": 3},
           errors=(({"X": spec(2, 3, 4)}, {}, ProgramError, r"X must be \[batch, width\]"),)),
    OpCase("random_crop", lambda r: {"X": N(r, 2, 3, 4), "Seed": np.array([9], np.int64)},
           lambda i, a: {"Out": i["X"], "SeedOut": i["Seed"]},
           attrs={"shape": [3, 4], "startup_seed": 5}, name="whole",
           errors=(({"X": spec(2, 3, 4)}, {"shape": [3, 5]}, ProgramError, r"dim 2: 5 > 4"),
                   ({"X": spec(2, 3, 4)}, {"shape": [2, 3, 4]}, ProgramError, "at least one batch dim"))),
    OpCase("data_norm", _dn_sample, _dn_ref, attrs={"epsilon": 1e-5}, grad=("X",), grad_outs=("Y",),
           errors=_DN_ERRORS),
    OpCase("data_norm", lambda r: _dn_slots(r, False), _dn_ref, attrs={"slot_dim": 3}, grad=("X",), grad_outs=("Y",),
           name="slots"),
    OpCase("data_norm", lambda r: _dn_slots(r, True), _dn_ref, attrs={"slot_dim": 3}, name="zero_shows"),
    OpCase("cvm", _cvm_sample, _cvm_ref,
           errors=(({"X": spec(4, 5), "CVM": spec(4, 3)}, {}, ProgramError, r"CVM must be \[batch, 2\]"),
                   ({"X": spec(4, 5, 1), "CVM": spec(4, 2)}, {}, ProgramError, "X must be"))),
    OpCase("cvm", _cvm_sample, _cvm_ref, attrs={"use_cvm": False}, name="no_cvm"),
    # xxHash's output for these rows, as Fluid 1.8's hash docs and Paddle 2.6 give it
    OpCase("hash", lambda r: {"X": np.array([[1, 2], [3, 4]], np.int32)},
           lambda i, a: {"Out": np.array([[722, 407, 337, 395], [603, 590, 386, 901]], np.int32).reshape(2, 4, 1)},
           attrs={"num_hash": 4, "mod_by": 1000},
           errors=(({"X": spec(2, 2, 1, dtype="int64")}, {}, ProgramError, "2-D int32 or int64"),
                   ({"X": spec(2, 2)}, {}, ProgramError, "2-D int32 or int64"),
                   ({"X": spec(2, 1, dtype="int64")}, {"num_hash": 0}, ProgramError, "num_hash"))),
    OpCase("hash", lambda r: {"X": np.array([[1], [3]], np.int64)},
           lambda i, a: {"Out": np.array([[101512944021, 921953343241], [470968715329, 1007686945038]],
                                         np.int64).reshape(2, 2, 1)},
           attrs={"num_hash": 2, "mod_by": 1 << 40}, name="int64"),
    OpCase("shard_index", lambda r: {"X": _IDS}, _shard_ref, attrs={"index_num": 20, "nshards": 2, "shard_id": 1},
           errors=(({"X": spec(4, 1, dtype="int64")}, {"index_num": 20, "nshards": 2, "shard_id": 2}, ProgramError,
                    "0 <= shard_id < nshards"),
                   ({"X": spec(4, 2, dtype="int64")}, {"index_num": 20, "nshards": 2}, ProgramError,
                    "last dim of 1"),
                   ({"X": np.array([[3], [20]], np.int64)}, {"index_num": 20, "nshards": 2}, ValueError,
                    r"holds 20, outside \[0, index_num=20\)"))),
    OpCase("shard_index", lambda r: {"X": _IDS}, _shard_ref,
           attrs={"index_num": 20, "nshards": 3, "shard_id": 0, "ignore_value": -5}, name="uneven"),
]
