"""Loss, distance and normalisation layers, Fluid 1.8 signatures (Fluid's layers/loss.py,
nn.py and detection.py): sigmoid and ranking losses, regression losses, cos_sim,
l2_normalize, log_softmax, the sampled losses nce, hsigmoid and
sampled_softmax_with_cross_entropy, and center_loss with its centers; warpctc (CTC) is
defined in ctc.py and bound here, as in Fluid.

Each function appends its op (ops/loss.py, ops/distance.py, ops/rank_loss.py,
ops/sampled_loss.py) to the default main program and returns the loss var, whose shape the
op's ``infer`` gives (-1 for the batch dim). nce and hsigmoid also make parameters, named as
Fluid names them (``nce_0.w_0``, ``nce_0.b_0``; ``hierarchical_sigmoid_0.w_0``, ``..b_0``:
Fluid's hsigmoid layer is a ``LayerHelper('hierarchical_sigmoid')``). Building a program is
single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    L = fluid.layers
    emb = L.data("emb", shape=[32])
    word = L.data("word", shape=[1], dtype="int64")
    cost = L.mean(L.nce(emb, word, num_total_classes=1000, num_neg_samples=5))
    tree = L.mean(L.hsigmoid(emb, word, num_classes=1000))
"""
from __future__ import annotations

import warnings

import numpy as np

from placegroup.model.initializer import ConstantInitializer, NumpyArrayInitializer
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers import manip, nn, ops, tensor
from placegroup.layers.ctc import warpctc
from placegroup.ir.framework import Variable
from placegroup.model.param_attr import ParamAttr

__all__ = ["sigmoid_cross_entropy_with_logits", "sigmoid_focal_loss", "teacher_student_sigmoid_loss", "log_softmax",
           "cos_sim", "l2_normalize", "smooth_l1", "huber_loss", "log_loss", "kldiv_loss", "mse_loss", "npair_loss",
           "rank_loss", "margin_rank_loss", "bpr_loss", "nce", "hsigmoid", "sampled_softmax_with_cross_entropy",
           "center_loss"]
__all__ += ["warpctc"]  # placegroup/layers/ctc.py


def _op(op_type: str, inputs: dict, attrs: dict | None = None, outs=("Out",), name=None, helper_type=None,
        int_outs=()):
    """Append ``op_type`` with a new var for each output slot; return them in ``outs`` order.
    ``inputs`` maps slot -> Variable (None: the slot is left out)."""
    helper = LayerHelper(helper_type or op_type, name=name)
    dtype = next(v for v in inputs.values() if v is not None).dtype
    made = {s: helper.create_variable_for_type_inference("int64" if s in int_outs else dtype,
                                                         stop_gradient=s in int_outs) for s in outs}
    helper.append_op(op_type, {k: [v] for k, v in inputs.items() if v is not None}, {k: [v] for k, v in made.items()},
                     attrs or {})
    return [made[s] for s in outs]


# -- sigmoid and softmax losses -------------------------------------------------------------


def sigmoid_cross_entropy_with_logits(x, label, ignore_index: int = -100, name=None, normalize: bool = False):
    """Elementwise cross entropy of ``sigmoid(x)`` against probabilities ``label``:
    ``max(x, 0) - x·label + log(1 + e^-|x|)``, computed without overflow.

    Args:
        x: logits, any shape.
        label: probabilities in [0, 1] of x's shape and dtype.
        ignore_index: entries whose label (truncated to int) equals it give loss 0 and no
            gradient.
        normalize: divide by the number of entries whose label is not ``ignore_index``.

    Returns:
        The loss, x's shape.

    Raises:
        ProgramError: if label's shape or dtype differs from x's.

    Example::

        loss = fluid.layers.mean(fluid.layers.sigmoid_cross_entropy_with_logits(logits, targets))
    """
    return _op("sigmoid_cross_entropy_with_logits", {"X": x, "Label": label},
               {"ignore_index": int(ignore_index), "normalize": bool(normalize)}, name=name)[0]


