"""sparse_embedding: tables keyed by raw 64-bit ids (ops/dynamic.py, placegroup/util/dynamic_table.py).

* One process equals a fixed-vocabulary embedding whose rows start where the table's do (SGD and
  Adagrad: both update only the rows a batch touches).
* 2 trainers + 2 (and 3) pservers in sync mode equal one process, with admission and eviction on:
  losses, the fc, and the table itself (its keys, rows, counts and candidates, gathered from the
  shards).
* Bad input gets a clear error: a negative id names its feed, in one process and on a trainer;
  bad configs, optimizers and initializers name what to change.
"""
import numpy as np
import pytest

import placegroup as fluid
import placegroup.distributed as dist
from placegroup.contrib.layers import sparse_embedding
from placegroup.errors import ConfigError
from placegroup.util.dynamic_table import DynamicTable, TableConfig
from tests.inproc import build_programs, run_cluster, run_local

DIM = 8


def _ids(rng, n: int) -> np.ndarray:
    """Raw 64-bit feature ids: Zipf ranks spread over 0..2**63 - 1 by an odd multiplier."""
    ranks = rng.zipf(1.3, size=(n, 1)).astype(np.uint64)
    return ((ranks * np.uint64(0x9E3779B97F4A7C15)) % np.uint64(2 ** 63)).astype(np.int64)


def _batches(steps: int = 12, batch: int = 32, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        x = _ids(rng, batch)
        out.append((x, (x % 7 < 3).astype(np.int64)))
    return out


def _model(optimizer: str = "adam", entry=None, config=None, init=(-0.5, 0.5)):
    def build():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        emb = sparse_embedding(ids, size=[1000, DIM], entry=entry, table_config=config,
                               param_attr=fluid.ParamAttr(name="emb", initializer=fluid.initializer.Uniform(*init)))
        logits = fluid.layers.fc(input=emb, size=2)
        cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=label))
        {"sgd": lambda: fluid.optimizer.SGD(0.5), "adagrad": lambda: fluid.optimizer.Adagrad(0.3),
         "adam": lambda: fluid.optimizer.Adam(0.05)}[optimizer]().minimize(cost)
        return [ids, label], cost
    return build


def _table(params: dict, name: str) -> DynamicTable:
    return np.asarray(params[name]).item()


def _state_by_key(states: list) -> dict:
    """One table's arrays from its shards' states, rows sorted by key (and candidates by theirs)."""
    out = {}
    for cand in ("", "candidate_"):
        keys = np.concatenate([s[cand + "keys"] for s in states])
        order = np.argsort(keys)
        for name in states[0]:
            if name.startswith("candidate_") == bool(cand) and name not in ("step", "config"):
                out[name] = np.concatenate([s[name] for s in states])[order]
    return out


@pytest.mark.parametrize("optimizer", ["sgd", "adagrad"])
def test_one_process_equals_a_fixed_vocabulary_embedding(optimizer):
    batches = _batches(steps=8)
    keys = np.unique(np.concatenate([x.ravel() for x, _ in batches]))
    cfg = TableConfig(dim=DIM, seed=0, init_low=-0.5, init_high=0.5)
    rows0 = DynamicTable(cfg).pull(keys)  # where the table's rows start: a function of (seed, id)

    def fixed():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        label = fluid.layers.data(name="label", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[len(keys), DIM], is_sparse=True, param_attr=fluid.ParamAttr(
            name="emb", initializer=fluid.initializer.NumpyArrayInitializer(rows0)))
        logits = fluid.layers.fc(input=emb, size=2)
        cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=label))
        {"sgd": lambda: fluid.optimizer.SGD(0.5), "adagrad": lambda: fluid.optimizer.Adagrad(0.3)}[optimizer]().minimize(cost)
        return [ids, label], cost

    dense = [(np.searchsorted(keys, x), y) for x, y in batches]
    want = run_local(fixed, dense)
    cfg_seed = fluid.distributed.SparseTableConfig(seed=0)
    got = run_local(_model(optimizer, config=cfg_seed), batches)
    np.testing.assert_allclose(got.losses[0], want.losses[0], rtol=1e-6)
    table = _table(got.params[0], "emb")
    assert len(table) == len(keys)
    np.testing.assert_allclose(table.pull(keys, create=False), want.params[0]["emb"], rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(got.params[0]["fc_0.w_0"], want.params[0]["fc_0.w_0"], rtol=1e-5, atol=1e-7)


CASES = {
    "count-filter, ttl, decayed counts": dict(entry=dist.CountFilterEntry(2),
                                              config=dist.SparseTableConfig(ttl=4, min_count=1.5, decay=0.8, round_steps=3)),
    "probability": dict(entry=dist.ProbabilityEntry(0.4), config=dist.SparseTableConfig(ttl=6, round_steps=2)),
    "first sight, adagrad": dict(optimizer="adagrad", config=dist.SparseTableConfig(min_count=2.0, round_steps=4)),
}


@pytest.mark.parametrize("pservers", [2, 3])
@pytest.mark.parametrize("case", sorted(CASES))
def test_sync_cluster_equals_one_process_with_admission_and_eviction(case, pservers):
    kw = dict(CASES[case])
    build = _model(kw.pop("optimizer", "adam"), **kw)
    batches = _batches(steps=12)
    ref = run_local(build, batches)
    run = run_cluster(build, 2, pservers, batches)
    np.testing.assert_allclose(np.mean([run.losses[0], run.losses[1]], axis=0), ref.losses[0], rtol=1e-5, atol=1e-6)
    for k in (0, 1):
        assert "emb" not in run.params[k]  # a trainer never holds the table
        for name in ("fc_0.w_0", "fc_0.b_0"):
            np.testing.assert_allclose(run.params[k][name], ref.params[0][name], rtol=1e-5, atol=1e-6, err_msg=name)
    one = _table(ref.params[0], "emb")
    shards = [_table(run.pserver_params[i], f"emb.shard{i}") for i in range(pservers)]
    assert all(len(s) for s in shards) and all(s.step == one.step == 12 for s in shards)
    assert one.evicted > 0 and sum(s.evicted for s in shards) == one.evicted
    want, got = _state_by_key([one.state()]), _state_by_key([s.state() for s in shards])
    for name in ("keys", "count", "last", "candidate_keys", "candidate_count", "candidate_last"):
        assert np.array_equal(got[name], want[name]), name
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def _show_click_model(entry, config):
    """Paddle's form: show and click vars per example (click is the label), the entry naming them."""
    def build():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        click = fluid.layers.data(name="click", shape=[1], dtype="int64")
        show = fluid.layers.data(name="show", shape=[1], dtype="int64")
        emb = sparse_embedding(ids, size=[1000, DIM], entry=entry, table_config=config,
                               param_attr=fluid.ParamAttr(name="emb", initializer=fluid.initializer.Uniform(-0.5, 0.5)))
        logits = fluid.layers.fc(input=emb, size=2)
        cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=click))
        fluid.optimizer.Adam(0.05).minimize(cost)
        return [ids, click, show], cost
    return build


