"""OpCases for the recurrent ops (ops/rnn.py); tests/op_cases.py gathers them.

The references run one sequence at a time, one row at a time, written from Fluid 1.8's
kernels (math/detail/lstm_kernel.h, gru_kernel.h, lstm_unit_op.h, gru_unit_op.h), so they
check the batched, reordered kernels by another route. The LoD has an empty sequence and
sequences of different lengths, so the batch order differs from the input's. Only Hidden (and
lstm_unit's H and C) get a cotangent in the gradient check: the Batch* outputs are internal,
and Fluid's lstm_grad ignores Cell@GRAD (NOTE(rnn-gates)).
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import ProgramError
from placegroup.values import LoDTensor
from tests.op_case import N, OpCase, spec

LOD = [[0, 3, 3, 4, 8]]  # lengths 3, 0, 1, 4
D = 3


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


ACT = {"sigmoid": _sig, "tanh": np.tanh, "relu": lambda x: np.maximum(x, 0), "identity": lambda x: x}


def _steps(o, k, reverse):
    rows = range(o[k], o[k + 1])
    return reversed(rows) if reverse else rows


# -- lstm ------------------------------------------------------------------------------------


def _lstm_sample(peep=True, init=False):
    def sample(r):
        ins = {"Input": LoDTensor(N(r, 8, 4 * D) * 0.7, LOD), "Weight": N(r, D, 4 * D) * 0.5,
               "Bias": N(r, 1, (7 if peep else 4) * D) * 0.5}
        if init:
            ins["H0"], ins["C0"] = N(r, 4, D), N(r, 4, D)
        return ins
    return sample


def _lstm_ref(i, a):
    x, w, b = i["Input"], i["Weight"], i["Bias"]
    o, data = x.offsets[0], x.data
    ga, ca, na = (ACT[a[k]] for k in ("gate_activation", "cell_activation", "candidate_activation"))
    peep = b[0, 4 * D:] if a["use_peepholes"] else np.zeros(3 * D, b.dtype)
    hidden, cell = np.zeros((len(data), D), data.dtype), np.zeros((len(data), D), data.dtype)
    for k in range(len(o) - 1):
        h = i["H0"][k] if "H0" in i else np.zeros(D, data.dtype)
        c = i["C0"][k] if "C0" in i else np.zeros(D, data.dtype)
        for row in _steps(o, k, a["is_reverse"]):
            g = data[row] + b[0, :4 * D] + h @ w
            cand = na(g[:D])
            ig = ga(g[D:2 * D] + c * peep[:D])
            fg = ga(g[2 * D:3 * D] + c * peep[D:2 * D])
            c = cand * ig + c * fg
            og = ga(g[3 * D:] + c * peep[2 * D:])
            h = og * ca(c)
            hidden[row], cell[row] = h, c
    return {"Hidden": hidden, "Cell": cell}  # the executor gives them Input's LoD ("share")


_LSTM_ERR_ATTRS = {"use_peepholes": True, "is_reverse": False, "gate_activation": "sigmoid",
                   "cell_activation": "tanh", "candidate_activation": "tanh"}
_LSTM_GRADS = ("Input", "Weight", "Bias")

CASES: list[OpCase] = [
    OpCase("lstm", _lstm_sample(), _lstm_ref, grad=_LSTM_GRADS, grad_outs=("Hidden",), name="peephole",
           errors=(({"Input": spec(8, 10), "Weight": spec(2, 8), "Bias": spec(1, 14)}, _LSTM_ERR_ATTRS,
                    ProgramError, r"lstm: Input's width must be 4 \* hidden size, got Input\[8, 10\]"),
                   ({"Input": spec(8, 12), "Weight": spec(3, 8), "Bias": spec(1, 21)}, _LSTM_ERR_ATTRS,
                    ProgramError, r"Weight must be \[3, 12\] .* got Weight\[3, 8\]"),
                   ({"Input": spec(8, 12), "Weight": spec(3, 12), "Bias": spec(1, 12)}, _LSTM_ERR_ATTRS,
                    ProgramError, r"Bias must be \[1, 21\] \(use_peepholes=True\), got Bias\[1, 12\]"),
                   ({"Input": spec(8, 12), "Weight": spec(3, 12), "Bias": spec(1, 21), "H0": spec(4, 3)},
                    _LSTM_ERR_ATTRS, ProgramError, "H0 and C0 must be given together"),
                   ({"Input": spec(8, 12), "Weight": spec(3, 12), "Bias": spec(1, 21)},
                    {**_LSTM_ERR_ATTRS, "gate_activation": "softmax"}, ProgramError,
                    r"gate_activation 'softmax' is not one of"),
                   ({"Input": np.zeros((8, 12), np.float32), "Weight": spec(3, 12), "Bias": spec(1, 21)},
                    _LSTM_ERR_ATTRS, ValueError, "lstm: Input is a dense array, not a sequence"))),
    OpCase("lstm", _lstm_sample(peep=False, init=True), _lstm_ref, attrs={"use_peepholes": False},
           grad=_LSTM_GRADS + ("H0", "C0"), grad_outs=("Hidden",), name="h0_c0"),
    OpCase("lstm", _lstm_sample(init=True), _lstm_ref,
           attrs={"is_reverse": True, "gate_activation": "tanh", "cell_activation": "relu",
                  "candidate_activation": "identity"},
           grad=_LSTM_GRADS + ("H0", "C0"), grad_outs=("Hidden",), name="reverse_acts"),
]


# -- gru -------------------------------------------------------------------------------------


def _gru_sample(bias=True, init=False):
    def sample(r):
        ins = {"Input": LoDTensor(N(r, 8, 3 * D) * 0.7, LOD), "Weight": N(r, D, 3 * D) * 0.5}
        if bias:
            ins["Bias"] = N(r, 1, 3 * D) * 0.5
        if init:
            ins["H0"] = N(r, 4, D)
        return ins
    return sample


def _gru_step(x, h, w, b, ga, na, origin):
    """One GRU step of one sequence: Weight's flat memory is [D, 2D] gates then [D, D]."""
    flat = w.reshape(-1)
    wg, wc = flat[:2 * D * D].reshape(D, 2 * D), flat[2 * D * D:].reshape(D, D)
    g = x + (b[0] if b is not None else 0.0)
    u = ga(g[:D] + h @ wg[:, :D])
    r = ga(g[D:2 * D] + h @ wg[:, D:])
    c = na(g[2 * D:] + (r * h) @ wc)
    return (u * h + (1 - u) * c) if origin else ((1 - u) * h + u * c), u, r, c


