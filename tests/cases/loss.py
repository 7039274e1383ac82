"""OpCases for loss and distance ops (sigmoid cross entropy, smooth_l1, nce, hsigmoid, ...);
tests/op_cases.py gathers them.

Every reference is plain numpy written from Fluid's formulas; nce's and hsigmoid's walk the
samples and tree paths with Python loops, so they share nothing with the vectorised kernels.
nce's sampled cases rebuild the negatives from the documented counter layout
(NOTE(nce-sampling) in ops/sampled_loss.py): class of negative j of row i = f(uniform01(key,
i·S + j)). tests/test_loss_layers.py adds the properties (determinism, rank offsets, the
step) and the sparse gradients.
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.errors import ProgramError
from placegroup.layers.loss import alias_tables
from placegroup.ops.random import uniform01
from tests.op_case import OpCase, N, labels, pos, spec


def _sp(x):
    return np.logaddexp(0.0, x)


def _sig(x):
    return 1 / (1 + np.exp(-x))


def _away(r, shape, lo, hi, kink):
    """Values whose distance from ±kink lies in [lo, hi] on either side (no kink crossing)."""
    mag = kink + r.choice([-1.0, 1.0], size=shape) * r.uniform(lo, hi, size=shape)
    return r.choice([-1.0, 1.0], size=shape) * np.abs(mag)


# -- sigmoid losses -------------------------------------------------------------------------


def _sce_ref(i, a):
    x, lab = i["X"], i["Label"]
    out = _sp(x) - x * lab
    ign = np.trunc(lab) == a["ignore_index"]
    out = np.where(ign, 0.0, out)
    if a["normalize"]:
        out = out / max(int((~np.isclose(lab, a["ignore_index"], atol=1e-6, rtol=0)).sum()), 1)
    return {"Out": out}


def _sce_sample(r):
    lab = r.uniform(0, 1, size=(4, 5))
    lab[0, 1] = lab[2, 3] = -1.0
    return {"X": 2 * N(r, 4, 5), "Label": lab}


def _focal_ref(i, a):
    x, g, fg = i["X"], i["Label"].reshape(-1), max(int(i["FgNum"][0]), 1)
    out = np.zeros_like(x)
    for n in range(x.shape[0]):
        for d in range(x.shape[1]):
            p = _sig(x[n, d])
            if g[n] == d + 1:
                out[n, d] = -a["alpha"] / fg * (1 - p) ** a["gamma"] * np.log(p)
            elif g[n] != -1:
                out[n, d] = -(1 - a["alpha"]) / fg * p ** a["gamma"] * np.log(1 - p)
    return {"Out": out}


def _ts_ref(i, a):
    x, lab = i["X"], i["Label"]
    z = np.where(lab >= 1, 1.0, np.where((lab < 0) & (lab >= -1), 1.0, 0.0))  # the click
    teacher = np.where(lab >= 1, lab - 1, lab)  # z' where there is a teacher (label >= 0)
    click = _sp(x) - x * z
    return {"Y": np.where(lab < 0, click, click + _sp(x) - x * teacher)}


def _log_softmax_ref(i, a):
    x = i["X"]
    return {"Out": x - np.log(np.exp(x).sum(a["axis"], keepdims=True))}


# -- distances, regression losses -----------------------------------------------------------


def _cos_ref(i, a):
    x = i["X"].reshape(len(i["X"]), -1)
    y = i["Y"].reshape(len(i["Y"]), -1)
    xn, yn = np.linalg.norm(x, axis=1, keepdims=True), np.linalg.norm(y, axis=1, keepdims=True)
    return {"Out": (x * y).sum(1, keepdims=True) / (xn * yn), "XNorm": xn, "YNorm": yn}


def _norm_ref(i, a):
    x = i["X"]
    n = np.sqrt((x ** 2).sum(a["axis"], keepdims=True) + a["epsilon"])
    return {"Out": x / n, "Norm": n}


def _smooth_l1_ref(i, a):
    s2 = a["sigma"] ** 2
    d = (i["X"] - i["Y"]) * i.get("InsideWeight", 1.0)
    e = np.where(np.abs(d) < 1 / s2, 0.5 * s2 * d * d, np.abs(d) - 0.5 / s2) * i.get("OutsideWeight", 1.0)
    return {"Diff": d, "Out": e.reshape(len(d), -1).sum(1, keepdims=True)}


def _smooth_l1_sample(weights: bool, sigma: float):
    def sample(r):
        x = N(r, 4, 3)
        iw = pos(r, 4, 3) if weights else 1.0
        d = _away(r, (4, 3), 0.1, 0.5, 1 / sigma ** 2) / iw  # (X - Y)·InsideWeight off the kink
        out = {"X": x, "Y": x - d}
        if weights:
            out.update(InsideWeight=iw, OutsideWeight=pos(r, 4, 3))
        return out

    return sample


def _huber_ref(i, a):
    r = i["Y"] - i["X"]
    d = a["delta"]
    return {"Residual": r, "Out": np.where(np.abs(r) <= d, r * r / 2, d * (np.abs(r) - d / 2))}


def _kldiv_ref(i, a):
    x, t = i["X"], i["Target"]
    out = np.where(t > 0, t * (np.log(np.where(t > 0, t, 1)) - x), 0.0)
    red = a["reduction"]
    if red == "none":
        return {"Loss": out}
    div = {"sum": 1, "mean": out.size, "batchmean": out.shape[0]}[red]
    return {"Loss": np.array([out.sum() / div])}


def _kldiv_sample(r):
    t = pos(r, 3, 4)
    t[0, 0], t[1, 2] = 0.0, -0.5  # a zero and a negative target: both count 0 (NOTE(kldiv-zero))
    return {"X": N(r, 3, 4), "Target": t}


# -- ranking losses -------------------------------------------------------------------------


def _bpr_ref(i, a):
    x, lab = i["X"], i["Label"].reshape(-1)
    out = np.zeros((len(x), 1))
    for n, row in enumerate(x):
        out[n] = sum(np.log1p(np.exp(row[j] - row[lab[n]])) for j in range(len(row)) if j != lab[n]) / (len(row) - 1)
    return {"Y": out}


def _margin_sample(r):
    lab = r.choice([-1.0, 1.0], size=(5, 1))
    x2 = N(r, 5, 1)
    z = _away(r, (5, 1), 0.1, 0.6, 0.0)  # -label·(x1 - x2) + margin, away from the hinge at 0
    return {"Label": lab, "X1": x2 - (z - 0.1) / lab, "X2": x2}


# -- nce ------------------------------------------------------------------------------------

_NCE = {"num_total_classes": 6, "num_neg_samples": 3}
_DIST = np.array([0.05, 0.4, 0.1, 0.25, 0.05, 0.15])


def _nce_draw(a, rows: int, dist):
    """The negatives by the documented counter layout (seed != 0: no step)."""
    c, s = a["num_total_classes"], a["num_neg_samples"]
    if a["custom_neg_classes"]:
        return np.tile(a["custom_neg_classes"], (rows, 1))
    key = (a["seed"] & 0xFFFFFFFF) << 32
    ctr = np.arange(rows * s, dtype=np.uint64).reshape(rows, s)
    if a["sampler"] == 0:
        return np.floor(uniform01(np, key, ctr) * c).astype(np.int64)
    if a["sampler"] == 1:
        return (np.floor(np.exp(uniform01(np, key, ctr) * math.log(c))).astype(np.int64) - 1) % (c - 1)
    col = np.floor(uniform01(np, key, 2 * ctr) * c).astype(np.int64)
    coin = uniform01(np, key, 2 * ctr + np.uint64(1))
    alias, probs = dist
    return np.where((coin > probs[col]) & (alias[col] >= 0), alias[col], col)


def _nce_ref(i, a):
    x, w, lab = i["Input"], i["Weight"], i["Label"].reshape(len(i["Input"]), -1)
    c, s = a["num_total_classes"], a["num_neg_samples"]
    dist = (i["CustomDistAlias"], i["CustomDistAliasProbs"]) if a["sampler"] == 2 else None
    sl = np.concatenate([lab, _nce_draw(a, len(x), dist)], 1)
    bias = i["Bias"].reshape(-1) if "Bias" in i else np.zeros(c)
    o = np.zeros(sl.shape)
    cost = np.zeros((len(x), 1))
    for n in range(len(x)):
        for j, k in enumerate(sl[n]):
            o[n, j] = _sig(x[n] @ w[k] + bias[k])
            q = {0: 1 / c, 1: math.log((k + 2) / (k + 1)) / math.log(c), 2: _DIST[k]}[a["sampler"]]
            b = s * q
            cost[n] += -math.log(o[n, j] / (o[n, j] + b) if j < lab.shape[1] else b / (o[n, j] + b))
        cost[n] *= i["SampleWeight"][n, 0] if "SampleWeight" in i else 1.0
    return {"Cost": cost, "SampleLogits": o, "SampleLabels": sl}


def _nce_sample(true: int = 1, weights: bool = True, dist: bool = False):
    def sample(r):
        out = {"Input": N(r, 4, 3), "Label": r.integers(0, 6, size=(4, true)).astype(np.int64),
               "Weight": N(r, 6, 3), "Bias": 0.5 * N(r, 6, 1)}
        if weights:
            out["SampleWeight"] = pos(r, 4, 1)
        if dist:
            alias, probs = alias_tables(_DIST)
            out.update(CustomDistProbs=_DIST.astype(np.float32), CustomDistAlias=alias, CustomDistAliasProbs=probs)
        return out

    return sample


def _nce_case(name, attrs, **kw):
    return OpCase("nce", _nce_sample(**kw), _nce_ref, attrs={**_NCE, "custom_neg_classes": [], "seed": 5, **attrs},
                  grad=("Input", "Weight", "Bias"), grad_outs=("Cost",), name=name,
                  batch=("Input", "Label", "SampleWeight") if kw.get("weights", True) else ("Input", "Label"))


_NCE_ERRORS = (
    ({"Input": spec(4, 3), "Label": spec(4, 1, dtype="int64"), "Weight": spec(5, 3)}, _NCE, ProgramError,
     r"Weight\[5, 3\] must be \[num_total_classes=6, 3\]"),
    ({"Input": spec(4, 3), "Label": spec(4, 1, dtype="int64"), "Weight": spec(6, 3)},
     {**_NCE, "custom_neg_classes": [1, 2]}, ProgramError, r"custom_neg_classes \[1, 2\] must hold num_neg_samples=3"),
    ({"Input": spec(4, 3), "Label": spec(4, 1, dtype="int64"), "Weight": spec(6, 3)}, {**_NCE, "sampler": 2},
     ProgramError, "custom_dist sampler needs the inputs"),
    ({"Input": np.zeros((2, 3), np.float32), "Label": np.array([[1], [6]]), "Weight": np.zeros((6, 3), np.float32)},
     _NCE, ValueError, "nce: label 6 is out of range for 6 classes"),
)


# -- hierarchical_sigmoid -------------------------------------------------------------------


def _hs_ref(i, a):
    """Fluid's formula walked per row and node (NOTE(hsigmoid-code)), in Python."""
    x, w, c = i["X"], i["W"], a["num_classes"]
    bias = i["Bias"].reshape(-1) if "Bias" in i else np.zeros(len(w))
    if "PathTable" in i:
        width = i["PathTable"].shape[1]
    else:
        width = (c - 1).bit_length()
    pre = np.zeros((len(x), width))
    out = np.zeros((len(x), 1))
    for n in range(len(x)):
        if "PathTable" in i:
            nodes = [(int(k), int(b)) for k, b in zip(i["PathTable"][n], i["PathCode"][n])]
            nodes = nodes[:next((j for j, (k, _) in enumerate(nodes) if k < 0), width)]
        else:
            code = int(i["Label"][n, 0]) + c
            nodes = [((code >> (j + 1)) - 1, (code >> j) & 1) for j in range(code.bit_length() - 1)]
        for j, (k, bit) in enumerate(nodes):
            pre[n, j] = np.clip(x[n] @ w[k] + bias[k], -40, 40)
            out[n] -= bit * pre[n, j]
    return {"Out": out + _sp(pre).sum(1, keepdims=True), "PreOut": _sp(pre)}


