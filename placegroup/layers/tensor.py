"""Tensor layers: constants, globals, casts, concatenation, creation (eye, linspace, full,
arange) and random tensors (Fluid 1.8's tensor.py and the random layers of its nn.py).

Random layers append counter-based ops (ops/random.py): a given seed draws the same numbers
every step, as in Fluid; no seed (or 0) gives the op a seed of its own and new numbers each
step (NOTE(layer-seeds)). ``fill_constant``, ``ones``, ``zeros``, ``uniform_random`` and
``gaussian_random`` take a shape with int Variables in it, read at run time (``shape_inputs``);
elsewhere a shape given as a Variable is a ValueError that says so. Building a program is
single-threaded, as in Fluid.

Example::

    import placegroup as fluid
    step = fluid.layers.create_global_var(shape=[1], value=0.0, dtype="float32", persistable=True)
    both = fluid.layers.concat([a, b], axis=1)
    noise = fluid.layers.gaussian_random_batch_size_like(x, shape=[-1, 16], std=0.1)  # [-1, 16]
"""
from __future__ import annotations

import hashlib

import numpy as np

from placegroup.ir import unique_name
from placegroup.ir.framework import TENSOR_ARRAY, Variable, normalize_dtype
from placegroup.model.initializer import ConstantInitializer
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers.file_ops import load_combine, save, save_combine  # noqa: F401  (Fluid binds them here)
from placegroup.model.param_attr import ParamAttr

__all__ = ["create_tensor", "create_parameter", "create_global_var", "cast", "concat", "sums", "assign",
           "fill_constant", "zeros", "ones", "eye", "linspace", "full", "full_like", "arange", "gaussian_random",
           "uniform_random", "gaussian_random_batch_size_like", "uniform_random_batch_size_like", "randint", "randn",
           "randperm", "sampling_id", "random_crop", "tensor_array_to_tensor"]


def create_tensor(dtype, name=None, persistable: bool = False):
    """An empty var of ``dtype``; the first op that writes it gives it a shape.

    Example::

        t = fluid.layers.create_tensor("float32")
        fluid.layers.assign(x, output=t)
    """
    helper = LayerHelper("create_tensor", name=name)
    return helper.block.create_var(name or unique_name.generate("create_tensor.tmp"),
                                   dtype=normalize_dtype(dtype), persistable=persistable)


def create_parameter(shape, dtype, name=None, attr=None, is_bias: bool = False, default_initializer=None):
    """A trainable parameter of ``shape`` (Xavier-initialized, zeros for a bias, unless told).

    Args:
        name: its name when ``attr`` is None (a ParamAttr's own name wins, as in Fluid 1.8,
            where a ParamAttr without one gives ``create_parameter_<n>.w_0``).
        attr: None or a ParamAttr; Fluid 1.8 takes no other form here.

    Raises:
        TypeError: ``attr`` is neither None nor a ParamAttr.

    Example::

        w = fluid.layers.create_parameter(shape=[4, 3], dtype="float32", name="w")
    """
    if attr is None:
        attr = ParamAttr(name=name)
    elif not isinstance(attr, ParamAttr):
        raise TypeError(f"create_parameter: attr={attr!r} ({type(attr).__name__}) must be None or a ParamAttr; "
                        f"pass fluid.ParamAttr(...), or name= for the name")
    helper = LayerHelper("create_parameter")
    return helper.create_parameter(attr, shape, normalize_dtype(dtype), is_bias, default_initializer)


def create_global_var(shape, value, dtype, persistable: bool = False, force_cpu: bool = False, name=None):
    """A global var filled with ``value`` by the startup program (a ``fill_constant`` there).

    Args:
        shape: its shape (no -1).
        value: the initial value.
        persistable: keep it across steps (counters, accumulators).
        force_cpu: accepted for Fluid compatibility; placement comes from PlaceGroups.

    Example::

        counter = fluid.layers.create_global_var([1], 0.0, "float32", persistable=True)
    """
    helper = LayerHelper("global_var", name=name)
    var = helper.create_global_variable(name=name, persistable=persistable, shape=[int(d) for d in shape],
                                        dtype=normalize_dtype(dtype), stop_gradient=True)
    helper.set_variable_initializer(var, ConstantInitializer(float(value)))
    return var


