"""Fluid 1.8's ``fluid.contrib.layers.nn``: ``shuffle_batch``, ``partial_sum``,
``partial_concat``, ``fused_embedding_seq_pool`` and ``fused_elemwise_activation`` (their ops
are in ops/random.py and ops/contrib.py).

Building a program is single-threaded, as in Fluid.
"""
from __future__ import annotations

import warnings

from placegroup.model.initializer import ConstantInitializer
from placegroup.ir import unique_name
from placegroup.ir.framework import Variable
from placegroup.ir.variable import DYNAMIC_TABLE
from placegroup.model.layer_helper import LayerHelper
from placegroup.model.param_attr import ParamAttr
from placegroup.layers.sequence import _check
from placegroup.layers.tensor import _op_seed
from placegroup.util.dynamic_table import (CountFilterEntry, ProbabilityEntry, ShowClickEntry, SparseTableConfig,
                                              TableConfig)

__all__ = ["shuffle_batch", "partial_concat", "partial_sum", "fused_embedding_seq_pool", "fused_elemwise_activation",
           "sparse_embedding"]


def shuffle_batch(x, seed=None):
    """The rows of ``x`` (its last dim; the others flattened) in a random order, new each step.

    Word2vec's negative samples are the batch's own true-word embeddings shuffled. The gradient
    goes back to each row where it came from. Out keeps ``x``'s LoD; the op's permutations are
    not Fluid's numbers (NOTE(shuffle-batch) in ops/random.py).

    Args:
        x: a Variable of at least 1 dim (float32, float64, int32 or int64).
        seed: an int (the start of the draws), an int64 [1] Variable holding it, or None: the
            program's ``random_seed`` when it is set, as in Fluid (every such op then draws the
            same permutations of equally many rows), else a seed of the op's own.

    Returns:
        Variable: ``x``'s rows permuted, of its shape and dtype.

    Raises:
        ValueError: ``seed`` is of another kind.

    Example::

        x = fluid.layers.data(name="x", shape=[-1, 4])
        out = fluid.contrib.layers.shuffle_batch(x)
    """
    helper = LayerHelper("shuffle_batch")
    out = helper.create_variable_for_type_inference(x.dtype)
    idx = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    start = 0
    if seed is None:
        program = helper.main_program
        k = sum(op.type == "shuffle_batch" for b in program.blocks for op in b.ops)
        start = program.random_seed or _op_seed(0, "shuffle_batch", k)
    elif isinstance(seed, int) and not isinstance(seed, bool):
        start = seed
    elif not isinstance(seed, Variable):
        raise ValueError(f"shuffle_batch: seed must be an int, an int64 Variable or None, got {seed!r}")
    if not isinstance(seed, Variable):  # Fluid's persistable seed var, here started at startup_seed
        seed = helper.create_global_variable(name=unique_name.generate("shuffle_batch_seed"), persistable=True,
                                             shape=[1], dtype="int64", stop_gradient=True)
        helper.set_variable_initializer(seed, ConstantInitializer(float(start)))
    helper.append_op("shuffle_batch", {"X": [x], "Seed": [seed]},
                     {"Out": [out], "ShuffleIdx": [idx], "SeedOut": [seed]}, {"startup_seed": start})
    return out


def _int(layer: str, name: str, v) -> int:
    if not isinstance(v, int) or isinstance(v, bool):
        raise TypeError(f"The type of '{name}' in {layer} must be int, but received {type(v).__name__}")
    return v


def partial_concat(input, start_index: int = 0, length: int = -1):
    """The columns ``[start_index, start_index + length)`` of each 2-D input, side by side
    (NOTE(partial-ops) in ops/contrib.py).

    Args:
        input: a list of 2-D Variables of one shape and dtype (float16/32/64, int32, int64);
            a single Variable is taken as a list of one, with a warning, as in Fluid.
        start_index: the first column; negative counts from the end.
        length: how many columns; -1: all after ``start_index``.

    Returns:
        A Variable [N, len(input) * length] of the inputs' dtype.

    Raises:
        TypeError: an input that is not a Variable of those dtypes, or non-int sizes.
        ProgramError: columns that do not fit the inputs.

    Example::

        out = fluid.contrib.layers.partial_concat([x, y], start_index=0, length=2)
    """
    if not isinstance(input, list):
        warnings.warn(f"The type of input in partial_concat should be list, but received {type(input)}.")
        input = [input]
    for i, x in enumerate(input):
        _check(x, "partial_concat", ("float16", "float32", "float64", "int32", "int64"), f"input[{i}]")
    attrs = {"start_index": _int("partial_concat", "start_index", start_index),
             "length": _int("partial_concat", "length", length)}
    helper = LayerHelper("partial_concat")
    out = helper.create_variable_for_type_inference(input[0].dtype)
    helper.append_op("partial_concat", {"X": input}, {"Out": [out]}, attrs)
    return out


