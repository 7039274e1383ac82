"""Tensor creation and shape ops: fill_constant, increment, fill_zeros_like, assign,
assign_value, eye, linspace, concat, split, reshape, cast."""
from __future__ import annotations

import math

import numpy as np

from placegroup.ops.registry import Cut, Meta, OpSpec, Slot, check, grad_name, grad_of, register
from placegroup.ops.sparse import concat_rows
from placegroup.values import concat_lod_tensors, is_lod_tensor, is_selected_rows


def _cut_shape(a, cut: Cut) -> dict:
    """NOTE(init-cut) for a constant: every part is the constant, of the part's shape."""
    cut.check("fill_constant", a["shape"])
    return {**a, "shape": list(cut.shape)}


# NOTE(run-time-ints): Fluid 1.8 lets some layers take a list of ints as Variables (a shape in
# fill_constant or uniform_random, a slice's starts, ends and strides): the op then reads them
# from inputs, either one int tensor holding the whole list (``ShapeTensor``, ``StartsTensor``)
# or one [1] int tensor per entry (``ShapeTensorList``, ``StartsTensorList``; the layer makes a
# constant tensor for each Python int among them). The whole tensor wins over the list and the
# list over the attr, as in Fluid's kernels. When the program is built such an entry is
# unknown: ``infer`` gives -1 for the dims it decides, and the kernel reads the values each run
# (``run_ints``), so they may change from step to step (``fluid.layers.shape(x)[0]``, the
# batch size).


def run_ints(ins, whole: str, each: str, attr) -> list:
    """The ints an op reads from input ``whole``, else from the [1] tensors of ``each``, else
    from ``attr`` (NOTE(run-time-ints))."""
    if ins.get(whole) is not None:
        return [int(v) for v in ins[whole].reshape(-1).tolist()]
    if ins.get(each):
        return [int(t.reshape(-1)[0]) for t in ins[each]]
    return [int(v) for v in attr]


def unknown_entries(op: str, ins, whole: str, each: str, attr, flags=None) -> tuple:
    """(``attr`` with a placeholder 0 at each entry known only at run time, the set of their
    positions): every entry when ``whole`` is given, the entries of ``each`` whose attr value
    is -1 (or whose ``flags`` entry is -1, for a slice's ``infer_flags``) when it is."""
    if ins.get(whole) is not None:
        shape = ins[whole].shape
        check(len(shape) == 1 and shape[0] >= 0, f"{op}: {whole} must be a 1-D int tensor of known length, got "
                                                 f"shape {list(shape)}; give the list as a Python list instead")
        return [0] * shape[0], set(range(shape[0]))
    vals = [int(v) for v in attr]
    if ins.get(each):
        n = len(ins[each])
        check(len(vals) in (0, n), f"{op}: {each} holds {n} tensors but its attr holds {len(vals)} entries {vals}")
        vals = vals or [-1] * n
        flags = list(flags) if flags is not None and len(flags) == n else vals
        unknown = {i for i, f in enumerate(flags) if f == -1}
        return [0 if i in unknown else v for i, v in enumerate(vals)], unknown
    return vals, set()


SHAPE_INS = (Slot("ShapeTensor", dispensable=True, no_grad=True),
              Slot("ShapeTensorList", duplicable=True, dispensable=True, no_grad=True))


def static_shape(op: str, ins, a) -> tuple:
    """An op's ``shape`` attr as ``infer`` sees it: -1 for each dim given at run time."""
    shape, unknown = unknown_entries(op, ins, "ShapeTensor", "ShapeTensorList", a["shape"])
    return tuple(-1 if i in unknown else d for i, d in enumerate(shape))


@register("fill_constant", ins=SHAPE_INS, outs=("Out",), attrs={"shape": [1], "value": 0.0, "dtype": "float32"},
          infer=lambda ins, a: {"Out": Meta(static_shape("fill_constant", ins, a), a["dtype"])}, role="init",
          cut=_cut_shape)
