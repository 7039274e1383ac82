"""Losses over a few of many classes: nce (noise-contrastive estimation),
hierarchical_sigmoid and sample_logits (the op of sampled_softmax_with_cross_entropy), as
Fluid 1.8's kernels compute them.

NOTE(nce-sampling): Fluid's nce draws each row's ``num_neg_samples`` negative classes from a
``std::mt19937_64`` engine made afresh on every run: with a nonzero seed every step draws the
same classes, with seed 0 (Paddle's "random") new ones each step that no run can repeat. Here
the j-th negative of a row is a pure function of (key, the row's global example index, j), by
the counter-based ``uniform01`` of ops/random.py (NOTE(counter-rng)), keyed like dropout's masks
(``step_key``, NOTE(dropout-masks) in ops/dropout.py): the seed in the high 32 bits and, for
seed 0 only, the step (``ctx.step``, kept current as the op is ``uses_step``) in the low 32. So
seed 0 draws new negatives each step and a nonzero seed the same ones, as in Fluid, and every
run repeats. The global index is ``ctx.rank · N + i`` for row i of an N-row batch on the
executor of rank ``ctx.rank``, as a trainer gets the rank-th contiguous part of the batch
(docs/distributed.md, Equivalence), so N trainers draw what one process draws for the whole
batch.

The samplers are Fluid's: uniform over [0, C), q = 1/C; log_uniform, ``floor(e^(u·ln C)) - 1``
(so never class C - 1; Fluid takes it mod C - 1 against rounding), q(k) = ln((k+2)/(k+1))/ln C;
custom_dist, Walker's alias method over the layer's tables (CustomDistAlias,
CustomDistAliasProbs), q(k) = CustomDistProbs[k]. ``custom_neg_classes`` (Fluid's test attr)
gives every row the same negatives. The gradient reads the classes from SampleLabels and never
draws again.

NOTE(hsigmoid-code): with the default tree over C classes, class c has code ``k = c + C``; the
j-th node on its path (j = 0 at the leaf's parent) is W's row ``(k >> (j+1)) - 1``, its bit
``(k >> j) & 1``, and the path has ``floor(log2 k)`` nodes (matrix_bit_code.h's SimpleCode).
A custom tree gives each row its nodes (PathTable, ending at the first negative entry) and
bits (PathCode). PreOut has one column per node of the longest possible path
(``code_length``); columns past a row's path hold pre-activation 0, and, as in Paddle, each
still adds softplus(0) = log 2 to Out (a constant, so gradients are right). Pre-activations
are clipped to [-40, 40] before the loss; the gradient ignores the clip (Paddle's TODO).

NOTE(sample-logits): Fluid's sample_logits draws ``num_samples`` distinct classes once per run
and gives them to every row of the batch (its CPU SampleWithProb): it draws from the
log-uniform sampler over C classes, ``floor(exp(u·ln(C+1))) - 1`` taken mod C, skipping classes
already drawn, and counts the draws it took (``num_tries``). Row i's columns are its T true
labels, then the shared samples; each column's probability is the sampler's
``q(k) = ln((k+2)/(k+1)) / ln(C+1)`` made the probability of appearing in ``num_tries`` draws,
``1 - (1 - q)^num_tries`` (``q · num_samples`` when no draw was repeated). SampledLogits =
Logits at those columns, less 1e20 where a sample equals one of the row's true labels
(``remove_accidental_hits``), less ``log(probability)``, with ±inf held at ±1e20. Here draw k is
``uniform01(key, k)`` (NOTE(counter-rng) in ops/random.py), keyed as nce's negatives are
(NOTE(nce-sampling)): seed 0 draws anew each step, a fixed seed the same classes every step, as
Fluid re-seeds its engine each run. The draws are the batch's, not a row's, so every trainer of
a data-parallel job draws the classes one process draws. With ``use_customized_samples`` the
columns and probabilities are the CustomizedSamples and CustomizedProbabilities inputs (Fluid
makes them the op's outputs too; here the outputs are copies). The gradient scatters
SampledLogits@GRAD back onto the sampled columns of Logits, adding repeats.
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.ops.activation import _sigmoid
from placegroup.ops.dropout import step_key
from placegroup.ops.loss import shapes_fit
from placegroup.ops.random import uniform01
from placegroup.ops.registry import Meta, Slot, check, grad_of, register
from placegroup.values import SelectedRows, scatter_add, sorted_unique

# -- nce ------------------------------------------------------------------------------------

UNIFORM, LOG_UNIFORM, CUSTOM_DIST = 0, 1, 2
_NCE_ATTRS = {"num_total_classes": 0, "num_neg_samples": 10, "sampler": UNIFORM, "seed": 0, "is_sparse": False,
              "remote_prefetch": False, "custom_neg_classes": []}
_DIST = ("CustomDistProbs", "CustomDistAlias", "CustomDistAliasProbs")


def _nce_infer(ins, a):
    x, label, w = ins["Input"], ins["Label"], ins["Weight"]
    c, s = a["num_total_classes"], a["num_neg_samples"]
    check(len(x.shape) == 2, f"nce: Input must be [N, D], got Input{list(x.shape)}")
    rows = label.shape[0] == x.shape[0] or -1 in (label.shape[0], x.shape[0])
    check(len(label.shape) in (1, 2) and rows, f"nce: Label{list(label.shape)} must be [N, num_true] for "
                                               f"Input{list(x.shape)}")
    check(label.dtype == "int64", f"nce: Label must be int64, got {label.dtype}")
    check(w.shape[0] == c and shapes_fit(w.shape, (c, x.shape[1])),
          f"nce: Weight{list(w.shape)} must be [num_total_classes={c}, {x.shape[1]}]")
    check(c >= 2 and s >= 1, f"nce: need num_total_classes >= 2 and num_neg_samples >= 1, got {c} and {s}")
    check(a["sampler"] in (UNIFORM, LOG_UNIFORM, CUSTOM_DIST), f"nce: sampler {a['sampler']} is not 0 (uniform), "
                                                             f"1 (log_uniform) or 2 (custom_dist)")
    check(a["sampler"] != CUSTOM_DIST or all(ins.get(k) is not None for k in _DIST),
          f"nce: the custom_dist sampler needs the inputs {list(_DIST)}")
    check(not a["custom_neg_classes"] or len(a["custom_neg_classes"]) == s,
          f"nce: custom_neg_classes {a['custom_neg_classes']} must hold num_neg_samples={s} classes")
    if ins.get("Bias") is not None:
        check(ins["Bias"].shape[0] == c, f"nce: Bias{list(ins['Bias'].shape)} must have {c} rows")
    k = s + (label.shape[1] if len(label.shape) == 2 else 1)
    return {"Cost": Meta((x.shape[0], 1), x.dtype), "SampleLogits": Meta((x.shape[0], k), x.dtype),
            "SampleLabels": Meta((x.shape[0], k), "int64")}


def draw_negatives(xp, a, dist, rows: int, row0: int, step: int):
    """The negative classes of global rows ``row0 .. row0 + rows - 1`` at ``step``, int64
    [rows, S] (NOTE(nce-sampling)); ``dist``: the custom_dist tables (alias, alias_probs) or None."""
    c, s = a["num_total_classes"], a["num_neg_samples"]
    if a["custom_neg_classes"]:
        return xp.tile(xp.asarray(a["custom_neg_classes"], dtype=xp.int64), (rows, 1))
    key = step_key(a["seed"], step, fix_seed=a["seed"] != 0)
    ctr = (xp.arange(row0, row0 + rows, dtype=np.uint64)[:, None] * np.uint64(s)
           + xp.arange(s, dtype=np.uint64)[None, :])
    if a["sampler"] == UNIFORM:
        return xp.minimum(xp.floor(uniform01(xp, key, ctr) * c), c - 1).astype(xp.int64)
    if a["sampler"] == LOG_UNIFORM:
        v = xp.floor(xp.exp(uniform01(xp, key, ctr) * math.log(c))).astype(xp.int64) - 1
        return v % (c - 1)
    alias, alias_probs = dist
    ctr = ctr * np.uint64(2)  # two draws per negative: a column, then a coin
    col = xp.minimum(xp.floor(uniform01(xp, key, ctr) * c), c - 1).astype(xp.int64)
    coin = uniform01(xp, key, ctr + np.uint64(1))
    other = alias.astype(xp.int64)[col]
    return xp.where((coin > alias_probs[col]) & (other >= 0), other, col)


def _probability(xp, a, ins, labels):
    """Fluid's sampler probability of each class in ``labels``, in float32 as Fluid has it."""
    c = a["num_total_classes"]
    if a["sampler"] == UNIFORM:
        return xp.full(labels.shape, 1.0 / c, dtype=np.float32)
    if a["sampler"] == LOG_UNIFORM:
        k = labels.astype(np.float64)
        return (xp.log((k + 2.0) / (k + 1.0)) / math.log(c)).astype(np.float32)
    return ins["CustomDistProbs"].reshape(-1).astype(np.float32)[labels]


