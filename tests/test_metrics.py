"""``fluid.metrics`` and the metric layers ``auc`` and ``edit_distance``.

Each metric class against hand-computed values (the numbers of Fluid 1.8's docstrings where
it has them), its reset/get_config/eval behaviour and its errors; ``Auc`` and the auc layer
against an independent reference: a bucketed AUC is the Mann-Whitney statistic of the bucket
indices (pairs ranked right count 1, pairs in one bucket 1/2), computed here by comparing
every positive with every negative. The auc layer runs in a small CTR-like training program
for several steps (global AUC over every step, batch AUC over the window, the state vars, the
startup program's zeros, Fluid's names) and on two trainers, where each keeps its own counts
(NOTE(auc-distributed)). Where PLACEGROUP_PADDLE_PYTHON names a python with paddle, the auc
and edit_distance ops run in Paddle 2.6 on the same inputs and must give the same values.
"""
from __future__ import annotations

import textwrap

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import NotImplementedInPlacegroup, ProgramError
from placegroup.values import LoDTensor
from tests.cases.metric import _levenshtein
from tests.inproc import run_cluster
from tests.paddle_ref.reference import run_reference
from tests.test_layers import fresh, value

L = fluid.layers
M = fluid.metrics

# Fluid 1.8's docstring example for Precision, Recall and CompositeMetric.
DOC_PREDS = np.array([[0.1], [0.7], [0.8], [0.9], [0.2], [0.2], [0.3], [0.5], [0.8], [0.6]])
DOC_LABELS = np.array([[0], [1], [1], [1], [1], [0], [0], [0], [0], [0]])


def pairwise_auc(p, labels, num_thresholds: int) -> float:
    """The bucketed AUC as a rank statistic, O(pos·neg): a reference sharing nothing with the
    trapezoid walk."""
    b = (np.asarray(p, np.float32) * np.float32(num_thresholds)).astype(np.int64)
    pos, neg = b[labels.reshape(-1) != 0], b[labels.reshape(-1) == 0]
    if not len(pos) or not len(neg):
        return 0.0
    above = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(above / len(pos) / len(neg))


# -- MetricBase, CompositeMetric, Precision, Recall -----------------------------------------


def test_metric_base_names_states_and_abstract_methods():
    class Counter(M.MetricBase):
        def __init__(self, name=None):
            super().__init__(name)
            self.n, self.total, self.hist, self.tag, self._private = 0, 0.0, np.ones(3), "x", 7

    c = Counter()
    assert str(c) == "Counter" and str(Counter("mine")) == "mine"
    cfg = c.get_config()
    assert cfg["name"] == "Counter" and set(cfg["states"]) == {"n", "total", "hist", "tag"}
    cfg["states"]["hist"][0] = 9.0  # a deep copy
    assert c.hist[0] == 1.0
    c.n, c.total = 5, 2.5
    c.reset()
    assert (c.n, c.total, c.tag, c._private) == (0, 0.0, None, 7) and type(c.total) is float
    np.testing.assert_array_equal(c.hist, np.zeros(3))
    with pytest.raises(NotImplementedError):
        M.MetricBase("m").update(None, None)
    with pytest.raises(NotImplementedError):
        M.MetricBase("m").eval()


def test_precision_and_recall_follow_fluids_example():
    p, r = M.Precision(), M.Recall()
    p.update(DOC_PREDS, DOC_LABELS)
    r.update(DOC_PREDS, DOC_LABELS)
    # rint: 0.5 -> 0, 0.6 -> 1; predicted positive: rows 1, 2, 3, 8, 9, of which 1..3 are positive
    assert (p.tp, p.fp, p.eval()) == (3, 2, 0.6)
    assert (r.tp, r.fn, r.eval()) == (3, 1, 0.75)
    # they accumulate, [N] and [N, 1] mix, and labels other than 1 are negatives
    p.update(np.array([0.9, 0.4]), np.array([[2], [1]]))
    r.update(np.array([0.9, 0.4]), np.array([[2], [1]]))
    assert (p.tp, p.fp) == (3, 3) and (r.tp, r.fn) == (3, 2)
    assert p.get_config() == {"name": "Precision", "states": {"tp": 3, "fp": 3}}
    p.reset()
    r.reset()
    assert p.eval() == 0.0 and r.eval() == 0.0  # nothing counted: 0.0, not a ZeroDivisionError
    assert (p.tp, p.fp, r.tp, r.fn) == (0, 0, 0, 0)


def test_composite_metric_updates_and_evaluates_each():
    comp = M.CompositeMetric()
    comp.add_metric(M.Precision())
    comp.add_metric(M.Recall())
    comp.update(preds=DOC_PREDS, labels=DOC_LABELS)
    assert comp.eval() == [0.6, 0.75]
    with pytest.raises(ValueError, match="CompositeMetric 'CompositeMetric': SubMetric should be inherit from "
                                         "MetricBase, got int"):
        comp.add_metric(3)


