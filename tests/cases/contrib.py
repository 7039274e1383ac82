"""OpCases for the contrib ops (ops/contrib.py: partial_sum, partial_concat,
fused_embedding_seq_pool, fused_elemwise_activation, l1_norm), cross_entropy2
(ops/cross_entropy2.py) and save_combine / load_combine (ops/file_io_combine.py);
tests/op_cases.py gathers them. Fluid 1.8.5's own numbers for them are checked in
tests/test_fluid_tree_layers.py.
"""
from __future__ import annotations

import os
import tempfile

import numpy as np
import pytest

from placegroup.errors import OutOfRange, ProgramError, SerializationError
from placegroup.util.var_format import read as _read
from placegroup.ops import file_io_combine  # noqa: F401  (registers save_combine / load_combine)
from placegroup.ops.registry import KernelContext, get_op_def
from placegroup.values import LoDTensor
from tests.op_case import N, OpCase, away, softmax, spec

# -- partial_sum / partial_concat -------------------------------------------------------------


def _cols(a, width: int) -> slice:
    s = a["start_index"] + (width if a["start_index"] < 0 else 0)
    n = width - s if a["length"] == -1 else a["length"]
    return slice(s, s + n)


def _partial_ref(concat: bool):
    def ref(i, a):
        parts = [x[:, _cols(a, x.shape[1])] for x in i["X"]]
        return {"Out": np.concatenate(parts, axis=1) if concat else sum(parts)}

    return ref


_THREE = lambda r: {"X": [N(r, 3, 5) for _ in range(3)]}  # noqa: E731
_PARTIAL_ERRORS = {
    op: (({"X": [spec(3, 5), spec(3, 5)]}, {"start_index": 5, "length": -1}, ProgramError, r"must be in \[-5, 5\)"),
         ({"X": [spec(3, 5), spec(3, 5)]}, {"start_index": 2, "length": 4}, ProgramError, r"columns \[2, 6\)"),
         ({"X": [spec(3, 5), spec(3, 4)]}, {"start_index": 0, "length": -1}, ProgramError, "every X must match"),
         ({"X": [spec(3, 5, 2)]}, {"start_index": 0, "length": -1}, ProgramError, "only 2-D inputs"))
    for op in ("partial_sum", "partial_concat")}

CASES: list[OpCase] = [
    OpCase(op, _THREE, _partial_ref(op == "partial_concat"), attrs={"start_index": s, "length": n}, grad=("X",),
           name=f"{name}", errors=_PARTIAL_ERRORS[op] if name == "all" else ())
    for op in ("partial_sum", "partial_concat")
    for name, s, n in (("all", 0, -1), ("middle", 1, 2), ("negative", -2, 1))
]

# -- fused_embedding_seq_pool -----------------------------------------------------------------

_IDS_LOD = [[0, 3, 3, 5, 8]]  # an empty sequence among them


def _fesp_ref(i, a):
    w, ids = i["W"], i["Ids"]
    off, flat = ids.offsets[0], ids.data.reshape(ids.data.shape[0], -1)
    out = np.zeros((len(off) - 1, flat.shape[1] * w.shape[1]), w.dtype)
    for s in range(len(off) - 1):
        for row in range(off[s], off[s + 1]):
            for j, v in enumerate(flat[row]):
                if v != a["padding_idx"]:
                    out[s, j * w.shape[1]:(j + 1) * w.shape[1]] += w[v]
    return {"Out": out}


def _fesp_sample(k: int = 1):
    return lambda r: {"W": N(r, 6, 3), "Ids": LoDTensor(r.integers(0, 6, size=(8, k, 1) if k > 1 else (8, 1)),
                                                            _IDS_LOD)}


