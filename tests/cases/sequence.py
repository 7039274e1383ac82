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
