"""``cudnn_lstm``: Fluid 1.8's multi-layer, optionally bidirectional LSTM over a time-major
batch (``fluid.layers.lstm``), with cuDNN's parameter layout, as plain array maths on any
device; and its gradient.

Fluid 1.8 runs this op only on a GPU, through cuDNN; these kernels compute the same function
with the same flat weight, so a program (and its saved weight) runs here on a CPU or a GPU.

NOTE(cudnn-lstm-layout): Input is [T, B, I] (time major), InitH and InitC [L * dirs, B, H]
(dirs = 2 when ``is_bidirec``), Out [T, B, dirs * H] (the forward direction's H first),
last_h and last_c [L * dirs, B, H]. The weight W is one flat vector holding, for the pseudo
layers p = layer * dirs + direction in order, first every pseudo layer's matrices: the input
weights of the gates i, f, c, o, each [H, in_p] row-major (in_p = I for layer 0, dirs * H
above), then the recurrent weights of i, f, c, o, each [H, H]; then every pseudo layer's
biases: the input biases of i, f, c, o ([H] each), then the recurrent biases. That is cuDNN's
layout for a packed weight (Paddle's own ``paddle.nn.LSTM`` packs "all bias following all
weights" for cuDNN in this order), and for one layer exactly what Fluid 1.8's test of this op
(test_lstm_cudnn_op.py, ``lstm_naive``) reads. A step is

    i, f, o = sigmoid(x W_* + b_x* + h R_* + b_h*),   c~ = tanh(x W_c + b_xc + h R_c + b_hc)
    c = f c_prev + i c~,   h = o tanh(c)

with plain sigmoid and tanh (cuDNN's); the reverse direction walks t = T-1 .. 0, and its
last_h/last_c are those after t = 0. Between layers (never after the last), when not
``is_test`` and ``dropout_prob`` > 0, the next layer reads its input through an
upscale-in-train dropout (kept values / (1 - p)) whose mask is counter based
(NOTE(dropout-masks) in ops/dropout.py, keyed by ``seed``, the layer and the step, example b
being batch column b): its values are not cuDNN's, its distribution is.

The gradient reads Out@GRAD, last_h@GRAD and last_c@GRAD (as cudnnRNNBackward does) and
recomputes the forward pass (the same masks: both ops read ``ctx.step``). Every number checked
here against a step-by-step numpy LSTM and finite differences; no cuDNN ran (placegroup's
Fluid 1.8.5 reference is a CPU build, where this op has no kernel).
"""
from __future__ import annotations

from placegroup.ops.dropout import keep_mask, step_key
from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, register

_ATTRS = {"max_len": 20, "dropout_prob": 0.0, "is_bidirec": False, "input_size": 10, "hidden_size": 100,
          "num_layers": 1, "is_test": False, "seed": 0}


def weight_size(input_size: int, hidden_size: int, num_layers: int, bidirec: bool) -> int:
    """The length of the flat weight (NOTE(cudnn-lstm-layout)); Fluid 1.8's layer's formula."""
    dirs, h = (2 if bidirec else 1), hidden_size
    total = 0
    for layer in range(num_layers):
        width = input_size if layer == 0 else dirs * h
        total += dirs * (4 * h * width + 4 * h * h + 8 * h)
    return total


def _unpack(w, input_size: int, h: int, layers: int, dirs: int) -> list:
    """Per pseudo layer: (Wx [4H, in], R [4H, H], bias [4H] = input + recurrent bias)."""
    mats, pos = [], 0
    for p in range(layers * dirs):
        width = input_size if p < dirs else dirs * h
        wx = w[pos:pos + 4 * h * width].reshape(4 * h, width)
        pos += 4 * h * width
        r = w[pos:pos + 4 * h * h].reshape(4 * h, h)
        pos += 4 * h * h
        mats.append((wx, r))
    out = []
    for wx, r in mats:
        bx, bh = w[pos:pos + 4 * h], w[pos + 4 * h:pos + 8 * h]
        pos += 8 * h
        out.append((wx, r, bx + bh))
    return out


def _sigmoid(xp, x):
    return 1.0 / (1.0 + xp.exp(-x))


