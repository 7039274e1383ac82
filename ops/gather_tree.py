"""Beam-search decoding: ``gather_tree``, Fluid 1.8's backtrace of the ids a beam search chose.

``BeamSearchDecoder`` (placegroup/layers/decoding.py) keeps, at each step t, the token each beam
chose (``Ids[t]``) and the beam of step t - 1 it grew from (``Parents[t]``), both
[max_time, batch_size, beam_size]. A beam's sentence is read backwards from its last step:

    Out[T-1, b, k] = Ids[T-1, b, k];  p = Parents[T-1, b, k]
    Out[t, b, k]   = Ids[t, b, p];    p = Parents[t, b, p]     for t = T-2 .. 0

which is Fluid's CPU kernel, vectorised over the batch and the beams. A parent outside
[0, beam_size) is an error naming it (Fluid reads out of bounds there). The op has no gradient,
as in Fluid.
"""
from __future__ import annotations

from placegroup.errors import OutOfRange  # a user's data, not a bug: one line (NOTE(user-errors))
from placegroup.ops.registry import Meta, Slot, check, register

_INTS = ("int32", "int64")


def _gather_tree_infer(ins, a):
    ids, parents = ins["Ids"], ins["Parents"]
    for slot, m in (("Ids", ids), ("Parents", parents)):
        check(m.dtype in _INTS, f"gather_tree: {slot} must be int32 or int64, got {m.dtype}")
        check(len(m.shape) == 3, f"gather_tree: {slot} must be [max_time, batch_size, beam_size], got {list(m.shape)}")
    check(all(i == p or -1 in (i, p) for i, p in zip(ids.shape, parents.shape)),
          f"gather_tree: Ids{list(ids.shape)} and Parents{list(parents.shape)} must have one shape")
    return {"Out": Meta(tuple(ids.shape), ids.dtype)}


@register("gather_tree", ins=(Slot("Ids", no_grad=True), Slot("Parents", no_grad=True)), outs=("Out",),
          infer=_gather_tree_infer, lod="drop")
def gather_tree(xp, ins, a, ctx):
    """Out = the sentence of each beam, read back through ``Parents`` from the last step."""
    ids, parents = ins["Ids"], ins["Parents"]
    if ids.shape != parents.shape:
        raise ValueError(f"gather_tree: Ids{list(ids.shape)} and Parents{list(parents.shape)} must have one shape")
    beam = ids.shape[2] if ids.ndim == 3 else 0
    if parents.size and (int(parents.min()) < 0 or int(parents.max()) >= beam):
        bad = int(parents[(parents < 0) | (parents >= beam)].ravel()[0])
        raise OutOfRange(f"gather_tree: Parents holds {bad}, out of range for beam_size {beam} (valid: 0..{beam - 1})")
    out = xp.empty_like(ids)
    if not ids.shape[0]:
        return {"Out": out}
    out[-1] = ids[-1]
    parent = parents[-1].astype("int64")
    for t in range(ids.shape[0] - 2, -1, -1):
        out[t] = xp.take_along_axis(ids[t], parent, axis=1)
        parent = xp.take_along_axis(parents[t], parent, axis=1).astype("int64")
    return {"Out": out}
