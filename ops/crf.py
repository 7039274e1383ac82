"""The linear-chain CRF of Fluid 1.8: ``linear_chain_crf`` (each sequence's negative
log-likelihood, with its gradient for Emission and Transition) and ``crf_decoding`` (Viterbi;
no gradient), as linear_chain_crf_op and crf_decoding_op.

NOTE(crf-layout): Emission x holds D tag scores per step; Transition is [D + 2, D]: row 0 the
start weights a, row 1 the end weights b, and ``w = Transition[2:]``, where w[i, j] scores tag j
right after tag i. A tag path s of length L scores
``a[s_0] + b[s_{L-1}] + sum_t x[t, s_t] + sum_{t >= 1} w[s_{t-1}, s_t]``, and Z sums exp(score)
over all D^L paths. ``LogLikelihood`` is Fluid's name, but its value is the NEGATIVE
log-likelihood of the label path, ``log Z - score(label)`` (>= 0; minimise its mean), 0 for an
empty sequence. The sequences are either Label's 1-level LoD over the rows of x [N, D] (an
Emission LoD, where there is one, must be the same), or, given ``Length`` (int64 [B] or [B, 1]),
the first Length[i] steps of row i of a padded x [B, T, D] with Label [B, T] or [B, T, 1].

NOTE(crf-numerics): Fluid's CPU kernel runs the forward-backward in probability space, one
sequence at a time in T: exp(x - the row's max) and exp(Transition), each forward and backward
vector L1-normalised. Here both passes run in log space (logsumexp) in float64 over the whole
batch padded to [B, T, D], one Python loop over time steps, and each result is rounded to the
input dtype once, so the numbers are Fluid's up to its float32 round-off. ``Alpha`` (each step's
forward vector, normalised to sum 1; 0 on padding), ``EmissionExps`` (exp(x - row max), every
row) and ``TransitionExps`` (exp(Transition)) are Fluid's intermediates, so a program that
fetches them sees Fluid's values; the gradient kernel takes them, as Fluid's grad op does, but
recomputes from Emission and Transition instead of reading them. With P the marginals and g the
sequence's LogLikelihood@GRAD: Emission@GRAD[t, i] = g (P(s_t = i) - [label_t = i]); Transition
row 0 (row 1) gets that gradient's first (last) step, and w[i, j] gets
``g sum_t (P(s_{t-1} = i, s_t = j) - [label_{t-1} = i, label_t = j])``, summed over sequences.

NOTE(viterbi-ties): crf_decoding runs Fluid's recursion in the input dtype, with the same IEEE
additions, so its scores are bit-equal to Fluid's: v_0 = a + x_0,
v_t[i] = max_j(v_{t-1}[j] + w[j, i]) + x_t[i], the last tag maximises v_{L-1} + b, and the path
is walked back through the argmaxes. On equal scores the lowest tag index wins, as in Fluid's
scan (strict ``>`` from -FLT_MAX, which ``argmax``'s first maximum matches; a row of NaN or -inf
scores, where the two could differ, is left alone). ViterbiPath is int64 [N, 1] with Emission's
LoD, or [B, T] with 0 past each length; given a Label, each step is 1 where the path has the
label's tag, else 0 (Fluid's input to chunk_eval).
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from placegroup.errors import OutOfRange
from placegroup.ops.registry import Meta, Slot, check, grad_of, register
from placegroup.values import LoDTensor, as_host

FLOATS = ("float32", "float64")


# -- shapes ----------------------------------------------------------------------------------


def _infer_common(op: str, ins) -> tuple:
    """Check Emission, Transition, Label and Length metas as Fluid's InferShape; return
    (emission, transition) metas."""
    e, w, lab, length = ins["Emission"], ins["Transition"], ins.get("Label"), ins.get("Length")
    check(len(w.shape) == 2, f"{op}: Transition must be 2-D [D + 2, D], got Transition{list(w.shape)}")
    check(w.shape[0] <= 0 or w.shape[1] <= 0 or w.shape[0] - 2 == w.shape[1],
          f"{op}: Transition must be [D + 2, D] (start weights, end weights, then D x D transitions), got "
          f"Transition{list(w.shape)}")
    rank = 3 if length is not None else 2
    form = "padded [batch, max_len, D] (with Length)" if length is not None else "[N, D] (a LoD tensor)"
    check(len(e.shape) == rank, f"{op}: Emission must be {form}, got Emission{list(e.shape)}")
    check(e.shape[-1] <= 0 or w.shape[1] <= 0 or e.shape[-1] == w.shape[1],
          f"{op}: Emission's last dim (the tag number D) must be Transition's second dim, got "
          f"Emission{list(e.shape)} and Transition{list(w.shape)}")
    check(e.dtype in FLOATS and w.dtype == e.dtype,
          f"{op}: Emission and Transition must both be float32 or both float64, got {e.dtype} and {w.dtype}")
    if lab is not None:
        check(lab.dtype == "int64", f"{op}: Label must be int64, got {lab.dtype}")
        if length is not None:
            ok = len(lab.shape) == 2 or (len(lab.shape) == 3 and lab.shape[2] == 1)
            check(ok, f"{op}: with Length, Label must be [batch, max_len] or [batch, max_len, 1], got "
                      f"Label{list(lab.shape)}")
        else:
            ok = len(lab.shape) == 1 or (len(lab.shape) == 2 and lab.shape[1] in (1, -1))
            check(ok, f"{op}: Label must be [N, 1], got Label{list(lab.shape)}")
    if length is not None:
        check(length.dtype == "int64", f"{op}: Length must be int64, got {length.dtype}")
    return e, w


def _crf_infer(ins, a):
    e, w = _infer_common("linear_chain_crf", ins)
    n = e.shape[0] if ins.get("Length") is not None else -1
    return {"Alpha": Meta(e.shape, e.dtype), "EmissionExps": Meta(e.shape, e.dtype),
            "TransitionExps": Meta(w.shape, w.dtype), "LogLikelihood": Meta((n, 1), e.dtype)}


def _decode_infer(ins, a):
    e, _ = _infer_common("crf_decoding", ins)
    shape = tuple(e.shape[:2]) if ins.get("Length") is not None else (e.shape[0], 1)
    return {"ViterbiPath": Meta(shape, "int64")}


# -- the batch, padded -----------------------------------------------------------------------


class Batch(NamedTuple):
    """The sequences of one run, padded (NOTE(crf-layout)).

    Attributes:
        x: Emission as [B, T, D] (the input array itself in the padded form).
        label: [B, T] int64 tags, 0 on padding (None without a Label).
        lens: host int64 [B]; ``valid``: host bool [B, T], ``t < lens[b]``.
        lod: the LoD form (the rows of x [N, D] are ``x[valid]``), or the padded one.
    """

    x: object
    label: object
    lens: np.ndarray
    valid: np.ndarray
    lod: bool

    def rows(self, xp, padded):
        """``padded`` [B, T, ...] back in the input's form: its valid steps in the LoD form."""
        return padded[xp.asarray(self.valid)] if self.lod else padded