def sigmoid_focal_loss(x, label, fg_num, gamma: float = 2.0, alpha: float = 0.25):
    """Focal loss of per-class sigmoids (Fluid's detection layer): ``-α(1-p)^γ log p`` for a
    row's class, ``-(1-α)p^γ log(1-p)`` for the others, divided by ``max(fg_num, 1)``.

    Args:
        x: logits [N, C].
        label: int32 [N, 1]: the row's class, 1-based (d + 1 for column d); 0 is background
            (every column negative), -1 ignores the row.
        fg_num: int32 [1], the number of foreground rows.

    Returns:
        The loss [N, C].

    Example::

        loss = fluid.layers.reduce_sum(fluid.layers.sigmoid_focal_loss(logits, label, fg_num))
    """
    return _op("sigmoid_focal_loss", {"X": x, "Label": label, "FgNum": fg_num},
               {"gamma": float(gamma), "alpha": float(alpha)})[0]


def teacher_student_sigmoid_loss(input, label, soft_max_up_bound: float = 15.0, soft_max_lower_bound: float = -15.0):
    """A click loss plus a teacher's soft label in one [N, 1] label (NOTE(teacher-student) in
    ops/loss.py): -2 no click and no teacher, -1 click, ``z'`` in [0, 1) no click with teacher
    value z', ``1 + z'`` click with z'.

    Args:
        input: logits [N, 1].
        label: float [N, 1] coded as above.
        soft_max_up_bound, soft_max_lower_bound: where the gradient stops (the value is
            never clipped).

    Returns:
        The loss [N, 1].

    Example::

        cost = fluid.layers.teacher_student_sigmoid_loss(input=score, label=label)
    """
    return _op("teacher_student_sigmoid_loss", {"X": input, "Label": label},
               {"soft_max_up_bound": float(soft_max_up_bound),
                "soft_max_lower_bound": float(soft_max_lower_bound)}, outs=("Y",))[0]


def log_softmax(input, axis=None, dtype=None, name=None):
    """``log(softmax(input))`` along ``axis`` (None: the last), built as Fluid 1.8 builds it:
    a ``cast`` (when ``dtype`` is given), a ``softmax`` and a ``log``, so its values are
    Fluid's, softmax's clip at -64 included (NOTE(softmax-clip) in ops/activation.py). The
    ``log_softmax`` op itself (Paddle 2.x's, ops/loss.py) is there for programs that name it.

    Example::

        logp = fluid.layers.log_softmax(logits)          # rows of exp(logp) sum to 1
    """
    helper = LayerHelper("log_softmax", name=name)
    x = input
    if dtype is not None:
        x = helper.create_variable_for_type_inference(np.dtype(dtype).name)
        helper.append_op("cast", {"X": [input]}, {"Out": [x]}, {"out_dtype": np.dtype(dtype).name})
    prob = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("softmax", {"X": [x]}, {"Out": [prob]}, {"axis": -1 if axis is None else int(axis)})
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("log", {"X": [prob]}, {"Out": [out]})
    return out


def cross_entropy2(input, label, ignore_index: int = -100):
    """Hard-label cross entropy, ``-log(input[label])`` per row, through Fluid 1.8's
    ``cross_entropy2`` op (ops/cross_entropy2.py), which also keeps the picked probability for
    its gradient. Fluid binds it at ``fluid.layers.loss`` only (not in ``fluid.layers``);
    ``cross_entropy`` is the public layer.

    Args:
        input: probabilities, float16/32/64 [..., C].
        label: int64 class ids [..., 1]; a row labelled ``ignore_index`` gets 0.
        ignore_index: the label that means "no loss here".

    Returns:
        The loss, [..., 1], of ``input``'s dtype.

    Raises:
        TypeError: ``input`` is not a float Variable.
        ProgramError: ``label`` does not fit ``input``.

    Example::

        loss = fluid.layers.loss.cross_entropy2(fluid.layers.softmax(logits), label)
    """
    if not isinstance(input, Variable) or input.dtype not in ("float16", "float32", "float64"):
        raise TypeError(f"The data type of 'input' in cross_entropy2 must be ['float16', 'float32', 'float64'], "
                        f"but received {getattr(input, 'dtype', type(input).__name__)}")
    helper = LayerHelper("cross_entropy2")
    out, match_x, xshape = (helper.create_variable_for_type_inference(input.dtype) for _ in range(3))
    helper.append_op("cross_entropy2", {"X": [input], "Label": [label]},
                     {"Y": [out], "MatchX": [match_x], "XShape": [xshape]}, {"ignore_index": int(ignore_index)})
    return out


