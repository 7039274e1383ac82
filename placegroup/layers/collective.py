"""Collective layers: each member of a group runs the same layer on its own ``x``
(ops/collective.py has the ops and their gradient rules).

Outside a group (a plain ``Executor`` run) every one is the identity; in a group of K they
reduce or join the K members' values. ``c_allgather`` and ``c_reducescatter`` take ``nranks``,
the group size, so that the output's shape can be known when the program is built.

Example::

    import placegroup as fluid
    part = fluid.layers.fc(x, size=1000 // K)                     # this member's columns
    logits = fluid.layers.c_allgather(part, axis=1, nranks=K)      # [N, 1000] on every member
    total = fluid.layers.c_allreduce_sum(fluid.layers.reduce_sum(part))  # same on every member
"""
from __future__ import annotations

from placegroup.model.layer_helper import LayerHelper

__all__ = ["c_allreduce_sum", "c_allreduce_max", "c_allgather", "c_reducescatter"]


def _collective(op: str, x, attrs: dict, name):
    helper = LayerHelper(op, name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    # NOTE(collective-role): the OpDef's role is "comm", which append_backward and
    # clone(for_test) skip; a layer is part of the model, so its op is a forward op, and its
    # gradient comes from the op's grad maker (NOTE(collective-grads) in ops/collective.py).
    helper.append_op(op, {"X": [x]}, {"Out": [out]}, attrs, role="forward")
    return out


def c_allreduce_sum(x, name=None):
    """The sum of every member's ``x`` (one shape on all), on every member.

    Its gradient is the all-reduced sum of the output's gradients.

    Example::

        total = fluid.layers.c_allreduce_sum(local_loss)
    """
    return _collective("c_allreduce_sum", x, {}, name)


def c_allreduce_max(x, name=None):
    """The elementwise max of every member's ``x``, on every member.

    Its gradient goes to every member (and element) that holds the max, ties included
    (NOTE(allreduce-max-ties) in ops/collective.py).

    Example::

        row_max = fluid.layers.c_allreduce_max(local_row_max)
    """
    return _collective("c_allreduce_max", x, {}, name)


def c_allgather(x, axis: int = 0, nranks: int = 1, name=None):
    """Every member's ``x`` joined along ``axis`` in rank order, on every member.

    Args:
        x: this member's part; the parts may differ in size along ``axis`` only where it is
            -1, and must be equal for the gradient (NOTE(allgather-parts)).
        axis: the dim to join along (negative counts from the end).
        nranks: the group size: ``axis`` grows ``nranks`` times.

    Example::

        logits = fluid.layers.c_allgather(part, axis=1, nranks=4)   # [N, C/4] -> [N, C]
    """
    return _collective("c_allgather", x, {"axis": int(axis), "nranks": int(nranks)}, name)


def c_reducescatter(x, axis: int = 0, nranks: int = 1, name=None):
    """The sum of every member's ``x``, cut along ``axis`` into ``nranks`` parts
    (``numpy.array_split``); member ``rank`` gets part ``rank``.

    Args:
        x: this member's value (one shape on all); a known size along ``axis`` must divide
            by ``nranks``.
        axis: the dim to cut (negative counts from the end).
        nranks: the group size.

    Raises:
        ProgramError: if the size of ``axis`` is known and does not divide by ``nranks``.

    Example::

        mine = fluid.layers.c_reducescatter(full_grad, axis=0, nranks=4)   # [C, D] -> [C/4, D]
    """
    return _collective("c_reducescatter", x, {"axis": int(axis), "nranks": int(nranks)}, name)