def _gru_ref(i, a):
    x = i["Input"]
    o, data = x.offsets[0], x.data
    hidden = np.zeros((len(data), D), data.dtype)
    for k in range(len(o) - 1):
        h = i["H0"][k] if "H0" in i else np.zeros(D, data.dtype)
        for row in _steps(o, k, a["is_reverse"]):
            h = _gru_step(data[row], h, i["Weight"], i.get("Bias"), ACT[a["gate_activation"]], ACT[a["activation"]],
                          a["origin_mode"])[0]
            hidden[row] = h
    return {"Hidden": hidden}


_GRU_ERR_ATTRS = {"activation": "tanh", "gate_activation": "sigmoid", "is_reverse": False, "origin_mode": False}
_GRU_GRADS = ("Input", "Weight")

CASES += [
    OpCase("gru", _gru_sample(), _gru_ref, grad=_GRU_GRADS + ("Bias",), grad_outs=("Hidden",), name="bias",
           errors=(({"Input": spec(8, 10), "Weight": spec(3, 9)}, _GRU_ERR_ATTRS, ProgramError,
                    r"gru: Input's width must be 3 \* hidden size, got Input\[8, 10\]"),
                   ({"Input": spec(8, 9), "Weight": spec(3, 12)}, _GRU_ERR_ATTRS, ProgramError,
                    r"gru: Weight must be \[3, 9\] .* got Weight\[3, 12\]"),
                   ({"Input": spec(8, 9), "Weight": spec(3, 9), "Bias": spec(1, 12)}, _GRU_ERR_ATTRS,
                    ProgramError, r"gru: Bias must be \[1, 9\], got Bias\[1, 12\]"),
                   ({"Input": spec(8, 9), "Weight": spec(3, 9), "H0": spec(4, 2)}, _GRU_ERR_ATTRS,
                    ProgramError, r"gru: H0 must be \[N, 3\]"),
                   ({"Input": np.zeros((8, 9), np.float32), "Weight": spec(3, 9)}, _GRU_ERR_ATTRS,
                    ValueError, "gru: Input is a dense array, not a sequence"))),
    OpCase("gru", _gru_sample(bias=False, init=True), _gru_ref, attrs={"origin_mode": True},
           grad=_GRU_GRADS + ("H0",), grad_outs=("Hidden",), name="origin_h0"),
    OpCase("gru", _gru_sample(init=True), _gru_ref,
           attrs={"is_reverse": True, "activation": "relu", "gate_activation": "tanh"},
           grad=_GRU_GRADS + ("Bias", "H0"), grad_outs=("Hidden",), name="reverse_acts"),
]


