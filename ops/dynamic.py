"""Ops of tables keyed by raw 64-bit ids (``sparse_embedding``): the table, its lookup and
gradient, its update, and the hashed prefetch a trainer uses when the table is sharded over
the pservers (docs/sparse.md, "Tables that grow").

The table var (``Variable.type == "dynamic_table"``) holds a ``DynamicTable``
(placegroup/util/dynamic_table.py): ids are row keys, any int64 in 0 to 2**63 - 1, and rows
are made when an id is admitted and dropped when it goes stale. Values keyed by raw ids travel
as SelectedRows whose ``rows`` are the ids themselves, of height ``ID_SPACE``.

NOTE(hash-shards): a table over M pservers puts id ``i`` on shard ``mix64(i) % M``
(splitmix64's finalizer, placegroup/util/key_index.py), never on ``i % M``: raw feature ids
are often hashes already, or multiples of a slot's stride, and a fixed 64-bit mix spreads any
of them evenly. It is the same in every process and on every machine, so a checkpoint can be
re-split onto another number of pservers by the same rule.

One process: ``dynamic_table`` (startup) -> ``dynamic_lookup`` (reads the table; with no
entry, an id seen for the first time in training gets its row here) -> ``dynamic_lookup_grad``
(a SelectedRows of raw ids, repeats kept: each occurrence is a sighting) ->
``dynamic_table_update`` (one ``DynamicTable.push``: counting, admission, the per-row
optimizer, and every ``round_steps`` updates the eviction round). Sharded, the trainer runs
``dynamic_split_ids`` -> ``dynamic_shard_lookup`` on each pserver -> ``merge_selected_rows``
-> ``dynamic_lookup`` over the fetched rows, and sends its gradient back cut by
``dynamic_shard_grad``.

NOTE(sighting-weights): a table admitted by show and click (``ShowClickEntry``) counts each
occurrence of an id by its example's show/click score, not as 1. The lookup's gradient
computes the scores from the program's show and click vars (wired in by ``minimize``) and the
gradient carries them as ``SelectedRows.weights``, one per entry, beside its values: joins
concatenate them, the trainers' merge scales the values by 1/N but not the weights, and the
shard cut cuts them with the rows. So the pserver sums an id's scores over the whole batch in
the order one process does, and the table counts exactly what it counts there.
"""
from __future__ import annotations

import numpy

from placegroup.errors import OutOfRange  # a user's data, not a bug: one line (NOTE(user-errors))
from placegroup.ops.registry import Cut, Meta, Slot, check, grad_of, register
from placegroup.ops.sequence_pad import top_rows
from placegroup.util.dynamic_table import ID_SPACE, DynamicTable, TableConfig
from placegroup.util.key_index import mix64
from placegroup.values import SelectedRows, as_host, is_lod_tensor, is_selected_rows, sorted_unique

_TABLE = Slot("W", rows_by="Ids")


def _is_table(w) -> bool:
    return isinstance(w, DynamicTable)


def _host_ids(ids, what: str, op: str) -> numpy.ndarray:
    """``ids`` flattened as host int64, checked non-negative (the error names ``what``)."""
    flat = numpy.asarray(as_host(ids)).reshape(-1)
    if flat.size and int(flat.min()) < 0:
        raise OutOfRange(f"{op}: id {int(flat[flat < 0][0])} in {what} is negative; a table keyed by "
                         f"raw ids takes ids in 0 to 2**63 - 1")
    return flat.astype(numpy.int64, copy=False)


def _out_shape(ids_shape: tuple, dim: int) -> tuple:
    ids_shape = tuple(ids_shape)
    if len(ids_shape) > 1 and ids_shape[-1] == 1:
        ids_shape = ids_shape[:-1]
    return ids_shape + (dim,)


# -- the table ------------------------------------------------------------------------------


def _table_infer(ins, a):
    cfg = TableConfig.from_json(a["config"])
    _check_shard(a)
    return {"Out": Meta((-1, cfg.dim), cfg.dtype)}


def _check_shard(a) -> None:
    n, k = a["num_shards"], a["shard_index"]
    check(isinstance(n, int) and n >= 1 and isinstance(k, int) and 0 <= k < n,
          f"dynamic_table: shard_index {k!r} must be in 0..num_shards - 1 (num_shards {n!r})")