def _hs_sample(c: int, rows: int = 5, scale: float = 1.0, bias: bool = True):
    def sample(r):
        out = {"X": scale * N(r, rows, 3), "W": N(r, c - 1, 3), "Label": labels(r, rows, c)}
        if bias:
            out["Bias"] = 0.5 * N(r, c - 1, 1)
        return out

    return sample


_TABLE = np.array([[0, 1, 3], [0, 2, -1], [0, 1, 4], [0, 2, -1]])
_CODE = np.array([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]])


def _hs_custom(r):
    return {"X": N(r, 4, 3), "W": N(r, 5, 3), "Label": labels(r, 4, 6), "PathTable": _TABLE, "PathCode": _CODE,
            "Bias": 0.5 * N(r, 5, 1)}


_HS_ERRORS = (
    ({"X": spec(4, 3), "W": spec(4, 3), "Label": spec(4, 1, dtype="int64")}, {"num_classes": 6}, ProgramError,
     r"W\[4, 3\] must have num_classes - 1 = 5 rows"),
    ({"X": spec(4, 3), "W": spec(5, 3), "Label": spec(4, 1, dtype="int64"), "PathTable": spec(4, 3, dtype="int64")},
     {"num_classes": 6}, ProgramError, "give both PathTable and PathCode"),
    ({"X": np.zeros((2, 3), np.float32), "W": np.zeros((5, 3), np.float32), "Label": np.array([[0], [6]])},
     {"num_classes": 6}, ValueError, "hierarchical_sigmoid: label 6 is out of range for 6 classes"),
)