def cast(x, dtype):
    """``x`` converted to ``dtype`` (the gradient is converted back).

    Example::

        xf = fluid.layers.cast(ids, "float32")
    """
    helper = LayerHelper("cast")
    dtype = normalize_dtype(dtype)
    out = helper.create_variable_for_type_inference(dtype)
    helper.append_op("cast", {"X": [x]}, {"Out": [out]}, {"out_dtype": dtype})
    return out


def concat(input, axis: int = 0, name=None):
    """The vars of ``input`` joined along ``axis``; the other dims must agree.

    Example::

        both = fluid.layers.concat([a, b], axis=1)   # [N, 3] and [N, 2] -> [N, 5]
    """
    helper = LayerHelper("concat", name=name)
    out = helper.create_variable_for_type_inference(input[0].dtype)
    helper.append_op("concat", {"X": list(input)}, {"Out": [out]}, {"axis": int(axis)})
    return out


def sums(input, out=None):
    """The elementwise sum of the vars in ``input`` (all of one shape), into ``out`` if given."""
    helper = LayerHelper("sum")
    out = out if out is not None else helper.create_variable_for_type_inference(input[0].dtype)
    helper.append_op("sum", {"X": list(input)}, {"Out": [out]})
    return out


def assign(input, output=None):
    """Copy ``input`` (a var, or a numpy array stored in the program) into ``output``.

    Example::

        c = fluid.layers.assign(np.array([1.0, 2.0], dtype="float32"))
    """
    helper = LayerHelper("assign")
    if isinstance(input, Variable):
        output = output if output is not None else helper.create_variable_for_type_inference(input.dtype)
        helper.append_op("assign", {"X": [input]}, {"Out": [output]})
        return output
    value = np.asarray(input)
    dtype = normalize_dtype(value.dtype)
    output = output if output is not None else helper.create_variable_for_type_inference(dtype)
    helper.append_op("assign_value", outputs={"Out": [output]},
                     attrs={"shape": list(value.shape), "dtype": dtype, "values": value.ravel().tolist()},
                     role="forward")  # a step's constant, not a parameter's initializer
    return output


def shape_inputs(layer: str, shape) -> tuple:
    """(the op's ShapeTensor / ShapeTensorList inputs, its ``shape`` attr) for a ``shape`` given
    as Python ints, as an int Variable, or as a list holding int Variables, built as Fluid 1.8
    builds them (NOTE(run-time-ints) in ops/tensor.py): a Variable is the ``ShapeTensor``; in a
    list, each Variable is an entry of ``ShapeTensorList`` (its attr entry -1) and each int an
    int32 ``fill_constant`` beside it.

    Raises:
        TypeError: a Variable that is not int32 or int64.
        ValueError: an empty list.
    """
    def checked(v):
        if normalize_dtype(v.dtype) not in ("int32", "int64"):
            raise TypeError(f"{layer}: shape entry {v.name} is {v.dtype}; a shape Variable must be int32 or int64")
        v.stop_gradient = True
        return v

    if isinstance(shape, Variable):
        return {"ShapeTensor": [checked(shape)]}, []
    dims = list(shape)
    if not dims:
        raise ValueError(f"{layer}: shape must hold at least one entry, got {shape!r}")
    if not any(isinstance(d, Variable) for d in dims):
        return {}, [int(d) for d in dims]
    tensors = [checked(d) if isinstance(d, Variable) else fill_constant([1], "int32", int(d)) for d in dims]
    return {"ShapeTensorList": tensors}, [-1 if isinstance(d, Variable) else int(d) for d in dims]


def fill_constant(shape, dtype, value, force_cpu: bool = False, out=None):
    """A var of ``shape`` filled with ``value``, recomputed each step (into ``out`` if given).

    ``shape`` may be an int Variable or a list holding int Variables, read at run time
    (``shape=[fluid.layers.shape(x)[0], 1]``: one row per example of the batch).

    Example::

        one = fluid.layers.fill_constant(shape=[1], dtype="float32", value=1.0)
    """
    helper = LayerHelper("fill_constant")
    dtype = normalize_dtype(dtype)
    inputs, dims = shape_inputs("fill_constant", shape)
    out = out if out is not None else helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("fill_constant", inputs, outputs={"Out": [out]},
                     attrs={"shape": dims, "dtype": dtype, "value": float(value)},
                     role="forward")  # a step's constant, not a parameter's initializer
    return out


def zeros(shape, dtype, force_cpu: bool = False):
    """``fill_constant(shape, dtype, 0.0)``."""
    return fill_constant(shape, dtype, 0.0)


