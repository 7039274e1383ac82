"""DynamicTable (placegroup/util/dynamic_table.py): admission, the per-row optimizers against
numpy references written from ops/optimizer.py's rules, eviction, row reuse, and the
split-and-reshard bit-equality of NOTE(dynamic-table-determinism)."""
import numpy as np
import pytest

from placegroup.util.dynamic_table import (CountFilterEntry, DynamicTable, ProbabilityEntry,
                                           ShowClickEntry, TableConfig, shard)
from placegroup.util.key_index import mix64

TOP = 2 ** 63 - 1


def test_zeros_before_admission_and_count_filter():
    t = DynamicTable(TableConfig(dim=3, entry=CountFilterEntry(3)))
    assert not t.pull([7, 7]).any() and len(t) == 0  # a pull counts nothing
    t.push([7, 7], np.ones((2, 3)))  # two sightings: a candidate, its gradient only counts
    assert len(t) == 0 and not t.pull([7]).any()
    t.push([7, 8], np.ones((2, 3)))  # the third: admitted, with its initial value
    v = t.pull([7, 8])
    assert len(t) == 1 and v[0].any() and not v[1].any()
    assert np.array_equal(v[0], DynamicTable(TableConfig(dim=3)).pull([7])[0])  # untouched by the grad
    assert t.state()["count"].tolist() == [3.0] and t.admitted == 1


def test_no_entry_admits_at_first_pull_unless_told_not_to():
    t = DynamicTable(TableConfig(dim=2))
    assert not t.pull([4], create=False).any() and len(t) == 0  # inference reads zeros
    assert t.pull([4]).any() and len(t) == 1
    t.push([5], np.ones((1, 2)))  # never pulled: admitted by the update, its gradient only counts
    assert len(t) == 2 and np.array_equal(t.pull([5]), DynamicTable(TableConfig(dim=2)).pull([5]))


def test_probability_entry_is_deterministic_and_per_update():
    cfg = TableConfig(dim=2, seed=11, entry=ProbabilityEntry(0.3))
    a, b = DynamicTable(cfg), DynamicTable(cfg)
    ids = np.arange(2000)
    admitted = []
    for _ in range(3):
        a.push(ids, np.zeros((ids.size, 2)))
        b.push(ids[::-1], np.zeros((ids.size, 2)))
        assert np.array_equal(a.pull(ids), b.pull(ids))
        admitted.append(len(a))
    # about 1 - 0.7**k of the ids after k updates that saw them
    assert [round(n / 2000, 1) for n in admitted] == [0.3, 0.5, 0.7]


def test_initial_values_depend_only_on_seed_and_id():
    cfg = TableConfig(dim=4, seed=5, init_low=-1.0, init_high=2.0)
    a, b = DynamicTable(cfg), DynamicTable(cfg)
    ids = np.array([0, 1, 99, TOP, 2 ** 40])
    va = a.pull(ids)
    b.pull([3, 4])
    vb = b.pull(ids[::-1])[::-1]
    assert np.array_equal(va, vb) and va.min() >= -1 and va.max() < 2
    assert not np.array_equal(va, DynamicTable(TableConfig(dim=4, seed=6)).pull(ids))


def _ref_adagrad(p, m, g, lr, eps):
    m = m + g * g
    return p - lr * g / (np.sqrt(m) + eps), m


def _ref_adam(p, m1, m2, b1p, b2p, g, lr, b1, b2, eps):
    b1p, b2p = b1p * b1, b2p * b2  # the powers after this update (NOTE(sparse-adam-powers))
    lr_t = lr * (np.sqrt(1 - b2p) / (1 - b1p))
    m1 = b1 * m1 + (1 - b1) * g
    m2 = b2 * m2 + (1 - b2) * g * g
    return p - lr_t * (m1 / (np.sqrt(m2) + eps)), m1, m2, b1p, b2p


