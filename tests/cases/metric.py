"""OpCases for the metric ops auc, edit_distance and precision_recall (ops/metric.py);
tests/op_cases.py gathers them. None has a gradient.

The references are plain Python written from Fluid 1.8's kernels, sharing nothing with the
vectorised ones: auc buckets row by row and walks the buckets down with the trapezoid of
auc_op.h; edit_distance fills the textbook Levenshtein table pair by pair; precision_recall
counts row by row and class by class (NOTE(precision-recall)). Every auc case
carries state in (non-zero counts, and for a window a ring in Fluid's flat layout with its
step counter, NOTE(auc-window)) so the accumulation and the ring are checked, not just one
batch.
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import ProgramError
from tests.op_case import OpCase, spec

NT = 20  # num_thresholds of the auc cases: 21 buckets, so buckets get several rows


def _auc_ref(i, a):
    """Fluid 1.8's auc_op.h, element by element, on the NOTE(auc-window) layout."""
    nt, s = a["num_thresholds"], a["slide_steps"]
    buckets = nt + 1
    pos, neg = i["StatPos"].copy(), i["StatNeg"].copy()
    fpos, fneg = pos.reshape(-1), neg.reshape(-1)  # views: writes land in pos and neg
    if s == 0:
        start = total = 0
    else:
        start, total = int(fpos[(s + 1) * buckets]) % s * buckets, s * buckets
        for k in range(buckets):  # take the slot out of the sum row, then empty it
            fpos[total + k] -= fpos[start + k]
            fneg[total + k] -= fneg[start + k]
            fpos[start + k] = fneg[start + k] = 0
    for row, label in zip(i["Predict"], i["Label"].reshape(-1)):
        b = int(row[-1] * row.dtype.type(nt))
        (fpos if label else fneg)[start + b] += 1
    if s:
        for k in range(buckets):
            fpos[total + k] += fpos[start + k]
            fneg[total + k] += fneg[start + k]
        fpos[-1] += 1
        fneg[-1] += 1
    area, tp, tn = 0.0, 0.0, 0.0
    for idx in range(nt, -1, -1):
        tp_prev, tn_prev = tp, tn
        tp, tn = tp + float(fpos[total + idx]), tn + float(fneg[total + idx])
        area += abs(tn - tn_prev) * (tp + tp_prev) / 2.0
    if tp > 0 and tn > 0:
        area = area / tp / tn
    return {"AUC": np.array([area]), "StatPosOut": pos, "StatNegOut": neg}


def _ring(r, steps: int, counter: int, stale: int = 0):
    """A [(steps + 1) * (NT + 1) + 1] state: random slots, their sum row (plus ``stale`` in
    every bucket, a sum row that disagrees with its slots), and ``counter``."""
    slots = r.integers(0, 3, (steps, NT + 1))
    return np.concatenate([slots.reshape(-1), slots.sum(0) + stale, [counter]]).astype(np.int64)


def _auc_sample(steps: int, width: int = 2, n: int = 12, labels=None, counters=(5, 5), stale: int = 0,
                flat: bool = False):
    def sample(r):
        p = r.random((n, 1))
        p[0, 0], p[1, 0] = 0.0, 1.0  # the end buckets 0 and num_thresholds
        pred = np.hstack([1 - p, p]) if width == 2 else p
        lab = r.integers(0, 2, (n, 1)) if labels is None else np.full((n, 1), labels)
        if steps:
            pos, neg = (_ring(r, steps, c, stale) for c in counters)
        else:  # [1, NT + 1], or Fluid's flat [NT + 2] whose last entry stays
            shape = (NT + 2,) if flat else (1, NT + 1)
            pos, neg = (r.integers(0, 3, shape).astype(np.int64) for _ in range(2))
        return {"Predict": pred, "Label": lab.astype(np.int64), "StatPos": pos, "StatNeg": neg}

    return sample


def _stat(steps=3, dtype="int64"):
    return spec((steps + 1) * (NT + 1) + 1, dtype=dtype)


