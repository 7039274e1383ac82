"""``lstmp``: Fluid 1.8's LSTM with a recurrent projection (lstmp_op), and its gradient.

It runs over the sequences of a 1-level LoD tensor of pre-projected gates [T, 4D] in the batch
order of NOTE(rnn-batch) in ops/rnn.py, with lstm's gate layout and activations
(NOTE(rnn-gates), NOTE(rnn-act)): Weight [P, 4D] is the recurrent weight of the projected
state, ProjWeight [D, P], Bias [1, 4D] or [1, 7D] with peepholes. H0 [N, P] and C0 [N, D] are
optional, independently.

NOTE(lstmp-1.8): one step, as LSTMPKernel and its LstmUnitFunctor:

    g = x_t + b + r_{t-1} W            (r_{-1} = H0 or nothing)
    c = act_cand(g_c) act_g(g_i + c_{t-1} W_ic) + c_{t-1} act_g(g_f + c_{t-1} W_fc)
    c = clip(c, -cell_clip, cell_clip)  (only when cell_clip > 0)
    h = act_g(g_o + c W_oc) act_cell(c)
    r = act_p(h ProjWeight), then clip(r, -proj_clip, proj_clip) when proj_clip > 0

where act_p is **cell_activation**, not proj_activation, whenever proj_activation is not
"identity" (Fluid 1.8's kernel passes cell_act there; its outputs were checked against Fluid
1.8.5: proj_activation="relu" gives negative projections with the default tanh cell). act_p
is the plain function (Eigen's), not NOTE(rnn-act)'s clipped form.

The gradient is LSTMPGradKernel's: only Projection@GRAD flows in (Cell@GRAD is not read, as in
lstm); where a cell state or a projection was clipped (|c| >= cell_clip > 0, |r| >= proj_clip
> 0) its gradient is zero, for a cell state including what flows in from the next step (checked
against Fluid 1.8.5's gradients). Outputs: Projection [T, P] and
Cell [T, D] in the input's row order, with its LoD; BatchGate (activated gates),
BatchCellPreAct (act_cell(c)) and BatchHidden (h) in batch order.
"""
from __future__ import annotations

from placegroup.ops.registry import Meta, Slot, check, grad_of, register
from placegroup.ops.rnn import ACTS, _init, _schedule, _to_rows, act, act_grad, cell_grad, lstm_grad_outputs

_ATTRS = {"use_peepholes": True, "is_reverse": False, "cell_clip": 0.0, "proj_clip": 0.0,
          "gate_activation": "sigmoid", "cell_activation": "tanh", "candidate_activation": "tanh",
          "proj_activation": "tanh"}
_NAMES = ("Input", "H0", "C0", "Weight", "ProjWeight", "Bias")


def _infer(ins, a):
    x, w, pw, b = ins["Input"], ins["Weight"], ins["ProjWeight"], ins["Bias"]
    check(len(x.shape) == 2 and x.shape[1] % 4 == 0,
          f"lstmp: Input must be [T, 4 * hidden size], got Input{list(x.shape)}")
    d = x.shape[1] // 4
    check(len(pw.shape) == 2 and pw.shape[0] == d,
          f"lstmp: ProjWeight must be [{d}, P], got ProjWeight{list(pw.shape)}")
    p = pw.shape[1]
    check(tuple(w.shape) == (p, 4 * d),
          f"lstmp: Weight must be [{p}, {4 * d}] (P, 4 * hidden), got Weight{list(w.shape)}")
    bw = 7 * d if a["use_peepholes"] else 4 * d
    check(tuple(b.shape) == (1, bw), f"lstmp: Bias must be [1, {bw}] (use_peepholes={a['use_peepholes']}), "
                                     f"got Bias{list(b.shape)}")
    for slot, width in (("H0", p), ("C0", d)):
        m = ins.get(slot)
        check(m is None or (len(m.shape) == 2 and m.shape[1] in (width, -1)),
              f"lstmp: {slot} must be [N, {width}], got {slot}{list(m.shape) if m else ''}")
    for k in ("gate_activation", "cell_activation", "candidate_activation", "proj_activation"):
        check(a[k] in ACTS, f"lstmp: {k} {a[k]!r} is not one of {list(ACTS)}")
    check(a["cell_clip"] >= 0 and a["proj_clip"] >= 0,
          f"lstmp: cell_clip and proj_clip must be >= 0, got {a['cell_clip']} and {a['proj_clip']}")
    t = x.shape[0]
    return {"Projection": Meta((t, p), x.dtype), "Cell": Meta((t, d), x.dtype), "BatchGate": Meta((t, 4 * d), x.dtype),
            "BatchCellPreAct": Meta((t, d), x.dtype), "BatchHidden": Meta((t, d), x.dtype)}


