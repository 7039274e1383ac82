"""Tensor manipulation layers, Fluid 1.8 signatures (Fluid's layers/nn.py and tensor.py):
transposes and reshapes, flips and rolls, gathers and scatters, slices and pads, resizes, sorts,
unique values, fills shaped like a var.

Each function appends one op of ops/shape.py, ops/index.py or ops/resample.py (Fluid's op type:
``transpose2``, ``squeeze2``, ``arg_max``, ...) to the default main program and returns its
output var(s), whose shape the op's ``infer`` gives (-1 for the batch dim). The ops with an
``XShape`` output make that var too, as Fluid does. Integer outputs (indices, shapes, one-hot
codes, ranges) have ``stop_gradient`` set. Arguments that Fluid 1.8 also takes as run-time
Variables (a ``depth``, ``starts``, ``paddings``, ``expand_times`` var) must be Python values
here; a Variable is a ValueError that says so. Building a program is single-threaded, as in
Fluid.

Example::

    import placegroup as fluid
    L = fluid.layers
    img = L.data("img", shape=[3, 8, 8])                         # [-1, 3, 8, 8]
    hwc = L.transpose(img, perm=[0, 2, 3, 1])                    # [-1, 8, 8, 3]
    top = L.slice(hwc, axes=[1, 2], starts=[0, 0], ends=[4, 4])  # [-1, 4, 4, 3]
    flat = L.flatten(L.pad2d(img, [1, 1, 1, 1], mode="reflect"))  # [-1, 300]
    label = L.data("label", shape=[1], dtype="int64")
    code = L.one_hot(label, depth=10)                            # [-1, 10] float32
"""
from __future__ import annotations

import builtins

from placegroup.ir.framework import Variable, normalize_dtype
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers import nn
from placegroup.layers.tensor import assign, cast, fill_constant, shape_inputs

__all__ = ["transpose", "one_hot", "gather", "gather_nd", "scatter", "expand", "expand_as", "stack", "unstack",
           "unsqueeze", "squeeze", "slice", "crop_tensor", "flatten", "pad", "pad2d", "reverse", "argmax", "argmin",
           "argsort", "cumsum", "shape", "fill_constant_batch_size_like", "zeros_like", "ones_like", "range",
           "t", "flip", "roll", "tril", "triu", "diag", "diag_embed", "meshgrid", "strided_slice", "pixel_shuffle",
           "space_to_depth", "shuffle_channel", "pad_constant_like", "image_resize", "interpolate", "resize_bilinear",
           "resize_nearest", "resize_trilinear", "image_resize_short", "where", "nonzero", "unique",
           "unique_with_counts", "index_select", "index_sample", "scatter_nd_add", "scatter_nd", "multiplex"]


def _static(layer: str, what: str, value):
    """``value`` as a Python value: a run-time Variable here is a ValueError naming the layer."""
    values = value if isinstance(value, (list, tuple)) else [value]
    if any(isinstance(v, Variable) for v in values):
        raise ValueError(f"{layer}: {what} given as a Variable ({value!r}) is not supported; pass Python ints")
    return value


def _ints(layer: str, what: str, value) -> list:
    value = _static(layer, what, value)
    return [int(value)] if isinstance(value, int) else [int(v) for v in value]


def _op(layer: str, op_type: str, inputs: dict, attrs: dict | None = None, name=None, dtype=None,
        outs=("Out",), stop_gradient: bool = False, xshape: bool = False):
    """Append ``op_type`` writing a new var per slot of ``outs`` (plus XShape when asked);
    return the var, or the tuple of vars when ``outs`` has several."""
    helper = LayerHelper(layer, name=name)
    first = next(iter(inputs.values()))
    first = first[0] if isinstance(first, (list, tuple)) else first
    made = [helper.create_variable_for_type_inference(dtype or first.dtype, stop_gradient=stop_gradient)
            for _ in outs]
    outputs = {slot: [v] for slot, v in zip(outs, made)}
    if xshape:
        outputs["XShape"] = [helper.create_variable_for_type_inference(first.dtype, stop_gradient=True)]
    ins = {k: list(v) if isinstance(v, (list, tuple)) else [v] for k, v in inputs.items()}
    helper.append_op(op_type, ins, outputs, attrs or {})
    return made[0] if len(made) == 1 else tuple(made)


# -- transposes and reshapes ----------------------------------------------------------------


def transpose(x, perm, name=None):
    """``x`` with its dims permuted: output dim i is ``x``'s dim ``perm[i]`` (a ``transpose2``
    op). Raises ProgramError when ``perm`` is not a permutation of ``x``'s dims.

    Example: ``L.transpose(x, perm=[1, 0, 2])`` turns [N, T, D] into [T, N, D].
    """
    return _op("transpose", "transpose2", {"X": x}, {"axis": _ints("transpose", "perm", perm)}, name, xshape=True)


def unsqueeze(input, axes, name=None):
    """``input`` with a size-1 dim inserted at each of ``axes`` (an int or list), one after the
    other, each counted in the shape so far (``unsqueeze2``).

    Example: ``L.unsqueeze(x, axes=[0, -1])`` turns [2, 3] into [1, 2, 3, 1].
    """
    return _op("unsqueeze2", "unsqueeze2", {"X": input}, {"axes": _ints("unsqueeze", "axes", axes)}, name,
               xshape=True)


