"""OpCases for lstmp (ops/lstmp.py) and cudnn_lstm (ops/cudnn_lstm.py); tests/op_cases.py
gathers them.

The references run one sequence (one batch column) at a time, step by step, in float64, from
the formulas of NOTE(lstmp-1.8) and NOTE(cudnn-lstm-layout), never in the kernels' batch
order. Fluid 1.8.5's own lstmp numbers are checked in tests/test_fluid_tree_layers.py, and
cudnn_lstm's one-layer layout against Fluid 1.8's lstm_naive there too.
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ops.cudnn_lstm import weight_size
from placegroup.values import LoDTensor
from tests.op_case import N, OpCase, spec


def _sig(x):
    return 1 / (1 + np.exp(-x))


_ACT = {"sigmoid": _sig, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0), "identity": lambda x: x}

# -- lstmp ------------------------------------------------------------------------------------

_LOD = [[0, 3, 3, 4, 8]]  # lengths 3, 0, 1, 4
D, P = 3, 2


def _lstmp_ref(i, a):
    x, w, pw, b = i["Input"], i["Weight"], i["ProjWeight"], i["Bias"]
    off = x.offsets[0]
    ga, ca, na = _ACT[a["gate_activation"]], _ACT[a["cell_activation"]], _ACT[a["candidate_activation"]]
    pa = _ACT[a["cell_activation"] if a["proj_activation"] != "identity" else "identity"]
    peep = a["use_peepholes"]
    proj, cell = np.zeros((x.data.shape[0], P)), np.zeros((x.data.shape[0], D))
    for s in range(len(off) - 1):
        r = i["H0"][s] if "H0" in i else np.zeros(P)
        c = i["C0"][s] if "C0" in i else np.zeros(D)
        rows = range(off[s], off[s + 1])
        for t in (reversed(rows) if a["is_reverse"] else rows):
            g = x.data[t] + b[0, :4 * D] + r @ w
            ci, cf, co = (b[0, 4 * D:5 * D], b[0, 5 * D:6 * D], b[0, 6 * D:]) if peep else (0, 0, 0)
            c = na(g[:D]) * ga(g[D:2 * D] + c * ci) + c * ga(g[2 * D:3 * D] + c * cf)
            if a["cell_clip"] > 0:
                c = np.clip(c, -a["cell_clip"], a["cell_clip"])
            h = ga(g[3 * D:] + c * co) * ca(c)
            r = pa(h @ pw)
            if a["proj_clip"] > 0:
                r = np.clip(r, -a["proj_clip"], a["proj_clip"])
            proj[t], cell[t] = r, c
    return {"Projection": proj, "Cell": cell}


def _lstmp_sample(peep: bool = True, init: bool = False, scale: float = 0.5):
    def sample(r):
        out = {"Input": LoDTensor(N(r, 8, 4 * D), _LOD), "Weight": scale * N(r, P, 4 * D),
               "ProjWeight": scale * N(r, D, P), "Bias": scale * N(r, 1, (7 if peep else 4) * D)}
        if init:
            out.update(H0=N(r, 4, P), C0=N(r, 4, D))
        return out

    return sample


_LSTMP_GRADS = ("Input", "Weight", "ProjWeight", "Bias")
_LSTMP_ERRORS = (
    ({"Input": spec(8, 12), "Weight": spec(2, 12), "ProjWeight": spec(3, 2), "Bias": spec(1, 12)}, {}, ProgramError,
     r"Bias must be \[1, 21\]"),
    ({"Input": spec(8, 12), "Weight": spec(3, 12), "ProjWeight": spec(3, 2), "Bias": spec(1, 21)}, {}, ProgramError,
     r"Weight must be \[2, 12\]"),
    ({"Input": spec(8, 12), "Weight": spec(2, 12), "ProjWeight": spec(3, 2), "Bias": spec(1, 21)},
     {"proj_activation": "gelu"}, ProgramError, "proj_activation 'gelu' is not one of"),
    ({"Input": np.zeros((8, 12)), "Weight": np.zeros((2, 12)), "ProjWeight": np.zeros((3, 2)),
      "Bias": np.zeros((1, 21))}, {}, ValueError, "Input is a dense array, not a sequence"),
)

CASES: list[OpCase] = [
    OpCase("lstmp", _lstmp_sample(), _lstmp_ref, grad=_LSTMP_GRADS, grad_outs=("Projection",), name="peepholes",
           errors=_LSTMP_ERRORS),
    OpCase("lstmp", _lstmp_sample(peep=False, init=True), _lstmp_ref, grad=_LSTMP_GRADS + ("H0", "C0"),
           grad_outs=("Projection",), name="reverse_init",
           attrs={"use_peepholes": False, "is_reverse": True, "proj_activation": "identity"}),
    OpCase("lstmp", _lstmp_sample(), _lstmp_ref, grad=_LSTMP_GRADS, grad_outs=("Projection",), name="relu_cell",
           attrs={"cell_activation": "relu", "candidate_activation": "sigmoid", "proj_activation": "tanh"}),
    OpCase("lstmp", _lstmp_sample(scale=1.5), _lstmp_ref, grad=_LSTMP_GRADS, grad_outs=("Projection",), name="clip",
           attrs={"cell_clip": 0.4, "proj_clip": 0.3}),
]

# -- cudnn_lstm -------------------------------------------------------------------------------

T, B, I, H = 4, 3, 2, 3


def _cudnn_params(w, layers: int, dirs: int):
    """Per pseudo layer (Wx [4H, in], R [4H, H], bx, bh), read off the flat weight as
    NOTE(cudnn-lstm-layout) says, one piece at a time."""
    mats, pos = [], 0
    for p in range(layers * dirs):
        width = I if p < dirs else dirs * H
        gates = []
        for _ in range(4):
            gates.append(w[pos:pos + H * width].reshape(H, width))
            pos += H * width
        rec = []
        for _ in range(4):
            rec.append(w[pos:pos + H * H].reshape(H, H))
            pos += H * H
        mats.append((np.concatenate(gates), np.concatenate(rec)))
    out = []
    for wx, r in mats:
        bx, bh = w[pos:pos + 4 * H], w[pos + 4 * H:pos + 8 * H]
        pos += 8 * H
        out.append((wx, r, bx, bh))
    assert pos == w.shape[0]
    return out


def _cudnn_ref(i, a):
    layers, dirs = a["num_layers"], 2 if a["is_bidirec"] else 1
    params = _cudnn_params(i["W"], layers, dirs)
    inp = i["Input"].astype(np.float64)
    last_h, last_c = np.zeros(i["InitH"].shape), np.zeros(i["InitC"].shape)
    for layer in range(layers):
        outs = []
        for d in range(dirs):
            p = layer * dirs + d
            wx, r, bx, bh = params[p]
            y = np.zeros((T, B, H))
            for b in range(B):
                h, c = i["InitH"][p, b], i["InitC"][p, b]
                for t in (range(T - 1, -1, -1) if d else range(T)):
                    g = wx @ inp[t, b] + bx + r @ h + bh
                    c = _sig(g[H:2 * H]) * c + _sig(g[:H]) * np.tanh(g[2 * H:3 * H])
                    h = _sig(g[3 * H:]) * np.tanh(c)
                    y[t, b] = h
                last_h[p, b], last_c[p, b] = h, c
            outs.append(y)
        inp = np.concatenate(outs, axis=-1)
    return {"Out": inp, "last_h": last_h, "last_c": last_c}


def _cudnn_sample(layers: int, bidirec: bool):
    dirs = 2 if bidirec else 1

    def sample(r):
        return {"Input": N(r, T, B, I), "InitH": 0.5 * N(r, layers * dirs, B, H),
                "InitC": 0.5 * N(r, layers * dirs, B, H), "W": 0.5 * N(r, weight_size(I, H, layers, bidirec))}

    return sample


def _cudnn_attrs(layers: int, bidirec: bool, **kw) -> dict:
    return {"max_len": T, "input_size": I, "hidden_size": H, "num_layers": layers, "is_bidirec": bidirec, **kw}


def _dropout_check(run, a):
    """Between layers in training: a counter-based mask, the same for one step, another for
    the next; none with is_test or dropout_prob 0."""
    ins = _cudnn_sample(2, False)(np.random.default_rng(3))
    ins = {k: v.astype(np.float32) for k, v in ins.items()}
    base = _cudnn_attrs(2, False, seed=5)
    plain = run(ins, {**base, "dropout_prob": 0.0})["Out"]
    test = run(ins, {**base, "dropout_prob": 0.5, "is_test": True})["Out"]
    np.testing.assert_allclose(test, plain)
    drop = run(ins, {**base, "dropout_prob": 0.5})["Out"]
    np.testing.assert_allclose(run(ins, {**base, "dropout_prob": 0.5})["Out"], drop)
    assert not np.allclose(drop, plain)


_CUDNN_GRADS = ("Input", "InitH", "InitC", "W")
CASES += [
    OpCase("cudnn_lstm", _cudnn_sample(1, False), _cudnn_ref, attrs=_cudnn_attrs(1, False), grad=_CUDNN_GRADS,
           name="one_layer", batch=(),
           errors=(({"Input": spec(T, B, I), "InitH": spec(2, B, H), "InitC": spec(1, B, H),
                     "W": spec(weight_size(I, H, 1, False))}, _cudnn_attrs(1, False), ProgramError,
                    r"InitH must be \[num_layers \* 1, batch, hidden_size\]"),
                   ({"Input": spec(T, B, I), "InitH": spec(1, B, H), "InitC": spec(1, B, H), "W": spec(7)},
                    _cudnn_attrs(1, False), ProgramError, r"W must be flat \[84\]"),
                   ({"Input": np.zeros((T, B, I)), "InitH": np.zeros((1, B, H)), "InitC": np.zeros((1, B, H)),
                     "W": np.zeros(weight_size(I, H, 1, False))}, _cudnn_attrs(1, False, max_len=2), ValueError,
                    "more than max_len=2"))),
    OpCase("cudnn_lstm", _cudnn_sample(2, True), _cudnn_ref, attrs=_cudnn_attrs(2, True), grad=_CUDNN_GRADS,
           name="two_layers_bidirec", batch=()),
    OpCase("cudnn_lstm", _cudnn_sample(2, False), _cudnn_ref, attrs=_cudnn_attrs(2, False, dropout_prob=0.0,
                                                                                 is_test=True),
           grad=("Input", "W"), name="two_layers", batch=()),
    OpCase("cudnn_lstm", _cudnn_sample(2, False), check=_dropout_check, grad=("Input", "InitH", "W"), name="dropout",
           attrs=_cudnn_attrs(2, False, dropout_prob=0.5, seed=5), batch=()),
]
