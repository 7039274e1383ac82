"""Metrics: top_k, accuracy, auc, edit_distance, mean_iou and precision_recall. None has a gradient.

``layers.accuracy(input, label, k)`` is ``top_k`` then ``accuracy``, as in Fluid: accuracy
reads the top-k ``Indices`` of each row and counts the rows whose label is among them.

NOTE(mean-iou): Fluid 1.8's mean_iou counts, over every element of Predictions and Labels (the
same shape, int32 or int64 class ids in [0, num_classes)), OutCorrect[c] = the elements where
both are c, and OutWrong[c] = those where exactly one of the two is c; the state of earlier
batches enters through the optional inputs InWrongs, InCorrects and InMeanIou (each a list,
summed in). The IoU of class c is correct / (correct + wrong), OutMeanIou = Σ InMeanIou + the
mean of the IoUs over the classes with correct + wrong > 0, in float32 (NaN when no class has
any). Fluid 1.8's layer passes no state inputs: each run gives one batch's numbers; a running
mean IoU adds the OutWrong/OutCorrect of the batches and feeds them back as InWrongs/InCorrects
(``fluid.metrics`` style) or sums them outside.
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, Slot, check, register
from placegroup.values import host_array, is_lod_tensor, scatter_add


def _topk_infer(ins, a):
    x = ins["X"].shape
    k = a["k"]
    check(len(x) >= 1 and k >= 1 and (x[-1] == -1 or k <= x[-1]),
          f"top_k: k={k} must be in 1..{x[-1] if x else '?'} for X{list(x)}")
    out = tuple(x[:-1]) + (k,)
    return {"Out": Meta(out, ins["X"].dtype), "Indices": Meta(out, "int64")}


@register("top_k", ins=(Slot("X", no_grad=True),), outs=("Out", "Indices"), attrs={"k": 1},
          infer=_topk_infer)
def top_k(xp, ins, a, ctx):
    """Out, Indices = the k largest entries of each row of X (last dim), largest first; ties
    go to the lower index, as in Fluid."""
    x = ins["X"]
    # A stable sort of -X keeps equal values in index order.
    idx = xp.argsort(-x, axis=-1, kind="stable")[..., : a["k"]]
    return {"Out": xp.take_along_axis(x, idx, axis=-1), "Indices": idx.astype("int64", copy=False)}


def _acc_infer(ins, a):
    out, idx, label = ins["Out"].shape, ins["Indices"].shape, ins["Label"].shape
    check(tuple(out) == tuple(idx), f"accuracy: Out{list(out)} and Indices{list(idx)} differ")
    check(len(label) == 2 and label[1] == 1 and (label[0] == idx[0] or -1 in (label[0], idx[0])),
          f"accuracy: Label{list(label)} must be [N, 1] for Indices{list(idx)}")
    return {"Accuracy": Meta((1,), "float32"), "Correct": Meta((1,), "int64"),
            "Total": Meta((1,), "int64")}


@register("accuracy", ins=(Slot("Out", no_grad=True), Slot("Indices", no_grad=True),
                           Slot("Label", no_grad=True)),
          outs=("Accuracy", "Correct", "Total"), infer=_acc_infer)
def accuracy(xp, ins, a, ctx):
    """Correct = rows whose Label is among their top-k Indices; Total = rows;
    Accuracy = Correct / Total (0 for an empty batch)."""
    idx, label = ins["Indices"], ins["Label"]
    correct = (idx == label.reshape(-1, 1)).any(axis=-1).sum()
    total = idx.shape[0]
    acc = correct.astype("float32") / max(total, 1)
    return {"Accuracy": acc.reshape(1).astype("float32"), "Correct": correct.reshape(1).astype("int64"),
            "Total": xp.full((1,), total, dtype="int64")}


# -- auc ------------------------------------------------------------------------------------
#
# NOTE(auc-buckets): what ``auc`` computes, as Fluid 1.8's CPU kernel
# (paddle/fluid/operators/metrics/auc_op.h). Each row's positive-class probability p (the
# last column of Predict) falls in bucket ``int(p * num_thresholds)`` (p times the threshold
# count in Predict's dtype, truncated), so there are num_thresholds + 1 buckets; a row with a
# non-zero label counts in StatPos, a zero label in StatNeg. The AUC is the ROC area over the
# buckets walked from the highest down: with running totals P and N, each bucket adds the
# trapezoid ``|N - N_prev| * (P + P_prev) / 2``, and the sum is divided by ``P * N`` when both
# are positive (else it is 0). Every term is a multiple of 0.5 below 2^52, so the float64 sum
# is exact in any order and a vectorised sum equals Fluid's loop bit for bit. ``curve`` is
# stored and ignored: Fluid's kernel computes the ROC area for ``PR`` too.
#
# NOTE(auc-window): the state, in Fluid 1.8's layout (auc_op.cc/auc_op.h), so checkpoints and
# saved models interchange with Fluid. With L = num_thresholds + 1 buckets:
# - ``slide_steps == 0`` (the layer's global AUC): StatPos/StatNeg are [1, L] counts over every
#   batch so far; this batch is added to them and the AUC is over them. A flat [L + 1] var (what
#   Fluid's layer creates for a batch AUC with slide_steps=0, and its startup program fills, before
#   Fluid's shape inference turns it into [1, L]) is also taken: its first L entries count, the
#   last is left alone.
# - ``slide_steps = s > 0`` (the layer's batch AUC): each is one flat int64 ring of
#   [(s + 1) * L + 1]: s slots of L counts, one per recent batch, then a sum row of L, then a step
#   counter. A run takes slot ``idx = counter % s`` (StatPos's counter picks it for both, as in
#   Fluid), moves the sum row by (this batch - the slot's old counts), writes this batch into the
#   slot, and adds 1 to each counter; the AUC is over the sum row, i.e. over the last s batches
#   (fewer at the start, while slots are still zero). The sum row is updated, not re-summed, as
#   Fluid does it, so a loaded state whose sum row disagrees with its slots runs as in Fluid.
# StatPosOut/StatNegOut replace StatPos/StatNeg in place (``OpDef.inplace``).
#
# NOTE(auc-predict-width): Fluid 1.8 takes Predict [N, 2] and reads column 1; later Paddle
# reads the last column of [N, 1] or [N, 2]. Here both widths are accepted and the last
# column is read, which is column 1 for Fluid's [N, 2].

_AUC_ATTRS = {"curve": "ROC", "num_thresholds": (2 << 12) - 1, "slide_steps": 1}  # Fluid's op default: 8191


def _auc_infer(ins, a):
    p, label = tuple(ins["Predict"].shape), tuple(ins["Label"].shape)
    check(len(p) == 2 and p[1] in (-1, 1, 2),
          f"auc: Predict must be [N, 2] (or [N, 1]) probabilities of the positive class, got Predict{list(p)}")
    check(ins["Predict"].dtype in ("float32", "float64"), f"auc: Predict must be float32 or float64, got "
                                                          f"{ins['Predict'].dtype}")
    check(len(label) in (1, 2) and (len(label) == 1 or label[1] == 1) and (label[0] == p[0] or -1 in (label[0], p[0])),
          f"auc: Label must be [N, 1] for Predict{list(p)}, got Label{list(label)}")
    check(ins["Label"].dtype in ("int32", "int64"), f"auc: Label must be int32 or int64, got {ins['Label'].dtype}")
    nt, steps = a["num_thresholds"], a["slide_steps"]
    check(nt >= 1, f"auc: num_thresholds must be >= 1, got {nt}")
    check(steps >= 0, f"auc: slide_steps must be >= 0 (0: every step), got {steps}")
    check(a["curve"] in ("ROC", "PR"), f"auc: curve must be 'ROC' or 'PR', got {a['curve']!r}")
    buckets = nt + 1
    want = ((steps + 1) * buckets + 1,) if steps else (1, buckets)
    also = ((buckets + 1,),) if steps == 0 else ()  # Fluid's flat batch state for slide_steps=0
    for slot in ("StatPos", "StatNeg"):
        m = ins[slot]
        check(tuple(m.shape) in (want, *also) and m.dtype == "int64",
              f"auc: {slot} must be int64 {list(want)}{''.join(f' or {list(s)}' for s in also)} for "
              f"num_thresholds={nt}, slide_steps={steps} "
              f"(NOTE(auc-window)), got {m.dtype} {list(m.shape)}")
    return {"AUC": Meta((1,), "float64"), "StatPosOut": ins["StatPos"], "StatNegOut": ins["StatNeg"]}


def roc_area(xp, stat_pos, stat_neg):
    """The bucketed ROC area of NOTE(auc-buckets) from [T+1] counts, as a float64 scalar array."""
    pos, neg = stat_pos[::-1].astype("float64"), stat_neg[::-1].astype("float64")
    tot_pos = xp.cumsum(pos)
    area = (neg * (tot_pos + (tot_pos - pos)) / 2.0).sum()  # per bucket |N - N_prev| * (P + P_prev) / 2
    p, n = tot_pos[-1], neg.sum()
    return xp.where((p > 0) & (n > 0), area / xp.where(p > 0, p, 1.0) / xp.where(n > 0, n, 1.0), area)


@register("auc", ins=(Slot("Predict", no_grad=True), Slot("Label", no_grad=True), Slot("StatPos", no_grad=True),
                      Slot("StatNeg", no_grad=True)),
          outs=("AUC", Slot("StatPosOut", no_grad=True), Slot("StatNegOut", no_grad=True)), attrs=_AUC_ATTRS,
          infer=_auc_infer, inplace={"StatPosOut": "StatPos", "StatNegOut": "StatNeg"})
def auc(xp, ins, a, ctx):
    """AUC = the bucketed ROC area over the accumulated counts (NOTE(auc-buckets)); the counts
    move by this batch as NOTE(auc-window) says."""
    p = ins["Predict"][:, -1]
    bad = ~((p >= 0) & (p <= 1))
    if bool(bad.any()):
        row = int(xp.argmax(bad))
        raise ValueError(f"auc: Predict must hold probabilities in [0, 1]; row {row} has {float(p[row])}")
    nt = a["num_thresholds"]
    bins = (p * xp.asarray(nt, dtype=p.dtype)).astype("int64")
    is_pos = ins["Label"].reshape(-1) != 0
    batch_pos = xp.bincount(bins[is_pos], minlength=nt + 1).astype("int64")
    batch_neg = xp.bincount(bins[~is_pos], minlength=nt + 1).astype("int64")
    stat_pos, stat_neg = ins["StatPos"], ins["StatNeg"]
    if not ctx.inplace:
        stat_pos, stat_neg = stat_pos.copy(), stat_neg.copy()
    steps, buckets = a["slide_steps"], nt + 1
    if steps == 0:
        counts = [stat.reshape(-1)[:buckets] for stat in (stat_pos, stat_neg)]  # views: the update lands in stat
        counts[0] += batch_pos
        counts[1] += batch_neg
    else:
        idx = int(stat_pos[-1]) % steps
        slot, total = slice(idx * buckets, (idx + 1) * buckets), slice(steps * buckets, (steps + 1) * buckets)
        for stat, batch in ((stat_pos, batch_pos), (stat_neg, batch_neg)):
            stat[total] += batch - stat[slot]
            stat[slot] = batch
            stat[-1] += 1
        counts = [stat_pos[total], stat_neg[total]]
    area = roc_area(xp, *counts)
    return {"AUC": area.reshape(1).astype("float64"), "StatPosOut": stat_pos, "StatNegOut": stat_neg}


# -- edit_distance --------------------------------------------------------------------------
#
# NOTE(edit-distance-dp): the Levenshtein distance of each (hypothesis, reference) pair, as
# Fluid's kernel (edit_distance_op.h): insertions, deletions and substitutions cost 1, an empty
# side gives the other's length, and ``normalized`` divides by the reference length in float32
# (an empty reference is then an error). The DP runs one hypothesis position i at a time for
# the whole batch: with row ``prev = D[i-1, :]``, ``a[j] = min(prev[j-1] + cost, prev[j] + 1)``
# (substitute, delete), and the insertion chain ``D[i, j] = min(a[j], D[i, j-1] + 1)`` unrolls to
# ``D[i, j] = j + min_{k <= j}(a[k] - k)`` with ``a[0] = i``: a running minimum along the row.
# Cells past a pair's lengths are computed and never read (D[i, j] depends only on smaller i, j);
# a pair's distance is taken from row ``len(hyp)`` at column ``len(ref)``.
#
# NOTE(edit-distance-lod): without HypsLength and RefsLength, Hyps and Refs are LoD sequences
# [T, 1] (what ctc_greedy_decoder gives), as Fluid's op reads them: each is padded here into rows
# with its lengths and compared as the padded form is.
#
# NOTE(edit-distance-erase): Fluid 1.8's layer removes ``ignored_tokens`` with sequence_erase,
# a LoD op. For the padded form (Hyps/Refs [N, L] with lengths) the removal happens here, by
# the attr ``_ignored_tokens`` (a placegroup attr; Fluid's op has none): in each row the valid
# tokens (before its length) not in the list keep their order and move to the front, and the
# length shrinks by the number removed. The normalized-reference check sees the erased lengths,
# as Fluid's op sees the erased sequences.


def _ed_infer(ins, a):
    h, r = tuple(ins["Hyps"].shape), tuple(ins["Refs"].shape)
    hl, rl = ins.get("HypsLength"), ins.get("RefsLength")
    check((hl is None) == (rl is None), "edit_distance: give both HypsLength and RefsLength (padded [N, L] "
                                        "sequences) or neither (LoD sequences)")
    for slot, m in (("Hyps", ins["Hyps"]), ("Refs", ins["Refs"])) + ((("HypsLength", hl), ("RefsLength", rl))
                                                                     if hl is not None else ()):
        check(m.dtype == "int64", f"edit_distance: {slot} must be int64, got {m.dtype}")
    if hl is None:  # LoD sequences, one token a row (NOTE(edit-distance-lod))
        check(len(h) == 2 and h[1] == 1 and len(r) == 2 and r[1] == 1,
              f"edit_distance: without lengths, Hyps and Refs are LoD sequences of one token a row [T, 1], got "
              f"Hyps{list(h)} and Refs{list(r)}")
        return {"Out": Meta((-1, 1), "float32"), "SequenceNum": Meta((1,), "int64")}
    check(len(h) == 2 and len(r) == 2 and (h[0] == r[0] or -1 in (h[0], r[0])),
          f"edit_distance: Hyps and Refs must be 2-D [N, L] with the same N, got Hyps{list(h)} and Refs{list(r)}")
    n = h[0] if h[0] != -1 else r[0]
    for slot, m in (("HypsLength", hl), ("RefsLength", rl)):
        s = tuple(m.shape)
        check(len(s) in (1, 2) and (len(s) == 1 or s[1] == 1) and (s[0] == n or -1 in (s[0], n)),
              f"edit_distance: {slot} must be [N] = [{n}] (one length per row of Hyps{list(h)}), got {slot}{list(s)}")
    return {"Out": Meta((n, 1), "float32"), "SequenceNum": Meta((1,), "int64")}


def _padded(xp, op: str, slot: str, x):
    """(rows [N, L], lengths [N]) of the LoD sequences ``x`` [T, 1] (NOTE(edit-distance-lod))."""
    if not is_lod_tensor(x) or not x.offsets:
        raise ValueError(f"edit_distance: {slot} has no LoD; without HypsLength and RefsLength it must be a batch of "
                         f"sequences (lod_level 1)")
    offsets = host_array(x.offsets[0]).astype("int64")
    lengths = np.diff(offsets)
    width = int(lengths.max()) if len(lengths) else 0
    cols = np.arange(width)
    keep = cols[None, :] < lengths[:, None]
    rows = np.where(keep, offsets[:-1, None] + cols[None, :], 0)
    data = x.data.reshape(-1)
    out = xp.where(xp.asarray(keep), data[xp.asarray(rows)] if data.shape[0] else 0, 0).astype("int64")
    return out, xp.asarray(lengths)


def _lengths(xp, op: str, slot: str, lengths, width: int):
    out = lengths.reshape(-1).astype("int64")
    bad = (out < 0) | (out > width)
    if bool(bad.any()):
        row = int(xp.argmax(bad))
        raise ValueError(f"{op}: {slot}[{row}] = {int(out[row])} is not a length in 0..{width} (the padded width)")
    return out


def erase_tokens(xp, x, lengths, tokens):
    """Drop ``tokens`` from the first ``lengths[i]`` entries of each row of ``x`` [N, L]: the rest
    keep their order at the front of the row, zeros after (NOTE(edit-distance-erase)).
    Returns (x, lengths)."""
    keep = xp.arange(x.shape[1])[None, :] < lengths[:, None]
    if len(tokens):
        keep &= ~(x[:, :, None] == xp.asarray(list(tokens), dtype=x.dtype)).any(axis=-1)
    rows, cols = xp.nonzero(keep)
    out = xp.zeros_like(x)
    out[rows, (xp.cumsum(keep, axis=1) - 1)[rows, cols]] = x[rows, cols]
    return out, keep.sum(axis=1).astype("int64")


def _running_min(xp, m):
    """The prefix minimum along axis 1, by doubling: log2(width) elementwise steps (cupy has no
    ``minimum.accumulate`` in every version)."""
    k = 1
    while k < m.shape[1]:
        m = xp.concatenate([m[:, :k], xp.minimum(m[:, k:], m[:, :-k])], axis=1)
        k *= 2
    return m


def levenshtein(xp, hyps, hyp_len, refs, ref_len):
    """The edit distance of each row pair, int64 [N] (NOTE(edit-distance-dp))."""
    n, width = refs.shape
    j = xp.arange(width + 1, dtype="int64")
    prev = xp.broadcast_to(j, (n, width + 1))
    pick = ref_len[:, None]
    dist = xp.where(hyp_len == 0, ref_len, 0)
    for i in range(1, int(hyp_len.max()) + 1 if n else 1):
        cost = (hyps[:, i - 1:i] != refs).astype("int64")
        a = xp.minimum(prev[:, :-1] + cost, prev[:, 1:] + 1)
        a = xp.concatenate([xp.full((n, 1), i, dtype="int64"), a], axis=1)
        row = _running_min(xp, a - j) + j
        dist = xp.where(hyp_len == i, xp.take_along_axis(row, pick, axis=1)[:, 0], dist)
        prev = row
    return dist


@register("edit_distance",
          ins=(Slot("Hyps", no_grad=True), Slot("Refs", no_grad=True),
               Slot("HypsLength", dispensable=True, no_grad=True), Slot("RefsLength", dispensable=True, no_grad=True)),
          outs=("Out", "SequenceNum"), attrs={"normalized": False, "_ignored_tokens": []}, infer=_ed_infer,
          wants_lod=("Hyps", "Refs"), lod="drop")
def edit_distance(xp, ins, a, ctx):
    """Out [N, 1] float32 = the edit distance of each hypothesis row to its reference row
    (divided by the reference length when ``normalized``); SequenceNum = [N]
    (NOTE(edit-distance-dp), NOTE(edit-distance-erase))."""
    hyps, refs = ins["Hyps"], ins["Refs"]
    if ins.get("HypsLength") is None:
        (hyps, hyp_len), (refs, ref_len) = _padded(xp, "edit_distance", "Hyps", hyps), _padded(xp, "edit_distance",
                                                                                                "Refs", refs)
        if hyp_len.shape[0] != ref_len.shape[0]:
            raise ValueError(f"edit_distance: Hyps holds {hyp_len.shape[0]} sequences and Refs {ref_len.shape[0]}; "
                             f"they must hold as many")
    else:
        hyp_len = _lengths(xp, "edit_distance", "HypsLength", ins["HypsLength"], hyps.shape[1])
        ref_len = _lengths(xp, "edit_distance", "RefsLength", ins["RefsLength"], refs.shape[1])
    tokens = a["_ignored_tokens"] or ()
    if tokens:
        hyps, hyp_len = erase_tokens(xp, hyps, hyp_len, tokens)
        refs, ref_len = erase_tokens(xp, refs, ref_len, tokens)
    if a["normalized"] and bool((ref_len == 0).any()):
        row = int(xp.argmax(ref_len == 0))
        raise ValueError(f"edit_distance: reference row {row} is empty, and normalized=True divides by its length")
    out = levenshtein(xp, hyps, hyp_len, refs, ref_len).astype("float32")
    if a["normalized"]:
        out = out / ref_len.astype("float32")
    return {"Out": out.reshape(-1, 1), "SequenceNum": xp.full((1,), hyps.shape[0], dtype="int64")}


# -- mean_iou (NOTE(mean-iou)) ----------------------------------------------------------------


def _miou_infer(ins, a):
    p, lab, k = ins["Predictions"], ins["Labels"], a["num_classes"]
    check(k >= 1, f"mean_iou: num_classes must be >= 1, got {k}")
    check(p.dtype in ("int32", "int64") and lab.dtype == p.dtype,
          f"mean_iou: Predictions and Labels must share int32 or int64, got {p.dtype} and {lab.dtype}")
    check(len(p.shape) == len(lab.shape) and all(x == y or -1 in (x, y) for x, y in zip(p.shape, lab.shape)),
          f"mean_iou: Predictions{list(p.shape)} and Labels{list(lab.shape)} must have one shape")
    for slot in ("InWrongs", "InCorrects"):
        for m in ins.get(slot) or ():
            check(tuple(m.shape) in ((k,), (-1,)) and m.dtype == "int32",
                  f"mean_iou: each of {slot} must be int32 [num_classes] = [{k}], got {m.dtype}{list(m.shape)}")
    return {"OutMeanIou": Meta((1,), "float32"), "OutWrong": Meta((k,), "int32"), "OutCorrect": Meta((k,), "int32")}


@register("mean_iou", ins=(Slot("Predictions", no_grad=True), Slot("Labels", no_grad=True),
                           Slot("InWrongs", duplicable=True, dispensable=True, no_grad=True),
                           Slot("InCorrects", duplicable=True, dispensable=True, no_grad=True),
                           Slot("InMeanIou", duplicable=True, dispensable=True, no_grad=True)),
          outs=("OutMeanIou", "OutWrong", "OutCorrect"), attrs={"num_classes": 1}, infer=_miou_infer)
def mean_iou(xp, ins, a, ctx):
    """The mean intersection-over-union of the classes (NOTE(mean-iou)).

    Raises:
        ValueError: a class id outside [0, num_classes).
    """
    p, lab, k = ins["Predictions"].reshape(-1), ins["Labels"].reshape(-1), a["num_classes"]
    for slot, v in (("Predictions", p), ("Labels", lab)):
        if v.size and (int(v.min()) < 0 or int(v.max()) >= k):
            bad = int(v[(v < 0) | (v >= k)][0])
            raise ValueError(f"mean_iou: {slot} holds class {bad}, outside 0..{k - 1} (num_classes={k})")
    same = p == lab
    correct = xp.bincount(p[same], minlength=k)
    wrong = xp.bincount(lab[~same], minlength=k) + xp.bincount(p[~same], minlength=k)
    for w in ins.get("InWrongs") or ():
        wrong = wrong + w
    for c in ins.get("InCorrects") or ():
        correct = correct + c
    denom = wrong + correct
    valid = int((denom > 0).sum())
    iou_sum = (correct.astype(np.float32) / xp.maximum(denom, 1).astype(np.float32)).sum(dtype=np.float32)
    mean = xp.zeros((1,), dtype=np.float32)
    for m in ins.get("InMeanIou") or ():
        mean = mean + m.reshape(-1)[:1].astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean = mean + (iou_sum / np.float32(valid) if valid else xp.asarray(np.float32("nan")))
    return {"OutMeanIou": mean.astype(np.float32), "OutWrong": wrong.astype(np.int32),
            "OutCorrect": correct.astype(np.int32)}


# -- precision_recall -----------------------------------------------------------------------
#
# NOTE(precision-recall): Fluid 1.8.5's multi-class precision_recall op (what PaddleRec's
# ``metrics.PrecisionRecall`` appends after ``topk(k=1)``), as its CPU kernel behaves (read off
# runs of Fluid 1.8.5, tests/test_metrics.py). States are [class_number, 4] of TP, FP, TN, FN.
# Each row i, with weight w (Weights[i], 1 without Weights), predicted class k = Indices[i] and
# label l = Labels[i]:
# - k == l: TP[k] += w, and every other class gets TN += w;
# - k != l: FP[k] += w, FN[l] += w, and every class but k and l gets TN += w.
# Fluid counts TN as "+w for every class, then -w for k (and for l)", one row after the
# other, in MaxProbs' dtype; the TN column here adds exactly that sequence of terms in that
# order (a -0.0 stands for the missing second -w of a hit), so float32 sums equal Fluid's to
# the bit (without Weights every partial sum is a small integer, so plain counts are the same).
# MaxProbs' values are never read: it gives the dtype (float32 or float64; Weights, StatesInfo
# and AccumStatesInfo share it, as in Fluid's kernel) and the row count.
# BatchMetrics are the metrics of this batch's states alone; AccumStatesInfo = those states +
# StatesInfo (zeros without it), and AccumMetrics are the metrics of AccumStatesInfo. Metrics
# are computed in the states' dtype, summing classes in index order, and stored as float64
# (Fluid's kernel writes both metric outputs as double whatever MaxProbs' dtype is):
#   precision(tp, fp) = tp / (tp + fp) if tp > 0 or fp > 0 else 1   (recall: fn for fp)
#   f1(p, r) = 2 * p * r / (p + r) if p > 0 or r > 0 else 0
#   [macro P, macro R, f1(macro P, macro R), micro P, micro R, f1(micro P, micro R)]
# where macro P/R are the means over classes of each class's precision/recall (a class never
# predicted nor seen counts 1), micro P/R are those of the summed TP, FP and FN, and macro F1 is
# the F1 of the macro means (not the mean of per-class F1s). Negative weights pass through as in
# Fluid (a zero denominator then gives inf or nan). Differences: Fluid's kernel reads Indices
# and Labels as int32 only (int64 fails at run time); int64 works here too. An Indices or Labels
# value outside [0, class_number) is a ValueError naming the row (Fluid also refuses it).

_PR_COLS = 4  # TP, FP, TN, FN
_TP, _FP, _TN, _FN = range(_PR_COLS)


def _pr_infer(ins, a):
    c, mp = a["class_number"], ins["MaxProbs"]
    check(c >= 1, f"precision_recall: class_number must be >= 1, got {c}")
    check(mp.dtype in ("float32", "float64"), f"precision_recall: MaxProbs must be float32 or float64, got {mp.dtype}")
    n = mp.shape[0] if len(mp.shape) == 2 else None
    check(len(mp.shape) == 2 and mp.shape[1] == 1,
          f"precision_recall: MaxProbs must be [N, 1] (each row's top-1 probability), got MaxProbs{list(mp.shape)}")
    for slot in ("Indices", "Labels", "Weights"):
        m = ins.get(slot)
        if m is None:
            continue
        s = tuple(m.shape)
        check(len(s) == 2 and s[1] == 1 and (s[0] == n or -1 in (s[0], n)),
              f"precision_recall: {slot} must be [N, 1] for MaxProbs{list(mp.shape)}, got {slot}{list(s)}")
        want = (mp.dtype,) if slot == "Weights" else ("int32", "int64")
        check(m.dtype in want, f"precision_recall: {slot} must be {' or '.join(want)}"
                               f"{' (the dtype of MaxProbs)' if slot == 'Weights' else ''}, got {m.dtype}")
    st = ins.get("StatesInfo")
    if st is not None:
        check(tuple(st.shape) == (c, _PR_COLS) and st.dtype == mp.dtype,
              f"precision_recall: StatesInfo must be {mp.dtype} [class_number, 4] = [{c}, 4] (TP, FP, TN, FN per "
              f"class, NOTE(precision-recall)), got {st.dtype} {list(st.shape)}")
    return {"BatchMetrics": Meta((6,), "float64"), "AccumMetrics": Meta((6,), "float64"),
            "AccumStatesInfo": Meta((c, _PR_COLS), mp.dtype)}


def _pr_ratio(xp, num, other):
    """num / (num + other) where either is > 0, else 1 (NOTE(precision-recall))."""
    some = (num > 0) | (other > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.where(some, num / xp.where(some, num + other, 1), xp.ones_like(num))


def _pr_f1(xp, p, r):
    some = (p > 0) | (r > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.where(some, 2 * p * r / xp.where(some, p + r, 1), xp.zeros_like(p))


def pr_metrics(xp, states):
    """The six metrics of NOTE(precision-recall) from [C, 4] states: computed in their dtype,
    returned as float64."""
    c = states.shape[0]
    tp, fp, fn = states[:, _TP], states[:, _FP], states[:, _FN]

    def last(v):  # cumsum adds in class order, as Fluid's loop does (a pairwise sum rounds differently)
        return xp.cumsum(v)[-1]

    n = xp.asarray(c, dtype=states.dtype)
    macro_p, macro_r = last(_pr_ratio(xp, tp, fp)) / n, last(_pr_ratio(xp, tp, fn)) / n
    tot_tp, tot_fp, tot_fn = last(tp), last(fp), last(fn)
    micro_p, micro_r = _pr_ratio(xp, tot_tp, tot_fp), _pr_ratio(xp, tot_tp, tot_fn)
    out = xp.stack([macro_p, macro_r, _pr_f1(xp, macro_p, macro_r), micro_p, micro_r, _pr_f1(xp, micro_p, micro_r)])
    return out.astype("float64")


def _pr_classes(xp, slot: str, v, c: int):
    v = v.reshape(-1).astype("int64")
    bad = (v < 0) | (v >= c)
    if bool(bad.any()):
        row = int(xp.argmax(bad))
        raise ValueError(f"precision_recall: {slot}[{row}] = {int(v[row])} is not a class in 0..{c - 1} "
                         f"(class_number={c})")
    return v


@register("precision_recall",
          ins=(Slot("MaxProbs", no_grad=True), Slot("Indices", no_grad=True), Slot("Labels", no_grad=True),
               Slot("Weights", dispensable=True, no_grad=True), Slot("StatesInfo", dispensable=True, no_grad=True)),
          outs=("BatchMetrics", "AccumMetrics", "AccumStatesInfo"), attrs={"class_number": 1}, infer=_pr_infer,
          lod="drop")
def precision_recall(xp, ins, a, ctx):
    """Per-class TP/FP/TN/FN of this batch, added to StatesInfo, and the macro and micro
    precision, recall and F1 of both (NOTE(precision-recall)).

    Raises:
        ValueError: an Indices or Labels value outside [0, class_number), naming the row.
    """
    c, dt = a["class_number"], ins["MaxProbs"].dtype
    k = _pr_classes(xp, "Indices", ins["Indices"], c)
    lab = _pr_classes(xp, "Labels", ins["Labels"], c)
    states = _pr_batch_states(xp, k, lab, ins.get("Weights"), c, dt)
    accum = states + ins["StatesInfo"].astype(dt, copy=False) if ins.get("StatesInfo") is not None else states
    return {"BatchMetrics": pr_metrics(xp, states), "AccumMetrics": pr_metrics(xp, accum), "AccumStatesInfo": accum}


def _pr_batch_states(xp, k, lab, weights, c: int, dt):
    """This batch's [C, 4] TP, FP, TN, FN in dtype ``dt``, each sum in Fluid's order
    (NOTE(precision-recall))."""
    n, hit = k.shape[0], k == lab
    miss = ~hit
    if weights is None and n < 2 ** 24:
        # unit weights: every partial sum is an integer below 2^24, exact in any order
        def count(v):
            return xp.bincount(v, minlength=c).astype(dt)

        return xp.stack([count(k[hit]), count(k[miss]), n - count(k) - count(lab[miss]), count(lab[miss])], axis=1)
    w = weights.reshape(-1).astype(dt) if weights is not None else xp.ones(n, dtype=dt)
    states = xp.zeros((c, _PR_COLS), dtype=dt)
    flat = states.reshape(-1)  # a view: the adds land in states
    scatter_add(xp, flat, k[hit] * _PR_COLS + _TP, w[hit])
    scatter_add(xp, flat, k[miss] * _PR_COLS + _FP, w[miss])
    scatter_add(xp, flat, lab[miss] * _PR_COLS + _FN, w[miss])
    # TN: per row, +w to every class, then -w to k and -w (-0.0 for a hit) to l, rows in order
    cls = xp.concatenate([xp.broadcast_to(xp.arange(c), (n, c)), k[:, None], lab[:, None]], axis=1)
    neg = -w
    terms = xp.concatenate([xp.broadcast_to(w[:, None], (n, c)), neg[:, None],
                            xp.where(hit, xp.asarray(-0.0, dtype=dt), neg)[:, None]], axis=1)
    scatter_add(xp, flat, (cls * _PR_COLS + _TN).reshape(-1), terms.reshape(-1))
    return states
