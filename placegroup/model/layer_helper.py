"""LayerHelper: what every layer function uses to make its params, temps and ops.

What it makes lives in ``LayerHelperBase`` (placegroup/model/layer_helper_base.py), as in Fluid 1.8;
this class names the instance and appends the ops.
"""
from __future__ import annotations

from typing import Any

from placegroup.ir import unique_name
from placegroup.model.layer_helper_base import LayerHelperBase
from placegroup.model.param_attr import ParamAttr


class LayerHelper(LayerHelperBase):
    """Names a layer instance (``fc_0``) and appends its vars and ops.

    Args:
        layer_type: e.g. ``"fc"``; the instance is named ``<layer_type>_<n>`` unless ``name``.
    """

    def __init__(self, layer_type: str, name: str | None = None, **kwargs: Any) -> None:
        super().__init__(name or unique_name.generate(layer_type), layer_type)
        self.kwargs = kwargs

    def multiple_param_attr(self, param_attr: Any, length: int) -> list:
        """One ParamAttr per input of a layer of ``length`` inputs (fc): a list of as many
        attrs as inputs, or one attr for all of them (each input's weight then made from it
        alone, so with a name they share that one weight, as in Fluid 1.8).

        Raises:
            TypeError: ``param_attr`` is not an attr form (NOTE(attr-forms)).
            ValueError: a list whose length is neither 1 nor ``length``.
        """
        attrs = ParamAttr.to_attr(param_attr, "param_attr")
        if not isinstance(attrs, list):
            attrs = [attrs]
        if len(attrs) not in (1, length):
            raise ValueError(f"{self.name}: param_attr is a list of {len(attrs)} attrs for {length} inputs; "
                             f"give one attr per input, or one for all")
        return attrs * length if len(attrs) == 1 else attrs

    def append_op(self, type: str, inputs=None, outputs=None, attrs=None, role: str | None = None):
        return self.block.append_op(type, inputs, outputs, attrs, role=role)

    def append_activation(self, x, act: str | None):
        if act is None:
            return x
        out = self.create_variable_for_type_inference(x.dtype)
        self.append_op(act, {"X": [x]}, {"Out": [out]})
        return out