def ones(shape, dtype, force_cpu: bool = False):
    """``fill_constant(shape, dtype, 1.0)``."""
    return fill_constant(shape, dtype, 1.0)


# -- creation -------------------------------------------------------------------------------


def _shape(layer: str, shape, run_time: dict | None = None) -> list:
    """``shape`` as positive Python ints; a Variable (or a -1) is a ValueError naming the layer.
    With ``run_time`` (``shape_inputs``'s inputs), the -1 entries it reads at run time pass."""
    dims = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    if any(isinstance(d, Variable) for d in dims) or isinstance(shape, Variable):
        raise ValueError(f"{layer}: shape given as a Variable ({shape!r}) is not supported; pass Python ints")
    if run_time and "ShapeTensor" in run_time:
        return []
    if not dims or any(int(d) < 0 and not (run_time and d == -1) for d in dims):
        raise ValueError(f"{layer}: shape must be non-negative ints, got {list(dims)}")
    return [int(d) for d in dims]


def _out(helper, out, dtype: str, stop_gradient: bool = True):
    out = out if out is not None else helper.create_variable_for_type_inference(dtype)
    out.stop_gradient = stop_gradient
    return out


def eye(num_rows: int, num_columns=None, batch_shape=None, dtype="float32"):
    """The ``[num_rows, num_columns]`` identity (square when ``num_columns`` is None), repeated
    over ``batch_shape`` if given: shape ``batch_shape + [num_rows, num_columns]``.

    Raises:
        ValueError: for a negative size or a batch_shape that is not a list of ints.

    Example::

        i3 = fluid.layers.eye(3)                      # [3, 3] float32
        ib = fluid.layers.eye(2, 3, batch_shape=[4])  # [4, 2, 3]
    """
    helper = LayerHelper("eye")
    dtype = normalize_dtype(dtype)
    cols = num_rows if num_columns is None else num_columns
    if int(num_rows) < 0 or int(cols) < 0:
        raise ValueError(f"eye: num_rows ({num_rows}) and num_columns ({num_columns}) must be >= 0")
    out = _out(helper, None, dtype)
    helper.append_op("eye", outputs={"Out": [out]},
                     attrs={"num_rows": int(num_rows), "num_columns": int(cols), "dtype": dtype})
    if batch_shape is None:
        return out
    batch = _shape("eye", batch_shape)
    grown = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("reshape", {"X": [out]}, {"Out": [grown]},
                     {"shape": [1] * len(batch) + [int(num_rows), int(cols)]})
    tiled = helper.create_variable_for_type_inference(dtype, stop_gradient=True)
    helper.append_op("expand", {"X": [grown]}, {"Out": [tiled]}, {"expand_times": batch + [1, 1]})
    return tiled


def _scalar_var(layer: str, value, dtype: str):
    """A [1] var: ``value`` itself if it is a Variable (cast to ``dtype``), else a constant."""
    if isinstance(value, Variable):
        return value if value.dtype == dtype else cast(value, dtype)
    return fill_constant([1], dtype, value)


def linspace(start, stop, num, dtype):
    """``num`` evenly spaced values from ``start`` to ``stop`` (both included when ``num`` > 1;
    ``[start]`` when it is 1), of ``dtype`` float32 or float64. Each of start, stop (float) and
    num (int) may be a [1] Variable; the length is known at run time (shape [-1]).

    Raises:
        ValueError: for another dtype or a ``num`` < 1 given as an int.

    Example::

        xs = fluid.layers.linspace(0.0, 1.0, 5, "float32")   # [0, 0.25, 0.5, 0.75, 1]
    """
    dtype = normalize_dtype(dtype)
    if dtype not in ("float32", "float64"):
        raise ValueError(f"linspace: dtype must be float32 or float64, got {dtype}")
    if not isinstance(num, Variable) and int(num) < 1:
        raise ValueError(f"linspace: num must be >= 1, got {num}")
    helper = LayerHelper("linspace")
    out = _out(helper, None, dtype)
    helper.append_op("linspace", {"Start": [_scalar_var("linspace", start, dtype)],
                                  "Stop": [_scalar_var("linspace", stop, dtype)],
                                  "Num": [_scalar_var("linspace", num, "int32")]}, {"Out": [out]})
    return out


