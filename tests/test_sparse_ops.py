"""SelectedRows and the sparse kernels (placegroup/values.py, ops/sparse.py, the sparse paths of
lookup_table, sum, scale and the optimizers) against dense numpy.

* SelectedRows maths: to_dense and merged against np.add.at, empty ones, bad constructions;
* lookup_table's SelectedRows gradient (duplicates, padding, empty batches, ranges) and its
  lookup in prefetched rows; split_ids / shard_lookup / merge_selected_rows /
  shard_selected_rows against numpy, their errors and ``infer``; the whole prefetch chain
  against a dense lookup;
* sum / scale of SelectedRows;
* every optimizer: a SelectedRows gradient, non-lazy, equals the dense op on the scattered
  gradient; lazy equals a numpy reference that updates only the touched rows, over several
  steps with overlapping row sets and repeated rows.
"""
from __future__ import annotations

import numpy as np
import pytest

from placegroup.errors import ProgramError
from placegroup.ir.framework import Program
from placegroup.ops.registry import KernelContext, get_op_def
from placegroup.values import SelectedRows, is_selected_rows
from placegroup.ops.sparse import shard_rows


def run(op, ins, **attrs):
    opdef = get_op_def(op)
    ctx = KernelContext(outputs=(s.name for s in opdef.outputs))
    return opdef.kernels["cpu"](np, ins, {**opdef.attrs, **attrs}, ctx)


def sr(rows, values, height):
    return SelectedRows(np.asarray(rows, np.int64), np.asarray(values), height)


def dense_of(rows, values, height):
    out = np.zeros((height,) + np.shape(values)[1:], np.asarray(values).dtype)
    np.add.at(out, np.asarray(rows, np.int64), values)
    return out


RNG = np.random.default_rng(0)
ROWS = [4, 1, 4, 0, 7, 1, 4]  # repeats, unsorted
VALS = RNG.standard_normal((7, 3)).astype(np.float32)


# -- SelectedRows ---------------------------------------------------------------------------


@pytest.mark.parametrize("rows", [ROWS, [], [2]], ids=["repeats", "empty", "one"])
def test_selected_rows_to_dense_and_merged(rows):
    vals = VALS[: len(rows)]
    x = sr(rows, vals, 9)
    want = dense_of(rows, vals, 9)
    assert x.shape == (9, 3) and x.dtype == np.float32 and is_selected_rows(x)
    np.testing.assert_array_equal(x.to_dense(np), want)
    m = x.merged()
    assert m.rows.dtype == np.int64 and list(m.rows) == sorted(set(rows)) and m.height == 9
    np.testing.assert_allclose(m.to_dense(), want, rtol=1e-6)  # summation order may differ
    np.testing.assert_array_equal(x.rows, rows)  # merging left the original alone
    assert "height=9" in repr(x) and not is_selected_rows(want) and x.to_host() is x


@pytest.mark.parametrize("args,pattern", [
    ((np.zeros((2, 1), np.int64), np.zeros((2, 3)), 4), "rows must be 1-D"),
    ((np.zeros(2, np.int64), np.zeros((3, 3)), 4), "one row per entry"),
    ((np.zeros(0, np.int64), np.zeros((0, 3)), -1), "height -1"),
])
def test_selected_rows_rejects_bad_parts(args, pattern):
    with pytest.raises(ValueError, match=pattern):
        SelectedRows(*args)


# -- lookup_table ---------------------------------------------------------------------------

W = RNG.standard_normal((10, 3)).astype(np.float32)
IDS = np.array([[3], [1], [3], [9], [0], [3]], np.int64)


@pytest.mark.parametrize("ids", [IDS, IDS.reshape(-1), np.zeros((0, 1), np.int64)], ids=["n1", "n", "empty"])
@pytest.mark.parametrize("pad", [-1, 3])
def test_lookup_sparse_grad_is_the_dense_grad(ids, pad):
    g = RNG.standard_normal((ids.shape[0], 3)).astype(np.float32)
    ins = {"W": W, "Ids": ids, "Out@GRAD": g}
    dense = run("lookup_table_grad", ins, padding_idx=pad)["W@GRAD"]
    sparse = run("lookup_table_grad", ins, padding_idx=pad, is_sparse=True)["W@GRAD"]
    keep = ids.reshape(-1) != pad
    assert is_selected_rows(sparse) and sparse.height == 10
    np.testing.assert_array_equal(sparse.rows, ids.reshape(-1)[keep])  # batch order, repeats kept
    np.testing.assert_array_equal(sparse.values, g[keep])
    np.testing.assert_array_equal(sparse.to_dense(), dense)
    if pad != -1:
        assert not dense[pad].any()


