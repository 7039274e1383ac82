"""Beam search over LoD tensors, Fluid 1.8's ``beam_search`` (one step: the candidates each
source keeps) and ``beam_search_decode`` (after the loop: the kept candidates of every step
walked back into sentences). Neither has a gradient. Both work on the host: the work is index
arithmetic on a few rows per source, and the LoD lives there anyway (NOTE(lod-offsets)).

NOTE(beam-lod): the LoD of a search step. Each row of a step's tensors is a prefix (a
hypothesis so far). Its 2-level LoD groups the rows by source (level 0, over the sequences of
level 1) and by the prefix of the step before that they extend (level 1, over rows): the
``selected_ids`` of the step before. ``beam_search`` reads only the rows of each source: level
``level`` of ``scores``' LoD made absolute (composed with the levels below it). Its outputs'
LoD is [those row offsets of the sources, the offsets of each row's kept candidates], so level
0 of step t + 1 counts the rows of step t, and ``sequence_expand(state, selected_ids)`` repeats
each row of a state once per candidate it keeps (0 times for a pruned source).

NOTE(beam-select): the candidates a source keeps, as Fluid 1.8.5's ``BeamSearchFunctor`` (CPU)
chooses them; tests/test_beam_search.py checks each point against Fluid itself.

* A row whose ``pre_ids`` is ``end_id`` (a prefix that ended) offers one candidate, ``end_id``
  with its ``pre_scores``; each other row offers its K candidates: id ``ids[r, d]`` (``d``
  without ``ids``), score ``scores[r, d]``, or ``pre_scores[r] + log(scores[r, d])`` when not
  ``is_accumulated`` (in the scores' dtype; Fluid's float32).
* A source keeps its ``beam_size`` best candidates by (score, row), largest first: on equal
  scores the later row wins. Fluid inserts the candidates, row by row and column by column,
  into a sorted list of ``beam_size`` that drops its last entry when full; equal candidates of
  one row keep their arrival order, except that a candidate equal to the last entry of a full
  list replaces it. Only when equal candidates of one row straddle the cut does that differ
  from one stable sort; such a source, rare, is replayed candidate by candidate (``_insert``).
* The kept candidates are written row by row, each row's in the order kept (best first);
  ``parent_idx`` (int32) gives each one's row.
* A source all of whose kept candidates come from ended rows has finished: it keeps none (its
  rows get 0 candidates), so ``is_empty(selected_ids)`` ends the loop once every source has.
  A prefix that ends this step (``end_id`` chosen by a live row) is kept, so its end token is
  written once before its source is pruned a step later.

NOTE(beam-decode): ``beam_search_decode``, as Fluid 1.8.5's ``BeamSearchDecoder::Backtrace``.
The sources are those of step 0's LoD. A source's sentences start at the last step where it
has candidates (a source pruned at step t starts at t - 1, with only end tokens), one sentence
per candidate there, in order; going back a step, a candidate's prefix is the row whose level-1
sequence holds it, and that row is a candidate of the step before. A sentence gathers its
token and score at each step down to step 0 (the start token included), except an ``end_id``
that is not its last token (an ended prefix repeats its end token each step). Each source's
sentences are sorted by their last score, best first, ties in order (Fluid's ``std::sort``,
stable for the at most 16 sentences its insertion sort handles). Out: ids (int64) and scores,
1-D, LoD [[sentences per source], [tokens per sentence]]. A source with more candidates than
``beam_size`` is an error, as in Fluid; one with fewer has fewer sentences (Fluid 1.8.5
crashes there, sorting the empty sentences it made room for).
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, Slot, check, register
from placegroup.ops.sequence import offsets_of, ranges
from placegroup.values import LoDTensor, is_lod_tensor


def _host(a) -> np.ndarray:
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _rows_of_groups(op: str, scores, level: int) -> np.ndarray:
    """NOTE(beam-lod): the row offsets of the groups (sources) of ``scores``' LoD level ``level``."""
    if not is_lod_tensor(scores) or not scores.offsets:
        raise ValueError(f"{op}: scores has no LoD; it must be a LoDTensor with 2 levels, sources then prefixes "
                         f"(NOTE(beam-lod) in ops/beam_search.py)")
    if not 0 <= level < scores.lod_level:
        raise ValueError(f"{op}: level {level} is not a level of scores' {scores.lod_level}-level LoD {scores.lod()}")
    rows = scores.offsets[level]
    for lower in scores.offsets[level + 1:]:
        rows = lower[rows]
    return np.asarray(rows, dtype=np.int64)