def squeeze(input, axes, name=None):
    """``input`` without the size-1 dims listed in ``axes`` (every size-1 dim if ``axes`` is
    empty); a listed dim whose size is not 1 stays, as in Fluid 1.8 (``squeeze2``).

    Example: ``L.squeeze(x, axes=[1])`` turns [N, 1, 5] into [N, 5].
    """
    return _op("squeeze", "squeeze2", {"X": input}, {"axes": _ints("squeeze", "axes", axes)}, name, xshape=True)


def flatten(x, axis: int = 1, name=None):
    """``x`` as a matrix: the dims before ``axis`` (0..rank) make the rows, the rest the columns
    (``flatten2``).

    Example: ``L.flatten(img)`` turns [N, C, H, W] into [N, C*H*W].
    """
    return _op("flatten", "flatten2", {"X": x}, {"axis": int(axis)}, name, xshape=True)


def expand(x, expand_times, name=None):
    """``x`` tiled ``expand_times[i]`` times along each dim i (one count >= 1 per dim); the
    gradient sums the copies.

    The counts may be Variables, as in Fluid 1.8: an int Variable holding them all, or a list
    mixing ints and int Variables of one element (``fluid.layers.shape(x)[1]``), read each run.

    Example: ``L.expand(x, expand_times=[1, 3])`` turns [N, 2] into [N, 6].
    """
    if isinstance(expand_times, Variable) or (isinstance(expand_times, (list, tuple))
                                              and any(isinstance(t, Variable) for t in expand_times)):
        tensors, attr = shape_inputs("expand", expand_times)
        inputs = {"X": x, **{{"ShapeTensor": "ExpandTimes", "ShapeTensorList": "expand_times_tensor"}[k]: v
                             for k, v in tensors.items()}}
        return _op("expand", "expand", inputs, {"expand_times": attr}, name)
    return _op("expand", "expand", {"X": x}, {"expand_times": _ints("expand", "expand_times", expand_times)}, name)


def expand_as(x, target_tensor, name=None):
    """``x`` tiled to ``target_tensor``'s shape, each of whose dims must be a multiple of
    ``x``'s (only ``x`` gets a gradient).

    Example: ``L.expand_as(bias_row, scores)`` turns [1, D] into scores' [N, D].
    """
    return _op("expand_as", "expand_as", {"X": x, "target_tensor": target_tensor}, {}, name)


def stack(x, axis: int = 0, name=None):
    """The vars of ``x`` (a list, all of one shape and dtype, or one var) stacked along a new
    dim ``axis`` (in -(rank+1)..rank).

    Example: ``L.stack([a, b, c], axis=1)`` turns three [N, D] into [N, 3, D].
    """
    return _op("stack", "stack", {"X": list(x) if isinstance(x, (list, tuple)) else [x]}, {"axis": int(axis)},
               name, outs=("Y",))


def unstack(x, axis: int = 0, num=None):
    """The slices of ``x`` along ``axis``, that dim removed: a list of ``num`` vars (default:
    ``x``'s size along ``axis``, which must then be known).

    Example: ``a, b, c = L.unstack(x, axis=1)`` for x [N, 3, D] gives three [N, D].
    """
    helper = LayerHelper("unstack")
    if num is None:
        d = x.shape[axis] if -len(x.shape) <= axis < len(x.shape) else None
        if d is None or d < 0:
            raise ValueError(f"unstack: num is needed when dim {axis} of {x.name}{list(x.shape)} is unknown")
        num = d
    outs = [helper.create_variable_for_type_inference(x.dtype) for _ in builtins.range(int(num))]  # range: a layer
    helper.append_op("unstack", {"X": [x]}, {"Y": outs}, {"axis": int(axis), "num": int(num)})
    return outs


# -- slices and pads ------------------------------------------------------------------------


def _run_time_lists(layer: str, axes, lists: dict) -> tuple:
    """(inputs, attrs) of a slice op whose ``lists`` (starts, ends, strides) may be int
    Variables or hold them, as Fluid 1.8 builds them (NOTE(run-time-ints) in ops/tensor.py): a
    Variable is the ``<Key>Tensor`` input (its attr empty), a list with Variables the
    ``<Key>TensorList`` input (their attr entries -1); ``infer_flags`` is -1 for each entry read
    at run time."""
    axes = _ints(layer, "axes", axes)
    inputs, attrs, flags = {}, {"axes": axes}, [1] * len(axes)
    for key, value in lists.items():
        name = key.capitalize()
        if isinstance(value, Variable):
            inputs[name + "Tensor"], attrs[key], flags = [value], [], [-1] * len(axes)
            value.stop_gradient = True
            continue
        value = list(value)
        if any(isinstance(v, Variable) for v in value):
            inputs[name + "TensorList"] = [v if isinstance(v, Variable) else fill_constant([1], "int32", int(v))
                                           for v in value]
            for i, v in enumerate(value):
                if isinstance(v, Variable):
                    v.stop_gradient = True
                    flags[i] = -1
            attrs[key] = [-1 if isinstance(v, Variable) else int(v) for v in value]
        else:
            attrs[key] = [int(v) for v in value]
    return inputs, {**attrs, "infer_flags": flags, "decrease_axis": []}


