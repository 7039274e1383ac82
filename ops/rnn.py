"""Recurrent ops of Fluid 1.8 (lstm_op, gru_op, lstm_unit_op, gru_unit_op) and their gradients.

``lstm`` and ``gru`` run over the sequences of a 1-level LoD tensor whose rows are already
projected (``[T, 4D]`` and ``[T, 3D]``, an ``fc`` before them does the input weights); only
the recurrent weights live in the op. ``lstm_unit`` and ``gru_unit`` are one dense step.

NOTE(rnn-batch): Fluid's kernels reorder the sequences into "batches" (sequence2batch.h):
step t holds row t of every sequence longer than t, the sequences sorted by length, longest
first, so the sequences alive at step t are a prefix of those alive at t - 1 and the previous
hidden state of batch row k is row k of the previous step. ``Schedule`` makes the same order
with index arithmetic: one Python loop over the steps (the longest sequence), never one per
sequence. ``is_reverse`` walks each sequence from its last row. H0/C0 row i is sequence i's
initial state (Fluid reorders it the same way). BatchGate and the other Batch* outputs are in
this batch order, as Fluid's; Hidden and Cell are in the input's row order and keep its LoD.

NOTE(rnn-gates): the gate layouts, as Fluid 1.8's kernels read them (math/detail/*_kernel.h):
* lstm: Input/Weight/Bias columns are [candidate, input, forget, output] (D each), Bias
  [1, 4D], or [1, 7D] with peepholes whose last 3D are the diagonal weights W_ic, W_fc, W_oc:
  i = act_g(x_i + c_prev W_ic), f = act_g(x_f + c_prev W_fc), c = act_cand(x_c) i + c_prev f,
  o = act_g(x_o + c W_oc), h = o act_cell(c). Activated gates go to BatchGate, act_cell(c) to
  BatchCellPreAct. Fluid's lstm_grad ignores Cell@GRAD (its TODO): a loss that reads Cell
  gets no gradient through it here either.
* gru: Input/Bias columns are [update, reset, candidate]. Weight [D, 3D] is read as *flat
  memory*: its first 2D*D numbers are the [D, 2D] gate weight, the last D*D the [D, D]
  candidate weight (not Weight[:, :2D] and Weight[:, 2D:]). u, r = act_g(x_ur + h_prev W_g),
  c = act(x_c + (r h_prev) W_c), h = h_prev - u h_prev + u c, or with ``origin_mode``
  (Cho et al.) u h_prev + c - u c.
* lstm_unit: X columns are [input, forget, output, candidate] with ``forget_bias`` added to
  the forget gate, plain sigmoid and tanh; its grad uses both C@GRAD and H@GRAD.
* gru_unit: as gru for one step, activations given as ints (0 identity, 1 sigmoid, 2 tanh,
  3 relu); h = u (c - h_prev) + h_prev, or c + u (h_prev - c) with ``origin_mode``.

NOTE(rnn-act): lstm and gru use Fluid's detail activations: sigmoid clips its input to
[-40, 13] (SIGMOID_THRESHOLD_MIN/MAX) and tanh is 2 / (1 + exp(-2x)) - 1 with -2x capped at 40;
every gradient is computed from the activation's output, as theirs are.
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.values import LoDTensor

ACTS = ("sigmoid", "tanh", "relu", "identity")
UNIT_ACTS = {0: "identity", 1: "sigmoid", 2: "tanh", 3: "relu"}  # gru_unit's int codes


def act(xp, name: str, x, clip: bool = True):
    """Fluid's activation ``name`` of x (NOTE(rnn-act); ``clip=False``: the plain functions)."""
    if name == "sigmoid":
        return 1.0 / (1.0 + xp.exp(-(xp.clip(x, -40.0, 13.0) if clip else x)))
    if name == "tanh":
        return 2.0 / (1.0 + xp.exp(xp.minimum(-2.0 * x, 40.0) if clip else -2.0 * x)) - 1.0
    if name == "relu":
        return xp.maximum(x, 0)
    return x


def act_grad(name: str, g, y):
    """The gradient through activation ``name`` at output ``y`` for incoming gradient ``g``."""
    if name == "sigmoid":
        return g * y * (1.0 - y)
    if name == "tanh":
        return g * (1.0 - y * y)
    if name == "relu":
        return g * (y > 0)
    return g