def _check_classes(op: str, what: str, v, c: int) -> None:
    if v.size and (int(v.min()) < 0 or int(v.max()) >= c):
        bad = int(v[(v < 0) | (v >= c)].ravel()[0])
        raise ValueError(f"{op}: {what} {bad} is out of range for {c} classes (valid are 0..{c - 1})")


def _row_weight(ins, n: int):
    sw = ins.get("SampleWeight")
    return 1.0 if sw is None else sw.reshape(n, 1)


@register("nce", ins=("Input", Slot("Label", no_grad=True), "Weight", Slot("Bias", dispensable=True),
                      Slot("SampleWeight", dispensable=True, no_grad=True))
          + tuple(Slot(k, dispensable=True, no_grad=True) for k in _DIST),
          outs=("Cost", "SampleLogits", "SampleLabels"), attrs=_NCE_ATTRS, infer=_nce_infer,
          grad=grad_of(("Input", "Weight", "Bias"), out="Cost", outs=("SampleLogits", "SampleLabels")),
          uses_step=True)
def nce(xp, ins, a, ctx):
    """Noise-contrastive estimation: each row's true classes (Label [N, T]) and S negatives
    drawn from ``sampler`` (NOTE(nce-sampling)); with o = sigmoid(Input·W[k] + Bias[k]) and
    b = S·q(k), Cost[i] = SampleWeight[i]·(Σ_true -log(o/(o+b)) + Σ_neg -log(b/(o+b))).
    SampleLabels [N, T+S] holds the classes (true ones first) and SampleLogits their o."""
    x, w = ins["Input"], ins["Weight"]
    n, c = x.shape[0], a["num_total_classes"]
    labels = ins["Label"].reshape(n, -1).astype(xp.int64, copy=False)
    _check_classes("nce", "label", labels, c)
    dist = None
    if a["sampler"] == CUSTOM_DIST:
        dist = (ins["CustomDistAlias"].reshape(-1), ins["CustomDistAliasProbs"].reshape(-1))
    sl = xp.concatenate([labels, draw_negatives(xp, a, dist, n, ctx.rank * n, ctx.step)], axis=1)
    logits = xp.einsum("nd,nkd->nk", x, w[sl])
    if ins.get("Bias") is not None:
        logits = logits + ins["Bias"].reshape(-1)[sl]
    o = _sigmoid(xp, logits)
    b = (_probability(xp, a, ins, sl) * np.float32(a["num_neg_samples"])).astype(x.dtype)
    true = xp.arange(sl.shape[1]) < labels.shape[1]
    cost = xp.where(true, -xp.log(o / (o + b)), -xp.log(b / (o + b)))
    return {"Cost": _row_weight(ins, n) * cost.sum(axis=1, keepdims=True), "SampleLogits": o, "SampleLabels": sl}


