"""Sparse training in one process: ids -> embedding(is_sparse=True) -> fc -> softmax cross
entropy -> mean, run by the Executor, against the same model with a dense gradient.

* SGD, Momentum, Adagrad and Adam (non-lazy) with a SelectedRows gradient give the same
  losses and parameters as the dense model, step by step (rtol 1e-5), from the same initial
  values, on batches with repeated ids, the padding id and rows no batch touches; for Adam
  the dense model's table starts with the next step's beta powers, since a SelectedRows
  update reads those, as Fluid's does (NOTE(sparse-adam-powers) in ops/optimizer.py);
* lazy Adam leaves every row a step does not touch exactly as it was, where non-lazy Adam
  keeps moving rows it has seen before (NOTE(lazy-mode) in ops/optimizer.py);
* the layer marks the table (``sparse_update``, ``distributed``) and the op (``is_sparse``).
"""
from __future__ import annotations

import numpy as np
import pytest

import placegroup as fluid
from placegroup.values import is_selected_rows

V, D, C, N, STEPS, PAD = 40, 6, 3, 12, 10, 0


def _batches():
    rng = np.random.default_rng(7)
    out = []
    for _ in range(STEPS):
        ids = np.minimum(rng.zipf(1.5, size=(N, 1)), V - 1).astype(np.int64)  # hot small ids, repeats
        ids[0, 0] = PAD
        out.append((ids, rng.integers(0, C, size=(N, 1)).astype(np.int64)))
    return out


BATCHES = _batches()


def _build(is_sparse, make_opt, shared=False):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", shape=[1], dtype="int64")
        label = fluid.layers.data("label", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[V, D], is_sparse=is_sparse, padding_idx=PAD,
                                     param_attr=fluid.ParamAttr(name="emb"))
        if shared:  # a second lookup of the same table: its two gradients meet in a `sum`
            emb = emb + fluid.layers.embedding(ids, size=[V, D], is_sparse=is_sparse,
                                               param_attr=fluid.ParamAttr(name="emb"))
        logits = fluid.layers.fc(emb, size=C, param_attr=fluid.ParamAttr(name="fc_w"),
                                 bias_attr=fluid.ParamAttr(name="fc_b"))
        loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, label))
        make_opt().minimize(loss)
    return main, startup, loss


def _train(is_sparse, make_opt, shared=False, powers_ahead=False):
    """Per-step losses and the embedding table after each step (row 0 of the list: initial).
    ``powers_ahead``: the table's Adam beta powers start a step ahead (beta², not beta)."""
    main, startup, loss = _build(is_sparse, make_opt, shared)
    scope, exe = fluid.Scope(), fluid.Executor(fluid.CPUPlace())
    exe.run(startup, scope=scope)
    for op in main.global_block().ops if powers_ahead else ():
        if op.type == "adam" and op.input("Param") == ["emb"]:
            for slot, beta in (("Beta1Pow", op.attrs["beta1"]), ("Beta2Pow", op.attrs["beta2"])):
                t = scope.find_var(op.input(slot)[0]).get_tensor()
                t.set(np.array(t) * np.float32(beta))
    losses, tables = [], [np.array(scope.find_var("emb").get_tensor())]
    for ids, label in BATCHES:
        (l,) = exe.run(main, feed={"ids": ids, "label": label}, fetch_list=[loss], scope=scope)
        losses.append(float(l[0]))
        tables.append(np.array(scope.find_var("emb").get_tensor()))
    grad = scope.vars.get("emb@GRAD")
    assert is_selected_rows(grad) == is_sparse, f"emb@GRAD is {type(grad).__name__}"
    if is_sparse and not shared:
        assert grad.height == V and PAD not in grad.rows.tolist()
    params = {n: np.array(scope.find_var(n).get_tensor()) for n in ("fc_w", "fc_b")}
    return losses, tables, params