@pytest.mark.parametrize("cls", [M.Precision, M.Recall])
def test_precision_recall_errors_name_the_metric(cls):
    name = cls.__name__
    m = cls()
    with pytest.raises(ValueError, match=f"{name} '{name}': The 'preds' must be a numpy ndarray, got list"):
        m.update([0.5], np.array([1]))
    with pytest.raises(ValueError, match=f"{name} '{name}': The 'labels' must be a numpy ndarray, got list"):
        m.update(np.array([0.5]), [1])
    with pytest.raises(ValueError, match=r"one value per example .* got preds of shape \(3, 2\) and labels of "
                                         r"shape \(3, 1\)"):
        m.update(np.zeros((3, 2)), np.zeros((3, 1)))
    with pytest.raises(ValueError, match=r"got preds of shape \(3,\) and labels of shape \(2,\)"):
        m.update(np.zeros(3), np.zeros(2))


# -- Accuracy, ChunkEvaluator, EditDistance -------------------------------------------------


def test_accuracy_weighted_mean_reset_and_array_values():
    acc = M.Accuracy()
    acc.update(value=0.9, weight=128)
    acc.update(value=0.8, weight=128)
    assert acc.eval() == pytest.approx(0.85, abs=1e-15)
    acc.update(value=np.array([0.5], np.float32), weight=np.int64(64))  # a fetched [1] array
    assert isinstance(acc.value, np.ndarray)
    np.testing.assert_allclose(acc.eval(), [(0.9 * 128 + 0.8 * 128 + 0.5 * 64) / 320], rtol=1e-6)
    acc.reset()
    assert acc.weight == 0.0
    np.testing.assert_array_equal(acc.value, [0.0])  # an array state resets to zeros like it
    with pytest.raises(ValueError, match="Accuracy 'Accuracy': There is no data in Accuracy Metrics"):
        acc.eval()


def test_accuracy_errors():
    acc = M.Accuracy("acc")
    with pytest.raises(ValueError, match="Accuracy 'acc': The 'value' must be a number.*got str"):
        acc.update("0.9", 10)
    with pytest.raises(ValueError, match="The 'weight' must be a number.*got ndarray of shape \\(2,\\)"):
        acc.update(0.9, np.array([1, 2]))
    with pytest.raises(ValueError, match="The 'weight' must be a number.*got float32"):
        acc.update(0.9, np.float32(4))  # not a number to Fluid's _is_number_ either
    with pytest.raises(ValueError, match="The 'weight' can not be negative, got -1"):
        acc.update(0.9, -1)


def test_chunk_evaluator_precision_recall_f1():
    m = M.ChunkEvaluator()
    m.update(10, 9, 8)
    p, r, f1 = m.eval()
    assert (p, r) == (0.8, 8 / 9) and f1 == pytest.approx(2 * 0.8 * (8 / 9) / (0.8 + 8 / 9), abs=1e-15)
    m.update(np.array([3]), np.array([3]), np.array([3]))  # fetched counts
    p, r, f1 = m.eval()
    assert p == 11 / 13 and r == 11 / 12
    m.reset()
    assert m.eval() == (0, 0, 0)
    m.update(4, 0, 0)
    assert m.eval() == (0.0, 0, 0)
    with pytest.raises(ValueError, match="ChunkEvaluator 'ChunkEvaluator': The 'num_label_chunks' must be a "
                                         "number.*got list"):
        m.update(1, [1], 1)


def test_edit_distance_metric():
    m = M.EditDistance("ed")
    m.update(np.array([[0.0], [2.0], [1.0]]), 3)
    m.update(np.array([[0.0], [0.5]], np.float32), np.array([2]))  # a fetched SequenceNum
    avg, err = m.eval()
    assert avg == pytest.approx(3.5 / 5) and err == pytest.approx(3 / 5)
    assert m.get_config()["states"]["seq_num"] == 5
    m.reset()
    with pytest.raises(ValueError, match="EditDistance 'ed': There is no data in EditDistance Metric"):
        m.eval()
    with pytest.raises(ValueError, match="The 'distances' must be a numpy ndarray, got list"):
        m.update([0.0], 1)
    with pytest.raises(ValueError, match="The 'seq_num' must be a number.*got str"):
        m.update(np.zeros((1, 1)), "1")


# -- Auc ------------------------------------------------------------------------------------


def _fluid18_auc(batches, nt):
    """Fluid 1.8's Auc.update/eval, transcribed loop for loop."""
    pos, neg = [0] * (nt + 1), [0] * (nt + 1)
    for preds, labels in batches:
        for i, lbl in enumerate(labels):
            b = int(preds[i, 1] * nt)
            if lbl:
                pos[b] += 1.0
            else:
                neg[b] += 1.0
    tp = tn = area = 0.0
    for idx in range(nt, -1, -1):
        tpp, tnp = tp, tn
        tp, tn = tp + pos[idx], tn + neg[idx]
        area += abs(tn - tnp) * (tp + tpp) / 2.0
    return area / tp / tn if tp > 0.0 and tn > 0.0 else 0.0


