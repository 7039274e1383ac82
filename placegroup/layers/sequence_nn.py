"""Four names of Fluid 1.8's ``fluid.layers.nn`` that read or make sequences: ``chunk_eval``
(chunk detection metrics), ``im2sequence`` (image patches as a sequence per image),
``row_conv`` (lookahead convolution) and ``filter_by_instag`` (keep the tagged instances).
placegroup/layers/nn.py binds them, as Fluid's module does; their ops are in
ops/chunk_eval.py and ops/sequence_more.py.

Building a program is single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    pred = fluid.layers.data("pred", shape=[1], dtype="int64", lod_level=1)
    label = fluid.layers.data("label", shape=[1], dtype="int64", lod_level=1)
    precision, recall, f1, n_infer, n_label, n_correct = fluid.layers.chunk_eval(
        pred, label, chunk_scheme="IOB", num_chunk_types=3)
"""
from __future__ import annotations

from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers.sequence import _check

__all__ = ["chunk_eval", "im2sequence", "row_conv", "filter_by_instag"]


def chunk_eval(input, label, chunk_scheme: str, num_chunk_types: int, excluded_chunk_types=None, seq_length=None):
    """Precision, recall and F1 of chunk detection (NER-style tagging), and the chunk counts.

    A label id is ``tag + num_tag_types * chunk_type`` for the scheme's tags (IOB: B=0, I=1;
    IOE: I=0, E=1; IOBES: B=0, I=1, E=2, S=3; plain: one tag), and
    ``num_chunk_types * num_tag_types`` is "outside" (O). A predicted chunk is correct when
    the label has a chunk of the same span and type (NOTE(chunk-schemes) in ops/chunk_eval.py).
    The counts of several batches add up to the counts of all of them
    (``fluid.metrics.ChunkEvaluator``).

    Args:
        input: the predicted ids, int64: a LoD var [T, 1] (lod_level 1), or a padded
            [N, M] / [N, M, 1] with ``seq_length``.
        label: the true ids, int64, of ``input``'s shape and LoD.
        chunk_scheme: "IOB", "IOE", "IOBES" or "plain".
        num_chunk_types: how many chunk types there are.
        excluded_chunk_types: chunk types to leave out of every count (a list of ints).
        seq_length: int64 [N], each padded row's length; only without a LoD.

    Returns:
        (precision, recall, f1_score, num_infer_chunks, num_label_chunks, num_correct_chunks):
        float32 [1] three times, then int64 [1] three times.

    Raises:
        TypeError: ``input`` or ``label`` is not an int64 Variable.
        ProgramError: an unknown scheme, or shapes that differ.

    Example::

        p, r, f1, _, _, _ = fluid.layers.chunk_eval(crf_decode, label, "IOB", num_chunk_types=3)
    """
    _check(input, "chunk_eval", ("int64",), "input")
    _check(label, "chunk_eval", ("int64",), "label")
    helper = LayerHelper("chunk_eval")
    outs = {slot: [helper.create_variable_for_type_inference(dtype, stop_gradient=True)]
            for slot, dtype in (("Precision", "float32"), ("Recall", "float32"), ("F1-Score", "float32"),
                                ("NumInferChunks", "int64"), ("NumLabelChunks", "int64"),
                                ("NumCorrectChunks", "int64"))}
    inputs = {"Inference": [input], "Label": [label]}
    if seq_length is not None:
        inputs["SeqLength"] = [seq_length]
    helper.append_op("chunk_eval", inputs, outs,
                     {"num_chunk_types": int(num_chunk_types), "chunk_scheme": chunk_scheme,
                      "excluded_chunk_types": [int(t) for t in excluded_chunk_types or []]})
    return tuple(v[0] for v in outs.values())


def _pair(name: str, v) -> list:
    if isinstance(v, int):
        return [v, v]
    v = [int(x) for x in v]
    if len(v) != 2:
        raise ValueError(f"im2sequence: {name} must be an int or 2 ints, got {v}")
    return v


