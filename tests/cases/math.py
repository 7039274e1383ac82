"""OpCases for the math, activation, elementwise and reduction ops of Fluid 1.8 added with
tests/test_math_layers.py (elementwise_max .. mod, sin .. soft_relu, prelu, label_smooth, ...);
tests/op_cases.py gathers them.

References are plain numpy (and ``math.erf``), written apart from the kernels in ops/unary.py,
ops/elementwise.py, ops/math.py, ops/linalg.py, ops/compare.py, ops/shape.py, ops/resample.py
and ops/index.py. Samplers keep inputs away from kinks (thresholds, x == y for max/min) so the
float64 gradient check sees a smooth function; the rules at the kinks are Paddle's and are
tested against Paddle 2.6 in tests/test_math_layers.py.
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from placegroup.errors import ProgramError
from tests.op_case import OpCase, N, away, pos, spec


def _apart(lo, hi, *kinks):
    """Uniform reals in [lo, hi], at least 0.1 from each kink."""

    def draw(r, *shape):
        x = r.uniform(lo, hi, size=shape)
        for k in kinks:
            x = np.where(np.abs(x - k) < 0.1, x + 0.25, x)
        return x

    return draw


def _binary_cases(op: str, f, x_dom=N, y_dom=N, grad=("X", "Y")) -> list:
    """Same shapes, Y [3] at axis 1 and Y [4] at the end (Fluid's broadcasting), for one op."""
    out = []
    for name, ys, axis, view in [("same", (2, 3, 4), -1, (2, 3, 4)), ("axis1", (3,), 1, (1, 3, 1)),
                                 ("last", (4,), -1, (4,))]:
        out.append(OpCase(op, lambda r, ys=ys: {"X": x_dom(r, 2, 3, 4), "Y": y_dom(r, *ys)},
                          lambda i, a, view=view: {"Out": f(i["X"], i["Y"].reshape(view))}, attrs={"axis": axis},
                          grad=grad, name=name,
                          errors=(({"X": spec(2, 3, 4), "Y": spec(5)}, {"axis": 1}, ProgramError, "do not broadcast"),)
                          if name == "same" else ()))
    return out


def _ints(lo, hi, nonzero=False):
    def draw(r, *shape):
        v = r.integers(lo, hi, size=shape)
        return np.where(v == 0, 3, v) if nonzero else v

    return draw


_X = np.array([-7, 7, -7, 7, 6, 0, -1])
_Y = np.array([2, 2, -2, -2, 3, 5, 4])
_erf = np.vectorize(math.erf)


def _bool_reduce_ref(f):
    def ref(i, a):
        out = f(i["X"], axis=None if a["reduce_all"] else tuple(a["dim"]), keepdims=a["keep_dim"])
        return {"Out": np.reshape(out, np.shape(out) or (1,))}

    return ref


_BOOLS = lambda r, *s: r.random(s) < 0.6  # noqa: E731
_SPECIALS = np.array([[1.0, np.inf, 2.0], [np.nan, -1.0, 0.0]])


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def _softplus(x):
    return np.logaddexp(0, x)


# op, sampler, reference(x, attrs), attrs, variant name
_UNARY = [
    ("sin", N, lambda x, a: np.sin(x), {}, ""),
    ("cos", N, lambda x, a: np.cos(x), {}, ""),
    ("asin", _apart(-0.9, 0.9), lambda x, a: np.arcsin(x), {}, ""),
    ("acos", _apart(-0.9, 0.9), lambda x, a: np.arccos(x), {}, ""),
    ("atan", lambda r, *s: 3 * N(r, *s), lambda x, a: np.arctan(x), {}, ""),
    ("log1p", _apart(-0.8, 3), lambda x, a: np.log1p(x), {}, ""),
    ("erf", lambda r, *s: 2 * N(r, *s), lambda x, a: _erf(x), {}, ""),
    ("gelu", lambda r, *s: 2 * N(r, *s), lambda x, a: 0.5 * x * (1 + _erf(x / np.sqrt(2))), {}, ""),
    ("gelu", lambda r, *s: 2 * N(r, *s),
     lambda x, a: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), {"approximate": True},
     "approximate"),
    ("selu", away, lambda x, a: 1.0507009873554805 * np.where(x > 0, x, 1.6732632423543772 * (np.exp(x) - 1)), {},
     ""),
    ("selu", away, lambda x, a: 2.0 * np.where(x > 0, x, 0.5 * (np.exp(x) - 1)), {"scale": 2.0, "alpha": 0.5},
     "attrs"),
    ("logsigmoid", lambda r, *s: 5 * N(r, *s), lambda x, a: np.log(_sigmoid(x)), {}, ""),
    ("hard_swish", _apart(-5, 5, -3, 3), lambda x, a: x * np.clip(x + 3, 0, 6) / 6, {}, ""),
    ("mish", lambda r, *s: 3 * N(r, *s), lambda x, a: x * np.tanh(_softplus(x)), {}, ""),
    ("mish", lambda r, *s: 3 * N(r, *s),
     lambda x, a: x * np.tanh(np.where(x > 1, x, np.where(x < -1, np.exp(x), _softplus(x)))), {"threshold": 1.0},
     "threshold"),
    ("thresholded_relu", _apart(-2, 2, 1.0), lambda x, a: np.where(x > 1.0, x, 0), {}, ""),
    ("thresholded_relu", _apart(-2, 2, -0.5), lambda x, a: np.where(x > -0.5, x, 0), {"threshold": -0.5},
     "threshold"),
    ("softshrink", _apart(-2, 2, -0.5, 0.5), lambda x, a: np.where(x > 0.5, x - 0.5, np.where(x < -0.5, x + 0.5, 0)),
     {}, ""),
    ("softshrink", _apart(-2, 2, -1.2, 1.2), lambda x, a: np.sign(x) * np.maximum(np.abs(x) - 1.2, 0),
     {"lambda": 1.2}, "lambda"),
    ("hard_shrink", _apart(-2, 2, -0.5, 0.5), lambda x, a: np.where(np.abs(x) > 0.5, x, 0), {}, ""),
    ("hard_shrink", _apart(-2, 2, -1.5, 1.5), lambda x, a: np.where(np.abs(x) > 1.5, x, 0), {"threshold": 1.5},
     "threshold"),
    ("tanh_shrink", N, lambda x, a: x - np.tanh(x), {}, ""),
    ("stanh", N, lambda x, a: 1.7159 * np.tanh(0.67 * x), {}, ""),
    ("stanh", N, lambda x, a: 2.0 * np.tanh(0.5 * x), {"scale_a": 0.5, "scale_b": 2.0}, "scales"),
    ("soft_relu", lambda r, *s: 3 * N(r, *s), lambda x, a: np.log1p(np.exp(x)), {}, ""),
    ("soft_relu", _apart(-4, 4, -2, 2), lambda x, a: np.log1p(np.exp(np.clip(x, -2, 2))), {"threshold": 2.0},
     "threshold"),
]