@register("nce_grad", ins=("Input", "Label", "Weight", Slot("Bias", dispensable=True),
                           Slot("SampleWeight", dispensable=True)) + tuple(Slot(k, dispensable=True) for k in _DIST)
          + ("SampleLogits", "SampleLabels", "Cost@GRAD"),
          outs=(Slot("Input@GRAD", dispensable=True), Slot("Weight@GRAD", dispensable=True, sparse_if="is_sparse"),
                Slot("Bias@GRAD", dispensable=True)), attrs=_NCE_ATTRS, role="backward")
def nce_grad(xp, ins, a, ctx):
    """d Cost / d logit: SampleWeight·(b/(o+b))·(o-1) for a true class, ·o(1-o)/(o+b) for a
    negative; Weight@GRAD is a SelectedRows over the sorted distinct sampled classes with
    ``is_sparse`` (as Fluid's), else dense."""
    x, w, sl, o = ins["Input"], ins["Weight"], ins["SampleLabels"], ins["SampleLogits"]
    n = x.shape[0]
    b = (_probability(xp, a, ins, sl) * np.float32(a["num_neg_samples"])).astype(x.dtype)
    true = xp.arange(sl.shape[1]) < sl.shape[1] - a["num_neg_samples"]
    g = xp.where(true, (b / (o + b)) * (o - 1), o * (1 - o) / (o + b))
    g = g * (_row_weight(ins, n) * ins["Cost@GRAD"].reshape(n, 1))
    flat = sl.reshape(-1)
    res = {}
    if "Input@GRAD" in ctx.outputs:
        res["Input@GRAD"] = xp.einsum("nk,nkd->nd", g, w[sl])
    if "Bias@GRAD" in ctx.outputs:
        db = xp.zeros((a["num_total_classes"], 1), dtype=x.dtype)
        scatter_add(xp, db, flat, g.reshape(-1, 1))
        res["Bias@GRAD"] = db.reshape(ins["Bias"].shape)
    if "Weight@GRAD" in ctx.outputs:
        parts = (g[:, :, None] * x[:, None, :]).reshape(-1, x.shape[1])
        if a["is_sparse"]:
            rows = sorted_unique(xp, flat)
            vals = xp.zeros((rows.shape[0], x.shape[1]), dtype=x.dtype)
            scatter_add(xp, vals, xp.searchsorted(rows, flat), parts)
            res["Weight@GRAD"] = SelectedRows(rows, vals, w.shape[0])
        else:
            dw = xp.zeros(w.shape, dtype=x.dtype)
            scatter_add(xp, dw, flat, parts)
            res["Weight@GRAD"] = dw
    return res


