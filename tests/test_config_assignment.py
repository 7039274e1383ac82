"""DistributeTranspilerConfig and fleet's configs are set by assignment, as in Fluid 1.8.5.

Every field of Fluid 1.8.5's DistributeTranspilerConfig can be set; the ones placegroup acts on
change the transpiled program, the inert ones give one notice and change nothing, the refused
ones raise saying what to do. A name that is no field is kept with one notice naming the closest
field; a wrong type is a TypeError naming the field. No message speaks of a validation library.
"""
import json
import textwrap
import warnings
import zlib

import pytest

import placegroup as fluid
from placegroup.util import fields
from placegroup.errors import ConfigError
from placegroup.util.fields import StrategyNotice
from placegroup.incubate.fleet.parameter_server.distribute_transpiler import distributed_strategy as ds
from placegroup.transpiler.config import DistributeTranspilerConfig, ServerRuntimeConfig
from tests.paddle_ref.reference import run_python

PS = "127.0.0.1:1,127.0.0.1:2"
TRAINERS = "127.0.0.1:3,127.0.0.1:4"

# The fields of Fluid 1.8.5's DistributeTranspilerConfig and their defaults, as read from
# paddle/fluid/transpiler/distribute_transpiler.py of paddlepaddle 1.8.5 (class attributes, and
# the sync_mode / runtime_split_send_recv properties). test_fields_and_defaults_match_fluid_185
# asks Fluid itself.
FLUID_185_FIELDS = {
    "slice_var_up": True, "split_method": None, "min_block_size": 8192, "enable_dc_asgd": False,
    "mode": "pserver", "print_log": False, "wait_port": True, "runtime_split_send_recv": False,
    "sync_mode": True, "half_async": False, "completely_not_async": False, "geo_sgd_mode": False,
    "geo_sgd_need_push_nums": 100, "nccl_comm_num": 1, "use_hierarchical_allreduce": False,
    "hierarchical_allreduce_inter_nranks": 0, "collective_mode": None,
}
OWN_FIELDS = {"staleness": 0, "merge_steps": 1, "mp_fused": True}


@pytest.fixture(autouse=True)
def fresh_notices(monkeypatch):
    """Each test sees the notices as a fresh process would."""
    monkeypatch.setattr(fields, "_noticed", set())


def _wide():
    """fc_0.w_0 is 10 x 1000: two blocks over two pservers with the default min_block_size."""
    x = fluid.layers.data(name="x", shape=[10])
    h = fluid.layers.fc(input=x, size=1000)
    fluid.optimizer.SGD(0.01).minimize(fluid.layers.mean(fluid.layers.fc(input=h, size=1)))


def _model_parallel():
    x = fluid.layers.data(name="x", shape=[6])
    y = fluid.layers.data(name="y", shape=[1], dtype="int64")
    logits = fluid.layers.fc(input=x, size=8, model_parallel=True)
    fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, y)))