def full(shape, fill_value, out=None, dtype=None, device=None, stop_gradient: bool = True, name=None):
    """A var of ``shape`` filled with ``fill_value`` (``fill_constant``), of ``dtype`` (default
    float32), into ``out`` if given. ``device`` is accepted for Fluid compatibility; placement
    comes from PlaceGroups.

    Example::

        twos = fluid.layers.full([2, 3], 2.0)
    """
    out = fill_constant(_shape("full", shape), normalize_dtype(dtype or "float32"), fill_value, out=out)
    out.stop_gradient = stop_gradient
    return out


def full_like(input, fill_value, out=None, dtype=None, device=None, stop_gradient: bool = True, name=None):
    """A var of ``input``'s shape (its batch dim included) filled with ``fill_value``, of
    ``dtype`` (default: ``input``'s); a ``fill_any_like`` op, no gradient.

    Example::

        half = fluid.layers.full_like(x, 0.5)
    """
    helper = LayerHelper("full_like", name=name)
    dtype = normalize_dtype(dtype) if dtype is not None else input.dtype
    out = _out(helper, out, dtype, stop_gradient)
    helper.append_op("fill_any_like", {"X": [input]}, {"Out": [out]}, {"value": float(fill_value), "dtype": dtype})
    return out


def arange(start, end, step=1, dtype=None, name=None):
    """``[start, start + step, ...)`` short of ``end``: ``fluid.layers.range`` with a default
    step of 1 and dtype float32 (Fluid 1.8's ``arange``). Bounds may be numbers or [1] vars.

    Example::

        x = fluid.layers.arange(0, 6, 2)   # [0., 2., 4.]
    """
    dtype = normalize_dtype(dtype or "float32")
    if dtype not in ("float32", "float64", "int32", "int64"):
        raise ValueError(f"arange: dtype must be float32, float64, int32 or int64, got {dtype}")
    helper = LayerHelper("range", name=name)
    out = _out(helper, None, dtype)
    helper.append_op("range", {s: [_scalar_var("arange", v, dtype)] for s, v in
                               (("Start", start), ("End", end), ("Step", step))}, {"Out": [out]})
    return out


# -- random tensors -------------------------------------------------------------------------

# NOTE(layer-seeds): Fluid 1.8 draws a random op's numbers from a new engine each run when its
# seed is 0, and from an engine seeded with ``seed`` otherwise (the same numbers every run). A
# counter-based op needs a seed either way (NOTE(random-steps) in ops/random.py): a layer given
# no seed gives its op ``_op_seed(program.random_seed, type, k)``, k counting the ops of that
# type already in the program, and sets ``per_step`` (new numbers each step). The same script
# builds the same seeds in one process and on every trainer. A seed the user gives is fixed.


def _op_seed(random_seed: int, op_type: str, k: int) -> int:
    """A positive int32 seed for the k-th ``op_type`` op of a program with ``random_seed``."""
    digest = hashlib.blake2b(f"{op_type}:{random_seed}:{k}".encode(), digest_size=4).digest()
    return int.from_bytes(digest, "little") & 0x7FFFFFFF or 1


def _seeded(helper, op_type: str, seed) -> dict:
    """``seed`` and ``per_step`` attrs for a new ``op_type`` op (NOTE(layer-seeds))."""
    if seed:
        return {"seed": int(seed), "per_step": False}
    program = helper.main_program
    k = sum(op.type == op_type for b in program.blocks for op in b.ops)
    return {"seed": _op_seed(program.random_seed, op_type, k), "per_step": True}


def _random(op_type: str, inputs: dict, attrs: dict, seed, dtype: str, out=None, stop_gradient: bool = True,
            name=None):
    helper = LayerHelper(op_type, name=name)
    out = _out(helper, out, dtype, stop_gradient)
    helper.append_op(op_type, inputs, {"Out": [out]}, {**attrs, **_seeded(helper, op_type, seed)},
                     role="forward")  # a step's draw, not a parameter's initializer
    return out


def _float_dtype(layer: str, dtype) -> str:
    dtype = normalize_dtype(dtype)
    if dtype not in ("float32", "float64"):
        raise ValueError(f"{layer}: dtype must be float32 or float64, got {dtype}")
    return dtype