def _show_click_batches(steps: int = 12) -> list:
    rng = np.random.default_rng(3)
    return [(x, y, rng.integers(1, 3, size=y.shape)) for x, y in _batches(steps=steps)]  # shows of 1 or 2


@pytest.mark.parametrize("pservers", [2, 3])
def test_show_click_entry_cluster_equals_one_process(pservers):
    """ShowClickEntry: each sighting counts its example's show/click score, carried with the
    gradient to the pservers unscaled by the trainers' merge; admission at the threshold and
    eviction by the decayed score give the one-process table, key by key."""
    entry = dist.ShowClickEntry("show", "click", threshold=1.0)
    build = _show_click_model(entry, dist.SparseTableConfig(min_count=1.2, decay=0.8, round_steps=3))
    batches = _show_click_batches()
    ref = run_local(build, batches)
    one = _table(ref.params[0], "emb")
    distinct = np.unique(np.concatenate([x.ravel() for x, _, _ in batches])).size
    assert 0 < one.admitted < distinct and one.evicted > 0 and len(one._cand) > 0
    # a count is the decayed sum of (show - click) * 0.1 + click: recompute the candidates' from the batches
    score = {}
    for x, click, show in batches:
        for i, c, sh in zip(x.ravel(), click.ravel(), show.ravel()):
            score[int(i)] = score.get(int(i), 0.0) + (sh - c) * 0.1 + c * 1.0
    st = one.state()
    never = [(count, score[int(key)]) for key, count in zip(st["candidate_keys"], st["candidate_count"])
             if score[int(key)] < 1.0]  # never admitted (the others may have been, and evicted)
    assert never and all(np.isclose(count, want, rtol=1e-5) for count, want in never)  # candidates never decay
    run = run_cluster(build, 2, pservers, batches)
    np.testing.assert_allclose(np.mean([run.losses[0], run.losses[1]], axis=0), ref.losses[0], rtol=1e-5, atol=1e-6)
    shards = [_table(run.pserver_params[i], f"emb.shard{i}") for i in range(pservers)]
    assert sum(s.evicted for s in shards) == one.evicted and sum(s.admitted for s in shards) == one.admitted
    want, got = _state_by_key([st]), _state_by_key([s.state() for s in shards])
    for name in ("keys", "count", "last", "candidate_keys", "candidate_count", "candidate_last"):
        assert np.array_equal(got[name], want[name]), name
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_show_click_scores_follow_the_examples_of_lod_and_wide_ids():
    """The gradient's weight of each id is its example's score: by the LoD's sequences, or by
    equal shares of a [N, k] ids var; show and click of other lengths are refused."""
    from placegroup.values import LoDTensor

    show, click = np.array([[1], [2], [1]]), np.array([[0], [1], [1]])
    score = np.array([0.1, 1.1, 1.0], np.float32)  # (show - click) * 0.1 + click
    g = np.ones((5, 2), np.float32)
    lod = LoDTensor.from_lengths(np.array([[4], [5], [6], [7], [8]], np.int64), [[2, 0, 3]])
    out = _kernel("dynamic_lookup_grad", {"Ids": lod, "Out@GRAD": g, "Show": show, "Click": click}, scored=True)["W@GRAD"]
    np.testing.assert_array_equal(out.weights, score[[0, 0, 2, 2, 2]])
    wide = np.arange(6, dtype=np.int64).reshape(3, 2)
    out = _kernel("dynamic_lookup_grad", {"Ids": wide, "Out@GRAD": np.ones((3, 2, 2), np.float32), "Show": show,
                                          "Click": click}, padding_idx=3, scored=True)["W@GRAD"]
    assert out.rows.tolist() == [0, 1, 2, 4, 5]  # the padding id's entry goes with its weight
    np.testing.assert_array_equal(out.weights, score[[0, 0, 1, 2, 2]])
    with pytest.raises(ValueError, match="holds 6 ids, which do not split over the 4 examples"):
        _kernel("dynamic_lookup_grad", {"Ids": wide, "Out@GRAD": np.ones((3, 2, 2), np.float32),
                                        "Show": np.ones((4, 1)), "Click": np.zeros((4, 1))}, scored=True)
    with pytest.raises(ValueError, match="3 sequences"):
        _kernel("dynamic_lookup_grad", {"Ids": lod, "Out@GRAD": g, "Show": show[:2], "Click": click[:2]}, scored=True)
    with pytest.raises(ValueError, match="holds 3 values and the click var 2"):
        _kernel("dynamic_lookup_grad", {"Ids": lod, "Out@GRAD": g, "Show": show, "Click": click[:2]}, scored=True)


