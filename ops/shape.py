"""Shape ops of Fluid 1.8: ops that move or reshape data without choosing it by index
(transpose, reshape2, squeeze, unsqueeze, flatten, expand, expand_as, stack, unstack, slice,
strided_slice, crop_tensor, pad, pad2d, pad_constant_like, reverse, flip, roll, tril_triu, diag,
diag_embed, meshgrid). Indexing ops are in ops/index.py; the image resamplers (pixel_shuffle,
space_to_depth, shuffle_channel and the *_interp resizes) in ops/resample.py.

Op types, slots, attrs and defaults are Fluid 1.8's; every kernel is vectorised over ``xp``
(numpy or cupy), keeps X's dtype (integer and bool X pass through the pure data movers), and
runs on float64 for the gradient checks.

NOTE(xshape): ``transpose2``, ``reshape2``, ``squeeze2``, ``unsqueeze2`` and ``flatten2`` write a
second output, ``XShape``, as Fluid does: an empty array of shape ``[0] + X.shape`` (X's dtype)
whose only content is its shape, so the grad op reshapes ``Out@GRAD`` back without holding on
to X. The v1 ops (``transpose``, ``reshape`` in ops/tensor.py, ``squeeze``, ``unsqueeze``,
``flatten``) are registered too, for programs that name them; their grad ops read X.
"""
from __future__ import annotations

import math

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.ops.tensor import _reshape_target, run_ints, unknown_entries


# -- helpers ---------------------------------------------------------------------------------


def _axis(op: str, axis: int, shape, what: str = "axis", extra: int = 0, slot: str = "X") -> int:
    """``axis`` in [0, rank + extra) (negative counts from the end), or a ProgramError."""
    n = len(shape) + extra
    check(-n <= axis < n, f"{op}: {what} {axis} is out of range for {slot}{list(shape)} (valid: {-n}..{n - 1})")
    return axis % n


def _prod(dims) -> int:
    """The product of ``dims``, -1 when one is unknown."""
    return -1 if -1 in dims else math.prod(dims)


def _xshape(xp, x):
    return xp.empty((0,) + tuple(x.shape), dtype=x.dtype)  # See NOTE(xshape).


def _x_grad(op):
    """A grad maker that applies forward op ``op.type`` itself to Out@GRAD (its own transpose)."""
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    return [OpSpec(op.type, {"X": [grad_name(op.outputs["Out"][0])]}, {"Out": [op.grad_of(x)]}, dict(op.attrs))]


# -- transpose and the reshapes with XShape (NOTE(xshape)) ----------------------------------


def _perm(op: str, shape, axis) -> list:
    axis = [int(a) for a in axis]
    check(sorted(axis) == list(range(len(shape))),
          f"{op}: axis {axis} is not a permutation of 0..{len(shape) - 1} for X{list(shape)}")
    return axis


def _transpose_infer(v2: bool):
    op = "transpose2" if v2 else "transpose"

    def infer(ins, a):
        x = ins["X"]
        out = {"Out": Meta(tuple(x.shape[p] for p in _perm(op, x.shape, a["axis"])), x.dtype)}
        return {**out, "XShape": Meta((0,) + tuple(x.shape), x.dtype)} if v2 else out

    return infer


def _inverse(perm) -> list:
    return [int(i) for i in np.argsort(perm)]


@register("transpose2", ins=("X",), outs=("Out", "XShape"), attrs={"axis": []}, infer=_transpose_infer(True),
          grad=grad_of(("X",), uses=(), outs=("XShape",)))
def transpose2(xp, ins, a, ctx):
    """Out = X with its dims permuted: Out dim i is X dim ``axis[i]``; XShape as NOTE(xshape)."""
    return {"Out": xp.transpose(ins["X"], a["axis"]), "XShape": _xshape(xp, ins["X"])}


@register("transpose2_grad", ins=("XShape", "Out@GRAD"), outs=("X@GRAD",), attrs={"axis": []}, role="backward")
def transpose2_grad(xp, ins, a, ctx):
    return {"X@GRAD": xp.transpose(ins["Out@GRAD"], _inverse(a["axis"]))}


@register("transpose", ins=("X",), outs=("Out",), attrs={"axis": []}, infer=_transpose_infer(False),
          grad=grad_of(("X",), uses=()))
def transpose(xp, ins, a, ctx):
    """Fluid's v1 transpose: Out = X with its dims permuted by ``axis``."""
    return {"Out": xp.transpose(ins["X"], a["axis"])}


@register("transpose_grad", ins=("Out@GRAD",), outs=("X@GRAD",), attrs={"axis": []}, role="backward")
def transpose_grad(xp, ins, a, ctx):
    return {"X@GRAD": xp.transpose(ins["Out@GRAD"], _inverse(a["axis"]))}


def _squeeze_shape(op, shape, a) -> tuple:
    """Fluid 1.8's squeeze: no axes drops every dim of 1; a listed dim that is not 1 stays
    (no error), and at build time a listed -1 dim is dropped, as Paddle's InferShape does."""
    axes = {_axis(op, ax, shape, "axes entry") for ax in a["axes"]}
    drop = {i for i, d in enumerate(shape) if d == 1} if not axes else {i for i in axes if shape[i] in (1, -1)}
    return tuple(d for i, d in enumerate(shape) if i not in drop)


def _unsqueeze_shape(op, shape, a) -> tuple:
    """Each of ``axes`` in turn inserts a 1 into the shape so far (a negative axis counts from
    the end of that shape plus one), as Fluid 1.8's unsqueeze."""
    out = list(shape)
    for ax in a["axes"]:
        n = len(out) + 1
        check(-n <= ax < n, f"{op}: axes entry {ax} is out of range for a rank-{len(out)} shape {out} "
                            f"(X{list(shape)}, axes {list(a['axes'])}; valid: {-n}..{n - 1})")
        out.insert(ax % n, 1)
    return tuple(out)