def _data(v):
    return v.data if isinstance(v, LoDTensor) else v


def _offsets(v):
    return v.offsets if isinstance(v, LoDTensor) else ()


def _lod_lens(op: str, ins, rows: int) -> np.ndarray:
    """The lengths of the sequences of the LoD form: Label's LoD, else Emission's."""
    e_off, l_off = _offsets(ins["Emission"]), _offsets(ins.get("Label"))
    if op.startswith("linear_chain_crf") and not l_off:
        raise ValueError("linear_chain_crf: Label must be a sequence (a LoD tensor of [N, 1] tags), or give Length "
                         "for a padded Emission [batch, max_len, D]")
    off = l_off or e_off
    if not off:
        raise ValueError(f"{op}: Emission must be a sequence (a LoD tensor [N, D]), or give Length for a "
                         "padded Emission [batch, max_len, D]")
    if len(off) != 1:
        raise ValueError(f"{op}: the sequences must have a 1-level LoD, got {len(off)} levels")
    o = np.asarray(as_host(off[0]), np.int64)
    if e_off and l_off and (len(e_off) != 1 or not np.array_equal(np.asarray(as_host(e_off[0])), o)):
        raise ValueError(f"{op}: Emission's LoD {[np.asarray(as_host(x)).tolist() for x in e_off]} must be "
                         f"Label's {[o.tolist()]}: one row of tag scores per label")
    if o[-1] != rows:
        raise ValueError(f"{op}: the LoD {o.tolist()} covers {int(o[-1])} rows, but Emission has {rows}")
    return o[1:] - o[:-1]


