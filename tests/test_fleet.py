"""Fluid 1.8's fleet parameter-server API (``fluid.incubate.fleet``) over placegroup's transpiler.

* Role makers: the launch environment gives each process its role, index, counts and the
  servers' endpoints; an environment that lacks or contradicts them is a ConfigError naming
  the variables; UserDefinedRoleMaker keeps Fluid's argument checks.
* The fleet object: strategies map to sync or async (half-async and GEO run as async, with a
  warning); ``minimize`` gives each role its programs; calls out of order say what to call.
* A fleet-style CTR script (tests/compat_scripts/ctr_fleet.py: ``import paddle.fluid``, sparse
  embedding over lod_level=1 slots, Adam) launched unchanged with 2 trainers and 2 pservers in
  sync mode: the mean of the trainers' losses per step equals the same script run alone (which,
  as in Fluid, trains without fleet), and trainer 0's saved inference model predicts as the
  one-process one does. In async mode it trains.
* Optionally (``paddle`` marker, ``PLACEGROUP_PADDLE18_PYTHON``): the script's one-process run
  under Fluid 1.8.5 itself gives placegroup's losses.
"""
from __future__ import annotations

import io
import logging
import os
import sys
from pathlib import Path

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ConfigError
from placegroup.incubate.fleet.base import role_maker
from placegroup.incubate.fleet.base.role_maker import PaddleCloudRoleMaker, Role, UserDefinedRoleMaker
from placegroup.incubate.fleet.parameter_server.distribute_transpiler import DistributedTranspiler
from placegroup.incubate.fleet.parameter_server.distribute_transpiler import distributed_strategy as ds
from placegroup.tools.launch import cluster_envs, launch
from tests.conftest import TIME_FACTOR
from tests.paddle_ref.reference import run_python

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "compat_scripts" / "ctr_fleet.py"
PS = "127.0.0.1:7164,127.0.0.1:7165"


@pytest.fixture
def env(launch_env):
    return launch_env


# -- role makers -----------------------------------------------------------------------------
def test_each_launched_process_gets_its_role_from_the_launch_environment(env, monkeypatch):
    seen = []
    for m in cluster_envs(2, 2):
        e = m.env
        for k, v in e.items():
            monkeypatch.setenv(k, v)
        r = PaddleCloudRoleMaker()
        r.generate_role()
        seen.append((m.role, m.index, r.is_worker(), r.is_server(), r.is_first_worker(), r.worker_index(),
                     r.worker_num()))
        assert r.get_pserver_endpoints() == e["PADDLE_PSERVERS_IP_PORT_LIST"].split(",")
        assert r.get_trainer_endpoints() == e["PADDLE_TRAINER_ENDPOINTS"].split(",")
    assert seen == [("PSERVER", 0, False, True, False, 0, 2), ("PSERVER", 1, False, True, False, 1, 2),
                    ("TRAINER", 0, True, False, True, 0, 2), ("TRAINER", 1, True, False, False, 1, 2)]


def test_a_pserver_is_found_by_pod_ip_and_paddle_port(env):
    env(TRAINING_ROLE="PSERVER", PADDLE_PSERVERS_IP_PORT_LIST=PS, PADDLE_TRAINERS_NUM="3", POD_IP="127.0.0.1",
        PADDLE_PORT="7165")
    r = PaddleCloudRoleMaker()
    assert (r.is_server(), r.server_index(), r.worker_num(), r.get_trainer_endpoints()) == (True, 1, 3, [])


def test_no_environment_names_every_variable_fleet_needs(env):
    with pytest.raises(ConfigError, match=r"TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINERS_NUM "
                                          r"are unset.*no one-process mode"):
        PaddleCloudRoleMaker().generate_role()