def _flat(op: str, slot: str, x, rows: int) -> np.ndarray:
    x = _host(x.data if is_lod_tensor(x) else x)
    if x.size != rows or (x.ndim and x.shape[0] != rows):
        raise ValueError(f"{op}: {slot} must hold one value per row of scores ({rows}), got {list(x.shape)}")
    return x.reshape(-1)


def _insert(keys: list, beam: int) -> list:
    """Fluid's ``Insert``, one candidate at a time: the positions in ``keys`` ((score, row) in
    arrival order) of the kept candidates, best first (NOTE(beam-select))."""
    top: list = []
    for j, key in enumerate(keys):
        if len(top) == beam:
            if key < keys[top[-1]]:
                continue
            top.pop()
        pos = len(top)
        while pos and keys[top[pos - 1]] < key:
            pos -= 1
        top.insert(pos, j)
    return top


def _candidates(pre_ids, pre_scores, ids, scores, a):
    """Every candidate of every row: (row, column, id, score) arrays, live rows' first."""
    rows, width = scores.shape[0], int(np.prod(scores.shape[1:], dtype=np.int64))
    ended = pre_ids == a["end_id"]
    live, done = np.flatnonzero(~ended), np.flatnonzero(ended)
    s = scores.reshape(rows, width)[live]
    if not a["is_accumulated"]:
        with np.errstate(divide="ignore"):  # log(0) = -inf, as Fluid's std::log
            s = pre_scores[live, None].astype(s.dtype) + np.log(s)
    cid = ids.reshape(rows, width)[live] if ids is not None else np.broadcast_to(np.arange(width), s.shape)
    return (np.concatenate([np.repeat(live, width), done]),
            np.concatenate([np.tile(np.arange(width, dtype=np.int64), live.shape[0]), np.zeros_like(done)]),
            np.concatenate([cid.reshape(-1).astype(np.int64), np.full(done.shape, a["end_id"], np.int64)]),
            np.concatenate([s.reshape(-1), pre_scores[done].astype(s.dtype)]), ended)


def _keep(src, row, col, score, beam: int):
    """(index, rank) of the candidates each source keeps (NOTE(beam-select))."""
    order = np.lexsort((col, -row, -score, src))
    s_src = src[order]
    first = np.searchsorted(s_src, s_src, side="left")
    rank = np.arange(order.shape[0]) - first
    kept, ranks = [order[rank < beam]], [rank[rank < beam]]
    # a source whose candidates at the cut are equal, of one row: replay Fluid's insertion
    cut = np.flatnonzero((rank == beam - 1)[:-1] & (s_src[1:] == s_src[:-1]))
    for i in cut:
        a, b = order[i], order[i + 1]
        if score[a] != score[b] or row[a] != row[b]:
            continue
        mine = np.flatnonzero(src == src[a])
        mine = mine[np.lexsort((col[mine], row[mine]))]
        top = mine[_insert(list(zip(score[mine].tolist(), row[mine].tolist())), beam)]
        drop = np.isin(kept[0], mine)
        kept[0], ranks[0] = kept[0][~drop], ranks[0][~drop]
        kept.append(top)
        ranks.append(np.arange(top.shape[0]))
    return np.concatenate(kept), np.concatenate(ranks)


def _search_infer(ins, a):
    check(a["beam_size"] >= 1, f"beam_search: beam_size must be >= 1, got {a['beam_size']}")
    check(a["level"] >= 0, f"beam_search: level must be >= 0, got {a['level']}")
    dtype = ins["scores"].dtype
    check(dtype in ("float32", "float64"), f"beam_search: scores must be float32 or float64, got {dtype}")
    return {"selected_ids": Meta((-1, 1), "int64"), "selected_scores": Meta((-1, 1), dtype),
            "parent_idx": Meta((-1,), "int32")}