def _table_cut(a, cut: Cut) -> dict:
    """NOTE(init-cut) for a table: shard k of M is the ids with ``mix64(id) % M == k``; the
    rows' values need nothing cut, since a row's initial value is a function of (seed, id)."""
    if a["num_shards"] != 1 or cut.rank_axis >= 0:
        raise ValueError("a shard of a table keyed by raw ids cannot be cut again")
    return {**a, "num_shards": int(cut.strides[0]), "shard_index": int(cut.offsets[0])}


@register("dynamic_table", ins=(), outs=("Out",), attrs={"config": "", "num_shards": 1, "shard_index": 0},
          infer=_table_infer, role="init", cut=_table_cut, lod="drop")
def dynamic_table(xp, ins, a, ctx):
    """Out = an empty ``DynamicTable`` of ``config`` (``TableConfig.to_json``): shard
    ``shard_index`` of ``num_shards`` (NOTE(hash-shards)); rows appear as ids are admitted."""
    _check_shard(a)
    return {"Out": DynamicTable(TableConfig.from_json(a["config"]))}


# -- lookup and its gradient ----------------------------------------------------------------

_LOOKUP_ATTRS = {"padding_idx": -1, "is_test": False, "is_sparse": True, "ids_name": "", "table": "",
                 "scored": False, "nonclk_coeff": 0.1, "click_coeff": 1.0}


def _lookup_infer(ins, a):
    w, ids = ins["W"], ins["Ids"]
    check(ids.dtype == "int64", f"sparse_embedding: the ids must be int64, got {ids.dtype}")
    return {"Out": Meta(_out_shape(ids.shape, w.shape[1]), w.dtype)}


@register("dynamic_lookup", ins=(_TABLE, Slot("Ids", no_grad=True)), outs=("Out",), attrs=_LOOKUP_ATTRS,
          infer=_lookup_infer, grad=grad_of(("W",), uses=("Ids",)))
def dynamic_lookup(xp, ins, a, ctx):
    """Out[i] = the row of id Ids[i]; zeros for an id with no row and for ``padding_idx``.

    ``W`` is the table itself (one process: in training, ``is_test`` false, an id is admitted
    at first sight when the table has no entry) or the rows a trainer prefetched from the
    pservers (a SelectedRows keyed by raw ids, every id of the batch among them).

    Raises:
        OutOfRange: a negative id, naming the ids var.
    """
    w, ids, pad = ins["W"], ins["Ids"], a["padding_idx"]
    flat = _host_ids(ids, repr(a["ids_name"] or "Ids"), "sparse_embedding")
    if _is_table(w):
        dim = w.config.dim
        if pad == -1:
            out = w.pull(flat, create=not a["is_test"])
        else:  # the padding id never gets a row
            out = numpy.zeros((flat.shape[0], dim), w.config.dtype)
            keep = flat != pad
            out[keep] = w.pull(flat[keep], create=not a["is_test"])
    else:
        pos, found = w.positions(flat)
        found |= flat == pad
        if not bool(found.all()):
            missing = int(flat[~found][0])
            raise IndexError(f"sparse_embedding: id {missing} was not prefetched into {a['table']!r}; "
                             f"prefetch every id of the batch before the lookup")
        dim = w.values.shape[1]
        out = numpy.take(numpy.asarray(w.values), pos, axis=0)
    if pad != -1:
        out[flat == pad] = 0
    return {"Out": xp.asarray(out).reshape(_out_shape(ids.shape, dim))}


def _examples_of(ids, n: int, examples: int, what: str) -> numpy.ndarray:
    """The example each of the ``n`` ids belongs to: by the top level of a LoD, else ``n /
    examples`` ids per example in order.

    Raises:
        ValueError: the ids do not split over ``examples`` examples (naming ``what``).
    """
    if is_lod_tensor(ids) and ids.offsets:
        top = numpy.asarray(as_host(top_rows("sparse_embedding", ids)), numpy.int64)
        if top.size - 1 == examples:
            return numpy.repeat(numpy.arange(examples), numpy.diff(top))
        raise ValueError(f"sparse_embedding: {what} holds {top.size - 1} sequences but the show and click vars "
                         f"{examples} examples; they must be one per sequence")
    if examples and n % examples == 0:
        return numpy.arange(n) // (n // examples)
    raise ValueError(f"sparse_embedding: {what} holds {n} ids, which do not split over the {examples} examples of "
                     f"the show and click vars")