def partial_sum(input, start_index: int = 0, length: int = -1):
    """The sum of the columns ``[start_index, start_index + length)`` of each 2-D input
    (NOTE(partial-ops) in ops/contrib.py).

    Args:
        input: a list of 2-D Variables of one shape and dtype (float32/64, int32, int64).
        start_index: the first column; negative counts from the end.
        length: how many columns; -1: all after ``start_index``.

    Returns:
        A Variable [N, length] of the inputs' dtype.

    Raises:
        TypeError: an input that is not a Variable of those dtypes.
        ProgramError: columns that do not fit the inputs.

    Example::

        out = fluid.contrib.layers.partial_sum([x, y], start_index=0, length=2)
    """
    for i, x in enumerate(input):
        _check(x, "partial_sum", ("float32", "float64", "int32", "int64"), f"input[{i}]")
    helper = LayerHelper("partial_sum")
    out = helper.create_variable_for_type_inference(input[0].dtype)
    helper.append_op("partial_sum", {"X": list(input)}, {"Out": [out]},
                     {"start_index": int(start_index), "length": int(length)})
    return out


def fused_embedding_seq_pool(input, size, is_sparse: bool = False, padding_idx=None, combiner: str = "sum",
                             param_attr=None, dtype="float32"):
    """An embedding lookup summed over each sequence, fused (NOTE(fused-emb-pool) in
    ops/contrib.py): Out[s] = sum of W[id] over sequence s's ids.

    Makes the table ``fused_embedding_seq_pool_<n>.w_0`` of ``size`` (Xavier unless
    ``param_attr`` says).

    Args:
        input: int64 ids [T, 1] with lod_level 1.
        size: [dictionary size V, embedding width D].
        is_sparse: the table's gradient is a SelectedRows of the ids' rows.
        padding_idx: an id that adds nothing (negative: counted from V); None: none.
        combiner: "sum", the only one Fluid 1.8 has.
        param_attr: the table's ParamAttr.
        dtype: the table's dtype.

    Returns:
        A Variable [number of sequences, D].

    Raises:
        TypeError: ``input`` is not an int64 Variable.
        ValueError: ``size`` is not [V, D], or ``padding_idx`` is outside the table.

    Example::

        words = fluid.layers.data("word", shape=[1], dtype="int64", lod_level=1)
        bow = fluid.contrib.fused_embedding_seq_pool(words, size=[10000, 32], padding_idx=0)
    """
    _check(input, "fused_embedding_seq_pool", ("int64",))
    size = [int(v) for v in size]
    if len(size) != 2:
        raise ValueError(f"fused_embedding_seq_pool: size must be [dictionary size, embedding width], got {size}")
    pad = -1 if padding_idx is None else padding_idx if padding_idx >= 0 else size[0] + padding_idx
    if not -1 <= pad < size[0]:
        raise ValueError(f"fused_embedding_seq_pool: padding_idx {padding_idx} is outside the table of {size[0]} rows")
    helper = LayerHelper("fused_embedding_seq_pool")
    w = helper.create_parameter(param_attr, size, dtype)
    out = helper.create_variable_for_type_inference(w.dtype)
    helper.append_op("fused_embedding_seq_pool", {"Ids": [input], "W": [w]}, {"Out": [out]},
                     {"is_sparse": bool(is_sparse), "combiner": combiner, "padding_idx": int(pad)})
    return out


def fused_elemwise_activation(x, y, functor_list, axis: int = -1, scale: float = 0.0,
                              save_intermediate_out: bool = True):
    """An elementwise add or mul fused with an activation: ``Unary(Binary(x, y))`` or
    ``Binary(x, Unary(y))`` (NOTE(fused-elemwise) in ops/contrib.py).

    Args:
        x: the left operand.
        y: the right operand, broadcast into ``x`` by ``axis`` as elementwise ops do.
        functor_list: two op names, e.g. ["elementwise_add", "relu"] (= x + relu(y)) or
            ["relu", "elementwise_add"] (= relu(x + y)), or one string "a,b"; one of the eight
            pairs Fluid 1.8 runs.
        axis: where y's dims start in x's.
        scale: the factor of the "scale" functor.
        save_intermediate_out: accepted as Fluid's (the intermediate is always kept here).

    Returns:
        The result, of ``x``'s shape.

    Raises:
        ValueError: ``functor_list`` is not two names.
        ProgramError: a pair Fluid 1.8 does not run, or shapes that do not broadcast.

    Example::

        out = fluid.contrib.layers.fused_elemwise_activation(x, y, ["elementwise_add", "relu"])
    """
    if isinstance(functor_list, str):
        functor_list = functor_list.split(",")
    if not isinstance(functor_list, list) or len(functor_list) != 2:
        raise ValueError("functor_list should be a list of str, and the length should be 2.")
    helper = LayerHelper("fused_elemwise_activation")
    out = helper.create_variable_for_type_inference(x.dtype)
    intermediate = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("fused_elemwise_activation", {"X": [x], "Y": [y]},
                     {"Out": [out], "IntermediateOut": [intermediate]},
                     {"axis": int(axis), "scale": float(scale), "save_intermediate_out": bool(save_intermediate_out),
                      "functor_list": [str(f) for f in functor_list]})
    return out