class Schedule:
    """The batch order of NOTE(rnn-batch) for one LoD level's ``offsets``.

    Attributes:
        order: the sequences, longest first (stable among equal lengths).
        rows: per step, the input rows it reads (host int64), one per alive sequence.
        bounds: step t's rows sit at ``bounds[t]:bounds[t + 1]`` of the batch order.
        batch: all steps' rows concatenated: batch row k is input row ``batch[k]``.
    """

    def __init__(self, offsets, reverse: bool) -> None:
        offsets = np.asarray(offsets, dtype=np.int64)
        lens = offsets[1:] - offsets[:-1]
        self.order = np.argsort(-lens, kind="stable")
        steps = int(lens.max()) if lens.size else 0
        alive = lens.size - np.cumsum(np.bincount(lens, minlength=steps + 1))[:steps]  # len > t
        first = offsets[:-1][self.order]
        last = first + lens[self.order] - 1
        self.rows = [(last[:n] - t) if reverse else (first[:n] + t) for t, n in enumerate(alive.tolist())]
        self.bounds = np.concatenate([[0], np.cumsum(alive)]).astype(np.int64).tolist()
        self.batch = np.concatenate(self.rows) if self.rows else np.zeros(0, np.int64)


def _schedule(op: str, x, reverse: bool) -> Schedule:
    if not isinstance(x, LoDTensor) or not x.offsets:
        raise ValueError(f"{op}: Input is a dense array, not a sequence: feed it a LoDTensor with a 1-level LoD "
                         f"(fluid.create_lod_tensor), or use {op}_unit for one dense step")
    if x.lod_level != 1:
        raise ValueError(f"{op}: Input must have a 1-level LoD (Fluid supports one level), got {x.lod_level} levels")
    return Schedule(x.offsets[0], reverse)


def _init(xp, state, s: Schedule, n: int):
    """The initial state rows of the first ``n`` sequences in batch order (None: zeros)."""
    return None if state is None else state[xp.asarray(s.order[:n])]


def _to_rows(xp, batch_vals, s: Schedule):
    """Batch-ordered rows back in input row order."""
    out = xp.empty_like(batch_vals)
    out[xp.asarray(s.batch)] = batch_vals
    return out


def _scatter_init(xp, like, grad, s: Schedule):
    """The gradient of an initial state from its batch-ordered rows (zeros for empty sequences)."""
    out = xp.zeros_like(like)
    if grad is not None:
        out[xp.asarray(s.order[:grad.shape[0]])] = grad
    return out


def _rank2(op: str, slot: str, m: Meta) -> None:
    check(len(m.shape) == 2, f"{op}: {slot} must be rank 2, got {slot}{list(m.shape)}")


def _fits(a: int, b: int) -> bool:
    return a == b or a == -1 or b == -1


def _check_init(op: str, ins, slot: str, d: int) -> None:
    m = ins.get(slot)
    if m is not None:
        _rank2(op, slot, m)
        check(_fits(m.shape[1], d), f"{op}: {slot} must be [N, {d}] (the hidden size), got {slot}{list(m.shape)}")


def _check_acts(op: str, a: dict, names) -> None:
    for k in names:
        check(a[k] in ACTS, f"{op}: {k} {a[k]!r} is not one of {list(ACTS)}")


# -- lstm ------------------------------------------------------------------------------------


def _lstm_infer(ins, a):
    x, w, b = ins["Input"], ins["Weight"], ins["Bias"]
    _rank2("lstm", "Input", x)
    check(x.shape[1] % 4 == 0, f"lstm: Input's width must be 4 * hidden size, got Input{list(x.shape)}")
    d = x.shape[1] // 4
    check(tuple(w.shape) == (d, 4 * d), f"lstm: Weight must be [{d}, {4 * d}] for Input{list(x.shape)}, "
                                        f"got Weight{list(w.shape)}")
    bw = 7 * d if a["use_peepholes"] else 4 * d
    check(tuple(b.shape) == (1, bw), f"lstm: Bias must be [1, {bw}] (use_peepholes={a['use_peepholes']}), "
                                     f"got Bias{list(b.shape)}")
    check((ins.get("H0") is None) == (ins.get("C0") is None),
          "lstm: H0 and C0 must be given together (Fluid's lstm_op), got only "
          + ("H0" if ins.get("H0") is not None else "C0"))
    _check_init("lstm", ins, "H0", d)
    _check_init("lstm", ins, "C0", d)
    _check_acts("lstm", a, ("gate_activation", "cell_activation", "candidate_activation"))
    t = (x.shape[0], d)
    return {"Hidden": Meta(t, x.dtype), "Cell": Meta(t, x.dtype), "BatchGate": Meta((x.shape[0], 4 * d), x.dtype),
            "BatchCellPreAct": Meta(t, x.dtype)}


