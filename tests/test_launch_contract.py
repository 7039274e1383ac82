"""The launch contract: the environment Fluid's launchers set, checked where placegroup reads it.

A bad or incomplete environment ends the process with a ConfigError that names the variables
(docs/launch.md): a role that is no role, a trainer with neither pservers nor trainer
endpoints, counts that disagree. Trainers that exchange data with each other take their
endpoints from PADDLE_TRAINER_ENDPOINTS when given only a count; a pserver ignores
PADDLE_TRAINER_ID; a bare pserver ip is said to take a port, once per process.
"""
from __future__ import annotations

import logging
import math
import os
import subprocess
import sys

import pytest

import placegroup as fluid
from placegroup import config
from placegroup.errors import ConfigError
from placegroup.tools.launch import cluster_envs
from placegroup.transpiler import endpoints
from tests.conftest import LAUNCH_VARS, TIME_FACTOR, build_fit_a_line

TRAINERS = "127.0.0.1:7170,127.0.0.1:7171"


@pytest.fixture
def env(launch_env):
    return launch_env


def _mp_model():
    x = fluid.layers.data(name="x", shape=[8])
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")
    logits = fluid.layers.fc(input=x, size=10, model_parallel=True)
    loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits=logits, label=label))
    fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)


# -- TRAINING_ROLE ---------------------------------------------------------------------------
def test_a_role_that_is_no_role_names_training_role():
    with pytest.raises(ConfigError, match=r"TRAINING_ROLE='banana': expected TRAINER or PSERVER"):
        config.get("TRAINING_ROLE", {"TRAINING_ROLE": "banana"})
    assert config.get("TRAINING_ROLE", {"TRAINING_ROLE": " pserver "}) == "PSERVER"


def test_get_program_with_no_role_names_training_role(env):
    build_fit_a_line()
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id=0, pservers="127.0.0.1:7164", trainers=1)
    with pytest.raises(ConfigError, match=r"role 'banana' is not TRAINER or PSERVER.*TRAINING_ROLE"):
        t.get_program("127.0.0.1:7164", "banana")


def test_a_bad_role_ends_a_script_with_one_line():
    """The script of a cluster process, run with a role that is none: one line, exit 1."""
    code = ("import placegroup as fluid\nfrom tests.conftest import build_fit_a_line\nbuild_fit_a_line()\n"
            "fluid.transpile_from_env(fluid.Executor())\n")
    environ = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS and k != "PLACEGROUP_DEBUG"}
    r = subprocess.run([sys.executable, "-c", code], env={**environ, "TRAINING_ROLE": "banana"},
                       capture_output=True, text=True, timeout=60 * TIME_FACTOR, cwd=_root())
    assert r.returncode == 1
    assert "Traceback" not in r.stderr, r.stderr
    assert "ConfigError: TRAINING_ROLE='banana': expected TRAINER or PSERVER" in r.stderr


# -- neither pserver mode nor collective mode -------------------------------------------------
@pytest.mark.parametrize("trainers", ["1", "2"])
def test_a_trainer_with_neither_pservers_nor_trainer_endpoints_is_refused(env, trainers):
    env(TRAINING_ROLE="TRAINER", PADDLE_INIT_PSERVERS="", PADDLE_INIT_TRAINERS=trainers)
    build_fit_a_line()
    with pytest.raises(ConfigError, match=r"PADDLE_INIT_PSERVERS.*PADDLE_TRAINER_ENDPOINTS"):
        fluid.transpile_from_env(fluid.Executor())
    with pytest.raises(ConfigError, match=r"PADDLE_INIT_PSERVERS.*PADDLE_TRAINER_ENDPOINTS"):
        fluid.DistributeTranspiler().transpile(pservers="", trainers=trainers)  # as fit_a_line.py does


def test_a_pserver_with_no_pservers_is_refused(env):
    env(TRAINING_ROLE="PSERVER", PADDLE_INIT_PSERVERS="")
    build_fit_a_line()
    with pytest.raises(ConfigError, match=r"TRAINING_ROLE=PSERVER, but PADDLE_INIT_PSERVERS .* is empty"):
        fluid.DistributeTranspiler().transpile(pservers="", trainers=2)


def test_a_pserver_not_among_the_pservers_names_the_variables(env):
    build_fit_a_line()
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id=0, pservers="127.0.0.1:7164", trainers=2)
    with pytest.raises(ConfigError, match=r"'127.0.0.1:7999' \(POD_IP:PADDLE_INIT_PORT\).*PADDLE_INIT_PSERVERS"):
        t.get_program("127.0.0.1:7999", "PSERVER")