def slice(input, axes, starts, ends):  # noqa: A001  (Fluid's name)
    """``input[starts[i]:ends[i]]`` along each of ``axes``; negative starts and ends count from
    the end, ends past the dim are clamped to it, and what is left must not be empty.
    ``starts`` and ``ends`` may be int Variables, or lists holding them, read at run time.

    Example: ``L.slice(x, axes=[1], starts=[0], ends=[-1])`` drops the last column.
    """
    inputs, attrs = _run_time_lists("slice", axes, {"starts": starts, "ends": ends})
    return _op("slice", "slice", {"Input": input, **inputs}, attrs)


def crop_tensor(x, shape=None, offsets=None, name=None):
    """The box of ``x`` of size ``shape`` (one entry per dim; -1: to the end of the dim) at
    ``offsets`` (default zeros).

    Example: ``L.crop_tensor(img, shape=[-1, 3, 4, 4], offsets=[0, 0, 2, 2])``.
    """
    if shape is None:
        raise ValueError("crop_tensor: shape is required")
    shape = _ints("crop_tensor", "shape", shape)
    offsets = [0] * len(x.shape) if offsets is None else _ints("crop_tensor", "offsets", offsets)
    return _op("crop_tensor", "crop_tensor", {"X": x}, {"shape": shape, "offsets": offsets}, name)


def pad(x, paddings, pad_value: float = 0.0, name=None):
    """``x`` with ``paddings[2i]`` values before and ``paddings[2i+1]`` after dim i, all
    ``pad_value``.

    Example: ``L.pad(x, paddings=[0, 0, 1, 2])`` turns [N, 3] into [N, 6].
    """
    return _op("pad", "pad", {"X": x}, {"paddings": _ints("pad", "paddings", paddings), "pad_value": float(pad_value)},
               name)


def pad2d(input, paddings=(0, 0, 0, 0), mode: str = "constant", pad_value: float = 0.0, data_format: str = "NCHW",
          name=None):
    """A 4-D ``input`` padded in H and W by ``paddings`` [top, bottom, left, right]: with
    ``pad_value`` (``"constant"``), the mirror image without the edge (``"reflect"``, each pad
    smaller than its dim) or the edge repeated (``"edge"``).

    Example: ``L.pad2d(img, [1, 1, 2, 2], mode="edge")`` turns [N, C, 8, 8] into [N, C, 10, 12].
    """
    return _op("pad2d", "pad2d", {"X": input},
               {"paddings": _ints("pad2d", "paddings", paddings), "mode": mode, "pad_value": float(pad_value),
                "data_format": data_format}, name)


def reverse(x, axis):
    """``x`` with the order along ``axis`` (an int or list of dims) reversed.

    Example: ``L.reverse(seq, axis=1)`` reverses each row of [N, T].
    """
    return _op("reverse", "reverse", {"X": x}, {"axis": _ints("reverse", "axis", axis)})


# -- indexing -------------------------------------------------------------------------------


def gather(input, index, overwrite: bool = True):
    """The rows ``input[index[i]]`` (``index`` int32/int64, [N] or [N, 1]). ``overwrite`` says
    how a repeated index's gradient lands: True keeps the last one, as Fluid 1.8 does; pass
    False to add them up (NOTE(overwrite) in ops/index.py).

    Example: ``L.gather(table, ids)`` for table [V, D] and ids [N] gives [N, D].
    """
    return _op("gather", "gather", {"X": input, "Index": index}, {"overwrite": bool(overwrite)})


def gather_nd(input, index, name=None):
    """One element or slice of ``input`` per index tuple: ``index``'s last dim k (<= rank)
    indexes ``input``'s first k dims; the result is ``index.shape[:-1] + input.shape[k:]``.

    Example: ``L.gather_nd(x, idx)`` for x [3, 4, 5] and idx [N, 2] gives [N, 5].
    """
    return _op("gather_nd", "gather_nd", {"X": input, "Index": index}, {}, name)


def scatter(input, index, updates, name=None, overwrite: bool = True):
    """``input`` with row ``index[i]`` replaced by ``updates[i]``; a repeated index takes the
    last update (``overwrite``) or, with ``overwrite=False``, the sum of its updates. The
    gradient of ``input`` is the output's gradient unchanged, as in Fluid 1.8
    (NOTE(scatter-grad-1.8) in ops/index.py).

    Example: ``L.scatter(x, ids, rows)`` for x [V, D], ids [N] and rows [N, D].
    """
    return _op("scatter", "scatter", {"X": input, "Ids": index, "Updates": updates}, {"overwrite": bool(overwrite)},
               name)