@pytest.mark.parametrize("nt", [4095, 7])
def test_auc_metric_is_the_bucketed_rank_statistic(nt):
    rng = np.random.default_rng(0)
    m, seen = M.Auc("auc", num_thresholds=nt), []
    for step in range(4):
        p = rng.random((50, 1)).astype(np.float32)
        labels = (rng.random((50, 1)) < p).astype(np.int64)  # informative: AUC well above 0.5
        batch = (np.hstack([1 - p, p]), labels)
        m.update(*batch)
        seen.append(batch)
        allp = np.concatenate([b[0][:, 1] for b in seen])
        alll = np.concatenate([b[1] for b in seen])
        assert m.eval() == _fluid18_auc(seen, nt)  # bit for bit
        assert m.eval() == pytest.approx(pairwise_auc(allp, alll, nt), abs=1e-12)
    assert 0.6 < m.eval() < 1.0


def test_auc_metric_edges_reset_and_errors():
    m = M.Auc("auc")
    assert m.eval() == 0.0
    m.update(np.array([[0.8, 0.2], [0.3, 0.7]]), np.array([[0], [1]]))
    assert m.eval() == 1.0
    m.update(np.array([[0.0, 1.0]]), np.array([0]))  # a negative at the top bucket: 1 of 2 pairs
    assert m.eval() == 0.5
    assert m.get_config() == {"name": "auc", "states": {}}
    m.reset()
    assert m.eval() == 0.5  # NOTE(auc-reset): Fluid 1.8 keeps the counts
    with pytest.raises(ValueError, match="Auc 'auc': The 'labels' must be a numpy ndarray, got list"):
        m.update(np.zeros((1, 2)), [1])
    with pytest.raises(ValueError, match=r"preds must be \[N, 2\] .*got preds of shape \(2, 1\)"):
        m.update(np.zeros((2, 1)), np.zeros((2, 1)))
    with pytest.raises(ValueError, match=r"preds\[1, 1\] = 1.5 is not a probability in \[0, 1\]"):
        m.update(np.array([[0.5, 0.5], [-0.5, 1.5]]), np.array([1, 0]))


def test_detection_map_is_an_honest_gap():
    assert not hasattr(M, "DetectionMAP")
    with pytest.raises(NotImplementedInPlacegroup, match="fluid.metrics.DetectionMAP"):
        M.DetectionMAP  # noqa: B018


# -- the auc layer --------------------------------------------------------------------------

NT = 255  # a coarse grid, so buckets hold ties and the half-pair rule is exercised


def _ctr_model(slide_steps: int):
    def build():
        x = L.data("x", shape=[6])
        label = L.data("label", shape=[1], dtype="int64")
        prob = L.softmax(L.fc(L.fc(x, size=8, act="tanh"), size=2))
        cost = L.mean(L.cross_entropy(prob, label))
        fluid.optimizer.SGD(learning_rate=0.5).minimize(cost)
        auc, batch_auc, states = L.auc(prob, label, num_thresholds=NT, slide_steps=slide_steps)
        return [x, label], cost, prob, auc, batch_auc, states

    return build


def _ctr_batches(steps=6, n=32, seed=5):
    rng = np.random.default_rng(seed)
    w = rng.standard_normal(6)
    out = []
    for _ in range(steps):
        x = rng.standard_normal((n, 6)).astype(np.float32)
        label = (x @ w + 0.5 * rng.standard_normal(n) > 0).astype(np.int64).reshape(-1, 1)
        out.append((x, label))
    return out


def test_auc_layer_names_state_and_startup():
    with fresh() as (main, startup, exe):
        *_, auc, batch_auc, states = _ctr_model(3)()
        assert (auc.name, batch_auc.name) == ("auc_0.tmp_0", "auc_0.tmp_1")
        assert [v.name for v in states] == [f"_generated_var_{i}" for i in range(4)]
        # Fluid's shapes (NOTE(auc-window)): the batch state is a flat ring of 3 slots, a sum row and a counter
        assert [list(v.shape) for v in states] == [[4 * (NT + 1) + 1]] * 2 + [[1, NT + 1]] * 2
        assert all(v.persistable and v.dtype == "int64" for v in states) and auc.dtype == "float64"
        inits = [op for op in startup.global_block().ops if op.output_arg_names[0].startswith("_generated_var")]
        assert [(op.type, op.attrs["value"], op.attrs["dtype"]) for op in inits] == [("fill_constant", 0, "int64")] * 4
        aucs = [op for op in main.global_block().ops if op.type == "auc"]
        assert [op.attrs["slide_steps"] for op in aucs] == [3, 0]  # batch AUC first, as Fluid
        assert all(op.input("StatPos") == op.output("StatPosOut") for op in aucs)
    with fresh():  # slide_steps=0: [1, NT + 1], the shape Fluid's op inference gives it
        *_, states = _ctr_model(0)()
        assert [list(v.shape) for v in states] == [[1, NT + 1]] * 4


