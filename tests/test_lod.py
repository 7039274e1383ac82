"""LoD tensors end to end : the value type, LoD through the program,
feeding and fetching, and a text classifier over the first sequence ops.

* the ``LoDTensor`` value (placegroup/values.py) as ``fluid.core.LoDTensor``, with Fluid 1.8's
  methods and errors that say what is wrong; ``create_lod_tensor`` and
  ``create_random_int_lodtensor`` as fluid/lod_tensor.py;
* ``lod_level`` at build time (NOTE(lod-rule) in ops/registry.py), shown by the printer and
  ``placegroup dump``;
* ``DataFeeder`` building LoD from lists of lists, and its depth errors;
* a classifier (embedding -> average, max and attention pooling -> fc -> softmax loss) that
  trains from DataFeeder and from create_lod_tensor feeds alike; every bad feed of
  NOTE(lod-feed) fails before any op runs; fetches with and without ``return_numpy``;
* only ops that touch sequences take the LoD path (NOTE(lod-run)); a LoD value is never sent
  to another process (TODO(#15): the wire slice);
* trainers of a transpiled job pool their own sequences and give one process's losses;
* (paddle-marked) the sequence ops' outputs, LoDs and gradients, and the classifier's per-step
  losses, equal Paddle's on the same data and initial values: Paddle 2.6
  (``PLACEGROUP_PADDLE_PYTHON``) and Fluid 1.8.5 itself (``PLACEGROUP_PADDLE18_PYTHON``), whose
  classifier is fed by its own DataFeeder from the same samples.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import OpError, ProgramError
from placegroup.ir.edges import OutEdge
from placegroup.executor.interpreter import Interpreter
from placegroup.executor.plan import LoDOp, PlannedOp, compile_plan
from placegroup.layers import sequence as seq
from placegroup.lod_tensor import create_lod_tensor, create_random_int_lodtensor
from placegroup.tools.dump import render
from placegroup.values import LoDTensor
from tests.cases import sequence as sequence_cases
from tests.paddle_ref.reference import run_reference

V, D, C = 30, 6, 3


# -- the value -------------------------------------------------------------------------------


def test_the_value_is_fluids_lod_tensor():
    assert fluid.core.LoDTensor is LoDTensor and fluid.LoDTensor is LoDTensor and fluid.core.Tensor is LoDTensor
    t = fluid.core.LoDTensor()
    assert not t._is_initialized() and t.lod() == [] and t.has_valid_recursive_sequence_lengths()
    with pytest.raises(ValueError, match="holds no value yet"):
        t.shape()
    t.set(np.arange(10, dtype="float32").reshape(5, 2), fluid.CPUPlace())
    t.set_recursive_sequence_lengths([[2, 3]])
    assert t.lod() == [[0, 2, 5]] and t.recursive_sequence_lengths() == [[2, 3]]
    assert t.shape() == [5, 2] and t._dtype() == np.float32 and t.lod_level == 1
    np.testing.assert_array_equal(np.array(t), np.arange(10).reshape(5, 2))
    t.set_lod([[0, 2], [0, 1, 5]])  # two levels, offsets
    assert t.recursive_sequence_lengths() == [[2], [1, 4]] and t.has_valid_recursive_sequence_lengths()
    t.set(np.zeros((4, 2), "float32"))  # Fluid keeps the LoD on set; it no longer fits
    assert not t.has_valid_recursive_sequence_lengths()
    assert LoDTensor([[2, 3]]).recursive_sequence_lengths() == [[2, 3]]  # Fluid's LoDTensor(lengths)
    assert "recursive_sequence_lengths=[[2], [1, 4]]" in repr(t)


BAD_LODS = [
    ([[1, 3, 5]], 5, "level 0 starts at 1, not at 0"),
    ([[0, 3, 2, 5]], 5, "level 0 is not monotone: offset 3 at position 1 is followed by 2"),
    ([[0, 2, 4]], 5, "the last level ends at 4, but the data has 5 rows"),
    ([[0, 1, 3], [0, 2, 5]], 5, r"level 0 ends at 3, but level 1 holds 2 sequences"),
    ([[]], 0, "level 0 holds no offsets"),
]


@pytest.mark.parametrize("lod, rows, match", BAD_LODS)
def test_invalid_lods_say_what_is_wrong(lod, rows, match):
    with pytest.raises(ValueError, match=match):
        LoDTensor(np.zeros((rows, 1)), lod)
    t = LoDTensor(np.zeros((rows, 1)))
    with pytest.raises(ValueError, match=match):
        t.set_lod(lod)
    assert t.lod() == []  # a refused LoD leaves the value as it was
    with pytest.raises(ValueError, match="lengths must be >= 0"):
        t.set_recursive_sequence_lengths([[3, -1]])


def test_create_lod_tensor_from_arrays_lists_and_lod_tensors():
    place = fluid.CPUPlace()
    data = np.arange(5, dtype="int64").reshape(5, 1)
    t = create_lod_tensor(data, [[2, 3]], place)
    data[0] = 99  # the tensor holds a copy
    assert t.lod() == [[0, 2, 5]] and np.array(t)[0, 0] == 0
    from_list = create_lod_tensor([[0, 1], [2, 3, 4]], [[2, 3]], place)
    assert from_list.shape() == [5, 1] and from_list.lod() == [[0, 2, 5]]  # Fluid appends a dim of 1
    np.testing.assert_array_equal(np.array(from_list), np.array(t))
    again = create_lod_tensor(t, [[1, 4]], place)
    assert again.recursive_sequence_lengths() == [[1, 4]] and t.recursive_sequence_lengths() == [[2, 3]]
    two = create_lod_tensor([[[1, 2], [3]], [[4, 5, 6]]], [[2, 1], [2, 1, 3]], place)
    assert two.lod() == [[0, 2, 3], [0, 2, 3, 6]] and two.shape() == [6, 1]
    with pytest.raises(ValueError, match=r"sequences of lengths \[\[2, 1\]\], but recursive_seq_lens is"):
        create_lod_tensor([[1, 2], [3]], [[2, 2]], place)
    with pytest.raises(ValueError, match="nested 1 level.* recursive_seq_lens has 2"):
        create_lod_tensor([[1, 2], [3]], [[2, 1], [1, 1, 1]], place)
    with pytest.raises(ValueError, match="ends at 5, but the data has 4 rows"):
        create_lod_tensor(np.zeros((4, 1)), [[2, 3]], place)
    with pytest.raises(TypeError, match="a LoDTensor, a numpy array or a list"):
        create_lod_tensor("abc", [[3]], place)
    assert fluid.layers.data  # the API the doc examples use


def test_create_random_int_lodtensor_draws_ints_in_the_closed_range():
    np.random.seed(5)
    t = create_random_int_lodtensor([[2, 3]], base_shape=[30], place=fluid.CPUPlace(), low=0, high=3)
    a = np.array(t)
    assert t.shape() == [5, 30] and a.dtype == np.int64 and t.lod() == [[0, 2, 5]]
    assert a.min() == 0 and a.max() == 3  # both ends drawn, as random_integers(low, high)
    np.random.seed(5)
    np.testing.assert_array_equal(np.array(create_random_int_lodtensor([[2, 3]], [30], None, 0, 3)), a)
    with pytest.raises(TypeError, match="base_shape should be a list"):
        create_random_int_lodtensor([[2]], (3,), None, 0, 1)


# -- LoD through the program -----------------------------------------------------------------


def _levels(program) -> dict:
    return {n: v.lod_level for n, v in program.global_block().vars.items() if v.lod_level}


def test_lod_level_follows_each_ops_rule_and_is_printed():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
        para = fluid.layers.data("para", [4], dtype="float32", lod_level=2)
        label = fluid.layers.data("label", [1], dtype="int64")
        emb = fluid.layers.embedding(words, size=[V, D])              # keeps the ids' LoD
        hidden = fluid.layers.fc(emb, 4, act="relu")                  # mul, add, relu keep it
        weights = seq.sequence_softmax(fluid.layers.fc(hidden, 1))
        pooled = seq.sequence_pool(fluid.layers.elementwise_mul(hidden, weights), "sum")   # one level less
        sentences = seq.sequence_pool(para, "max")                    # 2 levels -> 1
        doc = seq.sequence_last_step(sentences)                       # 1 -> 0
        loss = fluid.layers.mean(fluid.layers.cross_entropy(
            fluid.layers.fc(fluid.layers.concat([pooled, doc], axis=1), C, act="softmax"), label))
        fluid.optimizer.SGD(0.1).minimize(loss)
    got = _levels(main)
    assert got["words"] == 1 and got["para"] == 2 and got[emb.name] == 1 and got[hidden.name] == 1
    assert got[weights.name] == 1 and got[sentences.name] == 1
    for dense in (pooled, doc, loss, label):
        assert dense.name not in got, dense.name
    assert "embedding_0.w_0@GRAD" not in got and "fc_0.w_0@GRAD" not in got  # weights are no sequences
    text = str(main)
    assert "var words : int64[-1, 1] lod_level=1 data" in text
    assert "var para : float32[-1, 4] lod_level=2 data" in text
    assert f"var {emb.name} : float32[-1, {D}] lod_level=1\n" in text
    assert f"var {loss.name} : float32[1]\n" in text
    assert "var words : int64[-1, 1] lod_level=1 data" in render(main, "text")
    doc_json = json.loads(render(main, "json"))
    assert {v["name"]: v["lod_level"] for v in doc_json["blocks"][0]["vars"]}["para"] == 2
    assert _levels(fluid.Program.from_bytes(main.to_bytes())) == got == _levels(main.clone())


# -- DataFeeder ------------------------------------------------------------------------------


def _feeder_program():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        fluid.layers.data("words", [1], dtype="int64", lod_level=1)
        fluid.layers.data("vecs", [3], dtype="float32", lod_level=1)
        fluid.layers.data("para", [1], dtype="int64", lod_level=2)
        fluid.layers.data("label", [1], dtype="int64")
    return main


def test_data_feeder_makes_lod_from_lists_of_lists():
    feeder = fluid.DataFeeder(["words", "vecs", "para", "label"], fluid.CPUPlace(), program=_feeder_program())
    out = feeder.feed([([1, 2, 3], [[0, 0, 0], [1, 1, 1]], [[7], [8, 9]], 0),
                       ([4], np.ones((1, 3)), [[5, 6, 7]], 1),
                       ([], np.zeros((0, 3)), [[], [1]], 2)])
    words, vecs, para = out["words"], out["vecs"], out["para"]
    assert isinstance(words, LoDTensor) and words.shape() == [4, 1] and np.array(words).dtype == np.int64
    assert words.recursive_sequence_lengths() == [[3, 1, 0]]
    np.testing.assert_array_equal(np.array(words)[:, 0], [1, 2, 3, 4])
    assert vecs.shape() == [3, 3] and vecs._dtype() == np.float32 and vecs.lod() == [[0, 2, 3, 3]]
    assert para.recursive_sequence_lengths() == [[2, 1, 2], [1, 2, 3, 0, 1]] and para.shape() == [7, 1]
    assert out["label"].shape == (3, 1)  # dense vars stay arrays


FEEDER_ERRORS = [
    (["words"], [([1, 2],), (3,)], r"sample 1: the element for var 'words' .* is nested 0 levels deep "
                                  r"\(int64 3|int 3"),
    (["para"], [([1, 2],)], r"sample 0: the element for var 'para' .* nested 1 level deep .* lod_level 2 wants "
                            r"2 levels of lists"),
    (["vecs"], [([1, 2, 3, 4],)], r"the steps of the sequences for var 'vecs' .* stack into shape \[4\], of rank 1, "
                                  r".* do not fill \[-1, 3\]: each step needs 3 values"),
    (["vecs"], [([[1, 2, 3], [4, 5]],)], r"sample 0: a sequence for var 'vecs' .* is not float32 steps of one shape"),
    (["vecs"], [([[1, 2, 3]],), ([[[4, 5, 6]]],)], r"steps of the sequences for var 'vecs' .* do not stack into one "
                                                   r"array: sequence 0's shape is \[3\] and sequence 1's \[1, 3\]"),
]


@pytest.mark.parametrize("names, batch, match", FEEDER_ERRORS)
def test_data_feeder_depth_errors_name_the_sample_and_the_var(names, batch, match):
    with pytest.raises(ProgramError, match=match):
        fluid.DataFeeder(names, None, program=_feeder_program()).feed(batch)


# -- the classifier --------------------------------------------------------------------------


def _init(seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"emb": rng.normal(0, 0.5, (V, D)).astype("float32"), "att.w": rng.normal(0, 0.5, (D, 1)).astype("float32"),
            "att.b": np.zeros(1, "float32"), "out.w": rng.normal(0, 0.3, (3 * D, C)).astype("float32"),
            "out.b": np.zeros(C, "float32")}


def _batches(steps: int, batch: int = 8, seed: int = 1) -> list:
    """Sentences of 1..7 word ids; class c's sentences hold one of its key words (3c..3c+2),
    the rest noise from [9, V)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(steps):
        samples = []
        for _ in range(batch):
            c = int(rng.integers(0, C))
            words = list(rng.integers(9, V, size=int(rng.integers(0, 7))))
            words.insert(int(rng.integers(0, len(words) + 1)), 3 * c + int(rng.integers(0, 3)))
            samples.append(([int(w) for w in words], c))
        out.append(samples)
    return out