CASES += [
    OpCase("fused_embedding_seq_pool", _fesp_sample(), _fesp_ref, grad=("W",), name="sum",
           errors=(({"W": spec(6, 3), "Ids": spec(8, 2, dtype="int64")}, {}, ProgramError, "its last dim 1"),
                   ({"W": spec(6, 3), "Ids": spec(8, 1, dtype="int64")}, {"combiner": "mean"}, ProgramError,
                    "only the 'sum' combiner"),
                   ({"W": np.zeros((6, 3), np.float32), "Ids": LoDTensor(np.array([[1], [6]]), [[0, 2]])}, {},
                    OutOfRange, "id 6 is out of range"),
                   ({"W": np.zeros((6, 3), np.float32), "Ids": np.array([[1], [2]])}, {}, ValueError,
                    "Ids must be a LoDTensor"))),
    OpCase("fused_embedding_seq_pool", _fesp_sample(), _fesp_ref, attrs={"padding_idx": 2}, grad=("W",),
           name="padding"),
    OpCase("fused_embedding_seq_pool", _fesp_sample(2), _fesp_ref, grad=("W",), name="two_ids_per_row"),
]

# -- fused_elemwise_activation ----------------------------------------------------------------

_UNARY = {"scale": lambda x: 0.7 * x, "relu": lambda x: np.maximum(x, 0), "tanh": np.tanh,
          "sigmoid": lambda x: 1 / (1 + np.exp(-x))}
_BIN = {"elementwise_add": np.add, "elementwise_mul": np.multiply}


def _fea_ref(i, a):
    f0, f1 = a["functor_list"]
    x, y = i["X"], i["Y"]
    ya = y.reshape((1,) * a["axis"] + y.shape + (1,) * (x.ndim - a["axis"] - y.ndim)) if a["axis"] != -1 else y
    if f1 in _BIN:
        inter = _BIN[f1](x, ya)
        return {"Out": _UNARY[f0](inter), "IntermediateOut": inter}
    inter = _UNARY[f1](y)
    ia = inter.reshape(ya.shape)
    return {"Out": _BIN[f0](x, ia), "IntermediateOut": inter}


def _fea_sample(pair: str, ys: tuple):
    if "relu" in pair:  # keep relu's input away from its kink
        if pair.startswith("relu"):
            return lambda r: {"X": 2 * away(r, 2, 3, 4), "Y": 0.1 * N(r, *ys)}
        return lambda r: {"X": N(r, 2, 3, 4), "Y": away(r, *ys)}
    return lambda r: {"X": N(r, 2, 3, 4), "Y": N(r, *ys)}


CASES += [
    OpCase("fused_elemwise_activation", _fea_sample(pair, ys), _fea_ref, grad=("X", "Y"), grad_outs=("Out",),
           name=f"{pair}_{yname}",
           attrs={"functor_list": pair.split(","), "axis": axis, "scale": 0.7, "save_intermediate_out": True},
           errors=(({"X": spec(2, 3), "Y": spec(3)}, {"functor_list": ["elementwise_add", "sigmoid"], "axis": -1,
                                                        "scale": 0.0, "save_intermediate_out": True},
                    ProgramError, "is not one of the pairs Fluid 1.8 runs"),
                   ({"X": spec(3), "Y": spec(2, 3)}, {"functor_list": ["elementwise_add", "relu"], "axis": -1,
                                                       "scale": 0.0, "save_intermediate_out": True},
                    ProgramError, "must broadcast into"))
           if (pair, yname) == ("elementwise_add,scale", "same") else ())
    for pair in ("elementwise_add,scale", "scale,elementwise_add", "elementwise_add,relu", "relu,elementwise_add",
                 "elementwise_mul,scale", "tanh,elementwise_add", "elementwise_mul,tanh", "elementwise_mul,sigmoid")
    for yname, ys, axis in (("same", (2, 3, 4), -1), ("axis1", (3,), 1))
]

# -- l1_norm, cross_entropy2 ------------------------------------------------------------------


def _ce2_ref(i, a):
    x, lab = i["X"], i["Label"]
    keep = lab != a["ignore_index"]
    p = np.where(keep, np.take_along_axis(x, np.where(keep, lab, 0), -1), 0)
    return {"Y": np.where(keep, -np.log(np.where(keep, p, 1)), 0), "MatchX": p,
            "XShape": np.zeros(x.shape + (0,))}