_LSTM_ATTRS = {"use_peepholes": True, "is_reverse": False, "gate_activation": "sigmoid",
               "cell_activation": "tanh", "candidate_activation": "tanh"}


@register("lstm", ins=("Input", Slot("H0", dispensable=True), Slot("C0", dispensable=True), "Weight", "Bias"),
          outs=("Hidden", "Cell", Slot("BatchGate", no_grad=True), Slot("BatchCellPreAct", no_grad=True)),
          attrs=_LSTM_ATTRS, infer=_lstm_infer, wants_lod=("Input",),
          grad=grad_of(("Input", "H0", "C0", "Weight", "Bias"), out="Hidden",
                       outs=("Hidden", "Cell", "BatchGate", "BatchCellPreAct")))
def lstm(xp, ins, a, ctx):
    """A 1-level-LoD LSTM over pre-projected gates (NOTE(rnn-batch), NOTE(rnn-gates))."""
    x = ins["Input"]
    s = _schedule("lstm", x, a["is_reverse"])
    w, b = ins["Weight"], ins["Bias"]
    d = w.shape[0]
    gates = x.data + b[:, :4 * d]
    peep = a["use_peepholes"]
    ci, cf, co = (b[0, 4 * d:5 * d], b[0, 5 * d:6 * d], b[0, 6 * d:]) if peep else (0.0, 0.0, 0.0)
    ga, ca, na = a["gate_activation"], a["cell_activation"], a["candidate_activation"]
    n0 = len(s.rows[0]) if s.rows else 0
    h_prev, c_prev = _init(xp, ins.get("H0"), s, n0), _init(xp, ins.get("C0"), s, n0)
    bg = xp.empty((s.batch.shape[0], 4 * d), dtype=gates.dtype)
    bc = xp.empty((s.batch.shape[0], d), dtype=gates.dtype)
    bh, ba = xp.empty_like(bc), xp.empty_like(bc)
    for t, rows in enumerate(s.rows):
        lo, hi = s.bounds[t], s.bounds[t + 1]
        n = hi - lo
        g = gates[xp.asarray(rows)]
        if h_prev is not None:
            g = g + h_prev[:n] @ w
        cp = c_prev[:n] if c_prev is not None else xp.zeros((n, d), dtype=g.dtype)
        cand = act(xp, na, g[:, :d])
        i = act(xp, ga, g[:, d:2 * d] + cp * ci)
        f = act(xp, ga, g[:, 2 * d:3 * d] + cp * cf)
        c = cand * i + cp * f
        o = act(xp, ga, g[:, 3 * d:] + c * co)
        ac = act(xp, ca, c)
        bg[lo:hi] = xp.concatenate([cand, i, f, o], axis=1)
        bc[lo:hi], ba[lo:hi], bh[lo:hi] = c, ac, o * ac
        h_prev, c_prev = bh[lo:hi], c
    return {"Hidden": _to_rows(xp, bh, s), "Cell": _to_rows(xp, bc, s), "BatchGate": bg, "BatchCellPreAct": ba}