def build_classifier(init: dict, lr: float = 0.5):
    """words (lod_level 1) -> embedding -> [average, max, attention-weighted sum] -> fc ->
    softmax cross entropy, SGD; the parameters named as in the Paddle script."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        def attr(n):
            return fluid.ParamAttr(name=n, initializer=fluid.initializer.NumpyArrayInitializer(init[n]))

        words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1], dtype="int64")
        emb = fluid.layers.embedding(words, size=[V, D], param_attr=attr("emb"))
        weights = seq.sequence_softmax(fluid.layers.fc(emb, 1, param_attr=attr("att.w"), bias_attr=attr("att.b")))
        att = seq.sequence_pool(fluid.layers.elementwise_mul(emb, weights), "sum")
        h = fluid.layers.concat([seq.sequence_pool(emb, "average"), seq.sequence_pool(emb, "max"), att], axis=1)
        logits = fluid.layers.fc(h, C, param_attr=attr("out.w"), bias_attr=attr("out.b"))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        fluid.optimizer.SGD(lr).minimize(loss)
    return main, startup, words, label, emb, loss


def _as_lod_feed(samples) -> dict:
    ids = np.array([w for s, _ in samples for w in s], "int64").reshape(-1, 1)
    return {"words": create_lod_tensor(ids, [[len(s) for s, _ in samples]], fluid.CPUPlace()),
            "label": np.array([[c] for _, c in samples], "int64")}


def train(batches, feed_of) -> list:
    main, startup, words, label, _, loss = build_classifier(_init())
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return [float(exe.run(main, feed=feed_of(b, words, label, main), fetch_list=[loss], scope=scope)[0][0])
            for b in batches]


def _by_feeder(batch, words, label, main):
    return fluid.DataFeeder([words, label], fluid.CPUPlace(), program=main).feed(batch)


def test_the_classifier_trains_and_both_feeds_give_the_same_losses():
    batches = _batches(40)
    fed = train(batches, _by_feeder)
    made = train(batches, lambda b, *_: _as_lod_feed(b))
    assert fed == made
    assert np.mean(fed[-8:]) < 0.6 * np.mean(fed[:8]), fed


def test_fetches_give_lod_tensors_with_return_numpy_false():
    main, startup, _, _, emb, loss = build_classifier(_init())
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feed = _as_lod_feed(_batches(1)[0])
    got_emb, got_loss = exe.run(main, feed=feed, fetch_list=[emb, loss], scope=scope, return_numpy=False)
    assert isinstance(got_emb, LoDTensor) and got_emb.lod() == feed["words"].lod()
    assert got_emb.shape() == [feed["words"].shape()[0], D]
    assert isinstance(got_loss, LoDTensor) and got_loss.lod() == [] and np.array(got_loss).shape == (1,)
    with pytest.raises(ProgramError, match=rf"fetch '{emb.name}' holds LoD information .* return_numpy=False"):
        exe.run(main, feed=feed, fetch_list=[emb], scope=scope)
    t = scope.find_var("words").get_tensor()
    assert t.lod() == feed["words"].lod() and t.shape() == feed["words"].shape()


def _words(lengths, rows=None) -> LoDTensor:
    rows = sum(lengths[-1]) if rows is None else rows
    return LoDTensor.from_lengths(np.arange(rows, dtype="int64").reshape(-1, 1) % V, lengths)


def _stale_lod() -> LoDTensor:
    t = _words([[2, 3]])
    t.set(np.zeros((4, 1), "int64"))  # Fluid keeps the LoD on set: it no longer fits
    return t


BAD_FEEDS = [
    (lambda: np.zeros((5, 1), "int64"), r"feed 'words' is declared lod_level=1 \(a batch of sequences\), but it "
                                        r"was fed a ndarray of shape \[5, 1\]: build it with "
                                        r"fluid.create_lod_tensor\(.*DataFeeder"),
    (lambda: [[1], [2]], r"feed 'words' is declared lod_level=1 .* fed a list"),
    (lambda: LoDTensor(np.zeros((5, 1), "int64")), "feed 'words' .* fed a LoDTensor with no LoD"),
    (lambda: _words([[1, 1], [2, 3]]), r"feed 'words' has a LoD of 2 levels \(sequence lengths \[\[1, 1\], "
                                       r"\[2, 3\]\]\), but the var is declared lod_level=1"),
    (_stale_lod, r"feed 'words': its LoD \(sequence lengths \[\[2, 3\]\]\) does not fit its data of shape "
                 r"\[4, 1\]: the last level ends at 5, but the data has 4 rows"),
    (lambda: LoDTensor(), "feed 'words' is a LoDTensor that holds no data"),
]


@pytest.mark.parametrize("make, match", BAD_FEEDS)
def test_bad_feeds_fail_before_any_op_runs(make, match):
    main, startup, *_, loss = build_classifier(_init())
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    before = np.array(scope.find_var("emb").get_tensor())
    with pytest.raises(ProgramError, match=match):
        exe.run(main, feed={"words": make(), "label": np.zeros((2, 1), "int64")}, fetch_list=[loss], scope=scope)
    np.testing.assert_array_equal(np.array(scope.find_var("emb").get_tensor()), before)  # no sgd ran
    assert loss.name not in scope.vars  # nor any other op


def test_a_lod_fed_to_a_var_declared_without_one_is_kept():
    """fluid.data's lod_level defaults to 0 and Fluid 1.8 keeps a fed LoD there (NOTE(lod-feed))."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.data("x", [None, 2], "float32")
        y = fluid.layers.scale(x, 2.0)
        pooled = seq.sequence_pool(y, "sum")
    assert x.lod_level == 0 and y.lod_level == 0
    exe = fluid.Executor()
    data = np.arange(10, dtype="float32").reshape(5, 2)
    got, yv = exe.run(main, feed={"x": LoDTensor.from_lengths(data, [[2, 3]])}, fetch_list=[pooled, y],
                      return_numpy=False)
    np.testing.assert_allclose(np.array(got), [2 * data[:2].sum(0), 2 * data[2:].sum(0)])
    assert yv.recursive_sequence_lengths() == [[2, 3]]
    with pytest.raises(OpError, match=r"sequence_pool: input X is a dense array, not a sequence"):
        exe.run(main, feed={"x": data}, fetch_list=[pooled])


