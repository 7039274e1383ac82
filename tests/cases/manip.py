"""OpCases for tensor manipulation ops (transpose, gather, slice, one_hot, ...); tests/op_cases.py gathers them.

References are plain numpy (indexing, np.pad, np.tile, np.argsort), written apart from the
kernels in ops/shape.py and ops/index.py. Two rules of Fluid 1.8 that are not derivatives are
tested in tests/test_manip_layers.py instead of here: scatter's X@GRAD and gather's overwrite gradient
(NOTE(scatter-grad-1.8), NOTE(overwrite)).
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import ProgramError
from tests.op_case import OpCase, N, labels, onehot, spec


def _ids(*v, dtype=np.int64):
    return np.array(v, dtype=dtype)


def _xs(x):
    """An XShape output: X's shape after a 0, no data."""
    return np.empty((0,) + x.shape)


def _pad2d_ref(mode, fmt):
    def ref(i, a):
        t, b, l, r = a["paddings"]
        pads = [(0, 0), (0, 0), (t, b), (l, r)] if fmt == "NCHW" else [(0, 0), (t, b), (l, r), (0, 0)]
        kw = {"constant_values": a["pad_value"]} if mode == "constant" else {}
        return {"Out": np.pad(i["X"], pads, mode=mode, **kw)}

    return ref


def _cumsum_ref(i, a):
    x = i["X"]
    y = np.flip(x, a["axis"]) if a["reverse"] else x
    out = np.cumsum(y, a["axis"])
    if a["exclusive"]:
        out = out - y
    return {"Out": np.flip(out, a["axis"]) if a["reverse"] else out}


def _range_check(run, attrs):
    def r(start, end, step, dtype):
        ins = {k: np.array([v], dtype=dtype) for k, v in (("Start", start), ("End", end), ("Step", step))}
        return run(ins, {})["Out"]

    got = r(1.0, 2.0, 0.3, "float32")
    want = np.array([1.0, 1.0 + np.float32(0.3), 1.0 + 2 * np.float32(0.3), 1.0 + 3 * np.float32(0.3)])
    assert got.dtype == np.float32 and got.shape == (4,)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_array_equal(r(0, 10, 3, "int64"), [0, 3, 6, 9])
    np.testing.assert_array_equal(r(5, 1, -2, "int32"), np.array([5, 3], np.int32))
    assert r(2.0, 2.0, 1.0, "float64").shape == (0,)
    np.testing.assert_allclose(r(0.0, 1.0, 0.25, "float64"), [0, 0.25, 0.5, 0.75])


_TIES = np.array([[1.0, 3.0, 3.0, 2.0, 1.0], [0.0, 0.0, -1.0, 0.0, 2.0]])
_F = {"X": spec(2, 3, 4)}