CASES: list[OpCase] = [
    # elementwise max, min, pow (with gradients), floordiv, mod (without: Fluid 1.8 has none)
    *_binary_cases("elementwise_max", np.maximum), *_binary_cases("elementwise_min", np.minimum),
    *_binary_cases("elementwise_pow", np.power, x_dom=pos),
    OpCase("elementwise_floordiv", lambda r: {"X": _X, "Y": _Y}, lambda i, a: {"Out": np.array([-3, 3, 3, -3, 2, 0, 0])},
           name="trunc", batch=(),
           errors=(({"X": spec(2, 3), "Y": spec(2, 3)}, {}, ProgramError,
                    r"elementwise_floordiv: X must be int32 or int64 .*got float32\[2, 3\]"),
                   ({"X": np.array([3]), "Y": np.array([0])}, {}, ZeroDivisionError, "elementwise_floordiv: Y holds 0"))),
    OpCase("elementwise_floordiv", lambda r: {"X": _ints(-9, 9)(r, 2, 3, 4), "Y": _ints(-4, 4, True)(r, 3)},
           lambda i, a: {"Out": np.trunc(i["X"] / i["Y"].reshape(1, 3, 1)).astype(i["X"].dtype)}, attrs={"axis": 1},
           name="axis1"),
    OpCase("elementwise_mod", lambda r: {"X": _X, "Y": _Y}, lambda i, a: {"Out": np.array([-1, 1, -1, 1, 0, 0, -1])},
           name="int_sign_of_x", batch=(),
           errors=(({"X": spec(2, 3), "Y": spec(2, 3, dtype="int64")}, {}, ProgramError, "differ in dtype"),
                   ({"X": np.array([3.0]), "Y": np.array([0.0])}, {}, ZeroDivisionError, "elementwise_mod: Y holds 0"))),
    OpCase("elementwise_mod", lambda r: {"X": _X.astype(float), "Y": _Y + 0.5},
           lambda i, a: {"Out": np.mod(i["X"], i["Y"])}, name="float_sign_of_y", batch=()),
    # unary activations and functions
    # Past ±threshold, mish's and soft_relu's gradients are Paddle's formulas, not derivatives
    # (NOTE(unary-grad-rules)): only their outputs are checked there; Paddle checks the rest.
    *[OpCase(op, lambda r, d=d: {"X": d(r, 3, 4)}, lambda i, a, f=f: {"Out": f(i["X"], a)}, attrs=attrs,
             grad=() if name == "threshold" and op in ("mish", "soft_relu") else ("X",), name=name)
      for op, d, f, attrs, name in _UNARY],
    OpCase("erf", lambda r: {"X": np.array([0.0, 1e-9, -0.3, 0.5, -1.5, 3.0, 5.9, -7.0, 30.0])},
           lambda i, a: {"Out": _erf(i["X"])}, name="range", batch=()),
    OpCase("soft_relu", lambda r: {"X": np.array([-50.0, -1.0, 0.0, 2.0, 45.0])},
           lambda i, a: {"Out": np.log1p(np.exp(np.clip(i["X"], -40, 40)))}, name="clipped", batch=()),
    # prelu (mode all / channel / element), label_smooth
    OpCase("prelu", lambda r: {"X": away(r, 2, 3, 4), "Alpha": np.array([0.25])},
           lambda i, a: {"Out": np.where(i["X"] > 0, i["X"], 0.25 * i["X"])}, grad=("X", "Alpha"), name="all",
           errors=(({"X": spec(2, 3), "Alpha": spec(2)}, {}, ProgramError, r"Alpha\[2\] has 2 values; mode 'all' needs 1"),
                   ({"X": spec(2, 3), "Alpha": spec(1)}, {"mode": "row"}, ProgramError, "mode 'row' must be all"))),
    OpCase("prelu", lambda r: {"X": away(r, 2, 3, 2, 2), "Alpha": pos(r, 1, 3, 1, 1)},
           lambda i, a: {"Out": np.where(i["X"] > 0, i["X"], i["Alpha"] * i["X"])}, attrs={"mode": "channel"},
           grad=("X", "Alpha"), name="channel",
           errors=(({"X": spec(2, 3, 4), "Alpha": spec(1, 4, 1, 1)}, {"mode": "channel"}, ProgramError,
                    r"mode 'channel' needs 3 for X\[2, 3, 4\]"),
                   ({"X": spec(3), "Alpha": spec(1)}, {"mode": "channel"}, ProgramError, "needs X of rank >= 2"))),
    OpCase("prelu", lambda r: {"X": away(r, 2, 3, 4), "Alpha": pos(r, 1, 3, 4)},
           lambda i, a: {"Out": np.where(i["X"] > 0, i["X"], i["Alpha"] * i["X"])}, attrs={"mode": "element"},
           grad=("X", "Alpha"), name="element"),
    OpCase("label_smooth", lambda r: {"X": np.eye(4)[[1, 0, 3]]}, lambda i, a: {"Out": 0.9 * i["X"] + 0.1 / 4},
           attrs={"epsilon": 0.1}, grad=("X",),
           errors=(({"X": spec(3, 4)}, {"epsilon": 1.5}, ProgramError, r"epsilon 1.5 must be in \[0, 1\]"),
                   ({"X": spec(3, 4), "PriorDist": spec(1, 3)}, {"epsilon": 0.1}, ProgramError,
                    r"PriorDist\[1, 3\] must hold one value per class"))),
    OpCase("label_smooth", lambda r: {"X": np.eye(4)[[1, 0, 3]], "PriorDist": np.array([[0.1, 0.2, 0.3, 0.4]])},
           lambda i, a: {"Out": 0.8 * i["X"] + 0.2 * i["PriorDist"]}, attrs={"epsilon": 0.2}, grad=("X",),
           name="prior"),
]