def test_only_ops_that_touch_sequences_take_the_lod_path():
    main, *_ = build_classifier(_init())
    plan = compile_plan(main, None, None, np)
    lod_ops = {p.op.type for p in plan.ops if isinstance(p, LoDOp)}
    assert {"lookup_table", "sequence_pool", "sequence_softmax", "mul", "elementwise_mul", "sequence_pool_grad",
            "lookup_table_grad"} <= lod_ops
    assert not lod_ops & {"concat", "softmax_with_cross_entropy", "mean", "sgd", "concat_grad"}
    dense = fluid.Program()
    with fluid.program_guard(dense, fluid.Program()):
        x = fluid.layers.data("x", [13])
        fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(fluid.layers.fc(x, 1)))
    assert all(type(p) is PlannedOp for p in compile_plan(dense, None, None, np).ops)  # NOTE(lean-loop)


def test_scope_tensors_read_and_set_the_lod():
    scope = fluid.Scope()
    t = scope.var("s").get_tensor()
    t.set(np.zeros((5, 2), "float32"), fluid.CPUPlace())
    assert t.lod() == [] and t.recursive_sequence_lengths() == [] and t.has_valid_recursive_sequence_lengths()
    t.set_recursive_sequence_lengths([[2, 3]])
    assert t.lod() == [[0, 2, 5]] and isinstance(scope.vars["s"], LoDTensor) and t.shape() == [5, 2]
    t.set(np.ones((5, 2), "float32"))  # same rows: the LoD stays
    assert t.lod() == [[0, 2, 5]] and np.array(t).sum() == 10
    t.set(np.ones((3, 2), "float32"))  # other rows: a LoD that no longer fits is dropped
    assert t.lod() == []
    with pytest.raises(ValueError, match="ends at 5, but the data has 3 rows"):
        t.set_lod([[0, 2, 5]])
    t.set(_words([[1, 2]]))
    assert t.lod() == [[0, 1, 3]] and t._dtype() == np.int64
    t.set_lod([])
    assert not isinstance(scope.vars["s"], LoDTensor)