def fill_constant(xp, ins, a, ctx):
    """Out = a tensor of ``shape`` filled with ``value`` (the shape read from ShapeTensor or
    ShapeTensorList when given, NOTE(run-time-ints))."""
    shape = tuple(run_ints(ins, "ShapeTensor", "ShapeTensorList", a["shape"]))
    return {"Out": xp.full(shape, a["value"], dtype=a["dtype"])}


@register("increment", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs={"step": 1.0},
          infer=lambda ins, a: {"Out": ins["X"]}, inplace={"Out": "X"})
def increment(xp, ins, a, ctx):
    """Out = X + step (X has one element; used for step counters)."""
    x = ins["X"]
    return {"Out": x + xp.asarray(a["step"], dtype=x.dtype)}


@register("fill_zeros_like", ins=(Slot("X", no_grad=True),), outs=("Out",), infer=lambda ins, a: {"Out": ins["X"]})
def fill_zeros_like(xp, ins, a, ctx):
    """Out = zeros with X's shape and dtype."""
    return {"Out": xp.zeros_like(ins["X"])}


@register("assign", ins=("X",), outs=("Out",), infer=lambda ins, a: {"Out": ins["X"]},
          grad=lambda op: [OpSpec("assign", {"X": [op.outputs["Out"][0] + "@GRAD"]},
                                  {"Out": [op.grad_of(op.inputs["X"][0])]})])
def assign(xp, ins, a, ctx):
    """Out = X (the value is shared, never mutated in place)."""
    return {"Out": ins["X"]}


def _cut_values(a, cut: Cut) -> dict:
    """NOTE(init-cut) for an array (a NumpyArrayInitializer's, Bilinear's): a row block or
    shard keeps only its own values, cut here once; a per-rank part (``rank_axis``) keeps the
    whole extent along that axis, which each rank cuts from when it runs."""
    shape = tuple(int(d) for d in a["shape"])
    cut.check("assign_value", shape)
    if a["rank_axis"] >= 0:
        raise ValueError(f"assign_value: a per-rank part (rank_axis {a['rank_axis']}) cannot be cut again")
    if len(a["values"]) != math.prod(shape):
        raise ValueError(f"assign_value: {len(a['values'])} values do not fill its shape {list(shape)}")
    ax = cut.rank_axis
    box = tuple(slice(None) if d == ax else slice(o, o + st * (n - 1) + 1, st)
                for d, (n, o, st) in enumerate(zip(cut.shape, cut.offsets, cut.strides)))
    part = np.asarray(a["values"]).reshape(shape)[box]
    if ax < 0:
        return {**a, "shape": list(cut.shape), "values": part.ravel().tolist()}
    return {**a, "shape": list(cut.shape), "values": part.ravel().tolist(), "whole_shape": list(part.shape),
            "rank_axis": ax}


@register("assign_value", ins=(), outs=("Out",),
          attrs={"shape": [1], "dtype": "float32", "values": [], "whole_shape": [], "rank_axis": -1},
          infer=lambda ins, a: {"Out": Meta(tuple(a["shape"]), a["dtype"])}, role="init", cut=_cut_values)
def assign_value(xp, ins, a, ctx):
    """Out = the constant ``values`` (flat list) reshaped to ``shape``. With ``rank_axis`` >= 0
    (a model-parallel shard, as the random ops' ``rank_axis``), ``values`` is the whole array
    of ``whole_shape`` and Out is the ``ctx.rank``-th part of it along ``rank_axis``, of
    ``shape``: a trainer's columns of a pretrained weight."""
    shape = tuple(a["shape"])
    if a["rank_axis"] < 0:
        return {"Out": xp.asarray(a["values"], dtype=a["dtype"]).reshape(shape)}
    whole, ax = tuple(a["whole_shape"]), a["rank_axis"]
    check(len(a["values"]) == math.prod(whole) and len(whole) == len(shape) and 0 <= ax < len(whole)
          and whole[:ax] + whole[ax + 1:] == shape[:ax] + shape[ax + 1:]
          and (ctx.rank + 1) * shape[ax] <= whole[ax],
          f"assign_value: the part {list(shape)} of rank {ctx.rank} along axis {ax} is not in the whole "
          f"array {list(whole)} ({len(a['values'])} values given)")
    arr = np.asarray(a["values"], dtype=a["dtype"]).reshape(whole)
    part = np.take(arr, range(ctx.rank * shape[ax], (ctx.rank + 1) * shape[ax]), axis=ax)
    return {"Out": xp.asarray(part)}