def cell_grad(xp, g, c, ac, cp, dh, dc, peeps, acts, cell_clip: float = 0.0):
    """One LSTM step's backward over its running sequences: ``g`` the gates (candidate, input,
    forget, output, after their activations), ``c`` the cell and ``ac`` its activation, ``cp`` the
    previous cell; ``dh``/``dc`` the gradients reaching the hidden and cell. With ``cell_clip``, a
    cell at or beyond the clip passes no gradient (lstmp's rule). Returns ``(d gates, d previous
    cell, the peepholes' gradients (input, forget, output) per row)``."""
    d = c.shape[1]
    cand, i, f, o = g[:, :d], g[:, d:2 * d], g[:, 2 * d:3 * d], g[:, 3 * d:]
    (ci, cf, co), (ga, ca, na) = peeps, acts
    do = act_grad(ga, dh * ac, o)
    dc = dc + act_grad(ca, dh * o, ac) + do * co
    if cell_clip > 0:
        dc = xp.where((c >= cell_clip) | (c <= -cell_clip), xp.zeros_like(dc), dc)
    dcand = act_grad(na, dc * i, cand)
    di = act_grad(ga, dc * cand, i)
    df = act_grad(ga, dc * cp, f)
    return xp.concatenate([dcand, di, df, do], axis=1), di * ci + df * cf + dc * f, (di * cp, df * cp, do * c)


@register("lstm_grad", ins=("Input", Slot("H0", dispensable=True), Slot("C0", dispensable=True), "Weight", "Bias",
                            "Hidden", "Cell", "BatchGate", "BatchCellPreAct", "Hidden@GRAD"),
          outs=tuple(Slot(n + "@GRAD", dispensable=True) for n in ("Input", "H0", "C0", "Weight", "Bias")),
          attrs=_LSTM_ATTRS, role="backward", wants_lod=("Input",))
def lstm_grad(xp, ins, a, ctx):
    """Back through the steps in reverse, as LSTMGradKernel (Cell@GRAD is not read)."""
    x = ins["Input"]
    s = _schedule("lstm_grad", x, a["is_reverse"])
    w, b = ins["Weight"], ins["Bias"]
    d = w.shape[0]
    peep = a["use_peepholes"]
    ci, cf, co = (b[0, 4 * d:5 * d], b[0, 5 * d:6 * d], b[0, 6 * d:]) if peep else (0.0, 0.0, 0.0)
    ga, ca, na = a["gate_activation"], a["cell_activation"], a["candidate_activation"]
    batch = xp.asarray(s.batch)
    bh, bc = ins["Hidden"][batch], ins["Cell"][batch]
    bg, ba = ins["BatchGate"], ins["BatchCellPreAct"]
    dh_all = ins["Hidden@GRAD"][batch]
    h0, c0 = ins.get("H0"), ins.get("C0")
    n0 = len(s.rows[0]) if s.rows else 0
    h0o, c0o = _init(xp, h0, s, n0), _init(xp, c0, s, n0)
    dg_all = xp.empty_like(bg)
    dw = xp.zeros_like(w)
    dpeep = [xp.zeros(d, dtype=w.dtype) for _ in range(3)]
    dh_carry = dc_carry = dh0 = dc0 = None
    for t in range(len(s.rows) - 1, -1, -1):
        lo, hi = s.bounds[t], s.bounds[t + 1]
        n = hi - lo
        dh = dh_all[lo:hi]
        dc = xp.zeros((n, d), dtype=dh.dtype)
        if dh_carry is not None:  # from step t + 1, whose sequences are a prefix of these
            m = dh_carry.shape[0]
            dh = xp.concatenate([dh[:m] + dh_carry, dh[m:]])
            dc[:m] = dc_carry
        if t > 0:
            plo = s.bounds[t - 1]
            hp, cp = bh[plo:plo + n], bc[plo:plo + n]
        else:
            hp, cp = h0o, (c0o if c0o is not None else xp.zeros((n, d), dtype=dh.dtype))
        dg, dc_carry, peep_grads = cell_grad(xp, bg[lo:hi], bc[lo:hi], ba[lo:hi], cp, dh, dc, (ci, cf, co),
                                             (ga, ca, na))
        if peep:
            for k, v in enumerate(peep_grads):
                dpeep[k] += v.sum(0)
        dg_all[lo:hi] = dg
        dh_carry = dg @ w.T if hp is not None else None
        if hp is not None:
            dw += hp.T @ dg
        if t == 0:
            dh0, dc0 = dh_carry, dc_carry
    return lstm_grad_outputs(xp, ctx.outputs, s, dg_all, dw, dpeep if peep else [], b, (h0, dh0), (c0, dc0))