def test_lookup_sparse_grad_out_of_range_names_id_and_table():
    with pytest.raises(IndexError, match="id 10 is out of range for a table of 10 rows"):
        run("lookup_table_grad", {"W": W, "Ids": np.array([[1], [10]]), "Out@GRAD": np.ones((2, 3))},
            is_sparse=True)


def test_lookup_in_prefetched_rows_equals_dense_lookup():
    pre = sr([9, 0, 3, 1], W[[9, 0, 3, 1]], 10)  # unsorted, as any producer may give them
    for pad in (-1, 3):
        want = run("lookup_table", {"W": W, "Ids": IDS}, padding_idx=pad)["Out"]
        np.testing.assert_array_equal(run("lookup_table", {"W": pre, "Ids": IDS}, padding_idx=pad)["Out"], want)
    # the padding id needs no prefetched row; nothing prefetched and all padding reads zeros
    only = sr([1], W[[1]], 10)
    out = run("lookup_table", {"W": only, "Ids": np.array([[1], [5]])}, padding_idx=5)["Out"]
    np.testing.assert_array_equal(out, [W[1], np.zeros(3)])
    none = sr([], np.zeros((0, 3), np.float32), 10)
    assert run("lookup_table", {"W": none, "Ids": np.array([[5]])}, padding_idx=5)["Out"].shape == (1, 3)
    assert run("lookup_table", {"W": none, "Ids": np.zeros((0, 1), np.int64)})["Out"].shape == (0, 3)


@pytest.mark.parametrize("ids,pattern", [
    (np.array([[1], [4]]), r"id 4 is not among the 2 rows prefetched .* table of 10 rows"),
    (np.array([[12]]), "id 12 is out of range for a table of 10 rows"),
])
def test_lookup_in_prefetched_rows_errors(ids, pattern):
    with pytest.raises(IndexError, match=pattern):
        run("lookup_table", {"W": sr([1, 9], W[[1, 9]], 10), "Ids": ids})


# -- split_ids, shard_lookup, merge_selected_rows, shard_selected_rows ----------------------


def test_shard_rows_tile_the_table():
    for height in (1, 7, 10, 11):
        for n in (1, 2, 3, 4, 12):
            counts = [shard_rows(height, n, k) for k in range(n)]
            assert counts == [len(range(k, height, n)) for k in range(n)]


@pytest.mark.parametrize("ids", [np.array([[5], [2], [5], [0], [9], [11]]), np.array([7, 7, 3]),
                                 np.zeros((0, 1), np.int64)], ids=["n1", "n", "empty"])
def test_split_ids_sorted_unique_per_shard(ids):
    outs = run("split_ids", {"Ids": [ids]}, num_shards=3)["Out"]
    assert len(outs) == 3
    for k, o in enumerate(outs):
        want = sorted({int(i) for i in ids.reshape(-1) if i % 3 == k})
        assert o.dtype == np.int64 and o.shape == (len(want), 1) and o.reshape(-1).tolist() == want


def test_split_ids_rejects_ids_outside_the_table():
    with pytest.raises(IndexError, match="id -2 is out of range for table"):
        run("split_ids", {"Ids": [np.array([[1], [-2]])]}, num_shards=2)
    with pytest.raises(IndexError, match="id 10 is out of range for table 'emb' of 10 rows"):
        run("split_ids", {"Ids": [np.array([[1], [10]])]}, num_shards=2, height=10, table="emb")


TABLE = RNG.standard_normal((11, 4)).astype(np.float32)  # 11 rows over 3 shards: 4, 4, 3


