"""Collective ops over a group of executors: c_allreduce_sum, c_allreduce_max, c_allgather,
c_reducescatter, each with its gradient rule beside it, so a pass inserts only the forward
collectives.

Every member of the group runs the same op on its own ``X``; the op (``wants_comm=True``) finds
the group's communicator in its kernel context, ``ctx.comm``::

    comm.rank, comm.size
    comm.allreduce(x, op, tag, step)        # op "sum" | "max"
    comm.allgather(x, axis, tag, step)      # every rank's x joined along axis, in rank order
    comm.reducescatter(x, axis, tag, step)  # part `rank` of numpy.array_split(sum, size, axis)

It takes and returns numpy arrays, so on a CUDA place the kernel copies X to the host and the
result back. ``tag`` (``ctx.tag``, unique per op of the program) and ``step`` (``ctx.step``)
are set by the executor; they tell one collective's messages from another's. Outside a group
the executor passes a one-member communicator, where every op is the identity.

``c_allgather`` and ``c_reducescatter`` change the size of dim ``axis``, which depends on the
group size; the pass or layer that places them sets attr ``nranks`` for ``infer``, and the
kernel checks it against ``comm.size``.

Example (what a model-parallel fc does with its column shards)::

    part = fluid.layers.mul(x, w_shard)                     # [N, C / K] on each of K ranks
    logits = fluid.layers.c_allgather(part, axis=1, nranks=K)   # [N, C] on every rank
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import OpSpec, Slot, check, grad_name, register, same_as
from placegroup.values import is_selected_rows

# NOTE(collective-grads): every rank k runs y_k = f(x_1, ..., x_K) and the loss is
# L = sum_k L_k(y_k), so dL/dx_j = sum_k (dy_k/dx_j)^T dy_k, which is again a collective of
# the dy_k — the grad makers below emit collective ops, never a `_grad` kernel of their own:
#   allreduce_sum:  y_k = sum_j x_j          -> dx_j = sum_k dy_k            = allreduce_sum(dy)
#   allgather:      y_k = concat_j x_j       -> dx_j = sum_k (dy_k part j)   = reducescatter(dy)
#   reducescatter:  y_k = part k of sum_j x_j -> dx_j = concat_k dy_k        = allgather(dy)
#   allreduce_max:  y_k = max_j x_j          -> dx_j = (x_j == y) * sum_k dy_k
# The last needs a mask after the sum, so it is one helper op, c_allreduce_max_grad.
#
# NOTE(allgather-parts): allgather joins parts that may differ in size along axis (a -1 dim),
# but its gradient, reducescatter, cuts the summed gradient with numpy.array_split: the two
# agree exactly when rank j's part of that cut has the size of rank j's allgather input, which
# the equal parts of the model-parallel use (column shards of one weight) always satisfy. The
# gradient op gets the forward X in its ``Like`` slot and raises on a rank where they differ,
# rather than hand back a gradient cut at the wrong place.
#
# NOTE(allreduce-max-ties): max is not differentiable where ranks tie. We give the whole
# summed gradient to every rank (and every element) holding the max, so with m ranks tied the
# gradient counts m times; Paddle's c_allreduce_max has no gradient at all. Ties of float
# activations are rare; if they matter, break them before the collective.


def _host(xp, x):
    if is_selected_rows(x):
        raise TypeError(f"collectives take dense tensors; got a SelectedRows of shape {list(x.shape)}")
    return x if xp is np else x.get()


def _tag_step(ctx) -> tuple:
    return ctx.tag or "c", ctx.step


def _back(xp, value, like):
    """The communicator's numpy result as an array of ``like``'s module and dtype."""
    return xp.asarray(value).astype(like.dtype, copy=False)


def _check_group(op: str, attrs, comm) -> None:
    if attrs["nranks"] != comm.size:
        raise ValueError(f"{op}: built for nranks={attrs['nranks']} but runs in a group of {comm.size} "
                         f"(this is rank {comm.rank}); set attr nranks to the group size")


def _axis_infer(op: str, ins, a) -> tuple:
    x = ins["X"]
    n = a["nranks"]
    check(isinstance(n, int) and n >= 1, f"{op}: attr nranks must be an int >= 1, got {n!r}")
    check(-len(x.shape) <= a["axis"] < len(x.shape), f"{op}: axis {a['axis']} is out of range for X{list(x.shape)}")
    return list(x.shape), a["axis"] % len(x.shape), n


def _gather_infer(ins, a):
    shape, axis, n = _axis_infer("c_allgather", ins, a)
    shape[axis] = -1 if shape[axis] == -1 else shape[axis] * n
    return {"Out": ins["X"]._replace(shape=tuple(shape))}


def _divide_infer(op: str):
    """``infer`` of an op whose Out is X with dim ``axis`` cut into ``nranks`` equal parts."""

    def infer(ins, a):
        shape, axis, n = _axis_infer(op, ins, a)
        check(shape[axis] == -1 or shape[axis] % n == 0,
              f"{op}: dim {axis} of X{shape} ({shape[axis]}) does not divide into nranks={n} equal parts")
        shape[axis] = -1 if shape[axis] == -1 else shape[axis] // n
        return {"Out": ins["X"]._replace(shape=tuple(shape))}

    return infer


_scatter_infer = _divide_infer("c_reducescatter")


def _x_out(op):
    """(forward X name, dOut name), or None when X's gradient is not wanted."""
    x = op.inputs["X"][0]
    return (x, grad_name(op.outputs["Out"][0])) if x in op.need else None