def lstm_grad_outputs(xp, wanted, s, dg_all, dw, dpeep, b, h0_grad, c0_grad) -> dict:
    """The gradients an LSTM's backward returns, of those ``wanted``: the input's (the gates',
    back in row order), the weight's, the bias's (the gates' then the peepholes'), and the
    initial hidden and cell states' where they were given (``(value or None, its gradient)``)."""
    out = {}
    if "Input@GRAD" in wanted:
        out["Input@GRAD"] = _to_rows(xp, dg_all, s)
    if "Weight@GRAD" in wanted:
        out["Weight@GRAD"] = dw
    if "Bias@GRAD" in wanted:
        out["Bias@GRAD"] = xp.concatenate([dg_all.sum(0)] + list(dpeep))[None, :].astype(b.dtype)
    for slot, (init, grad) in (("H0@GRAD", h0_grad), ("C0@GRAD", c0_grad)):
        if slot in wanted and init is not None:
            out[slot] = _scatter_init(xp, init, grad, s)
    return out


# -- gru -------------------------------------------------------------------------------------


def _gru_weights(w):
    """The gate [D, 2D] and candidate [D, D] weights from Weight's flat memory (NOTE(rnn-gates))."""
    d = w.shape[0]
    flat = w.reshape(-1)
    return flat[:2 * d * d].reshape(d, 2 * d), flat[2 * d * d:].reshape(d, d)


def _gru_checks(op: str, ins, a, x_slot: str, acts) -> int:
    x, w, b = ins[x_slot], ins["Weight"], ins.get("Bias")
    _rank2(op, x_slot, x)
    check(x.shape[1] % 3 == 0, f"{op}: {x_slot}'s width must be 3 * hidden size, got {x_slot}{list(x.shape)}")
    d = x.shape[1] // 3
    check(tuple(w.shape) == (d, 3 * d), f"{op}: Weight must be [{d}, {3 * d}] for {x_slot}{list(x.shape)}, "
                                        f"got Weight{list(w.shape)}")
    check(b is None or tuple(b.shape) == (1, 3 * d), f"{op}: Bias must be [1, {3 * d}], got Bias{list(b.shape)}"
          if b is not None else "")
    for k in acts:
        name = UNIT_ACTS.get(a[k]) if op == "gru_unit" else a[k]
        check(name in ACTS, f"{op}: {k} {a[k]!r} is not one of "
                            f"{sorted(UNIT_ACTS) if op == 'gru_unit' else list(ACTS)}")
    return d


def _gru_infer(ins, a):
    d = _gru_checks("gru", ins, a, "Input", ("activation", "gate_activation"))
    _check_init("gru", ins, "H0", d)
    x = ins["Input"]
    t = Meta((x.shape[0], d), x.dtype)
    return {"Hidden": t, "BatchGate": Meta((x.shape[0], 3 * d), x.dtype), "BatchResetHiddenPrev": t,
            "BatchHidden": t}


_GRU_ATTRS = {"activation": "tanh", "gate_activation": "sigmoid", "is_reverse": False, "origin_mode": False}


@register("gru", ins=("Input", Slot("H0", dispensable=True), "Weight", Slot("Bias", dispensable=True)),
          outs=("Hidden", Slot("BatchGate", no_grad=True), Slot("BatchResetHiddenPrev", no_grad=True),
                Slot("BatchHidden", no_grad=True)),
          attrs=_GRU_ATTRS, infer=_gru_infer, wants_lod=("Input",),
          grad=grad_of(("Input", "H0", "Weight", "Bias"), out="Hidden",
                       outs=("BatchGate", "BatchResetHiddenPrev", "BatchHidden")))
