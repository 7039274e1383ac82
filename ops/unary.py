"""Elementwise unary ops of Fluid 1.8 (activation_op.cc, clip_op, sign_op, selu_op, mish_op,
erf_op, gelu_op, prelu_op, label_smooth_op) and their gradients.

One table line per op: ``(type, attrs, forward, gradient, deps)``. ``forward(xp, x, a)`` gives
Out; ``gradient(xp, x, out, g, a)`` gives X@GRAD from Out@GRAD ``g``; ``deps`` names the
forward vars the grad op reads, as Paddle's ``FwdDeps`` does (``"X"``, ``"Out"``, both or
neither), so a grad op holds on to no more than it needs.

NOTE(unary-grad-rules): gradients follow Paddle's functors, also at their kinks:
leaky_relu' is 1 at x = 0; relu6', brelu', hard_sigmoid' and clip' are 0 where the input
sits on a bound (``min < x < max``, strict, as ClipGradFunctor); elu' at 0 is alpha;
floor, ceil and round have a zero gradient (ZeroGradFunctor), and sign's gradient is a
``scale`` by 0 (sign_op.cc's grad maker). round rounds halves away from zero (std::round),
not to even as numpy does. soft_relu's gradient masks on Out (``Out < threshold``), as Paddle's
functor does, so x below -threshold still gets ``1 - e^-Out``; hard_swish's is 1 where
``x + offset >= threshold`` (right only for threshold == scale, Paddle's default).

NOTE(erf): numpy has no erf, so ``_erf`` computes it (in float64) from a Chebyshev expansion
fitted at import to ``math.erfc``: erfc(z) = t·exp(-z² + P(t)) with t = 2/(2 + z) on
0 <= z <= 6.5 (Numerical Recipes' form; past 6.5 erf is 1 in float64), and a short Taylor
series below 0.5 for relative precision near 0. Both agree with math.erf to about 2e-15, on
numpy and cupy alike.

Kernels use only ``xp`` functions, so the same code runs on cupy arrays; python float attrs
keep float32 arrays float32.
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.ops.activation import _sigmoid
from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
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


# -- erf and the activations built on it (NOTE(erf)) ----------------------------------------

_ERF_ZMAX, _ERF_DEG = 6.5, 28
_ERF_T0 = 2 / (2 + _ERF_ZMAX)


def _erf_coefficients() -> list:
    """Chebyshev coefficients of log(erfc(z)/t) + z² in v, t = 2/(2+z) mapped to v in [-1, 1]."""
    n = _ERF_DEG + 1
    v = np.cos(np.pi * (np.arange(n) + 0.5) / n)
    t = _ERF_T0 + (v + 1) * (1 - _ERF_T0) / 2
    z = 2 / t - 2
    g = [math.log(math.erfc(zz) / tt) + zz * zz for zz, tt in zip(z, t)]
    return [float(c) for c in np.polynomial.chebyshev.chebfit(v, g, _ERF_DEG)]


_ERF_C = _erf_coefficients()


def _erf(xp, x):
    """erf(x) elementwise in x's dtype, computed in float64 (NOTE(erf))."""
    x64 = x.astype(np.float64, copy=False)
    z = xp.minimum(xp.abs(x64), _ERF_ZMAX)
    t = 2 / (2 + z)
    v = (t - _ERF_T0) * (2 / (1 - _ERF_T0)) - 1
    b1, b2 = xp.zeros_like(v), xp.zeros_like(v)
    for c in _ERF_C[:0:-1]:  # Clenshaw's recurrence
        b1, b2 = 2 * v * b1 - b2 + c, b1
    big = 1 - t * xp.exp(v * b1 - b2 + _ERF_C[0] - z * z)
    z2, term = z * z, z.copy()
    small = z.copy()
    for k in range(1, 12):  # erf(z)·√π/2 = Σ (-1)^k z^(2k+1) / (k! (2k+1)), for z < 0.5
        term = term * (-z2 / k)
        small = small + term / (2 * k + 1)
    out = xp.where(z < 0.5, small * (2 / math.sqrt(math.pi)), big)
    return xp.copysign(out, x64).astype(x.dtype, copy=False)