# -- distances and regression losses --------------------------------------------------------


def cos_sim(X, Y):  # noqa: N803  (Fluid's names)
    """Cosine similarity of the rows of ``X`` and ``Y`` (each flattened past dim 0); a ``Y`` of
    one row is compared with every row of ``X``.

    Returns:
        [N, 1].

    Raises:
        ProgramError: if Y has neither X's rows nor one row, or the rows differ in size.

    Example::

        sim = fluid.layers.cos_sim(query, doc)
    """
    return _op("cos_sim", {"X": X, "Y": Y}, outs=("Out", "XNorm", "YNorm"))[0]


def l2_normalize(x, axis, epsilon: float = 1e-12, name=None):
    """``x / sqrt(Σ x² + epsilon)`` along ``axis`` (op ``norm``); a 1-D x uses axis 0.

    Example::

        unit = fluid.layers.l2_normalize(emb, axis=1)
    """
    axis = 0 if len(x.shape) == 1 else 1 if axis is None else int(axis)
    return _op("norm", {"X": x}, {"axis": axis, "epsilon": float(epsilon)}, outs=("Out", "Norm"), name=name,
               helper_type="l2_normalize")[0]


def smooth_l1(x, y, inside_weight=None, outside_weight=None, sigma=None):
    """Per-row smooth L1: ``Σ outside·f(inside·(x - y))`` with f(d) = 0.5σ²d² for |d| < 1/σ²,
    else |d| - 0.5/σ² (op ``smooth_l1_loss``).

    Args:
        x, y: [N, ...] of one shape.
        inside_weight, outside_weight: x's shape; give both or neither.
        sigma: default 1.0.

    Returns:
        [N, 1].

    Example::

        loss = fluid.layers.smooth_l1(pred_box, gt_box, sigma=3.0)
    """
    return _op("smooth_l1_loss", {"X": x, "Y": y, "InsideWeight": inside_weight, "OutsideWeight": outside_weight},
               {"sigma": 1.0 if sigma is None else float(sigma)}, outs=("Out", "Diff"))[0]


def huber_loss(input, label, delta):
    """Huber loss of ``r = label - input``: ``0.5·r²`` for |r| <= delta, else
    ``delta·(|r| - 0.5·delta)``; input's shape.

    Example::

        loss = fluid.layers.mean(fluid.layers.huber_loss(pred, y, delta=1.0))
    """
    return _op("huber_loss", {"X": input, "Y": label}, {"delta": float(delta)}, outs=("Out", "Residual"))[0]


def log_loss(input, label, epsilon: float = 1e-4, name=None):
    """Binary log loss of probabilities ``input`` [N, 1] against ``label`` [N, 1]:
    ``-label·log(input + ε) - (1 - label)·log(1 - input + ε)``.

    Example::

        loss = fluid.layers.log_loss(fluid.layers.sigmoid(score), label)
    """
    return _op("log_loss", {"Predicted": input, "Labels": label}, {"epsilon": float(epsilon)}, outs=("Loss",),
               name=name)[0]