def test_show_click_in_paddlerecs_slot_form_cluster_equals_one_process():
    """PaddleRec's slot DNN form: show, click and every slot are LoD int64 feeds, the slots
    share one table with padding id 0, and each id's score is its sequence's example's."""
    from placegroup.values import LoDTensor

    def build():
        show = fluid.data(name="show", shape=[None, 1], dtype="int64", lod_level=1)
        click = fluid.data(name="click", shape=[None, 1], dtype="int64", lod_level=1)
        slots = [fluid.data(name=f"slot{i}", shape=[None, 1], dtype="int64", lod_level=1) for i in range(3)]
        entry = dist.ShowClickEntry("show", "click", threshold=0.3)
        embs = [fluid.layers.sequence_pool(sparse_embedding(s, size=[100, 4], padding_idx=0, entry=entry,
                                                            param_attr=fluid.ParamAttr(name="embedding")), "sum")
                for s in slots]
        prob = fluid.layers.fc(fluid.layers.concat(embs, axis=1), 2, act="softmax")
        cost = fluid.layers.mean(fluid.layers.cross_entropy(prob, click))
        fluid.optimizer.Adagrad(0.1).minimize(cost)
        return [show, click] + slots, cost

    def lod(values, lengths):
        return LoDTensor.from_lengths(np.asarray(values, np.int64).reshape(-1, 1), [list(lengths)])

    rng = np.random.default_rng(0)
    batches = []
    for _ in range(6):
        feed = {"show": lod(np.ones(8), [1] * 8), "click": lod(rng.integers(0, 2, 8), [1] * 8)}
        for i in range(3):
            lengths = rng.integers(1, 4, 8)
            feed[f"slot{i}"] = lod(rng.integers(0, 30, lengths.sum()) * 1000003 + i, lengths)
        batches.append(feed)
    ref = run_local(build, batches)
    one = _table(ref.params[0], "embedding")
    assert len(one) and len(one._cand)  # some ids' scores stayed below the threshold
    run = run_cluster(build, 2, 2, batches)
    want = _state_by_key([one.state()])
    got = _state_by_key([_table(run.pserver_params[i], f"embedding.shard{i}").state() for i in range(2)])
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_show_click_vars_defined_late_are_found_and_missing_ones_warn():
    """Paddle's programs may define the show and click vars after the lookup: they are looked
    up at minimize. A program that lacks one (one of Paddle's own fleet tests names a show var it
    never defines) warns naming it, and, as in Paddle, every example then counts as shown once
    and not clicked: a score of nonclk_coeff per sighting."""
    def build(define_click: bool):
        def make():
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
            emb = sparse_embedding(ids, size=[10, 4], entry=dist.ShowClickEntry("show", "click", nonclk_coeff=0.25),
                                   param_attr=fluid.ParamAttr(name="emb"))
            show = fluid.layers.data(name="show", shape=[1], dtype="int64")  # after the lookup: found
            feeds = [ids, show, fluid.layers.data(name="click", shape=[1], dtype="int64")] if define_click else [ids]
            cost = fluid.layers.mean(emb)
            fluid.optimizer.SGD(0.1).minimize(cost)
            return feeds, cost
        return make

    ids = np.array([[5], [6], [5]], np.int64)
    run = run_local(build(True), [(ids, np.ones((3, 1), np.int64), np.array([[1], [0], [0]]))])
    table = _table(run.params[0], "emb")
    assert table.state()["candidate_count"].tolist() == [] and len(table) == 2
    assert sorted(zip(table.state()["keys"].tolist(), table.state()["count"].tolist())) == [(5, 1.25), (6, 0.25)]
    with pytest.warns(UserWarning, match="no var 'click'; every example counts as shown once and not clicked"):
        run = run_local(build(False), [(ids,)])
    table = _table(run.params[0], "emb")
    assert sorted(zip(table.state()["keys"].tolist(), table.state()["count"].tolist())) == [(5, 0.5), (6, 0.25)]