@register("beam_search", ins=(Slot("pre_ids", no_grad=True), Slot("pre_scores", no_grad=True),
                              Slot("ids", dispensable=True, no_grad=True), Slot("scores", no_grad=True)),
          outs=(Slot("selected_ids", no_grad=True), Slot("selected_scores", no_grad=True),
                Slot("parent_idx", dispensable=True, no_grad=True)),
          attrs={"level": 0, "beam_size": 1, "end_id": 0, "is_accumulated": True}, infer=_search_infer,
          lod=lambda levels, a: {"selected_ids": 2, "selected_scores": 2}, wants_lod=("scores",))
def beam_search(xp, ins, a, ctx):
    """One step of beam search: the ``beam_size`` best candidates of each source, with the LoD
    of NOTE(beam-lod), chosen and pruned as NOTE(beam-select) says."""
    op, beam = "beam_search", a["beam_size"]
    if beam < 1:
        raise ValueError(f"{op}: beam_size must be >= 1, got {beam}")
    groups = _rows_of_groups(op, ins["scores"], a["level"])
    scores = _host(ins["scores"].data)
    rows = scores.shape[0]
    ids = ins.get("ids")
    if ids is not None:
        ids = _host(ids.data if is_lod_tensor(ids) else ids)
        if ids.shape != scores.shape:
            raise ValueError(f"{op}: ids{list(ids.shape)} and scores{list(scores.shape)} must have one shape")
    pre_ids = _flat(op, "pre_ids", ins["pre_ids"], rows)
    pre_scores = _flat(op, "pre_scores", ins["pre_scores"], rows)
    row, col, cid, score, ended = _candidates(pre_ids, pre_scores, ids, scores, a)
    row_src = np.repeat(np.arange(groups.shape[0] - 1), np.diff(groups))
    src = row_src[row]
    kept, rank = _keep(src, row, col, score, beam)
    n_src = groups.shape[0] - 1
    # a source all of whose kept candidates extend ended rows has finished: prune it
    picked = np.bincount(src[kept], minlength=n_src)
    from_ended = np.bincount(src[kept], weights=ended[row[kept]] & (cid[kept] == a["end_id"]), minlength=n_src)
    live = picked != from_ended
    kept, rank = kept[live[src[kept]]], rank[live[src[kept]]]
    kept = kept[np.lexsort((rank, row[kept]))]
    lod = (groups, offsets_of(np.bincount(row[kept], minlength=rows)))
    return {"selected_ids": LoDTensor(xp.asarray(cid[kept].reshape(-1, 1)), lod, check=False),
            "selected_scores": LoDTensor(xp.asarray(score[kept].reshape(-1, 1)), lod, check=False),
            "parent_idx": xp.asarray(row[kept].astype(np.int32))}


# -- beam_search_decode ------------------------------------------------------------------------


def _steps(op: str, ids, scores) -> list:
    """Each step's (source offsets over prefixes, prefix offsets over candidates, ids, scores) on
    the host, checked to chain (NOTE(beam-lod))."""
    if not ids or len(ids) != len(scores):
        raise ValueError(f"{op}: Ids and Scores must be tensor arrays of one length >= 1, got {len(ids or ())} "
                         f"and {len(scores or ())} steps")
    steps = []
    for t, (i, s) in enumerate(zip(ids, scores)):
        if not (is_lod_tensor(i) and i.lod_level == 2 and is_lod_tensor(s)):
            raise ValueError(f"{op}: step {t} of Ids must be a LoDTensor with 2 levels (sources, prefixes), got "
                             f"{i.lod() if is_lod_tensor(i) else type(i).__name__}")
        tid, tsc = _host(i.data).reshape(-1), _host(s.data).reshape(-1)
        if tid.shape != tsc.shape:
            raise ValueError(f"{op}: step {t} has {tid.shape[0]} ids but {tsc.shape[0]} scores")
        src, pre = i.offsets
        if steps and src.shape != steps[0][0].shape:
            raise ValueError(f"{op}: step {t} has {src.shape[0] - 1} sources, step 0 has {steps[0][0].shape[0] - 1}")
        if steps and pre.shape[0] - 1 != steps[-1][2].shape[0]:
            raise ValueError(f"{op}: step {t} extends {pre.shape[0] - 1} prefixes, but step {t - 1} has "
                             f"{steps[-1][2].shape[0]} candidates; each step's LoD level 1 has one sequence per "
                             f"candidate of the step before")
        steps.append((src, pre, tid, tsc))
    if steps[0][0].shape[0] < 2:
        raise ValueError(f"{op}: step 0 has no source (its LoD is {ids[0].lod()})")
    return steps


