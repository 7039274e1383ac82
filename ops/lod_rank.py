"""DynamicRNN's LoD machinery, with Fluid 1.8's op types and slots: a batch of sequences cut into
time steps and put back.

NOTE(rank-table): ``lod_rank_table`` ranks a batch's sequences by length, longest first (a
stable sort: equal lengths keep their order), into a ``LoDRankTable`` value (placegroup/values.py:
each rank's sequence index and length). The time-step ops read the batch in that order, so that
the sequences still running at step t are always the first ones:

* ``lod_tensor_to_array``: entry t holds step t of every sequence longer than t, in rank order
  (a [alive_t, ...] tensor);
* ``array_to_lod_tensor``: the inverse, back to the sequences in their own order, with their LoD;
* ``shrink_rnn_memory``: the first rows of a memory, one per sequence still running at step I;
* ``reorder_lod_tensor_by_rank``: a batch put in rank order (its sequences, or its rows when it
  has no LoD: one row per sequence, as a memory's init).

Each has its gradient: ``lod_tensor_to_array`` and ``array_to_lod_tensor`` are each other's,
``shrink_rnn_memory``'s pads the rows of the sequences that had ended with zeros, and
``reorder_lod_tensor_by_rank``'s puts the rows back. Only level 0 of a batch with one level of
LoD is cut into steps, as the book's models use it.
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import GRAD_SUFFIX, Meta, OpSpec, Slot, grad_name, register
from placegroup.values import LoDRankTable, LoDTensor, TensorArray, is_lod_tensor


def _no_outputs(ins, a):
    return {}


def _rows_of(op: str, x) -> np.ndarray:
    """The row offsets of a one-level LoD tensor's sequences."""
    if not is_lod_tensor(x):
        raise ValueError(f"{op}: X must be a batch of sequences (a LoDTensor), got a tensor without LoD")
    if len(x.offsets) != 1:
        raise NotImplementedError(f"{op}: X has {len(x.offsets)} levels of LoD; placegroup cuts a batch with one "
                                  f"level into time steps")
    return np.asarray(x.offsets[0], np.int64)


@register("lod_rank_table", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs={"level": 0}, infer=_no_outputs,
          lod="drop", wants_lod=("X",))
def lod_rank_table(xp, ins, a, ctx):
    """Out = X's sequences ranked by length, longest first (NOTE(rank-table))."""
    if a["level"] != 0:
        raise NotImplementedError(f"lod_rank_table: level {a['level']}; placegroup ranks level 0")
    lengths = np.diff(_rows_of("lod_rank_table", ins["X"]))
    order = np.argsort(-lengths, kind="stable")
    return {"Out": LoDRankTable(order, lengths[order])}


@register("max_sequence_len", ins=(Slot("RankTable", no_grad=True),), outs=("Out",),
          infer=lambda ins, a: {"Out": Meta((1,), "int64")}, lod="drop")
def max_sequence_len(xp, ins, a, ctx):
    """Out = [the longest sequence's length], int64."""
    t = ins["RankTable"]
    return {"Out": np.asarray([int(t.length[0]) if len(t.length) else 0], np.int64)}


def _step_rows(table: LoDRankTable, starts: np.ndarray, t: int) -> np.ndarray:
    """The rows of step t of each sequence longer than t, in rank order."""
    alive = int(np.count_nonzero(table.length > t))
    return starts[table.index[:alive]] + t


@register("lod_tensor_to_array", ins=("X", Slot("RankTable", no_grad=True)), outs=("Out",),
          infer=lambda ins, a: {"Out": ins["X"]}, lod="drop", wants_lod=("X",),
          grad=lambda op: [OpSpec("array_to_lod_tensor", {"X": [grad_name(op.outputs["Out"][0])],
                                                          "RankTable": op.inputs["RankTable"]},
                                  {"Out": [op.grad_of(op.inputs["X"][0])]})] if op.inputs["X"][0] in op.need else [])
def lod_tensor_to_array(xp, ins, a, ctx):
    """Out[t] = step t of the sequences longer than t, in rank order (NOTE(rank-table))."""
    x, table = ins["X"], ins["RankTable"]
    starts = _rows_of("lod_tensor_to_array", x)[:-1]
    steps = int(table.length[0]) if len(table.length) else 0
    return {"Out": TensorArray(x.data[xp.asarray(_step_rows(table, starts, t))] for t in range(steps))}


@register("array_to_lod_tensor", ins=("X", Slot("RankTable", no_grad=True)), outs=("Out",),
          infer=lambda ins, a: {"Out": ins["X"]}, lod=lambda levels, a: {"Out": 1},
          grad=lambda op: [OpSpec("lod_tensor_to_array", {"X": [grad_name(op.outputs["Out"][0])],
                                                          "RankTable": op.inputs["RankTable"]},
                                  {"Out": [op.grad_of(op.inputs["X"][0])]})] if op.inputs["X"][0] in op.need else [])
