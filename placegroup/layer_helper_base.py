"""``fluid.layer_helper_base`` at its module path; placegroup/model/layer_helper_base.py has the code."""
from placegroup.model.layer_helper_base import *  # noqa: F401,F403
from placegroup.model.layer_helper_base import __all__  # noqa: F401
from placegroup.model.layer_helper_base import (ParamAttr, Variable, WeightNormParamAttr,  # noqa: F401
                                                default_main_program, default_startup_program)
