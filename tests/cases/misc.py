"""OpCases for print, is_empty, py_func (ops/misc.py), sample_logits (ops/sampled_loss.py),
center_loss (ops/loss.py), mean_iou (ops/metric.py), inplace_abn and spectral_norm
(ops/norm.py); tests/op_cases.py gathers them.

Every reference is plain numpy written from Fluid 1.8's formulas. sample_logits' reference
redraws the shared classes one draw at a time by the documented counter layout
(NOTE(sample-logits) in ops/sampled_loss.py: draw k is ``uniform01(key, k)``, key the fixed
seed in the high 32 bits); its kernel draws in vectorised chunks. spectral_norm's gradient is
Paddle's rule, not a derivative (NOTE(spectral-norm)), so its case checks outputs only;
tests/test_misc_layers.py checks the rule. py_func's cases call functions registered here, in
this process. get_tensor_from_selected_rows takes a SelectedRows, which a sampler cannot
make: tests/test_misc_layers.py covers it.
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ops.misc import callable_name, register_callable
from placegroup.ops.random import uniform01
from tests.cases.norm import _bn_ref, _bn_sample
from tests.op_case import N, OpCase, labels, spec

CASES: list[OpCase] = []

# -- print, is_empty --------------------------------------------------------------------------

CASES += [
    # BACKWARD: the forward run prints nothing; the grad op (is_forward False) would
    OpCase("print", lambda r: {"In": N(r, 3, 4)}, lambda i, a: {"Out": i["In"]}, attrs={"print_phase": "BACKWARD"},
           errors=(({"In": spec(2, 3)}, {"print_phase": "SOMETIMES"}, ProgramError, "print_phase must be one of"),
                   ({"In": spec(2, 3)}, {"summarize": -2}, ProgramError, "summarize must be -1"))),
    # FORWARD: the grad op passes the gradient through without printing
    OpCase("print", lambda r: {"In": N(r, 3, 4)}, lambda i, a: {"Out": i["In"]},
           attrs={"print_phase": "FORWARD", "summarize": 0, "message": "case"}, grad=("In",), name="grad"),
    OpCase("is_empty", lambda r: {"X": N(r, 2, 3)}, lambda i, a: {"Out": np.array([False])}),
    OpCase("is_empty", lambda r: {"X": np.zeros((0, 3))}, lambda i, a: {"Out": np.array([True])}, name="empty",
           batch=()),
]

# -- py_func: functions registered in this process ----------------------------------------------


def _mul_tanh(x, y):
    return x * y, np.tanh(x)


def _mul_tanh_grad(x, y, out1, d0, d1):  # Out0 skipped (backward_skip_vars)
    return d0 * y + d1 * (1 - out1 * out1), d0 * x


def _py_attrs(fwd, bwd=None, skip=(), n_out=2):
    return {"forward_callable_id": register_callable(fwd), "_forward_callable": callable_name(fwd),
            "backward_callable_id": register_callable(bwd) if bwd else -1,
            "_backward_callable": callable_name(bwd) if bwd else "", "backward_skip_vars": list(skip),
            "_out_dtypes": ["float64"] * n_out, "_out_shapes": [[3, 4]] * n_out, "_in_dtypes": ["float64", "float64"]}


def _py_ref(i, a):
    x, y = i["X"]
    return {"Out": [x * y, np.tanh(x)]}


_PY = _py_attrs(_mul_tanh, _mul_tanh_grad, skip=["Out0"])
CASES += [
    OpCase("py_func", lambda r: {"X": [N(r, 3, 4), N(r, 3, 4)]}, _py_ref, attrs=_PY, grad=("X",), batch=(),
           errors=(({"X": [spec(3, 4)]}, {**_PY, "forward_callable_id": -1}, ProgramError,
                    "forward_callable_id must be >= 0"),
                   ({"X": [np.ones((3, 4)), np.ones((3, 4))]}, {**_PY, "_forward_callable": "gone.func"}, RuntimeError,
                    r"function #\d+ \('gone.func'\) is not registered in this process"),
                   ({"X": [np.ones((3, 4)), np.ones((3, 4))]}, {**_PY, "_out_dtypes": ["float64"] * 3,
                                                                "_out_shapes": []},
                    ValueError, "returned 2 values for 3 outputs"))),
]

# -- sample_logits ------------------------------------------------------------------------------


def _draws_ref(c: int, s: int, seed: int):
    """The shared classes, drawn one at a time (NOTE(sample-logits)); step 0, fixed seed."""
    key, got, k = (seed & 0xFFFFFFFF) << 32, [], 0
    while len(got) < s:
        u = float(uniform01(np, key, np.array([k], dtype=np.uint64))[0])
        v = (int(math.floor(math.exp(u * math.log(c + 1)))) - 1) % c
        k += 1
        if v not in got:
            got.append(v)
    return got, k


def _sl_ref(i, a):
    logits, lab = i["Logits"], i["Labels"]
    (n, c), t, s = logits.shape, lab.shape[1], a["num_samples"]
    if a["use_customized_samples"]:
        samples, probs = i["CustomizedSamples"], i["CustomizedProbabilities"]
    else:
        drawn, tries = _draws_ref(c, s, a["seed"])
        samples = np.concatenate([lab, np.tile(drawn, (n, 1))], 1)
        q = np.float32(np.log((samples + 2.0) / (samples + 1.0)) / math.log(c + 1)).astype(np.float64)
        probs = q * s if tries == s else 1 - (1 - q) ** tries
    out = np.zeros(samples.shape)
    for r in range(n):
        for j in range(samples.shape[1]):
            out[r, j] = logits[r, samples[r, j]] - np.log(probs[r, j])
            if a["remove_accidental_hits"] and j >= t and samples[r, j] in samples[r, :t]:
                out[r, j] -= 1e20
    return {"Samples": samples, "Probabilities": probs, "SampledLogits": out,
            "SampledLabels": np.tile(np.arange(t), (n, 1)), "LogitsDim": np.zeros((0, n, c)),
            "LabelsDim": np.zeros((0, n, t), np.int64)}


def _sl_sample(true: int, custom: bool = False):
    def sample(r):
        lab = r.integers(0, 6, size=(4, true))
        out = {"Logits": N(r, 4, 12), "Labels": lab}
        if custom:
            neg = r.integers(0, 12, size=(4, 3))
            neg[0, 0] = lab[0, 0]  # an accidental hit
            out["CustomizedSamples"] = np.concatenate([lab, neg], 1)
            out["CustomizedProbabilities"] = r.uniform(0.05, 0.5, size=(4, true + 3))
        return out

    return sample


_SL_ERR = {"Logits": spec(4, 12), "Labels": spec(4, 1, dtype="int64")}
_KEEP = {"remove_accidental_hits": False}  # a hit's logit less 1e20 leaves no finite difference to take
CASES += [
    OpCase("sample_logits", _sl_sample(1), _sl_ref, attrs={"num_samples": 5, "seed": 7}, batch=("Logits", "Labels"),
           errors=(({**_SL_ERR, "Labels": spec(4, 1)}, {"num_samples": 2}, ProgramError, "Labels must be int64"),
                   (_SL_ERR, {"num_samples": 13}, ProgramError, r"num_samples must be in 1..C = 1..12"),
                   (_SL_ERR, {"num_samples": 2, "use_customized_samples": True}, ProgramError,
                    "needs the inputs CustomizedSamples"),
                   ({"Logits": np.zeros((2, 3), np.float32), "Labels": np.array([[0], [3]])}, {"num_samples": 1},
                    ValueError, "label 3 is out of range for 3 classes"))),
    OpCase("sample_logits", _sl_sample(1), _sl_ref, attrs={"num_samples": 5, "seed": 7, **_KEEP}, grad=("Logits",),
           grad_outs=("SampledLogits",), name="keep_hits"),
    # 11 of 12 classes: draws repeat, so the probabilities are 1 - (1 - q)^tries
    OpCase("sample_logits", _sl_sample(2), _sl_ref, attrs={"num_samples": 11, "seed": 3}, name="true2_many"),
    OpCase("sample_logits", _sl_sample(2), _sl_ref, attrs={"num_samples": 11, "seed": 3, **_KEEP}, grad=("Logits",),
           grad_outs=("SampledLogits",), name="true2_many_keep"),
    OpCase("sample_logits", _sl_sample(2, custom=True), _sl_ref,
           attrs={"num_samples": 3, "use_customized_samples": True}, name="customized"),
    OpCase("sample_logits", _sl_sample(2, custom=True), _sl_ref,
           attrs={"num_samples": 3, "use_customized_samples": True, **_KEEP}, grad=("Logits",),
           grad_outs=("SampledLogits",), name="customized_keep"),
]

# -- center_loss --------------------------------------------------------------------------------


def _center_ref(i, a):
    x, c, lab = i["X"], i["Centers"], i["Label"].reshape(-1)
    diff = x - c[lab]
    out = c.copy()
    if a["need_update"]:
        for k in range(len(c)):
            rows = lab == k
            out[k] += i["CenterUpdateRate"][0] * diff[rows].sum(0) / (1 + rows.sum())
    return {"CentersOut": out, "SampleCenterDiff": diff, "Loss": 0.5 * (diff ** 2).sum(1, keepdims=True)}


def _center_sample(r):
    return {"X": N(r, 6, 3), "Label": labels(r, 6, 4), "Centers": N(r, 4, 3), "CenterUpdateRate": np.array([0.3])}


_CL_ERR = {"X": spec(6, 3), "Label": spec(6, 1, dtype="int64"), "Centers": spec(4, 3), "CenterUpdateRate": spec(1)}
CASES += [
    OpCase("center_loss", _center_sample, _center_ref, attrs={"cluster_num": 4, "need_update": True}, grad=("X",),
           grad_outs=("Loss",), batch=("X", "Label"),
           errors=(({**_CL_ERR, "Centers": spec(5, 3)}, {"cluster_num": 4}, ProgramError,
                    r"Centers\[5, 3\] must be \[cluster_num, D\] = \[4, 3\]"),
                   ({**_CL_ERR, "Label": spec(6, 1)}, {"cluster_num": 4}, ProgramError, "Label must be int64"),
                   ({"X": np.ones((2, 3), np.float32), "Label": np.array([[0], [4]]),
                     "Centers": np.ones((4, 3), np.float32), "CenterUpdateRate": np.ones(1, np.float32)},
                    {"cluster_num": 4}, ValueError,
                    "label 4 is out of range for cluster_num=4"))),
    OpCase("center_loss", _center_sample, _center_ref, attrs={"cluster_num": 4}, grad=("X",), grad_outs=("Loss",),
           name="no_update"),
]

# -- mean_iou -----------------------------------------------------------------------------------


def _miou_ref(i, a):
    k = a["num_classes"]
    p, lab = i["Predictions"].reshape(-1), i["Labels"].reshape(-1)
    correct, wrong = np.zeros(k, np.int64), np.zeros(k, np.int64)
    for x, y in zip(p, lab):
        if x == y:
            correct[x] += 1
        else:
            wrong[x] += 1
            wrong[y] += 1
    wrong += sum(i.get("InWrongs", []), np.zeros(k, np.int64))
    correct += sum(i.get("InCorrects", []), np.zeros(k, np.int64))
    denom = correct + wrong
    iou = [correct[c] / denom[c] for c in range(k) if denom[c] > 0]
    mean = sum(float(m[0]) for m in i.get("InMeanIou", [])) + sum(iou) / len(iou)
    return {"OutMeanIou": np.array([mean], np.float32), "OutWrong": wrong.astype(np.int32),
            "OutCorrect": correct.astype(np.int32)}


def _miou_sample(state: bool):
    def sample(r):
        out = {"Predictions": r.integers(0, 5, size=(4, 6)), "Labels": r.integers(0, 5, size=(4, 6))}
        out["Predictions"][0, :3] = out["Labels"][0, :3]  # some agreement
        out["Labels"][out["Labels"] == 4] = 3  # class 4 only ever predicted
        if state:
            out.update(InWrongs=[r.integers(0, 5, 6).astype(np.int32), r.integers(0, 5, 6).astype(np.int32)],
                       InCorrects=[r.integers(0, 5, 6).astype(np.int32)], InMeanIou=[np.array([0.25])])
        return out

    return sample


CASES += [
    OpCase("mean_iou", _miou_sample(False), _miou_ref, attrs={"num_classes": 6}, batch=("Predictions", "Labels"),
           errors=(({"Predictions": spec(4, 6, dtype="int64"), "Labels": spec(4, 6, dtype="int32")}, {"num_classes": 3},
                    ProgramError, "must share int32 or int64"),
                   ({"Predictions": spec(4, 6, dtype="int64"), "Labels": spec(4, 5, dtype="int64")}, {"num_classes": 3},
                    ProgramError, "must have one shape"),
                   ({"Predictions": np.array([[0, 3]]), "Labels": np.array([[0, 1]])}, {"num_classes": 3}, ValueError,
                    "Predictions holds class 3, outside 0..2"))),
    OpCase("mean_iou", _miou_sample(True), _miou_ref, attrs={"num_classes": 6}, name="state"),
]

# -- inplace_abn: batch_norm's reference, then the activation -------------------------------------


def _abn_ref(i, a):
    out = _bn_ref(i, a)
    y, alpha = out["Y"], a["alpha"]
    if a["activation"] == "leaky_relu":
        out["Y"] = np.where(y > 0, y, alpha * y)
    elif a["activation"] == "elu":
        out["Y"] = np.where(y > 0, y, alpha * np.expm1(np.minimum(y, 0)))
    return out


CASES += [
    OpCase("inplace_abn", _bn_sample((4, 3, 2, 2)), _abn_ref, attrs={"activation": act, "alpha": alpha},
           grad=("X", "Scale", "Bias"), grad_outs=("Y",), name=act or "none",
           errors=(({"X": spec(4, 3, 2, 2), "Scale": spec(3), "Bias": spec(3), "Mean": spec(3), "Variance": spec(3)},
                    {"activation": "relu"}, ProgramError, "activation must be one of"),))
    for act, alpha in (("", 0.1), ("identity", 0.1), ("leaky_relu", 0.2), ("elu", 0.7))
]
CASES.append(OpCase("inplace_abn", _bn_sample((4, 3)), _abn_ref, attrs={"activation": "elu", "alpha": 1.0,
                                                                         "is_test": True},
                    grad=("X", "Scale", "Bias"), grad_outs=("Y",), name="elu_test"))

# -- spectral_norm ------------------------------------------------------------------------------


def _sn_ref(i, a):
    w, dim = i["Weight"], a["dim"]
    m = np.moveaxis(w, dim, 0).reshape(w.shape[dim], -1)
    u, v = i["U"], i["V"]
    for _ in range(a["power_iters"]):
        v = m.T @ u
        v = v / (np.linalg.norm(v) + a["eps"])
        u = m @ v
        u = u / (np.linalg.norm(u) + a["eps"])
    return {"Out": w / (u @ m @ v)}


def _sn_sample(shape, dim):
    def sample(r):
        h = shape[dim]
        return {"Weight": N(r, *shape), "U": N(r, h), "V": N(r, math.prod(shape) // h)}

    return sample


SPECTRAL_CASES = [
    OpCase("spectral_norm", _sn_sample((4, 6), 0), _sn_ref, attrs={"power_iters": 2}, batch=(),
           errors=(({"Weight": spec(4, 6), "U": spec(4), "V": spec(6)}, {"dim": 2}, ProgramError,
                    "dim can only be 0 or 1"),
                   ({"Weight": spec(4, 6), "U": spec(5), "V": spec(6)}, {}, ProgramError, r"U must be \[h\] = \[4\]"),
                   ({"Weight": spec(4, 6), "U": spec(4), "V": spec(7)}, {}, ProgramError, r"V must be \[w\] = \[6\]"),
                   ({"Weight": spec(4), "U": spec(4), "V": spec(1)}, {}, ProgramError, "rank 2 to 5"))),
    OpCase("spectral_norm", _sn_sample((2, 3, 2, 2), 1), _sn_ref, attrs={"dim": 1, "power_iters": 3}, batch=(),
           name="conv_dim1"),
    OpCase("spectral_norm", _sn_sample((3, 5), 0), _sn_ref, attrs={"power_iters": 0, "eps": 1e-6}, batch=(),
           name="no_iters"),
]
CASES += SPECTRAL_CASES

__all__ = ["CASES", "SPECTRAL_CASES"]