def gaussian_random(shape, mean: float = 0.0, std: float = 1.0, seed: int = 0, dtype="float32"):
    """A var of ``shape`` drawn from N(mean, std²), new each step unless ``seed`` is given
    (NOTE(layer-seeds)).

    Example::

        w = fluid.layers.gaussian_random([3, 4], std=2.0, seed=10)
    """
    dtype = _float_dtype("gaussian_random", dtype)
    inputs, dims = shape_inputs("gaussian_random", shape)
    return _random("gaussian_random", inputs, {"shape": _shape("gaussian_random", dims, inputs), "mean": float(mean),
                                           "std": float(std), "dtype": dtype}, seed, dtype)


def uniform_random(shape, dtype="float32", min: float = -1.0, max: float = 1.0, seed: int = 0):  # noqa: A002
    """A var of ``shape`` drawn from U[min, max), new each step unless ``seed`` is given.

    Example::

        u = fluid.layers.uniform_random([3, 4], min=0.0, max=1.0)
    """
    dtype = _float_dtype("uniform_random", dtype)
    inputs, dims = shape_inputs("uniform_random", shape)
    return _random("uniform_random", inputs, {"shape": _shape("uniform_random", dims, inputs), "min": float(min),
                                          "max": float(max), "dtype": dtype}, seed, dtype)


def _like_shape(layer: str, shape) -> list:
    dims = list(shape)
    if any(isinstance(d, Variable) for d in dims):
        raise ValueError(f"{layer}: shape given with Variables ({shape!r}) is not supported; pass Python ints")
    return [int(d) for d in dims]


def gaussian_random_batch_size_like(input, shape, input_dim_idx: int = 0, output_dim_idx: int = 0,
                                    mean: float = 0.0, std: float = 1.0, seed: int = 0, dtype="float32"):
    """N(mean, std²) values of ``shape`` whose dim ``output_dim_idx`` is ``input``'s dim
    ``input_dim_idx`` at run time. Rows that are examples are keyed by their place in the whole
    batch, so data-parallel trainers draw what one process draws (NOTE(random-steps)).

    Example::

        noise = fluid.layers.gaussian_random_batch_size_like(x, shape=[-1, 11], mean=1.0, std=2.0)
    """
    dtype = _float_dtype("gaussian_random_batch_size_like", dtype)
    attrs = {"shape": _like_shape("gaussian_random_batch_size_like", shape), "input_dim_idx": int(input_dim_idx),
             "output_dim_idx": int(output_dim_idx), "mean": float(mean), "std": float(std), "dtype": dtype}
    return _random("gaussian_random_batch_size_like", {"Input": [input]}, attrs, seed, dtype)


def uniform_random_batch_size_like(input, shape, dtype="float32", input_dim_idx: int = 0, output_dim_idx: int = 0,
                                   min: float = -1.0, max: float = 1.0, seed: int = 0):  # noqa: A002
    """U[min, max) values of ``shape`` whose dim ``output_dim_idx`` is ``input``'s dim
    ``input_dim_idx`` at run time (see ``gaussian_random_batch_size_like``).

    Example::

        u = fluid.layers.uniform_random_batch_size_like(x, [3, 5])   # [batch, 5]
    """
    dtype = _float_dtype("uniform_random_batch_size_like", dtype)
    attrs = {"shape": _like_shape("uniform_random_batch_size_like", shape), "input_dim_idx": int(input_dim_idx),
             "output_dim_idx": int(output_dim_idx), "min": float(min), "max": float(max), "dtype": dtype}
    return _random("uniform_random_batch_size_like", {"Input": [input]}, attrs, seed, dtype)


def randint(low, high=None, shape=None, out=None, dtype=None, device=None, stop_gradient: bool = False, seed: int = 0,
            name=None):
    """Integers uniform in [low, high) ([0, low) when ``high`` is None), of ``shape`` (default
    [1]) and ``dtype`` int32 or int64 (default), into ``out`` if given.

    Raises:
        ValueError: unless low < high; for another dtype or a Variable shape.

    Example::

        ids = fluid.layers.randint(-5, 5, shape=[3, 4])
    """
    low, high = (0, low) if high is None else (low, high)
    if int(low) >= int(high):
        raise ValueError(f"randint: low ({low}) must be less than high ({high})")
    dtype = normalize_dtype(dtype or "int64")
    if dtype not in ("int32", "int64"):
        raise ValueError(f"randint: dtype must be int32 or int64, got {dtype}")
    attrs = {"shape": _shape("randint", [1] if shape is None else shape), "low": int(low), "high": int(high),
             "dtype": dtype}
    return _random("randint", {}, attrs, seed, dtype, out, stop_gradient, name)


