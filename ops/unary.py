"""Elementwise unary ops of Fluid 1.8 (activation_op.cc, clip_op, sign_op) and their gradients.

One table line per op: ``(type, attrs, forward, gradient, deps)``. ``forward(xp, x, a)`` gives
Out; ``gradient(xp, x, out, g, a)`` gives X@GRAD from Out@GRAD ``g``; ``deps`` names the
forward vars the grad op reads, as Paddle's ``FwdDeps`` does (``"X"``, ``"Out"``, both or
neither), so a grad op holds on to no more than it needs.

NOTE(unary-grad-rules): gradients follow Paddle's functors, also at their kinks:
leaky_relu' is 1 at x = 0; relu6', brelu', hard_sigmoid' and clip' are 0 where the input
sits on a bound (``min < x < max``, strict, as ClipGradFunctor); elu' at 0 is alpha;
floor, ceil and round have a zero gradient (ZeroGradFunctor), and sign's gradient is a
``scale`` by 0 (sign_op.cc's grad maker). round rounds halves away from zero (std::round),
not to even as numpy does.

Kernels use only ``xp`` functions, so the same code runs on cupy arrays; python float attrs
keep float32 arrays float32.
"""
from __future__ import annotations

from placegroup.ops.activation import _sigmoid
from placegroup.ops.registry import OpSpec, check, grad_name, grad_of, register
from placegroup.values import is_selected_rows


def _same(ins, a):
    return {"Out": ins["X"]}


def _unary(name: str, attrs: dict, fwd, dfwd, deps: str, doc: str, infer=_same, rows: bool = False) -> None:
    """Register ``name`` (Out = fwd(X)) and ``name_grad`` (X@GRAD = dfwd(X, Out, Out@GRAD)).
    With ``rows``, a SelectedRows X is merged and fwd applies to its values (Fluid's clip of
    a sparse gradient)."""
    uses = ("X",) if "X" in deps else ()
    outs = ("Out",) if "Out" in deps else ()

    @register(name, ins=("X",), outs=("Out",), attrs=attrs, infer=infer,
              grad=grad_of(("X",), uses=uses, outs=outs))
    def forward(xp, ins, a, ctx):
        x = ins["X"]
        if rows and is_selected_rows(x):
            x = x.merged(xp)
            return {"Out": x.with_values(fwd(xp, x.values, a))}
        return {"Out": fwd(xp, x, a)}

    @register(name + "_grad", ins=uses + outs + ("Out@GRAD",), outs=("X@GRAD",), attrs=attrs,
              role="backward")
    def backward(xp, ins, a, ctx):
        g = ins["Out@GRAD"]
        return {"X@GRAD": dfwd(xp, ins.get("X"), ins.get("Out"), g, a).astype(g.dtype, copy=False)}

    forward.__doc__ = doc


def _softplus(xp, x, a):
    # log(1 + e^x) without overflow: m + log(e^-m + e^(x-m)), m = max(x, 0) (Paddle 1.8's form)
    m = xp.maximum(x, 0)
    return m + xp.log(xp.exp(-m) + xp.exp(x - m))


def _swish_grad(xp, x, o, g, a):
    b = a["beta"]
    s = _sigmoid(xp, b * x)
    bo = b * x * s
    return g * (bo + s * (1 - bo))


def _round(xp, x, a):
    # halves away from zero (std::round); |x| - trunc(|x|) is exact in floating point
    ax = xp.abs(x)
    t = xp.trunc(ax)
    return xp.copysign(t + (ax - t >= 0.5), x).astype(x.dtype, copy=False)


def _zero(xp, x, o, g, a):
    return xp.zeros_like(g)