def _flatten_shape(op, shape, a) -> tuple:
    """[prod(X dims before axis), prod(the rest)]; axis in 0..rank."""
    ax = a["axis"]
    check(0 <= ax <= len(shape), f"{op}: axis {ax} is out of range for X{list(shape)} (valid: 0..{len(shape)})")
    return _prod(shape[:ax]), _prod(shape[ax:])


def _reshaping(name: str, attrs: dict, shape_fn, doc: str) -> None:
    """Register ``name`` (grad reads X) and ``name + "2"`` (writes XShape, its grad reads it):
    ops whose Out is X reshaped to ``shape_fn(op, X.shape, attrs)``."""
    for op, v2 in ((name, False), (name + "2", True)):
        def infer(ins, a, op=op, v2=v2):
            x = ins["X"]
            out = {"Out": Meta(shape_fn(op, tuple(x.shape), a), x.dtype)}
            return {**out, "XShape": Meta((0,) + tuple(x.shape), x.dtype)} if v2 else out

        outs = ("Out", "XShape") if v2 else ("Out",)
        grad = grad_of(("X",), uses=(), outs=("XShape",)) if v2 else grad_of(("X",), uses=("X",))

        @register(op, ins=("X",), outs=outs, attrs=attrs, infer=infer, grad=grad)
        def forward(xp, ins, a, ctx, op=op, v2=v2):
            x = ins["X"]
            out = {"Out": x.reshape(shape_fn(op, x.shape, a))}
            return {**out, "XShape": _xshape(xp, x)} if v2 else out

        @register(op + "_grad", ins=(("XShape",) if v2 else ("X",)) + ("Out@GRAD",), outs=("X@GRAD",), attrs=attrs,
                  role="backward")
        def backward(xp, ins, a, ctx, v2=v2):
            shape = ins["XShape"].shape[1:] if v2 else ins["X"].shape
            return {"X@GRAD": ins["Out@GRAD"].reshape(shape)}

        forward.__doc__ = doc + (" XShape as NOTE(xshape)." if v2 else "")


_reshaping("squeeze", {"axes": []}, _squeeze_shape, "Out = X without the size-1 dims in ``axes`` (all if empty).")
_reshaping("unsqueeze", {"axes": []}, _unsqueeze_shape, "Out = X with a size-1 dim inserted at each of ``axes``.")
_reshaping("flatten", {"axis": 1}, _flatten_shape, "Out = X as a matrix [prod(dims[:axis]), prod(dims[axis:])].")


def _reshape2_shape(shape, a) -> tuple:
    """reshape's target (ops/tensor.py: a 0 copies X's dim, one -1 is inferred), its errors
    naming reshape2."""
    try:
        return tuple(_reshape_target(shape, a["shape"]))
    except ProgramError as e:
        raise ProgramError(f"reshape2{str(e)[len('reshape'):]}") from None


def _reshape2_infer(ins, a):
    x = ins["X"]
    xshape = Meta((0,) + tuple(x.shape), x.dtype)
    if ins.get("ShapeTensor"):  # some dims given at run time: the others are known when not -1
        shape, unknown = unknown_entries("reshape2", ins, "", "ShapeTensor", a["shape"])
        check(all(d != 0 or i in unknown or i < len(x.shape) for i, d in enumerate(shape)),
              f"reshape2: shape {list(a['shape'])} copies a dim (a 0) that X{list(x.shape)} does not have")
        out = tuple(-1 if i in unknown or d == -1 else x.shape[i] if d == 0 else d for i, d in enumerate(shape))
        return {"Out": Meta(out, x.dtype), "XShape": xshape}
    return {"Out": Meta(_reshape2_shape(tuple(x.shape), a), x.dtype), "XShape": xshape}


@register("reshape2", ins=("X", Slot("ShapeTensor", duplicable=True, dispensable=True, no_grad=True)),
          outs=("Out", "XShape"), attrs={"shape": []}, infer=_reshape2_infer,
          grad=grad_of(("X",), uses=(), outs=("XShape",)))
def reshape2(xp, ins, a, ctx):
    """Out = X with shape ``shape`` (a 0 copies X's dim at that index, one -1 is inferred), as
    the op ``fluid.layers.reshape`` appends; XShape as NOTE(xshape). ``ShapeTensor``, one [1]
    int tensor per dim, gives the shape at run time instead (NOTE(run-time-ints) in
    ops/tensor.py); the ``Shape`` input of Fluid's op (``actual_shape``) is not supported (the
    layer refuses it)."""
    x = ins["X"]
    if ins.get("ShapeTensor"):
        a = {**a, "shape": run_ints(ins, "", "ShapeTensor", a["shape"])}
    return {"Out": x.reshape(_reshape2_shape(x.shape, a)), "XShape": _xshape(xp, x)}


@register("reshape2_grad", ins=("XShape", "Out@GRAD"), outs=("X@GRAD",), attrs={"shape": []}, role="backward")
def reshape2_grad(xp, ins, a, ctx):
    return {"X@GRAD": ins["Out@GRAD"].reshape(ins["XShape"].shape[1:])}


# -- expand, expand_as, stack, unstack ------------------------------------------------------


_TIMES = ("ExpandTimes", "expand_times_tensor")  # NOTE(run-time-ints): the counts as tensors


