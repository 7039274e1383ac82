"""Fluid 1.8.5's module tree: every name Fluid binds in a module is in placegroup's module at that
path, as the same object wherever Fluid binds one object at several paths, or is left out on
purpose, with its reason, in placegroup/tools/fluid_surface_exclusions.json. The names are recorded
from Fluid itself (scripts/record_fluid_surface.py -> placegroup/tools/fluid_surface.json)."""
import importlib
import json
import pathlib
import subprocess
import sys

import pytest

import placegroup
from placegroup.compat import alias_paddle, facade, surface_object, unalias_paddle
from placegroup.errors import ModuleNotInPlacegroup, NotImplementedInPlacegroup
from placegroup.tools.fluid_surface import HOMES, OUT_OF_SCOPE, exclusion, sharing_home
from placegroup.tools.compat_table import coverage, totals
from tests.conftest import TIME_FACTOR

EXCLUDED = json.loads((pathlib.Path(placegroup.tools.__file__).parent / "fluid_surface_exclusions.json").read_text())


@pytest.fixture(scope="module")
def cov():
    return coverage()


def test_every_recorded_name_is_present_or_left_out_with_a_reason(cov):
    missing = {label: c.missing for label, c in cov.items() if c.missing}
    assert not missing, f"names of Fluid 1.8.5 neither in placegroup nor in the exclusion file: {missing}"


def test_at_least_95_percent_of_the_names_outside_the_out_of_scope_categories_are_present(cov):
    present, counted = totals(cov)
    assert counted > 1300, counted  # the tree was recorded whole
    assert present / counted >= 0.95, f"{present} of {counted}"


def test_one_object_fluid_binds_at_several_paths_is_one_object_here():
    for home, paths in sharing_home().items():
        objects = {id(surface_object(label, name)): f"{label}.{name}" for label, name in paths
                   if exclusion(label, name) is None and surface_object(label, name) is not None}
        assert len(objects) <= 1, f"{home} is {len(objects)} objects in placegroup: {sorted(objects.values())}"


def test_each_name_placegroup_has_is_that_object_at_every_path(cov):
    for label, c in cov.items():
        if label not in HOMES or exclusion(label, "") is not None:
            continue
        module = facade(label)
        for name in c.present:
            obj = surface_object(label, name)
            assert obj is None or getattr(module, name) is obj, f"{label}.{name}"


def test_the_exclusion_file_names_only_what_fluid_has_and_placegroup_lacks(cov):
    assert set(EXCLUDED["categories"]) >= OUT_OF_SCOPE | {"other"}
    for key, entry in {**EXCLUDED["modules"], **EXCLUDED["names"]}.items():
        assert entry["category"] in EXCLUDED["categories"] and entry["reason"], key
    for key in EXCLUDED["modules"]:
        assert any(label == key or label.startswith(key + ".") for label in HOMES), f"Fluid has no module {key}"
    homes = {f"{home.replace(':', '.')[len('paddle.'):]}" for names in HOMES.values() for home in names.values()}
    paths = {f"{label}.{name}" for label, names in HOMES.items() for name in names}
    for key in EXCLUDED["names"]:
        assert key in homes or key in paths, f"Fluid 1.8.5 has no {key}"
    present = {f"{label}.{name}" for label, c in cov.items() for name in c.present}
    for key in EXCLUDED["names"]:  # the file only shrinks: a name placegroup gained leaves it
        bound = {f"{label}.{name}" for label, names in HOMES.items() for name, home in names.items()
                 if home.replace(":", ".")[len("paddle."):] == key} | {key}
        assert not bound & present, f"{key} is in placegroup now: remove it from fluid_surface_exclusions.json"


def test_a_path_fluid_1_5_had_and_1_7_moved_is_the_object_at_its_new_path():
    from placegroup.tools.fluid_surface import MOVED
    assert len(MOVED["fluid.layers.nn"]) > 40  # the RNN, loss and sequence layers left nn.py in 1.7
    for label, names in MOVED.items():
        module = facade(label)
        for name, to in names.items():
            if exclusion(label, name) is None:
                assert getattr(module, name) is getattr(facade(to), name), f"{label}.{name}"
            else:
                with pytest.raises(NotImplementedInPlacegroup, match=f"{label}.{name}"):
                    getattr(module, name)
    nn = placegroup.layers.nn
    assert nn.dynamic_gru is facade("fluid.layers.rnn").dynamic_gru is placegroup.layers.dynamic_gru
    assert placegroup.layers.rnn is facade("fluid.layers.rnn").rnn  # Fluid binds the function over the module
    assert nn.sequence_pool is placegroup.layers.sequence_lod.sequence_pool
    assert placegroup.layers.ops.uniform_random is nn.uniform_random


def test_a_name_or_module_left_out_says_why():
    with pytest.raises(NotImplementedInPlacegroup, match=r"fluid.layers.roi_pool: .*detection"):
        placegroup.layers.roi_pool  # noqa: B018
    with pytest.raises(NotImplementedInPlacegroup, match=r"fluid.Conv2D: imperative mode \(dygraph"):
        placegroup.Conv2D  # noqa: B018
    alias_paddle()
    try:
        with pytest.raises(ModuleNotInPlacegroup, match=r"paddle.fluid.contrib.slim: model compression \(contrib"):
            importlib.import_module("paddle.fluid.contrib.slim.prune")
        details = importlib.import_module("paddle.fluid.communicator")  # a module built from placegroup's objects
        assert details.Program is placegroup.Program and details.global_scope is placegroup.global_scope
    finally:
        unalias_paddle()


def test_a_layer_module_has_fluids_names_as_the_same_objects_and_the_rest_say_so():
    from placegroup.layers import control_flow, nn, sequence_lod, tensor
    assert nn.concat is tensor.concat is placegroup.layers.concat
    assert nn.reduce_max is placegroup.layers.reduce_max and nn.cos_sim is placegroup.layers.cos_sim
    assert control_flow.less_than is placegroup.layers.less_than
    assert sequence_lod.sequence_pool is placegroup.layers.sequence_pool
    with pytest.raises(NotImplementedInPlacegroup, match="fluid.layers.nn.roi_pool"):
        nn.roi_pool  # noqa: B018
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