def _allreduce_sum_grad(op):
    xo = _x_out(op)
    return [OpSpec("c_allreduce_sum", {"X": [xo[1]]}, {"Out": [op.grad_of(xo[0])]})] if xo else []


def _allreduce_max_grad(op):
    xo = _x_out(op)
    if not xo:
        return []
    return [OpSpec("c_allreduce_max_grad", {"X": [xo[0]], "Out": list(op.outputs["Out"]), "Out@GRAD": [xo[1]]},
                   {"X@GRAD": [op.grad_of(xo[0])]})]


def _allgather_grad(op):
    xo = _x_out(op)
    if not xo:
        return []
    return [OpSpec("c_reducescatter", {"X": [xo[1]], "Like": [xo[0]]}, {"Out": [op.grad_of(xo[0])]},
                   {"axis": op.attrs["axis"], "nranks": op.attrs["nranks"]})]


def _reducescatter_grad(op):
    xo = _x_out(op)
    if not xo:
        return []
    return [OpSpec("c_allgather", {"X": [xo[1]]}, {"Out": [op.grad_of(xo[0])]},
                   {"axis": op.attrs["axis"], "nranks": op.attrs["nranks"]})]


@register("c_allreduce_sum", ins=("X",), outs=("Out",), infer=same_as("X"), grad=_allreduce_sum_grad,
          role="comm", wants_comm=True)
def c_allreduce_sum(xp, ins, attrs, ctx):
    """Out = the sum of every rank's X (same shape on every rank), on every rank."""
    x = ins["X"]
    return {"Out": _back(xp, ctx.comm.allreduce(_host(xp, x), "sum", *_tag_step(ctx)), x)}


@register("c_allreduce_max", ins=("X",), outs=("Out",), infer=same_as("X"), grad=_allreduce_max_grad,
          role="comm", wants_comm=True)
def c_allreduce_max(xp, ins, attrs, ctx):
    """Out = the elementwise max of every rank's X, on every rank (gradient: NOTE(allreduce-max-ties))."""
    x = ins["X"]
    return {"Out": _back(xp, ctx.comm.allreduce(_host(xp, x), "max", *_tag_step(ctx)), x)}


@register("c_allreduce_max_grad", ins=("X", "Out", "Out@GRAD"), outs=("X@GRAD",), role="backward",
          wants_comm=True)
def c_allreduce_max_grad(xp, ins, attrs, ctx):
    # X@GRAD = (X == Out) * allreduce_sum(Out@GRAD): NOTE(collective-grads), NOTE(allreduce-max-ties)
    x, g = ins["X"], ins["Out@GRAD"]
    total = _back(xp, ctx.comm.allreduce(_host(xp, g), "sum", *_tag_step(ctx)), x)
    return {"X@GRAD": xp.where(x == ins["Out"], total, xp.zeros_like(total))}