def one_hot(input, depth: int, allow_out_of_range: bool = False):
    """float32 one-hot codes of the int64 ids ``input`` [..., 1]: [..., depth] (the trailing 1
    replaced). An id outside [0, depth) is an error at run time, or, with
    ``allow_out_of_range``, a row of zeros. No gradient.

    Example: ``L.one_hot(label, depth=10)`` turns [N, 1] into [N, 10].
    """
    return _op("one_hot", "one_hot", {"X": input},
               {"depth": int(_static("one_hot", "depth", depth)), "allow_out_of_range": bool(allow_out_of_range)},
               dtype="float32", stop_gradient=True)


def argmax(x, axis: int = 0):
    """The int64 index of the first maximum of ``x`` along ``axis`` (that dim removed).

    Example: ``L.argmax(prob, axis=1)`` turns [N, C] into [N].
    """
    return _op("arg_max", "arg_max", {"X": x}, {"axis": int(axis)}, dtype="int64", stop_gradient=True)


def argmin(x, axis: int = 0):
    """The int64 index of the first minimum of ``x`` along ``axis`` (that dim removed).

    Example: ``L.argmin(dist, axis=1)`` turns [N, K] into [N].
    """
    return _op("arg_min", "arg_min", {"X": x}, {"axis": int(axis)}, dtype="int64", stop_gradient=True)


def argsort(input, axis: int = -1, descending: bool = False, name=None):
    """``(sorted, indices)``: ``input`` sorted along ``axis`` and the int64 positions the values
    came from; ties keep their order. The sorted values have a gradient.

    Example: ``vals, idx = L.argsort(scores, axis=1, descending=True)``.
    """
    out, ids = _op("argsort", "argsort", {"X": input}, {"axis": int(axis), "descending": bool(descending)}, name,
                   outs=("Out", "Indices"))
    ids.stop_gradient = True
    return out, ids


def cumsum(x, axis=None, exclusive=None, reverse=None):
    """Running sums of ``x`` along ``axis`` (default the last); ``exclusive`` leaves each
    element out of its own sum, ``reverse`` sums from the end.

    Example: ``L.cumsum(x, axis=1, exclusive=True)`` gives [0, x0, x0+x1, ...] per row.
    """
    attrs = {"axis": -1 if axis is None else int(axis), "exclusive": bool(exclusive), "reverse": bool(reverse)}
    return _op("cumsum", "cumsum", {"X": x}, attrs)


# -- shapes and fills -----------------------------------------------------------------------


def shape(input):
    """``input``'s shape as an int32 vector [rank], read at run time (so the batch size too).

    Example: ``n = L.slice(L.shape(x), axes=[0], starts=[0], ends=[1])``.
    """
    return _op("shape", "shape", {"Input": input}, dtype="int32", stop_gradient=True)


def fill_constant_batch_size_like(input, shape, dtype, value, input_dim_idx: int = 0, output_dim_idx: int = 0,
                                  force_cpu: bool = False):
    """A var of ``shape`` filled with ``value``, whose dim ``output_dim_idx`` is ``input``'s dim
    ``input_dim_idx`` at run time (the batch size).

    Example: ``h0 = L.fill_constant_batch_size_like(x, shape=[-1, 64], dtype="float32", value=0.0)``.
    """
    dtype = normalize_dtype(dtype)
    attrs = {"shape": _ints("fill_constant_batch_size_like", "shape", shape), "dtype": dtype, "value": float(value),
             "str_value": str(float(value)), "input_dim_idx": int(input_dim_idx), "output_dim_idx": int(output_dim_idx),
             "force_cpu": bool(force_cpu)}
    return _op("fill_constant_batch_size_like", "fill_constant_batch_size_like", {"Input": input}, attrs,
               dtype=dtype, stop_gradient=True)


def _like(layer: str, op_type: str, x, out, attrs: dict):
    helper = LayerHelper(layer)
    out = out if out is not None else helper.create_variable_for_type_inference(x.dtype)
    out.stop_gradient = True
    helper.append_op(op_type, {"X": [x]}, {"Out": [out]}, attrs)
    return out


def zeros_like(x, out=None):
    """Zeros of ``x``'s shape and dtype (into ``out`` if given); no gradient.

    Example: ``z = L.zeros_like(x)``.
    """
    return _like("zeros_like", "fill_zeros_like", x, out, {})


def ones_like(x, out=None):
    """Ones of ``x``'s shape and dtype (into ``out`` if given); no gradient.

    Example: ``o = L.ones_like(x)``.
    """
    return _like("ones_like", "fill_any_like", x, out, {"value": 1.0})


def range(start, end, step, dtype):  # noqa: A001  (Fluid's name)
    """``[start, start + step, ...)`` short of ``end``, of ``dtype`` (float32, float64, int32,
    int64); each bound is a number or a [1] var (cast to ``dtype``). Its length is known only
    at run time (shape [-1]); a zero step or one pointing away from ``end`` is an error then.

    Example: ``pos = L.range(0, 10, 1, "int64")`` gives [0, 1, ..., 9].
    """
    dtype = normalize_dtype(dtype)
    if dtype not in ("float32", "float64", "int32", "int64"):
        raise ValueError(f"range: dtype must be float32, float64, int32 or int64, got {dtype}")
    bounds = {}
    for slot, v in (("Start", start), ("End", end), ("Step", step)):
        if not isinstance(v, Variable):
            v = fill_constant([1], dtype, v)
        elif v.dtype != dtype:
            v = cast(v, dtype)
        bounds[slot] = v
    return _op("range", "range", bounds, dtype=dtype, stop_gradient=True)