def _padded_lens(op: str, length, b: int, t: int) -> np.ndarray:
    lens = np.asarray(as_host(_data(length))).reshape(-1).astype(np.int64)
    if lens.shape[0] != b or (lens.size and (lens.min() < 0 or lens.max() > t)):
        raise ValueError(f"{op}: Length {lens.tolist()} must give one length in 0..{t} for each of the {b} rows of "
                         f"the padded Emission [{b}, {t}, D]")
    return lens


def batch(xp, op: str, ins) -> Batch:
    """The sequences of ``ins`` padded to [B, T, D] (NOTE(crf-layout)).

    Raises:
        ValueError: a missing or mismatched LoD, or lengths that do not fit.
        OutOfRange: a tag of Label outside 0..D-1.
    """
    x, lab, length = _data(ins["Emission"]), ins.get("Label"), ins.get("Length")
    d = x.shape[-1]
    if tuple(ins["Transition"].shape) != (d + 2, d):
        raise ValueError(f"{op}: Transition must be [D + 2, D] = [{d + 2}, {d}] for Emission{list(x.shape)}, got "
                         f"Transition{list(ins['Transition'].shape)}")
    if length is not None:
        if x.ndim != 3:
            raise ValueError(f"{op}: with Length, Emission must be padded [batch, max_len, D], got {list(x.shape)}")
        b, t = x.shape[:2]
        lens, padded, lod = _padded_lens(op, length, b, t), x, False
    else:
        lens = _lod_lens(op, ins, x.shape[0])
        b, t, lod = lens.shape[0], int(lens.max()) if lens.size else 0, True
    valid = np.arange(t)[None, :] < lens[:, None]
    if lod:
        padded = xp.zeros((b, t, d), dtype=x.dtype)
        padded[xp.asarray(valid)] = x
    tags = None
    if lab is not None:
        ld = _data(lab)
        want = x.shape[0] * (t if not lod else 1)
        if ld.size != want:
            raise ValueError(f"{op}: Label{list(ld.shape)} must hold one tag per step of Emission{list(x.shape)}")
        host = np.asarray(as_host(ld)).reshape(-1) if lod else np.asarray(as_host(ld)).reshape(b, t)[valid]
        bad = (host < 0) | (host >= d)
        if bad.any():
            raise OutOfRange(f"{op}: label tag {int(host[bad][0])} is out of range: with {d} tags (Emission's last "
                             f"dim and Transition's second) a tag is 0..{d - 1}")
        full = np.zeros((b, t), np.int64)
        full[valid] = host
        tags = xp.asarray(full)
    return Batch(padded, tags, lens, valid, lod)


# -- linear_chain_crf ------------------------------------------------------------------------


def _lse(xp, a, axis: int):
    """log(sum(exp(a))) along ``axis`` (finite inputs)."""
    m = a.max(axis=axis, keepdims=True)
    return (m + xp.log(xp.exp(a - m).sum(axis=axis, keepdims=True))).squeeze(axis)


def _last(xp, a, lens: np.ndarray):
    """``a[b, lens[b] - 1]`` for each b ([B, T, ...] -> [B, ...]; step 0 for an empty one)."""
    return a[xp.arange(a.shape[0]), xp.asarray(np.maximum(lens - 1, 0))]