_AUC_ERRORS = (
    ({"Predict": spec(4, 3), "Label": spec(4, 1, dtype="int64"), "StatPos": _stat(), "StatNeg": _stat()},
     {"num_thresholds": NT, "slide_steps": 3}, ProgramError, r"Predict must be \[N, 2\] .*got Predict\[4, 3\]"),
    ({"Predict": spec(4, 2), "Label": spec(4, 2, dtype="int64"), "StatPos": _stat(), "StatNeg": _stat()},
     {"num_thresholds": NT, "slide_steps": 3}, ProgramError, r"Label must be \[N, 1\] .*got Label\[4, 2\]"),
    ({"Predict": spec(4, 2), "Label": spec(4, 1, dtype="int64"), "StatPos": _stat(2), "StatNeg": _stat()},
     {"num_thresholds": NT, "slide_steps": 3}, ProgramError, r"StatPos must be int64 \[85\] .*got int64 \[64\]"),
    ({"Predict": spec(4, 2), "Label": spec(4, 1, dtype="int64"), "StatPos": spec(3, NT + 1, dtype="int64"),
      "StatNeg": _stat()}, {"num_thresholds": NT, "slide_steps": 3}, ProgramError,
     r"StatPos must be int64 \[85\] for num_thresholds=20, slide_steps=3 .*got int64 \[3, 21\]"),
    ({"Predict": spec(4, 2), "Label": spec(4, 1, dtype="int64"), "StatPos": _stat(), "StatNeg": _stat()},
     {"num_thresholds": NT, "slide_steps": 0}, ProgramError,
     r"StatPos must be int64 \[1, 21\] or \[22\] .*got int64 \[85\]"),
    ({"Predict": spec(4, 2), "Label": spec(4, 1, dtype="int64"), "StatPos": _stat(), "StatNeg": _stat(dtype="float32")},
     {"num_thresholds": NT, "slide_steps": 3}, ProgramError, r"StatNeg must be int64 .*got float32"),
    ({"Predict": spec(4, 2), "Label": spec(4, 1, dtype="int64"), "StatPos": _stat(), "StatNeg": _stat()},
     {"num_thresholds": NT, "slide_steps": -1}, ProgramError, "slide_steps must be >= 0"),
    ({"Predict": spec(4, 2), "Label": spec(4, 1, dtype="int64"), "StatPos": _stat(), "StatNeg": _stat()},
     {"num_thresholds": NT, "slide_steps": 3, "curve": "XY"}, ProgramError, "curve must be 'ROC' or 'PR'"),
    ({"Predict": np.array([[0.5, 0.5], [-0.5, 1.5]], np.float32), "Label": np.array([[1], [0]]),
      "StatPos": np.zeros((1, NT + 1), np.int64), "StatNeg": np.zeros((1, NT + 1), np.int64)},
     {"num_thresholds": NT, "slide_steps": 0}, ValueError, r"in \[0, 1\]; row 1 has 1.5"),
)


# -- edit_distance --------------------------------------------------------------------------


def _levenshtein(h, r) -> int:
    d = [[i + j if i * j == 0 else 0 for j in range(len(r) + 1)] for i in range(len(h) + 1)]
    for i in range(1, len(h) + 1):
        for j in range(1, len(r) + 1):
            d[i][j] = min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (h[i - 1] != r[j - 1]))
    return d[len(h)][len(r)]


def _ed_ref(i, a):
    ignored = set(a.get("_ignored_tokens") or ())
    out = []
    for h, hl, r, rl in zip(i["Hyps"], i["HypsLength"].reshape(-1), i["Refs"], i["RefsLength"].reshape(-1)):
        h = [t for t in h[:hl] if t not in ignored]
        r = [t for t in r[:rl] if t not in ignored]
        d = np.float32(_levenshtein(h, r))
        out.append(d / np.float32(len(r)) if a["normalized"] else d)
    return {"Out": np.array(out, np.float32).reshape(-1, 1), "SequenceNum": np.array([len(out)])}


def _ed_sample(n=6, wh=7, wr=5, vocab=4, column=False):
    def sample(r):
        hl = r.integers(0, wh + 1, n)
        rl = r.integers(1, wr + 1, n)
        hl[0], hl[1], rl[1] = 0, wh, wr  # an empty hypothesis; a pair that fills both widths
        shape = (n, 1) if column else (n,)
        return {"Hyps": r.integers(0, vocab, (n, wh)), "Refs": r.integers(0, vocab, (n, wr)),
                "HypsLength": hl.reshape(shape), "RefsLength": rl.reshape(shape)}

    return sample