@pytest.mark.parametrize("init, spread", [("normal", 1.0), ("truncated_normal", 0.8796)])
def test_normal_initial_rows_are_drawn_per_id(init, spread):
    """Normal and TruncatedNormal rows: a function of (seed, id), with the right moments; the
    truncated ones within two std of the mean (whose std is 0.88 of the untruncated one)."""
    cfg = TableConfig(dim=8, seed=3, init=init, init_mean=0.5, init_std=2.0)
    ids = np.arange(20000) * 7919
    rows = DynamicTable(cfg).pull(ids)
    assert rows.dtype == np.float32
    assert abs(rows.mean() - 0.5) < 0.03 and abs(rows.std() - 2.0 * spread) < 0.03
    if init == "truncated_normal":
        assert np.abs(rows - 0.5).max() <= 4.0 + 1e-6
    np.testing.assert_array_equal(DynamicTable(cfg).pull(ids[::-1]), rows[::-1])  # per id, any order
    with pytest.raises(ValueError, match="init_std"):
        TableConfig(dim=2, init="normal", init_std=-1.0)


@pytest.mark.parametrize("opt", ["sgd", "adagrad", "adam"])
def test_optimizers_against_per_row_references(opt):
    cfg = TableConfig(dim=3, optimizer=opt, lr=0.1, initial_accumulator=0.5)
    t = DynamicTable(cfg)
    f = np.float32
    rng = np.random.default_rng(0)
    ids = np.arange(4)
    ref = {i: dict(p=t.pull([i])[0].copy(), m=np.full(3, f(0.5)), m1=np.zeros(3, f), m2=np.zeros(3, f),
                   b1p=f(0.9), b2p=f(0.999), n=0) for i in ids}
    for step in range(1, 8):
        batch = rng.choice(ids, size=6)[: 2 + step % 4]  # uneven updates, repeats
        g = rng.normal(size=(batch.size, 3)).astype(f)
        t.push(batch, g)
        for i in np.unique(batch):
            r = ref[i]
            if opt == "sgd":
                for gi in g[batch == i]:  # each entry in turn, as the sgd kernel
                    r["p"] = r["p"] + -f(0.1) * gi
                continue
            gs = np.zeros(3, f)
            for gi in g[batch == i]:
                gs = gs + gi
            if opt == "adagrad":
                r["p"], r["m"] = _ref_adagrad(r["p"], r["m"], gs, f(0.1), f(1e-6))
            else:
                r["p"], r["m1"], r["m2"], r["b1p"], r["b2p"] = _ref_adam(
                    r["p"], r["m1"], r["m2"], r["b1p"], r["b2p"], gs, f(0.1), f(0.9), f(0.999), f(1e-8))
            r["n"] += 1
    got = t.pull(ids)
    for i in ids:
        assert np.array_equal(got[i], ref[i]["p"]), (opt, i)
    if opt == "adam":
        st = t.state()
        counts = {ref[i]["n"] for i in ids}
        assert len(counts) > 1  # rows updated an uneven number of times
        assert np.array_equal(st["beta1_pow"], [ref[i]["b1p"] for i in st["keys"]])


def test_ttl_eviction_and_row_reuse():
    t = DynamicTable(TableConfig(dim=2, ttl=2, entry=CountFilterEntry(2), round_steps=10 ** 6))
    t.push([1, 2, 3, 1, 2, 3, 9], np.ones((7, 2)))  # step 1: 1..3 seen twice, admitted; 9 a candidate
    t.push([1], np.ones((1, 2)))                    # step 2
    assert t.end_round().tolist() == []
    t.push([2], np.ones((1, 2)))                    # step 3
    assert t.end_round().tolist() == [3]  # last seen at step 1; candidate 9 too
    t.push(np.zeros(0, np.int64), np.zeros((0, 2)))  # step 4
    assert t.end_round().tolist() == [1] and t.evicted == 2
    before = t._a["values"].shape[0]
    t.push([50, 51, 50, 51], np.ones((4, 2)))
    assert sorted(t._index.lookup([50, 51]).tolist()) == [0, 2]  # the freed rows of 1 and 3
    assert t._a["values"].shape[0] == before  # no growth
    t.push([9], np.ones((1, 2)))
    assert not t.pull([9]).any()  # its first sighting was forgotten


