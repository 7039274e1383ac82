"""``fluid.layer_helper`` at its module path; placegroup/model/layer_helper.py has the code."""
from placegroup.model.layer_helper import LayerHelper, LayerHelperBase, ParamAttr  # noqa: F401