def _ed_specs(h=(4, 6), r=(4, 5), hl=(4,), rl=(4,), dtype="int64"):
    out = {"Hyps": spec(*h, dtype=dtype), "Refs": spec(*r, dtype="int64")}
    if hl is not None:
        out["HypsLength"] = spec(*hl, dtype="int64")
    if rl is not None:
        out["RefsLength"] = spec(*rl, dtype="int64")
    return out


_ED_BATCH = ("Hyps", "Refs", "HypsLength", "RefsLength")
_ED_ERRORS = (
    (_ed_specs(hl=None, rl=None), {}, ProgramError, r"LoD sequences of one token a row \[T, 1\]"),
    (_ed_specs(rl=None), {}, ProgramError, "give both HypsLength and RefsLength"),
    (_ed_specs(dtype="int32"), {}, ProgramError, "Hyps must be int64, got int32"),
    (_ed_specs(r=(3, 5)), {}, ProgramError, r"same N, got Hyps\[4, 6\] and Refs\[3, 5\]"),
    (_ed_specs(rl=(5,)), {}, ProgramError, r"RefsLength must be \[N\] = \[4\] .*got RefsLength\[5\]"),
    ({"Hyps": np.zeros((2, 3), np.int64), "Refs": np.zeros((2, 3), np.int64), "HypsLength": np.array([1, 4]),
      "RefsLength": np.array([1, 1])}, {}, ValueError, r"HypsLength\[1\] = 4 is not a length in 0..3"),
    ({"Hyps": np.zeros((2, 3), np.int64), "Refs": np.zeros((2, 3), np.int64), "HypsLength": np.array([1, 2]),
      "RefsLength": np.array([1, 0])}, {"normalized": True}, ValueError, "reference row 1 is empty"),
)


def _erase_sample(r):
    s = _ed_sample(vocab=5)(r)
    s["Refs"][2, 0] = 4  # a reference that is only ignored tokens up to its length
    s["RefsLength"][2] = 1
    return s



# -- precision_recall -----------------------------------------------------------------------


def _pr_ratio(num, other):
    return num / (num + other) if num > 0 or other > 0 else np.float32(1.0)


def _pr_f1(p, r):
    return np.float32(2) * p * r / (p + r) if p > 0 or r > 0 else np.float32(0.0)


def _pr_metrics(states):
    """The six metrics, class by class in float32, returned as float64 (NOTE(precision-recall))."""
    c = len(states)
    zero = np.float32(0.0)
    tot_tp = tot_fp = tot_fn = macro_p = macro_r = zero
    for tp, fp, _tn, fn in states:
        tot_tp, tot_fp, tot_fn = tot_tp + tp, tot_fp + fp, tot_fn + fn
        macro_p, macro_r = macro_p + _pr_ratio(tp, fp), macro_r + _pr_ratio(tp, fn)
    macro_p, macro_r = macro_p / np.float32(c), macro_r / np.float32(c)
    micro_p, micro_r = _pr_ratio(tot_tp, tot_fp), _pr_ratio(tot_tp, tot_fn)
    return np.array([macro_p, macro_r, _pr_f1(macro_p, macro_r), micro_p, micro_r, _pr_f1(micro_p, micro_r)],
                    np.float32).astype(np.float64)


def _pr_ref(i, a):
    c = a["class_number"]
    states = np.zeros((c, 4), np.float32)
    w = i["Weights"].reshape(-1) if "Weights" in i else np.ones(len(i["Indices"]), np.float32)
    for k, lab, wi in zip(i["Indices"].reshape(-1), i["Labels"].reshape(-1), w):
        if k == lab:
            states[k, 0] += wi
        else:
            states[k, 1] += wi
            states[lab, 3] += wi
        for j in range(c):
            if j not in (k, lab):
                states[j, 2] += wi
    accum = states + i["StatesInfo"] if "StatesInfo" in i else states
    return {"BatchMetrics": _pr_metrics(states), "AccumMetrics": _pr_metrics(accum), "AccumStatesInfo": accum}