_TABLE_CLASSES = ("MemorySparseTable", "CommonSparseTable")


def _table_init(startup_op, layer: str) -> tuple[dict, int]:
    """(the TableConfig's init fields, seed) of the initializer op the parameter got: a table keyed
    by raw ids draws each new row by (seed, id), from the same distribution: Uniform (Xavier's
    uniform form included), Constant, Normal (Xavier's normal form, MSRA's too) or
    TruncatedNormal (drawn as Paddle's large-scale tables draw it, mean + std·z with |z| <= 2)."""
    a = startup_op.attrs
    if startup_op.type == "uniform_random":
        return {"init_low": float(a["min"]), "init_high": float(a["max"])}, int(a.get("seed", 0))
    if startup_op.type == "fill_constant":
        v = float(a["value"])
        return {"init_low": v, "init_high": v}, 0
    kinds = {"gaussian_random": "normal", "truncated_gaussian_random": "truncated_normal"}
    if startup_op.type in kinds:
        return ({"init": kinds[startup_op.type], "init_mean": float(a["mean"]), "init_std": float(a["std"])},
                int(a.get("seed", 0)))
    raise ValueError(f"{layer}: a table keyed by raw ids makes each row when its id is admitted, from a draw "
                     f"on (seed, id); its param_attr's initializer must be Uniform, Normal, TruncatedNormal, "
                     f"Xavier, MSRA or Constant, not one that makes `{startup_op.type}`")