# -- flips, rolls, triangles, diagonals, grids -----------------------------------------------


def t(input, name=None):
    """The transpose of a matrix (a ``transpose2`` op); a vector comes back as it is.

    Raises:
        ValueError: an input of rank > 2.

    Example: ``L.t(w)`` turns [M, N] into [N, M].
    """
    if len(input.shape) > 2:
        raise ValueError(f"t: input must have rank <= 2, got {input.name}{list(input.shape)}; use transpose")
    if len(input.shape) < 2:
        return input
    return _op("t", "transpose2", {"X": input}, {"axis": [1, 0]}, name, xshape=True)


def flip(input, dims, name=None):
    """``input`` with the order along each of ``dims`` (a list) reversed.

    Example: ``L.flip(img, dims=[3])`` mirrors images left to right.
    """
    if not isinstance(dims, (list, tuple)) or not dims:
        raise ValueError(f"flip: dims must be a non-empty list, got {dims!r}")
    return _op("flip", "flip", {"X": input}, {"dims": _ints("flip", "dims", dims)}, name)


def roll(input, shifts, dims=None):
    """``input`` rolled by ``shifts`` along ``dims`` (ints or lists); without dims the
    flattened input is rolled and reshaped back (reshape2, roll, reshape2, as Fluid 1.8).

    Example: ``L.roll(x, shifts=1, dims=1)`` moves each row's last entry to the front.
    """
    shifts = _ints("roll", "shifts", shifts)
    if dims is None:
        flat = nn.reshape(input, [-1, 1])
        out = _op("roll", "roll", {"X": flat}, {"shifts": shifts, "dims": [0]})
        return nn.reshape(out, list(input.shape))
    return _op("roll", "roll", {"X": input}, {"shifts": shifts, "dims": _ints("roll", "dims", dims)})


def _tril_triu(layer: str, input, diagonal, name):
    if len(input.shape) < 2:
        raise ValueError(f"{layer}: input must be at least 2-D, got {input.name}{list(input.shape)}")
    if not isinstance(diagonal, int):
        raise TypeError(f"{layer}: diagonal must be a Python int, got {diagonal!r}")
    return _op(layer, "tril_triu", {"X": input}, {"diagonal": diagonal, "lower": layer == "tril"}, name)


def tril(input, diagonal: int = 0, name=None):
    """``input`` on and below diagonal ``diagonal`` of its last two dims, zeros above.

    Example: ``L.tril(scores)`` keeps the causal half of a [T, T] matrix.
    """
    return _tril_triu("tril", input, diagonal, name)


def triu(input, diagonal: int = 0, name=None):
    """``input`` on and above diagonal ``diagonal`` of its last two dims, zeros below.

    Example: ``L.triu(m, diagonal=1)`` keeps the strict upper triangle.
    """
    return _tril_triu("triu", input, diagonal, name)


def diag(diagonal):
    """The square matrix with ``diagonal`` (a 1-D Variable or numpy array) on its diagonal; no
    gradient.

    Example: ``L.diag(np.arange(3, dtype="float32"))`` gives a [3, 3] matrix.
    """
    if not isinstance(diagonal, Variable):
        diagonal = assign(diagonal)
    return _op("diag", "diag", {"Diagonal": diagonal}, stop_gradient=True)


def diag_embed(input, offset: int = 0, dim1: int = -2, dim2: int = -1):
    """Each last-dim vector of ``input`` laid along diagonal ``offset`` of a new plane of
    output dims ``dim1`` x ``dim2``; no gradient (stop_gradient, as in Fluid 1.8).

    Example: ``L.diag_embed(v)`` turns [N, K] into [N, K, K].
    """
    if not isinstance(input, Variable):
        input = assign(input)
    return _op("diag_embed", "diag_embed", {"Input": input},
               {"offset": int(offset), "dim1": int(dim1), "dim2": int(dim2)}, stop_gradient=True)


def meshgrid(input, name=None):
    """The grids of the 1-D Variables in ``input`` (a list): each output has shape
    [len(input[0]), len(input[1]), ...] and varies along its own dim only.

    Example: ``gy, gx = L.meshgrid([ys, xs])``.
    """
    if not isinstance(input, list):
        raise TypeError(f"meshgrid: input must be a list of Variables, got {type(input).__name__}")
    helper = LayerHelper("meshgrid", name=name)
    outs = [helper.create_variable_for_type_inference(v.dtype) for v in input]
    helper.append_op("meshgrid", {"X": list(input)}, {"Out": outs})
    return outs


# -- strided slices, channel moves, resizes ---------------------------------------------------