@pytest.mark.parametrize("initializer, init", [
    (lambda: fluid.initializer.Normal(0.1, 0.5, seed=4), dict(init="normal", init_mean=0.1, init_std=0.5)),
    (lambda: fluid.initializer.TruncatedNormal(0.0, 0.2, seed=4), dict(init="truncated_normal", init_std=0.2)),
])
def test_normal_initializers_carry_over_to_the_table(initializer, init):
    """Paddle's fleet tests build tables with Normal initializers: new rows are drawn from that
    distribution by (seed, id), so the table's first lookup reads the config's rows."""
    def build():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        return [ids], sparse_embedding(ids, size=[10, 4], param_attr=fluid.ParamAttr(name="emb",
                                                                                      initializer=initializer()))
    main, startup, feeds, out = build_programs(build)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    ids = np.array([[3], [2 ** 60]], np.int64)
    got, = exe.run(main, feed={"ids": ids}, fetch_list=[out], scope=scope)
    cfg = TableConfig(dim=4, seed=4, **init)
    np.testing.assert_array_equal(got, DynamicTable(cfg).pull(ids.ravel()))


def test_inference_lookup_makes_no_rows():
    def build():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        return [ids], sparse_embedding(ids, size=[10, 4], is_test=True)
    main, startup, feeds, out = build_programs(build)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    got, = exe.run(main, feed={"ids": np.array([[5], [2 ** 62]], np.int64)}, fetch_list=[out], scope=scope)
    assert got.shape == (2, 4) and not got.any()
    assert len(scope.vars[main.all_parameters()[0].name]) == 0


def test_padding_id_reads_zeros_and_gets_no_gradient():
    def build():
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        emb = sparse_embedding(ids, size=[10, 4], padding_idx=0, param_attr=fluid.ParamAttr(name="emb"))
        cost = fluid.layers.mean(emb)
        fluid.optimizer.SGD(1.0).minimize(cost)
        return [ids], emb
    main, startup, feeds, out = build_programs(build)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    got, = exe.run(main, feed={"ids": np.array([[0], [7]], np.int64)}, fetch_list=[out], scope=scope)
    assert not got[0].any() and got[1].any()
    assert scope.vars["emb"].state()["keys"].tolist() == [7]  # the padding id never gets a row


def test_environment_overrides_the_eviction_settings(monkeypatch):
    monkeypatch.setenv("PLACEGROUP_TABLE_TTL", "7")
    monkeypatch.setenv("PLACEGROUP_TABLE_ROUND_STEPS", "9")
    main, startup, _, _ = build_programs(_model(config=dist.SparseTableConfig(ttl=100, decay=0.5)))
    op = next(op for op in startup.global_block().ops if op.type == "dynamic_table")
    cfg = TableConfig.from_json(op.attrs["config"])
    assert (cfg.ttl, cfg.round_steps, cfg.decay, cfg.optimizer, cfg.beta2) == (7, 9, 0.5, "adam", 0.999)
    monkeypatch.setenv("PLACEGROUP_TABLE_TTL", "0")
    with pytest.raises(ConfigError, match="PLACEGROUP_TABLE_TTL"):
        build_programs(_model())


@pytest.mark.parametrize("make, match", [
    (lambda ids: sparse_embedding(ids, size=[10, 4], table_config=dist.SparseTableConfig(ttl=0)), "ttl"),
    (lambda ids: sparse_embedding(ids, size=[10, 4], entry="count"), "entry"),
    (lambda ids: sparse_embedding(ids, size=[10, 4], table_class="SSD"), "table_class"),
    (lambda ids: sparse_embedding(ids, size=[10], dtype="float32"), "size"),
    (lambda ids: sparse_embedding(ids, size=[10, 4], param_attr=fluid.ParamAttr(
        initializer=fluid.initializer.NumpyArrayInitializer(np.zeros((10, 4), np.float32)))), "TruncatedNormal"),
])
def test_bad_layer_arguments(make, match):
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        with pytest.raises(ValueError, match=match):
            make(ids)