def _infer(ins, a):
    x, h0, c0, w = ins["Input"], ins["InitH"], ins["InitC"], ins["W"]
    h, layers, dirs = a["hidden_size"], a["num_layers"], 2 if a["is_bidirec"] else 1
    check(len(x.shape) == 3,
          f"cudnn_lstm: Input must be [seq_len, batch, input_size] (time major), got Input{list(x.shape)}")
    check(h >= 1 and layers >= 1, f"cudnn_lstm: hidden_size and num_layers must be >= 1, got {h} and {layers}")
    check(x.shape[2] in (a["input_size"], -1), f"cudnn_lstm: Input's last dim {x.shape[2]} is not input_size "
                                               f"{a['input_size']}")
    for slot, m in (("InitH", h0), ("InitC", c0)):
        check(len(m.shape) == 3 and m.shape[0] in (layers * dirs, -1) and m.shape[2] in (h, -1),
              f"cudnn_lstm: {slot} must be [num_layers * {dirs}, batch, hidden_size] = [{layers * dirs}, batch, {h}], "
              f"got {slot}{list(m.shape)}")
    n = weight_size(a["input_size"], h, layers, a["is_bidirec"])
    check(len(w.shape) == 1 and w.shape[0] in (n, -1), f"cudnn_lstm: W must be flat [{n}] for input_size "
                                                       f"{a['input_size']}, hidden_size {h}, num_layers {layers}, "
                                                       f"is_bidirec {a['is_bidirec']}, got W{list(w.shape)}")
    check(0.0 <= a["dropout_prob"] < 1.0, f"cudnn_lstm: dropout_prob must be in [0, 1), got {a['dropout_prob']}")
    state = Meta((layers * dirs, x.shape[1], h), x.dtype)
    return {"Out": Meta((x.shape[0], x.shape[1], dirs * h), x.dtype), "last_h": state, "last_c": state}


def _mask(xp, a, ctx, layer: int, shape):
    """The [T, B, width] upscaled keep mask between ``layer`` and the next, or None."""
    p = a["dropout_prob"]
    if a["is_test"] or p == 0.0:
        return None
    t, b, width = shape
    key = step_key(a["seed"] * 1000003 + layer, ctx.step, False)
    m = keep_mask(xp, (b, t, width), p, key, ctx.rank * b).transpose(1, 0, 2)
    return m / (1.0 - p)


def _run_direction(xp, x, h, c, wx, r, bias, reverse: bool):
    """One pseudo layer over [T, B, in]: (outputs [T, B, H], last h, last c, the steps' cache)."""
    t_len, hid = x.shape[0], r.shape[1]
    pre = x @ wx.T + bias
    ys = xp.empty(x.shape[:2] + (hid,), dtype=x.dtype)
    cache = []
    order = range(t_len - 1, -1, -1) if reverse else range(t_len)
    for t in order:
        g = pre[t] + h @ r.T
        i, f = _sigmoid(xp, g[:, :hid]), _sigmoid(xp, g[:, hid:2 * hid])
        cand, o = xp.tanh(g[:, 2 * hid:3 * hid]), _sigmoid(xp, g[:, 3 * hid:])
        c_prev, h_prev = c, h
        c = f * c_prev + i * cand
        tc = xp.tanh(c)
        h = o * tc
        ys[t] = h
        cache.append((t, i, f, cand, o, c_prev, h_prev, tc))
    return ys, h, c, cache


def _forward(xp, ins, a, ctx):
    x, h0, c0 = ins["Input"], ins["InitH"], ins["InitC"]
    hid, layers, dirs = a["hidden_size"], a["num_layers"], 2 if a["is_bidirec"] else 1
    if x.shape[0] > a["max_len"]:
        raise ValueError(f"cudnn_lstm: the input has {x.shape[0]} steps, more than max_len={a['max_len']}")
    w = ins["W"]
    n = weight_size(x.shape[2], hid, layers, a["is_bidirec"])
    if w.shape != (n,):
        raise ValueError(f"cudnn_lstm: W has {w.shape[0] if w.ndim == 1 else list(w.shape)} numbers, the layout "
                         f"needs {n} (NOTE(cudnn-lstm-layout))")
    params = _unpack(w, x.shape[2], hid, layers, dirs)
    last_h, last_c = xp.empty_like(h0), xp.empty_like(c0)
    record, inp = [], x
    for layer in range(layers):
        outs, caches = [], []
        for d in range(dirs):
            p = layer * dirs + d
            ys, hl, cl, cache = _run_direction(xp, inp, h0[p], c0[p], *params[p], reverse=d == 1)
            last_h[p], last_c[p] = hl, cl
            outs.append(ys)
            caches.append(cache)
        out = outs[0] if dirs == 1 else xp.concatenate(outs, axis=-1)
        mask = _mask(xp, a, ctx, layer, out.shape) if layer + 1 < layers else None
        record.append((inp, caches, mask))
        inp = out * mask.astype(out.dtype) if mask is not None else out
    return inp, last_h, last_c, params, record