OPTIMIZERS = {
    "sgd": lambda: fluid.optimizer.SGD(0.5),
    "momentum": lambda: fluid.optimizer.Momentum(0.2, momentum=0.9),
    "adagrad": lambda: fluid.optimizer.Adagrad(0.3),
    "adam": lambda: fluid.optimizer.Adam(0.05),
}


@pytest.mark.parametrize("name,shared", [(n, False) for n in OPTIMIZERS] + [("adam", True)],
                         ids=list(OPTIMIZERS) + ["adam-shared-table"])
def test_sparse_training_equals_dense(name, shared):
    s_losses, s_tables, s_params = _train(True, OPTIMIZERS[name], shared)
    d_losses, d_tables, d_params = _train(False, OPTIMIZERS[name], shared, powers_ahead=name == "adam")
    np.testing.assert_array_equal(s_tables[0], d_tables[0])  # same initial values
    np.testing.assert_allclose(s_losses, d_losses, rtol=1e-5)
    for s, d in zip(s_tables, d_tables):
        np.testing.assert_allclose(s, d, rtol=1e-5, atol=1e-7)
    for n in s_params:
        np.testing.assert_allclose(s_params[n], d_params[n], rtol=1e-5, atol=1e-7, err_msg=n)
    assert not np.array_equal(s_tables[0], s_tables[-1])  # it trained
    if not shared:  # (the second lookup has no padding_idx)
        np.testing.assert_array_equal(s_tables[-1][PAD], s_tables[0][PAD])  # padding row: no gradient


def test_lazy_adam_leaves_untouched_rows_alone():
    lazy_losses, lazy, _ = _train(True, lambda: fluid.optimizer.Adam(0.05, lazy_mode=True))
    eager_losses, eager, _ = _train(True, OPTIMIZERS["adam"])
    # After step 1 they agree: a row without Adam moments does not move, lazy or not.
    np.testing.assert_array_equal(lazy[1], eager[1])
    assert lazy_losses[1] == eager_losses[1] and not np.allclose(lazy_losses[2:], eager_losses[2:], rtol=1e-7)
    seen: set = set()
    eager_moved_unseen = False
    for step, (ids, _) in enumerate(BATCHES, 1):
        touched = set(ids.reshape(-1).tolist()) - {PAD}
        untouched = sorted(set(range(V)) - touched)
        np.testing.assert_array_equal(lazy[step][untouched], lazy[step - 1][untouched])
        stale = sorted(seen - touched)  # rows with Adam moments that this step does not touch
        if stale and not np.array_equal(eager[step][stale], eager[step - 1][stale]):
            eager_moved_unseen = True
        never = sorted(set(range(V)) - seen - touched)
        np.testing.assert_array_equal(eager[step][never], eager[0][never])  # no moment yet: no move
        seen |= touched
    assert eager_moved_unseen, "non-lazy Adam should keep moving rows it saw in earlier steps"
    assert not np.allclose(lazy[-1], eager[-1])


def test_layer_marks_the_table_and_the_op():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data("ids", shape=[1], dtype="int64")
        fluid.layers.embedding(ids, size=[V, D], is_distributed=True, param_attr=fluid.ParamAttr(name="a"))
        fluid.layers.embedding(ids, size=[V, D], param_attr=fluid.ParamAttr(name="b", sparse_update=True))
        fluid.layers.embedding(ids, size=[V, D], param_attr=fluid.ParamAttr(name="c"))
    block = main.global_block()
    assert block.var("a").attrs == {"distributed": True}
    assert block.var("b").attrs == {"sparse_update": True}
    assert block.var("c").attrs == {}
    assert [op.attrs["is_sparse"] for op in block.ops if op.type == "lookup_table"] == [False, True, False]


def test_sparse_gradient_var_is_typed_selected_rows():
    main, _, _ = _build(True, OPTIMIZERS["sgd"])
    assert main.global_block().var("emb@GRAD").type == "selected_rows"
