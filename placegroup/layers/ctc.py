"""Fluid 1.8's CTC layers: ``warpctc`` (``fluid.layers.loss``; the CTC loss with warp-ctc's
softmax inside) and ``ctc_greedy_decoder`` (``fluid.layers.nn``; best path: ``top_k`` then
``ctc_align``). placegroup/layers/loss.py and nn.py bind them, as Fluid's modules do; their
ops are in ops/ctc.py (NOTE(ctc-forms) there: the LoD and the padded forms; NOTE(ctc-1.8):
what Fluid 1.8.5 does and where placegroup differs).

Building a program is single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    feat = fluid.layers.data("feat", shape=[16], dtype="float32", lod_level=1)
    label = fluid.layers.data("label", shape=[1], dtype="int32", lod_level=1)
    logits = fluid.layers.fc(feat, size=11)            # 10 classes + the blank
    loss = fluid.layers.mean(fluid.layers.warpctc(logits, label, blank=10))
    decoded = fluid.layers.ctc_greedy_decoder(logits, blank=10)
"""
from __future__ import annotations

from placegroup.layers.sequence import _check
from placegroup.model.layer_helper import LayerHelper

__all__ = ["ctc_greedy_decoder", "warpctc"]


def warpctc(input, label, blank: int = 0, norm_by_times: bool = False, input_length=None, label_length=None):
    """The CTC loss of each sequence: ``-log p(label | input)``, summed over every alignment,
    with a softmax over each step of ``input`` inside (op ``warpctc``, which also computes the
    gradient, as Baidu's warp-ctc does).

    Args:
        input: the unscaled logits, float32: a LoD var [N, num_classes + 1] (lod_level 1), or
            a padded, time-major [max_logit_length, batch, num_classes + 1] with the lengths.
        label: the int32 label ids: a LoD var [M, 1] with one label sequence per input
            sequence, or a padded [batch, max_label_length] with the lengths.
        blank: the blank's class, in [0, num_classes + 1).
        norm_by_times: divide each sequence's gradient (not its loss) by its length.
        input_length, label_length: int64 [batch] lengths for the padded form (both or none).

    Returns:
        The loss [batch, 1], float32.

    Raises:
        TypeError: ``input`` is not float32, ``label`` not int32, or a length not int64.
        ValueError (at run time): a label id outside [0, num_classes + 1), a label longer than
            its input sequence can emit (L ids + adjacent repeats > steps; Fluid returns 0 for
            it), or LoD inputs with different sequence counts.

    Example::

        cost = fluid.layers.warpctc(input=logits, label=label, blank=0)
        loss = fluid.layers.mean(cost)
    """
    _check(input, "warpctc", ("float32",), "input")
    _check(label, "warpctc", ("int32",), "label")
    inputs = {"Logits": [input], "Label": [label]}
    if input_length is not None and label_length is not None:
        _check(input_length, "warpctc", ("int64",), "LogitsLength")
        _check(label_length, "warpctc", ("int64",), "LabelLength")
        inputs.update(LogitsLength=[input_length], LabelLength=[label_length])
    helper = LayerHelper("warpctc")
    loss = helper.create_variable_for_type_inference(input.dtype)
    grad = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("warpctc", inputs, {"WarpCTCGrad": [grad], "Loss": [loss]},
                     {"blank": int(blank), "norm_by_times": bool(norm_by_times)})
    return loss


def ctc_greedy_decoder(input, blank: int, input_length=None, padding_value: int = 0, name=None):
    """Best-path decoding: the most likely class of each step (``top_k`` with k = 1), then
    per sequence repeated classes merged and blanks dropped (``ctc_align``).

    Args:
        input: class scores (probabilities or logits), float32/float64: a LoD var
            [N, num_classes + 1], or a padded, batch-major [batch, T, num_classes + 1] with
            ``input_length``.
        blank: the blank's class.
        input_length: int64 [batch, 1], each padded sequence's length.
        padding_value: what fills each padded output row after its tokens.
        name: unused, as in Fluid.

    Returns:
        LoD form: the int64 ids [M, 1] with one sequence per input sequence; when every
        sequence decodes to nothing, Fluid's ``[[-1]]`` with all sequences empty. Padded form:
        ``(output, output_length)``: int64 [batch, T] and [batch, 1].

    Example::

        ids = fluid.layers.ctc_greedy_decoder(input=probs, blank=0)
        ids, lens = fluid.layers.ctc_greedy_decoder(input=padded, blank=0, input_length=lengths)
    """
    _check(input, "ctc_greedy_decoder", ("float32", "float64"), "input")
    top = LayerHelper("top_k")
    values = top.create_variable_for_type_inference(input.dtype)
    ids = top.create_variable_for_type_inference("int64", stop_gradient=True)
    top.append_op("top_k", {"X": [input]}, {"Out": [values], "Indices": [ids]}, {"k": 1})
    helper = LayerHelper("ctc_greedy_decoder", name=name)
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    if input_length is None:
        helper.append_op("ctc_align", {"Input": [ids]}, {"Output": [out]}, {"merge_repeated": True, "blank": int(blank)})
        return out
    length = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    squeeze = LayerHelper("squeeze")  # Fluid's squeeze(topk_indices, [2]), a squeeze2 op
    flat = squeeze.create_variable_for_type_inference("int64", stop_gradient=True)
    xshape = squeeze.create_variable_for_type_inference("int64", stop_gradient=True)
    squeeze.append_op("squeeze2", {"X": [ids]}, {"Out": [flat], "XShape": [xshape]}, {"axes": [2]})
    helper.append_op("ctc_align", {"Input": [flat], "InputLength": [input_length]},
                     {"Output": [out], "OutputLength": [length]},
                     {"merge_repeated": True, "blank": int(blank), "padding_value": int(padding_value)})
    return out, length
