"""Spatial layers of Fluid 1.8 (Fluid's layers/nn.py): unfold, temporal_shift, affine_grid,
grid_sampler, crop, fsp_matrix, similarity_focus, add_position_encoding.

Each function appends one op of ops/grid.py (Fluid's op type: ``unfold``, ``fsp``, ...) to
the default main program and returns its output var, whose shape the op's ``infer`` gives
(-1 for the batch dim). None makes parameters. ``affine_grid``'s ``out_shape`` and ``crop``'s
``shape`` and ``offsets`` may be Variables, as in Fluid: they become the op's OutputShape, Y
and Offsets inputs, read when the op runs. Building a program is single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    L = fluid.layers
    img = L.data("img", shape=[3, 8, 8])                               # [-1, 3, 8, 8]
    theta = L.data("theta", shape=[2, 3])                               # [-1, 2, 3]
    grid = L.affine_grid(theta, out_shape=[4, 3, 8, 8])                 # [-1, 8, 8, 2]
    warped = L.grid_sampler(img, grid)                                  # [-1, 3, 8, 8]
    patches = L.unfold(warped, kernel_sizes=2, strides=2)               # [-1, 12, 16]
    centre = L.crop(img, shape=[-1, 3, 4, 4], offsets=[0, 0, 2, 2])     # [-1, 3, 4, 4]
"""
from __future__ import annotations

from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper

__all__ = ["unfold", "temporal_shift", "affine_grid", "grid_sampler", "crop", "fsp_matrix", "similarity_focus",
           "add_position_encoding"]


def _append(layer: str, op_type: str, inputs: dict, attrs: dict, name=None, out: str = "Out"):
    """Append ``op_type`` with one new output var in slot ``out``; return it."""
    helper = LayerHelper(layer, name=name)
    first = next(iter(inputs.values()))
    res = helper.create_variable_for_type_inference(first.dtype)
    helper.append_op(op_type, {k: [v] for k, v in inputs.items()}, {out: [res]}, attrs)
    return res


def _pair(layer: str, what: str, value) -> list:
    """An int or a list of two ints, as 1.8's unfold takes them."""
    if isinstance(value, int) and not isinstance(value, bool):
        return [value, value]
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return value
    raise ValueError(f"{layer}: {what} must be an int or a list of two ints, got {value!r}")


def _typed(layer: str, what: str, value, types, type_name: str):
    if not isinstance(value, types) or isinstance(value, bool):
        raise TypeError(f"{layer}: {what} must be {type_name}, got {type(value).__name__} {value!r}")
    return value


def unfold(x, kernel_sizes, strides=1, paddings=0, dilations=1, name=None):
    """Sliding blocks of ``x`` [N, C, H, W] as columns (im2col): Y [N, C*kh*kw, L] with
    ``L = oh*ow`` blocks, row ``(c*kh + i)*kw + j`` holding tap (i, j) of channel c
    (NOTE(unfold) in ops/grid.py).

    Per axis ``o = (in + pad_lo + pad_hi - (dilation*(k-1) + 1)) // stride + 1``.

    Args:
        x: a 4-D float Variable, [N, C, H, W].
        kernel_sizes: k or [kh, kw].
        strides, dilations: an int or [h, w] (default 1).
        paddings: an int, [ph, pw], or [up, left, down, right] (Fluid's order; default 0).
        name: the layer's name.

    Returns:
        Y, [N, C*kh*kw, oh*ow].

    Raises:
        ValueError: x not 4-D, or a size of the wrong form.
        ProgramError: from the op, when the blocks do not fit.

    Example::

        cols = fluid.layers.unfold(img, kernel_sizes=[3, 3], paddings=1)   # [-1, 27, 64] for 3x8x8
    """
    if len(x.shape) != 4:
        raise ValueError(f"unfold: x {x.name} must be 4-D [N, C, H, W], got shape {list(x.shape)}")
    if isinstance(paddings, int) and not isinstance(paddings, bool):
        paddings = [paddings] * 4
    elif isinstance(paddings, list) and len(paddings) in (2, 4):
        paddings = paddings * 2 if len(paddings) == 2 else paddings
    else:
        raise ValueError(f"unfold: paddings must be an int or a list of 2 or 4 ints, got {paddings!r}")
    attrs = {"kernel_sizes": _pair("unfold", "kernel_sizes", kernel_sizes),
             "strides": _pair("unfold", "strides", strides), "paddings": list(paddings),
             "dilations": _pair("unfold", "dilations", dilations)}
    return _append("unfold", "unfold", {"X": x}, attrs, name, out="Y")


