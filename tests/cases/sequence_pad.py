"""OpCases for the sequence layout ops (ops/sequence_pad.py); tests/op_cases.py gathers them.

The references loop over the sequences one by one, written from Fluid 1.8's kernels
(sequence_pad_op.h, sequence_unpad_op.h, sequence_mask_op.h, sequence_enumerate_op.h,
sequence_reverse_op.h, lod_reset_op.h, sequence_scatter_op.h), so they check the vectorised
index arithmetic (NOTE(pad-mask)) by another route. The LoDs include empty sequences at the
start, in the middle and at the end. Outputs whose trailing dims follow the data, not the
program (padded_length -1, maxlen -1, unpad's rows), are checked by property cases here and
as programs in tests/test_sequence_pad_layers.py.
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import ProgramError
from placegroup.values import LoDTensor
from tests.cases.sequence import LOD1, LOD2
from tests.op_case import N, OpCase, spec

LENS = np.array([2, 0, 5, 3], np.int64)


def _seq(shape, lod=LOD1, **more):
    return lambda r: {"X": LoDTensor(N(r, *shape), lod), **{k: v(r) for k, v in more.items()}}


def _top(x) -> list:
    """The top level of ``x``'s LoD as row offsets."""
    o = list(x.offsets[0])
    for lower in x.offsets[1:]:
        o = [int(lower[k]) for k in o]
    return o


def _pad_ref(i, a):
    x, pv = i["X"], i["PadValue"]
    o = _top(x)
    lens = [o[k + 1] - o[k] for k in range(len(o) - 1)]
    n = a["padded_length"] if a["padded_length"] != -1 else max(lens)
    step = x.data.shape[1:]
    out = np.empty((len(lens), n) + step, x.data.dtype)
    for k in range(len(lens)):
        for t in range(n):
            out[k, t] = x.data[o[k] + t] if t < lens[k] else (pv.reshape(step) if pv.size > 1 else pv[0])
    return {"Out": out, "Length": np.array(lens, np.int64)}


def _unpad_ref(i, a):
    x, lens = i["X"], i["Length"].reshape(-1)
    rows = [x[k, t] for k in range(x.shape[0]) for t in range(lens[k])]
    out = np.stack(rows) if rows else np.zeros((0,) + x.shape[2:], x.dtype)
    return LoDTensor(out.reshape(len(rows), -1) if out.ndim == 1 else out, [np.concatenate([[0], np.cumsum(lens)])])


def _check_unpad(run, a):
    r = np.random.default_rng(0)
    for x in (N(r, 4, 5, 3).astype(np.float32), N(r, 4, 5).astype(np.float32)):
        for length in (LENS, LENS.reshape(4, 1)):
            ins = {"X": x, "Length": length}
            got, want = run(ins, a)["Out"], _unpad_ref(ins, a)
            np.testing.assert_array_equal(got.data, want.data)
            assert got.lod() == want.lod()


def _mask_ref(i, a):
    x = i["X"]
    m = a["maxlen"] if a["maxlen"] != -1 else int(x.max())
    y = np.zeros(x.shape + (m,), a["out_dtype"])
    for idx in np.ndindex(*x.shape):
        for j in range(m):
            y[idx + (j,)] = j < x[idx]
    return {"Y": y}


def _enum_ref(i, a):
    x = i["X"]
    o, ids = x.offsets[-1], x.data.reshape(-1)
    out = np.full((len(ids), a["win_size"]), a["pad_value"], ids.dtype)
    for k in range(len(o) - 1):
        for r in range(o[k], o[k + 1]):
            for w in range(a["win_size"]):
                if r + w < o[k + 1]:
                    out[r, w] = ids[r + w]
    return {"Out": out}


def _reverse_ref(i, a):
    x = i["X"]
    o, out = x.offsets[-1], x.data.copy()
    for k in range(len(o) - 1):
        out[o[k]:o[k + 1]] = x.data[o[k]:o[k + 1]][::-1]
    return {"Y": out}


def _reset_ref(i, a):
    x, y = i["X"], i.get("Y")
    data = x.data if isinstance(x, LoDTensor) else x
    if isinstance(y, LoDTensor):
        return {"Out": LoDTensor(data, y.lod())}
    level = list(y.reshape(-1)) if y is not None else list(a["target_lod"])
    upper = x.lod() if a["append"] and isinstance(x, LoDTensor) else []
    return {"Out": LoDTensor(data, upper + [level])}


