"""Metric layers: accuracy, auc, edit_distance and mean_iou, with Fluid 1.8's signatures.

None has a gradient. ``auc`` keeps its counts in persistable int64 vars, zeroed by the startup
program and updated in place by every run of the main program (NOTE(auc-window) in
ops/metric.py).

NOTE(auc-distributed): across processes the auc state is per trainer, as with Fluid's
transpiler: the auc ops are forward ops, so they and their state vars stay in each trainer's
program (the state is never sent to a pserver, having no gradient and no optimizer), and each
trainer's AUC is over the examples that trainer saw. To get one AUC over every trainer, fetch
``stat_pos``/``stat_neg`` from each, add them, and use ``fluid.metrics.Auc``'s arithmetic (or
``placegroup.ops.metric.roc_area``) on the sums.

Example::

    import placegroup as fluid
    acc = fluid.layers.accuracy(input=prob, label=label, k=1)
    auc, batch_auc, states = fluid.layers.auc(input=prob, label=label)
"""
from __future__ import annotations

from placegroup.model.initializer import ConstantInitializer
from placegroup.model.layer_helper import LayerHelper

__all__ = ["accuracy", "auc", "edit_distance", "mean_iou"]


def accuracy(input, label, k: int = 1, correct=None, total=None):
    """The fraction of rows whose ``label`` is among the ``k`` largest entries of ``input``.

    Appends ``top_k`` and ``accuracy`` ops, as Fluid does; neither has a gradient.

    Args:
        input: scores or probabilities, [N, C].
        label: int64 class ids, [N, 1].
        k: how many of the top entries count as a hit.
        correct, total: int64 [1] vars to receive the counts (new ones when None).

    Returns:
        The accuracy, a float32 var of shape [1].

    Example::

        acc = fluid.layers.accuracy(input=prob, label=label)
        loss_v, acc_v = exe.run(main, feed=..., fetch_list=[loss, acc])
    """
    topk = LayerHelper("top_k")  # Fluid's accuracy calls layers.topk: its vars are top_k_<n>.tmp_*
    values = topk.create_variable_for_type_inference(input.dtype, stop_gradient=True)
    indices = topk.create_variable_for_type_inference("int64", stop_gradient=True)
    topk.append_op("top_k", {"X": [input]}, {"Out": [values], "Indices": [indices]}, {"k": int(k)})
    helper = LayerHelper("accuracy")  # then accuracy_<n>.tmp_0 is the accuracy, as Fluid names it
    acc = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    correct = correct if correct is not None else helper.create_variable_for_type_inference("int64", True)
    total = total if total is not None else helper.create_variable_for_type_inference("int64", True)
    helper.append_op("accuracy", {"Out": [values], "Indices": [indices], "Label": [label]},
                     {"Accuracy": [acc], "Correct": [correct], "Total": [total]})
    return acc


def _check_dtype(layer: str, arg: str, var, allowed: tuple) -> None:
    if var.dtype not in allowed:
        raise TypeError(f"{layer}: {arg} {var.name!r} must be of dtype {' or '.join(allowed)}, got {var.dtype}")