# -- eye, linspace --------------------------------------------------------------------------


def _eye_infer(ins, a):
    rows, cols = int(a["num_rows"]), int(a["num_columns"])
    check(rows >= 0 and cols >= -1, f"eye: num_rows ({rows}) must be >= 0 and num_columns ({cols}) >= 0 "
                                    f"(-1: num_rows)")
    return {"Out": Meta((rows, rows if cols == -1 else cols), np.dtype(a["dtype"]).name)}


@register("eye", ins=(), outs=("Out",), attrs={"num_rows": 1, "num_columns": -1, "dtype": "float32"},
          infer=_eye_infer)
def eye(xp, ins, a, ctx):
    """Out = the [num_rows, num_columns] identity (num_columns -1: square)."""
    rows, cols = int(a["num_rows"]), int(a["num_columns"])
    return {"Out": xp.eye(rows, rows if cols == -1 else cols, dtype=a["dtype"])}


def _linspace_infer(ins, a):
    s, e, n = ins["Start"], ins["Stop"], ins["Num"]
    check(s.dtype == e.dtype and s.dtype in ("float32", "float64"),
          f"linspace: Start and Stop must share float32 or float64, got {s.dtype} and {e.dtype}")
    check(n.dtype == "int32", f"linspace: Num must be int32, got {n.dtype}")
    for slot, m in (("Start", s), ("Stop", e), ("Num", n)):
        check(math.prod(m.shape) in (1, -1), f"linspace: {slot} must hold one value, got shape {list(m.shape)}")
    return {"Out": Meta((-1,), s.dtype)}


@register("linspace", ins=tuple(Slot(s, no_grad=True) for s in ("Start", "Stop", "Num")), outs=("Out",),
          infer=_linspace_infer)
def linspace(xp, ins, a, ctx):
    """Out = Num values from Start to Stop: Start, then repeated additions of (Stop - Start) /
    (Num - 1) in the output dtype, as Fluid 1.8's CPU kernel accumulates them (so the last may
    miss Stop by rounding). Num < 1 is a ValueError."""
    dt = ins["Start"].dtype
    start, stop = dt.type(ins["Start"].reshape(-1)[0]), dt.type(ins["Stop"].reshape(-1)[0])
    num = int(ins["Num"].reshape(-1)[0])
    if num < 1:
        raise ValueError(f"linspace: Num must be > 0, got {num}")
    steps = xp.full((num,), (stop - start) / dt.type(max(num - 1, 1)), dtype=dt)
    steps[0] = start
    return {"Out": xp.cumsum(steps, dtype=dt)}


# -- concat, split --------------------------------------------------------------------------


def _axis(axis: int, rank: int, op: str, shape) -> int:
    check(-rank <= axis < rank, f"{op}: axis {axis} is out of range for X{list(shape)}")
    return axis % rank