def test_one_process_without_the_environment_still_transpiles_alone(env):
    build_fit_a_line()
    t = fluid.DistributeTranspiler()
    t.transpile(pservers="", trainers="1")
    assert (t.trainer_num, t.trainer_endpoints, t.pserver_endpoints) == (1, [], [])


# -- the trainers' endpoints from PADDLE_TRAINER_ENDPOINTS ------------------------------------
def test_no_pservers_takes_the_trainers_endpoints_from_the_environment(env):
    env(PADDLE_TRAINER_ENDPOINTS=TRAINERS, PADDLE_INIT_TRAINERS="2")
    build_fit_a_line()
    t = fluid.DistributeTranspiler()
    t.transpile(pservers="", trainers="2")
    assert t.trainer_endpoints == TRAINERS.split(",")
    prog = t.get_program("127.0.0.1:7171", "TRAINER")
    assert (prog.executor.rank, prog.executor.endpoint) == (1, "127.0.0.1:7171")
    assert prog.cluster.trainer_endpoints == TRAINERS.split(",")


def test_model_parallel_with_pservers_takes_them_too(env):
    env(PADDLE_TRAINER_ENDPOINTS=TRAINERS)
    _mp_model()
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id=0, pservers="127.0.0.1:7164", trainers=2)
    assert t.trainer_endpoints == TRAINERS.split(",")
    assert "model_parallel" in t.get_program("127.0.0.1:7170", "TRAINER").provenance


def test_pserver_mode_does_not_read_them(env):
    env(PADDLE_TRAINER_ENDPOINTS="127.0.0.1:7170")  # disagrees with the count, and is not needed
    build_fit_a_line()
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id=0, pservers="127.0.0.1:7164", trainers=2)
    assert t.trainer_endpoints == []


def test_a_count_that_disagrees_with_the_endpoints_names_both(env):
    env(PADDLE_TRAINER_ENDPOINTS=TRAINERS, PADDLE_INIT_TRAINERS="3")
    build_fit_a_line()
    with pytest.raises(ConfigError, match=r"PADDLE_INIT_TRAINERS=3, but PADDLE_TRAINER_ENDPOINTS names 2"):
        fluid.DistributeTranspiler().transpile(pservers="", trainers="3")
    with pytest.raises(ConfigError, match=r"transpile's trainers=1, but PADDLE_TRAINER_ENDPOINTS names 2"):
        fluid.DistributeTranspiler().transpile(pservers="", trainers=1)


def test_endpoints_needed_and_unset_names_the_variable(env):
    _mp_model()
    with pytest.raises(ConfigError, match=r"model-parallel layers.*PADDLE_TRAINER_ENDPOINTS is unset"):
        fluid.DistributeTranspiler().transpile(trainer_id=0, pservers="127.0.0.1:7164", trainers=2)


def test_no_pservers_and_a_sparse_gradient_names_the_way_out(env):
    env(PADDLE_TRAINER_ENDPOINTS=TRAINERS)
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(input=ids, size=[100, 4], is_sparse=True)
    fluid.optimizer.SGD(learning_rate=0.1).minimize(fluid.layers.mean(emb))
    with pytest.raises(ConfigError, match=r"no pservers \(PADDLE_INIT_PSERVERS is empty\).*sparse.*--pservers"):
        fluid.DistributeTranspiler().transpile(trainer_id=0, pservers="", trainers=2)


# -- a bare pserver ip ------------------------------------------------------------------------
def test_a_bare_ip_is_said_once_per_process(env, monkeypatch, caplog):
    env(PADDLE_INIT_PSERVERS="127.0.0.1")
    monkeypatch.setattr(endpoints, "_said_bare_ip", False)
    build_fit_a_line()
    with caplog.at_level(logging.WARNING, logger="placegroup.transpiler"):
        main, startup = fluid.default_main_program(), fluid.default_startup_program()
        for _ in range(2):  # transpile rewrites what it is given: each time a copy
            t = fluid.DistributeTranspiler()
            t.transpile(trainer_id=0, program=main.clone(), startup_program=startup.clone(), pservers="127.0.0.1",
                        trainers=1)
    assert t.pserver_endpoints == ["127.0.0.1:6174"]
    said = [r.getMessage() for r in caplog.records if r.name == "placegroup.transpiler"]
    assert len(said) == 1, said
    assert said[0] == ("PADDLE_INIT_PSERVERS: '127.0.0.1' has no port, so it means 127.0.0.1:6174 "
                       "(PADDLE_INIT_PORT is unset: its default port); write ip:port to say which port")