@pytest.mark.parametrize("values, message", [
    (dict(TRAINING_ROLE="TRAINER", PADDLE_TRAINERS_NUM="2"), r"PADDLE_PSERVERS_IP_PORT_LIST, PADDLE_TRAINER_ID are unset"),
    (dict(TRAINING_ROLE="PSERVER", PADDLE_TRAINERS_NUM="2"), r"PADDLE_PSERVERS_IP_PORT_LIST, POD_IP, PADDLE_PORT"),
    (dict(TRAINING_ROLE="TRAINER", PADDLE_PSERVERS_IP_PORT_LIST=PS, PADDLE_TRAINERS_NUM="2", PADDLE_TRAINER_ID="2"),
     r"PADDLE_TRAINER_ID=2 is not in 0\.\.1"),
    (dict(TRAINING_ROLE="PSERVER", PADDLE_PSERVERS_IP_PORT_LIST=PS, PADDLE_TRAINERS_NUM="2", POD_IP="127.0.0.1",
          PADDLE_PORT="9"), r"127\.0\.0\.1:9 \(POD_IP:PADDLE_PORT\) is not in PADDLE_PSERVERS_IP_PORT_LIST"),
    (dict(TRAINING_ROLE="banana", PADDLE_TRAINERS_NUM="2"), r"TRAINING_ROLE='banana': expected TRAINER or PSERVER"),
    (dict(TRAINING_ROLE="TRAINER", PADDLE_PSERVERS_IP_PORT_LIST=PS, PADDLE_TRAINERS_NUM="two", PADDLE_TRAINER_ID="0"),
     r"PADDLE_TRAINERS_NUM='two'"),
    (dict(TRAINING_ROLE="TRAINER", PADDLE_PSERVERS_IP_PORT_LIST=PS, PADDLE_TRAINERS_NUM="0", PADDLE_TRAINER_ID="0"),
     r"PADDLE_TRAINERS_NUM=0"),
])
def test_a_bad_environment_is_a_config_error_naming_the_variables(env, values, message):
    env(**values)
    with pytest.raises(ConfigError, match=message):
        PaddleCloudRoleMaker().generate_role()


def test_a_collective_role_maker_reads_the_trainer_endpoints(env):
    with pytest.raises(ConfigError, match="PADDLE_TRAINER_ENDPOINTS"):
        PaddleCloudRoleMaker(is_collective=True).generate_role()
    env(PADDLE_TRAINER_ENDPOINTS="127.0.0.1:1,127.0.0.1:2", PADDLE_TRAINER_ID="1")
    r = PaddleCloudRoleMaker(is_collective=True)
    assert (r.is_worker(), r.worker_index(), r.worker_num()) == (True, 1, 2)


def test_user_defined_role_maker_keeps_fluids_checks():
    r = UserDefinedRoleMaker(current_id=1, role=Role.SERVER, worker_num=4, server_endpoints=PS.split(","))
    assert (r.is_server(), r.server_index(), r.worker_num(), r.is_first_worker()) == (True, 1, 4, False)
    with pytest.raises(TypeError, match="server_endpoints must be"):
        UserDefinedRoleMaker(server_endpoints=PS)
    with pytest.raises(ConfigError, match="duplicate"):
        UserDefinedRoleMaker(worker_num=1, server_endpoints=["a:1", "a:1"])
    with pytest.raises(ConfigError, match="current_id must be less"):
        UserDefinedRoleMaker(current_id=2, role=Role.SERVER, worker_num=1, server_endpoints=["a:1"])
    with pytest.raises(ConfigError, match="worker_num must be greater than 0"):
        UserDefinedRoleMaker(server_endpoints=["a:1"])


def test_fluids_other_role_makers_are_here():
    """GeneralRoleMaker, the MPI ones and UserDefinedCollectiveRoleMaker: tests/test_fluid_tree_fleet.py."""
    for name in ("GeneralRoleMaker", "MPIRoleMaker", "MPISymetricRoleMaker", "UserDefinedCollectiveRoleMaker",
                 "MockBarrier"):
        assert isinstance(getattr(role_maker, name), type)


# -- the fleet object ------------------------------------------------------------------------
def _fleet(current_id: int, role: int, sync=ds.SyncStrategy()):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x, y = fluid.layers.data(name="x", shape=[13]), fluid.layers.data(name="y", shape=[1])
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=fluid.layers.fc(input=x, size=1), label=y))
    f = DistributedTranspiler()
    f.init(UserDefinedRoleMaker(current_id=current_id, role=role, worker_num=2, server_endpoints=PS.split(",")))
    with fluid.program_guard(main, startup):
        f.distributed_optimizer(fluid.optimizer.SGD(0.01), sync).minimize(cost)
    return f, main