def _alphas(xp, x, tw):
    """Log forward vectors [B, T, D] (float64) of padded x: each step's from the one before,
    also past a sequence's end (finite there, never read)."""
    la = xp.empty_like(x)
    if x.shape[1]:
        la[:, 0] = tw[0] + x[:, 0]
    for t in range(1, x.shape[1]):
        la[:, t] = _lse(xp, la[:, t - 1, :, None] + tw[None, 2:], 1) + x[:, t]
    return la


def _log_z(xp, la, tw, lens):
    return _lse(xp, _last(xp, la, lens) + tw[1], 1) if la.shape[1] else xp.zeros((la.shape[0],), la.dtype)


def _label_score(xp, bt: Batch, x, tw):
    """score(label) of each sequence (NOTE(crf-layout)), float64 [B]."""
    lab, valid = bt.label, xp.asarray(bt.valid)
    if x.shape[1] == 0:
        return xp.zeros((x.shape[0],), x.dtype)
    emit = (xp.take_along_axis(x, lab[:, :, None], 2)[:, :, 0] * valid).sum(1)
    trans = (tw[2:][lab[:, :-1], lab[:, 1:]] * valid[:, 1:]).sum(1)
    return emit + trans + tw[0][lab[:, 0]] + tw[1][_last(xp, lab, bt.lens)]


@register("linear_chain_crf", ins=("Emission", "Transition", Slot("Label", no_grad=True),
                                   Slot("Length", dispensable=True, no_grad=True)),
          outs=(Slot("Alpha", no_grad=True), Slot("EmissionExps", no_grad=True), Slot("TransitionExps", no_grad=True),
                "LogLikelihood"),
          infer=_crf_infer, grad=grad_of(("Emission", "Transition"), out="LogLikelihood",
                                         outs=("Alpha", "EmissionExps", "TransitionExps")),
          lod="drop", wants_lod=("Emission", "Label"))
def linear_chain_crf(xp, ins, a, ctx):
    """Each sequence's ``log Z - score(label)`` [num_seq, 1] and Fluid's intermediates
    (NOTE(crf-layout), NOTE(crf-numerics))."""
    bt = batch(xp, "linear_chain_crf", ins)
    e, w = _data(ins["Emission"]), ins["Transition"]
    x, tw = bt.x.astype(np.float64), w.astype(np.float64)
    la = _alphas(xp, x, tw)
    nll = xp.where(xp.asarray(bt.lens > 0), _log_z(xp, la, tw, bt.lens) - _label_score(xp, bt, x, tw), 0.0)
    alpha = xp.exp(la - _lse(xp, la, 2)[:, :, None]) * xp.asarray(bt.valid)[:, :, None]
    return {"Alpha": bt.rows(xp, alpha).astype(e.dtype),
            "EmissionExps": xp.exp(e - e.max(axis=-1, keepdims=True)),
            "TransitionExps": xp.exp(w), "LogLikelihood": nll.reshape(-1, 1).astype(e.dtype)}


@register("linear_chain_crf_grad", ins=("Emission", "Transition", "Label", "Alpha", "EmissionExps", "TransitionExps",
                                        Slot("Length", dispensable=True), "LogLikelihood@GRAD"),
          outs=(Slot("Emission@GRAD", dispensable=True), Slot("Transition@GRAD", dispensable=True)),
          role="backward", wants_lod=("Emission", "Label"))