def test_regularization_leaves_a_table_keyed_by_raw_ids_alone_with_a_warning():
    """An optimizer's regularization (a Fluid CTR script's Adagrad(regularization=L2Decay)) decays
    the other parameters; the table's own optimizer updates its rows without it, as in Paddle's
    parameter-server tables, and says so."""
    def build(reg):
        def make():
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
            label = fluid.layers.data(name="label", shape=[1], dtype="int64")
            emb = sparse_embedding(ids, size=[10, DIM], param_attr=fluid.ParamAttr(name="emb"))
            cost = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=fluid.layers.fc(emb, 2), label=label))
            fluid.optimizer.SGD(0.5, regularization=reg).minimize(cost)
            return [ids, label], cost
        return make

    batches = _batches(steps=3)
    with pytest.warns(UserWarning, match="'emb' is a table keyed by raw ids .* applies no L2Decay"):
        decayed = run_local(build(fluid.regularizer.L2Decay(0.1)), batches)
    plain = run_local(build(None), batches)
    assert not np.allclose(decayed.params[0]["fc_0.w_0"], plain.params[0]["fc_0.w_0"])  # the fc is decayed
    a, b = _table(decayed.params[0], "emb").state(), _table(plain.params[0], "emb").state()
    assert np.array_equal(a["keys"], b["keys"]) and len(a["keys"]) > 0


def test_an_optimizer_a_table_lacks_is_named():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        cost = fluid.layers.mean(sparse_embedding(ids, size=[10, 4]))
        with pytest.raises(ValueError, match="SGD, Adagrad and Adam"):
            fluid.optimizer.Momentum(0.1, momentum=0.9).minimize(cost)


def test_negative_id_names_its_feed_in_one_process_and_on_a_trainer():
    batches = _batches(steps=2)
    bad = batches[1][0].copy()
    bad[3, 0] = -5
    batches[1] = (bad, batches[1][1])
    with pytest.raises(Exception, match=r"id -5 in 'ids' is negative"):
        run_local(_model("sgd"), batches)
    with pytest.raises(Exception, match=r"id -5 in 'ids' is negative"):
        run_cluster(_model("sgd"), 2, 2, batches, timeout=30)


def test_a_checkpoint_resumes_onto_3_pservers_bit_equal(tmp_path, monkeypatch):
    """2 + 2 saves at step 4; resumed onto 2 + 3, the losses and the whole table (keys, rows,
    optimizer state, counts, candidates) equal an uninterrupted 2 + 2 run's to the bit."""
    build = _model("adam", **CASES["count-filter, ttl, decayed counts"])
    batches = _batches(steps=10)
    full = run_cluster(build, 2, 2, batches)
    monkeypatch.setenv("PLACEGROUP_CHECKPOINT_DIR", str(tmp_path))
    monkeypatch.setenv("PLACEGROUP_CHECKPOINT_EVERY", "4")
    run_cluster(build, 2, 2, batches[:4])
    assert fluid.io.latest_checkpoint(str(tmp_path)) == 4
    monkeypatch.setenv("PLACEGROUP_RESUME", "1")
    rest = run_cluster(build, 2, 3, batches[4:])
    for k in (0, 1):
        assert rest.losses[k] == full.losses[k][4:]
    want = _state_by_key([_table(full.pserver_params[i], f"emb.shard{i}").state() for i in range(2)])
    got = _state_by_key([_table(rest.pserver_params[i], f"emb.shard{i}").state() for i in range(3)])
    assert len(want["keys"]) and len(want["candidate_keys"])
    for name in want:
        assert np.array_equal(got[name], want[name]), name


def test_loading_a_table_of_another_dim_is_an_error_naming_it(tmp_path):
    def build(dim):
        def make():
            ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
            sparse_embedding(ids, size=[10, dim], param_attr=fluid.ParamAttr(name="emb"))
            return [ids], None
        return make
    exe = fluid.Executor()
    main, startup, _, _ = build_programs(build(4))
    scope = fluid.Scope()
    exe.run(startup, scope=scope)
    scope.vars["emb"].pull([1, 2, 3])
    fluid.io.save_checkpoint(exe, str(tmp_path), main, 1, scope=scope)
    main2, startup2, _, _ = build_programs(build(6))
    scope2 = fluid.Scope()
    exe.run(startup2, scope=scope2)
    with pytest.raises(fluid.errors.SerializationError, match=r"table 'emb'.* dim 4, but this program's table has 6"):
        fluid.io.load_checkpoint(exe, str(tmp_path), main2, scope=scope2)
    main3, startup3, _, _ = build_programs(build(4))
    scope3 = fluid.Scope()
    exe.run(startup3, scope=scope3)
    assert fluid.io.load_checkpoint(exe, str(tmp_path), main3, scope=scope3) == 1
    assert scope3.vars["emb"].state()["keys"].tolist() == [1, 2, 3]


