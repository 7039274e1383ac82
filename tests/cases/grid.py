"""OpCases for the spatial ops of ops/grid.py: unfold, temporal_shift, affine_grid,
grid_sampler, crop, fsp, similarity_focus, add_position_encoding; tests/op_cases.py gathers
them.

Each reference is a loop written from Paddle 1.8's CPU kernel (unfold_op.h/im2col.cc,
temporal_shift_op.h, affine_grid_op.h, grid_sampler_op.h, crop_op.h, fsp_op.h,
similarity_focus_op.h, add_position_encoding_op.h), one output cell (or one row) at a time,
not from ops/grid.py's vectorised kernels. The grid sampler's points keep their fractional
parts in [0.15, 0.85] (away from the floor's jumps, so central differences hold) and some lie
outside the image (the zero padding).
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.errors import ProgramError
from tests.op_case import N, OpCase, spec


def unfold_ref(i, a):
    x = i["X"]
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (dh, dw) = a["kernel_sizes"], a["strides"], a["dilations"]
    up, left, down, right = a["paddings"]
    oh, ow = (h + up + down - dh * (kh - 1) - 1) // sh + 1, (w + left + right - dw * (kw - 1) - 1) // sw + 1
    y = np.zeros((n, c, kh, kw, oh, ow), x.dtype)
    for p in range(kh):
        for q in range(kw):
            for r in range(oh):
                for s in range(ow):
                    row, col = r * sh - up + p * dh, s * sw - left + q * dw
                    if 0 <= row < h and 0 <= col < w:
                        y[:, :, p, q, r, s] = x[:, :, row, col]
    return {"Y": y.reshape(n, c * kh * kw, oh * ow)}


def shift_ref(i, a):
    x, t, r = i["X"], a["seg_num"], a["shift_ratio"]
    c = x.shape[1]
    c1, c2 = int(np.float32(c) * np.float32(r)), int(np.float32(2 * c) * np.float32(r))
    out = np.zeros_like(x)
    for nt in range(x.shape[0]):
        it = nt % t
        for ch in range(c):
            src = it - 1 if ch < c1 else it + 1 if ch < c2 else it
            if 0 <= src < t:
                out[nt, ch] = x[nt - it + src, ch]
    return {"Out": out}


def affine_ref(i, a):
    th = i["Theta"]
    _, _, h, w = a["output_shape"]
    out = np.zeros((th.shape[0], h, w, 2), th.dtype)
    for n in range(th.shape[0]):
        for y in range(h):
            for x in range(w):
                pt = np.array([-1 + 2 * x / (w - 1), -1 + 2 * y / (h - 1), 1.0])
                out[n, y, x] = th[n].astype(np.float64) @ pt
    return {"Output": out}


def sampler_ref(i, a):
    x, grid = i["X"], i["Grid"]
    n, c, h, w = x.shape
    out = np.zeros_like(x)
    for b in range(n):
        for y in range(h):
            for z in range(w):
                gx = (float(grid[b, y, z, 0]) + 1) * (w - 1) / 2
                gy = (float(grid[b, y, z, 1]) + 1) * (h - 1) / 2
                x0, y0 = math.floor(gx), math.floor(gy)
                for cx, cy in ((x0, y0), (x0 + 1, y0), (x0, y0 + 1), (x0 + 1, y0 + 1)):
                    if 0 <= cx <= w - 1 and 0 <= cy <= h - 1:
                        out[b, :, y, z] += x[b, :, cy, cx] * (1 - abs(gx - cx)) * (1 - abs(gy - cy))
    return {"Output": out}


def crop_ref(i, a):
    x = i["X"]
    shape = list(i["Y"].shape) if "Y" in i else [x.shape[0] if s == -1 else s for s in a["shape"]]
    offsets = list(i["Offsets"]) if "Offsets" in i else a["offsets"]
    return {"Out": x[tuple(slice(o, o + s) for o, s in zip(offsets, shape))]}


def fsp_ref(i, a):
    x, y = i["X"], i["Y"]
    out = np.zeros((x.shape[0], x.shape[1], y.shape[1]), x.dtype)
    for b in range(x.shape[0]):
        for p in range(x.shape[1]):
            for q in range(y.shape[1]):
                out[b, p, q] = (x[b, p].astype(np.float64) * y[b, q]).sum() / (x.shape[2] * x.shape[3])
    return {"Out": out}


def focus_ref(i, a):
    """Paddle's loop: sort the slice's cells (largest first), take a cell unless its row or
    column is taken, stop after min(rows, cols)."""
    x, axis = i["X"], a["axis"]
    out = np.zeros_like(x)
    for b in range(x.shape[0]):
        for index in a["indexes"]:
            sl = np.take(x[b], index, axis=axis - 1)
            rows, cols = sl.shape
            taken_r, taken_c, taken = set(), set(), 0
            for flat in np.argsort(-sl, axis=None, kind="stable"):
                r, c = divmod(int(flat), cols)
                if r in taken_r or c in taken_c:
                    continue
                taken_r.add(r)
                taken_c.add(c)
                taken += 1
                every = slice(None)
                out[{1: (b, every, r, c), 2: (b, r, every, c), 3: (b, r, c, every)}[axis]] = 1
                if taken == min(rows, cols):
                    break
    return {"Out": out}


def encoding_ref(i, a):
    x = i["X"]
    alpha, beta = float(np.float32(a["alpha"])), float(np.float32(a["beta"]))
    out = np.zeros_like(x)
    half = x.shape[2] // 2
    for j in range(x.shape[1]):
        for k in range(half):
            val = j / 10000.0 ** (k / (half - 1)) if half > 1 else j / 10000.0
            out[:, j, k] = x[:, j, k] * x.dtype.type(alpha) + math.sin(val) * beta
            out[:, j, half + k] = x[:, j, half + k] * x.dtype.type(alpha) + math.cos(val) * beta
    return {"Out": out}


def _grid_points(r, n, h, w):
    """Grid [n, h, w, 2] whose unnormalised points sit 0.15..0.85 past an integer, some outside."""
    px = r.integers(-2, w, size=(n, h, w)) + r.uniform(0.15, 0.85, size=(n, h, w))
    py = r.integers(-2, h, size=(n, h, w)) + r.uniform(0.15, 0.85, size=(n, h, w))
    return np.stack([2 * px / (w - 1) - 1, 2 * py / (h - 1) - 1], axis=-1)


def _distinct(r, *shape):
    return (r.permutation(math.prod(shape)).reshape(shape) - math.prod(shape) / 2) * 0.1


CASES: list[OpCase] = [
    OpCase("unfold", lambda r: {"X": N(r, 2, 3, 5, 4)}, unfold_ref, attrs={"kernel_sizes": [2, 3]}, grad=("X",),
           name="basic", errors=(
               ({"X": spec(2, 3, 5)}, {"kernel_sizes": [2, 2]}, ProgramError, r"X\[2, 3, 5\] must be 4-D"),
               ({"X": spec(2, 3, 2, 2)}, {"kernel_sizes": [3, 3]}, ProgramError, "output size .* must be positive"),
               ({"X": spec(2, 3, 5, 5)}, {"kernel_sizes": [2, 2], "paddings": [1, 1]}, ProgramError,
                "paddings must be a list of 4 ints"),
               ({"X": spec(2, 3, 5, 5)}, {"kernel_sizes": [2, 0]}, ProgramError, "must be positive"))),
    OpCase("unfold", lambda r: {"X": N(r, 2, 2, 7, 6)}, unfold_ref, grad=("X",), name="stride_pad_dilation",
           attrs={"kernel_sizes": [3, 2], "strides": [2, 1], "paddings": [1, 0, 2, 1], "dilations": [2, 2]}),
    OpCase("temporal_shift", lambda r: {"X": N(r, 6, 8, 2, 3)}, shift_ref, attrs={"seg_num": 3}, grad=("X",),
           name="quarter", errors=(
               ({"X": spec(6, 8, 2)}, {"seg_num": 3}, ProgramError, r"X\[6, 8, 2\] must be 4-D"),
               ({"X": spec(6, 8, 2, 2)}, {"seg_num": 4}, ProgramError, "must divide by seg_num=4"),
               ({"X": spec(6, 8, 2, 2)}, {"seg_num": 3, "shift_ratio": 0.5}, ProgramError, r"lie in \(0, 0.5\)"),
               ({"X": spec(6, 8, 2, 2)}, {}, ProgramError, "seg_num must be a positive int, got None"))),
    OpCase("temporal_shift", lambda r: {"X": N(r, 8, 10, 2, 2)}, shift_ref, attrs={"seg_num": 4, "shift_ratio": 0.2},
           grad=("X",), name="ratio_0.2"),
    OpCase("affine_grid", lambda r: {"Theta": N(r, 2, 2, 3)}, affine_ref, attrs={"output_shape": [2, 3, 4, 5]},
           grad=("Theta",), name="", errors=(
               ({"Theta": spec(2, 3, 3)}, {"output_shape": [2, 3, 4, 5]}, ProgramError, r"Theta\[2, 3, 3\] must be"),
               ({"Theta": spec(2, 2, 3)}, {"output_shape": [4, 5]}, ProgramError,
                "output_shape must be a list of 4 ints"),
               ({"Theta": spec(2, 2, 3)}, {}, ProgramError, "output_shape must be a list of 4 ints"))),
    OpCase("grid_sampler", lambda r: {"X": N(r, 2, 3, 4, 5), "Grid": _grid_points(r, 2, 4, 5)}, sampler_ref,
           grad=("X", "Grid"), name="", errors=(
               ({"X": spec(2, 3, 4, 5), "Grid": spec(2, 5, 4, 2)}, {}, ProgramError, "must be \\[N, H, W, 2\\] with"),
               ({"X": spec(2, 3, 4), "Grid": spec(2, 4, 5, 2)}, {}, ProgramError, "must be 4-D"),
               ({"X": spec(2, 3, 4, 5), "Grid": spec(2, 4, 5, 2, dtype="float64")}, {}, ProgramError,
                "X is float32 but Grid is float64"))),
    OpCase("crop", lambda r: {"X": N(r, 3, 5, 4)}, crop_ref, attrs={"shape": [2, 3, 2], "offsets": [1, 2, 1]},
           grad=("X",), name="attrs", errors=(
               ({"X": spec(3, 5, 4)}, {"shape": [2, 3], "offsets": [0, 0, 0]}, ProgramError,
                "shape must be a list of 3 ints"),
               ({"X": spec(3, 5, 4)}, {"shape": [2, 3, 2], "offsets": [0, 3, 0]}, ProgramError,
                r"dim 1: offset 3 \+ size 3 must fit X\[3, 5, 4\]"),
               ({"X": spec(3, 5, 4)}, {"shape": [2, -1, 2], "offsets": [0, 0, 0]}, ProgramError,
                r"-1 only in dim 0"),
               ({"X": spec(3, 5, 4), "Offsets": np.zeros(3, np.int32)}, {"shape": [2, 3, 2], "offsets": [0, 0, 0]},
                ProgramError, "not both"),
               ({"X": np.zeros((3, 5, 4), np.float32), "Offsets": np.array([2, 0, 0], np.int32)},
                {"shape": [2, 3, 2]}, ValueError, r"offsets \[2, 0, 0\] with the output shape \[2, 3, 2\] do not fit"))),
    OpCase("crop", lambda r: {"X": N(r, 3, 5, 4), "Offsets": np.array([0, 1, 2], np.int32)}, crop_ref,
           attrs={"shape": [-1, 4, 2]}, grad=("X",), name="offsets_input"),
    OpCase("crop", lambda r: {"X": N(r, 3, 6), "Y": N(r, 2, 4)}, crop_ref, attrs={"offsets": [1, 2]}, grad=("X",),
           name="shape_of_y"),
    OpCase("fsp", lambda r: {"X": N(r, 2, 3, 4, 5), "Y": N(r, 2, 4, 4, 5)}, fsp_ref, grad=("X", "Y"), name="",
           errors=(({"X": spec(2, 3, 4, 5), "Y": spec(2, 4, 4, 6)}, {}, ProgramError, "must share N, H and W"),
                   ({"X": spec(2, 3, 4), "Y": spec(2, 4, 4, 5)}, {}, ProgramError, "must be 4-D"))),
    OpCase("similarity_focus", lambda r: {"X": _distinct(r, 2, 3, 4, 5)}, focus_ref,
           attrs={"axis": 1, "indexes": [0, 2]}, name="axis1", errors=(
               ({"X": spec(2, 3, 4, 5)}, {"axis": 0, "indexes": [0]}, ProgramError, "axis must be 1, 2 or 3"),
               ({"X": spec(2, 3, 4, 5)}, {"axis": 1, "indexes": []}, ProgramError, "non-empty"),
               ({"X": spec(2, 3, 4, 5)}, {"axis": 2, "indexes": [4]}, ProgramError, r"lie in \[0, 4\)"))),
    OpCase("similarity_focus", lambda r: {"X": _distinct(r, 2, 3, 4, 5)}, focus_ref,
           attrs={"axis": 2, "indexes": [3]}, name="axis2"),
    OpCase("similarity_focus", lambda r: {"X": _distinct(r, 2, 3, 4, 5)}, focus_ref,
           attrs={"axis": 3, "indexes": [1, 4, 1]}, name="axis3"),
    OpCase("add_position_encoding", lambda r: {"X": N(r, 2, 5, 6)}, encoding_ref, attrs={"alpha": 0.7, "beta": 1.3},
           grad=("X",), name="", errors=(
               ({"X": spec(2, 5, 5)}, {}, ProgramError, "size E must be even"),
               ({"X": spec(10, 6)}, {}, ProgramError, "must be 3-D"))),
    OpCase("add_position_encoding", lambda r: {"X": N(r, 2, 3, 2)}, encoding_ref, grad=("X",), name="e2"),
]