def auc(input, label, curve: str = "ROC", num_thresholds: int = 2 ** 12 - 1, topk: int = 1, slide_steps: int = 1):
    """The area under the ROC curve of a binary classifier, over all batches so far and over
    the last ``slide_steps`` batches.

    Appends two ``auc`` ops (ops/metric.py, NOTE(auc-buckets)): a batch AUC over a sliding
    window and a global AUC over every run since the startup program. Their counts live in
    four persistable int64 vars that the startup program zeroes, named as Fluid names them
    (``_generated_var_<n>``), so ``fluid.io.save_persistables`` keeps them. Across processes each
    trainer keeps its own counts (NOTE(auc-distributed) above).

    Args:
        input: [N, 2] probabilities (float32/float64) whose last column is the positive class's,
            e.g. a softmax over two classes; [N, 1] is read the same way (its only column).
        label: [N, 1] int32/int64 labels; non-zero counts as positive.
        curve: ``'ROC'`` or ``'PR'``; as in Fluid, both compute the ROC area.
        num_thresholds: the predictions fall in ``num_thresholds + 1`` buckets.
        topk: accepted for Fluid's signature and unused, as in Fluid 1.8.
        slide_steps: how many recent batches the batch AUC covers (0: all of them, like the
            global AUC).

    Returns:
        ``(auc_out, batch_auc_out, [batch_stat_pos, batch_stat_neg, stat_pos, stat_neg])``: the
        global and batch AUC (float64 [1]) and the state vars, in Fluid 1.8's shapes so its
        checkpoints load here and back: the batch counts, a flat ring
        ``[(1 + slide_steps) * (num_thresholds + 1) + 1]`` (``[1, num_thresholds + 1]`` when
        ``slide_steps`` is 0; ops/metric.py, NOTE(auc-window)), and the global counts
        ``[1, num_thresholds + 1]``.

    Raises:
        TypeError: if ``input`` is not float32/float64 or ``label`` not int32/int64.
        ProgramError: if the shapes or attrs are not as above (from the op's shape check).

    Example::

        prob = fluid.layers.softmax(fluid.layers.fc(x, size=2))
        auc, batch_auc, _ = fluid.layers.auc(input=prob, label=label)
        exe.run(fluid.default_startup_program())
        for batch in reader():
            global_auc, last_batch_auc = exe.run(feed=batch, fetch_list=[auc, batch_auc])
    """
    helper = LayerHelper("auc")
    _check_dtype("auc", "input", input, ("float32", "float64"))
    _check_dtype("auc", "label", label, ("int32", "int64"))
    auc_out = helper.create_variable_for_type_inference("float64", stop_gradient=True)
    batch_auc_out = helper.create_variable_for_type_inference("float64", stop_gradient=True)
    block = helper.main_program.global_block()
    buckets, steps = int(num_thresholds) + 1, int(slide_steps)
    # Fluid's shapes (NOTE(auc-window)); with slide_steps=0 Fluid's layer asks for [buckets + 1],
    # but its op's shape inference makes the var [1, buckets] as the program is built
    batch_shape = [(1 + steps) * buckets + 1] if steps > 0 else [1, buckets]
    # no name: Block.create_var names them _generated_var_<n>, as Fluid's create_global_variable does
    states = [block.create_var(persistable=True, dtype="int64", shape=shape, stop_gradient=True)
              for shape in (batch_shape,) * 2 + ([1, buckets],) * 2]
    for var in states:
        helper.set_variable_initializer(var, ConstantInitializer(0.0))
    batch_pos, batch_neg, stat_pos, stat_neg = states
    for out, pos, neg, window in ((batch_auc_out, batch_pos, batch_neg, steps), (auc_out, stat_pos, stat_neg, 0)):
        helper.append_op("auc", {"Predict": [input], "Label": [label], "StatPos": [pos], "StatNeg": [neg]},
                         {"AUC": [out], "StatPosOut": [pos], "StatNegOut": [neg]},
                         {"curve": curve, "num_thresholds": int(num_thresholds), "slide_steps": window})
    return auc_out, batch_auc_out, states