def array_to_lod_tensor(xp, ins, a, ctx):
    """Out = the steps of X put back into the sequences, in their own order, with their LoD: the
    inverse of lod_tensor_to_array. A step an array of gradients left empty counts as zeros."""
    arr, table = ins["X"], ins["RankTable"]
    lengths = np.empty(len(table.index), np.int64)
    lengths[table.index] = table.length
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    like = next((s for s in arr if s is not None), None)
    if like is None:
        raise ValueError("array_to_lod_tensor: the array holds no step")
    out = xp.zeros((int(offsets[-1]),) + tuple(like.shape[1:]), dtype=like.dtype)
    for t in range(int(table.length[0]) if len(table.length) else 0):
        step = arr[t] if t < len(arr) else None
        if step is not None:
            out[xp.asarray(_step_rows(table, offsets[:-1], t))] = step.data if is_lod_tensor(step) else step
    return {"Out": LoDTensor(out, (offsets,), check=False)}


def _alive(table: LoDRankTable, i) -> int:
    return int(np.count_nonzero(table.length > int(np.asarray(i).reshape(-1)[0])))


@register("shrink_rnn_memory", ins=("X", Slot("I", no_grad=True), Slot("RankTable", no_grad=True)), outs=("Out",),
          infer=lambda ins, a: {"Out": Meta((-1,) + tuple(ins["X"].shape[1:]), ins["X"].dtype)},
          lod=lambda levels, a: {"Out": levels["X"][0]}, wants_lod=("X",),
          grad=lambda op: [OpSpec("shrink_rnn_memory_grad", {"X": op.inputs["X"], "Out" + GRAD_SUFFIX: [
              grad_name(op.outputs["Out"][0])]}, {"X" + GRAD_SUFFIX: [op.grad_of(op.inputs["X"][0])]})]
          if op.inputs["X"][0] in op.need else [])
def shrink_rnn_memory(xp, ins, a, ctx):
    """Out = X's first rows, one per sequence still running at step I (rows in rank order); of a
    batch of sequences (a static input), its first sequences."""
    x, alive = ins["X"], _alive(ins["RankTable"], ins["I"])
    return {"Out": x.sequences(0, alive) if is_lod_tensor(x) else x[:alive]}


@register("shrink_rnn_memory_grad", ins=("X", "Out@GRAD"), outs=("X@GRAD",), infer=_no_outputs,
          lod=lambda levels, a: {"X@GRAD": levels["X"][0]}, wants_lod=("X",), role="backward")
def shrink_rnn_memory_grad(xp, ins, a, ctx):
    """X@GRAD = Out@GRAD, and zeros for the rows of the sequences that had ended."""
    x, g = ins["X"], ins["Out@GRAD"]
    g = g.data if is_lod_tensor(g) else g
    out = xp.zeros_like(x.data if is_lod_tensor(x) else x)
    out[: g.shape[0]] = g
    return {"X@GRAD": x.with_data(out) if is_lod_tensor(x) else out}


def _rank_rows(x, table: LoDRankTable) -> tuple[np.ndarray, tuple | None]:
    """The rows of X in rank order, and the LoD of the result (None: X has no LoD)."""
    if not is_lod_tensor(x):
        return table.index, None
    offsets = _rows_of("reorder_lod_tensor_by_rank", x)
    lengths = np.diff(offsets)[table.index]
    rows = np.concatenate([np.arange(offsets[k], offsets[k + 1]) for k in table.index] or [np.zeros(0, np.int64)])
    return rows, (np.concatenate([[0], np.cumsum(lengths)]),)


@register("reorder_lod_tensor_by_rank", ins=("X", Slot("RankTable", no_grad=True)), outs=("Out",),
          infer=lambda ins, a: {"Out": ins["X"]}, wants_lod=("X",),
          grad=lambda op: [OpSpec("reorder_lod_tensor_by_rank_grad", {
              "X": op.inputs["X"], "RankTable": op.inputs["RankTable"],
              "Out" + GRAD_SUFFIX: [grad_name(op.outputs["Out"][0])]},
              {"X" + GRAD_SUFFIX: [op.grad_of(op.inputs["X"][0])]})] if op.inputs["X"][0] in op.need else [])
def reorder_lod_tensor_by_rank(xp, ins, a, ctx):
    """Out = X's sequences (its rows, when X has no LoD) in rank order (NOTE(rank-table))."""
    x = ins["X"]
    rows, lod = _rank_rows(x, ins["RankTable"])
    data = (x.data if is_lod_tensor(x) else x)[xp.asarray(rows)]
    return {"Out": data if lod is None else LoDTensor(data, lod, check=False)}


@register("reorder_lod_tensor_by_rank_grad", ins=("X", "RankTable", "Out@GRAD"), outs=("X@GRAD",),
          infer=_no_outputs, lod=lambda levels, a: {"X@GRAD": levels["X"][0]}, wants_lod=("X",), role="backward")
def reorder_lod_tensor_by_rank_grad(xp, ins, a, ctx):
    """X@GRAD = Out@GRAD's rows put back where they came from."""
    x, g = ins["X"], ins["Out@GRAD"]
    rows, _ = _rank_rows(x, ins["RankTable"])
    g = g.data if is_lod_tensor(g) else g
    out = xp.zeros_like(x.data if is_lod_tensor(x) else x)
    out[xp.asarray(rows)] = g
    return {"X@GRAD": x.with_data(out) if is_lod_tensor(x) else out}