def kldiv_loss(x, target, reduction: str = "mean", name=None):
    """KL divergence of ``target`` from log-probabilities ``x``: ``target·(log target - x)``,
    0 where target <= 0 (NOTE(kldiv-zero) in ops/distance.py).

    Args:
        reduction: ``none`` (x's shape), ``sum``, ``mean`` (over all elements) or
            ``batchmean`` (the sum over the batch size), the last three of shape [1].

    Raises:
        ProgramError: an unknown reduction, or target's shape differs from x's.

    Example::

        loss = fluid.layers.kldiv_loss(fluid.layers.log_softmax(logits), soft_targets, "batchmean")
    """
    return _op("kldiv_loss", {"X": x, "Target": target}, {"reduction": reduction}, outs=("Loss",), name=name)[0]


def mse_loss(input, label):
    """The mean of ``(input - label)²`` over all elements, [1]: ``reduce_mean`` of
    ``square_error_cost``, as Fluid builds it.

    Example::

        loss = fluid.layers.mse_loss(pred, y)
    """
    return nn.reduce_mean(nn.square_error_cost(input, label))



def npair_loss(anchor, positive, labels, l2_reg: float = 0.002):
    """N-pair loss (Sohn 2016), built from layers as Fluid 1.8 builds it: the soft-label
    cross entropy of the ``anchor @ positiveᵀ`` similarities against "same label" rows
    normalised to sum 1, weighted by those rows and averaged, plus ``0.25·l2_reg`` times the
    mean squared norms of both embeddings.

    Args:
        anchor, positive: [B, D] embeddings; B must be known (Fluid's layer tiles the labels
            by it).
        labels: [B] (or [B, 1]) class labels, float or int64.

    Returns:
        The loss [1].

    Raises:
        ValueError: if the batch size of ``labels`` is unknown (-1).

    Example::

        a = fluid.layers.data("a", shape=[18, 6], append_batch_size=False)
        p = fluid.layers.data("p", shape=[18, 6], append_batch_size=False)
        y = fluid.layers.data("y", shape=[18], append_batch_size=False)
        loss = fluid.layers.npair_loss(a, p, y)
    """
    batch = labels.shape[0]
    if batch is None or batch < 0:
        raise ValueError(f"npair_loss: labels{list(labels.shape)} need a known batch size (Fluid's layer tiles "
                         f"them by it); give data vars a fixed first dim")
    labels = manip.expand(nn.reshape(labels, [batch, 1]), [1, batch])
    same = tensor.cast(ops.equal(labels, manip.transpose(labels, [1, 0])), "float32")
    same = same / nn.reduce_sum(same, dim=1, keep_dim=True)
    l2 = nn.reduce_mean(nn.reduce_sum(ops.square(anchor), 1)) + nn.reduce_mean(nn.reduce_sum(ops.square(positive), 1))
    l2 = nn.scale(nn.scale(l2, 0.25), float(l2_reg))
    sim = nn.matmul(anchor, positive, transpose_y=True)
    ce = nn.softmax_with_cross_entropy(sim, same, soft_label=True)
    return l2 + nn.reduce_mean(nn.reduce_sum(same * ce, 0))

# -- ranking losses -------------------------------------------------------------------------


def rank_loss(label, left, right, name=None):
    """RankNet's loss: ``log(1 + e^(left - right)) - label·(left - right)``, all [N, 1];
    label is 1 (left above right), 0 or 0.5 (no preference).

    Example::

        loss = fluid.layers.mean(fluid.layers.rank_loss(label, score_a, score_b))
    """
    return _op("rank_loss", {"Label": label, "Left": left, "Right": right}, name=name)[0]


def margin_rank_loss(label, left, right, margin: float = 0.1, name=None):
    """``max(0, -label·(left - right) + margin)``, all [N, 1]; label is 1 or -1.

    Example::

        loss = fluid.layers.mean(fluid.layers.margin_rank_loss(label, pos_score, neg_score, margin=0.2))
    """
    return _op("margin_rank_loss", {"Label": label, "X1": left, "X2": right}, {"margin": float(margin)},
               outs=("Out", "Activated"), name=name)[0]