def _ce2_sample(r):
    lab = r.integers(0, 5, size=(4, 3, 1))
    lab[1, 2, 0] = -100
    return {"X": softmax(N(r, 4, 3, 5)), "Label": lab}


CASES += [
    OpCase("l1_norm", lambda r: {"X": away(r, 3, 4)}, lambda i, a: {"Out": np.abs(i["X"]).sum().reshape(1)},
           grad=("X",)),
    OpCase("cross_entropy2", _ce2_sample, _ce2_ref, grad=("X",), grad_outs=("Y",),
           errors=(({"X": spec(4, 5), "Label": spec(4, 2, dtype="int64")}, {}, ProgramError, "does not fit X"),
                   ({"X": softmax(np.ones((2, 3))).astype(np.float32), "Label": np.array([[1], [3]])},
                    {"ignore_index": -100}, OutOfRange, "label 3 is out of range for 3 classes"))),
]

# -- save_combine / load_combine --------------------------------------------------------------


def _kernel(op: str):
    """``(ins, attrs) -> outputs`` of ``op``'s cpu kernel with its default attrs, as the harness's
    ``run`` is for a case's own op."""
    def run(ins, attrs):
        opdef = get_op_def(op)
        return opdef.kernels["cpu"](np, ins, {**opdef.attrs, **attrs},
                                    KernelContext(outputs=[s.name for s in opdef.outputs]))

    return run


def _combine_check(save, load):
    """save_combine writes the var file ``fluid.io.save_vars(filename=...)`` writes (records
    named by ``_var_names``, in order, parent directories made); load_combine reads it back in
    order; the run-time errors."""
    r = np.random.default_rng(0)
    xs = [r.standard_normal((2, 3)).astype(np.float32), np.arange(4, dtype=np.int64),
          LoDTensor(r.standard_normal((3, 1)).astype(np.float64), [[0, 1, 3]])]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "sub", "params")
        save({"X": xs}, {"file_path": path, "_var_names": ["w", "step", "seq"]})
        assert list(_read(path)) == ["w", "step", "seq"]
        back = load({}, {"file_path": path, "_var_names": ["a", "b", "c"]})["Out"]
        for got, want in zip(back, [xs[0], xs[1], xs[2].data], strict=True):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype
        half = load({}, {"file_path": path, "load_as_fp16": True, "_var_names": ["a", "b", "c"]})["Out"]
        assert all(v.dtype == np.float16 for v in half)
        with pytest.raises(FileExistsError, match="cannot save_combine to it when overwrite=false"):
            save({"X": xs[:1]}, {"file_path": path, "overwrite": False, "_var_names": ["w"]})
        with pytest.raises(ValueError, match="holds 3 vars, but Out has 2"):
            load({}, {"file_path": path, "_var_names": ["a", "b"]})


CASES += [
    OpCase("save_combine", check=lambda run, a: _combine_check(run, _kernel("load_combine")), name="round_trip",
           errors=(({"X": [np.zeros(2, np.float32)]}, {"file_path": "", "_var_names": ["x"]}, ValueError,
                    "file_path is empty"),
                   ({"X": [np.zeros(2, np.float32)]}, {"file_path": "/tmp/x", "save_to_memory": True}, ValueError,
                    "save_to_memory is not supported"),
                   ({"X": [np.zeros(2, np.float32)]}, {"file_path": "/tmp/x", "_var_names": ["a", "b"]}, ValueError,
                    "gives 2 names for 1 vars"))),
    OpCase("load_combine", check=lambda run, a: _combine_check(_kernel("save_combine"), run), name="round_trip",
           errors=(({}, {"file_path": "/nonexistent/placegroup/params"}, SerializationError, "no file"),
                   ({}, {"file_path": "/tmp/x", "model_from_memory": True}, ValueError,
                    "model_from_memory is not supported"))),
]
