"""OpCases for the sequence ops (ops/sequence.py); tests/op_cases.py gathers them.

Their X is a ``LoDTensor`` (placegroup/values.py): the sampler returns one, the harness casts
its data and keeps its LoD (tests/test_ops.py), and the references loop over the sequences one
by one, written from Fluid 1.8's kernels (sequence_pooling.cc, sequence_softmax_op.h), so they
check the vectorised kernels by another route. The LoDs include empty sequences at the start,
in the middle and at the end, and a 2-level LoD whose output keeps the upper level.
"""
from __future__ import annotations

import numpy as np

import placegroup.ops.sequence  # noqa: F401  TODO(#15): registers the ops until ops/__init__.py imports it
from placegroup.errors import ProgramError
from placegroup.values import LoDTensor
from tests.op_case import N, OpCase, spec

LOD1 = [[0, 0, 2, 5, 5, 6, 9]]           # 6 sequences of 9 rows: lengths 0, 2, 3, 0, 1, 3
LOD2 = [[0, 2, 2, 5], [0, 1, 3, 4, 4, 7]]  # Fluid's doc example: 3 sequences of 5 subsequences


def _seq(shape, lod=LOD1):
    return lambda r: {"X": LoDTensor(N(r, *shape), lod)}


def _pool_ref(i, a):
    x = i["X"]
    o = x.offsets[-1]
    data = x.data
    rows = []
    for k in range(len(o) - 1):
        s = data[o[k]:o[k + 1]]
        if len(s) == 0:
            rows.append(np.full(data.shape[1:], a["pad_value"], data.dtype))
            continue
        rows.append({"SUM": lambda: s.sum(0), "AVERAGE": lambda: s.sum(0) / len(s),
                     "SQRT": lambda: s.sum(0) / np.sqrt(len(s)), "MAX": lambda: s.max(0),
                     "LAST": lambda: s[-1], "FIRST": lambda: s[0]}[a["pooltype"]]().astype(data.dtype))
    out = np.stack(rows) if rows else np.zeros((0,) + data.shape[1:], data.dtype)
    if x.lod_level > 1:
        out = LoDTensor(out, x.offsets[:-1])
    if a["pooltype"] != "MAX":
        return {"Out": out}
    index = np.full(np.shape(out), -1, np.int32)
    for k in range(len(o) - 1):
        if o[k + 1] > o[k]:
            index[k] = np.argmax(data[o[k]:o[k + 1]], axis=0) + o[k]  # the first maximum, as Fluid's strict >
    return {"Out": out, "MaxIndex": index}


def _softmax_ref(i, a):
    x = i["X"]
    o = x.offsets[-1]
    flat = x.data.reshape(-1)
    out = np.empty_like(flat)
    for k in range(len(o) - 1):
        e = np.exp(flat[o[k]:o[k + 1]])
        out[o[k]:o[k + 1]] = e / e.sum()
    return {"Out": out.reshape(x.data.shape)}


CASES: list[OpCase] = [
    OpCase("sequence_pool", _seq((9, 3)), _pool_ref, attrs={"pooltype": pool}, grad=("X",), name=pool.lower())
    for pool in ("SUM", "AVERAGE", "SQRT", "MAX", "LAST", "FIRST")
]
CASES += [
    OpCase("sequence_pool", _seq((9, 2, 2)), _pool_ref, attrs={"pooltype": "MAX", "pad_value": -1.5}, grad=("X",),
           name="max_pad"),
    OpCase("sequence_pool", _seq((9,)), _pool_ref, attrs={"pooltype": "AVERAGE", "pad_value": 2.0}, grad=("X",),
           name="rank1"),
    OpCase("sequence_pool", _seq((7, 3), LOD2), _pool_ref, attrs={"pooltype": "SUM"}, grad=("X",), name="lod2",
           errors=(({"X": spec(4, 3)}, {"pooltype": "MEDIAN", "pad_value": 0.0, "is_test": False}, ProgramError,
                    r"pooltype 'MEDIAN' is not one of"),
                   ({"X": spec(4, 3, dtype="int64")}, {"pooltype": "SUM", "pad_value": 0.0, "is_test": False},
                    ProgramError, "X must be float32 or float64, got int64"),
                   ({"X": np.zeros((4, 3), np.float32)}, {"pooltype": "SUM", "pad_value": 0.0, "is_test": False},
                    ValueError, "sequence_pool: input X is a dense array, not a sequence"),
                   ({"X": LoDTensor(np.zeros((4, 3), np.float32))}, {"pooltype": "SUM", "pad_value": 0.0,
                                                                      "is_test": False},
                    ValueError, "a LoDTensor with an empty LoD"))),
    OpCase("sequence_pool", _seq((9, 3), [[0, 9]]), _pool_ref, attrs={"pooltype": "LAST"}, grad=("X",),
           name="one_sequence"),
    OpCase("sequence_softmax", _seq((9, 1)), _softmax_ref, grad=("X",),
           errors=(({"X": spec(6, 3)}, {}, ProgramError, r"X must be \[N\] or \[N, 1\]"),
                   ({"X": np.zeros((6, 1), np.float32)}, {}, ValueError, "not a sequence"))),
    OpCase("sequence_softmax", _seq((7,), LOD2), _softmax_ref, grad=("X",), name="rank1_lod2"),
]