def _peeps(xp, b, d: int, on: bool):
    return (b[0, 4 * d:5 * d], b[0, 5 * d:6 * d], b[0, 6 * d:]) if on else (0.0, 0.0, 0.0)


@register("lstmp", ins=("Input", Slot("H0", dispensable=True), Slot("C0", dispensable=True), "Weight", "ProjWeight",
                        "Bias"),
          outs=("Projection", "Cell", Slot("BatchGate", no_grad=True), Slot("BatchCellPreAct", no_grad=True),
                Slot("BatchHidden", no_grad=True)),
          attrs=_ATTRS, infer=_infer, wants_lod=("Input",),
          grad=grad_of(_NAMES, out="Projection", outs=("Projection", "Cell", "BatchGate", "BatchCellPreAct",
                                                         "BatchHidden")))
def lstmp(xp, ins, a, ctx):
    """A 1-level-LoD LSTM with a recurrent projection (NOTE(lstmp-1.8))."""
    x = ins["Input"]
    s = _schedule("lstmp", x, a["is_reverse"])
    w, pw, b = ins["Weight"], ins["ProjWeight"], ins["Bias"]
    d, p = pw.shape
    gates = x.data + b[:, :4 * d]
    ci, cf, co = _peeps(xp, b, d, a["use_peepholes"])
    ga, ca, na = a["gate_activation"], a["cell_activation"], a["candidate_activation"]
    pa = ca if a["proj_activation"] != "identity" else "identity"
    cclip, pclip = a["cell_clip"], a["proj_clip"]
    n0 = len(s.rows[0]) if s.rows else 0
    r_prev, c_prev = _init(xp, ins.get("H0"), s, n0), _init(xp, ins.get("C0"), s, n0)
    rows = s.batch.shape[0]
    bg = xp.empty((rows, 4 * d), dtype=gates.dtype)
    bc, ba, bh = (xp.empty((rows, d), dtype=gates.dtype) for _ in range(3))
    br = xp.empty((rows, p), dtype=gates.dtype)
    for t, idx in enumerate(s.rows):
        lo, hi = s.bounds[t], s.bounds[t + 1]
        n = hi - lo
        g = gates[xp.asarray(idx)]
        if r_prev is not None:
            g = g + r_prev[:n] @ w
        cp = c_prev[:n] if c_prev is not None else xp.zeros((n, d), dtype=g.dtype)
        cand = act(xp, na, g[:, :d])
        i = act(xp, ga, g[:, d:2 * d] + cp * ci)
        f = act(xp, ga, g[:, 2 * d:3 * d] + cp * cf)
        c = cand * i + cp * f
        if cclip > 0:
            c = xp.clip(c, -cclip, cclip)
        o = act(xp, ga, g[:, 3 * d:] + c * co)
        ac = act(xp, ca, c)
        h = o * ac
        r = act(xp, pa, h @ pw, clip=False)
        if pclip > 0:
            r = xp.clip(r, -pclip, pclip)
        bg[lo:hi] = xp.concatenate([cand, i, f, o], axis=1)
        bc[lo:hi], ba[lo:hi], bh[lo:hi], br[lo:hi] = c, ac, h, r
        r_prev, c_prev = br[lo:hi], c
    return {"Projection": _to_rows(xp, br, s), "Cell": _to_rows(xp, bc, s), "BatchGate": bg, "BatchCellPreAct": ba,
            "BatchHidden": bh}