def gru(xp, ins, a, ctx):
    """A 1-level-LoD GRU over pre-projected gates (NOTE(rnn-batch), NOTE(rnn-gates))."""
    x = ins["Input"]
    s = _schedule("gru", x, a["is_reverse"])
    w, b = ins["Weight"], ins.get("Bias")
    d = w.shape[0]
    wg, wc = _gru_weights(w)
    gates = x.data + b if b is not None else x.data
    ga, na, origin = a["gate_activation"], a["activation"], a["origin_mode"]
    n0 = len(s.rows[0]) if s.rows else 0
    hp_all = _init(xp, ins.get("H0"), s, n0)
    rows_n = s.batch.shape[0]
    bg = xp.empty((rows_n, 3 * d), dtype=gates.dtype)
    br, bh = xp.empty((rows_n, d), dtype=gates.dtype), xp.empty((rows_n, d), dtype=gates.dtype)
    for t, rows in enumerate(s.rows):
        lo, hi = s.bounds[t], s.bounds[t + 1]
        n = hi - lo
        g = gates[xp.asarray(rows)]
        hp = hp_all[:n] if hp_all is not None else None
        ur = g[:, :2 * d] + hp @ wg if hp is not None else g[:, :2 * d]
        u, r = act(xp, ga, ur[:, :d]), act(xp, ga, ur[:, d:])
        if hp is None:
            hp = xp.zeros((n, d), dtype=g.dtype)
            rh, cpre = hp, g[:, 2 * d:]
        else:
            rh = hp * r
            cpre = g[:, 2 * d:] + rh @ wc
        c = act(xp, na, cpre)
        h = (u * hp + c - u * c) if origin else (hp - u * hp + u * c)
        bg[lo:hi] = xp.concatenate([u, r, c], axis=1)
        br[lo:hi], bh[lo:hi] = rh, h
        hp_all = bh[lo:hi]
    return {"Hidden": _to_rows(xp, bh, s), "BatchGate": bg, "BatchResetHiddenPrev": br, "BatchHidden": bh}


@register("gru_grad", ins=("Input", Slot("H0", dispensable=True), "Weight", Slot("Bias", dispensable=True),
                           "BatchGate", "BatchResetHiddenPrev", "BatchHidden", "Hidden@GRAD"),
          outs=tuple(Slot(n + "@GRAD", dispensable=True) for n in ("Input", "H0", "Weight", "Bias")),
          attrs=_GRU_ATTRS, role="backward", wants_lod=("Input",))
def gru_grad(xp, ins, a, ctx):
    """Back through the steps in reverse, as GRUGradKernel."""
    x = ins["Input"]
    s = _schedule("gru_grad", x, a["is_reverse"])
    w = ins["Weight"]
    d = w.shape[0]
    wg, wc = _gru_weights(w)
    ga, na, origin = a["gate_activation"], a["activation"], a["origin_mode"]
    bg, br, bh = ins["BatchGate"], ins["BatchResetHiddenPrev"], ins["BatchHidden"]
    dh_all = ins["Hidden@GRAD"][xp.asarray(s.batch)]
    h0 = ins.get("H0")
    n0 = len(s.rows[0]) if s.rows else 0
    h0o = _init(xp, h0, s, n0)
    dg_all = xp.empty_like(bg)
    dwg, dwc = xp.zeros_like(wg), xp.zeros_like(wc)
    carry = dh0 = None
    for t in range(len(s.rows) - 1, -1, -1):
        lo, hi = s.bounds[t], s.bounds[t + 1]
        n = hi - lo
        dh = dh_all[lo:hi]
        if carry is not None:  # from step t + 1, whose sequences are a prefix of these
            m = carry.shape[0]
            dh = xp.concatenate([dh[:m] + carry, dh[m:]])
        g = bg[lo:hi]
        u, r, c = g[:, :d], g[:, d:2 * d], g[:, 2 * d:]
        if t > 0:
            plo = s.bounds[t - 1]
            hp = bh[plo:plo + n]
        else:
            hp = h0o
        hpv = hp if hp is not None else xp.zeros((n, d), dtype=dh.dtype)
        if origin:
            du, dhp, dc = dh * (hpv - c), dh * u, act_grad(na, dh * (1.0 - u), c)
        else:
            du, dhp, dc = dh * (c - hpv), dh * (1.0 - u), act_grad(na, dh * u, c)
        du = act_grad(ga, du, u)
        if hp is not None:
            drh = dc @ wc.T
            dwc += br[lo:hi].T @ dc
            dr = act_grad(ga, drh * hp, r)
            dur = xp.concatenate([du, dr], axis=1)
            dhp = dhp + drh * r + dur @ wg.T
            dwg += hp.T @ dur
        else:
            dr = xp.zeros_like(du)
        dg_all[lo:hi] = xp.concatenate([du, dr, dc], axis=1)
        carry = dhp if hp is not None else None
        if t == 0:
            dh0 = dhp
    out = {}
    if "Input@GRAD" in ctx.outputs:
        out["Input@GRAD"] = _to_rows(xp, dg_all, s)
    if "Weight@GRAD" in ctx.outputs:
        out["Weight@GRAD"] = xp.concatenate([dwg.reshape(-1), dwc.reshape(-1)]).reshape(w.shape)
    if "Bias@GRAD" in ctx.outputs and ins.get("Bias") is not None:
        out["Bias@GRAD"] = dg_all.sum(0)[None, :]
    if "H0@GRAD" in ctx.outputs and h0 is not None:
        out["H0@GRAD"] = _scatter_init(xp, h0, dh0, s)
    return out