def bpr_loss(input, label, name=None):
    """Bayesian personalised ranking of logits ``input`` [N, C] for the int64 class ``label``
    [N, 1]: the mean over the other classes j of ``log(1 + e^(input_j - input_label))``.

    Returns:
        [N, 1].

    Example::

        cost = fluid.layers.bpr_loss(input=predict, label=label)
    """
    return _op("bpr_loss", {"X": input, "Label": label}, outs=("Y",), name=name)[0]


# -- sampled losses -------------------------------------------------------------------------

_SAMPLERS = {"uniform": 0, "log_uniform": 1, "custom_dist": 2}


def alias_tables(dist) -> tuple[np.ndarray, np.ndarray]:
    """Walker's alias tables (alias int32, alias_probs float32) of the distribution ``dist``,
    built with Fluid 1.8's nce layer's own loop, its ends included: only one leftover entry
    of each list is closed; ``-1`` means no alias."""
    n = len(dist)
    probs, alias = [0.0] * n, [0] * n
    bigs, littles = [], []
    for i, p in enumerate(dist):
        q = float(p) * n
        if q > 1.0:
            bigs.append((i, q))
        elif q < 1.0:
            littles.append((i, q))
        else:
            probs[i], alias[i] = q, -1
    while bigs and littles:
        (bi, bq), (li, lq) = bigs.pop(0), littles.pop(0)
        probs[li], alias[li] = lq, bi
        left = bq + lq - 1
        if left > 1.0:
            bigs.append((bi, left))
        elif left < 1.0:
            littles.append((bi, left))
        else:
            probs[bi], alias[bi] = left, -1
    for rest in (bigs, littles):
        if rest:
            probs[rest[0][0]], alias[rest[0][0]] = 1.0, -1
    return np.array(alias, np.int32), np.array(probs, np.float32)


def nce(input, label, num_total_classes: int, sample_weight=None, param_attr=None, bias_attr=None,
        num_neg_samples=None, name=None, sampler: str = "uniform", custom_dist=None, seed: int = 0,
        is_sparse: bool = False):
    """Noise-contrastive estimation over ``num_total_classes`` classes: each row's true
    classes against ``num_neg_samples`` sampled ones (op ``nce``, NOTE(nce-sampling) in
    ops/sampled_loss.py), divided by ``num_neg_samples + 1`` as in Fluid.

    Args:
        input: [N, D] features.
        label: int64 [N, num_true] true classes.
        num_total_classes: C; the weight is [C, D] (``nce_<n>.w_0``, Xavier), the bias [C, 1]
            (``nce_<n>.b_0``, zeros; ``bias_attr=False`` for none).
        sample_weight: [N, 1] per-row weights (default 1).
        num_neg_samples: negatives per row (default 10).
        sampler: ``uniform``, ``log_uniform`` (Zipf-like over class ids) or ``custom_dist``.
        custom_dist: with ``custom_dist``, the C class probabilities; its alias tables become
            three untrained parameters, as in Fluid.
        seed: 0 draws new negatives each step; any other seed the same ones every step (as
            Fluid's engine, re-seeded each run, does). Runs repeat either way.
        is_sparse: the weight's gradient is a SelectedRows over the sampled classes (the
            parameter gets ``attrs["sparse_update"] = True``, as ``embedding``'s).

    Returns:
        The cost [N, 1].

    Raises:
        ValueError: an unknown sampler, a custom_dist missing or not of C entries, or input
            not 2-D.

    Example::

        cost = fluid.layers.nce(input=emb, label=word, num_total_classes=10000, num_neg_samples=5,
                                sampler="log_uniform", is_sparse=True)
    """
    helper = LayerHelper("nce", name=name)
    if len(input.shape) != 2:
        raise ValueError(f"nce: input must be [N, D], got {list(input.shape)}")
    if sampler not in _SAMPLERS:
        raise ValueError(f"nce: sampler {sampler!r} is not one of {sorted(_SAMPLERS)}")
    c = int(num_total_classes)
    w = helper.create_parameter(param_attr, [c, input.shape[1]], input.dtype)
    is_sparse = bool(is_sparse or w.attrs.get("sparse_update"))
    if is_sparse:
        w.attrs["sparse_update"] = True
    inputs = {"Input": [input], "Label": [label], "Weight": [w]}
    b = helper.create_parameter(bias_attr, [c, 1], input.dtype, is_bias=True)
    if b is not None:
        inputs["Bias"] = [b]
    if sample_weight is not None:
        inputs["SampleWeight"] = [sample_weight]
    if sampler == "custom_dist":
        if custom_dist is None or len(custom_dist) != c:
            raise ValueError(f"nce: the custom_dist sampler needs custom_dist of {c} probabilities, got "
                             f"{None if custom_dist is None else len(custom_dist)}")
        alias, probs = alias_tables(custom_dist)
        for slot, table in (("CustomDistProbs", np.asarray(custom_dist, np.float32)), ("CustomDistAlias", alias),
                            ("CustomDistAliasProbs", probs)):
            p = helper.create_parameter(ParamAttr(trainable=False), table.shape, table.dtype.name,
                                        default_initializer=NumpyArrayInitializer(table))
            p.stop_gradient = True
            inputs[slot] = [p]
    s = 10 if num_neg_samples is None else int(num_neg_samples)
    cost = helper.create_variable_for_type_inference(input.dtype)
    logits = helper.create_variable_for_type_inference(input.dtype)
    labels = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("nce", inputs, {"Cost": [cost], "SampleLogits": [logits], "SampleLabels": [labels]},
                     {"num_total_classes": c, "num_neg_samples": s, "seed": int(seed), "sampler": _SAMPLERS[sampler],
                      "is_sparse": is_sparse, "remote_prefetch": is_sparse})
    return nn.scale(cost, 1.0 / (s + 1))


