"""LayerHelper: what every layer function uses to make its params, temps and ops."""
from __future__ import annotations

from typing import Any, Sequence

from placegroup.ir import unique_name
from placegroup.ir.framework import default_main_program, default_startup_program
from placegroup.initializer import ConstantInitializer, XavierInitializer
from placegroup.param_attr import ParamAttr


class LayerHelper:
    """Names a layer instance (``fc_0``) and appends its vars and ops.

    Args:
        layer_type: e.g. ``"fc"``; the instance is named ``<layer_type>_<n>`` unless ``name``.
    """

    def __init__(self, layer_type: str, name: str | None = None, **kwargs: Any) -> None:
        self.layer_type = layer_type
        self.name = name or unique_name.generate(layer_type)
        self.kwargs = kwargs

    @property
    def main_program(self):
        return default_main_program()

    @property
    def startup_program(self):
        return default_startup_program()

    @property
    def block(self):
        return self.main_program.current_block()

    def create_parameter(self, attr: Any, shape: Sequence[int], dtype: str = "float32",
                         is_bias: bool = False, default_initializer: Any = None):
        """A parameter in the main program and its initializer op in the startup program."""
        attr = ParamAttr.to_attr(attr)
        if attr is False:
            return None
        shape = [int(d) for d in shape]
        if any(d <= 0 for d in shape):
            raise ValueError(f"{self.name}: parameter shape {shape} must be positive")
        name = attr.name or unique_name.generate(f"{self.name}.{'b' if is_bias else 'w'}")
        init = attr.initializer or default_initializer or (
            ConstantInitializer(0.0) if is_bias else XavierInitializer())
        main_block = self.main_program.global_block()
        if main_block.has_var(name):
            return main_block.var(name)  # shared parameter (same ParamAttr name)
        sblock = self.startup_program.global_block()
        if not sblock.has_var(name):
            svar = sblock.create_var(name, shape=shape, dtype=dtype, persistable=True)
            init(svar, sblock)
        attrs = {"sparse_update": True} if attr.sparse_update else {}
        if not attr.do_model_average:  # ModelAverage / ExponentialMovingAverage leave it out
            attrs["do_model_average"] = False
        param = main_block.create_parameter(
            name, shape, dtype, trainable=attr.trainable, regularizer=attr.regularizer,
            optimize_attr={"learning_rate": attr.learning_rate}, attrs=attrs)
        if attr.gradient_clip is not None:  # Fluid 1.x's per-parameter clip (placegroup/clip.py)
            param.gradient_clip_attr = attr.gradient_clip
        return param

    def create_variable_for_type_inference(self, dtype: str = "float32", stop_gradient: bool = False):
        """A temp var whose shape the op that writes it will infer."""
        return self.block.create_var(unique_name.generate(f"{self.name}.tmp"), dtype=dtype,
                                     stop_gradient=stop_gradient)

    create_tmp_variable = create_variable_for_type_inference

    def create_global_variable(self, name: str | None = None, persistable: bool = False, **kw: Any):
        return self.main_program.global_block().create_var(
            name or unique_name.generate(f"{self.name}.global"), persistable=persistable, **kw)

    def set_variable_initializer(self, var, initializer) -> None:
        """Give a persistable main-program var its initializer in the startup program."""
        sblock = self.startup_program.global_block()
        if not sblock.has_var(var.name):
            svar = sblock.create_var(var.name, shape=var.shape, dtype=var.dtype, persistable=True)
            initializer(svar, sblock)

    def append_op(self, type: str, inputs=None, outputs=None, attrs=None, role: str | None = None):
        return self.block.append_op(type, inputs, outputs, attrs, role=role)

    def append_activation(self, x, act: str | None):
        if act is None:
            return x
        out = self.create_variable_for_type_inference(x.dtype)
        self.append_op(act, {"X": [x]}, {"Out": [out]})
        return out
