"""``chunk_eval``: precision, recall and F1 of chunk detection (NER-style tagging), as Fluid
1.8's chunk_eval_op. No gradient.

NOTE(chunk-schemes): a label id is ``tag + num_tag_types * type``; ``type == num_chunk_types``
(ids ``num_chunk_types * num_tag_types`` and up to that) is "outside" (O), and a larger id is
an error. The schemes, as Fluid's kernel reads the tags (-1: the scheme has no such tag):

    scheme  num_tag_types  begin inside end single
    IOB           2          0     1    -    -
    IOE           2          -     0    1    -
    IOBES         4          0     1    2    3
    plain         1          -     -    -    -

Each sequence is read left to right from "before the start" (tag -1, type O). At each element,
with (prev_tag, prev_type) the element before:

* a chunk ends before it when prev_type is not O and: its type is O or differs from
  prev_type, or prev_tag is end or single, or prev_tag is begin or inside and its tag is begin
  or single;
* a chunk begins at it when its type is not O and: prev_type is O or differs, or its tag is
  begin or single, or its tag is inside or end and prev_tag is end or single.

A chunk left open at the end of a sequence ends at its last element. So a chunk is open after
an element exactly when that element's type is not O, and every chunk that begins where one
is open ends the open one first: chunks are the runs from each beginning to the next ending.
Here that is computed for all sequences at once (no Python loop per element): the beginnings
are a mask, and each beginning's end is found by ``searchsorted`` among the endings (with one
more at every sequence's end).

A chunk is (first element, last element, type). A predicted chunk is correct when the label
has the same chunk (Fluid's two-pointer walk over both lists, ordered by end, finds exactly
the common chunks, since the chunks of one list never overlap). Chunks of a type listed in
``excluded_chunk_types`` count nowhere. Precision = correct / predicted, recall = correct /
labelled, F1 = 2 p r / (p + r), each 0 when its count (for F1: correct) is 0, in float32.

The sequences are Inference's 1-level LoD (Label must have the same), or, without a LoD, the
rows of a padded [N, M] (or [N, M, 1]) Inference, row i's first ``SeqLength[i]`` elements.
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import OutOfRange
from placegroup.ops.registry import Meta, Slot, check, register
from placegroup.values import LoDTensor, as_host

# scheme -> (num_tag_types, begin, inside, end, single) (NOTE(chunk-schemes))
SCHEMES = {"IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1), "IOBES": (4, 0, 1, 2, 3), "plain": (1, -1, -1, -1, -1)}


def _infer(ins, a):
    inf, lab = ins["Inference"], ins["Label"]
    check(a["chunk_scheme"] in SCHEMES, f"chunk_eval: chunk_scheme {a['chunk_scheme']!r} is not one of "
                                        f"{list(SCHEMES)}")
    check(a["num_chunk_types"] >= 1, f"chunk_eval: num_chunk_types must be >= 1, got {a['num_chunk_types']}")
    check(inf.dtype == "int64" and lab.dtype == "int64",
          f"chunk_eval: Inference and Label must be int64, got {inf.dtype} and {lab.dtype}")
    check(len(inf.shape) == len(lab.shape) and all(x == y or -1 in (x, y) for x, y in zip(inf.shape, lab.shape)),
          f"chunk_eval: Inference{list(inf.shape)} and Label{list(lab.shape)} must have the same shape")
    if ins.get("SeqLength") is not None:
        s = inf.shape
        check(len(s) == 2 or (len(s) == 3 and s[2] == 1),
              f"chunk_eval: with SeqLength, Inference must be padded [batch, max_len] or [batch, max_len, 1], "
              f"got Inference{list(s)}")
        check(len(ins["SeqLength"].shape) <= 2, f"chunk_eval: SeqLength must be [batch] or [batch, 1], got "
                                                f"SeqLength{list(ins['SeqLength'].shape)}")
    f, i = Meta((1,), "float32"), Meta((1,), "int64")
    return {"Precision": f, "Recall": f, "F1-Score": f, "NumInferChunks": i, "NumLabelChunks": i,
            "NumCorrectChunks": i}


def _sequences(ins) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(inference ids, label ids, offsets): every sequence's elements back to back (host)."""
    inf, lab, lens = ins["Inference"], ins["Label"], ins.get("SeqLength")
    if isinstance(inf, LoDTensor) and inf.offsets:
        if inf.lod_level != 1:
            raise ValueError(f"chunk_eval: only a 1-level LoD is supported, Inference has {inf.lod_level} levels")
        lab_off = lab.offsets if isinstance(lab, LoDTensor) else ()
        off = np.asarray(as_host(inf.offsets[0]), np.int64)
        if len(lab_off) != 1 or not np.array_equal(np.asarray(as_host(lab_off[0])), off):
            raise ValueError(f"chunk_eval: Label's LoD must be Inference's {off.tolist()}, got "
                             f"{[np.asarray(as_host(o)).tolist() for o in lab_off]}")
        return (np.asarray(as_host(inf.data)).reshape(-1), np.asarray(as_host(lab.data)).reshape(-1), off)
    inf = np.asarray(as_host(inf.data if isinstance(inf, LoDTensor) else inf))
    lab = np.asarray(as_host(lab.data if isinstance(lab, LoDTensor) else lab))
    if lens is None:
        raise ValueError("chunk_eval: Inference has no LoD, so SeqLength must give the length of each padded row "
                         "(feed Inference as a LoDTensor, or pass seq_length)")
    lens = np.asarray(as_host(lens)).reshape(-1).astype(np.int64)
    n, width = inf.shape[0], (inf.shape[1] if inf.ndim > 1 else 0)
    if lens.shape[0] > n or (lens.size and (lens.min() < 0 or lens.max() > width)):
        raise ValueError(f"chunk_eval: SeqLength {lens.tolist()} does not fit the padded Inference{list(inf.shape)} "
                         f"(at most {n} lengths, each in 0..{width})")
    keep = np.arange(width)[None, :] < lens[:, None]
    rows = lens.shape[0]
    return (inf.reshape(n, width)[:rows][keep], lab.reshape(n, width)[:rows][keep],
            np.concatenate([[0], np.cumsum(lens)]).astype(np.int64))