def test_shard_lookup_reads_the_shard_rows():
    for k in range(3):
        ids = np.arange(k, 11, 3)[::-1].reshape(-1, 1)
        out = run("shard_lookup", {"Ids": ids, "W": TABLE[k::3]}, num_shards=3, shard_index=k, height=11)["Out"]
        assert out.height == 11 and out.shape == (11, 4)
        np.testing.assert_array_equal(out.rows, ids.reshape(-1))
        np.testing.assert_array_equal(out.values, TABLE[ids.reshape(-1)])
    empty = run("shard_lookup", {"Ids": np.zeros((0, 1), np.int64), "W": TABLE[1::3]},
                num_shards=3, shard_index=1, height=11)["Out"]
    assert empty.values.shape == (0, 4)


@pytest.mark.parametrize("ids,pattern", [
    ([[1], [5]], r"id 5 belongs to shard 2, but this is shard 1 of 3 of a table of 11 rows"),
    ([[13]], r"id 13 is out of range for a table of 11 rows, but this is shard 1 of 3"),
    ([[-2]], r"id -2 is out of range for a table of 11 rows"),
])
def test_shard_lookup_errors_name_id_shard_and_height(ids, pattern):
    with pytest.raises(IndexError, match=pattern):
        run("shard_lookup", {"Ids": np.array(ids), "W": TABLE[1::3]}, num_shards=3, shard_index=1, height=11)


def test_merge_selected_rows_sums_across_inputs():
    a, b = sr(ROWS[:4], VALS[:4], 9), sr(ROWS[3:], VALS[3:], 9)
    out = run("merge_selected_rows", {"X": [a, b]})["Out"]
    assert list(out.rows) == sorted(set(ROWS))
    np.testing.assert_allclose(out.values, dense_of(ROWS[:4] + ROWS[3:], np.r_[VALS[:4], VALS[3:]], 9)[out.rows])
    one = run("merge_selected_rows", {"X": [sr(ROWS, VALS, 9)]})["Out"]
    np.testing.assert_allclose(one.to_dense(), dense_of(ROWS, VALS, 9), rtol=1e-6)  # summation order
    with pytest.raises(ValueError, match=r"X\[1\] is a SelectedRows of shape \[8, 3\]"):
        run("merge_selected_rows", {"X": [a, sr([1], VALS[:1], 8)]})
    with pytest.raises(TypeError, match=r"X\[0\] must be a SelectedRows, got a dense ndarray"):
        run("merge_selected_rows", {"X": [VALS]})


def test_shard_selected_rows_gives_local_rows_that_map_back():
    g = sr([10, 0, 4, 10, 5, 9], RNG.standard_normal((6, 4)).astype(np.float32), 11)
    outs = run("shard_selected_rows", {"X": g}, num_shards=3, height=11)["Out"]
    back = np.zeros((11, 4), np.float32)
    for k, o in enumerate(outs):
        assert o.height == shard_rows(11, 3, k) and (o.rows < o.height).all()
        back[k::3] += o.to_dense()  # local row r of shard k is global row r*3 + k
    np.testing.assert_array_equal(back, g.to_dense())
    with pytest.raises(ValueError, match="height 11, but the table has height 12"):
        run("shard_selected_rows", {"X": g}, num_shards=3, height=12)


def test_prefetch_chain_equals_dense_lookup():
    n, ids = 3, np.array([[10], [2], [7], [2], [0], [5]])
    parts = run("split_ids", {"Ids": [ids]}, num_shards=n)["Out"]
    got = [run("shard_lookup", {"Ids": p, "W": TABLE[k::n]}, num_shards=n, shard_index=k, height=11)["Out"]
           for k, p in enumerate(parts)]
    pre = run("merge_selected_rows", {"X": got})["Out"]
    out = run("lookup_table", {"W": pre, "Ids": ids})["Out"]
    np.testing.assert_array_equal(out, run("lookup_table", {"W": TABLE, "Ids": ids})["Out"])


def _build(op, ins_meta, attrs, outs):
    block = Program().global_block()
    names = {}
    for slot, metas in ins_meta.items():
        names[slot] = [block.create_var(f"{slot}{i}", shape=s, dtype=d, type=t).name
                       for i, (s, d, t) in enumerate(metas)]
    out_names = {slot: [f"o_{slot}{i}" for i in range(k)] for slot, k in outs.items()}
    block.append_op(op, names, out_names, attrs)
    return {slot: [block.var(n).shape for n in ns] for slot, ns in out_names.items()}