def _concat_infer(ins, a):
    xs = ins["X"]
    first = list(xs[0].shape)
    axis = _axis(a["axis"], len(first), "concat", first)
    out = list(first)
    for i, m in enumerate(xs[1:], 1):
        shape = list(m.shape)
        check(len(shape) == len(first) and m.dtype == xs[0].dtype,
              f"concat: X[{i}] {m.dtype}{shape} and X[0] {xs[0].dtype}{first} differ in rank or dtype")
        for d, (p, q) in enumerate(zip(out, shape)):
            if d != axis:
                check(p == q or -1 in (p, q), f"concat: X[{i}]{shape} and X[0]{first} differ in dim {d} "
                                              f"(only the concat axis {axis} may differ)")
                out[d] = q if p == -1 else p
    sizes = [m.shape[axis] for m in xs]
    out[axis] = -1 if -1 in sizes else sum(sizes)
    return {"Out": Meta(tuple(out), xs[0].dtype)}


@register("concat", ins=(Slot("X", duplicable=True),), outs=("Out",), attrs={"axis": 0},
          infer=_concat_infer, grad=grad_of(("X",)))
def concat(xp, ins, a, ctx):
    """Out = X[0], X[1], ... joined along ``axis`` (negative counts from the end)."""
    return {"Out": xp.concatenate(ins["X"], axis=a["axis"])}


@register("concat_places", ins=(Slot("X", duplicable=True),), outs=("Out",),
          infer=lambda ins, a: _concat_infer(ins, {"axis": 0}),
          lod=lambda levels, a: {"Out": max(levels.get("X") or [0])}, wants_lod=("X",))
def concat_places(xp, ins, a, ctx):
    """Out = the places' parts of one step's batch, X[0], X[1], ..., joined along dim 0 with
    their LoDs (each level's offsets shifted past the parts before it), as Fluid joins the
    places' values of a fetch; SelectedRows parts join their rows (NOTE(data-parallel) in
    placegroup/model/data_parallel.py)."""
    xs = ins["X"]
    if is_selected_rows(xs[0]):
        return {"Out": concat_rows(xp, "concat_places", xs)}
    if not is_lod_tensor(xs[0]):
        return {"Out": xp.concatenate(xs, axis=0)}
    return {"Out": concat_lod_tensors(xp, xs)}


@register("concat_grad", ins=(Slot("X", duplicable=True), "Out@GRAD"),
          outs=(Slot("X@GRAD", duplicable=True, dispensable=True),), attrs={"axis": 0}, role="backward")
def concat_grad(xp, ins, a, ctx):
    xs, g = ins["X"], ins["Out@GRAD"]
    axis = a["axis"] % g.ndim
    bounds = [0]
    for x in xs:
        bounds.append(bounds[-1] + x.shape[axis])
    return {"X@GRAD": xp.split(g, bounds[1:-1], axis=axis)}