_SQRT_2_PI = math.sqrt(2 / math.pi)


def _gelu(xp, x, a):
    if a["approximate"]:
        return 0.5 * x * (1 + xp.tanh(_SQRT_2_PI * (x + 0.044715 * x * x * x)))
    return 0.5 * x * (1 + _erf(xp, x * (1 / math.sqrt(2))))


def _gelu_grad(xp, x, o, g, a):
    if a["approximate"]:
        t = xp.tanh(_SQRT_2_PI * (x + 0.044715 * x * x * x))
        return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_PI * (1 + 3 * 0.044715 * x * x))
    return g * (0.5 * (1 + _erf(xp, x * (1 / math.sqrt(2)))) + x * xp.exp(-0.5 * x * x) * (1 / math.sqrt(2 * math.pi)))


def _logsigmoid(xp, x, a):
    m = xp.maximum(-x, 0)  # -log(1 + e^-x) without overflow, Paddle's form
    return -m - xp.log(xp.exp(-m) + xp.exp(-x - m))


def _logsigmoid_grad(xp, x, o, g, a):
    m = xp.maximum(-x, 0)
    return g * xp.exp(-x - m) / (xp.exp(-m) + xp.exp(-x - m))


def _mish_softplus(xp, x, a):
    # mish_op.h's softplus: x above threshold, e^x below -threshold, else log1p(e^x)
    th = a["threshold"]
    return xp.where(x > th, x, xp.where(x < -th, xp.exp(xp.minimum(x, th)), xp.log1p(xp.exp(xp.minimum(x, th)))))


def _mish_grad(xp, x, o, g, a):
    sp = _mish_softplus(xp, x, a)
    tsp = xp.tanh(sp)
    return g * (tsp + x * (1 - tsp * tsp) * -xp.expm1(-sp))


def _hard_swish(xp, x, a):
    return xp.minimum(xp.maximum(x + a["offset"], 0), a["threshold"]) * x / a["scale"]


def _hard_swish_grad(xp, x, o, g, a):
    inside = (x + a["offset"]) < a["threshold"]
    return g * xp.where(inside, ((x + a["offset"]) > 0) * (2 * x + a["offset"]) / a["scale"], 1)