class _Mailbox:
    def __init__(self):
        self.posted = []

    def post(self, peer, var, version, value):
        self.posted.append((peer, var))


class _Link:
    wait_timeout = None

    def __init__(self):
        self.mailbox = _Mailbox()


def test_a_lod_value_is_posted_whole_to_another_process():
    interp = Interpreter(me="trainer:0", link=_Link(), xp=np)
    vals = {"dense": np.zeros(3), "emb": _words([[2, 3]])}
    interp._deliver_all([OutEdge("dense", ("pserver@1",), "broadcast"), OutEdge("emb", ("pserver@1",), "broadcast")],
                        vals, 0)
    assert interp.mailbox.posted == [("pserver@1", "dense"), ("pserver@1", "emb")]  # framed with its LoD


# -- against Paddle 2.6 ----------------------------------------------------------------------

PADDLE_CLASSIFIER = r"""
import json, sys
import numpy as np
import paddle
paddle.enable_static()
spec = json.loads(sys.argv[1])
d = np.load(spec["data"])
V, D, C = spec["V"], spec["D"], spec["C"]
A = paddle.nn.initializer.Assign
attr = lambda n: paddle.ParamAttr(name=n, initializer=A(d[n]))
main, startup = paddle.static.Program(), paddle.static.Program()
with paddle.static.program_guard(main, startup):
    words = paddle.static.data("words", [-1], "int64", lod_level=1)
    label = paddle.static.data("label", [-1, 1], "int64")
    emb = paddle.static.nn.embedding(words, size=[V, D], param_attr=attr("emb"))
    weights = paddle.static.nn.sequence_softmax(paddle.static.nn.fc(emb, 1, weight_attr=attr("att.w"),
                                                                    bias_attr=attr("att.b")))
    att = paddle.static.nn.sequence_pool(paddle.multiply(emb, weights), "sum")
    h = paddle.concat([paddle.static.nn.sequence_pool(emb, "average"), paddle.static.nn.sequence_pool(emb, "max"),
                       att], axis=1)
    logits = paddle.static.nn.fc(h, C, weight_attr=attr("out.w"), bias_attr=attr("out.b"))
    loss = paddle.mean(paddle.nn.functional.softmax_with_cross_entropy(logits, label))
    paddle.optimizer.SGD(learning_rate=spec["lr"]).minimize(loss)
place = paddle.CPUPlace()
exe = paddle.static.Executor(place)
exe.run(startup)
losses = []
for s in range(spec["steps"]):
    t = paddle.base.create_lod_tensor(d[f"ids{s}"].reshape(-1), [d[f"lens{s}"].tolist()], place)
    l, = exe.run(main, feed={"words": t, "label": d[f"label{s}"]}, fetch_list=[loss])
    losses.append(float(np.array(l).reshape(-1)[0]))
np.savez(spec["out"], losses=np.array(losses))
"""

