"""placegroup: one shared, PlaceGroup-annotated Program, run by every process.

``import placegroup as fluid`` runs PaddlePaddle Fluid 1.x model code. See README.md.
"""
import os as _os

# NOTE(layout): the repository keeps executor/, ops/ and comm/ beside placegroup/ at its top
# level; pyproject maps them to placegroup.executor, .ops, .comm. When Python finds
# this directory straight from a checkout (the repository root on sys.path, or an editable
# install), those subpackages are not inside it, so the directory above joins __path__.
_here = _os.path.dirname(__file__)
if not _os.path.isdir(_os.path.join(_here, "ops")):
    _root = _os.path.dirname(_here)
    if _os.path.isfile(_os.path.join(_root, "ops", "registry.py")):
        __path__.append(_root)

# NOTE(facade): this module and every other module at placegroup/'s top level but values.py,
# errors.py and config.py is the façade: Fluid's module names (fluid.optimizer, fluid.clip, ...),
# each re-exporting the layer that has the code (README, "Where things are"). Nothing inside
# the package imports the façade.

# first: user errors from here on end the process with one line, no traceback (an invalid
# PLACEGROUP_DEBUG among them)
__import__("placegroup.util.failures").util.failures.install()
from placegroup.tools import moved as _moved  # noqa: E402
from placegroup import dataset, initializer, io, layers, optimizer, reader, regularizer  # noqa: E402
from placegroup import compat, contrib, core, metrics, nets  # noqa: E402
from placegroup import (backward, data_feed_desc, data_feeder, input, layer_helper, layer_helper_base,  # noqa: E402
                        lod_tensor, log_helper, wrapped_decorator)
from placegroup.ir import unique_name  # noqa: E402
from placegroup.data_feeder import DataFeeder  # noqa: E402
from placegroup.dataset import DatasetFactory, InMemoryDataset, QueueDataset  # noqa: E402
from placegroup.tools import __version__  # noqa: E402
from placegroup.tools.from_env import transpile_from_env  # noqa: E402
from placegroup.tools.progress import install_exit_record  # noqa: E402
from placegroup.reader import batch  # noqa: E402
from placegroup.backward import append_backward, gradients  # noqa: E402
from placegroup.errors import (CommTimeout, NotImplementedInPlacegroup, OpError, PassError,  # noqa: E402
                               PlacementError, PlacegroupError, ProgramError, RemoteError,
                               SerializationError)
from placegroup.executor import Executor, Scope, global_scope, scope_guard  # noqa: E402
from placegroup.ir.framework import (Block, Operator, Parameter, Program, Variable,  # noqa: E402
                                     default_main_program, default_startup_program, program_guard)
from placegroup.param_attr import ParamAttr, WeightNormParamAttr  # noqa: E402
from placegroup.ir.place_group import ExecutorId, ExecutorRole, PlaceGroup  # noqa: E402
from placegroup.ir.places import CPUPlace, CUDAPinnedPlace, CUDAPlace, is_compiled_with_cuda  # noqa: E402
from placegroup.transpiler import (DistributeTranspiler, DistributeTranspilerConfig,  # noqa: E402
                                   HashName, RoundRobin)
from placegroup import compiler  # noqa: E402
from placegroup.compiler import (BuildStrategy, CompiledProgram, ExecutionStrategy, cpu_places,  # noqa: E402
                                 cuda_pinned_places, cuda_places)
from placegroup import parallel_executor  # noqa: E402
from placegroup.parallel_executor import ParallelExecutor  # noqa: E402
from placegroup import average, clip, install_check  # noqa: E402
from placegroup import profiler  # noqa: E402  (fluid.profiler)
from placegroup.io import load, load_program_state, save, set_program_state  # noqa: E402
from placegroup.core import LoDTensor, LoDTensorArray, Tensor  # noqa: E402
from placegroup.lod_tensor import create_lod_tensor, create_random_int_lodtensor  # noqa: E402
from placegroup.input import data, embedding, one_hot  # noqa: E402
from placegroup.model.switches import (device_guard, disable_dygraph, disable_imperative, enable_dygraph,  # noqa: E402
                                       enable_imperative, get_flags, in_dygraph_mode, memory_optimize, name_scope,
                                       release_memory, require_version, set_flags)
from placegroup.layers import learning_rate_scheduler as learning_rate_decay  # noqa: E402

_moved.install()  # the module paths that moved keep working, with a DeprecationWarning
# Fluid 1.8's names placegroup lacks raise NotImplementedInPlacegroup here and in the submodules
# (this module's __getattr__ among them); docs/fluid_compat.md lists them
install_exit_record()  # under placegroup launch, say at exit whether this process trained with its peers
compat.install_surface()  # fluid.layers.nn.concat is fluid.layers.concat, as in Fluid
compat.install_gaps()


__all__ = [
    "Block", "CPUPlace", "CUDAPinnedPlace", "CUDAPlace", "CommTimeout", "DataFeeder",
    "DistributeTranspiler", "DistributeTranspilerConfig", "Executor", "ExecutorId", "ExecutorRole",
    "HashName", "NotImplementedInPlacegroup", "OpError", "Operator", "ParamAttr", "Parameter",
    "PassError", "PlaceGroup", "PlacementError", "PlacegroupError", "Program", "ProgramError",
    "RemoteError", "RoundRobin", "Scope", "SerializationError", "Variable", "append_backward",
    "batch", "contrib", "core", "dataset", "default_main_program", "default_startup_program", "global_scope",
    "initializer", "io", "is_compiled_with_cuda", "layers", "metrics", "nets", "optimizer",
    "program_guard", "reader", "regularizer", "scope_guard", "transpile_from_env", "unique_name",
]
__all__ += ["BuildStrategy", "CompiledProgram", "ExecutionStrategy", "ParallelExecutor", "compiler", "cpu_places",
            "cuda_pinned_places", "cuda_places"]
__all__ += ["LoDTensor", "LoDTensorArray", "Tensor", "WeightNormParamAttr", "create_lod_tensor", "create_random_int_lodtensor", "average", "clip", "install_check", "load", "load_program_state", "save",
            "set_program_state", "data", "gradients", "device_guard", "disable_dygraph", "disable_imperative", "embedding", "enable_dygraph",
            "enable_imperative", "get_flags", "in_dygraph_mode", "learning_rate_decay", "memory_optimize",
            "name_scope", "one_hot", "release_memory", "require_version", "set_flags"]