def test_auc_layer_accumulates_over_training_steps():
    steps = 2
    with fresh() as (main, startup, exe):
        feeds, cost, prob, auc, batch_auc, states = _ctr_model(steps)()
        exe.run(startup)
        assert all(not value(v).any() for v in states)
        metric, probs, labels, losses = M.Auc("auc", num_thresholds=NT), [], [], []
        for x, label in _ctr_batches():
            loss, p, a, ba, bp, bn, sp, sn = exe.run(main, feed={"x": x, "label": label},
                                                     fetch_list=[cost, prob, auc, batch_auc, *states])
            losses.append(float(loss[0]))
            probs.append(p[:, 1])
            labels.append(label)
            assert a.dtype == np.float64 and a.shape == (1,)
            # global: every step so far; batch: the last `steps` steps
            assert a[0] == pytest.approx(pairwise_auc(np.concatenate(probs), np.concatenate(labels), NT), abs=1e-12)
            assert ba[0] == pytest.approx(pairwise_auc(np.concatenate(probs[-steps:]),
                                                       np.concatenate(labels[-steps:]), NT), abs=1e-12)
            bins = (np.concatenate(probs) * np.float32(NT)).astype(np.int64)
            lab = np.concatenate(labels).reshape(-1)
            np.testing.assert_array_equal(sp[0], np.bincount(bins[lab == 1], minlength=NT + 1))
            np.testing.assert_array_equal(sn[0], np.bincount(bins[lab == 0], minlength=NT + 1))
            # the ring (NOTE(auc-window)): this batch in slot step % steps, the sum row over the
            # last `steps` batches, the counter at step + 1; 6 batches wrap it around 3 times
            step, buckets = len(probs) - 1, NT + 1
            for ring, want in ((bp, lab == 1), (bn, lab == 0)):
                assert ring.shape == ((steps + 1) * buckets + 1,) and ring[-1] == step + 1
                slots = ring[:steps * buckets].reshape(steps, buckets)
                np.testing.assert_array_equal(slots[step % steps], np.bincount(bins[-32:][want[-32:]],
                                                                               minlength=buckets))
                recent = bins[-steps * 32:][want[-steps * 32:]]
                np.testing.assert_array_equal(ring[steps * buckets:-1], np.bincount(recent, minlength=buckets))
                np.testing.assert_array_equal(ring[steps * buckets:-1], slots.sum(0))
            metric.update(p, label)
            assert metric.eval() == a[0]  # fluid.metrics.Auc does the op's arithmetic
        assert losses[-1] < losses[0] and a[0] > 0.7
        # the state persists in the scope, and clone(for_test) keeps counting, as in Fluid
        test = main.clone(for_test=True)
        x, label = _ctr_batches(1, seed=9)[0]
        exe.run(test, feed={"x": x, "label": label}, fetch_list=[auc])
        assert value(states[2]).sum() + value(states[3]).sum() == 7 * 32


def test_auc_layer_errors():
    with fresh():
        x = L.data("x", shape=[2])
        with pytest.raises(TypeError, match="auc: label 'x' must be of dtype int32 or int64, got float32"):
            L.auc(x, x)
        lab = L.data("lab", shape=[1], dtype="int64")
        with pytest.raises(TypeError, match="auc: input 'lab' must be of dtype float32 or float64, got int64"):
            L.auc(lab, lab)
        with pytest.raises(ProgramError, match=r"auc: Predict must be \[N, 2\] .*got Predict\[-1, 3\]"):
            L.auc(L.data("p3", shape=[3]), lab)


def test_auc_state_stays_on_each_trainer():
    batches = _ctr_batches(4)

    def build():
        feeds, cost, prob, auc, batch_auc, states = _ctr_model(1)()
        return feeds, cost

    run = run_cluster(build, trainers=2, pservers=1, batches=batches,
                      fetch=("softmax_0.tmp_0", "auc_0.tmp_0", "auc_0.tmp_1", "_generated_var_2"))
    for k in (0, 1):
        probs, labels = [], []
        for step, (p, a, ba, sp) in enumerate(run.fetched[k]):
            label = batches[step][1][16 * k:16 * (k + 1)]
            probs.append(p[:, 1])
            labels.append(label)
            assert a[0] == pytest.approx(pairwise_auc(np.concatenate(probs), np.concatenate(labels), NT), abs=1e-12)
            assert ba[0] == pytest.approx(pairwise_auc(p[:, 1], label, NT), abs=1e-12)
            assert sp.sum() == int(np.concatenate(labels).sum())  # this trainer's positives only


# -- the edit_distance layer ----------------------------------------------------------------


def _ed_program(**kw):
    hyp = L.data("hyp", shape=[-1, 7], dtype="int64", append_batch_size=False)
    ref = L.data("ref", shape=[-1, 5], dtype="int64", append_batch_size=False)
    hl = L.data("hl", shape=[-1], dtype="int64", append_batch_size=False)
    rl = L.data("rl", shape=[-1], dtype="int64", append_batch_size=False)
    return L.edit_distance(hyp, ref, input_length=hl, label_length=rl, **kw)