_SELU = {"scale": 1.0507009873554804934193349852946, "alpha": 1.6732632423543772848170429916717}


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
    ("sin", {}, lambda xp, x, a: xp.sin(x), lambda xp, x, o, g, a: g * xp.cos(x), "X", "Out = sin X."),
    ("cos", {}, lambda xp, x, a: xp.cos(x), lambda xp, x, o, g, a: -g * xp.sin(x), "X", "Out = cos X."),
    ("asin", {}, lambda xp, x, a: xp.arcsin(x), lambda xp, x, o, g, a: g / xp.sqrt(1 - x * x), "X",
     "Out = arcsin X, for |X| <= 1."),
    ("acos", {}, lambda xp, x, a: xp.arccos(x), lambda xp, x, o, g, a: -g / xp.sqrt(1 - x * x), "X",
     "Out = arccos X, for |X| <= 1."),
    ("atan", {}, lambda xp, x, a: xp.arctan(x), lambda xp, x, o, g, a: g / (1 + x * x), "X", "Out = arctan X."),
    ("log1p", {}, lambda xp, x, a: xp.log1p(x), lambda xp, x, o, g, a: g / (1 + x), "X", "Out = ln(1 + X)."),
    ("erf", {}, lambda xp, x, a: _erf(xp, x), lambda xp, x, o, g, a: g * (2 / math.sqrt(math.pi)) * xp.exp(-x * x), "X",
     "Out = erf X (NOTE(erf))."),
    ("gelu", {"approximate": False}, _gelu, _gelu_grad, "X",
     "Out = X·Φ(X) = 0.5·X·(1 + erf(X/√2)); with ``approximate``, "
     "0.5·X·(1 + tanh(√(2/π)(X + 0.044715·X³)))."),
    ("selu", dict(_SELU), lambda xp, x, a: a["scale"] * xp.where(x > 0, x, a["alpha"] * xp.expm1(xp.minimum(x, 0))),
     lambda xp, x, o, g, a: xp.where(o > 0, g * a["scale"], g * (o + a["scale"] * a["alpha"])), "Out",
     "Out = scale·X for X > 0, else scale·alpha·(e^X - 1) (Fluid's default scale and alpha)."),
    ("logsigmoid", {}, _logsigmoid, _logsigmoid_grad, "X", "Out = ln sigmoid(X) = -ln(1 + e^-X)."),
    ("hard_swish", {"threshold": 6.0, "scale": 6.0, "offset": 3.0}, _hard_swish, _hard_swish_grad, "X",
     "Out = X·min(max(X + offset, 0), threshold) / scale (gradient as NOTE(unary-grad-rules))."),
    ("mish", {"threshold": 20.0}, lambda xp, x, a: x * xp.tanh(_mish_softplus(xp, x, a)), _mish_grad, "X",
     "Out = X·tanh(softplus(X)), softplus X past ±threshold taken as X or e^X (Paddle's mish_op); the "
     "gradient uses softplus' = 1 - e^-softplus on every branch, as Paddle's does."),
    ("thresholded_relu", {"threshold": 1.0}, lambda xp, x, a: xp.where(x > a["threshold"], x, 0).astype(x.dtype),
     lambda xp, x, o, g, a: g * (x > a["threshold"]), "X", "Out = X where X > threshold, else 0."),
    ("softshrink", {"lambda": 0.5},
     lambda xp, x, a: xp.where(x > a["lambda"], x - a["lambda"], xp.where(x < -a["lambda"], x + a["lambda"], 0)),
     lambda xp, x, o, g, a: g * ((x > a["lambda"]) | (x < -a["lambda"])), "X",
     "Out = X - lambda above lambda, X + lambda below -lambda, else 0."),
    ("hard_shrink", {"threshold": 0.5}, lambda xp, x, a: x * ((x > a["threshold"]) | (x < -a["threshold"])),
     lambda xp, x, o, g, a: g * ((x > a["threshold"]) | (x < -a["threshold"])), "X",
     "Out = X where |X| > threshold, else 0."),
    ("tanh_shrink", {}, lambda xp, x, a: x - xp.tanh(x), lambda xp, x, o, g, a: g * xp.tanh(x) * xp.tanh(x), "X",
     "Out = X - tanh X."),
    ("stanh", {"scale_a": 0.67, "scale_b": 1.7159}, lambda xp, x, a: a["scale_b"] * xp.tanh(a["scale_a"] * x),
     lambda xp, x, o, g, a: g * a["scale_a"] * a["scale_b"] * (1 - xp.tanh(a["scale_a"] * x) ** 2), "X",
     "Out = scale_b·tanh(scale_a·X)."),
    ("soft_relu", {"threshold": 40.0},
     lambda xp, x, a: xp.log(1 + xp.exp(xp.clip(x, -a["threshold"], a["threshold"]))),
     lambda xp, x, o, g, a: g * (1 - xp.exp(-o)) * ((o > -a["threshold"]) & (o < a["threshold"])), "Out",
     "Out = ln(1 + e^clip(X, -threshold, threshold)) (gradient as NOTE(unary-grad-rules))."),
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


# -- prelu, label_smooth ----------------------------------------------------------------------


def _prelu_alpha_shape(x, mode: str) -> tuple:
    """The shape Alpha broadcasts as against X: [1], [1, C, 1, ...] or [1, *X.shape[1:]]."""
    if mode == "all":
        return (1,) * len(x)
    if mode == "channel":
        return (1, x[1]) + (1,) * (len(x) - 2)
    return (1,) + tuple(x[1:])


