"""Fluid 1.8.5's module tree: each name placegroup has is reachable at Fluid's module path, as
the same object (``fluid.layers.nn.concat is fluid.layers.concat``). The names per module are
recorded from Fluid itself (scripts/record_fluid_surface.py -> placegroup/fluid_surface.json)."""
import json
import pathlib
import subprocess
import sys

import pytest

import placegroup
from placegroup.compat import SURFACE, home_of, surface_object
from placegroup.errors import NotImplementedInPlacegroup
from tests.conftest import TIME_FACTOR

EXCLUDED = json.loads((pathlib.Path(placegroup.__file__).parent / "fluid_surface_exclusions.json").read_text())

# A ratchet: recorded, non-excluded names present per module. Raise a number when a module
# gains names; it must never drop.
PRESENT = {"fluid": 57, "fluid.average": 1, "fluid.backward": 2, "fluid.clip": 10, "fluid.compiler": 5,
           "fluid.contrib": 1, "fluid.contrib.layers": 1, "fluid.contrib.layers.nn": 3, "fluid.data_feeder": 4,
           "fluid.dataset": 3, "fluid.executor": 7, "fluid.framework": 20, "fluid.initializer": 17,
           "fluid.input": 5, "fluid.install_check": 6, "fluid.io": 39, "fluid.layer_helper": 4,
           "fluid.layers": 283, "fluid.layers.collective": 1, "fluid.layers.control_flow": 17,
           "fluid.layers.distributions": 5, "fluid.layers.io": 8, "fluid.layers.learning_rate_scheduler": 9,
           "fluid.layers.loss": 23, "fluid.layers.math_op_patch": 2, "fluid.layers.metric_op": 4,
           "fluid.layers.nn": 167, "fluid.layers.ops": 27, "fluid.layers.rnn": 7, "fluid.layers.sequence_lod": 16,
           "fluid.layers.tensor": 34, "fluid.lod_tensor": 2, "fluid.metrics": 11, "fluid.nets": 5,
           "fluid.optimizer": 37, "fluid.parallel_executor": 3, "fluid.param_attr": 4, "fluid.profiler": 5,
           "fluid.reader": 11, "fluid.regularizer": 7, "fluid.transpiler": 6,
           "fluid.transpiler.distribute_transpiler": 6, "fluid.transpiler.ps_dispatcher": 2, "fluid.unique_name": 4}
# Fluid binds these to other objects than the enclosing package's name, and so does placegroup
DIFFERENT = {("fluid.layers", "data"), ("fluid.layers", "embedding"), ("fluid.layers", "one_hot")}


@pytest.mark.parametrize("label", sorted(PRESENT))
def test_each_name_placegroup_has_is_at_fluids_module_path(label):
    module = sys.modules[home_of("paddle." + label)]
    names = {n for n in SURFACE[label] if f"{label}.{n}" not in EXCLUDED["names"]}
    present = sorted(n for n in names if n in vars(module))
    msg = f"{label}: {len(present)} of {len(names)} recorded names present (ratchet {PRESENT[label]})"
    assert len(present) >= PRESENT[label], msg
    for name in names:
        obj = surface_object(label, name)
        if obj is not None and label != "fluid.layers":
            assert vars(module).get(name) is obj or (label, name) in DIFFERENT, f"{label}.{name}: {msg}"


def test_a_layer_module_has_fluids_names_as_the_same_objects_and_the_rest_say_so():
    from placegroup.layers import control_flow, nn, sequence_lod, tensor
    assert nn.concat is tensor.concat is placegroup.layers.concat
    assert nn.reduce_max is placegroup.layers.reduce_max and nn.cos_sim is placegroup.layers.cos_sim
    assert control_flow.less_than is placegroup.layers.less_than
    assert sequence_lod.sequence_pool is placegroup.layers.sequence_pool
    with pytest.raises(NotImplementedInPlacegroup, match="fluid.layers.control_flow.While"):
        control_flow.While  # noqa: B018
    with pytest.raises(AttributeError, match="no attribute 'not_a_fluid_name'"):
        nn.not_a_fluid_name  # noqa: B018


SCRIPT = """
import numpy as np
import paddle.fluid as fluid
import paddle.fluid.layers.nn as nn
from paddle.fluid.layers.tensor import fill_constant_batch_size_like
from paddle.fluid.transpiler.distribute_transpiler import DistributeTranspilerConfig
from paddle.fluid.transpiler.ps_dispatcher import RoundRobin

x = fluid.layers.io.data(name="x", shape=[3], dtype="float32")
y = fluid.layers.io.data(name="y", shape=[3], dtype="float32")
sim = nn.cos_sim(x, y)
small = fluid.layers.control_flow.less_than(sim, fill_constant_batch_size_like(sim, [-1, 1], "float32", 0.5))
exe = fluid.executor.Executor(fluid.CPUPlace())
a = np.array([[1, 0, 0], [1, 1, 0]], "float32")
got_sim, got_small = exe.run(fluid.framework.default_main_program(), feed={"x": a, "y": np.array([[1, 0, 0], [-1, 1, 0]], "float32")},
                             fetch_list=[sim, small], scope=fluid.executor.global_scope())
print("sim", np.round(got_sim.ravel(), 3).tolist(), "small", got_small.ravel().tolist(),
      DistributeTranspilerConfig is fluid.DistributeTranspilerConfig, RoundRobin is fluid.RoundRobin)
"""


def test_placegroup_run_reaches_layers_through_fluids_module_tree(tmp_path):
    (tmp_path / "tree.py").write_text(SCRIPT)
    out = subprocess.run([sys.executable, "-m", "placegroup", "run", "tree.py"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120 * TIME_FACTOR)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "sim [1.0, 0.0] small [False, True] True True" in out.stdout, out.stdout