# The same model in Fluid 1.8.5's own API, fed by its DataFeeder from the same samples.
FLUID18_CLASSIFIER = r"""
import json, sys
import numpy as np
import paddle.fluid as fluid
spec = json.loads(sys.argv[1])
d = np.load(spec["data"])
V, D, C = spec["V"], spec["D"], spec["C"]
attr = lambda n: fluid.ParamAttr(name=n, initializer=fluid.initializer.NumpyArrayInitializer(d[n]))
main, startup = fluid.Program(), fluid.Program()
with fluid.program_guard(main, startup):
    words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
    label = fluid.layers.data("label", [1], dtype="int64")
    emb = fluid.layers.embedding(words, size=[V, D], param_attr=attr("emb"))
    weights = fluid.layers.sequence_softmax(fluid.layers.fc(emb, 1, param_attr=attr("att.w"), bias_attr=attr("att.b")))
    att = fluid.layers.sequence_pool(fluid.layers.elementwise_mul(emb, weights), "sum")
    h = fluid.layers.concat([fluid.layers.sequence_pool(emb, "average"), fluid.layers.sequence_pool(emb, "max"), att],
                            axis=1)
    logits = fluid.layers.fc(h, C, param_attr=attr("out.w"), bias_attr=attr("out.b"))
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
    fluid.optimizer.SGD(spec["lr"]).minimize(loss)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(startup)
feeder = fluid.DataFeeder([words, label], fluid.CPUPlace())
losses = [float(exe.run(main, feed=feeder.feed([tuple(x) for x in b]), fetch_list=[loss])[0][0])
          for b in spec["batches"]]
np.savez(spec["out"], losses=np.array(losses))
"""