CASES: list[OpCase] = [
    # transpose, and the reshapes with XShape (NOTE(xshape)) and without
    OpCase("transpose2", lambda r: {"X": N(r, 2, 3, 4)},
           lambda i, a: {"Out": i["X"].transpose(1, 2, 0), "XShape": _xs(i["X"])}, attrs={"axis": [1, 2, 0]},
           grad=("X",), errors=((_F, {"axis": [0, 0, 1]}, ProgramError, r"axis \[0, 0, 1\] is not a permutation"),
                                (_F, {"axis": [1, 0]}, ProgramError, r"not a permutation of 0..2 for X\[2, 3, 4\]"))),
    OpCase("transpose", lambda r: {"X": N(r, 2, 3, 4)}, lambda i, a: {"Out": i["X"].transpose(2, 0, 1)},
           attrs={"axis": [2, 0, 1]}, grad=("X",)),
    *[OpCase(op, lambda r: {"X": N(r, 2, 1, 3, 1)}, lambda i, a, v2=v2, s=s: {
        "Out": i["X"].reshape(s), **({"XShape": _xs(i["X"])} if v2 else {})}, attrs={"axes": axes}, grad=("X",),
        name=name,
        errors=(({"X": spec(2, 1, 3)}, {"axes": [3]}, ProgramError, r"axes entry 3 is out of range for X\[2, 1, 3\]"),))
      for op, v2 in (("squeeze2", True), ("squeeze", False))
      for name, axes, s in (("axes", [1], (2, 3, 1)), ("all", [], (2, 3)), ("neg_and_not1", [-1, 2, 1], (2, 3)))],
    *[OpCase(op, lambda r: {"X": N(r, 2, 3)}, lambda i, a, v2=v2, s=s: {
        "Out": i["X"].reshape(s), **({"XShape": _xs(i["X"])} if v2 else {})}, attrs={"axes": axes}, grad=("X",),
        name=name,
        errors=(({"X": spec(2, 3)}, {"axes": [3]}, ProgramError, r"axes entry 3 is out of range .*valid: -3..2"),))
      for op, v2 in (("unsqueeze2", True), ("unsqueeze", False))
      for name, axes, s in (("ends", [0, -1], (1, 2, 3, 1)), ("twice", [1, 1], (2, 1, 1, 3)),
                            ("mid", [2, 1], (2, 1, 3, 1)))],
    *[OpCase(op, lambda r: {"X": N(r, 2, 3, 4)}, lambda i, a, v2=v2, s=s: {
        "Out": i["X"].reshape(s), **({"XShape": _xs(i["X"])} if v2 else {})}, attrs={"axis": axis}, grad=("X",),
        name=f"axis{axis}", errors=((_F, {"axis": 4}, ProgramError, r"axis 4 is out of range for X\[2, 3, 4\]"),))
      for op, v2 in (("flatten2", True), ("flatten", False)) for axis, s in ((1, (2, 12)), (2, (6, 4)), (0, (1, 24)))],
    *[OpCase("reshape2", lambda r: {"X": N(r, 2, 3, 4)}, lambda i, a, s=s: {"Out": i["X"].reshape(s), "XShape": _xs(i["X"])},
             attrs={"shape": shape}, grad=("X",), name=str(shape),
             errors=((_F, {"shape": [5, -1]}, ProgramError, r"reshape2: X\[2, 3, 4\] \(24 elements\) cannot take shape"),
                     (_F, {"shape": [-1, -1]}, ProgramError, "reshape2: shape .* at most one -1")))
      for shape, s in [([0, -1], (2, 12)), ([-1, 2, 0], (3, 2, 4))]],
    # expand, expand_as, stack, unstack
    OpCase("expand", lambda r: {"X": N(r, 2, 1, 3)}, lambda i, a: {"Out": np.tile(i["X"], (1, 3, 2))},
           attrs={"expand_times": [1, 3, 2]}, grad=("X",),
           errors=(({"X": spec(2, 3)}, {"expand_times": [2]}, ProgramError, r"expand_times \[2\] must give one count"),
                   ({"X": spec(2, 3)}, {"expand_times": [1, 0]}, ProgramError, "one count >= 1"))),
    OpCase("expand_as", lambda r: {"X": N(r, 2, 1, 3), "target_tensor": N(r, 2, 4, 6)},
           lambda i, a: {"Out": np.tile(i["X"], (1, 4, 2))}, grad=("X",), batch=("X", "target_tensor"),
           errors=(({"X": spec(2, 1, 3), "target_tensor": spec(2, 4, 5)}, {}, ProgramError, "is not a multiple"),
                   ({"X": spec(2, 3), "target_tensor": spec(2, 3, 1)}, {}, ProgramError, "differ in rank"))),
    *[OpCase("stack", lambda r: {"X": [N(r, 2, 3) for _ in range(3)]}, lambda i, a, ax=ax: {"Y": np.stack(i["X"], ax)},
             attrs={"axis": ax}, grad=("X",), name=f"axis{ax}",
             errors=(({"X": [spec(2, 3), spec(3, 3)]}, {"axis": 0}, ProgramError, r"X\[1\] float32\[3, 3\] and X\[0\]"),
                     ({"X": [spec(2, 3)] * 2}, {"axis": 3}, ProgramError, r"axis 3 is out of range .*valid: -3..2")))
      for ax in (1, -1)],
    OpCase("unstack", lambda r: {"X": N(r, 2, 3, 4)}, lambda i, a: {"Y": [i["X"][:, k] for k in range(3)]},
           attrs={"axis": 1, "num": 3}, grad=("X",),
           errors=((_F, {"axis": 1, "num": 2}, ProgramError, r"num 2 must be >= 1 and equal dim 1 of X\[2, 3, 4\]"),)),
    # slice, crop_tensor, pad, pad2d, reverse
    OpCase("slice", lambda r: {"Input": N(r, 3, 4, 5)}, lambda i, a: {"Out": i["Input"][1:3, :, 2:4]},
           attrs={"axes": [0, 2], "starts": [1, -3], "ends": [100, -1]}, grad=("Input",),
           errors=(({"Input": spec(3, 4)}, {"axes": [1], "starts": [3], "ends": [2]}, ProgramError,
                    r"starts 3 and ends 2 leave nothing of dim 1 \(size 4\)"),
                   ({"Input": spec(3, 4)}, {"axes": [1], "starts": [5], "ends": [9]}, ProgramError, "leave nothing"),
                   ({"Input": spec(3, 4)}, {"axes": [2], "starts": [0], "ends": [1]}, ProgramError,
                    "axes entry 2 is out of range"),
                   ({"Input": spec(3, 4)}, {"axes": [1], "starts": [0], "ends": [2], "decrease_axis": [1]},
                    ProgramError,
                    "names dim 1, whose slice has size 2, not 1"),
                   ({"Input": spec(3, 4)}, {"axes": [0, 1], "starts": [0], "ends": [1]}, ProgramError,
                    "differ in length"))),
    OpCase("slice", lambda r: {"Input": N(r, 3, 4, 5)}, lambda i, a: {"Out": i["Input"][:, 2, :]},
           attrs={"axes": [1], "starts": [-2], "ends": [3], "decrease_axis": [1]}, grad=("Input",), name="decrease"),
    OpCase("slice", lambda r: {"Input": N(r, 3, 4)}, lambda i, a: {"Out": i["Input"][1, 2].reshape(1)},
           attrs={"axes": [0, 1], "starts": [1, 2], "ends": [2, 3], "decrease_axis": [0, 1]}, grad=("Input",),
           name="to_scalar", batch=()),
    OpCase("crop_tensor", lambda r: {"X": N(r, 3, 4, 5)}, lambda i, a: {"Out": i["X"][1:3, 1:, 0:3]},
           attrs={"shape": [2, -1, 3], "offsets": [1, 1, 0]}, grad=("X",), batch=(),
           errors=(({"X": spec(3, 4)}, {"shape": [2, 3], "offsets": [2, 0]}, ProgramError,
                    r"dim 0: offset 2 \+ size 2 exceeds X\[3, 4\]"),
                   ({"X": spec(3, 4)}, {"shape": [2], "offsets": []}, ProgramError, "one entry per dim"),
                   ({"X": spec(3, 4)}, {"shape": [0, 2], "offsets": []}, ProgramError, "shape 0 > 0 or -1"))),
    OpCase("pad", lambda r: {"X": N(r, 2, 3)},
           lambda i, a: {"Out": np.pad(i["X"], ((1, 0), (2, 1)), constant_values=0.5)},
           attrs={"paddings": [1, 0, 2, 1], "pad_value": 0.5}, grad=("X",),
           errors=(({"X": spec(2, 3)}, {"paddings": [1, 2]}, ProgramError, r"paddings \[1, 2\] must hold 2 sizes"),
                   ({"X": spec(2, 3)}, {"paddings": [1, 2, -1, 0]}, ProgramError, ">= 0 per dim"))),
    *[OpCase("pad2d", lambda r, fmt=fmt: {"X": N(r, 2, 3, 4, 5) if fmt == "NCHW" else N(r, 2, 4, 5, 3)},
             _pad2d_ref(mode, fmt),
             attrs={"paddings": [1, 2, 3, 0], "mode": mode, "pad_value": -0.5, "data_format": fmt},
             grad=("X",), name=f"{mode}_{fmt}",
             errors=(({"X": spec(1, 1, 2, 5)}, {"paddings": [2, 0, 0, 0], "mode": "reflect"}, ProgramError,
                      "reflect paddings .* must be smaller"),
                     ({"X": spec(1, 1, 2, 5)}, {"mode": "wrap"}, ProgramError, "mode 'wrap' must be constant"),
                     ({"X": spec(1, 2, 5)}, {}, ProgramError, r"X must be 4-D, got X\[1, 2, 5\]"),
                     ({"X": spec(1, 1, 2, 5)}, {"paddings": [1, 1]}, ProgramError, "top, bottom, left, right"))
             if (mode, fmt) == ("reflect", "NCHW") else ())
      for mode in ("constant", "reflect", "edge") for fmt in ("NCHW", "NHWC")],
    OpCase("reverse", lambda r: {"X": N(r, 2, 3, 4)}, lambda i, a: {"Out": i["X"][::-1, :, ::-1]},
           attrs={"axis": [0, -1]}, grad=("X",),
           errors=((_F, {"axis": []}, ProgramError, "at least one"),
                   (_F, {"axis": [3]}, ProgramError, "axis entry 3 is out of range"),
                   (_F, {"axis": [1, -2]}, ProgramError, "distinct dims"))),
    # gather, gather_nd, scatter (NOTE(overwrite))
    OpCase("gather", lambda r: {"X": N(r, 5, 3), "Index": _ids(3, 0, 4, dtype=np.int32)},
           lambda i, a: {"Out": i["X"][[3, 0, 4]]}, grad=("X",), batch=("Index",),
           errors=(({"X": spec(5, 3), "Index": spec(3)}, {}, ProgramError, "Index must be int32 or int64, got float32"),
                   ({"X": spec(5, 3), "Index": spec(2, 2, dtype="int64")}, {}, ProgramError,
                    r"Index must be 1-D or \[N, 1\], got Index\[2, 2\]"),
                   ({"X": np.zeros((5, 3), np.float32), "Index": _ids(1, 5)}, {}, IndexError,
                    "gather: Index holds 5, out of range for a dim of 5"),
                   ({"X": np.zeros((5, 3), np.float32), "Index": _ids(-1)}, {}, IndexError, "holds -1"))),
    OpCase("gather", lambda r: {"X": N(r, 5, 2, 3), "Index": _ids(1, 3, 1, 1).reshape(4, 1)},
           lambda i, a: {"Out": i["X"][[1, 3, 1, 1]]}, attrs={"overwrite": False}, grad=("X",), name="repeats_add",
           batch=("Index",)),
    OpCase("gather_nd", lambda r: {"X": N(r, 3, 4, 5), "Index": _ids(1, 2, 0, 3, 1, 2).reshape(3, 2)},
           lambda i, a: {"Out": i["X"][[1, 0, 1], [2, 3, 2]]}, grad=("X",), batch=("Index",),
           errors=(({"X": spec(3, 4), "Index": spec(2, 3, dtype="int64")}, {}, ProgramError,
                    r"last dim of Index\[2, 3\] must be in 1..2"),
                   ({"X": spec(3, 4), "Index": spec(2, 1)}, {}, ProgramError, "Index must be int32 or int64"),
                   ({"X": np.zeros((3, 4), np.float32), "Index": _ids(1, 4).reshape(1, 2)}, {}, IndexError,
                    r"Index\[\.\.\., 1\] holds 4, out of range for a dim of 4"))),
    OpCase("gather_nd", lambda r: {"X": N(r, 3, 4), "Index": _ids(2, 3, 0, 0, 2, 3, 1, 1).reshape(2, 2, 2)},
           lambda i, a: {"Out": i["X"][i["Index"][..., 0], i["Index"][..., 1]]}, grad=("X",), name="elements",
           batch=("Index",)),
    OpCase("scatter", lambda r: {"X": N(r, 5, 3), "Ids": _ids(3, 0, 1), "Updates": N(r, 3, 3)},
           lambda i, a: {"Out": np.concatenate([i["Updates"][[1, 2]], i["X"][2:3], i["Updates"][:1], i["X"][4:]])},
           grad=("Updates",), batch=("Ids", "Updates"),
           errors=(({"X": spec(5, 3), "Ids": spec(3), "Updates": spec(3, 3)}, {}, ProgramError,
                    "Ids must be int32 or int64"),
                   ({"X": spec(5, 3), "Ids": spec(3, dtype="int64"), "Updates": spec(3, 2)}, {}, ProgramError,
                    r"Updates float32\[3, 2\] must be float32 rows of X\[5, 3\]"),
                   ({"X": spec(5, 3), "Ids": spec(3, dtype="int64"), "Updates": spec(2, 3)}, {}, ProgramError,
                    r"one per id of Ids\[3\]"),
                   ({"X": np.zeros((5, 3)), "Ids": _ids(7), "Updates": np.zeros((1, 3))}, {}, IndexError,
                    "scatter: Ids holds 7, out of range for a dim of 5"))),
    OpCase("scatter", lambda r: {"X": N(r, 4, 2), "Ids": _ids(1, 3, 1, 1, dtype=np.int32), "Updates": N(r, 4, 2)},
           lambda i, a: {"Out": np.stack([i["X"][0], i["Updates"][[0, 2, 3]].sum(0), i["X"][2], i["Updates"][1]])},
           attrs={"overwrite": False}, grad=("Updates",), name="add_repeats", batch=("Ids", "Updates")),
    OpCase("scatter", lambda r: {"X": N(r, 4, 2), "Ids": _ids(1, 3, 1, 1), "Updates": N(r, 4, 2)},
           lambda i, a: {"Out": np.stack([i["X"][0], i["Updates"][3], i["X"][2], i["Updates"][1]])},
           name="overwrite_repeats", batch=("Ids", "Updates")),
    # one_hot, arg_max, arg_min, argsort
    OpCase("one_hot", lambda r: {"X": labels(r, 4, 5)}, lambda i, a: {"Out": onehot(i["X"], 5)}, attrs={"depth": 5},
           errors=(({"X": np.array([[1], [5]])}, {"depth": 5}, IndexError,
                    "one_hot: X holds 5, out of range for depth 5"),
                   ({"X": spec(4, 1)}, {"depth": 5}, ProgramError, "X must be int32 or int64, got float32"),
                   ({"X": spec(4, dtype="int64")}, {"depth": 5}, ProgramError, r"must end in a dim of 1 .*got X\[4\]"),
                   ({"X": spec(4, 1, dtype="int64")}, {}, ProgramError, "depth must be >= 1, got -1"))),
    OpCase("one_hot", lambda r: {"X": _ids(1, 7, -1, 0).reshape(4, 1)},
           lambda i, a: {"Out": np.array([[0, 1, 0], [0, 0, 0], [0, 0, 0], [1, 0, 0]], np.float32)},
           attrs={"depth": 3, "allow_out_of_range": True}, name="out_of_range"),
    OpCase("one_hot_v2", lambda r: {"X": _ids(2, 0, 1, 2, dtype=np.int32)},
           lambda i, a: {"Out": np.eye(3)[[2, 0, 1, 2]].astype(np.float64)}, attrs={"depth": 3, "dtype": "float64"},
           batch=("X",)),
    *[OpCase(op, lambda r: {"X": N(r, 3, 4, 5)}, lambda i, a, f=f: {"Out": f(i["X"], 1)}, attrs={"axis": 1},
             errors=((_F, {"axis": 3}, ProgramError, r"axis 3 is out of range for X\[2, 3, 4\]"),
                     (_F, {"dtype": "float32"}, ProgramError, "dtype must be int32 or int64, got float32")))
      for op, f in (("arg_max", np.argmax), ("arg_min", np.argmin))],
    *[OpCase(op, lambda r: {"X": _TIES}, lambda i, a, f=f: {"Out": f(i["X"], -1, keepdims=True).astype(np.int32)},
             attrs={"keepdims": True, "dtype": "int32"}, name="ties_keepdims")
      for op, f in (("arg_max", np.argmax), ("arg_min", np.argmin))],
    OpCase("arg_max", lambda r: {"X": N(r, 6)}, lambda i, a: {"Out": np.argmax(i["X"]).reshape(1)}, name="vector"),
    OpCase("argsort", lambda r: {"X": N(r, 3, 4)}, lambda i, a: {
        "Out": np.sort(i["X"], 0), "Indices": np.argsort(i["X"], 0, kind="stable")}, attrs={"axis": 0}, grad=("X",),
           errors=(({"X": spec(3, 4)}, {"axis": 2}, ProgramError, "axis 2 is out of range"),)),
    OpCase("argsort", lambda r: {"X": _TIES}, lambda i, a: {
        "Out": -np.sort(-i["X"], -1), "Indices": np.argsort(-i["X"], -1, kind="stable")}, attrs={"descending": True},
           name="descending_ties"),
    OpCase("argsort", lambda r: {"X": N(r, 2, 5)}, lambda i, a: {
        "Out": -np.sort(-i["X"], -1), "Indices": np.argsort(-i["X"], -1, kind="stable")}, attrs={"descending": True},
           grad=("X",), name="descending"),
    # cumsum
    *[OpCase("cumsum", lambda r: {"X": N(r, 3, 4)}, _cumsum_ref, attrs={"axis": ax, "exclusive": ex, "reverse": rev},
             grad=("X",), name=f"axis{ax}_ex{int(ex)}_rev{int(rev)}",
             errors=(({"X": spec(3, 4)}, {"axis": 2}, ProgramError, r"cumsum: axis 2 is out of range for X\[3, 4\]"),)
             if ax == 1 and not ex and not rev else ())
      for ax, ex, rev in ((1, False, False), (-1, True, False), (1, False, True), (0, True, True))],
    # shapes and fills from a var
    OpCase("shape", lambda r: {"Input": N(r, 2, 3, 4)}, lambda i, a: {"Out": np.array([2, 3, 4], np.int32)}),
    OpCase("fill_constant_batch_size_like", lambda r: {"Input": N(r, 5, 2)},
           lambda i, a: {"Out": np.full((5, 3), 1.5, np.float32)}, attrs={"shape": [-1, 3], "value": 1.5},
           errors=(({"Input": spec(5, 2)}, {"shape": [1, 3], "input_dim_idx": 2}, ProgramError,
                    r"input_dim_idx 2 must name a dim of Input\[5, 2\]"),
                   ({"Input": spec(5, 2)}, {"shape": [1, 3], "output_dim_idx": 2}, ProgramError,
                    r"output_dim_idx 2 one of shape \[1, 3\]"))),
    OpCase("fill_constant_batch_size_like", lambda r: {"Input": N(r, 5, 2)},
           lambda i, a: {"Out": np.full((4, 2, 2), 7, np.int64)}, name="dims_int64",
           attrs={"shape": [4, -1, 2], "value": 7.0, "dtype": "int64", "input_dim_idx": 1, "output_dim_idx": 1}),
    OpCase("fill_any_like", lambda r: {"X": N(r, 2, 3)}, lambda i, a: {"Out": np.ones((2, 3), np.float32)},
           attrs={"value": 1.0}),
    OpCase("fill_any_like", lambda r: {"X": N(r, 2, 3)}, lambda i, a: {"Out": np.full((2, 3), -2, np.int64)},
           attrs={"value": -2.0, "dtype": "int64"}, name="int64"),
    OpCase("range", check=_range_check,
           errors=(({"Start": np.array([0.0]), "End": np.array([1.0]), "Step": np.array([0.0])}, {}, ValueError,
                    "step 0.0 never takes start 0.0 to end 1.0"),
                   ({"Start": np.array([0]), "End": np.array([5]), "Step": np.array([-1])}, {}, ValueError,
                    "must be non-zero and point from start to end"),
                   ({"Start": spec(1), "End": spec(1, dtype="int64"), "Step": spec(1)}, {}, ProgramError,
                    r"share one of .*got \['float32', 'int64', 'float32'\]"),
                   ({"Start": spec(2), "End": spec(1), "Step": spec(1)}, {}, ProgramError, "hold one value each"))),
]