def strided_slice(input, axes, starts, ends, strides):
    """``input[starts:ends:strides]`` along each of ``axes``; negative starts and ends count
    from the end, a negative stride walks backwards, and what is left must not be empty. A
    negative stride takes the entries Fluid 1.8 takes, anchored at the end: ``starts=[5],
    ends=[-100], strides=[-2]`` of 7 entries gives entries 4, 2, 0 (NOTE(strided-slice-1.8)
    in ops/shape.py). ``starts``, ``ends`` and ``strides`` may be int Variables, or lists holding
    them, read at run time.

    Example: ``L.strided_slice(x, axes=[1], starts=[0], ends=[8], strides=[2])`` keeps even columns.
    """
    inputs, attrs = _run_time_lists("strided_slice", axes, {"starts": starts, "ends": ends, "strides": strides})
    return _op("strided_slice", "strided_slice", {"Input": input, **inputs}, attrs)


def pixel_shuffle(x, upscale_factor: int):
    """[N, C·r², H, W] -> [N, C, H·r, W·r] (r = upscale_factor): sub-pixel convolution's shuffle.

    Example: ``L.pixel_shuffle(conv, upscale_factor=2)``.
    """
    if not isinstance(upscale_factor, int):
        raise TypeError(f"pixel_shuffle: upscale_factor must be an int, got {upscale_factor!r}")
    return _op("pixel_shuffle", "pixel_shuffle", {"X": x}, {"upscale_factor": upscale_factor})


def space_to_depth(x, blocksize: int, name=None):
    """[N, C, H, W] -> [N, C·b², H/b, W/b] as Paddle's space_to_depth reorders it (Darknet's
    reorg; NOTE(channel-moves) in ops/resample.py).

    Example: ``L.space_to_depth(feat, blocksize=2)``.
    """
    if not isinstance(blocksize, int):
        raise ValueError(f"space_to_depth: blocksize must be a Python int, got {blocksize!r}")
    return _op("space_to_depth", "space_to_depth", {"X": x}, {"blocksize": blocksize}, name)


def shuffle_channel(x, group: int, name=None):
    """ShuffleNet's channel shuffle of a 4-D ``x``: the [group, C/group] channel grid
    transposed. Its gradient is Paddle's (NOTE(shuffle-grad) in ops/resample.py).

    Example: ``L.shuffle_channel(x, group=3)``.
    """
    if not isinstance(group, int):
        raise TypeError(f"shuffle_channel: group must be an int, got {group!r}")
    return _op("shuffle_channel", "shuffle_channel", {"X": x}, {"group": group}, name)


def pad_constant_like(x, y, pad_value: float = 0.0, name=None):
    """``y`` padded with ``pad_value`` after its end in every dim to ``x``'s shape (only ``y``
    gets a gradient).

    Example: ``L.pad_constant_like(big, small, pad_value=0.0)``.
    """
    helper = LayerHelper("pad_constant_like", name=name)
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("pad_constant_like", {"X": [x], "Y": [y]}, {"Out": [out]}, {"pad_value": float(pad_value)})
    return out


_RESAMPLE = {"BILINEAR": "bilinear", "TRILINEAR": "trilinear", "NEAREST": "nearest", "BICUBIC": "bicubic"}


def _resize(layer: str, methods: tuple, input, out_shape, scale, name, resample, actual_shape, align_corners,
            align_mode, data_format):
    """Fluid 1.8's image_resize / interpolate: check the arguments as 1.8 does (naming ``layer``),
    then append ``<method>_interp``."""
    if resample not in methods:
        raise ValueError(f"{layer}: resample must be {', '.join(methods[:-1])} or {methods[-1]}, got {resample!r}"
                         + (" (fluid.layers.interpolate takes BICUBIC)" if resample == "BICUBIC" else ""))
    rank = 5 if resample == "TRILINEAR" else 4
    if len(input.shape) != rank:
        raise ValueError(f"{layer}: {resample} needs a {rank}-D input, got {input.name}{list(input.shape)}")
    if not isinstance(align_corners, bool) or align_mode not in (0, 1):
        raise ValueError(f"{layer}: align_corners must be a bool and align_mode 0 or 1, got {align_corners!r}, "
                         f"{align_mode!r}")
    if out_shape is None and scale is None:
        raise ValueError(f"{layer}: one of out_shape and scale must not be None")
    formats = ("NCHW", "NHWC") if rank == 4 else ("NCDHW", "NDHWC")
    if data_format not in formats:
        raise ValueError(f"{layer}: data_format must be {' or '.join(formats)} for a {rank}-D input, got "
                         f"{data_format!r}")
    if actual_shape is not None:
        raise ValueError(f"{layer}: actual_shape (a run-time size) is not supported; pass out_shape")
    method = _RESAMPLE[resample]
    attrs = {"out_d": -1, "out_h": -1, "out_w": -1, "interp_method": method, "align_corners": align_corners,
             "align_mode": int(align_mode), "data_layout": "NCHW" if data_format[1] == "C" else "NHWC"}
    if out_shape is not None:
        size = _ints(layer, "out_shape", out_shape)
        names = ("out_d", "out_h", "out_w")[5 - rank:]
        if len(size) != len(names) or min(size) <= 0:
            raise ValueError(f"{layer}: out_shape must be [{', '.join(names)}] > 0 for a {rank}-D input, got {size}")
        attrs.update(zip(names, size))
    else:
        _static(layer, "scale", scale)
        if scale <= 0:
            raise ValueError(f"{layer}: scale must be greater than zero, got {scale}")
        attrs["scale"] = float(scale)
    return _op(f"{method}_interp", f"{method}_interp", {"X": input}, attrs, name)