def _sighting_weights(ins, a, n: int) -> numpy.ndarray:
    """NOTE(sighting-weights): each id's show/click score, ``(show - click)·nonclk_coeff +
    click·click_coeff`` of its example, float32 [n]; without show and click vars every example
    counts as shown once and not clicked, as Paddle does then."""
    if ins.get("Show") is None:
        return numpy.full(n, a["nonclk_coeff"], numpy.float32)
    show, click = (numpy.asarray(as_host(ins[k]), numpy.float64).reshape(-1) for k in ("Show", "Click"))
    if show.size != click.size:
        raise ValueError(f"sparse_embedding: the show var holds {show.size} values and the click var "
                         f"{click.size}; both need one per example")
    score = ((show - click) * a["nonclk_coeff"] + click * a["click_coeff"]).astype(numpy.float32)
    return score[_examples_of(ins["Ids"], n, show.size, repr(a["ids_name"] or "Ids"))]


@register("dynamic_lookup_grad", ins=("Ids", "Out@GRAD", Slot("Show", dispensable=True, no_grad=True),
                                      Slot("Click", dispensable=True, no_grad=True)),
          outs=(Slot("W@GRAD", sparse_if="is_sparse"),), attrs=_LOOKUP_ATTRS, role="backward", wants_lod=("Ids",))
def dynamic_lookup_grad(xp, ins, a, ctx):
    """W@GRAD = SelectedRows(rows = the batch's ids in batch order, repeats kept, values = the
    matching rows of Out@GRAD, height ``ID_SPACE``); the padding id's entries are left out.
    For a ShowClickEntry table (``scored``), each entry also carries its example's show/click
    score, from ``Show`` and ``Click``, as its weight (NOTE(sighting-weights))."""
    g = ins["Out@GRAD"]
    flat = _host_ids(ins["Ids"], repr(a["ids_name"] or "Ids"), "sparse_embedding")
    g = g.reshape(flat.shape[0], -1)
    weights = _sighting_weights(ins, a, flat.shape[0]) if a["scored"] else None
    if a["padding_idx"] != -1:
        keep = flat != a["padding_idx"]
        flat, g = flat[keep], g[xp.asarray(keep)]
        weights = None if weights is None else weights[keep]
    return {"W@GRAD": SelectedRows(flat, g, ID_SPACE, weights)}


# -- the update -----------------------------------------------------------------------------


def _update_infer(ins, a):
    check(a["optimizer"] in ("sgd", "adagrad", "adam"),
          f"dynamic_table_update: optimizer {a['optimizer']!r} is not one a table keyed by raw ids has "
          f"(sgd, adagrad, adam)")
    return {"ParamOut": ins["Param"]}


@register("dynamic_table_update", ins=(Slot("Param", role="Param"), Slot("Grad", role="Grad"),
                                       Slot("LearningRate", role="LearningRate")),
          outs=(Slot("ParamOut", role="ParamOut"),), attrs={"optimizer": "sgd"}, infer=_update_infer,
          role="optimize", inplace={"ParamOut": "Param"})
def dynamic_table_update(xp, ins, a, ctx):
    """One update of the table (``DynamicTable.push``) by the SelectedRows ``Grad`` of raw ids,
    at the current ``LearningRate``; ParamOut is the same table, updated in place. The table's
    optimizer was fixed when the program was built (``optimizer`` says which, as a check)."""
    table, g = ins["Param"], ins["Grad"]
    if not _is_table(table):
        raise TypeError(f"dynamic_table_update: Param must be a table keyed by raw ids, got {type(table).__name__}")
    if table.config.optimizer != a["optimizer"]:
        raise ValueError(f"dynamic_table_update: the table was made for {table.config.optimizer!r} but the "
                         f"program updates it with {a['optimizer']!r}")
    if not is_selected_rows(g):
        raise TypeError(f"dynamic_table_update: Grad must be a SelectedRows of raw ids, got {type(g).__name__}")
    lr = float(numpy.asarray(getattr(ins["LearningRate"], "get", lambda: ins["LearningRate"])()).reshape(-1)[0])
    g = g.to_host()
    table.push(g.rows, g.values, lr=lr, weights=g.weights)
    return {"ParamOut": table}


# -- the hashed prefetch --------------------------------------------------------------------


