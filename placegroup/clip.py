"""``fluid.clip`` at its module path; placegroup/model/clip.py has the code."""
from placegroup.model.clip import *  # noqa: F401,F403
from placegroup.model.clip import __all__  # noqa: F401
from placegroup.model.clip import (BaseErrorClipAttr, GradientClipBase, append_gradient_clip_ops,  # noqa: F401
                                   clip_gradients)
