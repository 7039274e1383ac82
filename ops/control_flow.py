"""Control flow and tensor arrays, with Fluid 1.8's op types and slots: ``while``,
``conditional_block``, ``select_input``, IfElse's ``split_lod_tensor`` and ``merge_lod_tensor``
(batches of rows), and the array ops ``write_to_array``, ``read_from_array``,
``lod_array_length`` (and ``create_array``, placegroup's own, below).

``while`` and ``conditional_block`` name a sub-block in attr ``sub_block``; the executor runs
it (NOTE(sub-blocks) in executor/plan.py), so their kernels only say they were called outside
it. Their slots are Fluid's: ``X``/``Input`` are the vars the sub-block reads from the blocks
around it, ``Out`` the ones it writes there; ``while`` runs its block while ``Condition`` holds,
``conditional_block`` once when ``Cond`` holds (a [1] bool with ``is_scalar_condition``, else
when every ``Cond`` var has elements).

NOTE(tensor-array-value): a tensor array's value is a ``TensorArray`` (placegroup/values.py),
a list; its var's shape, as in Fluid, is the shape of what is written into it (the first
``write_to_array`` sets it, ``read_from_array`` gives it to what it reads). The value is
Fluid makes an empty array when its var is first used; here ``create_array`` (an op
Fluid does not have, which the ``create_array`` layer appends) gives the var an empty array
every run, and ``write_to_array`` also takes the array as input ``Array``, so the op is a
plain function of its inputs: it writes into a copy unless the executor lets it update the
array in place (``ctx.inplace``). Writing at index i of an array of length n < i pads the
gap with empty arrays, as Fluid leaves uninitialised tensors there.
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import EMPTY_VAR, GRAD_SUFFIX, Meta, OpSpec, Slot, check, grad_name, register
from placegroup.values import TensorArray, host_array, is_lod_tensor



def _runs_in_executor(xp, ins, a, ctx):
    raise RuntimeError("a control-flow op runs its sub-block through the executor (NOTE(sub-blocks) in "
                       "executor/plan.py), not as a kernel")


def _no_outputs(ins, a):
    return {}


# X / Input carry gradients: a var that needs one makes the op's outputs need one, and
# append_backward builds the op's gradient from its block (NOTE(block-grad) in
# placegroup/model/backward_blocks.py), not from an OpDef ``grad``.
register("while", ins=(Slot("X", duplicable=True, dispensable=True), Slot("Condition", no_grad=True)),
         outs=(Slot("Out", duplicable=True, dispensable=True), Slot("StepScopes", dispensable=True, no_grad=True)),
         attrs={"sub_block": -1, "is_test": False}, infer=_no_outputs, sub_block=True, lod="drop")(_runs_in_executor)
register("conditional_block", ins=(Slot("Cond", duplicable=True, no_grad=True),
                                   Slot("Input", duplicable=True, dispensable=True)),
         outs=(Slot("Out", duplicable=True, dispensable=True), Slot("Scope", dispensable=True, no_grad=True)),
         attrs={"sub_block": -1, "is_scalar_condition": False}, infer=_no_outputs, sub_block=True,
         lod="drop")(_runs_in_executor)
# (the slot of the outer vars its block reads, the slot of its kept runs), for the ops that own a
# block: the forward op writes the runs, its gradient reads them
BLOCK_SLOTS = {"while": ("X", "StepScopes"), "while_grad": ("X", "StepScopes"),
               "conditional_block": ("Input", "Scope"), "conditional_block_grad": ("Input", "Scope")}
# Their gradients run the gradient block once per recorded run, last first (executor/blocks.py).
register("while_grad", ins=(Slot("X", duplicable=True, dispensable=True), Slot("Out", duplicable=True, dispensable=True),
                            Slot("Out" + GRAD_SUFFIX, duplicable=True, dispensable=True), Slot("StepScopes")),
         outs=(Slot("X" + GRAD_SUFFIX, duplicable=True, dispensable=True),),
         attrs={"sub_block": -1, "is_test": False, "original_output_grad": [], "original_input_grad": []}, sub_block=True,
         lod="drop", role="backward")(_runs_in_executor)
register("conditional_block_grad", ins=(Slot("Cond", duplicable=True), Slot("Input", duplicable=True, dispensable=True),
                                        Slot("Out", duplicable=True, dispensable=True),
                                        Slot("Out" + GRAD_SUFFIX, duplicable=True, dispensable=True), Slot("Scope")),
         outs=(Slot("Input" + GRAD_SUFFIX, duplicable=True, dispensable=True),),
         attrs={"sub_block": -1, "is_scalar_condition": False, "original_output_grad": [], "original_input_grad": []},
         sub_block=True,
         lod="drop", role="backward")(_runs_in_executor)


def _index(op: str, i) -> int:
    i = np.asarray(i).reshape(-1)
    check(i.size == 1 and i.dtype.kind in "iu", f"{op}: I must be one integer, got {i.dtype}{list(i.shape)}")
    return int(i[0])


def _select_infer(ins, a):
    xs = ins["X"]
    return {"Out": Meta(xs[0].shape, xs[0].dtype)}


@register("select_input", ins=(Slot("X", duplicable=True), Slot("Mask", no_grad=True)), outs=("Out",),
          infer=_select_infer, grad=lambda op: [OpSpec(
              "select_output", {"X": [grad_name(op.outputs["Out"][0])], "Mask": op.inputs["Mask"]},
              {"Out": [op.grad_of(n) if n in op.need else EMPTY_VAR for n in op.inputs["X"]]})])
def select_input(xp, ins, a, ctx):
    """Out = X[Mask]: the branch value ``cond`` takes (Mask an int32 [1])."""
    k = _index("select_input", ins["Mask"])
    xs = ins["X"]
    if not 0 <= k < len(xs):
        raise ValueError(f"select_input: Mask {k} is not an index of its {len(xs)} inputs")
    return {"Out": xs[k]}


@register("select_output", ins=("X", Slot("Mask", no_grad=True)), outs=(Slot("Out", duplicable=True),),
          infer=lambda ins, a: {}, grad=lambda op: [OpSpec(
              "select_input", {"X": [grad_name(n) for n in op.outputs["Out"]], "Mask": op.inputs["Mask"]},
              {"Out": [op.grad_of(op.inputs["X"][0])]})] if op.inputs["X"][0] in op.need else [])
def select_output(xp, ins, a, ctx):
    """Out[Mask] = X; the outputs before it hold nothing, those after it are not written (the
    branches that do not run)."""
    k = _index("select_output", ins["Mask"])
    if k < 0:
        raise ValueError(f"select_output: Mask {k} is negative")
    return {"Out": [None] * k + [ins["X"]]}


@register("create_array", ins=(), outs=("Out",), attrs={"dtype": "float32"}, infer=_no_outputs, lod="drop")
def create_array(xp, ins, a, ctx):
    """Out = an empty tensor array (NOTE(tensor-array-value))."""
    return {"Out": TensorArray()}


def _write_grad(op):
    x, arr, out = op.inputs["X"][0], op.inputs["Array"][0], op.outputs["Out"][0]
    outs = {}
    if x in op.need:
        outs["X" + GRAD_SUFFIX] = [op.grad_of(x)]
    if arr in op.need:
        outs["Array" + GRAD_SUFFIX] = [op.grad_of(arr)]
    if not outs:
        return []
    return [OpSpec("write_to_array_grad", {"X": [x], "I": op.inputs["I"], "Out" + GRAD_SUFFIX: [grad_name(out)]},
                   outs)]


def _array_lod(levels, a):
    """NOTE(lod-rule): an array holds what is written into it, LoD included: its var gets the
    lod_level of X (write_to_array), and what is read from it that of the array (read_from_array)."""
    return {"Out": (levels.get("X") or [0])[0]}


@register("write_to_array", ins=("X", Slot("I", no_grad=True), "Array"), outs=("Out",),
          infer=lambda ins, a: {"Out": ins["X"]}, inplace={"Out": "Array"}, lod=_array_lod, wants_lod=("X",),
          grad=_write_grad)
def write_to_array(xp, ins, a, ctx):
    """Out = Array with X at index I (NOTE(tensor-array-value)); a sequence keeps its LoD."""
    i = _index("write_to_array", ins["I"])
    if i < 0:
        raise ValueError(f"write_to_array: index {i} is negative")
    arr = ins["Array"] if ctx.inplace else TensorArray(ins["Array"])
    while len(arr) <= i:
        arr.append(None)
    x = ins["X"]
    arr[i] = x if not is_lod_tensor(x) or x.offsets else x.data
    return {"Out": arr}


def _entry(xp, arr, i: int, like):
    """The gradient at index i of a gradient array: zeros shaped as the forward tensor ``like``
    where nothing reached that entry (Fluid's read_from_array with ``X_W``)."""
    g = arr[i] if arr is not None and 0 <= i < len(arr) else None
    return xp.zeros_like(like) if g is None else g


@register("write_to_array_grad", ins=("X", "I", "Out@GRAD"), outs=(Slot("X@GRAD", dispensable=True),
                                                                   Slot("Array@GRAD", dispensable=True)),
          infer=_no_outputs, lod="drop", role="backward")
def write_to_array_grad(xp, ins, a, ctx):
    """X@GRAD = Out@GRAD[I]; Array@GRAD = Out@GRAD with entry I emptied, since the write
    replaced what the array held there."""
    g, i = ins["Out@GRAD"], _index("write_to_array_grad", ins["I"])
    outs = {"X@GRAD": _entry(xp, g, i, ins["X"])}
    if "Array@GRAD" in ctx.outputs:
        rest = TensorArray(g or ())
        if i < len(rest):
            rest[i] = None
        outs["Array@GRAD"] = rest
    return outs


@register("read_from_array", ins=("X", Slot("I", no_grad=True)), outs=("Out",),
          infer=lambda ins, a: {"Out": ins["X"]}, lod=_array_lod, wants_lod=("X",),
          grad=lambda op: [OpSpec("read_from_array_grad", {"I": op.inputs["I"], "Out" + GRAD_SUFFIX: [
              grad_name(op.outputs["Out"][0])]}, {"X" + GRAD_SUFFIX: [op.grad_of(op.inputs["X"][0])]})]
          if op.inputs["X"][0] in op.need else [])
def read_from_array(xp, ins, a, ctx):
    """Out = X[I], the tensor written at index I."""
    arr, i = ins["X"], _index("read_from_array", ins["I"])
    if not 0 <= i < len(arr) or arr[i] is None:
        raise ValueError(f"read_from_array: index {i} holds no tensor (the array has {len(arr)} entries)")
    return {"Out": arr[i]}


@register("read_from_array_grad", ins=("I", "Out@GRAD"), outs=("X@GRAD",), infer=_no_outputs, lod="drop",
          role="backward")
def read_from_array_grad(xp, ins, a, ctx):
    """X@GRAD = an array holding Out@GRAD at index I, nothing elsewhere (``sum`` adds arrays
    entry by entry, NOTE(sum-sparse))."""
    i = _index("read_from_array_grad", ins["I"])
    arr = TensorArray([None] * i)
    arr.append(ins["Out@GRAD"])
    return {"X@GRAD": arr}


@register("lod_array_length", ins=(Slot("X", no_grad=True),), outs=("Out",), infer=lambda ins, a: {
    "Out": Meta((1,), "int64")}, lod="drop")
def lod_array_length(xp, ins, a, ctx):
    """Out = [len(X)], int64."""
    return {"Out": xp.asarray([len(ins["X"])], dtype=xp.int64)}


def _joined_infer(ins, a):
    x = ins["X"]
    if x.shape is None:  # an array nothing was written into yet, as the program was built
        return {}
    shape = list(x.shape)
    axis = a["axis"] % (len(shape) + (1 if a["use_stack"] else 0)) if shape else 0
    if a["use_stack"]:
        shape.insert(axis, -1)
    elif shape:
        shape[axis] = -1
    return {"Out": Meta(tuple(shape), x.dtype), "OutIndex": Meta((-1,), "int32")}


def _axis(a, ndim: int) -> int:
    return a["axis"] % (ndim + 1 if a["use_stack"] else ndim)


@register("tensor_array_to_tensor", ins=("X",), outs=("Out", Slot("OutIndex", no_grad=True)),
          attrs={"axis": 0, "use_stack": False}, infer=_joined_infer, lod="drop",
          grad=lambda op: [OpSpec("tensor_array_to_tensor_grad", {
              "X": op.inputs["X"], "OutIndex": op.outputs["OutIndex"],
              "Out" + GRAD_SUFFIX: [grad_name(op.outputs["Out"][0])]},
              {"X" + GRAD_SUFFIX: [op.grad_of(op.inputs["X"][0])]}, dict(op.attrs))] if op.inputs["X"][0] in op.need else [])
def tensor_array_to_tensor(xp, ins, a, ctx):
    """Out = the array's tensors concatenated along ``axis`` (stacked with ``use_stack``);
    OutIndex = each entry's size along ``axis``, int32 (when stacked too, as Fluid gives it)."""
    arr = [t.data if is_lod_tensor(t) else t for t in ins["X"]]
    if not arr or any(t is None for t in arr):
        raise ValueError(f"tensor_array_to_tensor: every entry of the array must hold a tensor, got "
                         f"{len(arr)} entries with {sum(t is None for t in arr)} empty")
    axis = _axis(a, arr[0].ndim)
    out = xp.stack(arr, axis) if a["use_stack"] else xp.concatenate(arr, axis)
    sizes = [t.shape[axis] if axis < t.ndim else 1 for t in arr]  # stacked too, as Fluid counts
    return {"Out": out, "OutIndex": np.asarray(sizes, np.int32)}


@register("tensor_array_to_tensor_grad", ins=("X", "OutIndex", "Out@GRAD"), outs=("X@GRAD",),
          attrs={"axis": 0, "use_stack": False}, infer=_no_outputs, lod="drop", role="backward")
def tensor_array_to_tensor_grad(xp, ins, a, ctx):
    """X@GRAD = Out@GRAD cut back into the array's entries."""
    g, arr = ins["Out@GRAD"], ins["X"]
    axis = _axis(a, arr[0].ndim)
    if a["use_stack"]:
        return {"X@GRAD": TensorArray(xp.take(g, i, axis=axis) for i in range(g.shape[axis]))}
    cuts = np.cumsum(host_array(ins["OutIndex"]))[:-1]
    return {"X@GRAD": TensorArray(xp.split(g, [int(c) for c in cuts], axis=axis))}


def truthy(op: str, cond, scalar: bool = True) -> bool:
    """Whether a condition holds: a [1] bool (``scalar``), else every tensor has elements."""
    if not scalar:
        return all(int(np.prod(getattr(c.data if is_lod_tensor(c) else c, "shape", (1,)))) > 0 for c in cond)
    c = cond[0] if isinstance(cond, list) else cond
    c = host_array(c.data if is_lod_tensor(c) else c)
    if c.size != 1:
        raise ValueError(f"{op}: the condition must hold one bool, got {c.dtype}{list(c.shape)}")
    return bool(c.reshape(-1)[0])


# -- IfElse's row split and merge -------------------------------------------------------------

def _rows_mask(op: str, x, mask):
    if is_lod_tensor(x):
        raise NotImplementedError(f"{op}: splitting a sequence batch (a LoDTensor) by a mask is not implemented "
                                  f"in placegroup yet; IfElse takes a batch of rows")
    m = host_array(mask).reshape(-1).astype(bool)
    if m.shape[0] != x.shape[0]:
        raise ValueError(f"{op}: Mask has {m.shape[0]} rows, X has {x.shape[0]}")
    return m


def _split_infer(ins, a):
    x = ins["X"]
    meta = Meta((-1,) + tuple(x.shape[1:]), x.dtype)
    return {"OutTrue": meta, "OutFalse": meta}


def _split_grad(op):
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    t, f = (grad_name(op.outputs[s][0]) for s in ("OutTrue", "OutFalse"))
    return [OpSpec("merge_lod_tensor", {"X": [x], "Mask": op.inputs["Mask"], "InTrue": [t], "InFalse": [f]},
                   {"Out": [op.grad_of(x)]}, dict(op.attrs))]


def _merge_grad(op):
    t, f = op.inputs["InTrue"][0], op.inputs["InFalse"][0]
    if t not in op.need and f not in op.need:
        return []
    return [OpSpec("split_lod_tensor", {"X": [grad_name(op.outputs["Out"][0])], "Mask": op.inputs["Mask"]},
                   {"OutTrue": [op.grad_of(t) if t in op.need else EMPTY_VAR],
                    "OutFalse": [op.grad_of(f) if f in op.need else EMPTY_VAR]}, dict(op.attrs))]


@register("split_lod_tensor", ins=("X", Slot("Mask", no_grad=True)), outs=("OutTrue", "OutFalse"),
          attrs={"level": 0}, infer=_split_infer, lod="drop", grad=_split_grad)
def split_lod_tensor(xp, ins, a, ctx):
    """OutTrue = the rows of X whose Mask is true, OutFalse the others, in order (IfElse's input)."""
    x = ins["X"]
    m = xp.asarray(_rows_mask("split_lod_tensor", x, ins["Mask"]))
    return {"OutTrue": x[m], "OutFalse": x[~m]}


def _merge_infer(ins, a):
    t = ins["InTrue"]
    return {"Out": Meta((-1,) + tuple(t.shape[1:]), t.dtype)}


@register("merge_lod_tensor", ins=(Slot("X", no_grad=True), Slot("Mask", no_grad=True), "InTrue", "InFalse"),
          outs=("Out",), attrs={"level": 0}, infer=_merge_infer, lod="drop", grad=_merge_grad)
def merge_lod_tensor(xp, ins, a, ctx):
    """Out = InTrue's rows where Mask is true and InFalse's elsewhere, in the rows' order (IfElse's
    result): the inverse of split_lod_tensor."""
    t, f = ins["InTrue"], ins["InFalse"]
    m = _rows_mask("merge_lod_tensor", ins["X"], ins["Mask"])
    if int(m.sum()) != t.shape[0] or int((~m).sum()) != f.shape[0]:
        raise ValueError(f"merge_lod_tensor: Mask has {int(m.sum())} true and {int((~m).sum())} false rows, but "
                         f"InTrue has {t.shape[0]} and InFalse {f.shape[0]}")
    out = xp.empty((m.shape[0],) + tuple(t.shape[1:]), dtype=t.dtype)
    xm = xp.asarray(m)
    out[xm], out[~xm] = t, f.astype(t.dtype, copy=False)
    return {"Out": out}
