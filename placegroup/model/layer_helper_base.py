"""LayerHelperBase: what a layer helper makes, parameters, temps and global vars, in Fluid 1.8's
``fluid.layer_helper_base``; ``LayerHelper`` (placegroup/model/layer_helper.py) adds the ops.

Example::

    helper = LayerHelper("fc")                  # a LayerHelperBase named fc_0
    w = helper.create_parameter(fluid.ParamAttr(), [13, 1], "float32")
    tmp = helper.create_variable_for_type_inference("float32")

Thread-safety: building a program is single-threaded, as in Fluid.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from placegroup.model.initializer import ConstantInitializer, NumpyArrayInitializer, XavierInitializer
from placegroup.ir import unique_name
from placegroup.ir.evaluate import evaluate
from placegroup.ir.framework import LOD_TENSOR, Variable, default_main_program, default_startup_program
from placegroup.model.param_attr import ParamAttr, WeightNormParamAttr

__all__ = ["LayerHelperBase"]


class LayerHelperBase:
    """A layer instance's name and type, and what it makes in the default programs.

    Args:
        name: the instance's name (``fc_0``), the prefix of its parameters' and temps' names.
        layer_type: e.g. ``"fc"``.
    """

    def __init__(self, name: str, layer_type: str) -> None:
        self._name = name
        self._layer_type = layer_type

    @property
    def name(self) -> str:
        return self._name

    @property
    def layer_type(self) -> str:
        return self._layer_type

    @property
    def main_program(self):
        return default_main_program()

    @property
    def startup_program(self):
        return default_startup_program()

    @property
    def block(self):
        """The current block of the main program, where ops and temps go."""
        return self.main_program.current_block()

    def to_variable(self, value: Any, name: str | None = None) -> Variable:
        """``value`` itself when it is a Variable.

        Raises:
            TypeError: a numpy array (Fluid makes one only in imperative mode, which placegroup
                does not have) or anything else.
        """
        if isinstance(value, Variable):
            return value
        if isinstance(value, np.ndarray):
            raise TypeError("to_variable could only be called in dygraph mode: placegroup builds static "
                            "programs; feed the array to a data var instead")
        raise TypeError(f"The type of input value is invalid, expected type is 'ndarray' or 'Variable', but "
                        f"received {type(value)}")

    def create_parameter(self, attr: Any, shape: Sequence[int], dtype: str = "float32",
                         is_bias: bool = False, default_initializer: Any = None, stop_gradient: bool = False,
                         type: str = LOD_TENSOR):
        """A parameter in the main program and its initializer op in the startup program.

        ``attr`` takes the forms of NOTE(attr-forms) in placegroup/model/param_attr.py, but a list:
        False gives no parameter (None) for a bias and is an error for a weight, which every
        layer that calls this without ``is_bias`` needs (Fluid fails there too, in the op).
        ``stop_gradient`` is taken and unused, as by Fluid's static mode (``ParamAttr(trainable=False)``
        stops a parameter's gradient); ``type`` is the parameter's var type.

        Raises:
            TypeError: ``attr`` is a list or not an attr form.
            ValueError: ``attr`` is False for a weight; a parameter of that name exists with
                another shape.
        """
        arg_name = "bias_attr" if is_bias else "param_attr"
        attr = ParamAttr.to_attr(attr, arg_name)
        if isinstance(attr, list):
            raise TypeError(f"{self.name}: {arg_name} is a list of {len(attr)} attrs, but this layer makes one "
                            f"{'bias' if is_bias else 'weight'}; pass one attr (a list is for the weights of "
                            f"a layer of several inputs, such as fc)")
        if attr is False:
            if is_bias:
                return None
            raise ValueError(f"{self.name}: param_attr=False makes no weight, but {self.layer_type} needs "
                             f"one; pass None, True or a ParamAttr")
        shape = [int(d) for d in shape]
        if any(d <= 0 for d in shape):
            raise ValueError(f"{self.name}: parameter shape {shape} must be positive")
        name = attr.name or unique_name.generate(f"{self.name}.{'b' if is_bias else 'w'}")
        init = attr.initializer or default_initializer or (
            ConstantInitializer(0.0) if is_bias else XavierInitializer())
        if isinstance(attr, WeightNormParamAttr):
            w = self._weight_normalize(attr, name, shape, dtype, init)
            WeightNormParamAttr.params_with_weight_norm.append(w)
            return w
        main_block = self.main_program.global_block()
        if main_block.has_var(name):  # shared parameter (same ParamAttr name)
            return self._shared(main_block, name, shape)
        sblock = self.startup_program.global_block()
        if not sblock.has_var(name):
            svar = sblock.create_var(name, shape=shape, dtype=dtype, persistable=True)
            init(svar, sblock)
        attrs = {"sparse_update": True} if attr.sparse_update else {}
        if not attr.do_model_average:  # ModelAverage / ExponentialMovingAverage leave it out
            attrs["do_model_average"] = False
        param = main_block.create_parameter(
            name, shape, dtype, trainable=attr.trainable, regularizer=attr.regularizer,
            optimize_attr={"learning_rate": attr.learning_rate}, attrs=attrs, type=type)
        if attr.gradient_clip is not None:  # Fluid 1.x's per-parameter clip (placegroup/model/clip.py)
            param.gradient_clip_attr = attr.gradient_clip
        return param

    def _shared(self, main_block, name: str, shape) -> Any:
        """The existing parameter ``name``, which this layer shares, if its shape is ``shape``."""
        shared = main_block.var(name)
        if list(shared.shape) != list(shape):
            raise ValueError(f"{self.name}: parameter {name!r} exists with shape {list(shared.shape)}, but this "
                             f"layer needs {list(shape)}; give each its own name")
        return shared

    # NOTE(weight-norm): as Fluid 1.8's LayerHelper._create_weight_normalize. The main program
    # computes w = v * (g / norm_except_dim(v)) with ops, so append_backward reaches g and v; the
    # norm is Fluid's op chain abs, pow(2), reduce_sum, pow(1/2), over v reshaped to [v0, -1]
    # (dim 0), [-1, v_last] (the last dim), or with dim swapped to the front by transposes
    # (otherwise), and g / norm is broadcast back along ``dim``. The startup program initializes
    # v by the attr's initializer and g to norm_except_dim of that first v, as Fluid's does; but
    # where Fluid computes g with ops of the startup program that read v, here g's value is
    # computed when the layer is built, by running v's init op (its values are a pure function
    # of its seed, placegroup/model/initializer.py), and stored as a constant: no startup op reads
    # one parameter to write another, so the transpiler can place g and v apart. The build
    # holds v's initial value in memory once.
    def _weight_normalize(self, attr, name: str, shape, dtype: str, init):
        dim = attr.dim
        if dim is not None and dim >= len(shape):
            raise ValueError(f"{self.name}: WeightNormParamAttr dim {dim} is out of range for the weight {list(shape)}")
        g_shape = [1] * len(shape)
        if dim is not None:
            g_shape[dim] = shape[dim]
        g_name, v_name = name + "_g", name + "_v"
        sblock = self.startup_program.global_block()
        if not sblock.has_var(v_name):
            first = len(sblock.ops)
            init(sblock.create_var(v_name, shape=shape, dtype=dtype, persistable=True), sblock)
            v0 = _run_init_ops(sblock.ops[first:], sblock, v_name).astype(dtype, copy=False)
            axes = None if dim is None else tuple(d for d in range(len(shape)) if d != dim)
            g0 = (np.abs(v0) ** 2).sum(axis=axes).astype(dtype) ** np.asarray(0.5, dtype)
            NumpyArrayInitializer(np.asarray(g0, dtype).reshape(g_shape))(
                sblock.create_var(g_name, shape=g_shape, dtype=dtype, persistable=True), sblock)
        main_block = self.main_program.global_block()
        made = []
        for pname, pshape in ((g_name, g_shape), (v_name, shape)):
            if main_block.has_var(pname):  # a shared weight: its g and v exist, w is made anew
                made.append(self._shared(main_block, pname, pshape))
                continue
            attrs = {} if attr.do_model_average else {"do_model_average": False}
            p = main_block.create_parameter(pname, pshape, dtype, trainable=attr.trainable,
                                            regularizer=attr.regularizer,
                                            optimize_attr={"learning_rate": attr.learning_rate}, attrs=attrs)
            if attr.gradient_clip is not None:
                p.gradient_clip_attr = attr.gradient_clip
            made.append(p)
        g, v = made
        block = self.block
        norm = self._norm_except_dim(block, v, dim, dtype)
        scale = self._wn_op(block, "elementwise_div", {"X": [g], "Y": [norm]}, {"axis": -1}, dtype)
        if dim is not None:
            scale = self._wn_op(block, "reshape2", {"X": [scale]}, {"shape": [shape[dim]]}, dtype, xshape=True)
        return self._wn_op(block, "elementwise_mul", {"X": [v], "Y": [scale]}, {"axis": -1 if dim is None else dim},
                           dtype)

    def _wn_op(self, block, op_type: str, inputs: dict, attrs: dict, dtype: str, xshape: bool = False):
        """Append one op of the weight norm (NOTE(weight-norm)) writing a new var."""
        out = block.create_var(unique_name.generate(f"{self.name}.weight_norm_{op_type}"), dtype=dtype)
        outputs = {"Out": [out]}
        if xshape:
            outputs["XShape"] = [block.create_var(unique_name.generate(f"{self.name}.weight_norm_xshape"), dtype=dtype,
                                                  stop_gradient=True)]
        block.append_op(op_type, inputs, outputs, attrs)
        return out

    def _norm_except_dim(self, block, x, dim, dtype: str):
        """The L2 norm of ``x`` over every dim but ``dim`` (all dims for None), in the weight's
        g shape (NOTE(weight-norm))."""
        shape = list(x.shape)
        rank = len(shape)

        def norm(t, axes):
            t = self._wn_op(block, "abs", {"X": [t]}, {}, dtype)
            t = self._wn_op(block, "pow", {"X": [t]}, {"factor": 2.0}, dtype)
            t = self._wn_op(block, "reduce_sum", {"X": [t]},
                            {"dim": axes or [0], "keep_dim": False, "reduce_all": axes is None}, dtype)
            return self._wn_op(block, "pow", {"X": [t]}, {"factor": 0.5}, dtype)

        if dim is None:
            n = norm(x, None)
            target = [1] * rank
        elif dim in (0, rank - 1):
            first = dim == 0
            flat = self._wn_op(block, "reshape", {"X": [x]}, {"shape": [shape[0], -1] if first else [-1, shape[-1]]},
                               dtype)
            n = norm(flat, [1] if first else [0])
            target = [1] * rank
            target[dim] = shape[dim]
        else:
            perm = list(range(rank))
            perm[0], perm[dim] = dim, 0
            t = self._wn_op(block, "transpose", {"X": [x]}, {"axis": perm}, dtype)
            t = self._wn_op(block, "reshape", {"X": [t]}, {"shape": [shape[dim], -1]}, dtype)
            n = self._wn_op(block, "reshape", {"X": [norm(t, [1])]}, {"shape": [shape[dim]] + [1] * (rank - 1)}, dtype)
            return self._wn_op(block, "transpose", {"X": [n]}, {"axis": perm}, dtype)
        return self._wn_op(block, "reshape", {"X": [n]}, {"shape": target}, dtype)

    def create_variable_for_type_inference(self, dtype: str = "float32", stop_gradient: bool = False):
        """A temp var whose shape the op that writes it will infer."""
        return self.block.create_var(unique_name.generate(f"{self.name}.tmp"), dtype=dtype,
                                     stop_gradient=stop_gradient)

    create_tmp_variable = create_variable_for_type_inference

    def create_variable(self, *args: Any, **kwargs: Any):
        """A var in the current block (``Block.create_var``'s arguments)."""
        return self.block.create_var(*args, **kwargs)

    def create_global_variable(self, persistable: bool = False, *args: Any, name: str | None = None, **kw: Any):
        """A var in the global block of the main program, with no initializer (a generated
        name unless ``name``)."""
        return self.main_program.global_block().create_var(
            name or unique_name.generate(f"{self.name}.global"), *args, persistable=persistable, **kw)

    def create_or_get_global_variable(self, name: str, *args: Any, **kwargs: Any) -> tuple:
        """``(var, True)`` for a new global var ``name``, ``(the existing one, False)`` if the
        main program has one."""
        block = self.main_program.global_block()
        if block.has_var(name):
            return block.var(name), False
        return self.create_global_variable(*args, name=name, **kwargs), True

    def set_variable_initializer(self, var, initializer) -> None:
        """Give a persistable main-program var its initializer in the startup program."""
        sblock = self.startup_program.global_block()
        if not sblock.has_var(var.name):
            svar = sblock.create_var(var.name, shape=var.shape, dtype=var.dtype, persistable=True)
            initializer(svar, sblock)


def _run_init_ops(ops, block, name: str):
    """The value the startup ops ``ops`` (an initializer's, in ``block``) give var ``name``,
    computed now on the host by the executor's loop (NOTE(weight-norm))."""
    made: set = set()
    for op in ops:
        needs = [n for n in op.input_arg_names if n not in made]
        if needs:
            raise ValueError(f"WeightNormParamAttr: the initializer of {name!r} reads {needs}, which it does not "
                             f"make; use an initializer that depends on nothing else")
        made.update(op.output_arg_names)
    return np.asarray(evaluate(ops, block, name))