# -- hierarchical_sigmoid -------------------------------------------------------------------

_HS_ATTRS = {"num_classes": 2, "is_sparse": False, "remote_prefetch": False}
_CLIP = 40.0  # Paddle clips the pre-activations to [-40, 40] (NOTE(hsigmoid-code))


def _code_length(num_classes: int) -> int:
    """The nodes on the longest path of the default tree: the bit length of C - 1."""
    return max(int(num_classes) - 1, 0).bit_length()


def _hs_infer(ins, a):
    x, w, label, table = ins["X"], ins["W"], ins["Label"], ins.get("PathTable")
    op, c = "hierarchical_sigmoid", a["num_classes"]
    check(len(x.shape) == 2 and len(w.shape) == 2, f"{op}: X and W must be 2-D, got X{list(x.shape)}, W{list(w.shape)}")
    check(w.shape[1] in (x.shape[1], -1) or x.shape[1] == -1,
          f"{op}: W{list(w.shape)} must have X's {x.shape[1]} columns")
    check(label.dtype == "int64" and label.shape[-1] == 1 and len(label.shape) == 2,
          f"{op}: Label must be int64 [N, 1], got {label.dtype}{list(label.shape)}")
    check((table is None) == (ins.get("PathCode") is None), f"{op}: give both PathTable and PathCode, or neither")
    if table is None:
        check(c >= 2, f"{op}: num_classes must be >= 2 with the default tree, got {c}")
        check(w.shape[0] == c - 1,
              f"{op}: W{list(w.shape)} must have num_classes - 1 = {c - 1} rows (one per inner node)")
        length = _code_length(c)
    else:
        code = ins["PathCode"]
        check(len(table.shape) == 2 and tuple(table.shape) == tuple(code.shape),
              f"{op}: PathTable{list(table.shape)} and PathCode{list(code.shape)} must both be [N, L]")
        length = table.shape[1]
    if ins.get("Bias") is not None:
        check(ins["Bias"].shape[0] == w.shape[0], f"{op}: Bias{list(ins['Bias'].shape)} needs W's {w.shape[0]} rows")
    return {"Out": Meta((x.shape[0], 1), x.dtype), "PreOut": Meta((x.shape[0], length), x.dtype), "W_Out": w}


