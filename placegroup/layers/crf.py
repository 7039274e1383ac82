"""Fluid 1.8's linear-chain CRF layers of ``fluid.layers.nn``: ``linear_chain_crf`` (the loss,
which makes the transition parameter) and ``crf_decoding`` (Viterbi over that parameter, found
by name). placegroup/layers/nn.py binds them, as Fluid's module does; their ops are in ops/crf.py
(NOTE(crf-layout) there: the parameter's rows, the loss's sign, the two input forms).

Building a program is single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    word = fluid.layers.data("word", shape=[1], dtype="int64", lod_level=1)
    tag = fluid.layers.data("tag", shape=[1], dtype="int64", lod_level=1)
    emission = fluid.layers.fc(fluid.layers.embedding(word, size=[100, 16]), size=5)
    cost = fluid.layers.linear_chain_crf(emission, tag, param_attr=fluid.ParamAttr(name="crfw"))
    loss = fluid.layers.mean(cost)
    path = fluid.layers.crf_decoding(emission, param_attr=fluid.ParamAttr(name="crfw"))
"""
from __future__ import annotations

from placegroup.ir.framework import Variable
from placegroup.layers.sequence import _check
from placegroup.model.layer_helper import LayerHelper
from placegroup.model.param_attr import ParamAttr

__all__ = ["crf_decoding", "linear_chain_crf"]


def linear_chain_crf(input, label, param_attr=None, length=None):
    """The negative log-likelihood of each sequence's label path under a linear-chain CRF.

    Makes the transition parameter [D + 2, D] (``linear_chain_crf_<n>.w_0`` unless
    ``param_attr`` names it; Xavier unless it says): row 0 the start weights, row 1 the end
    weights, then w[i, j] for tag j after tag i. Fluid calls the output LogLikelihood, but it is
    ``log Z - score(label)`` (>= 0, 0 for an empty sequence): minimise its mean.

    Args:
        input: the emission scores (unscaled, no softmax), float32/float64: a LoD var [N, D]
            (lod_level 1), or a padded [B, T, D] with ``length``.
        label: int64 tags: [N, 1] with ``input``'s LoD, or [B, T] / [B, T, 1] with ``length``.
        param_attr: the transition parameter's attr; give it a name to decode with
            ``crf_decoding``.
        length: int64 [B] or [B, 1], each padded row's length; only for the padded form.

    Returns:
        A var [num_sequences, 1] of ``input``'s dtype, with no LoD.

    Raises:
        TypeError: ``input`` is not a float Variable, or ``label`` not an int64 one.
        ProgramError: shapes that do not fit (Transition [D + 2, D], the forms above).

    Example::

        cost = fluid.layers.linear_chain_crf(emission, tag, param_attr=fluid.ParamAttr(name="crfw"))
    """
    _check(input, "linear_chain_crf", ("float32", "float64"), "input")
    _check(label, "linear_chain_crf", ("int64",), "label")
    helper = LayerHelper("linear_chain_crf")
    size = input.shape[-1]  # D in both forms; the op's checks name a wrong rank
    transition = helper.create_parameter(param_attr, [size + 2, size], input.dtype)
    outs = {slot: [helper.create_variable_for_type_inference(input.dtype)]
            for slot in ("Alpha", "EmissionExps", "TransitionExps", "LogLikelihood")}
    inputs = {"Emission": [input], "Transition": [transition], "Label": [label]}
    if length is not None:
        inputs["Length"] = [length]
    helper.append_op("linear_chain_crf", inputs, outs)
    return outs["LogLikelihood"][0]


def crf_decoding(input, param_attr, label=None, length=None):
    """The best tag path of each sequence (Viterbi) under the transition parameter that
    ``linear_chain_crf`` made with the same ``param_attr`` name; with ``label``, 1 where the
    path has the label's tag and 0 elsewhere (what ``chunk_eval`` or an accuracy reads). On
    equal scores the lowest tag wins, as in Fluid (NOTE(viterbi-ties) in ops/crf.py).

    Args:
        input: the emission scores, as for ``linear_chain_crf``.
        param_attr: a ParamAttr (or a name) naming the transition parameter.
        label: optional int64 tags, as for ``linear_chain_crf``.
        length: int64 [B] or [B, 1] for a padded ``input``.

    Returns:
        An int64 var: [N, 1] with ``input``'s LoD, or [B, T] (0 past each length) with
        ``length``.

    Raises:
        TypeError: ``input`` is not a float Variable.
        ValueError: ``param_attr`` names no parameter of the main program.

    Example::

        path = fluid.layers.crf_decoding(emission, param_attr=fluid.ParamAttr(name="crfw"))
    """
    _check(input, "crf_decoding", ("float32", "float64"), "input")
    helper = LayerHelper("crf_decoding")
    name = ParamAttr.to_attr(param_attr).name if isinstance(param_attr, (ParamAttr, str)) else None
    block = helper.main_program.global_block()
    transition = block.var(name) if name and block.has_var(name) else None
    if not isinstance(transition, Variable) or not transition.is_parameter:
        raise ValueError(f"no Parameter name {name} found: crf_decoding's param_attr must name the transition "
                         f"parameter of a linear_chain_crf built before it (ParamAttr(name=...) in both)")
    path = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    inputs = {"Emission": [input], "Transition": [transition]}
    if label is not None:
        inputs["Label"] = [label]
    if length is not None:
        inputs["Length"] = [length]
    helper.append_op("crf_decoding", inputs, {"ViterbiPath": [path]})
    return path