def _expand_infer(ins, a):
    x = ins["X"]
    times, unknown = unknown_entries("expand", ins, *_TIMES, a["expand_times"])
    check(len(times) == len(x.shape) and all(t >= 1 or i in unknown for i, t in enumerate(times)),
          f"expand: expand_times {times} must give one count >= 1 per dim of X{list(x.shape)}")
    return {"Out": Meta(tuple(-1 if d == -1 or i in unknown else d * t
                              for i, (d, t) in enumerate(zip(x.shape, times))), x.dtype)}


def _unexpand(g, shape, times):
    """Sum ``g`` (X tiled ``times``) back onto X's shape."""
    inter = [n for t, d in zip(times, shape) for n in (t, d)]
    return g.reshape(inter).sum(axis=tuple(range(0, 2 * len(shape), 2)))


_TIMES_INS = (Slot("ExpandTimes", dispensable=True, no_grad=True),
              Slot("expand_times_tensor", duplicable=True, dispensable=True, no_grad=True))


@register("expand", ins=("X", *_TIMES_INS), outs=("Out",), attrs={"expand_times": []}, infer=_expand_infer,
          grad=grad_of(("X",)))
def expand(xp, ins, a, ctx):
    """Out = X tiled ``expand_times[i]`` times along each dim i (the counts read from ExpandTimes
    or expand_times_tensor when given, NOTE(run-time-ints))."""
    return {"Out": xp.tile(ins["X"], tuple(run_ints(ins, *_TIMES, a["expand_times"])))}


@register("expand_grad", ins=("X", *_TIMES_INS, "Out@GRAD"), outs=("X@GRAD",), attrs={"expand_times": []},
          role="backward")
def expand_grad(xp, ins, a, ctx):
    return {"X@GRAD": _unexpand(ins["Out@GRAD"], ins["X"].shape, run_ints(ins, *_TIMES, a["expand_times"]))}