def interpolate(input, out_shape=None, scale=None, name=None, resample: str = "BILINEAR", actual_shape=None,
                align_corners: bool = True, align_mode: int = 1, data_format: str = "NCHW"):
    """``input`` resized to ``out_shape`` or by ``scale`` (out = int(in·scale)): a 4-D input in H
    and W by ``resample`` BILINEAR, NEAREST or BICUBIC, a 5-D one in D, H and W by TRILINEAR,
    with Fluid 1.8's ``align_corners`` / ``align_mode`` rules (NOTE(interp) and NOTE(bicubic) in
    ops/resample.py); a ``bilinear_interp``, ``nearest_interp``, ``bicubic_interp`` or
    ``trilinear_interp`` op.

    Args:
        input: [N, C, H, W] (``data_format`` NCHW) or [N, H, W, C] (NHWC); for TRILINEAR
            [N, C, D, H, W] (NCDHW) or [N, D, H, W, C] (NDHWC).
        out_shape: [out_h, out_w] (4-D) or [out_d, out_h, out_w] (5-D) Python ints; it wins over
            ``scale``.
        scale: a float > 0, used when ``out_shape`` is None.
        align_corners: map the corner pixels onto each other (ratio (in-1)/(out-1)).
        align_mode: 0 for the half-pixel source index of BILINEAR/TRILINEAR without
            align_corners, 1 for ratio·k.

    Returns:
        The resized var, of ``input``'s dtype.

    Raises:
        ValueError: an unknown resample, an input of the wrong rank for it, a bad align_mode or
            data_format, neither out_shape nor scale, a scale <= 0, or a run-time size (a
            Variable out_shape, scale or actual_shape).

    Example: ``L.interpolate(img, out_shape=[64, 64], resample="BICUBIC", align_corners=False)``.
    """
    return _resize("interpolate", ("BILINEAR", "TRILINEAR", "NEAREST", "BICUBIC"), input, out_shape, scale, name,
                   resample, actual_shape, align_corners, align_mode, data_format)


def image_resize(input, out_shape=None, scale=None, name=None, resample: str = "BILINEAR", actual_shape=None,
                 align_corners: bool = True, align_mode: int = 1, data_format: str = "NCHW"):
    """Fluid 1.8's image_resize: ``interpolate`` without BICUBIC (1.8's image_resize refuses it).

    Example: ``L.image_resize(img, scale=2.0, resample="NEAREST")``.
    """
    return _resize("image_resize", ("BILINEAR", "TRILINEAR", "NEAREST"), input, out_shape, scale, name, resample,
                   actual_shape, align_corners, align_mode, data_format)


def resize_bilinear(input, out_shape=None, scale=None, name=None, actual_shape=None, align_corners: bool = True,
                    align_mode: int = 1, data_format: str = "NCHW"):
    """``image_resize`` with BILINEAR.

    Example: ``L.resize_bilinear(img, out_shape=[32, 32], align_corners=False, align_mode=0)``.
    """
    return image_resize(input, out_shape, scale, name, "BILINEAR", actual_shape, align_corners, align_mode,
                        data_format)


def resize_trilinear(input, out_shape=None, scale=None, name=None, actual_shape=None, align_corners: bool = True,
                     align_mode: int = 1, data_format: str = "NCDHW"):
    """``image_resize`` with TRILINEAR: a 5-D ``input`` resized in D, H and W.

    Example: ``L.resize_trilinear(vol, out_shape=[8, 16, 16])`` for ``vol`` [-1, C, 4, 8, 8].
    """
    return image_resize(input, out_shape, scale, name, "TRILINEAR", actual_shape, align_corners, align_mode,
                        data_format)


def resize_nearest(input, out_shape=None, scale=None, name=None, actual_shape=None, align_corners: bool = True,
                   data_format: str = "NCHW"):
    """``image_resize`` with NEAREST.

    Example: ``L.resize_nearest(feat, scale=2.0)``.
    """
    return image_resize(input, out_shape, scale, name, "NEAREST", actual_shape, align_corners, 1, data_format)


def image_resize_short(input, out_short_len: int, resample: str = "BILINEAR"):
    """A 4-D NCHW ``input`` resized so that its shorter side (of H and W) is ``out_short_len``
    and the other keeps the aspect ratio (rounded half up), as Fluid 1.8: ``image_resize`` with
    that ``out_shape`` and its defaults (align_corners True).

    Raises:
        ValueError: an input that is not 4-D or whose H or W is unknown (-1).

    Example: ``L.image_resize_short(img, out_short_len=3)`` for ``img`` [-1, 3, 6, 9] gives
    [-1, 3, 3, 5].
    """
    if len(input.shape) != 4:
        raise ValueError(f"image_resize_short: input must be 4-D (num_batches, channels, in_h, in_w), got "
                         f"{input.name}{list(input.shape)}")
    hw = list(input.shape[2:4])
    if -1 in hw:
        raise ValueError(f"image_resize_short: H and W of {input.name}{list(input.shape)} must be known")
    short = hw.index(min(hw))
    out = list(hw)
    out[short] = out_short_len
    out[1 - short] = int(float(hw[1 - short]) * (float(out_short_len) / float(hw[short])) + 0.5)
    return image_resize(input, out_shape=out, resample=resample)