FLUID18_SEQUENCE_OPS = r"""
import json, sys
import numpy as np
import paddle.fluid as fluid
spec = json.loads(sys.argv[1])
d = np.load(spec["data"])
place = fluid.CPUPlace()
out, lods = {}, {}
for case in spec["cases"]:
    cid, a = case["id"], case["attrs"]
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data("x", [-1] + case["rest"], "float32", lod_level=len(case["lengths"]))
        x.stop_gradient = False
        if case["op"] == "sequence_pool":
            y = fluid.layers.sequence_pool(x, a["pooltype"].lower(), pad_value=a["pad_value"])
        else:
            y = fluid.layers.sequence_softmax(x)
        cot = fluid.data("cot", [-1] + case["rest"], "float32")
        g, = fluid.gradients([fluid.layers.reduce_sum(y * cot)], [x])
    exe = fluid.Executor(place)
    exe.run(startup)
    t = fluid.create_lod_tensor(d[cid + "/x"], case["lengths"], place)
    yv, gv = exe.run(main, feed={"x": t, "cot": d[cid + "/cot"]}, fetch_list=[y, g], return_numpy=False)
    out[cid + "/out"], out[cid + "/grad"], lods[cid] = np.array(yv), np.array(gv), yv.lod()
np.savez(spec["out"], **out)
json.dump(lods, open(spec["lods"], "w"))
"""