def temporal_shift(x, seg_num, shift_ratio=0.25, name=None):
    """The Temporal Shift Module: ``x`` [N*T, C, H, W] read as N clips of ``seg_num`` = T
    frames; the first ``int(C * shift_ratio)`` channels of frame t come from frame t-1, the
    next as many from frame t+1 (zeros past a clip's ends), the rest stay.

    Args:
        x: a 4-D float Variable, [N*T, C, H, W].
        seg_num: T, an int; dim 0 must divide by it.
        shift_ratio: a float in (0, 0.5) (default 0.25).
        name: the layer's name.

    Returns:
        A Variable of x's shape.

    Raises:
        TypeError: seg_num not an int, or shift_ratio not a float.
        ProgramError: from the op, for x not 4-D or a ratio out of range.

    Example::

        y = fluid.layers.temporal_shift(frames, seg_num=8, shift_ratio=0.25)
    """
    _typed("temporal_shift", "seg_num", seg_num, int, "an int")
    _typed("temporal_shift", "shift_ratio", shift_ratio, float, "a float")
    return _append("temporal_shift", "temporal_shift", {"X": x}, {"seg_num": seg_num, "shift_ratio": shift_ratio},
                   name)


def affine_grid(theta, out_shape, name=None):
    """The sampling grid of an affine transform: Output [N, H, W, 2], the (x, y) in [-1, 1] that
    each output cell reads, ``Theta[n] @ (x_w, y_h, 1)`` over the [-1, 1] grid of H x W
    (NOTE(affine-grid) in ops/grid.py). Feed it to ``grid_sampler``.

    Args:
        theta: a float Variable, [N, 2, 3].
        out_shape: the output image's [N, C, H, W], as a list/tuple of ints, or an int32
            Variable holding them (then H and W are -1 in the static shape).
        name: ignored, as in Fluid 1.8.

    Returns:
        The grid Variable, [N, H, W, 2].

    Raises:
        ValueError: out_shape neither a list, a tuple nor a Variable; theta not a Variable.
        ProgramError: from the op, for theta not [N, 2, 3] or out_shape not 4 ints.

    Example::

        grid = fluid.layers.affine_grid(theta, out_shape=[-1, 3, 32, 32])
    """
    if not isinstance(theta, Variable):
        raise ValueError(f"affine_grid: theta must be a Variable, got {type(theta).__name__}")
    if isinstance(out_shape, Variable):
        return _append("affine_grid", "affine_grid", {"Theta": theta, "OutputShape": out_shape}, {},
                       out="Output")
    if not isinstance(out_shape, (list, tuple)):
        raise ValueError(f"affine_grid: out_shape must be a list, tuple or Variable, got {out_shape!r}")
    return _append("affine_grid", "affine_grid", {"Theta": theta}, {"output_shape": list(out_shape)}, out="Output")


def grid_sampler(x, grid, name=None):
    """Bilinear sampling of ``x`` [N, C, H, W] at the points of ``grid`` [N, H, W, 2] ((x, y) in
    [-1, 1], the corners the corner cells' centres); a neighbour outside the image reads 0.
    Fluid 1.8's op: the output has x's size, so grid's H and W are x's
    (NOTE(grid-sampler-1.8) in ops/grid.py).

    Args:
        x: a 4-D float Variable, [N, C, H, W].
        grid: a float Variable of x's dtype, [N, H, W, 2].
        name: the layer's name.

    Returns:
        The sampled Variable, [N, C, H, W].

    Raises:
        ValueError: x or grid not a Variable.
        ProgramError: from the op, for mismatched shapes or dtypes.

    Example::

        out = fluid.layers.grid_sampler(img, fluid.layers.affine_grid(theta, [-1, 3, 8, 8]))
    """
    for what, v in (("x", x), ("grid", grid)):
        if not isinstance(v, Variable):
            raise ValueError(f"grid_sampler: {what} must be a Variable, got {type(v).__name__}")
    return _append("grid_sampler", "grid_sampler", {"X": x, "Grid": grid}, {}, name, out="Output")