def randn(shape, out=None, dtype=None, device=None, stop_gradient: bool = True, name=None):
    """Standard normal values of ``shape`` (float32 unless ``dtype``), new each step.

    Example::

        z = fluid.layers.randn([2, 4])
    """
    dtype = _float_dtype("randn", dtype or "float32")
    return _random("gaussian_random", {}, {"shape": _shape("randn", shape), "mean": 0.0, "std": 1.0, "dtype": dtype},
                   0, dtype, out, stop_gradient, name)


def randperm(n: int, out=None, dtype="int64", device=None, stop_gradient: bool = True, seed: int = 0):
    """A random permutation of ``0 .. n-1`` (int64 or int32), new each step unless ``seed``.

    Example::

        order = fluid.layers.randperm(6)
    """
    if int(n) < 1:
        raise ValueError(f"randperm: n must be >= 1, got {n}")
    dtype = normalize_dtype(dtype)
    if dtype not in ("int32", "int64"):
        raise ValueError(f"randperm: dtype must be int32 or int64, got {dtype}")
    return _random("randperm", {}, {"n": int(n), "dtype": dtype}, seed, dtype, out, stop_gradient)


def sampling_id(x, min: float = 0.0, max: float = 1.0, seed: int = 0, dtype="float32"):  # noqa: A002
    """One id per row of ``x`` ([batch, width] probabilities) drawn from that row's
    distribution: an int64 ``[batch]`` var, whatever ``dtype`` says, as Paddle's kernel writes
    it (NOTE(sampling-id) in ops/random.py).

    Example::

        ids = fluid.layers.sampling_id(fluid.layers.softmax(logits))
    """
    return _random("sampling_id", {"X": [x]}, {"min": float(min), "max": float(max)}, seed, "int64")


def random_crop(x, shape, seed=None):
    """A window of ``shape`` (the trailing dims of ``x``) at a random place in each instance,
    new each step. ``seed``: an int (the generator's start), a [1] int64 Variable holding it,
    or None (a seed of the op's own) (NOTE(random-crop) in ops/random.py). No gradient.

    Example::

        img = fluid.layers.data("img", shape=[3, 32, 32])
        crop = fluid.layers.random_crop(img, shape=[3, 28, 28])   # [-1, 3, 28, 28]
    """
    helper = LayerHelper("random_crop")
    out = helper.create_variable_for_type_inference(x.dtype)
    inputs, outputs = {"X": [x]}, {"Out": [out]}
    if isinstance(seed, Variable):
        inputs["Seed"], outputs["SeedOut"] = [seed], [seed]
        start = 0
    elif seed is None or seed == 0:
        start = _seeded(helper, "random_crop", 0)["seed"]
    elif isinstance(seed, int):
        start = seed
    else:
        raise ValueError(f"random_crop: seed must be an int, a Variable or None, got {seed!r}")
    helper.append_op("random_crop", inputs, outputs,
                     {"shape": _like_shape("random_crop", shape), "startup_seed": start})
    return out


def tensor_array_to_tensor(input, axis: int = 1, name=None, use_stack: bool = False):
    """The tensors of the tensor array ``input`` concatenated along ``axis`` (stacked along a new
    ``axis`` with ``use_stack``), and each entry's size along ``axis`` (int32, also when stacked, as
    Fluid gives it).

    Returns:
        ``(Variable, Variable)``: the joined tensor and the sizes.

    Raises:
        TypeError: ``input`` is not a tensor-array Variable.

    Example::

        arr = fluid.layers.array_write(x0, i0)
        fluid.layers.array_write(x1, i1, array=arr)
        joined, sizes = fluid.layers.tensor_array_to_tensor(arr, axis=0)   # [x0; x1], [n0, n1]
    """
    if not isinstance(input, Variable) or input.type != TENSOR_ARRAY:
        raise TypeError(f"tensor_array_to_tensor: input must be a tensor array (create_array), got {input!r}")
    helper = LayerHelper("tensor_array_to_tensor", name=name)
    out = helper.create_variable_for_type_inference(input.dtype)
    index = helper.create_variable_for_type_inference("int32", stop_gradient=True)
    helper.append_op("tensor_array_to_tensor", {"X": [input]}, {"Out": [out], "OutIndex": [index]},
                     {"axis": int(axis), "use_stack": bool(use_stack)})
    return out, index