def edit_distance(input, label, normalized: bool = True, ignored_tokens=None, input_length=None,
                  label_length=None):
    """The edit (Levenshtein) distance of each hypothesis to its reference: the fewest
    insertions, deletions and substitutions that turn one into the other.

    Appends one ``edit_distance`` op (ops/metric.py, NOTE(edit-distance-dp)). The sequences are
    padded rows with their lengths (Fluid 1.8's dense form), or, without the lengths, LoD
    sequences of one token a row (what ``ctc_greedy_decoder`` gives, NOTE(edit-distance-lod)).

    Args:
        input: hypotheses, int64 [N, L1], row i's first ``input_length[i]`` tokens; or LoD
            sequences [T1, 1].
        label: references, int64 [N, L2], row i's first ``label_length[i]`` tokens; or LoD
            sequences [T2, 1], as many as ``input``'s.
        normalized: divide each distance by its reference's length.
        ignored_tokens: token ids removed from both sides before comparing
            (NOTE(edit-distance-erase)).
        input_length, label_length: int64 [N] lengths, both or neither.

    Returns:
        ``(distances, sequence_num)``: float32 [N, 1] and int64 [1] (the number of pairs).

    Raises:
        TypeError: if a sequence is not int64.
        ValueError: one length given without the other.
        ProgramError: if the shapes disagree.
        ValueError (at run time): a length outside 0..L, or, with ``normalized``, an empty
            reference.

    Example::

        hyp = fluid.layers.data("hyp", shape=[-1, 8], dtype="int64", append_batch_size=False)
        ref = fluid.layers.data("ref", shape=[-1, 8], dtype="int64", append_batch_size=False)
        hl = fluid.layers.data("hl", shape=[-1], dtype="int64", append_batch_size=False)
        rl = fluid.layers.data("rl", shape=[-1], dtype="int64", append_batch_size=False)
        dist, seq_num = fluid.layers.edit_distance(hyp, ref, input_length=hl, label_length=rl)
    """
    helper = LayerHelper("edit_distance")
    _check_dtype("edit_distance", "input", input, ("int64",))
    _check_dtype("edit_distance", "label", label, ("int64",))
    inputs = {"Hyps": [input], "Refs": [label]}
    if (input_length is None) != (label_length is None):
        raise ValueError("edit_distance: give both input_length and label_length (padded sequences), or neither "
                         "(LoD sequences)")
    if input_length is not None:
        inputs.update(HypsLength=[input_length], RefsLength=[label_length])
    attrs = {"normalized": bool(normalized)}
    if ignored_tokens:
        attrs["_ignored_tokens"] = [int(t) for t in ignored_tokens]
    out = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    seq_num = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("edit_distance", inputs, {"Out": [out], "SequenceNum": [seq_num]}, attrs)
    return out, seq_num


def mean_iou(input, label, num_classes: int):
    """The mean intersection-over-union of a batch of class predictions (op ``mean_iou``,
    NOTE(mean-iou) in ops/metric.py): for each class c, the elements where both ``input`` and
    ``label`` are c over those where either is; averaged over the classes that occur.

    As Fluid 1.8's layer, it keeps no state across runs: add the returned wrong and correct
    counts of several batches to get a running figure.

    Args:
        input: int32 or int64 predicted classes, any shape.
        label: ``input``'s shape and dtype: the true classes.
        num_classes: the number of classes; every id must lie in [0, num_classes).

    Returns:
        ``(mean_iou, out_wrong, out_correct)``: float32 [1], and int32 [num_classes] counts of
        the elements each class got wrong (in either role) and right.

    Raises:
        TypeError: ``input`` or ``label`` is not int32/int64.

    Example::

        miou, wrong, correct = fluid.layers.mean_iou(pred, label, num_classes=21)
    """
    _check_dtype("mean_iou", "input", input, ("int32", "int64"))
    _check_dtype("mean_iou", "label", label, ("int32", "int64"))
    helper = LayerHelper("mean_iou")
    outs = {"OutMeanIou": helper.create_variable_for_type_inference("float32", stop_gradient=True),
            "OutWrong": helper.create_variable_for_type_inference("int32", stop_gradient=True),
            "OutCorrect": helper.create_variable_for_type_inference("int32", stop_gradient=True)}
    helper.append_op("mean_iou", {"Predictions": [input], "Labels": [label]}, {k: [v] for k, v in outs.items()},
                     {"num_classes": int(num_classes)})
    return outs["OutMeanIou"], outs["OutWrong"], outs["OutCorrect"]