def sparse_embedding(input, size, padding_idx=None, is_test: bool = False, entry=None,
                     table_class: str = "MemorySparseTable", param_attr=None, dtype: str = "float32",
                     slot=None, table_config=None):
    """Rows of an embedding table keyed by raw 64-bit ids, made as ids are admitted and dropped
    as they go stale (Paddle 2.x's ``paddle.static.nn.sparse_embedding``).

    Ids are any int64 in 0 to 2**63 - 1: no vocabulary, no hashing into a range, no collisions.
    In a cluster the table lives only on the pservers, each holding the ids a fixed 64-bit mix
    of the id assigns it; a trainer fetches each distinct id of its batch once a step. An id not
    yet admitted reads zeros (or the padding row), and its gradient only counts sightings.

    Args:
        input: int64 ids, [N, 1] (or any shape; a trailing 1 is dropped, as ``embedding``).
        size: ``[capacity hint, D]``: only D is used; the table grows with the data.
        padding_idx: an id that reads zeros and gets no gradient; negative counts from
            ``size[0]``, as Paddle's does. None for none.
        is_test: only read: an id with no row reads zeros and makes none.
        entry: when an id gets a row: ``placegroup.distributed.CountFilterEntry(n)`` (after n
            sightings), ``ProbabilityEntry(p)`` (with probability p at each update that sees
            it), ``ShowClickEntry(show_name, click_name)`` (by the summed show/click score of
            its examples; the program's vars of those names hold each example's show and
            click, and ``minimize`` wires them into the table's gradient; without them, as in
            Paddle, a warning, and every example counts as shown once and not clicked), or
            None (at first sight).
        table_class: Paddle's name of the table's storage; rows are kept in memory either way.
        param_attr: the table's ParamAttr: its name, and a Uniform, Normal, TruncatedNormal,
            Xavier, MSRA or Constant initializer for new rows (Xavier over ``size``, as
            Paddle's default). Calls that name the same table share it (26 slots, one table):
            the first one makes it, with its entry and config; the others only look it up.
        dtype: float32 or float64.
        slot: the feature slot this table serves, kept on the parameter for the dump.
        table_config: a ``placegroup.distributed.SparseTableConfig``: ttl, min_count, decay,
            round_steps and seed (the environment may override the first four).

    Returns:
        The embeddings, [N, D].

    Raises:
        ValueError: a bad size, dtype, table_class, entry or initializer, or a config value out
            of range (naming it).
        OutOfRange: at run time, a negative id, naming the ids var.

    Example::

        entry = placegroup.distributed.CountFilterEntry(10)
        emb = placegroup.contrib.layers.sparse_embedding(
            ids, size=[1024, 64], entry=entry,
            table_config=placegroup.distributed.SparseTableConfig(ttl=10000, round_steps=1000))
    """
    layer = "sparse_embedding"
    size = [int(d) for d in size]
    if len(size) != 2 or size[1] < 1:
        raise ValueError(f"{layer}: size must be [capacity hint, dim] with dim >= 1, got {size}")
    if dtype not in ("float32", "float64"):
        raise ValueError(f"{layer}: dtype must be float32 or float64, got {dtype!r}")
    if table_class not in _TABLE_CLASSES:
        raise ValueError(f"{layer}: table_class must be one of {list(_TABLE_CLASSES)}, got {table_class!r}")
    if entry is not None and not isinstance(entry, (CountFilterEntry, ProbabilityEntry, ShowClickEntry)):
        raise ValueError(f"{layer}: entry must be a CountFilterEntry, a ProbabilityEntry, a ShowClickEntry or None, "
                         f"got {entry!r}")
    if table_config is not None and not isinstance(table_config, SparseTableConfig):
        raise ValueError(f"{layer}: table_config must be a placegroup.distributed.SparseTableConfig, "
                         f"got {table_config!r}")
    _check(input, layer, ("int64",))
    pad = -1 if padding_idx is None else int(padding_idx) if padding_idx >= 0 else size[0] + int(padding_idx)
    if pad < -1:
        raise ValueError(f"{layer}: padding_idx {padding_idx} is below -size[0] ({-size[0]})")
    helper = LayerHelper(layer)
    attr = ParamAttr.to_attr(param_attr, "param_attr")
    main_block = helper.main_program.global_block()
    if attr and attr.name and main_block.has_var(attr.name):  # a table shared by name (26 slots, one table)
        w = main_block.var(attr.name)
        if w.type != DYNAMIC_TABLE or list(w.shape) != [-1, size[1]] or w.dtype != dtype:
            raise ValueError(f"{layer}: {attr.name!r} exists as {w.type} {w.dtype}{list(w.shape)}; a table "
                             f"shared by name needs the same dim ({size[1]}) and dtype ({dtype})")
        return _table_lookup(helper, w, input, pad, is_test, dtype, TableConfig.from_json(w.attrs["table_config"]))
    w = helper.create_parameter(param_attr, [max(size[0], 1), size[1]], dtype)
    sblock = helper.startup_program.global_block()
    made = [k for k, op in enumerate(sblock.ops) if w.name in op.output_arg_names]
    init, init_seed = _table_init(sblock.ops[made[0]], layer)
    tc = table_config or SparseTableConfig()
    cfg = TableConfig(dim=size[1], dtype=dtype, seed=tc.seed if tc.seed is not None else init_seed,
                      entry=entry, **init, **tc.eviction())
    sblock.remove_op(made[0])
    sblock.insert_op(made[0], "dynamic_table", {}, {"Out": [w.name]}, {"config": cfg.to_json()}, role="init",
                     infer=False)
    for var in (w, sblock.var(w.name)):  # no height: rows come and go (a -1 dim is free)
        var.type, var.shape = DYNAMIC_TABLE, (-1, size[1])
    w.attrs.update(sparse_update=True, distributed=True, table_class=table_class,
                   capacity_hint=size[0], table_config=cfg.to_json(),
                   **({"slot": str(slot)} if slot is not None else {}))
    return _table_lookup(helper, w, input, pad, is_test, dtype, cfg)


def _table_lookup(helper, w, ids, pad: int, is_test: bool, dtype: str, cfg: TableConfig):
    out = helper.create_variable_for_type_inference(dtype)
    scores = {}
    if isinstance(cfg.entry, ShowClickEntry):  # the gradient's weights (NOTE(sighting-weights) in ops/dynamic.py)
        scores = {"scored": True, "nonclk_coeff": float(cfg.entry.nonclk_coeff),
                  "click_coeff": float(cfg.entry.click_coeff)}
    helper.append_op("dynamic_lookup", {"Ids": [ids], "W": [w]}, {"Out": [out]},
                     {"padding_idx": pad, "is_test": bool(is_test), "is_sparse": True, "ids_name": ids.name,
                      "table": w.name, **scores})
    return out