def _paths(xp, ins, a):
    """(node index per row and step [N, L] (0 off the path), on-path mask, bit mask)."""
    label = ins["Label"].reshape(-1).astype(xp.int64, copy=False)
    table = ins.get("PathTable")
    if table is not None:
        length = (table >= 0).cumprod(axis=1).sum(axis=1, keepdims=True)  # up to the first negative
        valid = xp.arange(table.shape[1]) < length
        idx, bits = table, ins["PathCode"] != 0
    else:
        c = a["num_classes"]
        _check_classes("hierarchical_sigmoid", "label", label, c)
        code = (label + c)[:, None]
        j = xp.arange(_code_length(c), dtype=xp.int64)
        idx = (code >> (j + 1)) - 1
        valid, bits = idx >= 0, ((code >> j) & 1) == 1
    idx = xp.where(valid, idx, 0)
    _check_classes("hierarchical_sigmoid", "PathTable node", idx, ins["W"].shape[0])
    return idx, valid, valid & bits


@register("hierarchical_sigmoid", ins=("X", "W", Slot("Label", no_grad=True),
                                       Slot("PathTable", dispensable=True, no_grad=True),
                                       Slot("PathCode", dispensable=True, no_grad=True),
                                       Slot("Bias", dispensable=True)),
          outs=("Out", "PreOut", Slot("W_Out", dispensable=True)), attrs=_HS_ATTRS, infer=_hs_infer,
          grad=grad_of(("X", "W", "Bias"), outs=("PreOut",)))
def hierarchical_sigmoid(xp, ins, a, ctx):
    """Out[i] = Σ_path softplus(p_j) - Σ_{path, bit 1} p_j with p_j = clip(X[i]·W[node_j] +
    Bias[node_j], ±40) (NOTE(hsigmoid-code)): the cross entropy of the binary decisions on
    the label's path. PreOut holds softplus(p) per node. W_Out, Fluid's alias of W for remote
    prefetch, is W itself when asked for."""
    x, w = ins["X"], ins["W"]
    idx, valid, bit = _paths(xp, ins, a)
    pre = xp.einsum("nd,nld->nl", x, w[idx])
    if ins.get("Bias") is not None:
        pre = pre + ins["Bias"].reshape(-1)[idx]
    pre = xp.clip(xp.where(valid, pre, xp.zeros_like(pre)), -_CLIP, _CLIP)
    soft = xp.log(1 + xp.exp(pre))
    out = soft.sum(axis=1, keepdims=True) - xp.where(bit, pre, xp.zeros_like(pre)).sum(axis=1, keepdims=True)
    res = {"Out": out, "PreOut": soft}
    if "W_Out" in ctx.outputs:
        res["W_Out"] = w
    return res


@register("hierarchical_sigmoid_grad", ins=("X", "W", "Label", Slot("PathTable", dispensable=True),
                                            Slot("PathCode", dispensable=True), Slot("Bias", dispensable=True),
                                            "PreOut", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("W@GRAD", dispensable=True, sparse_if="is_sparse"),
                Slot("Bias@GRAD", dispensable=True)), attrs=_HS_ATTRS, role="backward")
def hierarchical_sigmoid_grad(xp, ins, a, ctx):
    """d Out / d p_j = sigmoid(p_j) - bit_j on the path (sigmoid from PreOut as 1 - e^-PreOut,
    Paddle's way). W@GRAD is a SelectedRows over the distinct non-negative PathTable entries
    with ``is_sparse`` (a custom tree only, as in Fluid), else dense."""
    x, w = ins["X"], ins["W"]
    idx, valid, bit = _paths(xp, ins, a)
    g = (1 - 1 / xp.exp(ins["PreOut"])) - bit
    g = xp.where(valid, g * ins["Out@GRAD"].reshape(-1, 1), xp.zeros_like(g))
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = xp.einsum("nl,nld->nd", g, w[idx])
    flat, gflat = idx[valid], g[valid]
    if "Bias@GRAD" in ctx.outputs:
        db = xp.zeros((w.shape[0], 1), dtype=x.dtype)
        scatter_add(xp, db, flat, gflat.reshape(-1, 1))
        res["Bias@GRAD"] = db.reshape(ins["Bias"].shape)
    if "W@GRAD" in ctx.outputs:
        rows_of = xp.broadcast_to(xp.arange(x.shape[0])[:, None], idx.shape)[valid]
        parts = gflat[:, None] * x[rows_of]
        if a["is_sparse"]:
            table = ins.get("PathTable")
            if table is None:
                raise ValueError("hierarchical_sigmoid_grad: is_sparse needs a custom tree (PathTable); the "
                                 "default tree's W@GRAD is dense, as in Fluid")
            rows = sorted_unique(xp, table[table >= 0].reshape(-1))
            vals = xp.zeros((rows.shape[0], w.shape[1]), dtype=x.dtype)
            scatter_add(xp, vals, xp.searchsorted(rows, flat), parts)
            res["W@GRAD"] = SelectedRows(rows, vals, w.shape[0])
        else:
            dw = xp.zeros(w.shape, dtype=x.dtype)
            scatter_add(xp, dw, flat, parts)
            res["W@GRAD"] = dw
    return res


