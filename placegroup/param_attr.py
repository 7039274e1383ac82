"""``fluid.param_attr`` at its module path; placegroup/model/param_attr.py has the code."""
from placegroup.model.param_attr import (ATTR_FORMS, Initializer, ParamAttr,  # noqa: F401
                                         WeightDecayRegularizer, WeightNormParamAttr)