def _scatter_ref(i, a):
    x, ids, up = i["X"], i["Ids"], i["Updates"]
    out = x.copy()
    o = ids.offsets[0]
    for k in range(len(o) - 1):
        for j in range(o[k], o[k + 1]):
            out[k, int(ids.data[j, 0])] += up.data[j, 0]
    return {"Out": out}


def _scatter_sample(r):
    return {"X": N(r, 6, 4), "Ids": LoDTensor(r.integers(0, 4, (9, 1)).astype(np.int64), LOD1),
            "Updates": LoDTensor(N(r, 9, 1), LOD1)}


_PAD_ATTRS = {"padded_length": 4}
CASES: list[OpCase] = [
    OpCase("sequence_pad", _seq((9, 3), PadValue=lambda r: N(r, 1)), _pad_ref, attrs=_PAD_ATTRS, grad=("X",),
           name="scalar",
           errors=(({"X": spec(9), "PadValue": spec(1)}, {"padded_length": 4}, ProgramError,
                    r"sequence_pad: X must have rank >= 2"),
                   ({"X": spec(9, 3), "PadValue": spec(2)}, {"padded_length": 4}, ProgramError,
                    r"PadValue must be \[1\] or one step's shape \[3\], got PadValue\[2\]"),
                   ({"X": spec(9, 3), "PadValue": spec(1)}, {"padded_length": 0}, ProgramError,
                    "padded_length must be -1 or > 0, got 0"),
                   ({"X": LoDTensor(np.zeros((9, 3), np.float32), LOD1), "PadValue": np.zeros(1, np.float32)},
                    {"padded_length": 2}, ValueError, r"padded_length 2 is shorter than the longest sequence \(3\)"),
                   ({"X": np.zeros((9, 3), np.float32), "PadValue": np.zeros(1, np.float32)},
                    {"padded_length": 4}, ValueError, "sequence_pad: input X is a dense array"))),
    OpCase("sequence_pad", _seq((9, 2, 3), PadValue=lambda r: N(r, 2, 3)), _pad_ref, attrs={"padded_length": 3},
           grad=("X",), name="step_pad"),
    OpCase("sequence_pad", _seq((7, 2), LOD2, PadValue=lambda r: N(r, 1)), _pad_ref, attrs={"padded_length": 5},
           grad=("X",), name="lod2"),
    OpCase("sequence_pad", lambda r: {"X": LoDTensor(r.integers(0, 9, (9, 1)).astype(np.int64), LOD1),
                                      "PadValue": np.array([-1], np.int64)}, _pad_ref, attrs=_PAD_ATTRS, name="int64"),
    OpCase("sequence_unpad", check=_check_unpad, grad=("X",), name="props",
           sample=lambda r: {"X": N(r, 4, 5, 3), "Length": LENS},
           errors=(({"X": spec(4), "Length": spec(4, dtype="int64")}, {}, ProgramError,
                    r"sequence_unpad: X must have rank >= 2"),
                   ({"X": spec(4, 5), "Length": spec(4, dtype="int32")}, {}, ProgramError, "Length must be int64"),
                   ({"X": spec(4, 5), "Length": spec(4, 2, dtype="int64")}, {}, ProgramError,
                    r"Length must be \[batch\] or \[batch, 1\]"),
                   ({"X": np.zeros((4, 5), np.float32), "Length": np.array([1, 6, 0, 0])}, {}, ValueError,
                    r"Length \[1, 6, 0, 0\] must hold one length in \[0, 5\]"))),
    OpCase("sequence_unpad", lambda r: {"X": N(r, 4, 5), "Length": LENS.reshape(4, 1)}, check=_check_unpad,
           grad=("X",), name="rank2"),
    OpCase("sequence_mask", lambda r: {"X": r.integers(0, 6, (5,)).astype(np.int64)}, _mask_ref,
           attrs={"maxlen": 6, "out_dtype": "float32"},
           errors=(({"X": spec(5)}, {"maxlen": 4, "out_dtype": "int64"}, ProgramError,
                    "sequence_mask: X must be int32 or int64 lengths, got float32"),
                   ({"X": spec(5, dtype="int64")}, {"maxlen": 0, "out_dtype": "int64"}, ProgramError,
                    "maxlen must be -1 or > 0, got 0"))),
    OpCase("sequence_mask", lambda r: {"X": r.integers(0, 4, (2, 3)).astype(np.int32)}, _mask_ref,
           attrs={"maxlen": 3, "out_dtype": "int64"}, name="rank2"),
    OpCase("sequence_enumerate", lambda r: {"X": LoDTensor(r.integers(0, 50, (9, 1)).astype(np.int64), LOD1)},
           _enum_ref, attrs={"win_size": 3, "pad_value": 7},
           errors=(({"X": spec(9, 1)}, {"win_size": 2, "pad_value": 0}, ProgramError,
                    "sequence_enumerate: X must be int32 or int64 ids, got float32"),
                   ({"X": spec(9, 2, dtype="int64")}, {"win_size": 2, "pad_value": 0}, ProgramError,
                    r"X must be \[N\] or \[N, 1\], got X\[9, 2\]"),
                   ({"X": spec(9, 1, dtype="int64")}, {"win_size": 0, "pad_value": 0}, ProgramError,
                    "win_size must be >= 1, got 0"),
                   ({"X": np.zeros((9, 1), np.int64)}, {"win_size": 2, "pad_value": 0}, ValueError,
                    "sequence_enumerate: input X is a dense array"))),
    OpCase("sequence_enumerate", lambda r: {"X": LoDTensor(r.integers(0, 50, (9,)).astype(np.int32), [[0, 9]])},
           _enum_ref, attrs={"win_size": 12, "pad_value": -1}, name="wide_window"),
    OpCase("sequence_reverse", _seq((9, 3)), _reverse_ref, grad=("X",),
           errors=(({"X": np.zeros((9, 3), np.float32)}, {}, ValueError, "sequence_reverse: input X is a dense"),)),
    OpCase("sequence_reverse", _seq((7,), LOD2), _reverse_ref, grad=("X",), name="lod2"),
    OpCase("lod_reset", lambda r: {"X": N(r, 9, 3)}, _reset_ref, attrs={"target_lod": [0, 4, 4, 9]}, grad=("X",),
           name="target",
           errors=(({"X": spec(9, 3)}, {"target_lod": [0], "append": False}, ProgramError,
                    r"lod_reset: give Y or a target_lod of at least 2 offsets, got target_lod=\[0\]"),
                   ({"X": np.zeros((9, 3), np.float32)}, {"target_lod": [0, 5, 8], "append": False}, ValueError,
                    r"target LoD \[0, 5, 8\] must start at 0, never decrease and end at X's 9 rows"),
                   ({"X": np.zeros((9, 3), np.float32)}, {"target_lod": [0, 5, 2, 9], "append": False}, ValueError,
                    "never decrease"),
                   ({"X": np.zeros((9, 3), np.float32), "Y": LoDTensor(np.zeros((3, 1), np.float32), [[0, 1, 3]])},
                    {"target_lod": [], "append": False}, ValueError,
                    r"Y's LoD \[\[0, 1, 3\]\] ends at 3, but X has 9"))),
    OpCase("lod_reset", _seq((9, 3), Y=lambda r: np.array([0, 2, 9], np.int32)), _reset_ref, grad=("X",),
           name="y_offsets"),
    OpCase("lod_reset", _seq((9, 3), Y=lambda r: LoDTensor(N(r, 9, 1), [[0, 3, 9]])), _reset_ref,
           grad=("X",), name="y_lod"),
    OpCase("lod_reset", lambda r: {"X": N(r, 9, 2)}, _reset_ref, attrs={"target_lod": [0, 4, 4, 9], "append": True},
           grad=("X",), name="append"),
    OpCase("sequence_scatter", _scatter_sample, _scatter_ref, grad=("X", "Updates"),
           errors=(({"X": spec(6), "Ids": spec(9, 1, dtype="int64"), "Updates": spec(9, 1)}, {}, ProgramError,
                    r"sequence_scatter: X must be \[batch, width\]"),
                   ({"X": spec(6, 4), "Ids": spec(9, 1, dtype="int32"), "Updates": spec(9, 1)}, {}, ProgramError,
                    "Ids must be int64, got int32"),
                   ({"X": spec(6, 4), "Ids": spec(9, 1, dtype="int64"), "Updates": spec(9, 1, dtype="float64")}, {},
                    ProgramError, "Updates must have X's dtype float32, got float64"),
                   ({"X": np.zeros((6, 4), np.float32), "Ids": LoDTensor(np.full((9, 1), 4, np.int64), LOD1),
                     "Updates": np.zeros((9, 1), np.float32)}, {}, ValueError, r"Ids must lie in \[0, 4\)"),
                   ({"X": np.zeros((2, 4), np.float32), "Ids": LoDTensor(np.zeros((9, 1), np.int64), LOD1),
                     "Updates": np.zeros((9, 1), np.float32)}, {}, ValueError,
                    "Ids has 6 sequences but X has 2 rows"))),
]