def _ed_feed(n=9, seed=2):
    rng = np.random.default_rng(seed)
    return {"hyp": rng.integers(0, 4, (n, 7)), "ref": rng.integers(0, 4, (n, 5)),
            "hl": rng.integers(0, 8, n), "rl": rng.integers(1, 6, n)}


@pytest.mark.parametrize("normalized,ignored", [(True, None), (False, None), (True, [0, 3])])
def test_edit_distance_layer(normalized, ignored):
    with fresh() as (main, startup, exe):
        dist, seq_num = _ed_program(normalized=normalized, ignored_tokens=ignored)
        assert list(dist.shape) == [-1, 1] and dist.dtype == "float32" and list(seq_num.shape) == [1]
        feed = _ed_feed()
        feed["ref"][0, :2] = [0, 3]
        feed["rl"][0] = 2  # with ignored [0, 3], an empty reference: its distance is the hypothesis length
        if normalized and ignored:
            feed["ref"][0, 0] = 1
        d, n = exe.run(main, feed=feed, fetch_list=[dist, seq_num])
    gone = set(ignored or ())
    want = []
    for h, hl, r, rl in zip(feed["hyp"], feed["hl"], feed["ref"], feed["rl"]):
        h, r = [t for t in h[:hl] if t not in gone], [t for t in r[:rl] if t not in gone]
        want.append(_levenshtein(h, r) / (len(r) if normalized else 1))
    np.testing.assert_allclose(d.reshape(-1), want, rtol=1e-6)
    assert d.dtype == np.float32 and n.tolist() == [9]
    m = M.EditDistance("ed")
    m.update(d, n)
    assert m.eval()[0] == pytest.approx(float(np.mean(want)), rel=1e-6)


def test_edit_distance_layer_errors():
    with fresh() as (main, startup, exe):
        hyp = L.data("hyp", shape=[-1, 7], dtype="int64", append_batch_size=False)
        with pytest.raises(ProgramError, match=r"LoD sequences of one token a row \[T, 1\], got Hyps\[-1, 7\]"):
            L.edit_distance(hyp, hyp)
        with pytest.raises(ValueError, match="give both input_length and label_length"):
            L.edit_distance(hyp, hyp, input_length=L.data("only", shape=[-1], dtype="int64", append_batch_size=False))
        with pytest.raises(TypeError, match="edit_distance: input 'f' must be of dtype int64, got float32"):
            L.edit_distance(L.data("f", shape=[3]), hyp)
        dist, _ = _ed_program()
        feed = _ed_feed()
        feed["rl"][4] = 0
        with pytest.raises(Exception, match="reference row 4 is empty"):
            exe.run(main, feed=feed, fetch_list=[dist])


@pytest.mark.parametrize("normalized,ignored", [(False, None), (True, [0])])
def test_edit_distance_of_lod_sequences(normalized, ignored):
    """Without lengths, LoD sequences of one token a row, as ctc_greedy_decoder gives them
    (NOTE(edit-distance-lod)); an empty hypothesis among them."""
    rng = np.random.default_rng(5)
    hl, rl = [3, 0, 4, 2], [2, 3, 4, 1]
    hyp, ref = rng.integers(0, 4, (sum(hl), 1)), rng.integers(1, 4, (sum(rl), 1))
    with fresh() as (main, startup, exe):
        h = L.data("h", shape=[1], dtype="int64", lod_level=1)
        r = L.data("r", shape=[1], dtype="int64", lod_level=1)
        dist, seq_num = L.edit_distance(h, r, normalized=normalized, ignored_tokens=ignored)
        d, n = exe.run(main, feed={"h": LoDTensor.from_lengths(hyp, [hl]), "r": LoDTensor.from_lengths(ref, [rl])},
                       fetch_list=[dist, seq_num])
    gone, want = set(ignored or ()), []
    for k in range(4):
        a = [t for t in hyp[sum(hl[:k]):sum(hl[:k + 1]), 0] if t not in gone]
        b = [t for t in ref[sum(rl[:k]):sum(rl[:k + 1]), 0] if t not in gone]
        want.append(_levenshtein(a, b) / (len(b) if normalized else 1))
    np.testing.assert_allclose(d.reshape(-1), want, rtol=1e-6)
    assert n.tolist() == [4]


# -- against Fluid 1.8.5 --------------------------------------------------------------------