@register("c_allgather", ins=("X",), outs=("Out",), attrs={"axis": 0, "nranks": 1}, infer=_gather_infer,
          grad=_allgather_grad, role="comm", wants_comm=True)
def c_allgather(xp, ins, attrs, ctx):
    """Out = every rank's X joined along ``axis`` in rank order, on every rank (the parts may
    differ in size along ``axis``; the gradient needs them equal: NOTE(allgather-parts))."""
    _check_group("c_allgather", attrs, ctx.comm)
    x = ins["X"]
    out = ctx.comm.allgather(_host(xp, x), attrs["axis"] % x.ndim, *_tag_step(ctx))
    return {"Out": _back(xp, out, x)}


@register("c_reducescatter", ins=("X", Slot("Like", dispensable=True, no_grad=True)), outs=("Out",),
          attrs={"axis": 0, "nranks": 1}, infer=_scatter_infer, grad=_reducescatter_grad, role="comm",
          wants_comm=True)
def c_reducescatter(xp, ins, attrs, ctx):
    """Out = part ``rank`` of ``numpy.array_split(sum of every rank's X, nranks, axis)``.

    ``Like`` (optional) is the X of the c_allgather whose gradient this is: Out must have its
    shape (NOTE(allgather-parts)).
    """
    comm = ctx.comm
    _check_group("c_reducescatter", attrs, comm)
    x = ins["X"]
    out = _back(xp, comm.reducescatter(_host(xp, x), attrs["axis"] % x.ndim, *_tag_step(ctx)), x)
    like = ins.get("Like")
    if like is not None and tuple(out.shape) != tuple(like.shape):
        raise ValueError(f"c_reducescatter: rank {comm.rank}'s part of the summed gradient has shape "
                         f"{list(out.shape)} but its c_allgather input had shape {list(like.shape)}: the "
                         f"gradient of an allgather needs parts that array_split cuts back the same way, "
                         f"such as equal ones (NOTE(allgather-parts) in ops/collective.py)")
    return {"Out": out}


# -- c_split: this rank's part, no communication ---------------------------------------------


def _split_grad(op):
    xo = _x_out(op)
    if not xo:
        return []
    return [OpSpec("c_split_grad", {"X": [xo[0]], "Out@GRAD": [xo[1]]}, {"X@GRAD": [op.grad_of(xo[0])]},
                   {"axis": op.attrs["axis"], "nranks": op.attrs["nranks"]})]


@register("c_split", ins=("X",), outs=("Out",), attrs={"axis": 0, "nranks": 1}, infer=_divide_infer("c_split"),
          grad=_split_grad, role="comm", wants_comm=True)
def c_split(xp, ins, attrs, ctx):
    """Out = part ``comm.rank`` of X cut into ``comm.size`` equal parts along ``axis``: after an
    allgather of the batch, each member keeps its own rows (the model-parallel fc)."""
    comm = ctx.comm
    _check_group("c_split", attrs, comm)
    x = ins["X"]
    axis = attrs["axis"] % x.ndim
    if x.shape[axis] % comm.size:
        raise ValueError(f"c_split: dim {axis} of X{list(x.shape)} does not divide into {comm.size} parts")
    n = x.shape[axis] // comm.size
    index = [slice(None)] * x.ndim
    index[axis] = slice(comm.rank * n, (comm.rank + 1) * n)
    return {"Out": x[tuple(index)]}


@register("c_split_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), attrs={"axis": 0, "nranks": 1},
          role="backward", wants_comm=True)
def c_split_grad(xp, ins, attrs, ctx):
    """X@GRAD = zeros with this rank's part set to Out@GRAD."""
    comm = ctx.comm
    x, g = ins["X"], ins["Out@GRAD"]
    axis = attrs["axis"] % x.ndim
    n = x.shape[axis] // comm.size
    out = xp.zeros(x.shape, dtype=g.dtype)
    index = [slice(None)] * x.ndim
    index[axis] = slice(comm.rank * n, (comm.rank + 1) * n)
    out[tuple(index)] = g
    return {"X@GRAD": out}