def hsigmoid(input, label, num_classes: int, param_attr=None, bias_attr=None, name=None, path_table=None,
             path_code=None, is_custom: bool = False, is_sparse: bool = False):
    """Hierarchical sigmoid: the cross entropy of the binary decisions on the path from the
    root of a binary tree to the label's leaf (op ``hierarchical_sigmoid``,
    NOTE(hsigmoid-code) in ops/sampled_loss.py).

    Args:
        input: [N, D] features.
        label: int64 [N, 1] classes.
        num_classes: with the default (complete) tree, the number of classes C >= 2: the
            weight is [C - 1, D] (one row per inner node); with a custom tree, the number of
            inner nodes, the weight [num_classes, D].
        param_attr, bias_attr: the weight (``hierarchical_sigmoid_<n>.w_0``, Xavier) and the
            bias [rows, 1] (``.b_0``, zeros; False for none).
        path_table, path_code: int64 [N, L] with ``is_custom``: each row's inner nodes from the
            leaf up, ending at the first -1, and the bit taken at each.
        is_sparse: with a custom tree, the weight's gradient is a SelectedRows of the rows
            ``path_table`` names; ignored, with a warning (Fluid prints one), for the default
            tree.

    Returns:
        The loss [N, 1].

    Raises:
        ValueError: num_classes < 2 with the default tree, a path given without
            ``is_custom``, or ``is_custom`` without both paths.

    Example::

        cost = fluid.layers.hsigmoid(input=h, label=word, num_classes=10000)
    """
    helper = LayerHelper("hierarchical_sigmoid", name=name)
    if not is_custom and (num_classes is None or num_classes < 2):
        raise ValueError(f"hsigmoid: num_classes must be >= 2 with the default tree, got {num_classes}")
    if not is_custom and (path_table is not None or path_code is not None):
        raise ValueError("hsigmoid: path_table and path_code need is_custom=True")
    if is_custom and (path_table is None or path_code is None or num_classes is None):
        raise ValueError("hsigmoid: is_custom needs path_table, path_code and num_classes")
    if not is_custom and is_sparse:
        warnings.warn("hsigmoid: sparse mode should not be used without custom tree; using dense", stacklevel=2)
        is_sparse = False
    rows = int(num_classes) if is_custom else int(num_classes) - 1
    w = helper.create_parameter(param_attr, [rows, input.shape[1]], input.dtype)
    if is_sparse:
        w.attrs["sparse_update"] = True
    inputs = {"X": [input], "W": [w], "Label": [label]}
    if is_custom:
        inputs.update(PathTable=[path_table], PathCode=[path_code])
    b = helper.create_parameter(bias_attr, [rows, 1], input.dtype, is_bias=True)
    if b is not None:
        inputs["Bias"] = [b]
    out = helper.create_variable_for_type_inference(input.dtype)
    pre = helper.create_variable_for_type_inference(input.dtype)
    # NOTE(hsigmoid-w-out): Fluid also names W as the op's W_Out, for its remote prefetch;
    # a forward op writing a parameter would be a second writer of it here, so it is left out.
    helper.append_op("hierarchical_sigmoid", inputs, {"Out": [out], "PreOut": [pre]},
                     {"num_classes": int(num_classes), "is_sparse": bool(is_sparse),
                      "remote_prefetch": bool(is_sparse)})
    return out