def test_infer_shapes():
    ids = [((-1, 1), "int64", "lod_tensor")]
    assert _build("split_ids", {"Ids": ids}, {"num_shards": 2}, {"Out": 2}) == {"Out": [(-1, 1)] * 2}
    got = _build("shard_lookup", {"Ids": ids, "W": [((4, 8), "float32", "lod_tensor")]},
                 {"num_shards": 3, "shard_index": 1, "height": 11}, {"Out": 1})
    assert got == {"Out": [(11, 8)]}
    sr_meta = ((11, 8), "float32", "selected_rows")
    assert _build("merge_selected_rows", {"X": [sr_meta] * 2}, {}, {"Out": 1}) == {"Out": [(11, 8)]}
    got = _build("shard_selected_rows", {"X": [sr_meta]}, {"num_shards": 3, "height": 11}, {"Out": 3})
    assert got == {"Out": [(4, 8), (4, 8), (3, 8)]}


@pytest.mark.parametrize("op,ins,attrs,outs,pattern", [
    ("split_ids", {"Ids": [((-1, 1), "int64", "lod_tensor")]}, {"num_shards": 2}, {"Out": 3}, "makes 2"),
    ("split_ids", {"Ids": [((-1, 1), "float32", "lod_tensor")]}, {"num_shards": 2}, {"Out": 2}, "must be int64"),
    ("shard_lookup", {"Ids": [((-1, 1), "int64", "lod_tensor")], "W": [((5, 8), "float32", "lod_tensor")]},
     {"num_shards": 3, "shard_index": 1, "height": 11}, {"Out": 1}, "has 4 rows, but W is"),
    ("shard_lookup", {"Ids": [((-1, 1), "int64", "lod_tensor")], "W": [((4, 8), "float32", "lod_tensor")]},
     {"num_shards": 3, "shard_index": 3, "height": 11}, {"Out": 1}, "shard_index 3 must be in 0..2"),
    ("shard_selected_rows", {"X": [((10, 8), "float32", "selected_rows")]}, {"num_shards": 2, "height": 11},
     {"Out": 2}, "whole table of height 11"),
])
def test_infer_errors(op, ins, attrs, outs, pattern):
    with pytest.raises(ProgramError, match=pattern):
        _build(op, ins, attrs, outs)


# -- sum and scale --------------------------------------------------------------------------


def test_sum_and_scale_of_selected_rows():
    a, b = sr(ROWS[:3], VALS[:3], 9), sr(ROWS[3:], VALS[3:], 9)
    s = run("sum", {"X": [a, b]})["Out"]
    assert is_selected_rows(s) and len(s.rows) == 7
    np.testing.assert_allclose(s.to_dense(), dense_of(ROWS, VALS, 9), rtol=1e-6)
    d = RNG.standard_normal((9, 3)).astype(np.float32)
    mixed = run("sum", {"X": [a, d, b]})["Out"]
    assert isinstance(mixed, np.ndarray) and mixed.dtype == np.float32
    np.testing.assert_allclose(mixed, d + dense_of(ROWS, VALS, 9), rtol=1e-6)
    scaled = run("scale", {"X": a}, scale=0.5)["Out"]
    assert is_selected_rows(scaled) and scaled.dtype == np.float32
    np.testing.assert_array_equal(scaled.to_dense(), 0.5 * a.to_dense())
    with pytest.raises(ValueError, match="bias=1.0 would touch every row"):
        run("scale", {"X": a}, scale=0.5, bias=1.0)


# -- optimizers -----------------------------------------------------------------------------

H = 10
STEP_ROWS = [[1, 4, 4, 7], [4, 2, 2], [7, 1, 9, 9, 9], [], [0, 4]]  # overlapping, repeated, empty
OPT_CASES = [  # op, attrs, state slot -> initial fill (None: random like the param)
    ("sgd", {}, {}),
    ("momentum", {"mu": 0.9}, {"Velocity": None}),
    ("momentum", {"mu": 0.8, "use_nesterov": True}, {"Velocity": None}),
    ("adam", {}, {"Moment1": None, "Moment2": 0.5, "Beta1Pow": 0.9, "Beta2Pow": 0.999}),
    ("adagrad", {}, {"Moment": 0.25}),
]
OPT_IDS = ["sgd", "momentum", "nesterov", "adam", "adagrad"]


