"""Layer functions: each appends ops (and parameters) to the default programs.

Each module lists its public layers in ``__all__``; this package re-exports them all, so
``fluid.layers.fc`` and ``fluid.layers.piecewise_decay`` work as in Fluid.
"""
from placegroup.layers import (collective, control_flow, conv, ctr, distributions, io, learning_rate_scheduler,
                               loss, manip, metric_op, nn, norm, ops, rnn, sequence, sequence_lod, tensor, vision)
from placegroup.layers.math_op_patch import monkey_patch_variable
from placegroup.layers.collective import *  # noqa: F401,F403
from placegroup.layers.control_flow import Print, is_empty  # noqa: F401
from placegroup.layers.conv import *  # noqa: F401,F403
from placegroup.layers.ctr import *  # noqa: F401,F403
from placegroup.layers.distributions import *  # noqa: F401,F403
from placegroup.layers.io import *  # noqa: F401,F403
from placegroup.layers.learning_rate_scheduler import *  # noqa: F401,F403
from placegroup.layers.loss import *  # noqa: F401,F403
from placegroup.layers.manip import *  # noqa: F401,F403
from placegroup.layers.metric_op import *  # noqa: F401,F403
from placegroup.layers.nn import *  # noqa: F401,F403
from placegroup.layers.norm import *  # noqa: F401,F403
from placegroup.layers.ops import *  # noqa: F401,F403
from placegroup.layers.py_func import *  # noqa: F401,F403  (its module name is its function's)
from placegroup.layers.py_func import __all__ as _py_func_names
from placegroup.layers.rnn import *  # noqa: F401,F403
from placegroup.layers.sequence import *  # noqa: F401,F403
from placegroup.layers.sequence_pad import *  # noqa: F401,F403  (its module name is its function's)
from placegroup.layers.sequence_pad import __all__ as _sequence_pad_names
from placegroup.layers.tensor import *  # noqa: F401,F403
from placegroup.layers.vision import *  # noqa: F401,F403

__all__ = (collective.__all__ + conv.__all__ + ctr.__all__ + distributions.__all__ + io.__all__
           + learning_rate_scheduler.__all__ + loss.__all__ + manip.__all__ + metric_op.__all__ + nn.__all__
           + norm.__all__ + ops.__all__ + _py_func_names + rnn.__all__ + sequence.__all__ + _sequence_pad_names
           + tensor.__all__ + vision.__all__ + ["Print", "is_empty"])

# Last, as in Fluid (its layers/__init__.py ends with `from .rnn import *`): the function rnn is
# bound over the module rnn, so `fluid.layers.rnn(cell, x)` runs the cell; the module stays
# sys.modules["placegroup.layers.rnn"], where `import paddle.fluid.layers.rnn` finds it.
from placegroup.layers import decoding, rnn_cells  # noqa: E402
from placegroup.layers.decoding import *  # noqa: E402,F401,F403
from placegroup.layers.rnn_cells import *  # noqa: E402,F401,F403

__all__ += rnn_cells.__all__ + decoding.__all__

monkey_patch_variable()