# -- lstm_unit -------------------------------------------------------------------------------


def _lstm_unit_infer(ins, a):
    x, c = ins["X"], ins["C_prev"]
    _rank2("lstm_unit", "X", x)
    _rank2("lstm_unit", "C_prev", c)
    check(_fits(x.shape[1], 4 * c.shape[1]) and _fits(x.shape[0], c.shape[0]),
          f"lstm_unit: X must be [N, 4 * D] for C_prev [N, D], got X{list(x.shape)} and C_prev{list(c.shape)}")
    out = Meta(tuple(c.shape), x.dtype)
    return {"C": out, "H": out}


def _lstm_unit_grad_maker(op) -> list:
    outs = {s + "@GRAD": [op.grad_of(op.inputs[s][0])] for s in ("X", "C_prev") if op.inputs[s][0] in op.need}
    if not outs:
        return []
    ins = {s: list(op.inputs[s]) for s in ("X", "C_prev")}
    ins.update({s: list(op.outputs[s]) for s in ("C", "H")})
    ins.update({s + "@GRAD": [grad_name(op.outputs[s][0])] for s in ("C", "H")})
    return [OpSpec("lstm_unit_grad", ins, outs, dict(op.attrs))]


def _lstm_unit_gates(xp, x, forget_bias: float):
    d = x.shape[1] // 4
    sig = lambda v: act(xp, "sigmoid", v, clip=False)  # noqa: E731 - lstm_unit_op.h's plain sigmoid
    return (sig(x[:, :d]), sig(x[:, d:2 * d] + forget_bias), sig(x[:, 2 * d:3 * d]),
            act(xp, "tanh", x[:, 3 * d:], clip=False))


@register("lstm_unit", ins=("X", "C_prev"), outs=("C", "H"), attrs={"forget_bias": 0.0}, infer=_lstm_unit_infer,
          grad=_lstm_unit_grad_maker)
def lstm_unit(xp, ins, a, ctx):
    """One LSTM step on [input, forget, output, candidate] gates (NOTE(rnn-gates))."""
    i, f, o, g = _lstm_unit_gates(xp, ins["X"], a["forget_bias"])
    c = f * ins["C_prev"] + i * g
    return {"C": c, "H": o * act(xp, "tanh", c, clip=False)}