def test_rounds_end_by_themselves():
    t = DynamicTable(TableConfig(dim=1, ttl=1, round_steps=3))
    t.push([1], np.ones((1, 1)))
    t.push([2], np.ones((1, 1)))
    assert len(t) == 2
    t.push([2], np.ones((1, 1)))  # step 3 ends a round: 1 (last seen at step 1) goes
    assert t.state()["keys"].tolist() == [2]


def test_decayed_count_eviction():
    t = DynamicTable(TableConfig(dim=1, min_count=1.5, decay=0.5, round_steps=10 ** 6))
    t.push([1, 1, 1, 1, 2], np.zeros((5, 1)))
    t.push([1, 2], np.zeros((2, 1)))  # admitted at step 1 with 4 and 1 sightings, then 5 and 2
    assert t.state()["count"].tolist() == [5.0, 2.0]
    assert t.end_round().tolist() == []  # then halved: 2.5 and 1
    assert t.end_round().tolist() == [2]
    assert t.state()["count"].tolist() == [1.25]
    assert t.end_round().tolist() == [1]


def test_show_click_scores_admit_count_and_evict():
    """A ShowClickEntry table counts each sighting by its weight (the example's show/click
    score): admission at the threshold, rows' counts summed and decayed, eviction below
    min_count; the same calls with their weights give the same table in any order of ids."""
    entry = ShowClickEntry("show", "click", threshold=1.0)
    t = DynamicTable(TableConfig(dim=2, entry=entry, min_count=0.5, decay=0.5, round_steps=10 ** 6))
    t.push([1, 2, 1], np.ones((3, 2)), weights=[0.1, 1.0, 0.1])  # 1: 0.2 (a candidate), 2: 1.0, admitted
    assert len(t) == 1 and t.state()["keys"].tolist() == [2] and t.state()["count"].tolist() == [1.0]
    assert np.isclose(t.state()["candidate_count"][0], 0.2)
    t.push([1, 2], np.ones((2, 2)), weights=[0.9, 0.1])  # 1 reaches 1.1: admitted; 2 counts 1.1
    assert sorted(t.state()["keys"].tolist()) == [1, 2]
    np.testing.assert_allclose(t.state()["count"], [1.1, 1.1], rtol=1e-6)
    t.push([2], np.ones((1, 2)), weights=[0.0])  # a sighting of score 0: counts nothing
    assert t.end_round().tolist() == []  # 1.1 and 1.1 stay, then halve to 0.55
    t.push([1], np.ones((1, 2)), weights=[0.3])  # 1: 0.85; 2 stays at 0.55
    assert t.end_round().tolist() == []  # then 0.425 and 0.275
    assert t.end_round().tolist() == [1, 2]
    # order: the per-id sums are in entry order, so a permuted batch with its weights is the same
    a, b = (DynamicTable(TableConfig(dim=2, entry=entry)) for _ in range(2))
    ids, w = np.array([5, 6, 5, 7, 6, 5]), np.array([0.1, 0.7, 0.4, 1.0, 0.3, 0.5], np.float32)
    a.push(ids, np.ones((6, 2)), weights=w)
    perm = np.array([1, 3, 0, 4, 2, 5])  # each id's own entries keep their order
    b.push(ids[perm], np.ones((6, 2)), weights=w[perm])
    assert np.array_equal(a.state()["count"][np.argsort(a.state()["keys"])],
                          b.state()["count"][np.argsort(b.state()["keys"])])


def _calls(rng, n_calls):
    for step in range(n_calls):
        ids = rng.integers(0, 60, size=25)
        ids[:3] = [TOP, 2 ** 40 + step % 3, 0]
        yield step, ids, rng.normal(size=(25, 4)).astype(np.float32)


def _apply(tables, n, step, ids, g):
    for k, t in enumerate(tables):
        mine = mix64(ids) % np.uint64(n) == np.uint64(k)
        t.pull(ids[mine])
        t.push(ids[mine], g[mine], lr=0.05 / (1 + step % 3))