def _split_sizes(dim: int, a, shape) -> list:
    """The size of each output along the split axis (-1 where ``dim`` is unknown)."""
    num, sections = a["num"], list(a["sections"])
    check((num > 0) != bool(sections), f"split: give exactly one of num (got {num}) and sections "
                                       f"(got {sections})")
    if num > 0:
        check(dim == -1 or dim % num == 0, f"split: dim {dim} of X{list(shape)} does not divide into "
                                           f"num={num} equal parts")
        return [dim // num if dim != -1 else -1] * num
    check(sections.count(-1) <= 1 and all(s >= 0 or s == -1 for s in sections),
          f"split: sections {sections} may hold one -1 (inferred) and sizes >= 0")
    known = sum(s for s in sections if s != -1)
    if dim != -1:
        check(known == dim if -1 not in sections else known <= dim,
              f"split: sections {sections} do not add up to dim {dim} of X{list(shape)}")
        return [dim - known if s == -1 else s for s in sections]
    return sections


def _split_infer(ins, a):
    x = ins["X"]
    axis = _axis(a["axis"], len(x.shape), "split", x.shape)
    sizes = _split_sizes(x.shape[axis], a, x.shape)
    return {"Out": [Meta(tuple(x.shape[:axis]) + (n,) + tuple(x.shape[axis + 1:]), x.dtype) for n in sizes]}


def _split_grad(op):
    # X@GRAD is the concatenation of the outputs' gradients; append_backward has already given
    # every output that nobody differentiated a zero gradient.
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    return [OpSpec("concat", {"X": [grad_name(n) for n in op.outputs["Out"]]}, {"Out": [op.grad_of(x)]},
                   {"axis": op.attrs["axis"]})]


@register("split", ins=("X",), outs=(Slot("Out", duplicable=True),),
          attrs={"num": 0, "sections": [], "axis": 0}, infer=_split_infer, grad=_split_grad)
def split(xp, ins, a, ctx):
    """Out = X cut along ``axis`` into ``num`` equal parts or parts of ``sections`` sizes
    (one of them may be -1: the rest)."""
    x = ins["X"]
    axis = a["axis"] % x.ndim
    sizes = _split_sizes(x.shape[axis], a, x.shape)
    bounds = [sum(sizes[:i]) for i in range(1, len(sizes))]
    return {"Out": xp.split(x, bounds, axis=axis)}


# -- reshape, cast --------------------------------------------------------------------------


def _reshape_target(xshape, shape) -> list:
    """Attr ``shape`` with 0s copied from X and the one -1 resolved when X's size is known."""
    shape = [int(d) for d in shape]
    check(bool(shape) and shape.count(-1) <= 1 and all(d >= -1 for d in shape),
          f"reshape: shape {shape} must be non-empty with at most one -1 and no other negatives")
    out = []
    for i, d in enumerate(shape):
        check(d != 0 or i < len(xshape), f"reshape: shape {shape} copies dim {i} (a 0) but X{list(xshape)} "
                                         f"has only {len(xshape)} dims")
        out.append(xshape[i] if d == 0 else d)
    # An unknown (-1) dim of X that a 0 copies cancels out: [-1, 3, 4] -> [0, -1] is [-1, 12].
    copied = {j for j, d in enumerate(shape) if d == 0 and xshape[j] == -1}
    size = math.prod(d for d in xshape if d != -1)
    if -1 in shape:
        i = shape.index(-1)
        rest = math.prod(d for j, d in enumerate(out) if j != i and j not in copied)
        if list(xshape).count(-1) == len(copied) and rest > 0:
            check(size % rest == 0, f"reshape: X{list(xshape)} ({size} elements) cannot take shape {shape}")
            out[i] = size // rest
    elif -1 not in xshape:
        check(size == math.prod(out), f"reshape: X{list(xshape)} ({size} elements) cannot take shape "
                                      f"{shape} ({math.prod(out)} elements)")
    return out


@register("reshape", ins=("X",), outs=("Out",), attrs={"shape": []},
          infer=lambda ins, a: {"Out": Meta(tuple(_reshape_target(ins["X"].shape, a["shape"])), ins["X"].dtype)},
          grad=grad_of(("X",)))
def reshape(xp, ins, a, ctx):
    """Out = X with shape ``shape``: a 0 copies X's dim at that index, one -1 is inferred
    (Fluid's reshape2 semantics)."""
    x = ins["X"]
    return {"Out": x.reshape(_reshape_target(x.shape, a["shape"]))}


@register("reshape_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"shape": []}, role="backward")
def reshape_grad(xp, ins, a, ctx):
    return {"X@GRAD": ins["Out@GRAD"].reshape(ins["X"].shape)}


@register("cast", ins=("X",), outs=("Out",), attrs={"out_dtype": "float32"},
          infer=lambda ins, a: {"Out": Meta(ins["X"].shape, np.dtype(a["out_dtype"]).name)},
          grad=grad_of(("X",)))
def cast(xp, ins, a, ctx):
    """Out = X converted to ``out_dtype`` (a numpy dtype name)."""
    return {"Out": ins["X"].astype(a["out_dtype"], copy=False)}


@register("cast_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"out_dtype": "float32"},
          role="backward")
def cast_grad(xp, ins, a, ctx):
    # Only X's dtype is read: the gradient goes back to it.
    return {"X@GRAD": ins["Out@GRAD"].astype(ins["X"].dtype, copy=False)}