_XY = ("X", "Y")

CASES: list[OpCase] = [
    OpCase("sigmoid_cross_entropy_with_logits", _sce_sample, _sce_ref, grad=("X",), batch=("X", "Label"),
           errors=(({"X": spec(4, 5), "Label": spec(4, 4)}, {}, ProgramError, r"Label\[4, 4\] must have the shape"),)),
    OpCase("sigmoid_cross_entropy_with_logits", _sce_sample, _sce_ref, attrs={"ignore_index": -1}, grad=("X",),
           name="ignore_index"),
    OpCase("sigmoid_cross_entropy_with_logits", _sce_sample, _sce_ref, attrs={"ignore_index": -1, "normalize": True},
           grad=("X",), name="normalize"),
    OpCase("sigmoid_focal_loss", lambda r: {"X": 2 * N(r, 4, 3), "Label": np.array([[1], [0], [-1], [3]], np.int32),
                                            "FgNum": np.array([2], np.int32)},
           _focal_ref, grad=("X",), batch=("X", "Label"),
           errors=(({"X": spec(4, 3), "Label": spec(4, 1, dtype="int64"), "FgNum": spec(1, dtype="int32")}, {},
                    ProgramError, "Label and FgNum must be int32"),)),
    OpCase("sigmoid_focal_loss", lambda r: {"X": 2 * N(r, 4, 3), "Label": np.array([[2], [2], [0], [1]], np.int32),
                                            "FgNum": np.array([0], np.int32)},
           _focal_ref, attrs={"gamma": 1.5, "alpha": 0.4}, grad=("X",), name="gamma_alpha_fg0"),
    OpCase("teacher_student_sigmoid_loss",
           lambda r: {"X": 3 * N(r, 6, 1), "Label": np.array([[-2.0], [-1.0], [0.3], [1.4], [0.7], [-1.5]])},
           _ts_ref, grad=("X",), batch=("X", "Label")),
    # beyond the bounds the forward is not clipped, the gradient is 0 (NOTE(teacher-student))
    OpCase("teacher_student_sigmoid_loss",
           lambda r: {"X": np.array([[20.0], [-30.0]]), "Label": np.array([[0.5], [1.5]])}, _ts_ref,
           name="past_bounds"),
    OpCase("log_softmax", lambda r: {"X": 3 * N(r, 3, 5)}, _log_softmax_ref, grad=("X",),
           errors=(({"X": spec(3, 5)}, {"axis": 2}, ProgramError, "axis 2 is out of range"),)),
    OpCase("log_softmax", lambda r: {"X": 3 * N(r, 3, 5)}, _log_softmax_ref, attrs={"axis": 0}, grad=("X",),
           name="axis0"),
    OpCase("cos_sim", lambda r: {"X": N(r, 4, 5), "Y": N(r, 4, 5)}, _cos_ref, grad=_XY, grad_outs=("Out",), batch=_XY,
           errors=(({"X": spec(4, 5), "Y": spec(2, 5)}, {}, ProgramError, "must have X's 4 rows or 1 row"),
                   ({"X": spec(4, 5), "Y": spec(4, 6)}, {}, ProgramError, "differ past dim 0"))),
    OpCase("cos_sim", lambda r: {"X": N(r, 4, 5), "Y": N(r, 1, 5)}, _cos_ref, grad=_XY, grad_outs=("Out",),
           name="y_one_row"),
    OpCase("cos_sim", lambda r: {"X": N(r, 3, 2, 4), "Y": N(r, 3, 2, 4)}, _cos_ref, grad=_XY, grad_outs=("Out",),
           name="rank3", batch=_XY),
    OpCase("norm", lambda r: {"X": N(r, 3, 4, 5)}, _norm_ref, attrs={"axis": 1}, grad=("X",), grad_outs=("Out",),
           errors=(({"X": spec(3, 4)}, {"axis": 2}, ProgramError, "norm: axis 2 is out of range"),)),
    OpCase("norm", lambda r: {"X": N(r, 3, 4)}, _norm_ref, attrs={"axis": -1, "epsilon": 1e-6}, grad=("X",),
           grad_outs=("Out",), name="last"),
    OpCase("smooth_l1_loss", _smooth_l1_sample(False, 1.0), _smooth_l1_ref, grad=_XY, grad_outs=("Out",), batch=_XY,
           errors=(({"X": spec(4, 3), "Y": spec(4, 2)}, {}, ProgramError, r"Y\[4, 2\] must have the shape of X"),
                   ({"X": spec(4, 3), "Y": spec(4, 3), "InsideWeight": spec(4, 3)}, {}, ProgramError,
                    "give both InsideWeight and OutsideWeight"))),
    OpCase("smooth_l1_loss", _smooth_l1_sample(True, 2.0), _smooth_l1_ref, attrs={"sigma": 2.0}, grad=_XY,
           grad_outs=("Out",), name="weights_sigma2", batch=_XY + ("InsideWeight", "OutsideWeight")),
    OpCase("huber_loss", lambda r: {"X": N(r, 5, 1), "Y": N(r, 5, 1)}, _huber_ref, grad=_XY, grad_outs=("Out",),
           batch=_XY, errors=(({"X": spec(5, 1), "Y": spec(5, 2)}, {}, ProgramError, "must have the shape of X"),)),
    OpCase("huber_loss", lambda r: (lambda y: {"X": y - _away(r, (6, 1), 0.1, 0.5, 0.7), "Y": y})(N(r, 6, 1)),
           _huber_ref, attrs={"delta": 0.7}, grad=_XY, grad_outs=("Out",), name="delta"),
    OpCase("log_loss", lambda r: {"Predicted": r.uniform(0.1, 0.9, (5, 1)), "Labels": r.uniform(0, 1, (5, 1))},
           lambda i, a: {"Loss": -i["Labels"] * np.log(i["Predicted"] + a["epsilon"])
                         - (1 - i["Labels"]) * np.log(1 - i["Predicted"] + a["epsilon"])},
           grad=("Predicted",), batch=("Predicted", "Labels"),
           errors=(({"Predicted": spec(5, 2), "Labels": spec(5, 2)}, {}, ProgramError, r"must be \[N, 1\]"),)),
    *[OpCase("kldiv_loss", _kldiv_sample, _kldiv_ref, attrs={"reduction": red}, grad=("X",), name=red,
             batch=("X", "Target"),
             errors=(({"X": spec(3, 4), "Target": spec(3, 4)}, {"reduction": "avg"}, ProgramError,
                      "reduction 'avg' is not one of"),) if red == "mean" else ())
      for red in ("mean", "none", "batchmean", "sum")],
    OpCase("rank_loss", lambda r: {"Label": r.choice([0.0, 0.5, 1.0], size=(5, 1)), "Left": N(r, 5, 1),
                                   "Right": N(r, 5, 1)},
           lambda i, a: {"Out": _sp(i["Left"] - i["Right"]) - i["Label"] * (i["Left"] - i["Right"])},
           grad=("Left", "Right"), batch=("Label", "Left", "Right"),
           errors=(({"Label": spec(5, 1), "Left": spec(5, 1), "Right": spec(4, 1)}, {}, ProgramError,
                    r"Right\[4, 1\] must have the shape of Label"),)),
    OpCase("margin_rank_loss", _margin_sample,
           lambda i, a: {"Out": np.maximum(0, -i["Label"] * (i["X1"] - i["X2"]) + a["margin"]),
                         "Activated": (-i["Label"] * (i["X1"] - i["X2"]) + a["margin"] > 0).astype(float)},
           attrs={"margin": 0.1}, grad=("X1", "X2"), grad_outs=("Out",), batch=("Label", "X1", "X2")),
    OpCase("bpr_loss", lambda r: {"X": 2 * N(r, 4, 5), "Label": labels(r, 4, 5)}, _bpr_ref, grad=("X",),
           batch=("X", "Label"),
           errors=(({"X": spec(4, 5), "Label": spec(4, 1)}, {}, ProgramError, "Label must be int64"),
                   ({"X": np.zeros((2, 3), np.float32), "Label": np.array([[0], [3]])}, {}, ValueError,
                    "bpr_loss: label 3 is out of range for 3 classes"))),
    # a far-outscored label: e^(x_j - x_label) overflows float32 and is clipped to 1e20 (NOTE(tolerable-exp))
    OpCase("bpr_loss", lambda r: {"X": np.array([[0.0, 100.0, 1.0]]), "Label": np.array([[0]])},
           lambda i, a: {"Y": np.array([[(math.log1p(1e20) + math.log1p(math.e)) / 2]])}, name="overflow"),
    _nce_case("uniform", {}, weights=True),
    _nce_case("log_uniform", {"sampler": 1}, weights=False),
    _nce_case("custom_dist", {"sampler": 2}, dist=True),
    _nce_case("two_true", {"num_neg_samples": 4}, true=2),
    OpCase("nce", _nce_sample(), _nce_ref, attrs={**_NCE, "custom_neg_classes": [0, 2, 5], "seed": 0},
           grad=("Input", "Weight", "Bias"), grad_outs=("Cost",), name="custom_neg_classes",
           batch=("Input", "Label", "SampleWeight"), errors=_NCE_ERRORS),
    OpCase("hierarchical_sigmoid", _hs_sample(6), _hs_ref, attrs={"num_classes": 6}, grad=("X", "W", "Bias"),
           grad_outs=("Out",), batch=("X", "Label"), errors=_HS_ERRORS),
    OpCase("hierarchical_sigmoid", _hs_sample(8, rows=6, bias=False), _hs_ref, attrs={"num_classes": 8},
           grad=("X", "W"), grad_outs=("Out",), name="pow2_nobias"),
    OpCase("hierarchical_sigmoid", _hs_sample(3), _hs_ref, attrs={"num_classes": 3}, grad=("X", "W", "Bias"),
           grad_outs=("Out",), name="three"),
    OpCase("hierarchical_sigmoid", _hs_custom, _hs_ref, attrs={"num_classes": 5}, grad=("X", "W", "Bias"),
           grad_outs=("Out",), name="custom_tree", batch=("X", "Label", "PathTable", "PathCode")),
    # pre-activations past ±40 are clipped in the loss (NOTE(hsigmoid-code))
    OpCase("hierarchical_sigmoid", _hs_sample(6, scale=100.0), _hs_ref, attrs={"num_classes": 6}, name="clipped"),
]