def test_an_inference_model_serves_the_trained_rows(tmp_path):
    """Trained in one process, saved with its live rows and keys only, loaded into a fresh
    scope: the served embeddings are the trained rows, and an id the table never admitted (or
    never saw) reads zeros, without making a row."""
    main, startup, feeds, cost = build_programs(_model("adagrad", entry=dist.CountFilterEntry(2)))
    block = main.global_block()
    emb = next(op for op in block.ops if op.type == "dynamic_lookup").output("Out")[0]
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    for x, y in _batches(steps=6):
        exe.run(main, feed={"ids": x, "label": y}, fetch_list=[cost], scope=scope)
    table = scope.vars["emb"]
    with fluid.scope_guard(scope):
        fluid.io.save_inference_model(str(tmp_path), ["ids"], [block.var(emb)], exe, main)
    keys = table.state()["keys"]
    unseen = np.array([[5], [2 ** 62 + 1]], np.int64)
    cand = table.state()["candidate_keys"][:1].reshape(-1, 1)
    probe = np.concatenate([keys[:20].reshape(-1, 1), cand, unseen])
    fresh = fluid.Scope()
    with fluid.scope_guard(fresh):
        prog, feed_names, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
        got, = exe.run(prog, feed={feed_names[0]: probe}, fetch_list=fetches)
    np.testing.assert_array_equal(got[:20], table.pull(keys[:20], create=False))
    assert not got[20:].any()
    served = next(v for k, v in fresh.vars.items() if isinstance(v, DynamicTable))
    assert len(served) == len(table)  # nothing made by the lookups
    assert set(served.state()) == {"keys", "values", "count", "last", "candidate_keys", "candidate_count",
                                   "candidate_last", "step", "config", "moment"}
    assert not served.state()["candidate_keys"].size  # only the rows were saved


def test_a_trainer_saves_an_inference_model_of_the_pservers_rows(tmp_path):
    """A trainer of 2 + 2 saves the inference model: it asks each pserver for its shard's rows
    (they travel as SelectedRows keyed by id), and the model, loaded in one process, serves them."""
    def after(k, exe, prog, scope, main):
        if k == 0:
            emb = next(op for op in prog.global_block().ops if op.type == "dynamic_lookup").output("Out")[0]
            with fluid.scope_guard(scope):
                fluid.io.save_inference_model(str(tmp_path), ["ids"], [prog.global_block().var(emb)], exe, prog)
    run = run_cluster(_model("adam", entry=dist.CountFilterEntry(2)), 2, 2, _batches(steps=5), after=after)
    shards = [_table(run.pserver_params[i], f"emb.shard{i}") for i in range(2)]
    keys = np.concatenate([s.state()["keys"][:10] for s in shards])
    probe = np.concatenate([keys, [3, 2 ** 61]]).reshape(-1, 1)
    exe = fluid.Executor()
    with fluid.scope_guard(fluid.Scope()):
        prog, feed_names, fetches = fluid.io.load_inference_model(str(tmp_path), exe)
        got, = exe.run(prog, feed={feed_names[0]: probe}, fetch_list=fetches)
    want = np.concatenate([s.pull(s.state()["keys"][:10], create=False) for s in shards])
    np.testing.assert_array_equal(got[:len(keys)], want)
    assert len(keys) > 10 and not got[len(keys):].any()


def test_dump_and_profile_show_each_table(monkeypatch, capsys):
    """``placegroup dump`` says each table's config in words; ``PLACEGROUP_PROFILE=1`` prints its
    live rows, admissions, evictions and bytes."""
    from placegroup.tools.dump import render_text

    build = _model("adam", **CASES["count-filter, ttl, decayed counts"])
    main, startup, feeds, cost = build_programs(build)
    text = render_text(main)
    assert ("// table emb: dim 8 float32, adam (lr 0.05), rows admitted after 2 sightings, dropped when unseen "
            "for 4 updates or count below 1.5, counts x0.8 each round of 3 updates") in text
    scored, _, _, _ = build_programs(_show_click_model(dist.ShowClickEntry("show", "click", threshold=2),
                                                       dist.SparseTableConfig(min_count=0.5)))
    assert ("rows admitted at a show/click score of 2 ('show', 'click'; non-click 0.1, click 1), dropped when score "
            "below 0.5, scores x1 each round of 100 updates") in render_text(scored)
    monkeypatch.setenv("PLACEGROUP_PROFILE", "1")
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    for x, y in _batches(steps=12):
        exe.run(main, feed={"ids": x, "label": y}, fetch_list=[cost], scope=scope)
    exe.close()
    t = scope.vars["emb"]
    line = next(x for x in capsys.readouterr().err.splitlines() if "table emb:" in x)
    assert line.strip() == (f"table emb: {len(t):,} live rows, {t.admitted:,} admitted, {t.evicted:,} evicted, "
                            f"{len(t._cand):,} candidates, {t.nbytes / 2 ** 20:,.1f} MiB after 12 updates")
    assert t.admitted > len(t) > 0 and t.evicted > 0