# -- where, unique, index_select, scatter_nd, multiplex --------------------------------------


def where(condition):
    """The int64 coordinates [N, rank] of the true entries of ``condition`` (a ``where_index``
    op, as Fluid 1.8's layers.where); N is known only at run time.

    Example: ``idx = L.where(L.greater_than(x, zero))``.
    """
    return _op("where_index", "where_index", {"Condition": condition}, dtype="int64", stop_gradient=True)


def nonzero(input, as_tuple: bool = False):
    """``where(input)``; with ``as_tuple``, one [N, 1] Variable per dim (slices of it), as Fluid
    1.8 (whose slice axis, rank - 1, only works for 2-D input; we slice axis 1 for any rank).

    Example: ``rows, cols = L.nonzero(mask, as_tuple=True)``.
    """
    out = where(input)
    if not as_tuple:
        return out
    r = len(input.shape)
    if r == 1:
        return (out,)
    return tuple(slice(out, axes=[1], starts=[i], ends=[i + 1]) for i in builtins.range(r))


def _unique(op_type: str, x, dtype: str, outs: tuple) -> tuple:
    helper = LayerHelper(op_type)
    made = [helper.create_variable_for_type_inference(x.dtype if slot == "Out" else dtype, stop_gradient=True)
            for slot in outs]
    helper.append_op(op_type, {"X": [x]}, {slot: [v] for slot, v in zip(outs, made)}, {"dtype": dtype})
    return tuple(made)


def unique(x, dtype: str = "int32"):
    """``(out, index)``: the distinct values of the 1-D ``x`` in the order they first appear,
    and for each entry of ``x`` its position in ``out`` (``dtype``). No gradient.

    Example: ``vals, idx = L.unique(ids)``.
    """
    return _unique("unique", x, normalize_dtype(dtype), ("Out", "Index"))


def unique_with_counts(x, dtype: str = "int32"):
    """``(out, index, count)``: ``unique``'s outputs and how often each value appears.

    Raises:
        TypeError: a dtype other than int32 / int64.
        ValueError: an ``x`` that is not 1-D.

    Example: ``vals, idx, counts = L.unique_with_counts(ids)``.
    """
    dtype = normalize_dtype(dtype)
    if dtype not in ("int32", "int64"):
        raise TypeError(f"unique_with_counts: index dtype must be int32 or int64, got {dtype}")
    if len(x.shape) != 1:
        raise ValueError(f"unique_with_counts: x must be 1-D, got {x.name}{list(x.shape)}")
    return _unique("unique_with_counts", x, dtype, ("Out", "Index", "Count"))


def index_select(input, index, dim: int = 0):
    """The slices ``index[i]`` of ``input`` along ``dim``, in order.

    Example: ``L.index_select(x, idx, dim=1)`` picks columns.
    """
    return _op("index_select", "index_select", {"X": input, "Index": index}, {"dim": int(dim)})


def index_sample(x, index):
    """``out[b, k] = x[b, index[b, k]]`` for x [B, N] and index [B, K].

    Example: ``L.index_sample(scores, topk_ids)``.
    """
    return _op("index_sample", "index_sample", {"X": x, "Index": index})


def scatter_nd_add(ref, index, updates, name=None):
    """``ref`` with ``updates`` added at the positions ``index``'s last dim names (an element
    or a slice each); repeats add up.

    Raises:
        ValueError: ref and updates of different dtypes.

    Example: ``L.scatter_nd_add(x, idx, upd)``.
    """
    if ref.dtype != updates.dtype:
        raise ValueError(f"scatter_nd_add: ref ({ref.dtype}) and updates ({updates.dtype}) must have one dtype")
    return _op("scatter_nd_add", "scatter_nd_add", {"X": ref, "Index": index, "Updates": updates}, {}, name)


def scatter_nd(index, updates, shape, name=None):
    """``scatter_nd_add`` into zeros of ``shape`` (Fluid 1.8's composition).

    Example: ``L.scatter_nd(idx, upd, shape=[3, 4])``.
    """
    return scatter_nd_add(fill_constant(_ints("scatter_nd", "shape", shape), updates.dtype, 0.0), index, updates,
                          name)


def multiplex(inputs, index):
    """Row i from ``inputs[index[i, 0]]``: ``inputs`` (at least 2, one shape) and ``index`` int
    [M, 1].

    Raises:
        ValueError: fewer than 2 inputs.

    Example: ``L.multiplex([a, b], choice)``.
    """
    if len(inputs) < 2:
        raise ValueError(f"multiplex: inputs should be a list of at least 2 Variables, got {len(inputs)}")
    return _op("multiplex", "multiplex", {"X": list(inputs), "Ids": index})