PADDLE_SEQUENCE_OPS = r"""
import json, sys
import numpy as np
import paddle
paddle.enable_static()
spec = json.loads(sys.argv[1])
d = np.load(spec["data"])
place = paddle.CPUPlace()
out, lods = {}, {}
for case in spec["cases"]:
    cid, a = case["id"], case["attrs"]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        x = paddle.static.data("x", [-1] + case["rest"], "float32", lod_level=len(case["lengths"]))
        x.stop_gradient = False
        if case["op"] == "sequence_pool":
            y = paddle.static.nn.sequence_pool(x, a["pooltype"].lower(), pad_value=a["pad_value"])
        else:
            y = paddle.static.nn.sequence_softmax(x)
        cot = paddle.static.data("cot", [-1] + case["rest"], "float32")
        g, = paddle.static.gradients([paddle.sum(y * cot)], [x])
    exe = paddle.static.Executor(place)
    exe.run(startup)
    t = paddle.base.create_lod_tensor(d[cid + "/x"], case["lengths"], place)
    yv, gv = exe.run(main, feed={"x": t, "cot": d[cid + "/cot"]}, fetch_list=[y, g], return_numpy=False)
    out[cid + "/out"], out[cid + "/grad"], lods[cid] = np.array(yv), np.array(gv), yv.lod()
np.savez(spec["out"], **out)
json.dump(lods, open(spec["lods"], "w"))
"""


# (the fixture that names its python, classifier script, sequence-ops script) per reference
REFERENCES = [pytest.param("paddle26_python", PADDLE_CLASSIFIER, PADDLE_SEQUENCE_OPS, id="paddle2.6"),
              pytest.param("fluid18_python", FLUID18_CLASSIFIER, FLUID18_SEQUENCE_OPS, id="fluid1.8.5")]


@pytest.mark.paddle
@pytest.mark.parametrize("reference, classifier, _", REFERENCES)
def test_the_classifiers_losses_equal_paddles(tmp_path, request, reference, classifier, _):
    python = request.getfixturevalue(reference)  # skips when its variable is unset
    batches = _batches(30)
    data = dict(_init())
    for s, b in enumerate(batches):
        feed = _as_lod_feed(b)
        lengths = feed["words"].recursive_sequence_lengths()[0]
        data.update({f"ids{s}": np.array(feed["words"]), f"lens{s}": np.array(lengths), f"label{s}": feed["label"]})
    theirs = run_reference(python, classifier, tmp_path, data, timeout=600, V=V, D=D, C=C, lr=0.5,
                           steps=len(batches), batches=batches)["losses"]
    ours = train(batches, _by_feeder)
    np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)