def chunks(ids: np.ndarray, offsets: np.ndarray, scheme: str, num_chunk_types: int):
    """The chunks of every sequence (NOTE(chunk-schemes)): (first, last, type) int64 arrays,
    positions counted over all sequences back to back.

    Raises:
        OutOfRange: an id above ``num_chunk_types * num_tag_types``.
    """
    ntag, t_begin, t_inside, t_end, t_single = SCHEMES[scheme]
    other = num_chunk_types
    top = num_chunk_types * ntag
    if ids.size and (ids.min() < 0 or ids.max() > top):
        bad = int(ids[(ids < 0) | (ids > top)][0])
        raise OutOfRange(f"chunk_eval: label id {bad} is out of range: with scheme {scheme} and {num_chunk_types} "
                         f"chunk types the ids are 0..{top} ({top} is the outside tag O)")
    tag, typ = ids % ntag, ids // ntag
    first = np.zeros(ids.shape[0], dtype=bool)
    starts = offsets[:-1][offsets[:-1] < offsets[1:]]
    first[starts] = True
    ptag = np.where(first, -1, np.roll(tag, 1))
    ptyp = np.where(first, other, np.roll(typ, 1))
    same = (typ == ptyp) & (typ != other)
    p_end_or_single = (ptag == t_end) | (ptag == t_single)
    begin_or_single = (tag == t_begin) | (tag == t_single)
    begin = (typ != other) & ((ptyp == other) | (typ != ptyp) | begin_or_single
                              | (((tag == t_inside) | (tag == t_end)) & p_end_or_single))
    p_begin_or_inside = (ptag == t_begin) | (ptag == t_inside)
    end_before = (ptyp != other) & (~same | p_end_or_single | (p_begin_or_inside & begin_or_single))
    # every sequence ends at its end offset too; sorted, as both parts are
    ends = np.union1d(np.flatnonzero(end_before), offsets[1:])
    b = np.flatnonzero(begin)
    last = ends[np.searchsorted(ends, b, side="right")] - 1
    return b.astype(np.int64), last.astype(np.int64), typ[b].astype(np.int64)


def count(inf_chunks, lab_chunks, excluded) -> tuple[int, int, int]:
    """(predicted, labelled, correct) chunk counts, leaving out the ``excluded`` types."""
    (ib, ie, it), (lb, le, lt) = inf_chunks, lab_chunks
    exc = np.asarray(sorted(excluded), dtype=np.int64)
    i_keep, l_keep = ~np.isin(it, exc), ~np.isin(lt, exc)
    # the chunks of one list never overlap, so a label chunk is found by its first element
    pos = np.minimum(np.searchsorted(lb, ib), max(lb.shape[0] - 1, 0))
    hit = (lb[pos] == ib) & (le[pos] == ie) & (lt[pos] == it) if lb.shape[0] else np.zeros(ib.shape, bool)
    return int(i_keep.sum()), int(l_keep.sum()), int((hit & i_keep).sum())


@register("chunk_eval", ins=(Slot("Inference", no_grad=True), Slot("Label", no_grad=True),
                             Slot("SeqLength", dispensable=True, no_grad=True)),
          outs=("Precision", "Recall", "F1-Score", "NumInferChunks", "NumLabelChunks", "NumCorrectChunks"),
          attrs={"num_chunk_types": 1, "chunk_scheme": "IOB", "excluded_chunk_types": []}, infer=_infer,
          lod="drop", wants_lod=("Inference", "Label"))
def chunk_eval(xp, ins, a, ctx):
    """Chunk counts and precision, recall, F1 of one batch (NOTE(chunk-schemes))."""
    inf, lab, off = _sequences(ins)
    scheme, k = a["chunk_scheme"], a["num_chunk_types"]
    n_inf, n_lab, n_ok = count(chunks(inf, off, scheme, k), chunks(lab, off, scheme, k), a["excluded_chunk_types"])
    f = np.float32
    p = f(n_ok) / f(n_inf) if n_inf else f(0)
    r = f(n_ok) / f(n_lab) if n_lab else f(0)
    f1 = f(2) * p * r / (p + r) if n_ok else f(0)

    def one(v, dtype):
        return xp.asarray(np.array([v], dtype=dtype))

    return {"Precision": one(p, np.float32), "Recall": one(r, np.float32), "F1-Score": one(f1, np.float32),
            "NumInferChunks": one(n_inf, np.int64), "NumLabelChunks": one(n_lab, np.int64),
            "NumCorrectChunks": one(n_ok, np.int64)}