def _expand_as_times(shape, target) -> list:
    check(len(shape) == len(target), f"expand_as: X{list(shape)} and target_tensor{list(target)} differ in rank")
    for d, t in zip(shape, target):
        check(-1 in (d, t) or (d > 0 and t % d == 0),
              f"expand_as: target_tensor{list(target)} is not a multiple of X{list(shape)} in every dim")
    return [t // d for d, t in zip(shape, target)]


def _expand_as_infer(ins, a):
    x, t = ins["X"], ins["target_tensor"]
    _expand_as_times(x.shape, t.shape)
    return {"Out": Meta(tuple(t.shape), x.dtype)}


@register("expand_as", ins=("X", Slot("target_tensor", no_grad=True)), outs=("Out",), infer=_expand_as_infer,
          grad=grad_of(("X",), uses=("X",)))
def expand_as(xp, ins, a, ctx):
    """Out = X tiled to target_tensor's shape (each of its dims a multiple of X's)."""
    x = ins["X"]
    return {"Out": xp.tile(x, tuple(_expand_as_times(x.shape, ins["target_tensor"].shape)))}


@register("expand_as_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), role="backward")
def expand_as_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    return {"X@GRAD": _unexpand(g, x.shape, _expand_as_times(x.shape, g.shape))}


def _merge(op: str, metas, slot: str) -> list:
    """The common shape of ``metas`` (-1 matches anything), or a ProgramError."""
    first = list(metas[0].shape)
    for i, m in enumerate(metas[1:], 1):
        s = list(m.shape)
        same = len(s) == len(first) and all(-1 in (p, q) or p == q for p, q in zip(first, s))
        check(same and m.dtype == metas[0].dtype,
              f"{op}: {slot}[{i}] {m.dtype}{s} and {slot}[0] {metas[0].dtype}{first} differ")
        first = [q if p == -1 else p for p, q in zip(first, s)]
    return first


def _stack_infer(ins, a):
    xs = ins["X"]
    shape = _merge("stack", xs, "X")
    ax = _axis("stack", a["axis"], shape, extra=1)
    return {"Y": Meta(tuple(shape[:ax] + [len(xs)] + shape[ax:]), xs[0].dtype)}


@register("stack", ins=(Slot("X", duplicable=True),), outs=("Y",), attrs={"axis": 0}, infer=_stack_infer,
          grad=grad_of(("X",), uses=(), out="Y"))
def stack(xp, ins, a, ctx):
    """Y = the X's (all of one shape) stacked along a new dim ``axis`` (in -(rank+1)..rank)."""
    return {"Y": xp.stack(ins["X"], axis=a["axis"])}


@register("stack_grad", ins=("Y@GRAD",), outs=(Slot("X@GRAD", duplicable=True, dispensable=True),),
          attrs={"axis": 0}, role="backward")
def stack_grad(xp, ins, a, ctx):
    g = ins["Y@GRAD"]
    ax = a["axis"] % g.ndim
    return {"X@GRAD": list(xp.moveaxis(g, ax, 0))}


def _unstack_infer(ins, a):
    x = ins["X"]
    ax = _axis("unstack", a["axis"], x.shape)
    n, d = a["num"], x.shape[ax]
    check(n >= 1 and d in (n, -1), f"unstack: num {n} must be >= 1 and equal dim {ax} of X{list(x.shape)}")
    return {"Y": [Meta(tuple(x.shape[:ax]) + tuple(x.shape[ax + 1:]), x.dtype)] * n}


@register("unstack", ins=("X",), outs=(Slot("Y", duplicable=True),), attrs={"axis": 0, "num": 0},
          infer=_unstack_infer, grad=grad_of(("X",), uses=(), out="Y"))
def unstack(xp, ins, a, ctx):
    """Y = the ``num`` slices of X along ``axis``, that dim removed."""
    x = ins["X"]
    ax = a["axis"] % x.ndim
    return {"Y": list(xp.moveaxis(x, ax, 0))}


@register("unstack_grad", ins=(Slot("Y@GRAD", duplicable=True),), outs=("X@GRAD",), attrs={"axis": 0, "num": 0},
          role="backward")
def unstack_grad(xp, ins, a, ctx):
    gs = ins["Y@GRAD"]
    return {"X@GRAD": xp.stack(gs, axis=a["axis"] % (gs[0].ndim + 1))}


# -- slice, crop_tensor, pad, pad2d, reverse ------------------------------------------------


def _slice_plan(shape, a, unknown=frozenset()):
    """(per-dim slices, Out's shape before decrease_axis, Out's shape) for Fluid 1.8's slice:
    a negative start/end counts from the end, then start >= 0 and 0 <= end <= dim are
    clamped, and end must stay greater than start. An unknown (-1) dim stays -1, and so does
    the dim of each entry in ``unknown`` (positions in ``axes`` whose start or end is read at
    run time, NOTE(run-time-ints) in ops/tensor.py)."""
    axes, starts, ends = list(a["axes"]), list(a["starts"]), list(a["ends"])
    check(len(axes) == len(starts) == len(ends), f"slice: axes {axes}, starts {starts} and ends {ends} "
                                                 f"differ in length")
    idx, full = [slice(None)] * len(shape), list(shape)
    for i, (ax, s0, e0) in enumerate(zip(axes, starts, ends)):
        ax = _axis("slice", ax, shape, "axes entry", slot="Input")
        d = shape[ax]
        if d == -1 or i in unknown:
            full[ax] = -1
            continue
        s = max(s0 + d if s0 < 0 else s0, 0)
        e = min(max(e0 + d if e0 < 0 else e0, 0), d)
        check(e > s, f"slice: starts {s0} and ends {e0} leave nothing of dim {ax} (size {d}) of "
                     f"Input{list(shape)}; end must be greater than start after clamping")
        idx[ax], full[ax] = slice(s, e), e - s
    dec = {_axis("slice", ax, shape, "decrease_axis entry", slot="Input") for ax in a["decrease_axis"]}
    for ax in dec:
        check(full[ax] in (1, -1), f"slice: decrease_axis {list(a['decrease_axis'])} names dim {ax}, whose "
                                   f"slice has size {full[ax]}, not 1 (Input{list(shape)})")
    out = [d for i, d in enumerate(full) if i not in dec] or [1]
    return tuple(idx), tuple(full), tuple(out)


_SLICE_ATTRS = {"axes": [], "starts": [], "ends": [], "infer_flags": [], "decrease_axis": []}


def _int_ins(*names) -> tuple:
    """The run-time int inputs of a slice op (NOTE(run-time-ints) in ops/tensor.py): for each
    of ``names`` (``Starts``), a whole tensor (``StartsTensor``) and a list of [1] tensors."""
    return tuple(s for n in names for s in (Slot(n + "Tensor", dispensable=True, no_grad=True),
                                            Slot(n + "TensorList", duplicable=True, dispensable=True, no_grad=True)))


def _static_attrs(op: str, ins, a, keys) -> tuple:
    """(a's ``keys`` lists with placeholders where read at run time, the positions read at run
    time), for ``infer``."""
    out, unknown = dict(a), set()
    for k in keys:
        name = k.capitalize()
        out[k], u = unknown_entries(op, ins, name + "Tensor", name + "TensorList", a[k], a["infer_flags"])
        unknown |= u
    return out, unknown


def _run_attrs(ins, a, keys) -> dict:
    """a with its ``keys`` lists read from the op's run-time int inputs where it has them."""
    return {**a, **{k: run_ints(ins, k.capitalize() + "Tensor", k.capitalize() + "TensorList", a[k]) for k in keys}}


_SLICE_KEYS = ("starts", "ends")
_SLICE_INS = ("Input",) + _int_ins("Starts", "Ends")


def _slice_infer(ins, a):
    attrs, unknown = _static_attrs("slice", ins, a, _SLICE_KEYS)
    return {"Out": Meta(_slice_plan(ins["Input"].shape, attrs, unknown)[2], ins["Input"].dtype)}


@register("slice", ins=_SLICE_INS, outs=("Out",), attrs=_SLICE_ATTRS, infer=_slice_infer, grad=grad_of(("Input",)))
def slice_(xp, ins, a, ctx):
    """Out = Input[starts:ends] along ``axes``, clamped as Fluid 1.8 (``_slice_plan``); the
    size-1 dims in ``decrease_axis`` are dropped ([1] if none is left). Starts and ends may
    come from int tensors (NOTE(run-time-ints) in ops/tensor.py)."""
    x = ins["Input"]
    idx, _, out = _slice_plan(x.shape, _run_attrs(ins, a, _SLICE_KEYS))
    return {"Out": x[idx].reshape(out)}


@register("slice_grad", ins=_SLICE_INS + ("Out@GRAD",), outs=("Input@GRAD",), attrs=_SLICE_ATTRS, role="backward")
def slice_grad(xp, ins, a, ctx):
    x, g = ins["Input"], ins["Out@GRAD"]
    idx, full, _ = _slice_plan(x.shape, _run_attrs(ins, a, _SLICE_KEYS))
    dx = xp.zeros(x.shape, dtype=g.dtype)
    dx[idx] = g.reshape(full)
    return {"Input@GRAD": dx}


def _crop_plan(shape, a):
    """(slices, Out's shape) of crop_tensor: Out dim i is ``shape[i]`` (-1: to the end of X's dim)
    from ``offsets[i]`` (default 0)."""
    rank = len(shape)
    size, offs = [int(s) for s in a["shape"]], [int(o) for o in a["offsets"]] or [0] * rank
    check(len(size) == rank and len(offs) == rank,
          f"crop_tensor: shape {size} and offsets {offs} must have one entry per dim of X{list(shape)}")
    out, idx = [], []
    for i, (d, s, o) in enumerate(zip(shape, size, offs)):
        check(o >= 0 and (s > 0 or s == -1), f"crop_tensor: dim {i}: offset {o} must be >= 0 and shape {s} > 0 "
                                             f"or -1 (X{list(shape)})")
        n = (d - o if d != -1 else -1) if s == -1 else s
        check(d == -1 or o + n <= d, f"crop_tensor: dim {i}: offset {o} + size {n} exceeds X{list(shape)}")
        out.append(n)
        idx.append(slice(o, None if n == -1 else o + n))
    return tuple(idx), tuple(out)


@register("crop_tensor", ins=("X",), outs=("Out",), attrs={"shape": [], "offsets": []},
          infer=lambda ins, a: {"Out": Meta(_crop_plan(ins["X"].shape, a)[1], ins["X"].dtype)},
          grad=grad_of(("X",)))
def crop_tensor(xp, ins, a, ctx):
    """Out = the box of X of size ``shape`` at ``offsets``."""
    return {"Out": ins["X"][_crop_plan(ins["X"].shape, a)[0]]}


@register("crop_tensor_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"shape": [], "offsets": []},
          role="backward")
def crop_tensor_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    dx = xp.zeros(x.shape, dtype=g.dtype)
    dx[_crop_plan(x.shape, a)[0]] = g
    return {"X@GRAD": dx}


def _pad_pairs(op: str, shape, pads) -> list:
    pads = [int(p) for p in pads]
    check(len(pads) == 2 * len(shape) and min(pads, default=0) >= 0,
          f"{op}: paddings {pads} must hold 2 sizes >= 0 per dim of X{list(shape)}")
    return [(pads[2 * i], pads[2 * i + 1]) for i in range(len(shape))]


def _pad_infer(ins, a):
    x = ins["X"]
    pairs = _pad_pairs("pad", x.shape, a["paddings"])
    return {"Out": Meta(tuple(-1 if d == -1 else d + p + q for d, (p, q) in zip(x.shape, pairs)), x.dtype)}


@register("pad", ins=("X",), outs=("Out",), attrs={"paddings": [], "pad_value": 0.0}, infer=_pad_infer,
          grad=grad_of(("X",)))
def pad(xp, ins, a, ctx):
    """Out = X with ``paddings[2i]`` values before and ``paddings[2i+1]`` after each dim i, all
    ``pad_value``."""
    x = ins["X"]
    return {"Out": xp.pad(x, _pad_pairs("pad", x.shape, a["paddings"]), mode="constant",
                          constant_values=a["pad_value"])}


@register("pad_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"paddings": [], "pad_value": 0.0},
          role="backward")
def pad_grad(xp, ins, a, ctx):
    x, g = ins["X"], ins["Out@GRAD"]
    pairs = _pad_pairs("pad", x.shape, a["paddings"])
    return {"X@GRAD": g[tuple(slice(p, p + d) for (p, _), d in zip(pairs, x.shape))]}


_PAD2D_ATTRS = {"paddings": [0, 0, 0, 0], "mode": "constant", "pad_value": 0.0, "data_format": "NCHW"}


def _pad2d_check(shape, a) -> tuple:
    """The (H, W) axes of X, after checking rank, mode, format and the [top, bottom, left,
    right] paddings (reflect needs each pad smaller than its dim)."""
    pads, mode, fmt = [int(p) for p in a["paddings"]], a["mode"], a["data_format"]
    check(len(shape) == 4, f"pad2d: X must be 4-D, got X{list(shape)}")
    check(mode in ("constant", "reflect", "edge"), f"pad2d: mode {mode!r} must be constant, reflect or edge")
    check(fmt in ("NCHW", "NHWC"), f"pad2d: data_format {fmt!r} must be NCHW or NHWC")
    check(len(pads) == 4 and min(pads) >= 0, f"pad2d: paddings {pads} must be [top, bottom, left, right], all >= 0")
    axes = (2, 3) if fmt == "NCHW" else (1, 2)
    for ax, (p, q) in zip(axes, (pads[:2], pads[2:])):
        d = shape[ax]
        check(mode != "reflect" or d == -1 or max(p, q) < d,
              f"pad2d: reflect paddings {pads} must be smaller than the padded dims of X{list(shape)} ({fmt})")
    return axes


def _pad2d_infer(ins, a):
    x = ins["X"]
    out, p = list(x.shape), a["paddings"]
    for ax, (b, e) in zip(_pad2d_check(x.shape, a), (p[:2], p[2:])):
        out[ax] = -1 if out[ax] == -1 else out[ax] + b + e
    return {"Out": Meta(tuple(out), x.dtype)}


def _pad_index(xp, n: int, before: int, after: int, mode: str):
    """For each output position of one padded dim, the input position it reads (NOTE(pad2d))."""
    i = xp.arange(-before, n + after)
    if mode == "reflect":
        i = xp.abs(i)
        return xp.minimum(i, 2 * (n - 1) - i)
    return xp.clip(i, 0, n - 1)


def _pad2d_channels_first(xp, x, a):
    return x if a["data_format"] == "NCHW" else xp.moveaxis(x, 3, 1)


@register("pad2d", ins=("X",), outs=("Out",), attrs=_PAD2D_ATTRS, infer=_pad2d_infer, grad=grad_of(("X",)))
def pad2d(xp, ins, a, ctx):
    """Out = X padded in H and W by ``paddings`` [top, bottom, left, right]: with ``pad_value``
    (constant), the mirror image without the edge (reflect) or the edge repeated (edge).

    NOTE(pad2d): each padded dim is a gather with an index per output position (reflect
    ``|i|`` folded at ``n - 1``, edge ``i`` clipped); constant mode then masks the pad. The
    gradient adds each output position's gradient into the input position it read, done as
    one-hot matrices ``Ph^T @ g @ Pw`` (no scatter, the same on cupy)."""
    x = _pad2d_channels_first(xp, ins["X"], a)
    t, b, l, r = (int(p) for p in a["paddings"])
    h, w, mode = x.shape[2], x.shape[3], a["mode"]
    ih, iw = _pad_index(xp, h, t, b, mode), _pad_index(xp, w, l, r, mode)
    out = x[:, :, ih[:, None], iw[None, :]]
    if mode == "constant":
        rows = (xp.arange(h + t + b) >= t) & (xp.arange(h + t + b) < t + h)
        cols = (xp.arange(w + l + r) >= l) & (xp.arange(w + l + r) < l + w)
        out = xp.where(rows[:, None] & cols[None, :], out, xp.asarray(a["pad_value"], dtype=x.dtype))
    return {"Out": out if a["data_format"] == "NCHW" else xp.moveaxis(out, 1, 3)}


@register("pad2d_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs=_PAD2D_ATTRS, role="backward")
def pad2d_grad(xp, ins, a, ctx):
    x, g = _pad2d_channels_first(xp, ins["X"], a), _pad2d_channels_first(xp, ins["Out@GRAD"], a)
    t, b, l, r = (int(p) for p in a["paddings"])
    h, w, mode = x.shape[2], x.shape[3], a["mode"]
    if mode == "constant":
        dx = g[:, :, t:t + h, l:l + w]
    else:
        ph = (_pad_index(xp, h, t, b, mode)[:, None] == xp.arange(h)).astype(g.dtype)  # [oH, H]
        pw = (_pad_index(xp, w, l, r, mode)[:, None] == xp.arange(w)).astype(g.dtype)  # [oW, W]
        dx = xp.matmul(xp.matmul(ph.T, g), pw)
    return {"X@GRAD": dx if a["data_format"] == "NCHW" else xp.moveaxis(dx, 1, 3)}


def _reverse_axes(shape, a) -> tuple:
    axes = [_axis("reverse", ax, shape, "axis entry") for ax in a["axis"]]
    check(bool(axes) and len(set(axes)) == len(axes), f"reverse: axis {list(a['axis'])} must name distinct dims "
                                                      f"of X{list(shape)}, at least one")
    return tuple(axes)


def _reverse_infer(ins, a):
    _reverse_axes(ins["X"].shape, a)
    return {"Out": ins["X"]}


@register("reverse", ins=("X",), outs=("Out",), attrs={"axis": []}, infer=_reverse_infer, grad=_x_grad)
def reverse(xp, ins, a, ctx):
    """Out = X with the order along each dim in ``axis`` reversed (its own gradient)."""
    return {"Out": xp.flip(ins["X"], axis=_reverse_axes(ins["X"].shape, a))}


# -- flip, roll, tril_triu, diag, diag_embed, meshgrid --------------------------------------


def _flip_infer(ins, a):
    x = ins["X"]
    dims = [_axis("flip", d, x.shape, "dims entry") for d in a["dims"]]
    check(bool(dims) and len(set(dims)) == len(dims), f"flip: dims {list(a['dims'])} must name distinct dims of "
                                                      f"X{list(x.shape)}, at least one")
    return {"Out": x}


@register("flip", ins=("X",), outs=("Out",), attrs={"dims": []}, infer=_flip_infer, grad=_x_grad)
def flip(xp, ins, a, ctx):
    """Out = X with the order along each of ``dims`` reversed (its own gradient)."""
    x = ins["X"]
    return {"Out": xp.flip(x, axis=tuple(d % x.ndim for d in a["dims"]))}


def _roll_infer(ins, a):
    x = ins["X"]
    shifts, dims = list(a["shifts"]), list(a["dims"])
    check(len(shifts) == len(dims) and dims, f"roll: shifts {shifts} and dims {dims} must be non-empty and of one "
                                             f"length")
    for d in dims:
        _axis("roll", d, x.shape, "dims entry")
    return {"Out": x}


def _roll_grad(op):
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    return [OpSpec("roll", {"X": [grad_name(op.outputs["Out"][0])]}, {"Out": [op.grad_of(x)]},
                   {**op.attrs, "shifts": [-int(s) for s in op.attrs["shifts"]]})]


@register("roll", ins=("X",), outs=("Out",), attrs={"shifts": [], "dims": []}, infer=_roll_infer, grad=_roll_grad)
def roll(xp, ins, a, ctx):
    """Out = X rolled by ``shifts[i]`` along ``dims[i]`` (entries pushed past the end come back
    at the start); its gradient rolls back. ``fluid.layers.roll`` without dims flattens first."""
    x = ins["X"]
    return {"Out": xp.roll(x, tuple(int(s) for s in a["shifts"]), axis=tuple(d % x.ndim for d in a["dims"]))}


def _tril_triu_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) >= 2, f"tril_triu: X must have rank >= 2, got X{list(x.shape)}")
    return {"Out": x}


def _tril_mask(xp, shape, a):
    rows, cols = xp.arange(shape[-2])[:, None], xp.arange(shape[-1])[None, :]
    return cols - rows <= a["diagonal"] if a["lower"] else cols - rows >= a["diagonal"]


@register("tril_triu", ins=("X",), outs=("Out",), attrs={"diagonal": 0, "lower": True}, infer=_tril_triu_infer,
          grad=grad_of(("X",), uses=()))
def tril_triu(xp, ins, a, ctx):
    """Out = X on and below (``lower``) or on and above diagonal ``diagonal`` of its last two
    dims, zeros elsewhere (fluid.layers.tril / triu)."""
    x = ins["X"]
    return {"Out": xp.where(_tril_mask(xp, x.shape, a), x, xp.zeros((), dtype=x.dtype))}


@register("tril_triu_grad", ins=("Out@GRAD",), outs=("X@GRAD",), attrs={"diagonal": 0, "lower": True},
          role="backward")
def tril_triu_grad(xp, ins, a, ctx):
    g = ins["Out@GRAD"]
    return {"X@GRAD": xp.where(_tril_mask(xp, g.shape, a), g, xp.zeros((), dtype=g.dtype))}


def _diag_infer(ins, a):
    d = ins["Diagonal"]
    check(len(d.shape) == 1, f"diag: Diagonal must be 1-D, got Diagonal{list(d.shape)}")
    return {"Out": Meta((d.shape[0], d.shape[0]), d.dtype)}


@register("diag", ins=(Slot("Diagonal", no_grad=True),), outs=("Out",), infer=_diag_infer)
def diag(xp, ins, a, ctx):
    """Out = the square matrix with Diagonal on its diagonal, zeros elsewhere. No gradient."""
    d = ins["Diagonal"]
    return {"Out": d[:, None] * xp.eye(d.shape[0], dtype=d.dtype)}


def _diag_embed_plan(shape, a) -> tuple:
    """(dim1, dim2, n): the output dims that hold the new plane and its size."""
    r = len(shape) + 1
    d1, d2, off = a["dim1"], a["dim2"], a["offset"]
    check(len(shape) >= 1 and -r <= d1 < r and -r <= d2 < r and d1 % r != d2 % r,
          f"diag_embed: dim1 {d1} and dim2 {d2} must be two different dims of the rank-{r} output "
          f"(Input{list(shape)})")
    n = shape[-1] + abs(off) if shape[-1] != -1 else -1
    return d1 % r, d2 % r, n


def _diag_embed_infer(ins, a):
    x = ins["Input"]
    d1, d2, n = _diag_embed_plan(x.shape, a)
    rest = iter(x.shape[:-1])
    return {"Out": Meta(tuple(n if i in (d1, d2) else next(rest) for i in range(len(x.shape) + 1)), x.dtype)}


@register("diag_embed", ins=(Slot("Input", no_grad=True),), outs=("Out",), attrs={"offset": 0, "dim1": -2, "dim2": -1},
          infer=_diag_embed_infer)
def diag_embed(xp, ins, a, ctx):
    """Out = Input's last dim laid along diagonal ``offset`` of a new plane of output dims
    ``dim1`` x ``dim2`` (size n + |offset|), the other dims Input's leading ones; zeros off it.
    No gradient (Fluid 1.8's layer stops it)."""
    x = ins["Input"]
    d1, d2, n = _diag_embed_plan(x.shape, a)
    off = a["offset"]
    rows, cols = xp.arange(n)[:, None], xp.arange(n)[None, :]  # the plane: rows dim1, columns dim2
    src = xp.minimum(xp.broadcast_to(rows if off >= 0 else cols, (n, n)), x.shape[-1] - 1)
    plane = xp.where(cols - rows == off, x[..., src], xp.zeros((), dtype=x.dtype))  # (i, i + off) holds x[..., i]
    return {"Out": xp.moveaxis(plane, (-2, -1), (d1, d2))}


def _meshgrid_infer(ins, a):
    xs = ins["X"]
    for i, m in enumerate(xs):
        check(len(m.shape) == 1, f"meshgrid: X[{i}] must be 1-D, got {list(m.shape)}")
    shape = tuple(m.shape[0] for m in xs)
    return {"Out": [Meta(shape, m.dtype) for m in xs]}


@register("meshgrid", ins=(Slot("X", duplicable=True),), outs=(Slot("Out", duplicable=True),),
          infer=_meshgrid_infer, grad=grad_of(("X",), uses=("X",)))
def meshgrid(xp, ins, a, ctx):
    """Out[i] = X[i] broadcast along every other axis of the grid [len(X[0]), len(X[1]), ...]
    (numpy's meshgrid with indexing='ij')."""
    return {"Out": list(xp.meshgrid(*ins["X"], indexing="ij"))}


@register("meshgrid_grad", ins=(Slot("X", duplicable=True), Slot("Out@GRAD", duplicable=True)),
          outs=(Slot("X@GRAD", duplicable=True, dispensable=True),), role="backward")
def meshgrid_grad(xp, ins, a, ctx):
    gs = ins["Out@GRAD"]
    n = len(gs)
    return {"X@GRAD": [g.sum(axis=tuple(j for j in range(n) if j != i)) for i, g in enumerate(gs)]}


# -- strided_slice ----------------------------------------------------------------------------


_STRIDED_ATTRS = {"axes": [], "starts": [], "ends": [], "strides": [], "infer_flags": [], "decrease_axis": []}


def _strided_dim(d: int, s0: int, e0: int, st: int):
    """The slice of one dim of size d that Fluid 1.8's strided_slice takes (NOTE(strided-slice-1.8)),
    or None when it takes nothing."""
    s = s0 + d if s0 < 0 else s0
    e = e0 if (e0 == -1 and st < 0) else (e0 + d if e0 < 0 else e0)  # -1 with st < 0: "to the start"
    if st < 0:
        s, e = s + 1, e + 1
    if s >= e if st > 0 else s <= e:
        return None
    n = (abs(min(d, max(s, e)) - max(0, min(s, e))) + abs(st) - 1) // abs(st)
    first = min(max(s if st > 0 else e, 0), d)
    last = first + abs(st) * (n - 1)
    if n <= 0 or last >= d:
        return None
    return slice(first, last + 1, st) if st > 0 else slice(last, first - 1 if first else None, st)


def _strided_plan(shape, a, unknown=frozenset()):
    """(per-dim slices, Out's shape before decrease_axis, Out's shape), as Fluid 1.8 slices
    (NOTE(strided-slice-1.8)); an empty slice is an error, as in Paddle. The dims of the
    entries in ``unknown`` (read at run time) stay -1, as ``_slice_plan``'s."""
    axes, starts, ends, strides = (list(a[k]) for k in ("axes", "starts", "ends", "strides"))
    check(len(axes) == len(starts) == len(ends) == len(strides),
          f"strided_slice: axes {axes}, starts {starts}, ends {ends} and strides {strides} differ in length")
    idx, full = [slice(None)] * len(shape), list(shape)
    for i, (ax, s0, e0, st) in enumerate(zip(axes, starts, ends, strides)):
        ax = _axis("strided_slice", ax, shape, "axes entry", slot="Input")
        check(st != 0 or i in unknown, f"strided_slice: strides {strides} holds a 0 (axis {ax})")
        d = shape[ax]
        if d == -1 or i in unknown:
            full[ax] = -1
            continue
        sl = _strided_dim(d, s0, e0, st)
        check(sl is not None, f"strided_slice: starts {s0}, ends {e0} and stride {st} leave nothing of dim {ax} "
                              f"(size {d}) of Input{list(shape)}")
        idx[ax], full[ax] = sl, len(range(d)[sl])
    dec = {_axis("strided_slice", ax, shape, "decrease_axis entry", slot="Input") for ax in a["decrease_axis"]}
    for ax in dec:
        check(full[ax] in (1, -1), f"strided_slice: decrease_axis {list(a['decrease_axis'])} names dim {ax}, whose "
                                   f"slice has size {full[ax]}, not 1 (Input{list(shape)})")
    return tuple(idx), tuple(full), tuple(d for i, d in enumerate(full) if i not in dec) or (1,)


_STRIDED_KEYS = ("starts", "ends", "strides")
_STRIDED_INS = ("Input",) + _int_ins("Starts", "Ends", "Strides")


def _strided_infer(ins, a):
    attrs, unknown = _static_attrs("strided_slice", ins, a, _STRIDED_KEYS)
    return {"Out": Meta(_strided_plan(ins["Input"].shape, attrs, unknown)[2], ins["Input"].dtype)}


@register("strided_slice", ins=_STRIDED_INS, outs=("Out",), attrs=_STRIDED_ATTRS, infer=_strided_infer,
          grad=grad_of(("Input",)))
def strided_slice(xp, ins, a, ctx):
    """Out = Input[starts:ends:strides] along ``axes`` (a negative stride walks backwards), the
    size-1 dims in ``decrease_axis`` dropped ([1] if none is left).

    NOTE(strided-slice-1.8): Fluid 1.8's kernel (strided_slice_op.h) counts a negative start or
    end from the end once (an end of -1 with a negative stride means "past the first entry"),
    then for a negative stride takes the *forward* slice [end + 1, start + 1) with step |stride|
    and reverses it: the entries it takes are anchored at the end, not at the start as in
    numpy. x[5:-100:-2] of 7 entries is x[4], x[2], x[0] there (numpy: x[5], x[3], x[1]); the
    two agree when |stride| is 1 or divides start - end - 1. Out's size is ceil((right - left) /
    |stride|) over the clamped range. We keep 1.8's entries (checked over a sweep of starts,
    ends and strides against Paddle 1.8.5; Paddle 2.6 slices as numpy does)."""
    x = ins["Input"]
    idx, _, out = _strided_plan(x.shape, _run_attrs(ins, a, _STRIDED_KEYS))
    return {"Out": x[idx].reshape(out)}


@register("strided_slice_grad", ins=_STRIDED_INS + ("Out@GRAD",), outs=("Input@GRAD",), attrs=_STRIDED_ATTRS,
          role="backward")
def strided_slice_grad(xp, ins, a, ctx):
    x, g = ins["Input"], ins["Out@GRAD"]
    idx, full, _ = _strided_plan(x.shape, _run_attrs(ins, a, _STRIDED_KEYS))
    dx = xp.zeros(x.shape, dtype=g.dtype)
    dx[idx] = g.reshape(full)
    return {"Input@GRAD": dx}


# -- pad_constant_like ----------------------------------------------------------------------


def _pad_like_infer(ins, a):
    x, y = ins["X"], ins["Y"]
    ok = len(x.shape) == len(y.shape) and all(-1 in (p, q) or p >= q for p, q in zip(x.shape, y.shape))
    check(ok, f"pad_constant_like: Y{list(y.shape)} must have X{list(x.shape)}'s rank and no dim larger than X's")
    return {"Out": Meta(tuple(x.shape), y.dtype)}


@register("pad_constant_like", ins=(Slot("X", no_grad=True), "Y"), outs=("Out",), attrs={"pad_value": 0.0},
          infer=_pad_like_infer, grad=grad_of(("Y",), uses=("Y",)))
def pad_constant_like(xp, ins, a, ctx):
    """Out = Y padded with ``pad_value`` after its end in every dim, to X's shape (only Y has a
    gradient)."""
    x, y = ins["X"], ins["Y"]
    return {"Out": xp.pad(y, [(0, p - q) for p, q in zip(x.shape, y.shape)], constant_values=a["pad_value"])}


@register("pad_constant_like_grad", ins=("Y", "Out@GRAD"), outs=("Y@GRAD",), attrs={"pad_value": 0.0},
          role="backward")
def pad_constant_like_grad(xp, ins, a, ctx):
    y = ins["Y"]
    return {"Y@GRAD": ins["Out@GRAD"][tuple(slice(0, d) for d in y.shape)]}