# One script for both: auc layers with several windows (and Fluid's defaults) on fed
# predictions, run for spec["steps"] batches from spec["first"]; each step's AUCs and the four
# state vars of each layer are written. Fluid saves its persistables after step spec["save_at"];
# with spec["load"], the run starts from such a checkpoint instead of zeros.
FLUID18_AUC_SCRIPT = r"""
import json, sys
import numpy as np
spec = json.loads(sys.argv[1])
if spec["framework"] == "placegroup":
    import placegroup as fluid
else:
    import paddle.fluid as fluid
d = np.load(spec["data"])
main, startup = fluid.Program(), fluid.Program()
fetch, names = {}, []
with fluid.program_guard(main, startup):
    p = fluid.layers.data(name="p", shape=[2], dtype="float32")
    lab = fluid.layers.data(name="lab", shape=[1], dtype="int64")
    for k, kw in enumerate(spec["layers"]):
        auc, batch_auc, states = fluid.layers.auc(p, lab, **kw)
        fetch["auc%d" % k], fetch["batch%d" % k] = auc, batch_auc
        for j, v in enumerate(states):
            fetch["state%d_%d" % (k, j)] = v
            names.append("%s %s" % (v.name, list(v.shape)))
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
if spec.get("load"):
    fluid.io.load_persistables(exe, spec["load"], main)
keys = sorted(fetch)
out = {"names": np.array(names)}
for step in range(spec["first"], spec["first"] + spec["steps"]):
    got = exe.run(main, feed={"p": d["p"][step], "lab": d["lab"][step]}, fetch_list=[fetch[k] for k in keys])
    for k, g in zip(keys, got):
        out["%s.%d" % (k, step)] = np.array(g)
    if step == spec.get("save_at"):
        fluid.io.save_persistables(exe, spec["ckpt"], main)
np.savez(spec["out"], **out)
"""

FLUID18_AUC_LAYERS = ({"num_thresholds": 63, "slide_steps": 3}, {"num_thresholds": 63, "slide_steps": 4},
                      {"num_thresholds": 63, "slide_steps": 0}, {})  # {}: Fluid's defaults, 4095 and 1
FLUID18_AUC_STEPS, FLUID18_AUC_SAVE_AT = 9, 4


@pytest.mark.paddle
def test_auc_state_matches_fluid_1_8_5(fluid18_python, tmp_path):
    """The same 9 batches through Fluid 1.8.5's auc layer and ours: the state vars' names,
    shapes and values exactly (rings of 3 and 4 slots wrap around twice), both AUCs within
    1e-12; then a checkpoint Fluid saved after step 4 loads here and the runs go on alike."""
    import sys
    rng = np.random.default_rng(11)
    q = rng.random((FLUID18_AUC_STEPS, 24, 1)).astype(np.float32)
    q[0, :3, 0] = [0.0, 1.0, 0.5]
    data = {"p": np.concatenate([1 - q, q], axis=2), "lab": (rng.random(q.shape) < q).astype(np.int64)}
    for who in ("fluid", "ours", "resumed"):
        (tmp_path / who).mkdir()
    common = {"timeout": 300, "layers": list(FLUID18_AUC_LAYERS), "first": 0, "steps": FLUID18_AUC_STEPS}
    theirs = run_reference(fluid18_python, FLUID18_AUC_SCRIPT, tmp_path / "fluid", data, framework="fluid",
                           save_at=FLUID18_AUC_SAVE_AT, ckpt=str(tmp_path / "ckpt"), **common)
    ours = run_reference(sys.executable, FLUID18_AUC_SCRIPT, tmp_path / "ours", data, framework="placegroup",
                         **common)
    later = FLUID18_AUC_STEPS - FLUID18_AUC_SAVE_AT - 1
    resumed = run_reference(sys.executable, FLUID18_AUC_SCRIPT, tmp_path / "resumed", data, framework="placegroup",
                            **{**common, "first": FLUID18_AUC_SAVE_AT + 1, "steps": later},
                            load=str(tmp_path / "ckpt"))
    assert ours["names"].tolist() == theirs["names"].tolist()
    for got in (ours, resumed):
        for key in sorted(set(got) - {"names"}):
            g, want = got[key], theirs[key]
            if key.startswith("state"):
                assert (g.dtype, g.shape) == (want.dtype, want.shape), key
                np.testing.assert_array_equal(g, want, err_msg=key)
            else:
                np.testing.assert_allclose(g, want, rtol=0, atol=1e-12, err_msg=key)
    assert len(resumed) == 1 + later * 24 and len(ours) == 1 + FLUID18_AUC_STEPS * 24


# -- against PaddlePaddle 2.6 ---------------------------------------------------------------