def _transpile(config, build=_wide, trainers=2):
    """The program pserver 127.0.0.1:1 gets for ``build``'s model transpiled with ``config``."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        build()
        t = fluid.DistributeTranspiler(config=config)
        t.transpile(0, program=main, startup_program=startup, pservers=PS, trainers=trainers)
    return t.get_program("127.0.0.1:1", "pserver")


def _on_pservers(prog):
    """{parameter or block: pserver} for what the pservers hold."""
    return {v.name: str(v.place) for v in prog.list_vars() if v.is_parameter and str(v.place).startswith("pserver/")}


def _crc_placed(prog):
    eps = PS.split(",")
    return {n: f"pserver/{eps[zlib.crc32(n.encode()) % 2]}" for n in _on_pservers(prog)}


def _notices(caught):
    return [str(w.message) for w in caught if issubclass(w.category, StrategyNotice)]


def _config(**values):
    config = DistributeTranspilerConfig()
    for name, value in values.items():
        setattr(config, name, value)
    return config


def test_the_fields_are_fluid_185s_and_placegroups_own():
    config = DistributeTranspilerConfig()
    assert {n: f.default for n, f in DistributeTranspilerConfig._FIELDS.items()} == {**FLUID_185_FIELDS, **OWN_FIELDS}
    assert {n: getattr(config, n) for n in FLUID_185_FIELDS} == FLUID_185_FIELDS


# -- acted on: (fields to set, model, trainers, what the program shows) -------------------------

def _whole(prog):
    on = _on_pservers(prog)
    return "fc_0.w_0" in on and not any(".block" in n for n in on)


class _AllOnTheLast(fluid.transpiler.ps_dispatcher.PSDispatcher):
    """A user's dispatcher in Fluid's form: dispatch(varlist) -> an endpoint per var."""

    def dispatch(self, varlist):
        return [self.eps[-1] for _ in varlist]


ACTED_ON = [
    ({"slice_var_up": False}, _wide, 2, _whole),
    ({"split_method": _AllOnTheLast}, _wide, 2, lambda p: set(_on_pservers(p).values()) == {"pserver/127.0.0.1:2"}),
    ({"min_block_size": 81920}, _wide, 2, _whole),
    ({"split_method": fluid.transpiler.HashName}, _wide, 2,
     lambda p: _on_pservers(p) == _crc_placed(p) and _on_pservers(p) != _on_pservers(_transpile(None))),
    ({"slice_var_up": False, "split_method": fluid.transpiler.HashName}, _wide, 2,
     lambda p: _whole(p) and _on_pservers(p) == _crc_placed(p)),
    ({"sync_mode": False}, _wide, 2, lambda p: p.cluster.sync_mode is False),
    ({"staleness": 2}, _wide, 2, lambda p: p.cluster.staleness == 2),
    ({"merge_steps": 3}, _wide, 2, lambda p: p.cluster.merge_steps == 3),
    ({"mp_fused": False}, _model_parallel, TRAINERS,
     lambda p: "parallel_softmax_with_cross_entropy" not in {op.type for op in p.global_block().ops}),
]


def test_the_default_program_is_sliced_round_robin_sync():
    prog = _transpile(DistributeTranspilerConfig())
    assert _on_pservers(prog) == {"fc_0.w_0.block0": "pserver/127.0.0.1:1", "fc_0.w_0.block1": "pserver/127.0.0.1:2",
                                  "fc_0.b_0": "pserver/127.0.0.1:1", "fc_1.w_0": "pserver/127.0.0.1:2",
                                  "fc_1.b_0": "pserver/127.0.0.1:1"}
    assert prog.cluster.sync_mode is True
    fused = _transpile(None, _model_parallel, TRAINERS)
    assert "parallel_softmax_with_cross_entropy" in {op.type for op in fused.global_block().ops}


@pytest.mark.parametrize("values, build, trainers, shows", ACTED_ON, ids=lambda v: str(v) if isinstance(v, dict) else "")
def test_a_field_acted_on_changes_the_program(values, build, trainers, shows):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config = _config(**values)
        prog = _transpile(config, build, trainers)
    assert shows(prog)
    assert not _notices(caught)
    for name, value in values.items():
        assert getattr(config, name) is value or getattr(config, name) == value


def test_keyword_arguments_set_fields_as_assignment_does():
    assert _whole(_transpile(DistributeTranspilerConfig(slice_var_up=False)))
    with pytest.raises(TypeError, match=r"unexpected keyword argument 'slice_var_upp'; did you mean 'slice_var_up'"):
        DistributeTranspilerConfig(slice_var_upp=False)
    with pytest.raises(TypeError, match="DistributeTranspilerConfig.min_block_size must be an int"):
        DistributeTranspilerConfig(min_block_size="big")


# -- inert: (field, a value other than its default, words of the reason) -------------------------

INERT = [
    ("print_log", True, "placegroup dump"),
    ("wait_port", False, "waits for its peers"),
    ("runtime_split_send_recv", True, "communicator"),
    ("half_async", True, "runs async"),
    ("geo_sgd_mode", True, "runs async"),
    ("geo_sgd_need_push_nums", 10, "GEO-SGD"),
    ("nccl_comm_num", 2, "nccl2"),
    ("use_hierarchical_allreduce", True, "nccl2"),
    ("hierarchical_allreduce_inter_nranks", 4, "nccl2"),
    ("collective_mode", "grad_allreduce", "all-reduce"),
]


@pytest.mark.parametrize("name, value, why", INERT)
def test_an_inert_field_gives_one_notice_and_changes_nothing(name, value, why):
    # Fluid's rule: sync_mode and runtime_split_send_recv not both True
    config, another = (DistributeTranspilerConfig(sync_mode=name != "runtime_split_send_recv") for _ in range(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        setattr(config, name, value)
        setattr(config, name, value)
        setattr(another, name, value)
    notes = _notices(caught)
    assert len(notes) == 1, notes
    assert f"DistributeTranspilerConfig.{name} = {value!r} changes nothing in placegroup" in notes[0]
    assert why in notes[0]
    assert getattr(config, name) == value
    default = DistributeTranspilerConfig(sync_mode=config.sync_mode)
    assert str(_transpile(config)) == str(_transpile(default))


# -- refused: (field, value, words of the error) --------------------------------------------------

REFUSED = [
    ("enable_dc_asgd", True, r"DC-ASGD .*leave enable_dc_asgd = False"),
    ("mode", "nccl2", r"leave mode = 'pserver' and transpile with pservers=''"),
    ("mode", "collective", r"leave mode = 'pserver'"),
    ("completely_not_async", True, r"leave sync_mode = True"),
]


@pytest.mark.parametrize("name, value, says", REFUSED)
def test_a_refused_value_says_what_to_do(name, value, says):
    config = DistributeTranspilerConfig()
    with pytest.raises(ConfigError, match=rf"DistributeTranspilerConfig\.{name} = {value!r}: .*{says}"):
        setattr(config, name, value)
    assert getattr(config, name) == FLUID_185_FIELDS[name]  # left as it was


# -- wrong types and values: (field, value, error class, words) ------------------------------------

BAD = [
    ("slice_var_up", "no", TypeError, "must be True or False"),
    ("slice_var_up", 0, TypeError, "must be True or False"),
    ("split_method", "RoundRobin", TypeError, "must be None or a class"),
    ("min_block_size", 8192.0, TypeError, "must be an int"),
    ("min_block_size", True, TypeError, "must be an int"),
    ("min_block_size", 0, ValueError, "must be at least 1"),
    ("sync_mode", None, TypeError, "must be True or False"),
    ("mode", 2, TypeError, "must be a str"),
    ("mode", "local", ValueError, "must be one of 'pserver', 'nccl2', 'collective'"),
    ("collective_mode", 1, TypeError, "must be None or a str"),
    ("geo_sgd_need_push_nums", "100", TypeError, "must be an int"),
    ("staleness", -1, ValueError, "must be at least 0"),
    ("merge_steps", 0, ValueError, "must be at least 1"),
    ("mp_fused", "yes", TypeError, "must be True or False"),
]


@pytest.mark.parametrize("name, value, error, says", BAD)
def test_a_wrong_value_names_the_field(name, value, error, says):
    with pytest.raises(error, match=rf"DistributeTranspilerConfig\.{name} {says}") as e:
        setattr(DistributeTranspilerConfig(), name, value)
    assert "pydantic" not in str(e.value) and "validation error" not in str(e.value)


def test_sync_mode_and_runtime_split_are_not_both_true_as_in_fluid():
    config = DistributeTranspilerConfig()
    with pytest.raises(ValueError, match="runtime_split_send_recv = True while sync_mode is True.*sync_mode = False first"):
        config.runtime_split_send_recv = True
    config.sync_mode = False
    config.runtime_split_send_recv = True
    with pytest.raises(ValueError, match="set runtime_split_send_recv = False first"):
        config.sync_mode = True


def test_an_unknown_field_is_kept_with_one_notice_naming_the_closest():
    config = DistributeTranspilerConfig()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        config.slice_var_upp = False
        config.slice_var_upp = True
    notes = _notices(caught)
    assert len(notes) == 1 and "DistributeTranspilerConfig.slice_var_upp is not a field" in notes[0]
    assert "did you mean 'slice_var_up'?" in notes[0]
    assert config.slice_var_upp is True and config.slice_var_up is True
    with pytest.raises(AttributeError, match="did you mean 'min_block_size'"):
        config.min_block_sise  # noqa: B018 - never set: no such attribute, as in Fluid


def test_the_pybind_strategies_still_refuse_unknown_names():
    with pytest.raises(AttributeError, match="did you mean 'fuse_all_reduce_ops'"):
        fluid.BuildStrategy().fuse_all_reduce = True
    with pytest.raises(AttributeError, match="did you mean 'num_threads'"):
        fluid.ExecutionStrategy().num_thread = 2


# -- fleet's configs -------------------------------------------------------------------------------

def test_fleet_getters_give_objects_set_by_assignment():
    s = ds.StrategyFactory.create_async_strategy()
    config = s.get_program_config()
    config.slice_var_up = False
    config.min_block_size = 81920
    assert s.transpiler_config().slice_var_up is False and s.transpiler_config().min_block_size == 81920
    s.get_trainer_runtime_config().runtime_configs["communicator_send_queue_size"] = "4"
    assert s.get_trainer_runtime_config().get_communicator_flags()["communicator_send_queue_size"] == "4"
    s.get_execute_strategy().num_threads = 2
    s.get_build_strategy().reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    s.get_server_runtime_config()._rpc_send_thread_num = 4
    assert isinstance(s.get_server_runtime_config(), ServerRuntimeConfig)


# (strategy, Fluid 1.8.5's program config fields after construction, the mode placegroup runs)
NAMED = [
    (ds.StrategyFactory.create_sync_strategy, dict(sync_mode=False, runtime_split_send_recv=True, half_async=True,
                                                   completely_not_async=True), True),
    (ds.StrategyFactory.create_async_strategy, dict(sync_mode=False, runtime_split_send_recv=True), False),
    (ds.StrategyFactory.create_half_async_strategy, dict(sync_mode=False, runtime_split_send_recv=True,
                                                         half_async=True), False),
    (lambda: ds.StrategyFactory.create_geo_strategy(7), dict(sync_mode=False, runtime_split_send_recv=True,
                                                              geo_sgd_mode=True, geo_sgd_need_push_nums=7), False),
]


@pytest.mark.parametrize("make, fixed, sync", NAMED)
def test_named_strategies_set_fluids_values_quietly_and_run_their_mode(make, fixed, sync):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = make()
    assert not _notices(caught)
    assert {n: getattr(s.get_program_config(), n) for n in fixed} == fixed
    assert s.get_build_strategy().async_mode is True
    assert s.transpiler_config().sync_mode is sync
    # a config given whole gets the strategy's values again, as Fluid's check_program_config does
    # (not geo_sgd_need_push_nums: Fluid sets it once, from create_geo_strategy's argument)
    s.set_program_config(DistributeTranspilerConfig(slice_var_up=False))
    again = {n: v for n, v in fixed.items() if n != "geo_sgd_need_push_nums"}
    assert {n: getattr(s.get_program_config(), n) for n in again} == again
    assert s.get_program_config().slice_var_up is False


# (setter, dict, error class or None, words of the error)
DICTS = [
    ("set_program_config", {"slice_var_up": False, "split_method": fluid.transpiler.HashName}, None, ""),
    ("set_program_config", {"slice_var_upp": False}, ValueError,
     "DistributeTranspilerConfig doesn't have key: slice_var_upp; did you mean 'slice_var_up'"),
    ("set_program_config", {"min_block_size": "81920"}, TypeError, r"DistributeTranspilerConfig\.min_block_size must be an int"),
    ("set_program_config", {"enable_dc_asgd": True}, ConfigError, "enable_dc_asgd"),
    ("set_trainer_runtime_config", {"communicator_send_queue_size": 4}, None, ""),
    ("set_trainer_runtime_config", {"communicator_send_queue": 4}, ValueError,
     "TrainerRuntimeConfig doesn't have key: communicator_send_queue; did you mean 'communicator_send_queue_size'"),
    ("set_trainer_runtime_config", {"rpc_deadline": [1]}, TypeError, "TrainerRuntimeConfig rpc_deadline must be a str or a number"),
    ("set_server_runtime_config", {"_rpc_send_thread_num": 4}, None, ""),
    ("set_server_runtime_config", {"rpc_send_thread_num": 4}, ValueError,
     "ServerRuntimeConfig doesn't have key: rpc_send_thread_num; did you mean '_rpc_send_thread_num'"),
    ("set_execute_strategy", {"num_threads": 4}, None, ""),
    ("set_execute_strategy", {"num_thread": 4}, ValueError, "ExecutionStrategy doesn't have key: num_thread; did you mean 'num_threads'"),
    ("set_execute_strategy", {"num_threads": "4"}, TypeError, r"ExecutionStrategy\.num_threads must be an int"),
    ("set_build_strategy", {"enable_inplace": False}, None, ""),
    ("set_build_strategy", {"fuse_all_reduce": True}, ValueError, "BuildStrategy doesn't have key: fuse_all_reduce"),
    ("set_build_strategy", {"enable_inplace": 1}, TypeError, r"BuildStrategy\.enable_inplace must be True or False"),
    ("set_program_config", "slice_var_up=False", TypeError, "program_config only accept input type: dict or DistributeTranspilerConfig"),
]


@pytest.mark.parametrize("setter, values, error, says", DICTS)
def test_fleet_setters_take_a_dict_as_fluid_does(setter, values, error, says):
    s = ds.StrategyFactory.create_async_strategy()
    if error is None:
        getattr(s, setter)(values)
        target = getattr(s, setter.replace("set_", "get_"))()
        got = target.runtime_configs if setter == "set_trainer_runtime_config" else target
        for key, value in values.items():
            assert (got[key] if isinstance(got, dict) else getattr(got, key)) == value
        return
    with pytest.raises(error, match=says) as e:
        getattr(s, setter)(values)
    assert "pydantic" not in str(e.value) and "validation error" not in str(e.value)


def test_fleet_runtime_configs_give_one_notice():
    s = ds.StrategyFactory.create_sync_strategy()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s.set_trainer_runtime_config({"communicator_thread_pool_size": 8})
        s.set_trainer_runtime_config({"communicator_thread_pool_size": 9})
    notes = _notices(caught)
    assert len(notes) == 1 and "TrainerRuntimeConfig.runtime_configs changes nothing" in notes[0]


# -- against Fluid 1.8.5 itself ----------------------------------------------------------------------

ASK_FLUID = textwrap.dedent("""
    import json
    from paddle.fluid.transpiler.distribute_transpiler import DistributeTranspilerConfig
    config = DistributeTranspilerConfig()
    print(json.dumps({n: getattr(config, n) for n in dir(config)
                      if not n.startswith("_") and not callable(getattr(config, n))}))
""")


@pytest.mark.paddle
def test_fields_and_defaults_match_fluid_185(fluid18_python, tmp_path):
    out = run_python(fluid18_python, "-c", ASK_FLUID, cwd=tmp_path, timeout=300).stdout
    theirs = json.loads(out.strip().splitlines()[-1])
    assert theirs == FLUID_185_FIELDS
    ours = DistributeTranspilerConfig()
    assert {n: getattr(ours, n) for n in theirs} == theirs