def sampled_softmax_with_cross_entropy(logits, label, num_samples: int, num_true: int = 1,
                                       remove_accidental_hits: bool = True, use_customized_samples: bool = False,
                                       customized_samples=None, customized_probabilities=None, seed: int = 0):
    """Softmax cross entropy over each row's true classes and ``num_samples`` sampled classes
    instead of all C (op ``sample_logits``, then ``one_hot`` and ``softmax_with_cross_entropy``
    with soft labels, divided by ``num_true``, as Fluid 1.8 builds it).

    The sampled classes are drawn once per step from a log-uniform distribution over the class
    ids, shared by every row, and each logit loses log Q(class) (NOTE(sample-logits) in
    ops/sampled_loss.py).

    Args:
        logits: [N, C] unscaled logits.
        label: int64 [N, num_true] true classes.
        num_samples: how many distinct classes to sample, at most C.
        num_true: true classes per row. With more than one, the label is the multi-hot row of
            the true columns (Fluid 1.8's one_hot over [N, num_true] writes past its output).
        remove_accidental_hits: a sampled class equal to one of the row's true classes gets
            its logit lowered by 1e20.
        use_customized_samples: take the columns and their probabilities from
            ``customized_samples`` (int64 [N, num_true + num_samples], true classes first) and
            ``customized_probabilities`` (their Q) instead of sampling.
        seed: 0 samples anew each step; any other seed the same classes every step, as Fluid.

    Returns:
        The loss [N, 1].

    Raises:
        ValueError: ``use_customized_samples`` without both customized inputs.
        ProgramError: from the op, for shapes that do not fit or num_samples > C.

    Example::

        loss = fluid.layers.mean(fluid.layers.sampled_softmax_with_cross_entropy(logits, label, num_samples=25))
    """
    helper = LayerHelper("sample_logits")
    if use_customized_samples and (customized_samples is None or customized_probabilities is None):
        raise ValueError("sampled_softmax_with_cross_entropy: use_customized_samples needs customized_samples and "
                         "customized_probabilities")
    dtype = logits.dtype
    made = {slot: helper.create_variable_for_type_inference(dt, stop_gradient=slot != "SampledLogits")
            for slot, dt in (("Samples", "int64"), ("Probabilities", dtype), ("SampledLogits", dtype),
                             ("SampledLabels", "int64"), ("LogitsDim", dtype), ("LabelsDim", "int64"))}
    inputs = {"Logits": [logits], "Labels": [label]}
    if use_customized_samples:
        inputs.update(CustomizedSamples=[customized_samples], CustomizedProbabilities=[customized_probabilities])
    helper.append_op("sample_logits", inputs, {k: [v] for k, v in made.items()},
                     {"use_customized_samples": bool(use_customized_samples), "uniq": True,
                      "remove_accidental_hits": bool(remove_accidental_hits), "num_samples": int(num_samples),
                      "seed": int(seed)})
    soft = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    depth = int(num_samples) + int(num_true)  # Fluid's num_samples + 1, for its one true class
    if int(num_true) == 1:
        helper.append_op("one_hot", {"X": [made["SampledLabels"]]}, {"Out": [soft]}, {"depth": depth, "dtype": dtype})
    else:
        hots = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
        helper.append_op("one_hot_v2", {"X": [made["SampledLabels"]]}, {"Out": [hots]},
                         {"depth": depth, "dtype": dtype})
        helper.append_op("reduce_sum", {"X": [hots]}, {"Out": [soft]}, {"dim": [1], "keep_dim": False,
                                                                         "reduce_all": False})
    loss = helper.create_variable_for_type_inference(dtype)
    softmax = helper.create_variable_for_type_inference(dtype)
    helper.append_op("softmax_with_cross_entropy", {"Logits": [made["SampledLogits"]], "Label": [soft]},
                     {"Softmax": [softmax], "Loss": [loss]},
                     {"soft_label": True, "ignore_index": 0, "numeric_stable_mode": False})
    return nn.scale(loss, 1.0 / int(num_true))


