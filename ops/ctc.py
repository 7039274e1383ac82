"""CTC, as Fluid 1.8: ``warpctc`` (the CTC loss, whose gradient the forward op makes, as
Baidu's warp-ctc does; ``warpctc_grad`` only scales it) and ``ctc_align`` (merge repeated
tokens and drop blanks: ``ctc_greedy_decoder`` is ``top_k`` then this).

NOTE(ctc-forms): both ops take sequences in two forms, as Fluid 1.8.5's kernels. The LoD form:
Logits [N, C] (C = num_classes + 1, the blank included) with the rows of sequence b between
the offsets of its top LoD level, Label int32 [M, 1] with one label sequence per logits
sequence; ``ctc_align``'s Input [N, 1]. The padded form, chosen by the lengths: Logits
time-major [T, B, C] with LogitsLength and LabelLength (int64 [B]) and Label [B, Lmax]
(row b's first LabelLength[b] ids; Fluid 1.8.5 unpads it, measured); ``ctc_align``'s Input
[B, T] with InputLength [B, 1], its Output [B, T] (padding_value after each row's tokens) and
OutputLength [B, 1]. WarpCTCGrad is time-major [Tmax, B, C] in both forms, zero past each
sequence's end, as Fluid keeps it.

NOTE(ctc-alpha-beta): the loss is -log p(label | logits) over the extended label
``blank l1 blank l2 ... lL blank`` (S = 2L + 1 states; all sequences padded to the longest, the
states past a sequence's S never reach its end). With ``logp`` the log-softmax of each step
(over C, as warp-ctc normalises the logits itself) and ``e[t, s] = logp[t, ext[s]]``, in log
space for the whole batch at once, one Python step per time step:
``alpha[t, s] = logsumexp(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2] if skip[s]) + e[t, s]``
(``skip[s]``: ext[s] is a label other than ext[s-2]), alpha[0] holding only states 0 and 1;
``beta[t, s]`` is the same backwards without the emission at t, 0 at states S-1 and S-2 of the
sequence's last step. log p = logsumexp of alpha at the last step over states S-1, S-2, and the
gradient w.r.t. the logits is ``softmax - sum over the states s with ext[s] = k of
exp(alpha + beta - log p)`` (the occupancy, a batched matmul with the states' one-hot). All of
it runs in float64 and is cast to the logits' dtype at the end (warp-ctc runs in float32: the
losses agree to ~1e-7 relative).

NOTE(ctc-1.8): what Fluid 1.8.5 does, measured against its own binary, and where placegroup
differs. ``norm_by_times`` divides the gradient of sequence b by its length T_b (in the LoD and
the padded forms), never the loss. Logits@GRAD = WarpCTCGrad * Loss@GRAD[b] per sequence. An
empty label gives -log prod of the blank probabilities. A label needs L + (its adjacent
repeats) steps; warp-ctc silently returns a loss of 0 and a zero gradient for a shorter logits
sequence: here it is a ValueError naming the sequence. A label id outside [0, C) is a
ValueError too (warp-ctc does not check it). ``ctc_align`` keeps a
token unless it is the blank or (merge_repeated) equals the token before it, blanks included;
when every LoD sequence decodes to nothing, Fluid's Output is one row ``[[-1]]`` whose LoD has
all sequences empty (a LoD that does not end at the rows): placegroup returns the same.
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, Slot, check, grad_of, register
from placegroup.values import LoDTensor, host_array

_NEG = -np.inf



def top_offsets(op: str, slot: str, x) -> np.ndarray:
    """The rows where the top-level sequences of LoDTensor ``x`` start and end (Fluid's
    ``ToAbsOffset(lod)[0]``); ValueError naming ``op`` and ``slot`` when it has no LoD."""
    if not isinstance(x, LoDTensor) or not x.offsets:
        raise ValueError(f"{op}: {slot} has no LoD: feed a LoDTensor (a var of lod_level 1), or use the padded "
                         f"form with its lengths (NOTE(ctc-forms) in ops/ctc.py)")
    o = np.asarray(x.offsets[0], dtype=np.int64)
    for lower in x.offsets[1:]:
        o = np.asarray(lower, dtype=np.int64)[o]
    return o


def _lengths(op: str, slot: str, v, n: int, most: int) -> np.ndarray:
    out = host_array(v).reshape(-1).astype(np.int64)
    if out.shape[0] != n or (out < 0).any() or (out > most).any():
        raise ValueError(f"{op}: {slot} {out.tolist()[:8]} must hold {n} lengths in [0, {most}], one per sequence")
    return out


# -- warpctc --------------------------------------------------------------------------------


def _ctc_infer(ins, a):
    x, y, xl, yl = ins["Logits"], ins["Label"], ins.get("LogitsLength"), ins.get("LabelLength")
    check((xl is None) == (yl is None), "warpctc: give LogitsLength and LabelLength together (the padded form) "
                                        "or neither (the LoD form)")
    check(x.dtype in ("float32", "float64"), f"warpctc: Logits must be float32 or float64, got {x.dtype}")
    check(y.dtype in ("int32", "int64"), f"warpctc: Label must be int32 (or int64), got {y.dtype}")
    if xl is None:
        check(len(x.shape) == 2, f"warpctc: Logits must be [N, num_classes + 1] with a LoD, got Logits{list(x.shape)}"
                                 f" (a padded [T, B, C] needs LogitsLength and LabelLength)")
        check(len(y.shape) == 2 and y.shape[1] in (1, -1), f"warpctc: Label must be [M, 1] with a LoD, got "
                                                           f"Label{list(y.shape)}")
        batch, grad = -1, (-1, -1, x.shape[1])
    else:
        check(len(x.shape) == 3, f"warpctc: with LogitsLength, Logits must be [max_logit_length, batch, "
                                 f"num_classes + 1], got Logits{list(x.shape)}")
        check(len(y.shape) == 2, f"warpctc: with LabelLength, Label must be [batch, max_label_length], got "
                                 f"Label{list(y.shape)}")
        for slot, m in (("LogitsLength", xl), ("LabelLength", yl)):
            check(m.dtype == "int64", f"warpctc: {slot} must be int64, got {m.dtype}")
        batch, grad = x.shape[1], tuple(x.shape)
    width = x.shape[-1]
    check(a["blank"] >= 0 and (width == -1 or a["blank"] < width),
          f"warpctc: blank={a['blank']} must be in [0, {width}) (Logits' last dim, num_classes + 1)")
    return {"WarpCTCGrad": Meta(grad, x.dtype), "Loss": Meta((batch, 1), x.dtype)}


def _batch(xp, ins):
    """Logits time-major [T, B, C] (rows past a sequence's end are junk), the labels on the
    host [B, Lmax] (junk past a label's end), and the lengths T_b, L_b (host)."""
    x, y = ins["Logits"], ins["Label"]
    if ins.get("LogitsLength") is None:  # the LoD form
        xo, yo = top_offsets("warpctc", "Logits", x), top_offsets("warpctc", "Label", y)
        if xo.shape[0] != yo.shape[0]:
            raise ValueError(f"warpctc: Logits has {xo.shape[0] - 1} sequences but Label has {yo.shape[0] - 1}: "
                             f"each logits sequence needs its label sequence")
        ids = host_array(y.data)
        if ids.size != ids.shape[0]:
            raise ValueError(f"warpctc: Label must be [M, 1] (one id per row), got Label{list(ids.shape)}")
        t_len, l_len = np.diff(xo), np.diff(yo)
        data = x.data.reshape(x.data.shape[0], -1)
        steps = np.arange(int(t_len.max(initial=0)))[:, None]
        rows = np.minimum(xo[:-1][None, :] + steps, max(data.shape[0] - 1, 0))  # [T, B]
        logits = data[xp.asarray(rows)] if data.shape[0] else xp.zeros(rows.shape + data.shape[1:], data.dtype)
        at = np.minimum(yo[:-1][:, None] + np.arange(int(l_len.max(initial=0)))[None, :], max(ids.size - 1, 0))
        labels = ids.reshape(-1)[at] if ids.size else np.zeros(at.shape, np.int64)
    else:
        logits, labels = x, host_array(y)
        if labels.shape[0] != x.shape[1]:
            raise ValueError(f"warpctc: Label{list(labels.shape)} must have one row per sequence of "
                             f"Logits{list(x.shape)} (dim 1)")
        t_len = _lengths("warpctc", "LogitsLength", ins["LogitsLength"], x.shape[1], x.shape[0])
        l_len = _lengths("warpctc", "LabelLength", ins["LabelLength"], labels.shape[0], labels.shape[1])
    return logits, labels.astype(np.int64), t_len, l_len


def _check_labels(labels, t_len, l_len, width: int, blank: int) -> np.ndarray:
    """The labels with the blank past each one's end; ValueError on an id outside [0, width) or
    a label its logits sequence is too short for (NOTE(ctc-1.8))."""
    inside = np.arange(labels.shape[1])[None, :] < l_len[:, None]
    bad = inside & ((labels < 0) | (labels >= width))
    if bad.any():
        b, j = np.argwhere(bad)[0]
        raise ValueError(f"warpctc: Label id {int(labels[b, j])} (sequence {b}, position {j}) is not a class in "
                         f"[0, {width}): Logits has {width} columns, num_classes + 1 with the blank")
    repeats = (inside[:, 1:] & (labels[:, 1:] == labels[:, :-1])).sum(axis=1)
    need = l_len + repeats
    short = np.flatnonzero(need > t_len)
    if short.size:
        b = int(short[0])
        raise ValueError(f"warpctc: sequence {b}'s label has {int(l_len[b])} ids with {int(repeats[b])} adjacent "
                         f"repeats, so it needs at least {int(need[b])} time steps, but its logits sequence has "
                         f"{int(t_len[b])} (Fluid's warp-ctc silently gives such a sequence a loss of 0)")
    return np.where(inside, labels, blank)


def ctc_loss_and_grad(xp, logits, labels, t_len, l_len, blank: int):
    """The CTC loss of each sequence [B] and its gradient w.r.t. ``logits`` [T, B, C] (zero
    past each T_b), both float64 (NOTE(ctc-alpha-beta)). ``labels`` [B, Lmax] (host) holds
    valid ids, the blank past each L_b, and every label fits its sequence (``_check_labels``)."""
    T, B, C = logits.shape
    if T == 0:  # no steps anywhere, so (checked) no labels: p = 1
        return xp.zeros((B,)), xp.zeros((0, B, C))
    S = 2 * labels.shape[1] + 1
    ext = np.full((B, S), blank, dtype=np.int64)
    ext[:, 1::2] = labels
    skip = np.zeros((B, S), dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    s_len, last = 2 * l_len + 1, t_len - 1
    x = logits.astype(np.float64)
    z = x - x.max(axis=2, keepdims=True)
    logp = z - xp.log(xp.exp(z).sum(axis=2, keepdims=True))
    emit = logp[:, xp.asarray(np.arange(B)[:, None]), xp.asarray(ext)]  # [T, B, S]
    skip_to, skip_from = xp.asarray(skip), xp.asarray(np.pad(skip[:, 2:], ((0, 0), (0, 2))))
    pad1, pad2 = xp.full((B, 1), _NEG), xp.full((B, 2), _NEG)

    alpha = xp.full((T, B, S), _NEG)
    alpha[0, :, :2] = emit[0, :, :2]
    for t in range(1, T):
        p = alpha[t - 1]
        two = xp.where(skip_to, xp.concatenate([pad2, p[:, :-2]], axis=1), _NEG)
        alpha[t] = xp.logaddexp(xp.logaddexp(p, xp.concatenate([pad1, p[:, :-1]], axis=1)), two) + emit[t]

    rows = np.arange(B)
    end = alpha[xp.asarray(np.maximum(last, 0)), xp.asarray(rows)]  # [B, S]
    ll = xp.logaddexp(end[xp.asarray(rows), xp.asarray(s_len - 1)],
                      xp.where(xp.asarray(s_len > 1), end[xp.asarray(rows), xp.asarray(np.maximum(s_len - 2, 0))], _NEG))
    ll = xp.where(xp.asarray(t_len == 0), 0.0, ll)  # no steps and (checked) no label: p = 1

    finals = np.full((B, S), _NEG)
    finals[rows, s_len - 1] = 0.0
    finals[rows[s_len > 1], (s_len - 2)[s_len > 1]] = 0.0
    finals = xp.asarray(finals)
    beta = xp.full((T, B, S), _NEG)
    for t in range(T - 1, -1, -1):
        here = xp.asarray((t == last)[:, None])
        if t == T - 1:
            beta[t] = xp.where(here, finals, _NEG)
            continue
        n = beta[t + 1] + emit[t + 1]
        two = xp.where(skip_from, xp.concatenate([n[:, 2:], pad2], axis=1), _NEG)
        rec = xp.logaddexp(xp.logaddexp(n, xp.concatenate([n[:, 1:], pad1], axis=1)), two)
        beta[t] = xp.where(here, finals, xp.where(xp.asarray((t < last)[:, None]), rec, _NEG))

    occupancy = xp.exp(alpha + beta - ll[None, :, None])  # [T, B, S], 0 past each sequence's end
    onehot = xp.asarray((ext[:, :, None] == np.arange(C)[None, None, :]).astype(np.float64))  # [B, S, C]
    occ = xp.matmul(occupancy.transpose(1, 0, 2), onehot).transpose(1, 0, 2)  # [T, B, C]
    valid = xp.asarray((np.arange(T)[:, None] < t_len[None, :])[:, :, None])
    return 0.0 - ll, xp.where(valid, xp.exp(logp) - occ, 0.0)  # 0.0 - : no -0.0 for an empty sequence


@register("warpctc", ins=("Logits", Slot("Label", no_grad=True), Slot("LogitsLength", dispensable=True, no_grad=True),
                          Slot("LabelLength", dispensable=True, no_grad=True)),
          outs=(Slot("WarpCTCGrad", no_grad=True), "Loss"), attrs={"blank": 0, "norm_by_times": False}, infer=_ctc_infer,
          grad=grad_of(("Logits",), uses=("Logits", "LogitsLength"), outs=("WarpCTCGrad",), out="Loss"),
          lod="drop", wants_lod=("Logits", "Label"))
def warpctc(xp, ins, a, ctx):
    """Loss [B, 1] = the CTC loss of each sequence (softmax inside, NOTE(ctc-alpha-beta));
    WarpCTCGrad [Tmax, B, C] = its gradient w.r.t. Logits, time-major (NOTE(ctc-forms))."""
    logits, labels, t_len, l_len = _batch(xp, ins)
    labels = _check_labels(labels, t_len, l_len, int(logits.shape[2]), int(a["blank"]))
    loss, grad = ctc_loss_and_grad(xp, logits, labels, t_len, l_len, int(a["blank"]))
    dtype = logits.dtype
    return {"WarpCTCGrad": grad.astype(dtype), "Loss": loss.reshape(-1, 1).astype(dtype)}


@register("warpctc_grad", ins=("WarpCTCGrad", "Logits", Slot("LogitsLength", dispensable=True), "Loss@GRAD"),
          outs=("Logits@GRAD",), attrs={"blank": 0, "norm_by_times": False}, role="backward", wants_lod=("Logits",))
def warpctc_grad(xp, ins, a, ctx):
    """Logits@GRAD = WarpCTCGrad of sequence b (divided by T_b with norm_by_times) times
    Loss@GRAD[b], in Logits' form (NOTE(ctc-1.8))."""
    g, x = ins["WarpCTCGrad"], ins["Logits"]
    dloss = ins["Loss@GRAD"].reshape(1, -1, 1).astype(g.dtype)
    if ins.get("LogitsLength") is not None:
        t_len = _lengths("warpctc_grad", "LogitsLength", ins["LogitsLength"], g.shape[1], g.shape[0])
    else:
        xo = top_offsets("warpctc_grad", "Logits", x)
        t_len = np.diff(xo)
    if a["norm_by_times"]:
        g = g * xp.asarray((1.0 / np.maximum(t_len, 1)).astype(g.dtype)[None, :, None])
    g = g * dloss
    if ins.get("LogitsLength") is not None:
        return {"Logits@GRAD": g}
    seq = np.repeat(np.arange(t_len.shape[0]), t_len)
    step = np.arange(seq.shape[0]) - xo[:-1][seq]
    return {"Logits@GRAD": g[xp.asarray(step), xp.asarray(seq)].reshape(x.data.shape)}


# -- ctc_align ------------------------------------------------------------------------------


def _align_infer(ins, a):
    x, n = ins["Input"], ins.get("InputLength")
    check(x.dtype in ("int32", "int64"), f"ctc_align: Input must hold int32 or int64 token ids, got {x.dtype}")
    if n is None:
        check(len(x.shape) == 2 and x.shape[1] in (1, -1), f"ctc_align: Input must be [N, 1] ids with a LoD, or a "
                                                           f"padded [batch, T] with InputLength; got Input{list(x.shape)}")
        return {"Output": Meta((-1, 1), x.dtype), "OutputLength": Meta((-1, 1), x.dtype)}
    check(len(x.shape) == 2, f"ctc_align: with InputLength, Input must be [batch, T], got Input{list(x.shape)}")
    return {"Output": Meta(tuple(x.shape), x.dtype), "OutputLength": Meta((x.shape[0], 1), x.dtype)}


def _keep(tokens, prev, blank: int, merge: bool):
    """The tokens ctc_align keeps: not the blank, and (merge) not the one before."""
    keep = tokens != blank
    return keep & (tokens != prev) if merge else keep


@register("ctc_align", ins=(Slot("Input", no_grad=True), Slot("InputLength", dispensable=True, no_grad=True)),
          outs=("Output", Slot("OutputLength", dispensable=True)),
          attrs={"blank": 0, "merge_repeated": True, "padding_value": 0}, infer=_align_infer,
          lod=lambda levels, a: {"Output": 1 if levels["Input"][0] else 0, "OutputLength": 0},
          wants_lod=("Input",))
def ctc_align(xp, ins, a, ctx):
    """Each sequence's tokens without blanks and (merge_repeated) without a token equal to the one
    before it; a LoD Output, or padded rows and OutputLength (NOTE(ctc-forms), NOTE(ctc-1.8)).
    The ids are few: the kernel works on the host."""
    x, blank, merge = ins["Input"], int(a["blank"]), bool(a["merge_repeated"])
    if isinstance(x, LoDTensor) and x.offsets:
        o = top_offsets("ctc_align", "Input", x)
        tokens = host_array(x.data).reshape(-1)
        if tokens.shape[0] != int(o[-1]):
            raise ValueError(f"ctc_align: Input must be [N, 1] (one id per row), got Input{list(x.data.shape)}")
        lens = np.diff(o)
        prev = np.concatenate([[-1], tokens[:-1]]).astype(tokens.dtype)
        prev[o[:-1][lens > 0]] = -1  # Fluid's prev_token starts at -1 in each sequence
        keep = _keep(tokens, prev, blank, merge)
        kept = np.bincount(np.repeat(np.arange(lens.shape[0]), lens)[keep], minlength=lens.shape[0])
        offsets = np.concatenate([[0], np.cumsum(kept)]).astype(np.int64)
        out = tokens[keep].reshape(-1, 1)
        if out.shape[0] == 0:  # every sequence empty: Fluid's one row of -1 (NOTE(ctc-1.8))
            out = np.full((1, 1), -1, dtype=tokens.dtype)
        return {"Output": LoDTensor(xp.asarray(out), (offsets,), check=False)}
    if ins.get("InputLength") is None:
        raise ValueError("ctc_align: Input has no LoD, so it is the padded form [batch, T], which needs InputLength")
    tokens = host_array(x)
    if tokens.ndim != 2:
        raise ValueError(f"ctc_align: the padded Input must be [batch, T], got Input{list(tokens.shape)}")
    b, t = tokens.shape
    lens = _lengths("ctc_align", "InputLength", ins["InputLength"], b, t)
    prev = np.concatenate([np.full((b, 1), -1, tokens.dtype), tokens[:, :-1]], axis=1)
    keep = _keep(tokens, prev, blank, merge) & (np.arange(t)[None, :] < lens[:, None])
    out = np.full_like(tokens, a["padding_value"])
    rows, cols = np.nonzero(keep)
    out[rows, (np.cumsum(keep, axis=1) - 1)[rows, cols]] = tokens[rows, cols]
    got = {"Output": xp.asarray(out)}
    if "OutputLength" in ctx.outputs:
        got["OutputLength"] = xp.asarray(keep.sum(axis=1).astype(tokens.dtype).reshape(-1, 1))
    return got