CASES += [
    # bool reductions and whole-tensor tests (no gradients)
    *[OpCase(op, lambda r: {"X": _BOOLS(r, 2, 3, 4)}, _bool_reduce_ref(f), attrs=attrs, name=name,
             errors=(({"X": spec(2, 3)}, {"dim": [1]}, ProgramError, f"{op}: X must be bool, got float32"),
                     ({"X": spec(2, 3, dtype="bool")}, {"dim": [2]}, ProgramError, "dim 2 is out of range")))
      for op, f in (("reduce_all", np.all), ("reduce_any", np.any))
      for name, attrs in (("dim1", {"dim": [1]}), ("keep_last", {"dim": [-1, 0], "keep_dim": True}),
                          ("all", {"reduce_all": True}))],
    *[OpCase(op, lambda r, x=x: {"X": x}, lambda i, a, want=want: {"Out": np.array([want])}, name=name, batch=())
      for op, want_specials, want_normal in (("isfinite", False, True), ("isinf", True, False), ("isnan", True, False))
      for name, x, want in (("specials", _SPECIALS, want_specials), ("normal", np.ones((2, 3)), want_normal))],
    OpCase("isinf", lambda r: {"X": np.array([[np.nan, 1.0]])}, lambda i, a: {"Out": np.array([False])}, name="nan_only",
           batch=()),
    OpCase("allclose", lambda r: {"Input": np.array([1.0, 2.0, np.nan]), "Other": np.array([1.0 + 1e-6, 2.0, np.nan])},
           lambda i, a: {"Out": np.array([a["equal_nan"]])}, attrs={"equal_nan": True}, name="equal_nan", batch=()),
    OpCase("allclose", lambda r: {"Input": np.array([1.0, 2.0, np.nan]), "Other": np.array([1.0 + 1e-6, 2.0, np.nan])},
           lambda i, a: {"Out": np.array([False])}, name="nan", batch=(),
           errors=(({"Input": spec(2, 3), "Other": spec(4)}, {}, ProgramError, r"Input\[2, 3\] and Other\[4\] do not"),)),
    OpCase("allclose", lambda r: {"Input": np.array([[1.0, 2.0]]), "Other": np.array([[1.1, 2.0]])},
           lambda i, a: {"Out": np.array([True])}, attrs={"rtol": 0.0, "atol": 0.2}, name="atol"),
]