@register("lstm_unit_grad", ins=("X", "C_prev", "C", "H", "C@GRAD", "H@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("C_prev@GRAD", dispensable=True)),
          attrs={"forget_bias": 0.0}, role="backward")
def lstm_unit_grad(xp, ins, a, ctx):
    i, f, o, g = _lstm_unit_gates(xp, ins["X"], a["forget_bias"])
    cp, dh = ins["C_prev"], ins["H@GRAD"]
    tc = act(xp, "tanh", ins["C"], clip=False)
    dc = ins["C@GRAD"] + dh * o * (1.0 - tc * tc)
    out = {}
    if "X@GRAD" in ctx.outputs:
        out["X@GRAD"] = xp.concatenate([dc * g * i * (1.0 - i), dc * cp * f * (1.0 - f), dh * tc * o * (1.0 - o),
                                        dc * i * (1.0 - g * g)], axis=1)
    if "C_prev@GRAD" in ctx.outputs:
        out["C_prev@GRAD"] = dc * f
    return out


# -- gru_unit --------------------------------------------------------------------------------


def _gru_unit_infer(ins, a):
    d = _gru_checks("gru_unit", ins, a, "Input", ("activation", "gate_activation"))
    x, h = ins["Input"], ins["HiddenPrev"]
    _rank2("gru_unit", "HiddenPrev", h)
    check(_fits(h.shape[1], d) and _fits(h.shape[0], x.shape[0]),
          f"gru_unit: HiddenPrev must be [N, {d}] for Input{list(x.shape)}, got HiddenPrev{list(h.shape)}")
    out = Meta((x.shape[0], d), x.dtype)
    return {"Gate": Meta(tuple(x.shape), x.dtype), "ResetHiddenPrev": out, "Hidden": out}


_GRU_UNIT_ATTRS = {"activation": 2, "gate_activation": 1, "origin_mode": False}


@register("gru_unit", ins=("Input", "HiddenPrev", "Weight", Slot("Bias", dispensable=True)),
          outs=(Slot("Gate", no_grad=True), Slot("ResetHiddenPrev", no_grad=True), "Hidden"),
          attrs=_GRU_UNIT_ATTRS, infer=_gru_unit_infer, lod="drop",  # Fluid's GRUUnitOp shares no LoD
          grad=grad_of(("Input", "HiddenPrev", "Weight", "Bias"), out="Hidden", outs=("Gate", "ResetHiddenPrev")))
def gru_unit(xp, ins, a, ctx):
    """One GRU step (NOTE(rnn-gates)); Gate holds the activated [u, r, c]."""
    x, hp, w, b = ins["Input"], ins["HiddenPrev"], ins["Weight"], ins.get("Bias")
    d = w.shape[0]
    wg, wc = _gru_weights(w)
    ga, na = UNIT_ACTS[a["gate_activation"]], UNIT_ACTS[a["activation"]]
    g = (x + b if b is not None else x)
    ur = g[:, :2 * d] + hp @ wg
    u, r = act(xp, ga, ur[:, :d], clip=False), act(xp, ga, ur[:, d:], clip=False)
    rh = r * hp
    c = act(xp, na, g[:, 2 * d:] + rh @ wc, clip=False)
    h = c + u * (hp - c) if a["origin_mode"] else u * (c - hp) + hp
    return {"Gate": xp.concatenate([u, r, c], axis=1), "ResetHiddenPrev": rh, "Hidden": h}


@register("gru_unit_grad", ins=("Input", "HiddenPrev", "Weight", Slot("Bias", dispensable=True), "Gate",
                                "ResetHiddenPrev", "Hidden@GRAD"),
          outs=tuple(Slot(n + "@GRAD", dispensable=True) for n in ("Input", "HiddenPrev", "Weight", "Bias")),
          attrs=_GRU_UNIT_ATTRS, role="backward")
def gru_unit_grad(xp, ins, a, ctx):
    """As GRUUnitGradKernel (Gate@GRAD and ResetHiddenPrev@GRAD are not read)."""
    hp, w, gate, dh = ins["HiddenPrev"], ins["Weight"], ins["Gate"], ins["Hidden@GRAD"]
    d = w.shape[0]
    wg, wc = _gru_weights(w)
    ga, na = UNIT_ACTS[a["gate_activation"]], UNIT_ACTS[a["activation"]]
    u, r, c = gate[:, :d], gate[:, d:2 * d], gate[:, 2 * d:]
    if a["origin_mode"]:
        du, dc, dhp = act_grad(ga, dh * (hp - c), u), act_grad(na, dh * (1.0 - u), c), dh * u
    else:
        du, dc, dhp = act_grad(ga, dh * (c - hp), u), act_grad(na, dh * u, c), dh * (1.0 - u)
    drh = dc @ wc.T
    dr = act_grad(ga, drh * hp, r)
    dur = xp.concatenate([du, dr], axis=1)
    out = {}
    if "Input@GRAD" in ctx.outputs or "Bias@GRAD" in ctx.outputs:
        dg = xp.concatenate([dur, dc], axis=1)
        out.update({k: v for k, v in (("Input@GRAD", dg), ("Bias@GRAD", dg.sum(0)[None, :])) if k in ctx.outputs})
    if "Weight@GRAD" in ctx.outputs:
        dwg, dwc = hp.T @ dur, ins["ResetHiddenPrev"].T @ dc
        out["Weight@GRAD"] = xp.concatenate([dwg.reshape(-1), dwc.reshape(-1)]).reshape(w.shape)
    if "HiddenPrev@GRAD" in ctx.outputs:
        out["HiddenPrev@GRAD"] = dhp + drh * r + dur @ wg.T
    return out