# -- lstm_unit, gru_unit ---------------------------------------------------------------------


def _lstm_unit_ref(i, a):
    x, cp = i["X"], i["C_prev"]
    ig, fg, og = _sig(x[:, :D]), _sig(x[:, D:2 * D] + a["forget_bias"]), _sig(x[:, 2 * D:3 * D])
    c = fg * cp + ig * np.tanh(x[:, 3 * D:])
    return {"C": c, "H": og * np.tanh(c)}


def _gru_unit_ref(i, a):
    acts = {0: "identity", 1: "sigmoid", 2: "tanh", 3: "relu"}
    rows = [_gru_step(x, h, i["Weight"], i.get("Bias"), ACT[acts[a["gate_activation"]]], ACT[acts[a["activation"]]],
                      a["origin_mode"]) for x, h in zip(i["Input"], i["HiddenPrev"])]
    h, u, r, c = (np.stack(v) for v in zip(*rows))
    return {"Hidden": h, "Gate": np.concatenate([u, r, c], axis=1), "ResetHiddenPrev": r * i["HiddenPrev"]}


def _gru_unit_sample(bias=True):
    def sample(r):
        ins = {"Input": N(r, 5, 3 * D) * 0.7, "HiddenPrev": N(r, 5, D), "Weight": N(r, D, 3 * D) * 0.5}
        if bias:
            ins["Bias"] = N(r, 1, 3 * D) * 0.5
        return ins
    return sample


_UNIT_ERR_ATTRS = {"activation": 2, "gate_activation": 1, "origin_mode": False}

CASES += [
    OpCase("lstm_unit", lambda r: {"X": N(r, 5, 4 * D), "C_prev": N(r, 5, D)}, _lstm_unit_ref,
           attrs={"forget_bias": 0.5}, grad=("X", "C_prev"), name="forget_bias",
           errors=(({"X": spec(5, 10), "C_prev": spec(5, 3)}, {"forget_bias": 0.0}, ProgramError,
                    r"lstm_unit: X must be \[N, 4 \* D\] for C_prev \[N, D\], got X\[5, 10\] and C_prev\[5, 3\]"),
                   ({"X": spec(5, 12), "C_prev": spec(5)}, {"forget_bias": 0.0}, ProgramError,
                    r"lstm_unit: C_prev must be rank 2, got C_prev\[5\]"))),
    OpCase("gru_unit", _gru_unit_sample(), _gru_unit_ref, grad=("Input", "HiddenPrev", "Weight", "Bias"),
           grad_outs=("Hidden",), name="bias",
           errors=(({"Input": spec(5, 9), "HiddenPrev": spec(5, 4), "Weight": spec(3, 9)}, _UNIT_ERR_ATTRS,
                    ProgramError, r"gru_unit: HiddenPrev must be \[N, 3\] for Input\[5, 9\], got HiddenPrev\[5, 4\]"),
                   ({"Input": spec(5, 9), "HiddenPrev": spec(5, 3), "Weight": spec(3, 9)},
                    {**_UNIT_ERR_ATTRS, "activation": 7}, ProgramError, r"gru_unit: activation 7 is not one of"))),
    OpCase("gru_unit", _gru_unit_sample(bias=False), _gru_unit_ref,
           attrs={"origin_mode": True, "activation": 3, "gate_activation": 2},
           grad=("Input", "HiddenPrev", "Weight"), grad_outs=("Hidden",), name="origin_acts"),
]