def linear_chain_crf_grad(xp, ins, a, ctx):
    """The marginals minus the label's indicators, times each sequence's incoming gradient
    (NOTE(crf-numerics))."""
    bt = batch(xp, "linear_chain_crf_grad", ins)
    e, w = _data(ins["Emission"]), ins["Transition"]
    x, tw = bt.x.astype(np.float64), w.astype(np.float64)
    t, d = x.shape[1:]
    valid = xp.asarray(bt.valid)
    g = ins["LogLikelihood@GRAD"].reshape(-1).astype(np.float64)
    la = _alphas(xp, x, tw)
    log_z = _log_z(xp, la, tw, bt.lens)
    lb = xp.zeros_like(x)  # log backward vectors: lb[t] sums the paths' scores after step t
    ends = xp.asarray(bt.lens - 1)[:, None]
    for k in range(t - 1, -1, -1):
        after = _lse(xp, tw[None, 2:] + (x[:, k + 1] + lb[:, k + 1])[:, None, :], 2) if k + 1 < t else 0.0
        lb[:, k] = xp.where(ends == k, tw[1][None], after)
    onehot = ((bt.label[:, :, None] == xp.arange(d)) & valid[:, :, None]).astype(np.float64)
    gw = g[:, None] * valid  # each step's weight: its sequence's gradient, 0 on padding
    marg = xp.exp(la + lb - log_z[:, None, None]) * valid[:, :, None]
    dx = gw[:, :, None] * marg - g[:, None, None] * onehot
    out = {}
    if "Emission@GRAD" in ctx.outputs:
        out["Emission@GRAD"] = bt.rows(xp, dx).astype(e.dtype)
    if "Transition@GRAD" in ctx.outputs:
        dw = xp.zeros((d + 2, d), np.float64)
        if t:
            dw[0] = dx[:, 0].sum(0)
            dw[1] = _last(xp, dx, bt.lens).sum(0)
        for k in range(1, t):
            pair = xp.exp(la[:, k - 1, :, None] + tw[None, 2:] + (x[:, k] + lb[:, k])[:, None, :]
                          - log_z[:, None, None])
            dw[2:] += (gw[:, k, None, None] * pair).sum(0) - (onehot[:, k - 1] * g[:, None]).T @ onehot[:, k]
        out["Transition@GRAD"] = dw.astype(w.dtype)
    return out


# -- crf_decoding ----------------------------------------------------------------------------


def viterbi(xp, bt: Batch, w):
    """The best path of each sequence, [B, T] int64, 0 past its end (NOTE(viterbi-ties))."""
    x = bt.x
    b, t, _ = x.shape
    path = xp.zeros((b, t), np.int64)
    if t == 0:
        return path
    w = w.astype(x.dtype)
    lens = xp.asarray(bt.lens)
    score = w[0] + x[:, 0]
    track = xp.zeros((b, t, x.shape[2]), np.int64)
    for k in range(1, t):
        s = score[:, :, None] + w[None, 2:]  # [B, from, to]
        track[:, k] = s.argmax(1)
        score = xp.where((k < lens)[:, None], s.max(1) + x[:, k], score)  # each row stops at its end
    best = (score + w[1]).argmax(1)
    cur = best
    for k in range(t - 1, -1, -1):
        if k + 1 < t:
            back = xp.take_along_axis(track[:, k + 1], cur[:, None], 1)[:, 0]
            cur = xp.where(k < lens - 1, back, cur)
        cur = xp.where(k == lens - 1, best, cur)
        path[:, k] = xp.where(k < lens, cur, 0)
    return path


@register("crf_decoding", ins=(Slot("Emission", no_grad=True), Slot("Transition", no_grad=True),
                               Slot("Label", dispensable=True, no_grad=True),
                               Slot("Length", dispensable=True, no_grad=True)),
          outs=("ViterbiPath",), infer=_decode_infer, wants_lod=("Emission", "Label"))
def crf_decoding(xp, ins, a, ctx):
    """Each sequence's best tag path, or with a Label 1 where it has the label's tag
    (NOTE(viterbi-ties))."""
    bt = batch(xp, "crf_decoding", ins)
    path = viterbi(xp, bt, ins["Transition"])
    if bt.label is not None:
        path = ((path == bt.label) & xp.asarray(bt.valid)).astype(np.int64)
    return {"ViterbiPath": bt.rows(xp, path).reshape(-1, 1) if bt.lod else path}