# -- slice 3a: sequence_conv, expand, expand_as, reshape, concat, slice ----------------------
# Each reference loops over the sequences (and, for sequence_conv, over each row's context
# taps), written from Fluid 1.8's kernels (context_project.h, sequence_expand_op.h, ...).

LODC = [[0, 4, 4, 5, 9, 11]]  # lengths 4, 0, 1, 4, 2


def _conv_sample(shape=(11, 3), m=4, length=3, start=-1, pad=False, lod=LODC):
    def sample(r):
        ins = {"X": LoDTensor(N(r, *shape), lod), "Filter": N(r, length * shape[1], m)}
        if pad:
            ins["PaddingData"] = N(r, max(0, -start) + max(0, start + length - 1), shape[1])
        return ins
    return sample


def _conv_ref(i, a):
    x, w, pad = i["X"], i["Filter"], i.get("PaddingData")
    o, data = x.offsets[0], x.data
    up = max(0, -a["contextStart"])
    col = np.zeros((data.shape[0], a["contextLength"] * data.shape[1]), data.dtype)
    for s in range(len(o) - 1):
        h = o[s + 1] - o[s]
        for k in range(h):
            for j in range(a["contextLength"]):
                p = k + a["contextStart"] + j
                piece = col[o[s] + k, j * data.shape[1]:(j + 1) * data.shape[1]]
                if 0 <= p < h:
                    piece[:] = data[o[s] + p]
                elif a["paddingTrainable"]:  # rows above the sequence, then rows below it
                    piece[:] = pad[p + up] if p < 0 else pad[up + p - h]
    return {"Out": LoDTensor(col @ w, x.lod())}


def _expand_ref(i, a):
    x, y = i["X"], i["Y"]
    ref = y.lod()[a["ref_level"]]
    data = x.data if isinstance(x, LoDTensor) else x
    if len(ref) <= 1:
        return {"Out": x}
    seqs = ([data[x.lod()[0][k]:x.lod()[0][k + 1]] for k in range(len(ref) - 1)] if isinstance(x, LoDTensor)
            else [data[k:k + 1] for k in range(len(ref) - 1)])
    parts, lens = [], []
    for k, s in enumerate(seqs):
        for _ in range(ref[k + 1] - ref[k]):
            parts.append(s)
            lens.append(len(s))
    out = np.concatenate(parts) if parts else np.zeros((0,) + data.shape[1:], data.dtype)
    return {"Out": LoDTensor.from_lengths(out, [lens]) if isinstance(x, LoDTensor) else out}


def _expand_as_ref(i, a):
    x, y = i["X"], i["Y"]
    o = y.lod()[0]
    rows = [x[k] for k in range(len(o) - 1) for _ in range(o[k + 1] - o[k])]
    out = np.stack(rows) if rows else np.zeros((0,) + x.shape[1:], x.dtype)
    return {"Out": LoDTensor(out, y.lod())}


def _reshape_ref(i, a):
    x = i["X"]
    o, d = x.lod()[0], x.data.shape[1]
    parts = [x.data[o[k]:o[k + 1]].reshape(-1, a["new_dim"]) for k in range(len(o) - 1)]
    return {"Out": LoDTensor.from_lengths(np.concatenate(parts), [[len(p) for p in parts]])}


def _concat_ref(i, a):
    xs = i["X"]
    parts, lens = [], []
    for k in range(len(xs[0].lod()[0]) - 1):
        seq = [x.data[x.lod()[0][k]:x.lod()[0][k + 1]] for x in xs]
        parts += seq
        lens.append(sum(len(s) for s in seq))
    return {"Out": LoDTensor.from_lengths(np.concatenate(parts), [lens])}


def _slice_ref(i, a):
    x = i["X"]
    o = x.lod()[0]
    off, length = i["Offset"].reshape(-1), i["Length"].reshape(-1)
    parts = [x.data[o[k] + off[k]:o[k] + off[k] + length[k]] for k in range(len(o) - 1)]
    return {"Out": LoDTensor.from_lengths(np.concatenate(parts), [[int(v) for v in length]])}


def _conv_attrs(start=-1, length=3, pad=False):
    return {"contextStart": start, "contextLength": length, "contextStride": 1, "paddingTrainable": pad}