def test_paddle_2_names_reach_the_layer_and_the_entries():
    """``paddle.static.nn.sparse_embedding`` and ``paddle.distributed.*Entry`` through the
    paddle alias, as a Paddle 2.x script writes them after a bare ``import paddle``."""
    from placegroup.compat import alias_paddle, unalias_paddle

    alias_paddle()
    try:
        import paddle
        with fluid.program_guard(fluid.Program(), fluid.Program()):
            ids = paddle.fluid.layers.data(name="ids", shape=[1], dtype="int64")
            emb = paddle.static.nn.sparse_embedding(ids, size=[1024, 16], entry=paddle.distributed.CountFilterEntry(10),
                                                    param_attr=paddle.fluid.ParamAttr(name="SparseFeatFactors"))
            assert paddle.fluid.contrib.layers.sparse_embedding is sparse_embedding
            assert paddle.distributed.ProbabilityEntry is dist.ProbabilityEntry
            w = fluid.default_main_program().global_block().var("SparseFeatFactors")
            assert w.type == "dynamic_table" and list(emb.shape) == [-1, 16]
        with pytest.raises(AttributeError, match="no attribute 'vision'"):
            paddle.vision
    finally:
        unalias_paddle()


def test_ctr_dynamic_example_over_real_processes_equals_one_process(capsys):
    """examples/ctr_dynamic.py (26 LoD slots of raw ids sharing one table, and a wide table) under
    placegroup launch, 2 trainers + 2 pservers over ZeroMQ, admitting by show/click scores that
    travel with the gradients: the mean of the trainers' windowed losses is the one-process
    run's. (Its count filter runs under launch in tests/test_examples_launch.py.)"""
    import io
    import os
    import re

    from placegroup.tools.launch import launch
    from tests.conftest import TIME_FACTOR
    from tests.test_lod_examples import EXAMPLES, example

    args = ["--steps", "40", "--batch-size", "64", "--round-steps", "10", "--ttl", "15", "--entry", "show-click",
            "--admit-after", "3"]
    with fluid.program_guard(fluid.Program(), fluid.Program()), fluid.scope_guard(fluid.Scope()):
        example("ctr_dynamic").main(args)
    alone = capsys.readouterr().out
    evicted = re.search(r"table SparseFeatFactors: ([\d,]+) rows \(([\d,]+) admitted, ([\d,]+) evicted\)", alone)
    assert evicted and int(evicted.group(3).replace(",", "")) > 0, alone
    out = io.StringIO()
    code = launch(os.path.join(EXAMPLES, "ctr_dynamic.py"), args, 2, 2, grace=60 * TIME_FACTOR, out=out)
    text = out.getvalue()
    assert code == 0, text[-3000:]
    loss = re.compile(r"step +(\d+)  loss (\d+\.\d+)")
    one = {int(s): float(v) for s, v in loss.findall(alone)}
    per = {}
    for k in (0, 1):
        for s, v in loss.findall("\n".join(x for x in text.splitlines() if x.startswith(f"[trainer:{k}]"))):
            per.setdefault(int(s), []).append(float(v))
    assert sorted(one) == sorted(per) == [20, 40]
    for s in one:
        assert abs(np.mean(per[s]) - one[s]) < 2e-4, (s, per[s], one[s])


def test_a_batch_with_a_negative_id_changes_nothing():
    """The error comes before any row is read or made: the table is as it was, and training
    goes on as if the bad batch had never come."""
    main, startup, feeds, cost = build_programs(_model("adagrad"))
    good = _batches(steps=4)
    bad = (good[1][0].copy(), good[1][1])
    bad[0][5, 0] = -1
    runs = []
    for with_bad in (False, True):
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        losses = []
        for i, (x, y) in enumerate(good):
            if with_bad and i == 2:
                before = scope.vars["emb"].state()
                with pytest.raises(Exception, match=r"id -1 in 'ids' is negative"):
                    exe.run(main, feed={"ids": bad[0], "label": bad[1]}, fetch_list=[cost], scope=scope)
                after = scope.vars["emb"].state()
                assert all(np.array_equal(before[k], after[k]) for k in before)
            losses.append(float(exe.run(main, feed={"ids": x, "label": y}, fetch_list=[cost], scope=scope)[0][0]))
        runs.append(losses)
    assert runs[0] == runs[1]


# -- the kernels, against numpy ------------------------------------------------------------------
def _kernel(op: str, ins: dict, **attrs):
    from placegroup.ops.registry import KernelContext, get_op_def

    d = get_op_def(op)
    return d.kernels["cpu"](np, ins, {**d.attrs, **attrs}, KernelContext(outputs=[s.name for s in d.outputs]))