def _pr_sample(n=16, c=5, seen=4, weights=False, states=False, dtype=np.int32, wrong=False):
    """Rows over classes 0..seen-1 of c (the others are never predicted nor labelled); the
    first two rows a hit and a miss; ``wrong``: every row a miss."""
    def sample(r):
        k = r.integers(0, seen, (n, 1))
        lab = r.integers(0, seen, (n, 1))
        lab[0], lab[1] = k[0], (k[1] + 1) % seen
        if wrong:
            lab = (k + 1) % seen
        out = {"MaxProbs": r.random((n, 1)), "Indices": k.astype(dtype), "Labels": lab.astype(dtype)}
        if weights:
            out["Weights"] = r.choice([0.0, 0.5, 1.0, 2.5], (n, 1))  # exact in float32: the sums too
        if states:
            out["StatesInfo"] = r.integers(0, 5, (c, 4)).astype(np.float64)
        return out

    return sample


def _pr_specs(mp=(4, 1), idx=(4, 1), lab=(4, 1), w=None, st=None, idt="int32", wdt="float32", sdt="float32"):
    out = {"MaxProbs": spec(*mp), "Indices": spec(*idx, dtype=idt), "Labels": spec(*lab, dtype="int32")}
    if w is not None:
        out["Weights"] = spec(*w, dtype=wdt)
    if st is not None:
        out["StatesInfo"] = spec(*st, dtype=sdt)
    return out


def _pr_rows(k, lab):
    return {"MaxProbs": np.full((len(k), 1), 0.5, np.float32), "Indices": np.array(k, np.int32).reshape(-1, 1),
            "Labels": np.array(lab, np.int32).reshape(-1, 1)}


_PR_BATCH = ("MaxProbs", "Indices", "Labels", "Weights")
_PR_ERRORS = (
    (_pr_specs(mp=(4, 2)), {"class_number": 3}, ProgramError, r"MaxProbs must be \[N, 1\] .*got MaxProbs\[4, 2\]"),
    (_pr_specs(idx=(3, 1)), {"class_number": 3}, ProgramError,
     r"Indices must be \[N, 1\] for MaxProbs\[4, 1\], got Indices\[3, 1\]"),
    (_pr_specs(idt="float32"), {"class_number": 3}, ProgramError, "Indices must be int32 or int64, got float32"),
    (_pr_specs(w=(4, 1), wdt="float64"), {"class_number": 3}, ProgramError,
     r"Weights must be float32 \(the dtype of MaxProbs\), got float64"),
    (_pr_specs(st=(4, 4)), {"class_number": 3}, ProgramError,
     r"StatesInfo must be float32 \[class_number, 4\] = \[3, 4\] .*got float32 \[4, 4\]"),
    (_pr_specs(st=(3, 4), sdt="float64"), {"class_number": 3}, ProgramError,
     r"StatesInfo must be float32 .*got float64"),
    (_pr_specs(), {"class_number": 0}, ProgramError, "class_number must be >= 1, got 0"),
    (_pr_rows([0, 1, 2], [0, 3, 1]), {"class_number": 3}, ValueError,
     r"Labels\[1\] = 3 is not a class in 0..2 \(class_number=3\)"),
    (_pr_rows([0, 1, -1], [0, 2, 1]), {"class_number": 3}, ValueError, r"Indices\[2\] = -1 is not a class in 0..2"),
)