CASES += [
    OpCase("sequence_conv", _conv_sample(), _conv_ref, attrs=_conv_attrs(), grad=("X", "Filter"),
           errors=(({"X": spec(5, 3), "Filter": spec(9, 4)}, {**_conv_attrs(), "contextStride": 2}, ProgramError,
                    "contextStride must be 1"),
                   ({"X": spec(5, 3), "Filter": spec(8, 4)}, _conv_attrs(), ProgramError,
                    r"Filter's height must be contextLength \* X's width = 3 \* 3"),
                   ({"X": spec(5, 3), "Filter": spec(9, 4), "PaddingData": spec(3, 3)}, _conv_attrs(pad=True),
                    ProgramError, r"PaddingData must be \[up_pad \+ down_pad, X's width\] = \[2, 3\]"),
                   ({"X": spec(5, 3), "Filter": spec(3, 4), "PaddingData": spec(0, 3)}, _conv_attrs(0, 1, True),
                    ProgramError, "paddingTrainable needs padding rows"),
                   ({"X": LoDTensor(np.zeros((5, 3), np.float32), [[0, 2, 5], [0, 1, 2, 3, 4, 5]]),
                     "Filter": spec(9, 4)}, _conv_attrs(), ProgramError,
                    "sequence_conv: input X has lod_level 2, the op takes at most 1"),
                   ({"X": np.zeros((5, 3), np.float32), "Filter": np.zeros((9, 4), np.float32)}, _conv_attrs(),
                    ValueError, "sequence_conv: input X is a dense array"))),
    OpCase("sequence_conv", _conv_sample(pad=True), _conv_ref, attrs=_conv_attrs(pad=True),
           grad=("X", "Filter", "PaddingData"), name="padding_trainable"),
    OpCase("sequence_conv", _conv_sample(length=5, start=-2, pad=True), _conv_ref,
           attrs=_conv_attrs(-2, 5, True), grad=("X", "Filter", "PaddingData"), name="wide_padding"),
    OpCase("sequence_conv", _conv_sample(length=2, start=2, pad=True), _conv_ref,
           attrs=_conv_attrs(2, 2, True), grad=("X", "Filter", "PaddingData"), name="start_past_rows"),
    OpCase("sequence_conv", _conv_sample(length=4, start=0), _conv_ref, attrs=_conv_attrs(0, 4),
           grad=("X", "Filter"), name="forward_context"),
    # X a dense [rows, 2] (each row a sequence of 1), Y's level 0 repeats them
    OpCase("sequence_expand", lambda r: {"X": N(r, 3, 2), "Y": LoDTensor(N(r, 6, 1), [[0, 2, 3, 6]])},
           _expand_ref, grad=("X",), name="dense_x",
           errors=(({"X": spec(4), "Y": spec(4, 1)}, {"ref_level": -1}, ProgramError, "X must have at least 2 dims"),
                   ({"X": LoDTensor(np.zeros((7, 1), np.float32), LOD2), "Y": LoDTensor(np.zeros((7, 1)), LOD2)},
                    {"ref_level": -1}, ProgramError, "X has lod_level 2, the op takes at most 1"),
                   ({"X": spec(3, 1), "Y": LoDTensor(np.zeros((7, 1), np.float32), LOD2)}, {"ref_level": 2},
                    ProgramError, r"ref_level 2 is not a level of Y \(lod_level 2\)"),
                   ({"X": np.zeros((4, 1)), "Y": LoDTensor(np.zeros((6, 1)), [[0, 2, 3, 6]])}, {"ref_level": 0},
                    ValueError, "X has 4 rows but level 0 of Y's LoD has 3 sequences"),
                   ({"X": np.zeros((3, 1)), "Y": np.zeros((6, 1))}, {"ref_level": 0}, ValueError,
                    "input Y has no LoD"))),
    OpCase("sequence_expand", lambda r: {"X": LoDTensor(N(r, 4, 1), [[0, 2, 4]]),
                                         "Y": LoDTensor(N(r, 8, 1), [[0, 2, 4], [0, 3, 6, 7, 8]])},
           _expand_ref, attrs={"ref_level": 0}, grad=("X",), name="fluid_case1"),
    OpCase("sequence_expand", lambda r: {"X": LoDTensor(N(r, 6, 3), [[0, 1, 1, 4, 6]]),
                                         "Y": LoDTensor(N(r, 7, 1), [[0, 2, 2, 6, 6], [0, 1, 2, 3, 4, 6, 7]])},
           _expand_ref, attrs={"ref_level": 0}, grad=("X",), name="empty_repeats"),
    OpCase("sequence_expand", lambda r: {"X": N(r, 5, 2), "Y": LoDTensor(N(r, 7, 1), LOD2)},
           _expand_ref, grad=("X",), name="last_level"),
    OpCase("sequence_expand_as", lambda r: {"X": N(r, 6, 3), "Y": LoDTensor(N(r, 9, 1), LOD1)},
           _expand_as_ref, grad=("X",),
           errors=(({"X": spec(6), "Y": spec(6, 1)}, {}, ProgramError, "X must have at least 2 dims"),
                   ({"X": spec(3, 2), "Y": LoDTensor(np.zeros((7, 1), np.float32), LOD2)}, {}, ProgramError,
                    "sequence_expand_as: input Y has lod_level 2, the op takes at most 1"),
                   ({"X": np.zeros((5, 3)), "Y": LoDTensor(np.zeros((9, 1)), LOD1)}, {}, ValueError,
                    "X has 5 rows but Y has 6 sequences"))),
    OpCase("sequence_reshape", lambda r: {"X": LoDTensor(N(r, 7, 4), [[0, 2, 2, 3, 7]])}, _reshape_ref,
           attrs={"new_dim": 2}, grad=("X",), name="narrower"),
    OpCase("sequence_reshape", lambda r: {"X": LoDTensor(N(r, 8, 2), [[0, 2, 2, 6, 8]])}, _reshape_ref,
           attrs={"new_dim": 4}, grad=("X",), name="wider",
           errors=(({"X": spec(4, 2, 1)}, {"new_dim": 2}, ProgramError, "X must be 2-D"),
                   ({"X": spec(4, 2)}, {"new_dim": 0}, ProgramError, "new_dim must be > 0"),
                   ({"X": LoDTensor(np.zeros((5, 2)), [[0, 1, 5]])}, {"new_dim": 4}, ValueError,
                    "the sequences before offset 1 hold 2 values .1 rows of 2., not a multiple of new_dim 4"))),
    OpCase("sequence_concat", lambda r: {"X": [LoDTensor(N(r, 9, 3), LOD1),
                                               LoDTensor(N(r, 7, 3), [[0, 1, 1, 3, 4, 4, 7]]),
                                               LoDTensor(N(r, 2, 3), [[0, 0, 0, 0, 1, 1, 2]])]},
           _concat_ref, grad=("X",),
           errors=(({"X": [spec(4, 3), spec(4, 2)]}, {}, ProgramError, r"X\[1\] is float32\[4, 2\]"),
                   ({"X": [LoDTensor(np.zeros((4, 3), np.float32), [[0, 4]]),
                           LoDTensor(np.zeros((7, 3), np.float32), LOD2)]}, {}, ProgramError,
                    r"X\[1\] has lod_level 2"),
                   ({"X": [LoDTensor(np.zeros((4, 3)), [[0, 4]]), LoDTensor(np.zeros((4, 3)), [[0, 1, 4]])]},
                    {}, ValueError, r"X\[1\] has 2 sequences, X\[0\] has 1"))),
    OpCase("sequence_slice", lambda r: {"X": LoDTensor(N(r, 9, 2), LOD1),
                                        "Offset": np.array([[0], [1], [0], [0], [0], [1]], np.int64),
                                        "Length": np.array([[0], [1], [3], [0], [1], [2]], np.int64)},
           _slice_ref, grad=("X",),
           errors=(({"X": spec(9, 2), "Offset": spec(6, dtype="int64"), "Length": spec(6, 1, dtype="int64")}, {},
                    ProgramError, r"Offset must be \[number of sequences, 1\], got Offset\[6\]"),
                   ({"X": spec(9, 2), "Offset": spec(6, 1), "Length": spec(6, 1, dtype="int64")}, {},
                    ProgramError, "Offset must be int32 or int64, got float32"),
                   ({"X": LoDTensor(np.zeros((9, 2)), LOD1), "Offset": np.array([[0], [1], [1], [0], [0], [0]]),
                     "Length": np.array([[0], [1], [3], [0], [1], [1]])}, {}, ValueError,
                    "sequence 2 has 3 rows but Offset 1, Length 3: Offset . Length runs past its end"),
                   ({"X": LoDTensor(np.zeros((9, 2)), LOD1), "Offset": np.array([[0], [1], [-1], [0], [0], [0]]),
                     "Length": np.array([[0], [1], [1], [0], [1], [1]])}, {}, ValueError,
                    "sequence 2 has 3 rows but Offset -1, Length 1: Offset is negative"),
                   ({"X": LoDTensor(np.zeros((9, 2)), LOD1), "Offset": np.zeros((2, 1), np.int64),
                     "Length": np.zeros((2, 1), np.int64)}, {}, ValueError,
                    "X has 6 sequences but Offset has 2 and Length 2 entries"))),
]