def im2sequence(input, filter_size=1, stride=1, padding=0, input_image_size=None, out_stride=1, name=None):
    """Every image's filter patches as one sequence: row (i, j) of image n holds the
    ``C * kh * kw`` numbers the filter sees at position (i, j), channel by channel
    (NOTE(im2seq) in ops/sequence_more.py).

    Args:
        input: a float32 [N, C, H, W] var.
        filter_size, stride: an int or [height, width].
        padding: an int, [height, width] or [up, left, down, right].
        input_image_size: optional [N, 2] var of each image's real height and width; with
            N > 1 each image then has the positions of ``ceil(size / out_stride)``.
        out_stride: an int or [height, width]; used with ``input_image_size``.
        name: accepted for Fluid's signature.

    Returns:
        A var [rows, C * kh * kw] with a 1-level LoD, one sequence per image.

    Raises:
        TypeError: ``input`` is not a float32 Variable.
        ValueError: a size that is not an int or the right number of ints.

    Example::

        img = fluid.layers.data("img", shape=[3, 32, 32], dtype="float32")
        seq = fluid.layers.im2sequence(img, filter_size=[2, 2], stride=[1, 1])
    """
    _check(input, "im2sequence", ("float32",))
    pad = [padding] * 4 if isinstance(padding, int) else [int(p) for p in padding]
    if len(pad) == 2:
        pad = pad + pad
    if len(pad) != 4:
        raise ValueError(f"im2sequence: padding must be an int, 2 ints or 4 ints, got {padding}")
    attrs = {"kernels": _pair("filter_size", filter_size), "strides": _pair("stride", stride), "paddings": pad}
    inputs = {"X": [input]}
    if input_image_size is not None:
        inputs["Y"] = [input_image_size]
        attrs["out_stride"] = _pair("out_stride", out_stride)
    helper = LayerHelper("im2sequence", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("im2sequence", inputs, {"Out": [out]}, attrs)
    return out


def row_conv(input, future_context_size: int, param_attr=None, act=None):
    """Lookahead (row) convolution: each step adds the next ``future_context_size`` steps of
    its own sequence, weighted per feature (NOTE(row-conv) in ops/sequence_more.py).

    Makes the parameter ``row_conv_<n>.w_0`` of [future_context_size + 1, D] (Xavier unless
    ``param_attr`` says).

    Args:
        input: a float32 LoD var [T, D] (lod_level 1), or a dense [B, T, D].
        future_context_size: how many steps ahead each step sees.
        param_attr: the filter's ParamAttr.
        act: an activation op type applied to the result.

    Returns:
        A var of ``input``'s shape (and LoD).

    Raises:
        TypeError: ``input`` is not a float32 Variable.
        ValueError: a negative ``future_context_size``.

    Example::

        x = fluid.layers.data("x", shape=[16], dtype="float32", lod_level=1)
        out = fluid.layers.row_conv(x, future_context_size=2)
    """
    _check(input, "row_conv", ("float32",))
    if int(future_context_size) < 0:
        raise ValueError(f"row_conv: future_context_size must be >= 0, got {future_context_size}")
    helper = LayerHelper("row_conv")
    w = helper.create_parameter(param_attr, [int(future_context_size) + 1, input.shape[-1]], input.dtype)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("row_conv", {"X": [input], "Filter": [w]}, {"Out": [out]})
    return helper.append_activation(out, act)


def filter_by_instag(ins, ins_tag, filter_tag, is_lod: bool, out_val_if_empty: int = 0):
    """The instances of a batch that carry one of ``filter_tag``'s tags (NOTE(instag) in
    ops/sequence_more.py).

    Args:
        ins: the instances' rows [rows, D]: a LoD var with one sequence per instance
            (``is_lod``), else one row per instance.
        ins_tag: int64 LoD var of each instance's tags, one sequence per instance.
        filter_tag: int64 var of the tags to keep.
        is_lod: whether ``ins`` has a LoD.
        out_val_if_empty: what fills the one output row when no instance is kept.

    Returns:
        [out, loss_weight]: the kept rows (a LoD var, one sequence per kept instance) and a
        float32 [k, 1] of ones (one zero when nothing is kept).

    Raises:
        TypeError: an argument that is not a Variable.

    Example::

        out, loss_weight = fluid.layers.filter_by_instag(ins, ins_tag, filter_tag, is_lod=True)
    """
    for what, v in (("ins", ins), ("ins_tag", ins_tag), ("filter_tag", filter_tag)):
        if not isinstance(v, Variable):
            raise TypeError(f"filter_by_instag: {what} must be a Variable, got {type(v).__name__}")
    helper = LayerHelper("filter_by_instag")
    out = helper.create_variable_for_type_inference(ins.dtype)
    loss_weight = helper.create_variable_for_type_inference("float32", stop_gradient=True)
    index_map = helper.create_variable_for_type_inference(ins_tag.dtype, stop_gradient=True)
    helper.append_op("filter_by_instag", {"Ins": [ins], "Ins_tag": [ins_tag], "Filter_tag": [filter_tag]},
                     {"Out": [out], "LossWeight": [loss_weight], "IndexMap": [index_map]},
                     {"is_lod": bool(is_lod), "out_val_if_empty": int(out_val_if_empty)})
    return [out, loss_weight]