def test_a_bare_ip_with_init_port_says_that_port(env, monkeypatch, caplog):
    env(PADDLE_INIT_PORT="7164")
    monkeypatch.setattr(endpoints, "_said_bare_ip", False)
    with caplog.at_level(logging.WARNING, logger="placegroup.transpiler"):
        assert endpoints.pserver_endpoints("10.0.0.1,10.0.0.2:7200", "7164") == ["10.0.0.1:7164", "10.0.0.2:7200"]
    assert [r.getMessage() for r in caplog.records][0].endswith(
        "'10.0.0.1' has no port, so it means 10.0.0.1:7164 (the port of PADDLE_INIT_PORT=7164); write "
        "ip:port to say which port")


def test_an_endpoint_that_does_not_parse_is_a_config_error(env):
    with pytest.raises(ConfigError, match=r"transpile's pservers: 'a b:1' is not ip:port"):
        endpoints.pserver_endpoints("a b:1", "6174")


# -- PADDLE_TRAINER_ID on a pserver -----------------------------------------------------------
def test_a_pserver_ignores_its_trainer_id_and_a_trainer_checks_it(env):
    env(PADDLE_TRAINER_ID="2")
    build_fit_a_line()
    t = fluid.DistributeTranspiler()
    t.transpile(pservers="127.0.0.1:7164,127.0.0.1:7165", trainers=2)
    assert str(t.get_program("127.0.0.1:7165", "PSERVER").executor) == "pserver@127.0.0.1:7165"
    t.get_startup_program("127.0.0.1:7165", "PSERVER")
    with pytest.raises(ConfigError, match=r"trainer_id 2 is not in 0..1: PADDLE_TRAINER_ID"):
        t.get_program(None, "TRAINER")


SERVE_SCRIPT = """
import numpy as np
import placegroup as fluid
from tests.conftest import build_fit_a_line

fluid.default_startup_program().random_seed = 1
cost = build_fit_a_line()
exe = fluid.Executor(fluid.CPUPlace())
prog, role, tid, n = fluid.transpile_from_env(exe)
if role == "PSERVER":
    print("served")
else:
    rng = np.random.default_rng(0)
    for _ in range(4):
        x = rng.normal(size=(8, 13)).astype("float32")
        loss, = exe.run(prog, feed={"x": x[tid::n], "y": x[tid::n, :1]}, fetch_list=[cost])
    exe.close()
    print("trained", float(loss[0]))
"""


def _root() -> str:
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _run_cluster(tmp_path, envs) -> dict:
    """Run SERVE_SCRIPT once per ``cluster_envs`` member; ``{(role, index): output}`` once all have exited 0."""
    script = tmp_path / "serve.py"
    script.write_text(SERVE_SCRIPT)
    base = {k: v for k, v in os.environ.items() if k not in LAUNCH_VARS and k != "PLACEGROUP_DEBUG"}
    base["PYTHONPATH"] = _root()
    procs = []
    for m in envs:
        procs.append(((m.role, m.index), subprocess.Popen([sys.executable, str(script)], env={**base, **m.env},
                                                          cwd=tmp_path, stdout=subprocess.PIPE,
                                                          stderr=subprocess.STDOUT, text=True)))
    outs = {}
    try:
        for tag, p in procs:
            outs[tag] = p.communicate(timeout=90 * TIME_FACTOR)[0]
    finally:
        for _, p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert all(p.returncode == 0 for _, p in procs), outs
    return outs


def test_a_pserver_whose_trainer_id_is_its_own_index_serves(tmp_path):
    """Some cluster scripts set PADDLE_TRAINER_ID on pservers too: pserver 1 says 2, of 2 trainers."""
    envs = [m._replace(env={**m.env, "PADDLE_TRAINER_ID": str(m.index + 1)}) if m.role == "PSERVER" else m
            for m in cluster_envs(2, 2)]
    outs = _run_cluster(tmp_path, envs)
    assert "served" in outs["PSERVER", 1] and "trained" in outs["TRAINER", 1], outs


def test_trainers_named_only_by_their_endpoints_train_together(tmp_path):
    """A collective job whose environment has PADDLE_TRAINER_ENDPOINTS and no PADDLE_INIT_TRAINERS."""
    envs = [m._replace(env={k: v for k, v in m.env.items() if k != "PADDLE_INIT_TRAINERS"})
            for m in cluster_envs(2, 0)]
    outs = _run_cluster(tmp_path, envs)
    losses = [float(outs["TRAINER", t].split("trained")[1]) for t in (0, 1)]
    assert all(math.isfinite(v) for v in losses), outs


def test_a_pserver_with_nothing_placed_on_it_returns_when_the_trainers_are_done(tmp_path):
    """fit_a_line's model has two parameters: of three pservers, one holds nothing and serves nothing."""
    outs = _run_cluster(tmp_path, cluster_envs(2, 3))
    assert all("served" in outs["PSERVER", i] for i in range(3)), outs