def _opt_inputs(state, dtype):
    rng = np.random.default_rng(3)
    ins = {"Param": rng.standard_normal((H, 3)), "LearningRate": np.array([0.05])}
    for slot, fill in state.items():
        ins[slot] = (np.full((1,), fill) if slot.endswith("Pow") else
                     np.full((H, 3), fill) if fill is not None else rng.standard_normal((H, 3)))
    return {k: v.astype(dtype) for k, v in ins.items()}


def _grads(dtype):
    rng = np.random.default_rng(4)
    return [sr(r, rng.standard_normal((len(r), 3)).astype(dtype), H) for r in STEP_ROWS]


def _ref_rows(op, a, p, g, st):
    """The optimizer's dense rule on some rows (float64); returns (p, state) for those rows."""
    lr, mu = 0.05, a.get("mu", 0.9)
    if op == "sgd":
        return p - lr * g, {}
    if op == "momentum":
        v = mu * st["Velocity"] + g
        return p - lr * (g + mu * v if a.get("use_nesterov") else v), {"Velocity": v}
    if op == "adagrad":
        m = st["Moment"] + g * g
        return p - lr * g / (np.sqrt(m) + 1e-6), {"Moment": m}
    m1 = 0.9 * st["Moment1"] + 0.1 * g
    m2 = 0.999 * st["Moment2"] + 0.001 * g * g
    b1p, b2p = st["Beta1Pow"] * 0.9, st["Beta2Pow"] * 0.999  # the next step's (NOTE(sparse-adam-powers))
    p = p - 0.05 * np.sqrt(1 - b2p) / (1 - b1p) * m1 / (np.sqrt(m2) + 1e-8)
    return p, {"Moment1": m1, "Moment2": m2}


def _step(op, ins, g, attrs, lazy):
    opdef = get_op_def(op)
    extra = {"lazy_mode": lazy} if "lazy_mode" in opdef.attrs else {}
    before = {k: v.copy() for k, v in ins.items()}
    out = run(op, {**ins, "Grad": g}, **attrs, **extra)
    for k, v in ins.items():
        np.testing.assert_array_equal(v, before[k], err_msg=f"{op} wrote into its input {k}")
    return {opdef.inplace[o]: v for o, v in out.items()}


@pytest.mark.parametrize("op,attrs,state", OPT_CASES, ids=OPT_IDS)
def test_sparse_nonlazy_equals_dense_optimizer(op, attrs, state):
    """Adam's bias correction is a step ahead for a SelectedRows Grad, as Fluid's: it equals
    the dense update from beta powers one step further (NOTE(sparse-adam-powers))."""
    sparse = dense = _opt_inputs(state, np.float32)
    ahead = {"Beta1Pow": np.float32(0.9), "Beta2Pow": np.float32(0.999)} if op == "adam" else {}
    dense = {**dense, **{k: dense[k] * b for k, b in ahead.items()}}
    for g in _grads(np.float32):
        sparse = {**sparse, **_step(op, sparse, g, attrs, lazy=False)}
        dense = {**dense, **_step(op, dense, g.to_dense(), attrs, lazy=False)}
        for k in sparse:
            assert sparse[k].dtype == np.float32
            want = dense[k] / ahead[k] if k in ahead else dense[k]
            np.testing.assert_allclose(sparse[k], want, rtol=1e-6, atol=0, err_msg=k)