def _lrn_ref(i, a):
    x = i["X"] if a["data_format"] != "NHWC" else i["X"].transpose(0, 3, 1, 2)
    n, c = a["n"], x.shape[1]
    mid = np.full(x.shape, a["k"])
    for ch in range(c):
        for j in range(ch - (n - 1) // 2, ch - (n - 1) // 2 + n):
            if 0 <= j < c:
                mid[:, ch] += a["alpha"] * x[:, j] ** 2
    out = x * mid ** -a["beta"]
    if a["data_format"] == "NHWC":
        out, mid = out.transpose(0, 2, 3, 1), mid.transpose(0, 2, 3, 1)
    return {"Out": out, "MidOut": mid}


def _maxout_ref(i, a):
    x = i["X"] if a["axis"] == 1 else i["X"].transpose(0, 3, 1, 2)
    n, c, h, w = x.shape
    out = x.reshape(n, c // a["groups"], a["groups"], h, w).max(2)
    return {"Out": out if a["axis"] == 1 else out.transpose(0, 2, 3, 1)}


def _dist_ref(i, a):
    d = np.abs(i["X"] - i["Y"]).ravel()
    p = a["p"]
    v = (d != 0).sum() if p == 0 else d.max() if p == np.inf else d.min() if p == -np.inf else (d ** p).sum() ** (1 / p)
    return {"Out": np.array([v])}


def _trace_ref(i, a):
    x = i["Input"]
    d1, d2 = sorted((a["dim1"] % x.ndim, a["dim2"] % x.ndim))  # Paddle's plane: the lower dim gives the rows
    return {"Out": np.trace(x, a["offset"], d1, d2).reshape(-1) if x.ndim == 2 else np.trace(x, a["offset"], d1, d2)}


_F = {"X": spec(2, 3, 4)}

CASES += [
    # lrn (NOTE(lrn)), maxout, affine_channel, clip_by_norm
    OpCase("lrn", lambda r: {"X": N(r, 2, 6, 3, 3)}, _lrn_ref, attrs={"n": 5, "k": 1.0, "alpha": 0.1, "beta": 0.75},
           grad=("X",), grad_outs=("Out",),
           errors=(({"X": spec(2, 6, 3)}, {}, ProgramError, r"lrn: X must be 4-D, got X\[2, 6, 3\]"),
                   ({"X": spec(2, 6, 3, 3)}, {"n": 4}, ProgramError, "lrn: n must be a positive odd number, got 4"))),
    OpCase("lrn", lambda r: {"X": N(r, 2, 3, 3, 5)}, _lrn_ref, grad=("X",), grad_outs=("Out",), name="nhwc_n3",
           attrs={"n": 3, "k": 2.0, "alpha": 0.2, "beta": 0.5, "data_format": "NHWC"}),
    OpCase("maxout", lambda r: {"X": N(r, 2, 6, 3, 2)}, _maxout_ref, attrs={"groups": 3}, grad=("X",),
           errors=(({"X": spec(2, 6, 3, 2)}, {"groups": 4}, ProgramError, r"groups 4 must divide the 6 channels"),
                   ({"X": spec(2, 6, 3, 2)}, {"groups": 2, "axis": 2}, ProgramError, "axis 1 .NCHW. or 3"))),
    OpCase("maxout", lambda r: {"X": N(r, 2, 3, 2, 4)}, _maxout_ref, attrs={"groups": 2, "axis": 3}, grad=("X",),
           name="nhwc"),
    OpCase("affine_channel", lambda r: {"X": N(r, 2, 3, 2, 2), "Scale": N(r, 3), "Bias": N(r, 3)},
           lambda i, a: {"Out": i["X"] * i["Scale"].reshape(1, 3, 1, 1) + i["Bias"].reshape(1, 3, 1, 1)},
           attrs={"data_layout": "NCHW"}, grad=("X", "Scale", "Bias"),
           errors=(({"X": spec(2, 3, 4), "Scale": spec(4), "Bias": spec(4)}, {"data_layout": "NCHW"}, ProgramError,
                    r"Scale\[4\] must hold one value per channel of X\[2, 3, 4\] \(3, NCHW\)"),)),
    OpCase("affine_channel", lambda r: {"X": N(r, 2, 3, 4), "Scale": N(r, 4), "Bias": N(r, 4)},
           lambda i, a: {"Out": i["X"] * i["Scale"] + i["Bias"]}, grad=("X", "Scale", "Bias"), name="anylayout_last"),
    OpCase("affine_channel", lambda r: {"X": N(r, 2, 2, 2, 3), "Scale": N(r, 3), "Bias": N(r, 3)},
           lambda i, a: {"Out": i["X"] * i["Scale"] + i["Bias"]}, attrs={"data_layout": "NHWC"},
           grad=("X", "Scale", "Bias"), name="nhwc"),
    OpCase("clip_by_norm", lambda r: {"X": N(r, 3, 4)}, lambda i, a: {"Out": i["X"] / np.linalg.norm(i["X"])},
           attrs={"max_norm": 1.0}, errors=(({"X": spec(3)}, {"max_norm": 0.0}, ProgramError, "max_norm must be > 0"),)),
    OpCase("clip_by_norm", lambda r: {"X": N(r, 3, 4)}, lambda i, a: {"Out": i["X"]}, attrs={"max_norm": 100.0},
           name="under"),
    # products
    OpCase("bmm", lambda r: {"X": N(r, 2, 3, 4), "Y": N(r, 2, 4, 5)}, lambda i, a: {"Out": i["X"] @ i["Y"]},
           grad=("X", "Y"), batch=("X", "Y"),
           errors=(({"X": spec(2, 3, 4), "Y": spec(2, 3, 5)}, {}, ProgramError, "has 4 columns but Y.* has 3 rows"),
                   ({"X": spec(3, 4), "Y": spec(4, 5)}, {}, ProgramError, "must both be 3-D"),
                   ({"X": spec(2, 3, 4), "Y": spec(3, 4, 5)}, {}, ProgramError, "differ in batch size"))),
    OpCase("dot", lambda r: {"X": N(r, 3, 4), "Y": N(r, 3, 4)}, lambda i, a: {"Out": (i["X"] * i["Y"]).sum(1, keepdims=True)},
           grad=("X", "Y"), batch=("X", "Y"),
           errors=(({"X": spec(3, 4), "Y": spec(3, 5)}, {}, ProgramError, "must be 1-D or 2-D of one shape"),)),
    OpCase("dot", lambda r: {"X": N(r, 5), "Y": N(r, 5)}, lambda i, a: {"Out": np.array([i["X"] @ i["Y"]])},
           grad=("X", "Y"), name="vectors"),
    OpCase("addmm", lambda r: {"Input": N(r, 2, 4), "X": N(r, 2, 3), "Y": N(r, 3, 4)},
           lambda i, a: {"Out": 0.5 * i["Input"] + 2.0 * i["X"] @ i["Y"]}, attrs={"Alpha": 2.0, "Beta": 0.5},
           grad=("Input", "X", "Y"), batch=("X",),
           errors=(({"Input": spec(2, 4), "X": spec(2, 3), "Y": spec(4, 4)}, {}, ProgramError, "matrices that multiply"),
                   ({"Input": spec(3, 4), "X": spec(2, 3), "Y": spec(3, 4)}, {}, ProgramError,
                    r"Input\[3, 4\] must be 2-D and broadcast"))),
    OpCase("addmm", lambda r: {"Input": N(r, 1, 4), "X": N(r, 2, 3), "Y": N(r, 3, 4)},
           lambda i, a: {"Out": i["Input"] + i["X"] @ i["Y"]}, grad=("Input", "X", "Y"), name="row", batch=("X",)),
    OpCase("bilinear_tensor_product", lambda r: {"X": N(r, 4, 2), "Y": N(r, 4, 3), "Weight": N(r, 5, 2, 3),
                                                 "Bias": N(r, 1, 5)},
           lambda i, a: {"Out": np.einsum("bm,smn,bn->bs", i["X"], i["Weight"], i["Y"]) + i["Bias"]},
           grad=("X", "Y", "Weight", "Bias"), batch=("X", "Y"),
           errors=(({"X": spec(4, 2), "Y": spec(4, 3), "Weight": spec(5, 3, 2)}, {}, ProgramError,
                    r"Weight\[5, 3, 2\] must be \[size, 2, 3\]"),
                   ({"X": spec(4, 2), "Y": spec(4, 3), "Weight": spec(5, 2, 3), "Bias": spec(5)}, {}, ProgramError,
                    r"Bias\[5\] must be \[1, 5\]"))),
    OpCase("bilinear_tensor_product", lambda r: {"X": N(r, 4, 2), "Y": N(r, 4, 3), "Weight": N(r, 2, 2, 3)},
           lambda i, a: {"Out": np.einsum("bm,smn,bn->bs", i["X"], i["Weight"], i["Y"])}, grad=("X", "Y", "Weight"),
           name="no_bias", batch=("X", "Y")),
    OpCase("kron", lambda r: {"X": N(r, 2, 3), "Y": N(r, 3, 2)}, lambda i, a: {"Out": np.kron(i["X"], i["Y"])},
           grad=("X", "Y"), batch=()),
    OpCase("kron", lambda r: {"X": N(r, 2, 1, 3), "Y": N(r, 2, 2)}, lambda i, a: {"Out": np.kron(i["X"], i["Y"])},
           grad=("X", "Y"), name="ranks", batch=()),
    OpCase("trace", lambda r: {"Input": N(r, 3, 4)}, _trace_ref, attrs={"offset": 1}, grad=("Input",), batch=(),
           errors=(({"Input": spec(3)}, {}, ProgramError, r"rank >= 2, got Input\[3\]"),
                   ({"Input": spec(3, 4)}, {"dim1": 1, "dim2": -1}, ProgramError, "two different dims"))),
    OpCase("trace", lambda r: {"Input": N(r, 2, 3, 4)}, _trace_ref, attrs={"offset": -1, "dim1": 2, "dim2": 1},
           grad=("Input",), name="batched"),
    OpCase("cross", lambda r: {"X": N(r, 4, 3), "Y": N(r, 4, 3)}, lambda i, a: {"Out": np.cross(i["X"], i["Y"])},
           grad=("X", "Y"), batch=("X", "Y"),
           errors=(({"X": spec(4, 2), "Y": spec(4, 2)}, {}, ProgramError, "no dim of X.* has size 3"),
                   ({"X": spec(3, 4), "Y": spec(3, 4)}, {"dim": 1}, ProgramError, r"dim 1 of X\[3, 4\] must have size 3"),
                   ({"X": spec(3, 4), "Y": spec(3, 3)}, {}, ProgramError, "must have one shape"))),
    OpCase("cross", lambda r: {"X": N(r, 3, 3, 2), "Y": N(r, 3, 3, 2)},
           lambda i, a: {"Out": np.cross(i["X"], i["Y"], axis=1)}, attrs={"dim": 1}, grad=("X", "Y"), name="dim1",
           batch=("X", "Y")),
    *[OpCase("dist", lambda r: {"X": N(r, 2, 3), "Y": N(r, 3)}, _dist_ref, attrs={"p": p}, grad=("X", "Y"),
             name=f"p{p}", batch=(),
             errors=(({"X": spec(2, 3), "Y": spec(4)}, {}, ProgramError, "do not broadcast"),) if p == 2.0 else ())
      for p in (2.0, 1.0, 3.0, np.inf, -np.inf)],
    OpCase("dist", lambda r: {"X": np.array([[1.0, 2.0, 3.0]]), "Y": np.array([[1.0, 0.0, 3.0]])}, _dist_ref,
           attrs={"p": 0.0}, name="p0", batch=()),
]


def _ids(*v, dtype=np.int64):
    return np.array(v, dtype=dtype)


def _scatter_nd_ref(i, a):
    out = i["X"].copy()
    idx = i["Index"]
    np.add.at(out, tuple(idx[..., k] for k in range(idx.shape[-1])), i["Updates"])
    return {"Out": out}


def _unique_ref(counts):
    def ref(i, a):
        seen = {}
        for v in i["X"].tolist():
            seen.setdefault(v, len(seen))
        vals = np.array(list(seen), dtype=i["X"].dtype)
        out = {"Out": vals, "Index": np.array([seen[v] for v in i["X"].tolist()], dtype=a["dtype"])}
        if counts:
            out["Count"] = np.array([i["X"].tolist().count(v) for v in seen], dtype=a["dtype"])
        return out

    return ref


def _diag_embed_ref(i, a):
    x, off = i["Input"], a["offset"]
    m = x.shape[-1]
    n = m + abs(off)
    r = x.ndim + 1
    d1, d2 = a["dim1"] % r, a["dim2"] % r
    plane = np.zeros(x.shape[:-1] + (n, n))
    for k in range(m):
        plane[..., k + max(-off, 0), k + max(off, 0)] = x[..., k]
    return {"Out": np.moveaxis(plane, (-2, -1), (d1, d2))}


def _pixel_shuffle_ref(i, a):
    x, r = i["X"], a["upscale_factor"]
    n, c, h, w = x.shape
    out = np.zeros((n, c // (r * r), h * r, w * r))
    for ch in range(c // (r * r)):
        for p in range(r):
            for q in range(r):
                out[:, ch, p::r, q::r] = x[:, ch * r * r + p * r + q]
    return {"Out": out}


def _space_to_depth_ref(i, a):
    # Paddle's functor, index by index: in_index over X's buffer decomposed with X's dims, each
    # entry written where a [N, C/b², H·b, W·b] tensor holds it (NOTE(channel-moves))
    x, bs = i["X"], a["blocksize"]
    n, c, h, w = x.shape
    oc = c // (bs * bs)
    flat, out = x.reshape(-1), np.zeros(x.size)
    for in_index in range(x.size):
        b, rest = divmod(in_index, c * h * w)
        k, rest = divmod(rest, h * w)
        j, ii = divmod(rest, w)
        c2, offset = k % oc, k // oc
        w2, h2 = ii * bs + offset % bs, j * bs + offset // bs
        out[w2 + w * bs * (h2 + h * bs * (c2 + oc * b))] = flat[in_index]
    return {"Out": out.reshape(n, c * bs * bs, h // bs, w // bs)}


def _shuffle_channel_ref(i, a):
    x, g = i["X"], a["group"]
    c = x.shape[1]
    out = np.empty_like(x)
    for gi in range(g):
        for j in range(c // g):
            out[:, j * g + gi] = x[:, gi * (c // g) + j]
    return {"Out": out}


def _keys(v, A=-0.75):
    """Keys' cubic convolution kernel W(v)."""
    v = abs(v)
    return (A + 2) * v ** 3 - (A + 3) * v ** 2 + 1 if v <= 1 else A * v ** 3 - 5 * A * v ** 2 + 8 * A * v - 4 * A


def _interp_ref(rule):
    """Out by loops over output pixels and their taps; ``rule`` nearest, linear or cubic per dim."""

    def axis(n_in, n_out, a):
        f32 = np.float32
        ratio = f32(0) if n_out <= 1 else (f32(n_in - 1) / f32(n_out - 1) if a["align_corners"] else f32(n_in) / f32(n_out))
        rows = []
        for k in range(n_out):
            if rule == "nearest":
                rows.append([(int(ratio * f32(k) + 0.5) if a["align_corners"] else int(ratio * f32(k)), 1.0)])
                continue
            if rule == "cubic":  # NOTE(bicubic): the position is not clamped at 0
                src = float(ratio * f32(k)) if a["align_corners"] else float(ratio) * (k + 0.5) - 0.5
                lo = math.floor(src)
                rows.append([(min(max(lo + j, 0), n_in - 1), _keys(src - lo - j)) for j in (-1, 0, 1, 2)])
                continue
            if a["align_mode"] == 0 and not a["align_corners"]:
                src = float(ratio) * (k + 0.5) - 0.5
                lo = max(int(src), 0)
                d = float(f32(max(src, 0))) - lo
            else:
                lo = int(ratio * f32(k))
                d = float(ratio * f32(k)) - lo
            rows.append([(lo, 1 - d), (min(lo + 1, n_in - 1), d)])
        return rows

    def ref(i, a):
        last = a["data_layout"] == "NHWC"
        x = np.moveaxis(i["X"], -1, 1) if last else i["X"]
        sizes = x.shape[2:]
        names = ("out_d", "out_h", "out_w")[-len(sizes):]
        outs = [int(np.float32(n) * np.float32(a["scale"])) for n in sizes] if a["scale"] > 0 else [a[n] for n in names]
        taps = [axis(n, o, a) for n, o in zip(sizes, outs)]
        out = np.zeros(x.shape[:2] + tuple(outs))
        for at in itertools.product(*(range(o) for o in outs)):
            for tap in itertools.product(*(t[k] for t, k in zip(taps, at))):
                w = math.prod(wt for _, wt in tap)
                out[(...,) + at] += w * x[(...,) + tuple(j for j, _ in tap)]
        return {"Out": np.moveaxis(out, 1, -1) if last else out}

    return ref


_CONDITION = np.array([[True, False, True], [False, False, True]])


def _where_check(run, attrs):
    for cond in (_CONDITION, np.array([0, 3, 0, -1]), np.zeros((2, 2), bool)):
        got = run({"Condition": cond}, {})["Out"]
        assert got.dtype == np.int64
        np.testing.assert_array_equal(got, np.argwhere(cond).reshape(-1, cond.ndim))


def _unique_check(counts: bool):
    def check(run, attrs):
        for x, dtype in ((_ids(4, 2, 4, 7, 2, 2), "int32"), (np.array([0.5, -1.0, 0.5, 3.0], np.float32), "int64")):
            got, want = run({"X": x}, {"dtype": dtype}), _unique_ref(counts)({"X": x}, {"dtype": dtype})
            assert set(got) == set(want)
            for k in want:
                assert got[k].dtype == want[k].dtype, k
                np.testing.assert_array_equal(got[k], want[k])

    return check

CASES += [
    # scatter_nd_add, index_select, index_sample, multiplex
    OpCase("scatter_nd_add", lambda r: {"X": N(r, 3, 4, 2), "Index": _ids(1, 2, 0, 3, 1, 2).reshape(3, 2),
                                        "Updates": N(r, 3, 2)},
           _scatter_nd_ref, grad=("X", "Updates"), batch=(),
           errors=(({"X": spec(3, 4), "Index": spec(2, 3, dtype="int64"), "Updates": spec(2)}, {}, ProgramError,
                    r"last dim of Index\[2, 3\] must be in 1..2"),
                   ({"X": spec(3, 4), "Index": spec(2, 1, dtype="int64"), "Updates": spec(2, 3)}, {}, ProgramError,
                    r"Updates float32\[2, 3\] must be float32\[2, 4\]"),
                   ({"X": np.zeros((3, 4)), "Index": _ids(3).reshape(1, 1), "Updates": np.zeros((1, 4))}, {},
                    IndexError, r"scatter_nd_add: Index\[\.\.\., 0\] holds 3"))),
    OpCase("scatter_nd_add", lambda r: {"X": N(r, 3, 4), "Index": _ids(2, 1, 0, 0, 2, 1).reshape(3, 1, 2),
                                        "Updates": N(r, 3, 1)},
           _scatter_nd_ref, grad=("X", "Updates"), name="elements_repeated", batch=()),
    OpCase("index_select", lambda r: {"X": N(r, 3, 4, 2), "Index": _ids(3, 0, 3, dtype=np.int32)},
           lambda i, a: {"Out": np.take(i["X"], i["Index"], axis=1)}, attrs={"dim": 1}, grad=("X",),
           errors=(({"X": spec(3, 4), "Index": spec(2)}, {}, ProgramError, "Index must be int32 or int64"),
                   ({"X": spec(3, 4), "Index": spec(2, dtype="int64")}, {"dim": 2}, ProgramError,
                    r"index_select: dim 2 is out of range for X\[3, 4\]"),
                   ({"X": np.zeros((3, 4)), "Index": _ids(4)}, {"dim": 1}, IndexError,
                    "index_select: Index holds 4, out of range"))),
    OpCase("index_select", lambda r: {"X": N(r, 3, 4), "Index": _ids(2, 2, 0)},
           lambda i, a: {"Out": i["X"][[2, 2, 0]]}, grad=("X",), name="rows", batch=("Index",)),
    OpCase("index_sample", lambda r: {"X": N(r, 3, 5), "Index": _ids(4, 0, 4, 1, 1, 2, 3, 0, 0).reshape(3, 3)},
           lambda i, a: {"Out": np.take_along_axis(i["X"], i["Index"], 1)}, grad=("X",), batch=("X", "Index"),
           errors=(({"X": spec(3, 5), "Index": spec(3, dtype="int64")}, {}, ProgramError, "must be 2-D"),
                   ({"X": np.zeros((1, 5)), "Index": _ids(5).reshape(1, 1)}, {}, IndexError, "Index holds 5"))),
    OpCase("multiplex", lambda r: {"X": [N(r, 4, 3) for _ in range(3)], "Ids": _ids(2, 0, 2, 1, dtype=np.int32).reshape(4, 1)},
           lambda i, a: {"Out": np.stack(i["X"])[[2, 0, 2, 1], np.arange(4)]}, grad=("X",), batch=("X", "Ids"),
           errors=(({"X": [spec(4, 3)], "Ids": spec(4, 1, dtype="int64")}, {}, ProgramError, "at least 2 candidates"),
                   ({"X": [spec(4, 3)] * 2, "Ids": spec(4, dtype="int64")}, {}, ProgramError, r"Ids must be \[M, 1\]"),
                   ({"X": [np.zeros((1, 3))] * 2, "Ids": _ids(2).reshape(1, 1)}, {}, IndexError, "Ids holds 2"))),
    # where_index, unique, unique_with_counts, size
    # where_index and unique have data-dependent shapes (-1 in infer), so properties are checked
    OpCase("where_index", check=_where_check),
    OpCase("unique", check=_unique_check(False),
           errors=(({"X": spec(2, 3)}, {}, ProgramError, r"X must be 1-D, got X\[2, 3\]"),
                   ({"X": spec(3)}, {"dtype": "float32"}, ProgramError, "dtype must be int32 or int64"))),
    OpCase("unique_with_counts", check=_unique_check(True)),
    OpCase("size", lambda r: {"Input": N(r, 2, 3, 4)}, lambda i, a: {"Out": np.array([24])}),
    # flip, roll, tril_triu, diag, diag_embed, meshgrid
    OpCase("flip", lambda r: {"X": N(r, 2, 3, 4)}, lambda i, a: {"Out": i["X"][:, ::-1, ::-1]}, attrs={"dims": [1, -1]},
           grad=("X",), errors=((_F, {"dims": []}, ProgramError, "at least one"),
                                (_F, {"dims": [3]}, ProgramError, "dims entry 3 is out of range"))),
    OpCase("roll", lambda r: {"X": N(r, 2, 3, 4)}, lambda i, a: {"Out": np.roll(i["X"], (1, -3), (2, 1))},
           attrs={"shifts": [1, -3], "dims": [2, 1]}, grad=("X",),
           errors=((_F, {"shifts": [1], "dims": [0, 1]}, ProgramError, "of one length"),
                   (_F, {"shifts": [1], "dims": [5]}, ProgramError, "dims entry 5 is out of range"))),
    *[OpCase("tril_triu", lambda r: {"X": N(r, 2, 3, 4)},
             lambda i, a, f=f, d=d: {"Out": f(i["X"], d)}, attrs={"diagonal": d, "lower": f is np.tril}, grad=("X",),
             name=f"{f.__name__}{d}", errors=(({"X": spec(3)}, {}, ProgramError, "rank >= 2"),) if d == 0 else ())
      for f in (np.tril, np.triu) for d in (0, 1, -2)],
    OpCase("diag", lambda r: {"Diagonal": N(r, 4)}, lambda i, a: {"Out": np.diag(i["Diagonal"])},
           errors=(({"Diagonal": spec(2, 2)}, {}, ProgramError, "Diagonal must be 1-D"),)),
    *[OpCase("diag_embed", lambda r: {"Input": N(r, 2, 3)}, _diag_embed_ref, attrs=attrs, name=name,
             errors=(({"Input": spec(2, 3)}, {"dim1": 1, "dim2": -2}, ProgramError, "two different dims"),)
             if name == "default" else ())
      for name, attrs in (("default", {}), ("offset", {"offset": 1}), ("neg_dims", {"offset": -2, "dim1": 0, "dim2": 2}),
                          ("swapped", {"offset": 1, "dim1": -1, "dim2": 0}))],
    OpCase("meshgrid", lambda r: {"X": [N(r, 3), N(r, 2), N(r, 4)]},
           lambda i, a: {"Out": list(np.meshgrid(*i["X"], indexing="ij"))}, grad=("X",),
           errors=(({"X": [spec(3), spec(2, 2)]}, {}, ProgramError, r"X\[1\] must be 1-D"),)),
    # strided_slice: a negative stride takes entries anchored at the end (NOTE(strided-slice-1.8));
    # the index lists are Paddle 1.8.5's
    OpCase("strided_slice", lambda r: {"Input": N(r, 5, 6, 3)},
           lambda i, a: {"Out": i["Input"][np.ix_([1, 3], [4, 2, 0], [2, 1])]},
           attrs={"axes": [0, 1, 2], "starts": [1, -1, 2], "ends": [100, -100, 0], "strides": [2, -2, -1],
                  "infer_flags": [1, 1, 1]},
           grad=("Input",), batch=(),
           errors=(({"Input": spec(5, 6)}, {"axes": [1], "starts": [4], "ends": [1], "strides": [1]}, ProgramError,
                    "leave nothing of dim 1"),
                   ({"Input": spec(5, 6)}, {"axes": [1], "starts": [0], "ends": [1], "strides": [0]}, ProgramError,
                    r"strides \[0\] holds a 0"),
                   ({"Input": spec(5, 6)}, {"axes": [0, 1], "starts": [0], "ends": [1], "strides": [1]}, ProgramError,
                    "differ in length"))),
    *[OpCase("strided_slice", lambda r: {"Input": N(r, 2, 7)}, lambda i, a, want=want: {"Out": i["Input"][:, want]},
             attrs={"axes": [1], "starts": [s], "ends": [e], "strides": [k], "infer_flags": [1]}, grad=("Input",),
             name=f"anchored{s}_{e}_{k}")
      for s, e, k, want in ((5, -100, -2, [4, 2, 0]), (6, 0, -3, [4, 1]), (-1, -1, -2, [6, 4, 2, 0]),
                            (-1, -7, -2, [5, 3, 1]), (-9, -5, 1, [0, 1]), (2, -1, 2, [2, 4]))],
    OpCase("strided_slice", lambda r: {"Input": N(r, 4, 6)}, lambda i, a: {"Out": i["Input"][:, 3]},
           attrs={"axes": [1], "starts": [3], "ends": [4], "strides": [1], "infer_flags": [1], "decrease_axis": [1]},
           grad=("Input",),
           name="decrease"),
    # pixel_shuffle, space_to_depth, shuffle_channel, pad_constant_like
    OpCase("pixel_shuffle", lambda r: {"X": N(r, 2, 8, 2, 3)}, _pixel_shuffle_ref, attrs={"upscale_factor": 2},
           grad=("X",), errors=(({"X": spec(2, 6, 2, 3)}, {"upscale_factor": 2}, ProgramError,
                                 r"channels 6 of X\[2, 6, 2, 3\] is not a multiple of 4"),
                                ({"X": spec(2, 4, 2)}, {"upscale_factor": 2}, ProgramError, "must be 4-D"))),
    OpCase("space_to_depth", lambda r: {"X": N(r, 2, 4, 4, 6)}, _space_to_depth_ref, attrs={"blocksize": 2}, grad=("X",),
           errors=(({"X": spec(2, 4, 3, 6)}, {"blocksize": 2}, ProgramError, "height 3 .* is not a multiple of 2"),)),
    # its gradient is Paddle's rule (NOTE(shuffle-grad)), a derivative only when group² = C
    OpCase("shuffle_channel", lambda r: {"X": N(r, 2, 4, 2, 2)}, _shuffle_channel_ref, attrs={"group": 2}, grad=("X",),
           name="square"),
    OpCase("shuffle_channel", lambda r: {"X": N(r, 2, 6, 2, 2)}, _shuffle_channel_ref, attrs={"group": 3},
           errors=(({"X": spec(2, 6, 2, 2)}, {"group": 4}, ProgramError, "channels 6 .* is not a multiple of 4"),)),
    OpCase("pad_constant_like", lambda r: {"X": N(r, 3, 4), "Y": N(r, 2, 3)},
           lambda i, a: {"Out": np.pad(i["Y"], ((0, 1), (0, 1)), constant_values=0.5)}, attrs={"pad_value": 0.5},
           grad=("Y",), batch=(),
           errors=(({"X": spec(3, 4), "Y": spec(2, 5)}, {}, ProgramError, r"no dim larger than X's"),)),
    # bilinear_interp, nearest_interp, bicubic_interp (NOTE(interp), NOTE(bicubic)), trilinear_interp
    *[OpCase(op, lambda r, fmt=attrs.get("data_layout"): {"X": N(r, 2, 3, 4, 5) if fmt != "NHWC" else N(r, 2, 4, 5, 3)},
             _interp_ref(rule), attrs=attrs, grad=("X",), name=name,
             errors=(({"X": spec(2, 3, 4)}, {"out_h": 2, "out_w": 2}, ProgramError, f"{op}: X must be 4-D"),
                     ({"X": spec(2, 3, 4, 5)}, {}, ProgramError, "out_h 0 and out_w 0 must be > 0"),
                     ({"X": spec(2, 3, 4, 5)}, {"out_h": 2, "out_w": 2, "data_layout": "NCDHW"}, ProgramError,
                      "data_layout NCHW or NHWC"))
             if name == "corners" else ())
      for op, rule in (("bilinear_interp", "linear"), ("nearest_interp", "nearest"), ("bicubic_interp", "cubic"))
      for name, attrs in (("corners", {"out_h": 7, "out_w": 3}),
                          ("no_corners", {"out_h": 6, "out_w": 8, "align_corners": False}),
                          ("half_pixel", {"out_h": 3, "out_w": 9, "align_corners": False, "align_mode": 0}),
                          ("scale", {"scale": 1.5, "align_corners": False}),
                          ("nhwc", {"out_h": 5, "out_w": 4, "data_layout": "NHWC"}),
                          ("one_row", {"out_h": 1, "out_w": 2, "align_corners": False}))],
    *[OpCase("trilinear_interp", lambda r, fmt=attrs.get("data_layout"): {
        "X": N(r, 2, 2, 3, 4, 5) if fmt != "NHWC" else N(r, 2, 3, 4, 5, 2)},
             _interp_ref("linear"), attrs=attrs, grad=("X",), name=name,
             errors=(({"X": spec(2, 3, 4, 5)}, {"out_d": 2, "out_h": 2, "out_w": 2}, ProgramError,
                      r"trilinear_interp: X must be 5-D .*got X\[2, 3, 4, 5\]"),
                     ({"X": spec(2, 3, 4, 5, 6)}, {"out_h": 2, "out_w": 2}, ProgramError,
                      "out_d 0, out_h 2 and out_w 2 must be > 0"),
                     ({"X": spec(2, 3, 4, 5, 6)}, {"scale": 2.0, "align_mode": 2}, ProgramError,
                      "align_mode must be 0 or 1, got 2"))
             if name == "corners" else ())
      for name, attrs in (("corners", {"out_d": 5, "out_h": 2, "out_w": 7}),
                          ("no_corners", {"out_d": 4, "out_h": 6, "out_w": 3, "align_corners": False}),
                          ("half_pixel", {"out_d": 2, "out_h": 5, "out_w": 8, "align_corners": False, "align_mode": 0}),
                          ("scale", {"scale": 1.5, "align_corners": False, "align_mode": 0}),
                          ("ndhwc", {"out_d": 3, "out_h": 4, "out_w": 2, "data_layout": "NHWC"}))],
]