def _grad_maker(op):
    names = ("Input", "InitH", "InitC", "W")
    need = [s for s in names if op.inputs[s][0] in op.need]
    if not need:
        return []
    ins = {s: list(op.inputs[s]) for s in names}
    ins.update({s + "@GRAD": [grad_name(op.outputs[s][0])] for s in ("Out", "last_h", "last_c")})
    return [OpSpec("cudnn_lstm_grad", ins, {s + "@GRAD": [op.grad_of(op.inputs[s][0])] for s in need},
                   dict(op.attrs))]


@register("cudnn_lstm", ins=("Input", "InitH", "InitC", "W", Slot("Cache", dispensable=True, no_grad=True)),
          outs=("Out", "last_h", "last_c"), attrs=_ATTRS, infer=_infer, grad=_grad_maker, lod="drop", uses_step=True)
def cudnn_lstm(xp, ins, a, ctx):
    """A cuDNN-layout LSTM (NOTE(cudnn-lstm-layout))."""
    out, last_h, last_c, _, _ = _forward(xp, ins, a, ctx)
    return {"Out": out, "last_h": last_h, "last_c": last_c}


@register("cudnn_lstm_grad", ins=("Input", "InitH", "InitC", "W", "Out@GRAD", "last_h@GRAD", "last_c@GRAD"),
          outs=tuple(Slot(s + "@GRAD", dispensable=True) for s in ("Input", "InitH", "InitC", "W")),
          attrs=_ATTRS, role="backward", uses_step=True)
def cudnn_lstm_grad(xp, ins, a, ctx):
    """Back through the layers, top first, and each direction's steps in reverse."""
    _, _, _, params, record = _forward(xp, ins, a, ctx)
    hid, layers, dirs = a["hidden_size"], a["num_layers"], 2 if a["is_bidirec"] else 1
    dh_last, dc_last = ins["last_h@GRAD"], ins["last_c@GRAD"]
    dwx = [xp.zeros_like(wx) for wx, _, _ in params]
    dr = [xp.zeros_like(r) for _, r, _ in params]
    db = [xp.zeros_like(b) for _, _, b in params]
    dh0, dc0 = xp.zeros_like(ins["InitH"]), xp.zeros_like(ins["InitC"])
    dout = ins["Out@GRAD"]
    for layer in range(layers - 1, -1, -1):
        inp, caches, _ = record[layer]
        dinp = xp.zeros_like(inp)
        for d in range(dirs):
            p = layer * dirs + d
            wx, r, _ = params[p]
            dy = dout[..., d * hid:(d + 1) * hid]
            dh, dc = dh_last[p], dc_last[p]
            for t, i, f, cand, o, c_prev, h_prev, tc in reversed(caches[d]):
                dh = dh + dy[t]
                do = dh * tc * o * (1 - o)
                dc = dc + dh * o * (1 - tc * tc)
                dg = xp.concatenate([dc * cand * i * (1 - i), dc * c_prev * f * (1 - f),
                                     dc * i * (1 - cand * cand), do], axis=1)
                dc = dc * f
                dwx[p] += dg.T @ inp[t]
                dr[p] += dg.T @ h_prev
                db[p] += dg.sum(axis=0)
                dinp[t] += dg @ wx
                dh = dg @ r
            dh0[p], dc0[p] = dh, dc
        if layer > 0:
            mask = record[layer - 1][2]
            dout = dinp * mask.astype(dinp.dtype) if mask is not None else dinp
    res = {}
    if "Input@GRAD" in ctx.outputs:
        res["Input@GRAD"] = dinp
    if "InitH@GRAD" in ctx.outputs:
        res["InitH@GRAD"] = dh0
    if "InitC@GRAD" in ctx.outputs:
        res["InitC@GRAD"] = dc0
    if "W@GRAD" in ctx.outputs:
        parts = [m.reshape(-1) for p in range(len(params)) for m in (dwx[p], dr[p])]
        parts += [v for p in range(len(params)) for v in (db[p], db[p])]  # the input and recurrent biases alike
        res["W@GRAD"] = xp.concatenate(parts).astype(ins["W"].dtype, copy=False)
    return res