def crop(x, shape=None, offsets=None, name=None):
    """The box of ``x`` at ``offsets`` with the shape ``shape`` (Fluid 1.8's ``crop`` op; see also
    ``crop_tensor``).

    Args:
        x: a float Variable of 1 to 6 dims.
        shape: a list/tuple of ints, one per dim of x (dim 0 may be -1: x's), or a Variable of
            x's rank whose shape (not its values) is the output's, read when the op runs.
        offsets: None (zeros), a list/tuple of ints, one per dim, or an int32 Variable of
            them, read when the op runs.
        name: the layer's name.

    Returns:
        The cropped Variable.

    Raises:
        TypeError: shape neither a list, a tuple nor a Variable.
        ProgramError: from the op, when the box does not fit x (or, with an Offsets
            Variable, a ValueError when the op runs).

    Example::

        c = fluid.layers.crop(img, shape=[-1, 3, 4, 4], offsets=[0, 0, 2, 2])
    """
    if not isinstance(shape, (list, tuple, Variable)):
        raise TypeError(f"crop: shape must be a list, tuple or Variable, got {shape!r}")
    ins, attrs = {"X": x}, {}
    if isinstance(shape, Variable):
        ins["Y"] = shape
    else:
        attrs["shape"] = list(shape)
    if isinstance(offsets, Variable):
        ins["Offsets"] = offsets
    else:
        attrs["offsets"] = [0] * len(x.shape) if offsets is None else list(offsets)
    return _append("crop", "crop", ins, attrs, name)


def fsp_matrix(x, y):
    """The FSP matrix of two feature maps (knowledge distillation): Out [N, C1, C2] =
    ``x`` [N, C1, H, W] · ``y`` [N, C2, H, W] summed over the H*W cells, divided by H*W (op
    ``fsp``).

    Args:
        x, y: 4-D float Variables sharing N, H, W and dtype.

    Returns:
        A Variable, [N, C1, C2].

    Raises:
        ProgramError: from the op, for mismatched shapes or dtypes.

    Example::

        loss = fluid.layers.reduce_mean(fluid.layers.square(
            fluid.layers.fsp_matrix(s1, s2) - fluid.layers.fsp_matrix(t1, t2)))
    """
    return _append("fsp_matrix", "fsp", {"X": x, "Y": y}, {})


def similarity_focus(input, axis, indexes, name=None):
    """A 0/1 mask of ``input`` [N, A, B, C]'s shape: for each index in ``indexes``, the slice at
    that index along ``axis`` picks its largest cells greedily, one per row and column; the
    mask is 1 along ``axis`` at every picked cell (NOTE(similarity-focus) in ops/grid.py). No
    gradient.

    Args:
        input: a 4-D float Variable.
        axis: 1, 2 or 3.
        indexes: a non-empty list of ints, each below ``input.shape[axis]``.
        name: the layer's name.

    Returns:
        The mask Variable, of input's shape and dtype.

    Raises:
        TypeError: axis not an int or indexes not a list.
        ValueError: axis not 1, 2 or 3, or indexes empty.

    Example::

        mask = fluid.layers.similarity_focus(sim, axis=1, indexes=[0])
    """
    _typed("similarity_focus", "axis", axis, int, "an int")
    _typed("similarity_focus", "indexes", indexes, list, "a list")
    if axis not in (1, 2, 3):
        raise ValueError(f"similarity_focus: axis must be 1, 2 or 3, got {axis}")
    if not indexes:
        raise ValueError("similarity_focus: indexes can not be empty")
    out = _append("similarity_focus", "similarity_focus", {"X": input}, {"axis": axis, "indexes": list(indexes)},
                  name)
    out.stop_gradient = True
    return out


def add_position_encoding(input, alpha, beta, name=None):
    """``alpha * input + beta * PE`` for ``input`` [N, L, E]: PE is the transformer's sinusoid,
    sin(j / 10000^(k / (E/2 - 1))) in the first E/2 columns of position j and the cos in
    the last E/2.

    Args:
        input: a 3-D float Variable, [N, L, E], E even (Fluid's LoD form is not supported).
        alpha: the input's scale, a float.
        beta: the encoding's scale, a float.
        name: the layer's name.

    Returns:
        A Variable of input's shape.

    Raises:
        ProgramError: from the op, for input not 3-D or E odd.

    Example::

        h = fluid.layers.add_position_encoding(emb, alpha=1.0, beta=1.0)
    """
    return _append("add_position_encoding", "add_position_encoding", {"X": input},
                   {"alpha": float(alpha), "beta": float(beta)}, name)