@register("lstmp_grad", ins=("Input", Slot("H0", dispensable=True), Slot("C0", dispensable=True), "Weight",
                             "ProjWeight", "Bias", "Projection", "Cell", "BatchGate", "BatchCellPreAct", "BatchHidden",
                             "Projection@GRAD"),
          outs=tuple(Slot(n + "@GRAD", dispensable=True) for n in _NAMES), attrs=_ATTRS, role="backward",
          wants_lod=("Input",))
def lstmp_grad(xp, ins, a, ctx):
    """Back through the steps in reverse, as LSTMPGradKernel (NOTE(lstmp-1.8))."""
    x = ins["Input"]
    s = _schedule("lstmp_grad", x, a["is_reverse"])
    w, pw, b = ins["Weight"], ins["ProjWeight"], ins["Bias"]
    d, p = pw.shape
    peep = a["use_peepholes"]
    ci, cf, co = _peeps(xp, b, d, peep)
    ga, ca, na = a["gate_activation"], a["cell_activation"], a["candidate_activation"]
    pa = ca if a["proj_activation"] != "identity" else "identity"
    cclip, pclip = a["cell_clip"], a["proj_clip"]
    batch = xp.asarray(s.batch)
    br, bc = ins["Projection"][batch], ins["Cell"][batch]
    bg, ba, bh = ins["BatchGate"], ins["BatchCellPreAct"], ins["BatchHidden"]
    dr_all = ins["Projection@GRAD"][batch]
    h0, c0 = ins.get("H0"), ins.get("C0")
    n0 = len(s.rows[0]) if s.rows else 0
    h0o, c0o = _init(xp, h0, s, n0), _init(xp, c0, s, n0)
    dg_all = xp.empty_like(bg)
    dw, dpw = xp.zeros_like(w), xp.zeros_like(pw)
    dpeep = [xp.zeros(d, dtype=w.dtype) for _ in range(3)]
    dr_carry = dc_carry = dh0 = dc0 = None
    for t in range(len(s.rows) - 1, -1, -1):
        lo, hi = s.bounds[t], s.bounds[t + 1]
        n = hi - lo
        dr = dr_all[lo:hi]
        dc = xp.zeros((n, d), dtype=dr.dtype)
        if dr_carry is not None:  # from step t + 1, whose sequences are a prefix of these
            m = dr_carry.shape[0]
            dr = xp.concatenate([dr[:m] + dr_carry, dr[m:]])
            dc[:m] = dc_carry
        if pclip > 0:
            dr = xp.where(xp.abs(br[lo:hi]) >= pclip, xp.zeros_like(dr), dr)
        dr = act_grad(pa, dr, br[lo:hi])
        h = bh[lo:hi]
        dpw += h.T @ dr
        dh = dr @ pw.T
        if t > 0:
            plo = s.bounds[t - 1]
            rp, cp = br[plo:plo + n], bc[plo:plo + n]
        else:
            rp, cp = h0o, (c0o if c0o is not None else xp.zeros((n, d), dtype=dr.dtype))
        dg, dc_carry, peep_grads = cell_grad(xp, bg[lo:hi], bc[lo:hi], ba[lo:hi], cp, dh, dc, (ci, cf, co),
                                             (ga, ca, na), cclip)
        if peep:
            for k, v in enumerate(peep_grads):
                dpeep[k] += v.sum(0)
        dg_all[lo:hi] = dg
        dr_carry = dg @ w.T if rp is not None else None
        if rp is not None:
            dw += rp.T @ dg
        if t == 0:
            dh0, dc0 = dr_carry, dc_carry
    out = lstm_grad_outputs(xp, ctx.outputs, s, dg_all, dw, dpeep if peep else [], b, (h0, dh0), (c0, dc0))
    if "ProjWeight@GRAD" in ctx.outputs:
        out["ProjWeight@GRAD"] = dpw
    return out