# type, attrs, forward, gradient, deps, doc
_TABLE = [
    ("square", {}, lambda xp, x, a: x * x, lambda xp, x, o, g, a: g * 2 * x, "X", "Out = X²."),
    ("sqrt", {}, lambda xp, x, a: xp.sqrt(x), lambda xp, x, o, g, a: g * 0.5 / o, "Out", "Out = √X."),
    ("rsqrt", {}, lambda xp, x, a: 1 / xp.sqrt(x), lambda xp, x, o, g, a: g * -0.5 * o * o * o, "Out",
     "Out = 1/√X."),
    ("abs", {}, lambda xp, x, a: xp.abs(x), lambda xp, x, o, g, a: g * xp.sign(x), "X", "Out = |X|."),
    ("exp", {}, lambda xp, x, a: xp.exp(x), lambda xp, x, o, g, a: g * o, "Out", "Out = e^X."),
    ("log", {}, lambda xp, x, a: xp.log(x), lambda xp, x, o, g, a: g / x, "X", "Out = ln X."),
    ("reciprocal", {}, lambda xp, x, a: 1 / x, lambda xp, x, o, g, a: -g * o * o, "Out", "Out = 1/X."),
    ("softsign", {}, lambda xp, x, a: x / (1 + xp.abs(x)),
     lambda xp, x, o, g, a: g / ((1 + xp.abs(x)) * (1 + xp.abs(x))), "X", "Out = X / (1 + |X|)."),
    ("softplus", {}, _softplus, lambda xp, x, o, g, a: g * _sigmoid(xp, x), "X", "Out = ln(1 + e^X)."),
    ("pow", {"factor": 1.0}, lambda xp, x, a: x ** a["factor"],
     lambda xp, x, o, g, a: g * a["factor"] * x ** (a["factor"] - 1), "X", "Out = X^factor."),
    ("leaky_relu", {"alpha": 0.02}, lambda xp, x, a: xp.maximum(x, a["alpha"] * x),
     lambda xp, x, o, g, a: xp.where(x >= 0, g, g * a["alpha"]), "X", "Out = max(X, alpha·X)."),
    # exp of min(x, 0) is the same for alpha > 0 and never overflows
    ("elu", {"alpha": 1.0}, lambda xp, x, a: xp.maximum(x, 0) + xp.minimum(a["alpha"] * (xp.exp(xp.minimum(x, 0)) - 1), 0),
     lambda xp, x, o, g, a: xp.where(x > 0, g, g * a["alpha"] * xp.exp(xp.minimum(x, 0))), "X",
     "Out = X for X > 0, else alpha·(e^X - 1)."),
    ("relu6", {"threshold": 6.0}, lambda xp, x, a: xp.minimum(xp.maximum(x, 0), a["threshold"]),
     lambda xp, x, o, g, a: g * ((o > 0) & (o < a["threshold"])), "Out", "Out = min(max(X, 0), threshold)."),
    ("brelu", {"t_min": 0.0, "t_max": 24.0}, lambda xp, x, a: xp.minimum(xp.maximum(x, a["t_min"]), a["t_max"]),
     lambda xp, x, o, g, a: g * ((x > a["t_min"]) & (x < a["t_max"])), "X", "Out = min(max(X, t_min), t_max)."),
    ("hard_sigmoid", {"slope": 0.2, "offset": 0.5},
     lambda xp, x, a: xp.minimum(xp.maximum(a["slope"] * x + a["offset"], 0), 1),
     lambda xp, x, o, g, a: g * ((o > 0) & (o < 1)) * a["slope"], "Out", "Out = clip(slope·X + offset, 0, 1)."),
    ("swish", {"beta": 1.0}, lambda xp, x, a: x * _sigmoid(xp, a["beta"] * x), _swish_grad, "X",
     "Out = X · sigmoid(beta·X)."),
    ("floor", {}, lambda xp, x, a: xp.floor(x), _zero, "", "Out = ⌊X⌋ (zero gradient)."),
    ("ceil", {}, lambda xp, x, a: xp.ceil(x), _zero, "", "Out = ⌈X⌉ (zero gradient)."),
    ("round", {}, _round, _zero, "", "Out = X rounded, halves away from zero (zero gradient)."),
]
for _row in _TABLE:
    _unary(*_row)


def _clip_infer(ins, a):
    lo, hi = a["min"], a["max"]
    check(lo is not None and hi is not None, f"clip: attrs min and max are required, got min={lo}, max={hi}")
    check(lo <= hi, f"clip: min {lo} is greater than max {hi}")
    return {"Out": ins["X"]}


_unary("clip", {"min": None, "max": None}, lambda xp, x, a: xp.minimum(xp.maximum(x, a["min"]), a["max"]),
       lambda xp, x, o, g, a: g * ((x > a["min"]) & (x < a["max"])), "X",
       "Out = min(max(X, min), max); the gradient passes where min < X < max.", infer=_clip_infer, rows=True)


def _sign_grad(op):
    # Fluid 1.8's sign grad maker: X@GRAD = scale(Out@GRAD, 0)
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    return [OpSpec("scale", {"X": [grad_name(op.outputs["Out"][0])]}, {"Out": [op.grad_of(x)]},
                   {"scale": 0.0, "bias": 0.0, "bias_after_scale": True})]


@register("sign", ins=("X",), outs=("Out",), infer=_same, grad=_sign_grad)
def sign(xp, ins, a, ctx):
    """Out = -1, 0 or 1 by the sign of X (zero gradient)."""
    return {"Out": xp.sign(ins["X"])}