@pytest.mark.parametrize("inplace", [False, True], ids=["copy", "inplace"])
def test_sparse_nonlazy_adam_is_the_dense_rule_bit_for_bit(inplace):
    """NOTE(adam-blocked): the blocked pass over a table of several blocks (and a ragged last
    one) gives the dense rule's values over the scattered gradient exactly, copying or in place."""
    rng = np.random.default_rng(7)
    height, width = 9001, 7
    p, m1, m2 = (rng.standard_normal((height, width)).astype(np.float32) for _ in range(3))
    m2 = np.abs(m2)
    ins = {"Param": p, "Moment1": m1, "Moment2": m2, "LearningRate": np.array([0.01], np.float32),
           "Beta1Pow": np.array([0.81], np.float32), "Beta2Pow": np.array([0.998], np.float32)}
    rows = rng.integers(0, height, 500)
    g = sr(rows, rng.standard_normal((500, width)).astype(np.float32), height)
    opdef = get_op_def("adam")
    ctx = KernelContext(outputs=(s.name for s in opdef.outputs))
    ctx.inplace = inplace
    mine = opdef.kernels["cpu"](np, {k: v.copy() for k, v in ins.items()} | {"Grad": g}, dict(opdef.attrs), ctx)
    b1, b2, eps = np.float32(0.9), np.float32(0.999), np.float32(1e-8)
    lr_t = np.float32(0.01) * (np.sqrt(np.float32(1) - np.float32(0.998) * b2) / (np.float32(1) - np.float32(0.81) * b1))
    gd = g.to_dense()
    w1 = b1 * m1 + (1 - b1) * gd
    w2 = b2 * m2 + (1 - b2) * gd * gd
    wp = p - lr_t * (w1 / (np.sqrt(w2) + eps))
    for slot, want in (("ParamOut", wp), ("Moment1Out", w1), ("Moment2Out", w2)):
        np.testing.assert_array_equal(mine[slot], want, err_msg=slot)


@pytest.mark.parametrize("op,attrs,state", OPT_CASES, ids=OPT_IDS)
def test_sparse_lazy_updates_only_touched_rows(op, attrs, state):
    lazy = eager = _opt_inputs(state, np.float64)
    ref = {k: v.copy() for k, v in lazy.items()}
    for g in _grads(np.float64):
        m = g.merged()
        rows = m.rows
        st = {k: (v if k.endswith("Pow") else v[rows]) for k, v in ref.items() if k in state}
        p_rows, new = _ref_rows(op, attrs, ref["Param"][rows], m.values, st)
        ref["Param"][rows] = p_rows
        for k, v in new.items():
            ref[k][rows] = v
        for k in ("Beta1Pow", "Beta2Pow"):
            if k in ref:
                ref[k] = ref[k] * (0.9 if k == "Beta1Pow" else 0.999)
        prev = lazy
        lazy = {**lazy, **_step(op, lazy, g, attrs, lazy=True)}
        eager = {**eager, **_step(op, eager, g, attrs, lazy=False)}
        untouched = np.setdiff1d(np.arange(H), rows)
        for k in lazy:
            np.testing.assert_allclose(lazy[k], ref[k], rtol=1e-6, atol=1e-12, err_msg=k)
            if not k.endswith("Pow") and k != "LearningRate":
                np.testing.assert_array_equal(lazy[k][untouched], prev[k][untouched], err_msg=k)
    moved = not all(np.array_equal(lazy[k], eager[k]) for k in lazy)
    assert moved == (op in ("momentum", "adam")), f"{op}: lazy and non-lazy should " + (
        "differ in the untouched rows" if op in ("momentum", "adam") else "coincide")


@pytest.mark.parametrize("op,attrs,state", OPT_CASES, ids=OPT_IDS)
def test_sparse_grad_must_fit_the_param(op, attrs, state):
    ins = _opt_inputs(state, np.float32)
    with pytest.raises(ValueError, match=r"Grad is a SelectedRows of shape \[8, 3\] but Param is \[10, 3\]"):
        run(op, {**ins, "Grad": sr([1], np.ones((1, 3), np.float32), 8)}, **attrs)
    with pytest.raises(IndexError, match="Grad has row 12, outside Param's 10 rows"):
        run(op, {**ins, "Grad": sr([1, 12], np.ones((2, 3), np.float32), H)}, **attrs)


def test_split_selected_rows_cuts_blocks_of_local_rows():
    g = sr([7, 0, 4, 7, 5], RNG.standard_normal((5, 3)).astype(np.float32), 9)
    outs = run("split_selected_rows", {"X": g}, sections=[5, 4])["Out"]
    assert [o.height for o in outs] == [5, 4]
    np.testing.assert_array_equal(np.concatenate([outs[0].to_dense(), outs[1].to_dense()]), g.to_dense())
    assert outs[1].rows.tolist() == [2, 2, 0]  # rows 7, 7, 5, made local to the second block
    with pytest.raises(ValueError, match="do not add up to X's height 9"):
        run("split_selected_rows", {"X": g}, sections=[5, 5])