def test_the_kernels_against_numpy():
    from placegroup.ops.registry import Cut, get_op_def
    from placegroup.util.dynamic_table import ID_SPACE
    from placegroup.util.key_index import mix64
    from placegroup.values import SelectedRows

    cfg = TableConfig(dim=3, seed=4)
    table = _kernel("dynamic_table", {}, config=cfg.to_json())["Out"]
    assert isinstance(table, DynamicTable) and len(table) == 0
    # the sparse pass's cut: shard k of M, nothing else; a shard is not cut again
    attrs = get_op_def("dynamic_table").cut({"config": "", "num_shards": 1, "shard_index": 0}, Cut.rows((-1, 3), 2, 5))
    assert (attrs["num_shards"], attrs["shard_index"]) == (5, 2)
    with pytest.raises(ValueError, match="cannot be cut again"):
        get_op_def("dynamic_table").cut(attrs, Cut.rows((-1, 3), 0, 2))
    ids = np.array([[9], [2 ** 62], [9], [0], [7]], np.int64)
    out = _kernel("dynamic_lookup", {"W": table, "Ids": ids}, padding_idx=7)["Out"]
    want = DynamicTable(cfg).pull(ids.ravel()[:4])
    np.testing.assert_array_equal(out[:4], want)
    assert out.shape == (5, 3) and not out[4].any() and len(table) == 3  # the padding id: zeros, no row
    g = np.arange(15, dtype=np.float32).reshape(5, 3)
    grad = _kernel("dynamic_lookup_grad", {"Ids": ids, "Out@GRAD": g}, padding_idx=7)["W@GRAD"]
    assert grad.height == ID_SPACE and grad.rows.tolist() == [9, 2 ** 62, 9, 0]  # batch order, repeats kept
    np.testing.assert_array_equal(grad.values, g[:4])
    # the prefetch: split by mix64 % M, each shard's sorted distinct ids; rows back; gradients cut
    parts = _kernel("dynamic_split_ids", {"Ids": [ids, np.array([[5], [9]], np.int64)]}, num_shards=3,
                    ids_names=["a", "b"], padding_idx=7)["Out"]
    flat = np.unique([9, 2 ** 62, 0, 5])
    for k in range(3):
        assert parts[k].ravel().tolist() == flat[mix64(flat) % np.uint64(3) == np.uint64(k)].tolist()
    shard = next(k for k in range(3) if parts[k].size)
    rows = _kernel("dynamic_shard_lookup", {"Ids": parts[shard], "W": DynamicTable(cfg)}, num_shards=3,
                   shard_index=shard)["Out"]
    np.testing.assert_array_equal(rows.values, DynamicTable(cfg).pull(parts[shard].ravel()))
    with pytest.raises(IndexError, match="belongs to shard"):
        _kernel("dynamic_shard_lookup", {"Ids": parts[shard], "W": DynamicTable(cfg)}, num_shards=3,
                shard_index=(shard + 1) % 3)
    cut = _kernel("dynamic_shard_grad", {"X": SelectedRows(grad.rows, grad.values, ID_SPACE)}, num_shards=3)["Out"]
    for k in range(3):
        mine = mix64(grad.rows) % np.uint64(3) == np.uint64(k)
        assert cut[k].rows.tolist() == grad.rows[mine].tolist()
        np.testing.assert_array_equal(cut[k].values, grad.values[mine])
    with pytest.raises(Exception, match=r"id -3 in 'b' is negative"):
        _kernel("dynamic_split_ids", {"Ids": [ids, np.array([[-3]], np.int64)]}, num_shards=2, ids_names=["a", "b"])
    # the update: one push at the given rate
    t2 = DynamicTable(TableConfig(dim=3, optimizer="sgd", lr=1.0))
    before = t2.pull([9, 0]).copy()
    _kernel("dynamic_table_update", {"Param": t2, "Grad": SelectedRows(np.array([9, 9, 0]), np.ones((3, 3), np.float32),
                                                                        ID_SPACE), "LearningRate": np.array([0.5], np.float32)},
            optimizer="sgd")
    np.testing.assert_allclose(t2.pull([9, 0]), before - np.array([[1.0], [0.5]], np.float32), rtol=1e-6)
    with pytest.raises(ValueError, match="made for 'sgd' but the program updates it with 'adam'"):
        _kernel("dynamic_table_update", {"Param": t2, "Grad": grad, "LearningRate": np.array([0.5])}, optimizer="adam")


@pytest.mark.parametrize("mode", [dict(sync_mode=False), dict(sync_mode=True, staleness=2)])
def test_async_and_bounded_staleness_train(mode):
    """Async (each trainer's gradient its own update) and bounded staleness train the table: the
    losses fall, and in async mode each shard counts one update per trainer step."""
    steps = 30
    run = run_cluster(_model("adam", **CASES["count-filter, ttl, decayed counts"]), 2, 2, _batches(steps=steps), **mode)
    for k in (0, 1):
        assert np.mean(run.losses[k][-5:]) < np.mean(run.losses[k][:5]), run.losses[k]
    shards = [_table(run.pserver_params[i], f"emb.shard{i}") for i in range(2)]
    assert all(len(s) for s in shards)
    assert all(s.step == (2 * steps if not mode["sync_mode"] else steps) for s in shards)