def _split_infer(ins, a):
    for ids in ins["Ids"]:
        check(ids.dtype == "int64", f"dynamic_split_ids: the ids must be int64, got {ids.dtype}")
    check(isinstance(a["num_shards"], int) and a["num_shards"] >= 1,
          f"dynamic_split_ids: num_shards must be an int >= 1, got {a['num_shards']!r}")
    return {"Out": [Meta((-1, 1), "int64")] * a["num_shards"]}


@register("dynamic_split_ids", ins=(Slot("Ids", no_grad=True, duplicable=True),), outs=(Slot("Out", duplicable=True),),
          attrs={"num_shards": 1, "table": "", "ids_names": [], "padding_idx": -1}, infer=_split_infer, lod="drop")
def dynamic_split_ids(xp, ins, a, ctx):
    """Out[k] = the sorted distinct ids of every Ids var with ``mix64(id) % num_shards == k``
    (NOTE(hash-shards)), int64 [n_k, 1]: each distinct id is fetched once a step, but
    ``padding_idx``, which every lookup of the table reads as zeros.

    Raises:
        OutOfRange: a negative id, naming the ids var it came in (checked here, on the trainer,
            before anything is sent).
    """
    names = list(a["ids_names"]) or [f"Ids[{i}]" for i in range(len(ins["Ids"]))]
    flat = numpy.concatenate([_host_ids(ids, repr(name), f"sparse_embedding {a['table']!r}")
                              for ids, name in zip(ins["Ids"], names)])
    uniq = sorted_unique(numpy, flat)
    if a["padding_idx"] != -1:  # read as zeros by the lookups, never fetched
        uniq = uniq[uniq != a["padding_idx"]]
    shard = mix64(uniq) % numpy.uint64(a["num_shards"])
    return {"Out": [xp.asarray(uniq[shard == k].reshape(-1, 1)) for k in range(a["num_shards"])]}


@register("dynamic_shard_lookup", ins=(Slot("Ids", no_grad=True), "W"), outs=("Out",),
          attrs={"num_shards": 1, "shard_index": 0, "is_test": False},
          infer=lambda ins, a: {"Out": ins["W"]})  # the table var's declared [hint, D]
def dynamic_shard_lookup(xp, ins, a, ctx):
    """The pserver side of a prefetch: Out = SelectedRows(rows = Ids, values = their rows in
    shard ``W``, zeros where an id has no row; height ``ID_SPACE``). In training a shard whose
    table has no entry admits an unseen id here, as the one-process lookup does.

    Raises:
        IndexError: an id that belongs to another shard (NOTE(hash-shards)).
    """
    w, n, k = ins["W"], a["num_shards"], a["shard_index"]
    flat = _host_ids(ins["Ids"], "Ids", "dynamic_shard_lookup")
    if n > 1 and flat.size:
        wrong = mix64(flat) % numpy.uint64(n) != numpy.uint64(k)
        if bool(wrong.any()):
            raise IndexError(f"dynamic_shard_lookup: id {int(flat[wrong][0])} belongs to shard "
                             f"{int(mix64(flat[wrong][:1])[0] % numpy.uint64(n))}, but this is shard {k} of {n}")
    return {"Out": SelectedRows(flat, w.pull(flat, create=not a["is_test"]), ID_SPACE)}


@register("dynamic_shard_grad", ins=("X",), outs=(Slot("Out", duplicable=True),), attrs={"num_shards": 1},
          infer=lambda ins, a: {"Out": [ins["X"]] * a["num_shards"]}, role="backward")
def dynamic_shard_grad(xp, ins, a, ctx):
    """Out[k] = the entries of the SelectedRows X (raw ids) that shard k holds
    (NOTE(hash-shards)), in their order, repeats kept: each occurrence is a sighting there
    (with its weight, NOTE(sighting-weights))."""
    x, n = ins["X"], a["num_shards"]
    if not is_selected_rows(x):
        raise TypeError(f"dynamic_shard_grad: X must be a SelectedRows of raw ids, got {type(x).__name__}")
    rows = numpy.asarray(as_host(x.rows))
    weights = None if x.weights is None else numpy.asarray(as_host(x.weights))
    shard = mix64(rows) % numpy.uint64(n)
    outs = []
    for k in range(n):
        keep = shard == numpy.uint64(k)
        outs.append(SelectedRows(rows[keep], x.values[xp.asarray(keep)], ID_SPACE,
                                 None if weights is None else weights[keep]))
    return {"Out": outs}


__all__ = ["ID_SPACE"]