def test_after_minimize_the_default_programs_are_this_processs_placed_ones():
    """As with Fluid's in-place transpile, a script may run fluid.default_main_program()."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x, y = fluid.layers.data(name="x", shape=[13]), fluid.layers.data(name="y", shape=[1])
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=fluid.layers.fc(input=x, size=1), label=y))
        f = DistributedTranspiler()
        f.init(UserDefinedRoleMaker(current_id=0, role=Role.WORKER, worker_num=2, server_endpoints=PS.split(",")))
        f.distributed_optimizer(fluid.optimizer.SGD(0.01), ds.SyncStrategy()).minimize(cost)
        assert fluid.default_main_program() is f.main_program
        assert fluid.default_startup_program() is f.startup_program
    assert str(f.main_program.executor).startswith("trainer")


def test_minimize_gives_each_role_its_placed_programs():
    server, main = _fleet(1, Role.SERVER)
    trainer, _ = _fleet(0, Role.WORKER)
    assert str(server.main_program.executor) == "pserver@127.0.0.1:7165"
    assert str(trainer.main_program.executor).startswith("trainer")
    assert server.startup_program.executor == server.main_program.executor
    assert (server.server_num(), trainer.server_endpoints(to_string=True)) == (2, PS)
    assert main is server.main_program  # minimize's program, rewritten into the server's part


@pytest.mark.parametrize("strategy, sync, warns", [
    (ds.StrategyFactory.create_sync_strategy(), True, False),
    (ds.StrategyFactory.create_async_strategy(), False, False),
    (ds.StrategyFactory.create_half_async_strategy(), False, True),
    (ds.StrategyFactory.create_geo_strategy(10), False, True),
    (fluid.DistributeTranspilerConfig(sync_mode=False), False, False),
])
def test_each_strategy_runs_as_sync_or_async(strategy, sync, warns, caplog):
    with caplog.at_level(logging.WARNING, logger="placegroup.fleet"):
        f, _ = _fleet(0, Role.SERVER, strategy)
    assert f.main_program.cluster.sync_mode is sync
    assert ("runs async" in caplog.text) is warns


def test_a_strategys_program_config_takes_a_dict_of_known_keys():
    s = ds.StrategyFactory.create_sync_strategy()
    s.set_program_config({"slice_var_up": False})
    assert s.transpiler_config().slice_var_up is False and s.sync_mode()
    with pytest.raises(ValueError, match="doesn't have key: banana"):
        s.set_program_config({"banana": 1})


def test_calls_out_of_order_say_what_to_call_first():
    f = DistributedTranspiler()
    with pytest.raises(ValueError, match=r"fleet\.init\(role\)"):
        f.distributed_optimizer(fluid.optimizer.SGD(0.1))
    f.init(UserDefinedRoleMaker(worker_num=1, server_endpoints=["127.0.0.1:1"]))
    with pytest.raises(ConfigError, match=r"minimize\(loss\) first"):
        f.init_worker()
    with pytest.raises(ValueError, match="optimizer must be"):
        f.distributed_optimizer("sgd")
    with pytest.raises(TypeError, match="strategy must be"):
        f.distributed_optimizer(fluid.optimizer.SGD(0.1), strategy="sync")
    server, _ = _fleet(0, Role.SERVER)
    with pytest.raises(ConfigError, match=r"init_server\(model_dir='m'\).*checkpoints"):
        server.init_server("m")


def test_split_files_gives_each_worker_a_contiguous_share():
    f = DistributedTranspiler()
    shares = []
    for i in range(2):
        f.init(UserDefinedRoleMaker(current_id=i, worker_num=2, server_endpoints=["a:1"]))
        shares.append(f.split_files(list("abcde")))
    assert shares == [list("abc"), list("de")]


# -- the fleet-style CTR script, launched ----------------------------------------------------
def _data(path: Path, same_batch: bool = False) -> Path:
    r = np.random.default_rng(2020)
    steps, batch = 6, (6, 16)
    arrays = dict(dense_input=r.random(batch + (5,), dtype="float32"), label=r.integers(0, 2, batch + (1,)))
    for i in range(1, 5):
        lengths = np.tile(r.integers(1, 9, (1, 16)), (steps, 1)) if same_batch else r.integers(1, 9, batch)
        ids = r.integers(0, 100, (int(lengths[0].sum()), 1))
        arrays.update({f"C{i}": np.tile(ids, (steps, 1)) if same_batch else r.integers(0, 100, (int(lengths.sum()), 1)),
                       f"C{i}@lengths": lengths})
    if same_batch:
        arrays.update(dense_input=np.repeat(arrays["dense_input"][:1], steps, 0),
                      label=np.repeat(arrays["label"][:1], steps, 0))
    np.savez(path, steps=steps, **arrays)
    return path


def _launch(data: Path, out: Path, mode: str, *more: str) -> list[dict]:
    log = io.StringIO()
    code = launch(str(SCRIPT), [str(data), str(out), mode, *more], 2, 2, out=log, grace=30 * TIME_FACTOR,
                  paddle_compat=True)
    assert code == 0, log.getvalue()[-3000:]
    runs = []
    for t in range(2):
        with np.load(f"{out}.trainer{t}.npz") as z:
            runs.append(dict(z))
    return runs


def _alone(data: Path, out: Path, python: str = sys.executable, *prefix: str) -> dict:
    run_python(python, *prefix, SCRIPT, data, out, timeout=300 * TIME_FACTOR, cwd=SCRIPT.parent,
               env={k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"})
    with np.load(out) as z:
        return dict(z)


def test_a_fleet_script_launched_sync_2x2_equals_one_process(tmp_path):
    data = _data(tmp_path / "data.npz")
    one = _alone(data, tmp_path / "one.npz", sys.executable, "-m", "placegroup", "run")
    runs = _launch(data, tmp_path / "dist", "sync")
    np.testing.assert_allclose(np.mean([r["loss"] for r in runs], axis=0), one["loss"], rtol=1e-5)
    np.testing.assert_allclose(runs[0]["predict"], one["predict"], rtol=1e-5, atol=1e-6)
    assert "predict" not in runs[1]  # only the first worker saves the model


@pytest.mark.parametrize("table", [pytest.param("grown", marks=pytest.mark.slow), "clicked"])  # 8 s each
def test_a_fleet_script_with_a_table_keyed_by_raw_ids_launched_sync_2x2_equals_one_process(tmp_path, table):
    """The same job with a table keyed by raw ids: paddle.static.nn.sparse_embedding and a
    CountFilterEntry, or fluid.contrib.layers.sparse_embedding with a Normal initializer and a
    ShowClickEntry of computed show and click vars. Fleet's distributed optimizer puts the table
    on the pservers, the scores travel with the gradients, and the first worker's
    fleet.save_inference_model gathers the shards' rows for the model it saves."""
    data = _data(tmp_path / "data.npz")
    run_python(sys.executable, "-m", "placegroup", "run", SCRIPT, data, tmp_path / "one.npz", "sync", table,
               timeout=300 * TIME_FACTOR, cwd=SCRIPT.parent, env={k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"})
    with np.load(tmp_path / "one.npz") as z:
        one = dict(z)
    runs = _launch(data, tmp_path / "dist", "sync", table)
    np.testing.assert_allclose(np.mean([r["loss"] for r in runs], axis=0), one["loss"], rtol=1e-5)
    np.testing.assert_allclose(runs[0]["predict"], one["predict"], rtol=1e-5, atol=1e-6)


def test_a_fleet_script_launched_async_trains(tmp_path):
    runs = _launch(_data(tmp_path / "data.npz", same_batch=True), tmp_path / "dist", "async")
    for r in runs:
        assert r["loss"].shape == (6,) and np.isfinite(r["loss"]).all()
        assert r["loss"][-1] < r["loss"][0], r["loss"]


@pytest.mark.paddle
def test_the_fleet_scripts_model_under_fluid_18_gives_the_same_losses(fluid18_python, tmp_path):
    """The script's one-process run under PaddlePaddle Fluid 1.8.5 (``PLACEGROUP_PADDLE18_PYTHON``),
    from placegroup's initial values, gives placegroup's losses."""
    data = _data(tmp_path / "data.npz")
    ours = _alone(data, tmp_path / "ours.npz", sys.executable, "-m", "placegroup", "run")
    with np.load(data) as z:
        arrays = dict(z)
    np.savez(tmp_path / "with_init.npz", **arrays, **{k: v for k, v in ours.items() if k.startswith("init/")})
    theirs = _alone(tmp_path / "with_init.npz", tmp_path / "fluid.npz", fluid18_python)
    assert sorted(k for k in theirs if k.startswith("init/")) == sorted(k for k in ours if k.startswith("init/"))
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-4)
    np.testing.assert_allclose(ours["predict"], theirs["predict"], rtol=1e-4, atol=1e-6)