def center_loss(input, label, num_classes: int, alpha, param_attr, update_center: bool = True):
    """The center loss ``|x_i - c_{label_i}|² / 2`` per row, with one learnt center per class
    that the op itself moves toward its rows by ``alpha`` each run (NOTE(center-loss) in
    ops/loss.py), as Fluid 1.8.

    The centers are a parameter ``[num_classes, D]`` (``center_loss_<n>.w_0``, Xavier unless
    ``param_attr`` says) with no gradient: the optimizer leaves them alone. A float ``alpha``
    becomes the persistable float32 var ``centerloss_alpha`` (one name for every center_loss
    of a program, as Fluid names it). In a distributed job each trainer keeps and moves its own
    centers (a forward op's state, as batch_norm's running statistics); they never go to a
    pserver.

    Args:
        input: [N, D] features.
        label: int64 [N, 1] classes in [0, num_classes).
        num_classes: the number of centers.
        alpha: the centers' update rate: a float, or a one-element Variable.
        param_attr: the centers' ParamAttr (None for the default).
        update_center: move the centers (False: a fixed set of centers).

    Returns:
        The loss [N, 1].

    Raises:
        TypeError: ``alpha`` is neither a float nor a Variable.

    Example::

        loss = fluid.layers.center_loss(feat, label, num_classes=10, alpha=0.1, param_attr=fluid.ParamAttr())
    """
    helper = LayerHelper("center_loss")
    dtype = input.dtype
    centers = helper.create_parameter(param_attr, [int(num_classes), input.shape[1]], dtype)
    centers.stop_gradient = True
    if isinstance(alpha, Variable):
        rate = alpha
    elif isinstance(alpha, float):
        rate = helper.create_global_variable(name="centerloss_alpha", persistable=True, shape=[1], dtype="float32",
                                             stop_gradient=True)
        helper.set_variable_initializer(rate, ConstantInitializer(alpha))
    else:
        raise TypeError(f"center_loss: alpha must be a float or a Variable, got {alpha!r}")
    diff = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    loss = helper.create_variable_for_type_inference(dtype)
    helper.append_op("center_loss", {"X": [input], "Label": [label], "Centers": [centers], "CenterUpdateRate": [rate]},
                     {"SampleCenterDiff": [diff], "Loss": [loss], "CentersOut": [centers]},
                     {"cluster_num": int(num_classes), "need_update": bool(update_center)})
    return loss