# Paddle builds the 1.x auc layer (paddle.static.auc: the same two ops) and the edit_distance op
# on fed inputs and runs them for the same steps; the AUC values and the global state are
# compared (the batch state against Fluid 1.8.5 itself, test_auc_state_matches_fluid_1_8_5).
_PADDLE_RUNNER = textwrap.dedent('''
    import json, sys
    import numpy as np
    import paddle
    from paddle.base.layer_helper import LayerHelper
    paddle.enable_static()
    spec = json.loads(sys.argv[1])
    d = dict(np.load(spec["data"]))
    out = {}
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        p = paddle.static.data("p", [-1, 2], "float32")
        lab = paddle.static.data("lab", [-1, 1], "int64")
        fetch = {}
        for s in spec["slides"]:
            auc, batch_auc, states = paddle.static.auc(p, lab, num_thresholds=spec["nt"], slide_steps=s)
            fetch[f"auc{s}"], fetch[f"batch{s}"], fetch[f"stat{s}"] = auc, batch_auc, states[2]
        h = LayerHelper("edit_distance")
        names = ("hyp", "ref", "hl", "rl")
        v = {k: paddle.static.data(k, list(d[k].shape), "int64") for k in names}
        for norm in (0, 1):
            o, n = h.create_variable_for_type_inference("float32"), h.create_variable_for_type_inference("int64")
            h.append_op(type="edit_distance", inputs={"Hyps": [v["hyp"]], "Refs": [v["ref"]],
                        "HypsLength": [v["hl"]], "RefsLength": [v["rl"]]},
                        outputs={"Out": [o], "SequenceNum": [n]}, attrs={"normalized": bool(norm)})
            fetch[f"ed{norm}"] = o
    exe = paddle.static.Executor(paddle.CPUPlace())
    exe.run(startup)
    keys = sorted(fetch)
    for step in range(spec["steps"]):
        feed = {"p": d["p"][step], "lab": d["lab"][step], **{k: d[k] for k in ("hyp", "ref", "hl", "rl")}}
        got = exe.run(main, feed=feed, fetch_list=[fetch[k] for k in keys])
        for k, g in zip(keys, got):
            out[f"{k}.{step}"] = np.array(g)
    np.savez(spec["out"], **out)
''')

PADDLE_SLIDES = (0, 1, 3)
PADDLE_STEPS, PADDLE_NT = 5, 63


def _paddle_data():
    rng = np.random.default_rng(8)
    p = rng.random((PADDLE_STEPS, 20, 1)).astype(np.float32)
    p[0, :3, 0] = [0.0, 1.0, 0.5]
    data = {"p": np.concatenate([1 - p, p], axis=2), "lab": (rng.random((PADDLE_STEPS, 20, 1)) < p).astype(np.int64)}
    feed = _ed_feed(n=12, seed=4)
    data.update(hyp=feed["hyp"], ref=feed["ref"], hl=feed["hl"], rl=feed["rl"])
    return data


@pytest.fixture(scope="module")
def paddle_out(paddle26_python, tmp_path_factory) -> dict:
    return run_reference(paddle26_python, _PADDLE_RUNNER, tmp_path_factory.mktemp("paddle_metrics"), _paddle_data(),
                         timeout=600, steps=PADDLE_STEPS, nt=PADDLE_NT, slides=list(PADDLE_SLIDES))


@pytest.mark.paddle
def test_auc_and_edit_distance_match_paddle(paddle_out):
    d = _paddle_data()
    with fresh() as (main, startup, exe):
        p = L.data("p", shape=[2])
        lab = L.data("lab", shape=[1], dtype="int64")
        fetch = {}
        for s in PADDLE_SLIDES:
            auc, batch_auc, states = L.auc(p, lab, num_thresholds=PADDLE_NT, slide_steps=s)
            fetch[f"auc{s}"], fetch[f"batch{s}"], fetch[f"stat{s}"] = auc, batch_auc, states[2]
        hyp, ref, hl, rl = (L.data(k, shape=list(d[k].shape), dtype="int64", append_batch_size=False)
                            for k in ("hyp", "ref", "hl", "rl"))
        for norm in (0, 1):
            fetch[f"ed{norm}"] = L.edit_distance(hyp, ref, normalized=bool(norm), input_length=hl, label_length=rl)[0]
        exe.run(startup)
        keys = sorted(fetch)
        for step in range(PADDLE_STEPS):
            feed = {"p": d["p"][step], "lab": d["lab"][step], **{k: d[k] for k in ("hyp", "ref", "hl", "rl")}}
            for k, g in zip(keys, exe.run(main, feed=feed, fetch_list=[fetch[k] for k in keys])):
                want = paddle_out[f"{k}.{step}"]
                assert g.dtype == want.dtype, f"{k} at step {step}: dtype {g.dtype}, Paddle's {want.dtype}"
                np.testing.assert_array_equal(g, want, err_msg=f"{k} at step {step}")


# -- precision_recall against Fluid 1.8.5 ---------------------------------------------------