@pytest.mark.paddle
@pytest.mark.parametrize("reference, _, script", REFERENCES)
def test_the_sequence_ops_equal_paddles(tmp_path, request, reference, _, script):
    python = request.getfixturevalue(reference)  # skips when its variable is unset
    from tests.test_ops import _data, _run_grad_ops, _sample, run_kernel
    from placegroup.ops.registry import GradOpView, get_op_def

    rng = np.random.default_rng(3)
    data, specs, ours = {}, [], {}
    # the one-input ops this script builds (tests/test_sequence_layers.py compares the others)
    for case in [c for c in sequence_cases.CASES if c.op in ("sequence_pool", "sequence_softmax")]:
        cid, attrs = case.id, {**get_op_def(case.op).attrs, **case.attrs}
        x = _sample(case, 0, np.float32)["X"]
        out = run_kernel(case.op, {"X": x}, attrs)
        cot = rng.standard_normal(_data(out["Out"]).shape).astype(np.float32)
        scope = {"X": x, **{k: _data(v) for k, v in out.items()}, "Out@GRAD": cot}
        view = GradOpView(case.op, {"X": ["X"]}, {s: [s] for s in out}, attrs, frozenset(["X"]), lambda n: n + "@GRAD")
        grads = _run_grad_ops(get_op_def(case.op).grad(view), scope)
        # a kernel returns the LoD it makes; the executor gives a "share" output X's (NOTE(lod-run))
        lod = (out["Out"].lod() if isinstance(out["Out"], LoDTensor)
               else x.lod() if get_op_def(case.op).lod == "share" else [])
        ours[cid] = (_data(out["Out"]), lod, grads["X@GRAD"])
        data[cid + "/x"], data[cid + "/cot"] = x.data, cot
        specs.append({"id": cid, "op": case.op, "attrs": attrs, "rest": list(x.data.shape[1:]),
                      "lengths": x.recursive_sequence_lengths()})
    theirs = run_reference(python, script, tmp_path, data, timeout=600, lods=str(tmp_path / "lods.json"), cases=specs)
    lods = json.loads((tmp_path / "lods.json").read_text())
    for cid, (out, lod, grad) in ours.items():
        np.testing.assert_allclose(out, theirs[cid + "/out"], rtol=1e-5, atol=1e-6, err_msg=cid)
        assert lod == lods[cid], cid
        np.testing.assert_allclose(grad, theirs[cid + "/grad"], rtol=1e-5, atol=1e-6, err_msg=cid)


def test_trainers_of_a_transpiled_job_pool_their_own_sequences():
    """Sequences stay on the trainer that reads them (only the parameters' gradients and values
    cross): 2 trainers + 1 pserver, each trainer fed half of every batch's sentences, give
    the mean of their losses equal to one process's (the loss is a mean over sentences)."""
    import threading

    from placegroup.comm.loopback import LoopbackNetwork

    batches = _batches(8)
    local = train(batches, _by_feeder)
    main, startup, words, label, _, loss = build_classifier(_init())
    net, ps, losses, errors = LoopbackNetwork(), "127.0.0.1:7310", {}, []

    def role(name: str, k: int) -> None:
        try:
            t = fluid.DistributeTranspiler()
            # each thread stands for a process: transpile rewrites what it is given, so a copy each
            t.transpile(trainer_id=k, program=main.clone(), startup_program=startup.clone(), pservers=ps, trainers=2)
            ep = ps if name == "pserver" else None
            prog, sprog = t.get_program(ep, name), t.get_startup_program(ep, name)
            exe, scope = fluid.Executor(network=net), fluid.Scope()
            exe.run(sprog, scope=scope)
            if name == "pserver":
                exe.run(prog, scope=scope)
            else:
                feeder = fluid.DataFeeder([words, label], fluid.CPUPlace(), program=main)
                losses[k] = [float(exe.run(prog, feed=feeder.feed(b[k * 4:(k + 1) * 4]), fetch_list=[loss],
                                           scope=scope)[0][0]) for b in batches]
            exe.close()
        except BaseException as e:  # noqa: BLE001 - handed to the test thread
            errors.append(e)

    jobs = [threading.Thread(target=role, args=a, daemon=True) for a in (("pserver", 0), ("trainer", 0),
                                                                          ("trainer", 1))]
    for j in jobs:
        j.start()
    for j in jobs:
        j.join(120)
    assert not errors, errors[0]
    np.testing.assert_allclose((np.array(losses[0]) + np.array(losses[1])) / 2, local, rtol=1e-5, atol=1e-6)