# -- sample_logits (NOTE(sample-logits)) ----------------------------------------------------

_SL_ATTRS = {"use_customized_samples": False, "uniq": True, "remove_accidental_hits": True, "num_samples": 1,
             "seed": 0}
_HIT = 1e20  # what an accidental hit loses, and where ±inf is held (Fluid's TolerableValue)


def _sl_infer(ins, a):
    logits, labels = ins["Logits"], ins["Labels"]
    op, s = "sample_logits", a["num_samples"]
    check(len(logits.shape) == 2, f"{op}: Logits must be [N, C], got Logits{list(logits.shape)}")
    check(len(labels.shape) == 2 and labels.dtype == "int64" and shapes_fit(labels.shape[:1], logits.shape[:1]),
          f"{op}: Labels must be int64 [N, num_true] for Logits{list(logits.shape)}, got {labels.dtype}"
          f"{list(labels.shape)}")
    c = logits.shape[1]
    check(s >= 1 and (c == -1 or s <= c), f"{op}: num_samples must be in 1..C = 1..{c} (distinct classes), got {s}")
    n, k = logits.shape[0], labels.shape[1] + s
    if a["use_customized_samples"]:
        cs, cp = ins.get("CustomizedSamples"), ins.get("CustomizedProbabilities")
        check(cs is not None and cp is not None,
              f"{op}: use_customized_samples needs the inputs CustomizedSamples and CustomizedProbabilities")
        check(cs.dtype == "int64" and shapes_fit(cs.shape, (n, k)) and shapes_fit(cp.shape, (n, k)),
              f"{op}: CustomizedSamples (int64) and CustomizedProbabilities must be [N, num_true + num_samples] = "
              f"[{n}, {k}], got {cs.dtype}{list(cs.shape)} and {list(cp.shape)}")
    pair = Meta((n, k), logits.dtype)
    return {"Samples": Meta((n, k), "int64"), "Probabilities": pair, "SampledLogits": pair,
            "SampledLabels": Meta(tuple(labels.shape), "int64"),
            "LogitsDim": Meta((0,) + tuple(logits.shape), logits.dtype),
            "LabelsDim": Meta((0,) + tuple(labels.shape), "int64")}


def draw_unique(xp, c: int, s: int, key: int):
    """The first ``s`` distinct classes of the log-uniform draws ``0, 1, ...`` under ``key``, in
    the order drawn, and the number of draws that took (NOTE(sample-logits))."""
    log_range = math.log(c + 1)
    drawn, total, chunk = xp.zeros((0,), dtype=xp.int64), 0, max(4 * s, 64)
    while True:
        u = uniform01(xp, key, xp.arange(total, total + chunk, dtype=np.uint64))
        drawn = xp.concatenate([drawn, (xp.floor(xp.exp(u * log_range)).astype(xp.int64) - 1) % c])
        total += chunk
        _, first = xp.unique(drawn, return_index=True)
        if first.shape[0] >= s:
            first = xp.sort(first)[:s]
            return drawn[first], int(first[-1]) + 1
        chunk *= 2