# PaddleRec 1.8.5's PrecisionRecall, spelled out: topk(k=1) of the probabilities, casts to
# int32 (Fluid's kernel reads int32 only), and one precision_recall op per spec["configs"]
# entry (Weights fed or not; StatesInfo none, fed, or a persistable var carried over the
# batches by an assign, as PaddleRec does). Every output of every op is written per batch.
FLUID18_PR_SCRIPT = r"""
import json, sys
import numpy as np
spec = json.loads(sys.argv[1])
if spec["framework"] == "placegroup":
    import placegroup as fluid
else:
    import paddle.fluid as fluid
d = np.load(spec["data"])
c = spec["classes"]
main, startup = fluid.Program(), fluid.Program()
fetch = {}
with fluid.program_guard(main, startup):
    block = main.global_block()
    probs = fluid.data(name="probs", shape=[-1, c], dtype="float32")
    label = fluid.data(name="label", shape=[-1, 1], dtype="int64")
    weight = fluid.data(name="weight", shape=[-1, 1], dtype="float32")
    fed = fluid.data(name="fed", shape=[c, 4], dtype="float32")
    max_probs, indices = fluid.layers.topk(probs, k=1)
    indices = fluid.layers.cast(indices, dtype="int32")
    label32 = fluid.layers.cast(label, dtype="int32")
    fetch["indices"] = indices
    for k, cfg in enumerate(spec["configs"]):
        ins = {"MaxProbs": [max_probs], "Indices": [indices], "Labels": [label32]}
        if cfg["weights"]:
            ins["Weights"] = [weight]
        if cfg["states"] == "fed":
            ins["StatesInfo"] = [fed]
        elif cfg["states"] == "carried":
            ins["StatesInfo"] = [fluid.layers.create_global_var([c, 4], 0.0, "float32", persistable=True,
                                                                name="states%d" % k)]
        outs = {}
        for slot, shape in (("BatchMetrics", [6]), ("AccumMetrics", [6]), ("AccumStatesInfo", [c, 4])):
            outs[slot] = block.create_var(name="%s%d" % (slot, k), shape=shape, dtype="float32")
            fetch["%s%d" % (slot, k)] = outs[slot]
        block.append_op(type="precision_recall", inputs=ins, outputs={s: [v] for s, v in outs.items()},
                        attrs={"class_number": c})
        if cfg["states"] == "carried":
            fluid.layers.assign(outs["AccumStatesInfo"], ins["StatesInfo"][0])
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
keys = sorted(fetch)
out = {}
for step in range(len(d["probs"])):
    feed = {"probs": d["probs"][step], "label": d["label"][step], "weight": d["weight"][step], "fed": d["fed"][step]}
    for key, got in zip(keys, exe.run(main, feed=feed, fetch_list=[fetch[k] for k in keys])):
        out["%s.%d" % (key, step)] = np.array(got)
np.savez(spec["out"], **out)
"""

FLUID18_PR_CONFIGS = ({"weights": False, "states": None}, {"weights": True, "states": None},
                      {"weights": False, "states": "carried"}, {"weights": True, "states": "carried"},
                      {"weights": True, "states": "fed"})


@pytest.mark.paddle
def test_precision_recall_matches_fluid_1_8_5(fluid18_python, tmp_path):
    """The same 4 batches through Fluid 1.8.5's precision_recall op and ours, after topk as in
    PaddleRec: probabilities on a coarse grid (rows with tied maxima, whose lowest index wins),
    a class never predicted nor labelled, float weights (some 0), and states none, fed, or
    carried over the batches. Every output is equal to the bit, the metrics float64 as Fluid's
    (NOTE(precision-recall))."""
    import sys
    rng = np.random.default_rng(3)
    steps, n, c = 4, 40, 6
    probs = np.round(rng.random((steps, n, c)), 1).astype(np.float32)  # ties within a row
    probs[:, :, c - 1] = 0.0  # class c - 1: never predicted
    probs[0, 0] = [0.5, 0.5, 0.5, 0.5, 0.5, 0.0]
    data = {"probs": probs, "label": rng.integers(0, c - 1, (steps, n, 1)).astype(np.int64),
            "weight": (rng.random((steps, n, 1)) * rng.choice([0.0, 1.0, 10.0], (steps, n, 1))).astype(np.float32),
            "fed": rng.random((steps, c, 4)).astype(np.float32) * 50}
    (tmp_path / "fluid").mkdir()
    (tmp_path / "ours").mkdir()
    common = {"timeout": 300, "classes": c, "configs": list(FLUID18_PR_CONFIGS)}
    theirs = run_reference(fluid18_python, FLUID18_PR_SCRIPT, tmp_path / "fluid", data, framework="fluid", **common)
    ours = run_reference(sys.executable, FLUID18_PR_SCRIPT, tmp_path / "ours", data, framework="placegroup", **common)
    assert sorted(ours) == sorted(theirs) and len(theirs) == steps * (1 + 3 * len(FLUID18_PR_CONFIGS))
    assert (theirs["indices.0"] == 0).any()  # the tied row took class 0, as did ours (checked below)
    for key in sorted(theirs):
        assert ours[key].dtype == theirs[key].dtype, key
        np.testing.assert_array_equal(ours[key], theirs[key], err_msg=key)
    assert theirs["BatchMetrics0.0"].dtype == np.float64 and theirs["AccumStatesInfo0.0"].dtype == np.float32
    # carried states add up every batch; the last one's accumulated TP+FP is every row's weight
    last = theirs[f"AccumStatesInfo3.{steps - 1}"]
    assert last[:, :2].sum() == pytest.approx(float(data["weight"].sum()), rel=1e-5)
    assert (last[c - 1, [0, 1, 3]] == 0).all()