def _decode_infer(ins, a):
    dtype = ins["Scores"].dtype if ins.get("Scores") is not None else "float32"
    return {"SentenceIds": Meta((-1,), "int64"), "SentenceScores": Meta((-1,), dtype)}


@register("beam_search_decode", ins=(Slot("Ids", no_grad=True), Slot("Scores", no_grad=True)),
          outs=(Slot("SentenceIds", no_grad=True), Slot("SentenceScores", no_grad=True)),
          attrs={"beam_size": 1, "end_id": 0}, infer=_decode_infer,
          lod=lambda levels, a: {"SentenceIds": 2, "SentenceScores": 2})
def beam_search_decode(xp, ins, a, ctx):
    """The sentences of each source, walked back through the steps' arrays (NOTE(beam-decode))."""
    op, end = "beam_search_decode", a["end_id"]
    steps = _steps(op, ins["Ids"], ins["Scores"])
    n_src = steps[0][0].shape[0] - 1
    started = np.zeros(n_src, bool)
    at = np.zeros(0, np.int64)          # each sentence's candidate at the step being read
    owner = np.zeros(0, np.int64)       # its source
    length = np.zeros(0, np.int64)      # the tokens it has so far
    final = np.zeros(0, steps[0][3].dtype)  # its last score: that of the candidate it starts at
    tok, sc, kept = [], [], []          # per step read, last first: over the sentences so far
    for t in range(len(steps) - 1, -1, -1):
        src, pre, tid, tsc = steps[t]
        first, count = pre[src[:-1]], pre[src[1:]] - pre[src[:-1]]
        new = np.flatnonzero(~started & (count > 0))
        if new.shape[0]:
            many = new[count[new] > a["beam_size"]]
            if many.shape[0]:
                raise ValueError(f"{op}: source {int(many[0])} has {int(count[many[0]])} candidates at step {t}, "
                                 f"more than beam_size {a['beam_size']}")
            started[new] = True
            fresh = ranges(first[new], count[new])
            at, owner = np.concatenate([at, fresh]), np.concatenate([owner, np.repeat(new, count[new])])
            length = np.concatenate([length, np.zeros(fresh.shape[0], np.int64)])
            final = np.concatenate([final, tsc[fresh]])
        keep = (tid[at] != end) | (length == 0)
        tok.append(tid[at])
        sc.append(tsc[at])
        kept.append(keep)
        length = length + keep
        at = np.searchsorted(pre, at, side="right") - 1
    return _sentences(xp, tok[::-1], sc[::-1], kept[::-1], owner, final, n_src)


def _sentences(xp, tok, sc, kept, owner, final, n_src: int) -> dict:
    """The sentences as two LoDTensors, each source's sorted by last score, best first; ``tok``,
    ``sc``, ``kept``: per step, over the sentences begun by then."""
    n = owner.shape[0]

    def grid(cols, fill):  # [sentence, step]
        return np.stack([np.concatenate([c, np.full(n - c.shape[0], fill, c.dtype)]) for c in cols], axis=1)

    order = np.lexsort((np.arange(n), -final, owner))
    tok, sc, kept = grid(tok, 0)[order], grid(sc, 0)[order], grid(kept, False)[order]
    lod = (offsets_of(np.bincount(owner, minlength=n_src)), offsets_of(kept.sum(axis=1)))
    return {"SentenceIds": LoDTensor(xp.asarray(tok[kept]), lod, check=False),
            "SentenceScores": LoDTensor(xp.asarray(sc[kept]), lod, check=False)}