def _log_uniform_q(xp, c: int, k):
    """The sampler's probability of class ``k``, rounded to float32 as Fluid's sampler returns it."""
    k = k.astype(np.float64)
    return (xp.log((k + 2.0) / (k + 1.0)) / math.log(c + 1)).astype(np.float32).astype(np.float64)


@register("sample_logits", ins=("Logits", Slot("Labels", no_grad=True), Slot("CustomizedSamples", dispensable=True,
                                                                            no_grad=True),
                                 Slot("CustomizedProbabilities", dispensable=True, no_grad=True)),
          outs=(Slot("Samples", no_grad=True), Slot("Probabilities", no_grad=True), "SampledLogits",
                Slot("SampledLabels", no_grad=True), Slot("LogitsDim", dispensable=True, no_grad=True),
                Slot("LabelsDim", dispensable=True, no_grad=True)),
          attrs=_SL_ATTRS, infer=_sl_infer, uses_step=True,
          grad=grad_of(("Logits",), uses=("Logits",), out="SampledLogits", outs=("Samples",)))
def sample_logits(xp, ins, a, ctx):
    """The logits of each row's true classes and of ``num_samples`` shared sampled classes, less
    log Q (NOTE(sample-logits)).

    Raises:
        ValueError: a label outside [0, C), or customized samples of another shape.
    """
    logits, labels = ins["Logits"], ins["Labels"].astype(xp.int64, copy=False)
    (n, c), t, s = logits.shape, labels.shape[1], a["num_samples"]
    _check_classes("sample_logits", "label", labels, c)
    if a["use_customized_samples"]:
        samples = ins["CustomizedSamples"].astype(xp.int64)
        probs = ins["CustomizedProbabilities"].astype(logits.dtype)
        if samples.shape != (n, t + s) or probs.shape != (n, t + s):
            raise ValueError(f"sample_logits: CustomizedSamples{list(samples.shape)} and CustomizedProbabilities"
                             f"{list(probs.shape)} must be [N, num_true + num_samples] = [{n}, {t + s}]")
        _check_classes("sample_logits", "customized sample", samples, c)
    else:
        if s > c:
            raise ValueError(f"sample_logits: num_samples {s} exceeds the {c} classes there are to draw")
        drawn, tries = draw_unique(xp, c, s, step_key(a["seed"], ctx.step, fix_seed=a["seed"] != 0))
        samples = xp.concatenate([labels, xp.broadcast_to(drawn, (n, s))], axis=1)
        q = _log_uniform_q(xp, c, samples)
        probs = (q * s if tries == s else -xp.expm1(tries * xp.log1p(-q))).astype(logits.dtype)
    picked = xp.take_along_axis(logits, samples, axis=1)
    if a["remove_accidental_hits"] and t:
        hit = (samples[:, t:, None] == samples[:, None, :t]).any(axis=2)
        picked = xp.concatenate([picked[:, :t], picked[:, t:] - xp.where(hit, _HIT, 0.0).astype(logits.dtype)], 1)
    with np.errstate(divide="ignore"):
        out = xp.clip(picked - xp.clip(xp.log(probs), -_HIT, _HIT), -_HIT, _HIT).astype(logits.dtype)
    return {"Samples": samples, "Probabilities": probs, "SampledLogits": out,
            "SampledLabels": xp.broadcast_to(xp.arange(t, dtype=xp.int64), (n, t)).copy(),
            "LogitsDim": xp.zeros((0, n, c), dtype=logits.dtype), "LabelsDim": xp.zeros((0, n, t), dtype=xp.int64)}


@register("sample_logits_grad", ins=("Logits", "Samples", "SampledLogits@GRAD"), outs=("Logits@GRAD",),
          attrs=_SL_ATTRS, role="backward")
def sample_logits_grad(xp, ins, a, ctx):
    """Logits@GRAD = zeros with SampledLogits@GRAD added at each row's sampled columns."""
    logits, samples, g = ins["Logits"], ins["Samples"], ins["SampledLogits@GRAD"]
    n, c = logits.shape
    flat = xp.zeros((n * c,), dtype=g.dtype)
    scatter_add(xp, flat, (samples + (xp.arange(n, dtype=xp.int64) * c)[:, None]).reshape(-1), g.reshape(-1))
    return {"Logits@GRAD": flat.reshape(n, c)}