def _prelu_infer(ins, a):
    x, alpha, mode = ins["X"], ins["Alpha"], a["mode"]
    check(mode in ("all", "channel", "element"), f"prelu: mode {mode!r} must be all, channel or element")
    check(len(x.shape) >= (2 if mode == "channel" else 1), f"prelu: mode {mode!r} needs X of rank >= 2, "
                                                            f"got X{list(x.shape)}")
    want = _prelu_alpha_shape(x.shape, mode)
    n, m = math.prod(want), math.prod(alpha.shape)
    check(-1 in want[1:] or n == m, f"prelu: Alpha{list(alpha.shape)} has {m} values; mode {mode!r} needs "
                                    f"{n} for X{list(x.shape)}")
    return {"Out": x}


@register("prelu", ins=("X", "Alpha"), outs=("Out",), attrs={"mode": "all"},
          infer=_prelu_infer, grad=grad_of(("X", "Alpha")))
def prelu(xp, ins, a, ctx):
    """Out = X where X > 0, else Alpha·X; Alpha is one value (``all``), one per channel (dim 1,
    ``channel``) or one per element of a sample (``element``)."""
    x = ins["X"]
    alpha = ins["Alpha"].reshape(_prelu_alpha_shape(x.shape, a["mode"]))
    return {"Out": xp.where(x > 0, x, alpha * x).astype(x.dtype, copy=False)}


@register("prelu_grad", ins=("X", "Alpha", "Out@GRAD"),
          outs=(Slot("X@GRAD", dispensable=True), Slot("Alpha@GRAD", dispensable=True)), attrs={"mode": "all"},
          role="backward")
def prelu_grad(xp, ins, a, ctx):
    x, alpha, g = ins["X"], ins["Alpha"], ins["Out@GRAD"]
    shape = _prelu_alpha_shape(x.shape, a["mode"])
    res = {}
    if "X@GRAD" in ctx.outputs:
        res["X@GRAD"] = xp.where(x > 0, g, alpha.reshape(shape) * g).astype(x.dtype, copy=False)
    if "Alpha@GRAD" in ctx.outputs:
        neg = xp.where(x > 0, 0, x * g)
        axes = tuple(i for i, d in enumerate(shape) if d == 1)
        res["Alpha@GRAD"] = neg.sum(axis=axes).reshape(alpha.shape).astype(alpha.dtype, copy=False)
    return res


def _label_smooth_infer(ins, a):
    x, prior = ins["X"], ins.get("PriorDist")
    check(0.0 <= a["epsilon"] <= 1.0, f"label_smooth: epsilon {a['epsilon']} must be in [0, 1]")
    check(len(x.shape) >= 1 and x.shape[-1] != -1, f"label_smooth: X{list(x.shape)} needs a known last (class) dim")
    if prior is not None:
        check(math.prod(prior.shape) == x.shape[-1], f"label_smooth: PriorDist{list(prior.shape)} must hold one value "
                                                     f"per class of X{list(x.shape)}")
    return {"Out": x}


@register("label_smooth", ins=("X", Slot("PriorDist", dispensable=True, no_grad=True)), outs=("Out",),
          attrs={"epsilon": 0.0}, infer=_label_smooth_infer, grad=grad_of(("X",), uses=()))
def label_smooth(xp, ins, a, ctx):
    """Out = (1 - epsilon)·X + epsilon·PriorDist, or + epsilon/K without a prior (K classes, the
    last dim of X)."""
    x, prior, eps = ins["X"], ins.get("PriorDist"), a["epsilon"]
    mix = eps / x.shape[-1] if prior is None else eps * prior.reshape(-1)
    return {"Out": ((1 - eps) * x + mix).astype(x.dtype, copy=False)}


@register("label_smooth_grad", ins=("Out@GRAD",), outs=("X@GRAD",), attrs={"epsilon": 0.0}, role="backward")
def label_smooth_grad(xp, ins, a, ctx):
    g = ins["Out@GRAD"]
    return {"X@GRAD": ((1 - a["epsilon"]) * g).astype(g.dtype, copy=False)}