def test_split_and_reshard_is_bit_equal():
    cfg = TableConfig(dim=4, seed=3, optimizer="adam", lr=0.05, entry=CountFilterEntry(2), ttl=4,
                      min_count=0.8, decay=0.9, round_steps=2)
    one, two = DynamicTable(cfg), [DynamicTable(cfg) for _ in range(2)]
    calls = list(_calls(np.random.default_rng(1), 24))
    for step, ids, g in calls[:12]:
        _apply([one], 1, step, ids, g)
        _apply(two, 2, step, ids, g)
    states = [t.state() for t in two]
    three = [DynamicTable.from_state(shard(states, 3, k)) for k in range(3)]
    for step, ids, g in calls[12:]:
        _apply([one], 1, step, ids, g)
        _apply(three, 3, step, ids, g)
    full = one.state()
    parts = shard([t.state() for t in three], 1, 0)
    assert len(full["keys"]) > 10 and len(full["candidate_keys"]) > 0
    for cand in ("", "candidate_"):
        o, p = np.argsort(full[cand + "keys"]), np.argsort(parts[cand + "keys"])
        for name in full:
            if name.startswith("candidate_") == bool(cand) and name not in ("step", "config"):
                assert np.array_equal(full[name][o], parts[name][p]), name


def test_state_round_trip_and_memory():
    t = DynamicTable(TableConfig(dim=16, optimizer="adagrad"))
    t.pull(np.arange(5000) * 7919)
    u = DynamicTable.from_state(t.state())
    assert all(np.array_equal(a, b) for a, b in zip(t.state().values(), u.state().values()))
    row = 16 * 4 * 2  # values + moment
    per_row = t.nbytes / len(t)
    # rows grow by 1.25x, the index's slots (load >= 0.5) and counters (8 bytes) are the rest
    assert row + 8 < per_row <= 1.25 * (row + 8) + 4 / 0.5 + 8 * 1.25 + 1
    ix = t._index  # index and counters: at most 24 bytes per live id with the row arrays full
    assert ix.nbytes - ix._row_key.nbytes + 8 * len(t) + 8 * len(t) <= 24 * len(t)


@pytest.mark.parametrize("kwargs, match", [
    (dict(dim=0), "dim"), (dict(dim=2, dtype="int8"), "dtype"), (dict(dim=2, ttl=0), "ttl"),
    (dict(dim=2, ttl=-3), "ttl"), (dict(dim=2, init_low=1.0, init_high=0.5), "init_low"),
    (dict(dim=2, round_steps=0), "round_steps"),
    (dict(dim=2, optimizer="ftrl"), "optimizer"), (dict(dim=2, decay=0.0), "decay"),
    (dict(dim=2, min_count=0), "min_count"), (dict(dim=2, beta1=1.0), "beta1"),
    (dict(dim=2, entry="count"), "entry"), (dict(dim=2, lr=0), "lr"),
])
def test_config_errors(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TableConfig(**kwargs)


def test_call_errors():
    t = DynamicTable(TableConfig(dim=2))
    with pytest.raises(ValueError, match="id -1"):
        t.pull([3, -1])
    with pytest.raises(ValueError, match=r"shape \[1, 2\]"):
        t.push([3], np.ones((1, 3)))
    assert t.step == 0  # a refused update changes nothing
    with pytest.raises(ValueError, match="count_filter"):
        CountFilterEntry(-1)
    assert CountFilterEntry(count_filter=10).count == 10  # Paddle's keyword
    with pytest.raises(ValueError, match="probability"):
        ProbabilityEntry(1.5)
    with pytest.raises(ValueError, match="show_name"):
        ShowClickEntry("", "click")
    with pytest.raises(ValueError, match="nonclk_coeff"):
        ShowClickEntry("show", "click", nonclk_coeff=-0.1)
    scored = DynamicTable(TableConfig(dim=2, entry=ShowClickEntry("show", "click")))
    with pytest.raises(ValueError, match="came without them"):
        scored.push([3], np.ones((1, 2)))
    with pytest.raises(ValueError, match="ShowClickEntry table only"):
        t.push([3], np.ones((1, 2)), weights=[1.0])
    with pytest.raises(ValueError, match="2 weights for 1 ids"):
        scored.push([3], np.ones((1, 2)), weights=[1.0, 2.0])
    assert scored.step == t.step == 0
    with pytest.raises(ValueError, match="shard"):
        shard(t.state(), 2, 2)