@pytest.mark.parametrize("height", [50, 1 << 40], ids=["packed", "argsort"])
def test_merged_sums_repeats_in_order_of_appearance(height):
    """NOTE(packed-sort): the packed-key sort gives the stable order, and a height too tall to
    pack falls back to the stable argsort; either way each row's entries add up in the order
    they came, bit for bit."""
    rng = np.random.default_rng(11)
    rows = rng.integers(0, 50, 400) * (height // 50)
    vals = rng.standard_normal((400, 3)).astype(np.float32)
    m = sr(rows, vals, height).merged(np)
    assert m.rows.tolist() == sorted(set(rows.tolist()))
    for r, got in zip(m.rows.tolist(), m.values):
        want = np.zeros(3, np.float32)
        for v in vals[rows == r]:
            want = want + v
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("height", [1000, 1 << 40], ids=["dense-index", "sorted-index"])
@pytest.mark.parametrize("order", ["sorted", "shuffled"])
def test_positions_find_each_id_among_the_rows(height, order):
    """NOTE(row-index): positions() finds every id among the rows, whichever index the height
    picks, sorted rows or not, and says which ids are not there; asked twice, the same."""
    rng = np.random.default_rng(12)
    rows = np.unique(rng.integers(0, height, 300))
    if order == "shuffled":
        rows = rng.permutation(rows)
    s = sr(rows, rng.standard_normal((rows.size, 2)).astype(np.float32), height)
    absent = np.setdiff1d(rng.integers(0, height, 50), rows)
    ids = np.concatenate([rng.choice(rows, 200), absent])
    for _ in range(2):
        pos, found = s.positions(ids)
        assert found.tolist() == [True] * 200 + [False] * absent.size
        np.testing.assert_array_equal(s.rows[pos[:200]], ids[:200])
    assert s.positions(np.zeros(0, np.int64))[0].shape == (0,)


def test_lookup_of_an_id_not_prefetched_names_it():
    w = sr([3, 9], np.ones((2, 4), np.float32), 20)
    with pytest.raises(IndexError, match="id 5 is not among the 2 rows prefetched"):
        run("lookup_table", {"W": w, "Ids": np.array([[3], [5]], np.int64)})
    out = run("lookup_table", {"W": w, "Ids": np.array([[9], [4]], np.int64)}, padding_idx=4)["Out"]
    np.testing.assert_array_equal(out, [[1] * 4, [0] * 4])


def test_split_ids_by_blocks_takes_every_ids_var():
    """NOTE(block-prefetch): with ``sections`` each part is the distinct ids of one block of
    consecutive rows, over all the Ids vars together (a CTR model's slots share one table)."""
    a, b = np.array([[5], [2], [5], [0]]), np.array([[9], [2], [3]])
    outs = run("split_ids", {"Ids": [a, b]}, num_shards=3, sections=[3, 3, 4], height=10)["Out"]
    assert [o.reshape(-1).tolist() for o in outs] == [[0, 2], [3, 5], [9]]
    empty = run("split_ids", {"Ids": [np.zeros((0, 1), np.int64)]}, num_shards=2, sections=[5, 5])["Out"]
    assert [o.shape for o in empty] == [(0, 1), (0, 1)]


def test_shard_lookup_of_a_block_reads_its_rows_and_refuses_others():
    block = np.arange(12, dtype=np.float32).reshape(4, 3)  # rows 6..9 of a table of 10
    out = run("shard_lookup", {"Ids": np.array([[7], [9]]), "W": block}, num_shards=2, shard_index=1,
              height=10, block_start=6)["Out"]
    assert out.rows.tolist() == [7, 9] and out.height == 10
    np.testing.assert_array_equal(out.values, block[[1, 3]])
    with pytest.raises(IndexError, match=r"id 5 is not in this block of a table of 10 rows \(it holds rows 6..9\)"):
        run("shard_lookup", {"Ids": np.array([[5]]), "W": block}, num_shards=2, shard_index=1, height=10,
            block_start=6)