CASES: list[OpCase] = [
    OpCase("auc", _auc_sample(0, n=16), _auc_ref, attrs={"num_thresholds": NT, "slide_steps": 0}, name="global",
           batch=("Predict", "Label"), errors=_AUC_ERRORS),
    OpCase("auc", _auc_sample(0, flat=True), _auc_ref, attrs={"num_thresholds": NT, "slide_steps": 0},
           name="global_flat", batch=("Predict", "Label")),
    OpCase("auc", _auc_sample(3), _auc_ref, attrs={"num_thresholds": NT, "slide_steps": 3}, name="window3",
           batch=("Predict", "Label")),
    OpCase("auc", _auc_sample(3, counters=(2, 2)), _auc_ref, attrs={"num_thresholds": NT, "slide_steps": 3},
           name="window3_last_slot", batch=("Predict", "Label")),
    OpCase("auc", _auc_sample(3, counters=(7, 4)), _auc_ref, attrs={"num_thresholds": NT, "slide_steps": 3},
           name="pos_counter_picks_the_slot", batch=("Predict", "Label")),
    OpCase("auc", _auc_sample(2, stale=3), _auc_ref, attrs={"num_thresholds": NT, "slide_steps": 2},
           name="stale_sum_row", batch=("Predict", "Label")),
    OpCase("auc", _auc_sample(1, width=1), _auc_ref, attrs={"num_thresholds": NT, "slide_steps": 1},
           name="one_column", batch=("Predict", "Label")),
    OpCase("auc", _auc_sample(1, labels=1), _auc_ref, attrs={"num_thresholds": NT, "slide_steps": 1, "curve": "PR"},
           name="pr_is_roc", batch=("Predict", "Label")),
    OpCase("auc", lambda r: {"Predict": np.array([[0.9, 0.1], [0.2, 0.8]]), "Label": np.array([[1], [1]]),
                             "StatPos": np.zeros(3 * (NT + 1) + 1, np.int64),
                             "StatNeg": np.zeros(3 * (NT + 1) + 1, np.int64)},
           lambda i, a: {**_auc_ref(i, a), "AUC": np.array([0.0])},
           attrs={"num_thresholds": NT, "slide_steps": 2}, name="no_negatives", batch=("Predict", "Label")),
    OpCase("edit_distance", _ed_sample(), _ed_ref, name="plain", batch=_ED_BATCH, errors=_ED_ERRORS),
    OpCase("edit_distance", _ed_sample(column=True), _ed_ref, attrs={"normalized": True}, name="normalized",
           batch=_ED_BATCH),
    OpCase("edit_distance", _ed_sample(n=4, wh=9, wr=9, vocab=2), _ed_ref, name="long_binary", batch=_ED_BATCH),
    OpCase("edit_distance", _erase_sample, _ed_ref, attrs={"_ignored_tokens": [4, 0]}, name="ignored_tokens",
           batch=_ED_BATCH),
    OpCase("edit_distance",
           lambda r: {"Hyps": np.array([list(b"kitten"), list(b"sunday")]),
                      "Refs": np.array([list(b"sitting\0"), list(b"saturday")]),
                      "HypsLength": np.array([6, 6]), "RefsLength": np.array([7, 8])},
           lambda i, a: {"Out": np.array([[3.0 / 7], [3.0 / 8]], np.float32), "SequenceNum": np.array([2])},
           attrs={"normalized": True}, name="kitten", batch=_ED_BATCH),
    OpCase("precision_recall", _pr_sample(), _pr_ref, attrs={"class_number": 5}, name="plain", batch=_PR_BATCH,
           errors=_PR_ERRORS),
    OpCase("precision_recall", _pr_sample(weights=True, states=True), _pr_ref, attrs={"class_number": 5},
           name="weights_states", batch=_PR_BATCH),
    OpCase("precision_recall", _pr_sample(n=9, c=4, seen=4, states=True, dtype=np.int64), _pr_ref,
           attrs={"class_number": 4}, name="int64_states", batch=_PR_BATCH),
    OpCase("precision_recall", _pr_sample(n=6, c=3, seen=3, weights=True, wrong=True), _pr_ref,
           attrs={"class_number": 3}, name="all_wrong", batch=_PR_BATCH),
    OpCase("precision_recall", lambda r: _pr_rows([0, 1, 1, 2, 0], [0, 2, 1, 2, 1]),
           lambda i, a: {"BatchMetrics": np.array([0.75, 0.75, 0.75, 0.6, 0.6, 0.6], np.float32).astype(np.float64),
                         "AccumMetrics": np.array([0.75, 0.75, 0.75, 0.6, 0.6, 0.6], np.float32).astype(np.float64),
                         "AccumStatesInfo": np.array([[1, 1, 3, 0], [1, 1, 2, 1], [1, 0, 3, 1], [0, 0, 5, 0]],
                                                     np.float32)},
           attrs={"class_number": 4}, name="fluid_1_8_5_by_hand", batch=_PR_BATCH),
]
