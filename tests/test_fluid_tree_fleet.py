"""Fluid 1.8's fleet module tree beyond the parameter-server fleet (tests/test_fleet.py):

* role makers: MockBarrier; UserDefinedCollectiveRoleMaker's checks; GeneralRoleMaker reading
  the launch environment and barriering / reducing / gathering between real processes through
  a shared directory and through trainer 0's HTTP store; the MPI role makers failing without
  mpi4py, and working over a stand-in mpi4py; the store group's timeout naming the missing ranks;
* ``parameter_server.version``;
* ``utils.utils``: programs in binary and text form and back, the pruned-program checks, the
  dump check of an inference model, the save/load ops (ops/file_io.py), readers;
* ``utils.hdfs`` and ``fs_wrapper.BDFS`` against a stand-in ``hadoop`` that acts on a local
  directory; ``fleet_barrier_util`` over it;
* collective fleet: its strategy's fields, checkpoints, and two trainer processes on
  127.0.0.1:7480-7481 whose mean loss per step equals one process on the whole batch, with the
  same parameters, in both of its modes.
"""
from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import textwrap
import threading
import types

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import CommTimeout, ConfigError, SerializationError
from placegroup.incubate.fleet.base import rendezvous, role_maker
from placegroup.incubate.fleet.base.role_maker import (GeneralRoleMaker, MockBarrier, MPIRoleMaker,
                                                       MPISymetricRoleMaker, Role, UserDefinedCollectiveRoleMaker)
from placegroup.incubate.fleet.collective import (Collective, CollectiveOpBasedOptimizer, CollectiveOptimizer,
                                                  DistFCConfig, DistributedStrategy, LambConfig, TrainStatus)
from placegroup.incubate.fleet.collective import fleet as cfleet
from placegroup.incubate.fleet.parameter_server import version
from placegroup.incubate.fleet.utils import fs_wrapper, hdfs
from placegroup.incubate.fleet.utils import utils as U
from tests.conftest import TIME_FACTOR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TRAINERS = "127.0.0.1:7480,127.0.0.1:7481"  # this file's ports: 7480-7490


def _env(**extra) -> dict:
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("PADDLE_", "TRAINING_ROLE", "POD_IP"))}
    return {**keep, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra}


def _run_all(procs: list, timeout: float) -> list[str]:
    outs = []
    for p in procs:
        try:
            out, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise
        outs.append(out)
    for p, out in zip(procs, outs):
        assert p.returncode == 0, out
    return outs


# -- the paths a Fluid script uses ------------------------------------------------------------
def test_fluid_paths_bind_the_objects_defined_here():
    from placegroup.compat import alias_paddle

    alias_paddle()
    import paddle.fluid.incubate.fleet.base.role_maker as rm
    import paddle.fluid.incubate.fleet.collective as col
    import paddle.fluid.incubate.fleet.parameter_server.version as ver
    import paddle.fluid.incubate.fleet.utils.hdfs as h
    import paddle.fluid.incubate.fleet.utils.utils as uu

    assert rm.GeneralRoleMaker is GeneralRoleMaker and rm.MockBarrier is MockBarrier
    assert col.fleet is cfleet and col.DistributedStrategy is DistributedStrategy and col.LocalFS is fs_wrapper.LocalFS
    assert ver.is_transpiler is version.is_transpiler and h.HDFSClient is hdfs.HDFSClient
    assert uu.program_type_trans is U.program_type_trans


def test_version_says_the_transpiler_fleet():
    from placegroup.incubate.fleet.base.fleet_base import Mode

    assert version.is_transpiler() is True
    assert version.Mode is Mode and version.BUILD_MODE == Mode.TRANSPILER


# -- role makers ------------------------------------------------------------------------------
def test_mock_barrier_is_a_group_of_one():
    b = MockBarrier()
    assert b.barrier() is None and b.barrier_all() is None
    assert b.all_reduce([1, 2]) == [1, 2] and b.all_gather(3) == [3]


def test_the_base_role_maker_has_no_collectives():
    r = role_maker.UserDefinedRoleMaker(current_id=0, role=Role.WORKER, worker_num=1, server_endpoints=["a:1"])
    with pytest.warns(UserWarning, match="UserDefinedRoleMaker does not have all gather"):
        assert r.all_gather(1) is None


def test_user_defined_collective_role_maker():
    r = UserDefinedCollectiveRoleMaker(1, TRAINERS.split(","))
    r.generate_role()
    assert (r.is_worker(), r.is_server(), r.is_first_worker(), r.worker_index(), r.worker_num()) == \
        (True, False, False, 1, 2)
    assert r.get_trainer_endpoints() == TRAINERS.split(",")
    with pytest.raises(TypeError, match="worker_endpoints must be as string list"):
        UserDefinedCollectiveRoleMaker(0, "a:1")
    with pytest.raises(ValueError, match="can't have duplicate"):
        UserDefinedCollectiveRoleMaker(0, ["a:1", "a:1"])
    with pytest.raises(ValueError, match="less than or equal to len\\(worker_endpoints\\) - 1 = 1"):
        UserDefinedCollectiveRoleMaker(2, ["a:1", "b:1"])
    with pytest.raises(TypeError, match="current_id must be as int"):
        UserDefinedCollectiveRoleMaker("0", ["a:1"])


def test_mpi_role_makers_need_mpi4py(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)  # import mpi4py fails, as where it is not installed
    for cls in (MPIRoleMaker, MPISymetricRoleMaker):
        with pytest.raises(ModuleNotFoundError, match="need mpi4py, which is not installed") as e:
            cls()
        assert e.value.name == "mpi4py"


class _FakeComm:
    """A stand-in for mpi4py's COMM_WORLD of ``size`` ranks, seen from ``rank``."""

    def __init__(self, rank, size, log):
        self.rank, self.size, self.log = rank, size, log

    def Get_rank(self):  # noqa: N802 (mpi4py's names)
        return self.rank

    def Get_size(self):  # noqa: N802
        return self.size

    def allgather(self, obj):
        return [f"10.0.0.{i}" for i in range(self.size)]

    def barrier(self):
        self.log.append("barrier")

    def Split(self, color):  # noqa: N802
        self.log.append(("split", color))
        return self

    def Allreduce(self, src, dst, op):  # noqa: N802
        self.log.append(("allreduce", op))
        dst[:] = np.asarray(src) * 2  # as if two workers gave the same


def test_mpi_symetric_role_maker_over_a_stand_in_mpi(monkeypatch):
    log = []
    mpi = types.SimpleNamespace(COMM_WORLD=_FakeComm(3, 4, log), SUM="SUM", MAX="MAX", MIN="MIN",
                                Finalize=lambda: None)
    monkeypatch.setitem(sys.modules, "mpi4py", types.SimpleNamespace(MPI=mpi))
    r = MPISymetricRoleMaker()
    r.generate_role()
    assert (r.is_worker(), r.is_server(), r.worker_index(), r.worker_num(), r.is_first_worker()) == \
        (True, False, 1, 2, False)
    assert ("split", 1) in log
    port = 63916  # Fluid 1.8.5's port for 2 servers (random.seed(4 / 2); randint(60001, 64000) under its python)
    assert r.get_pserver_endpoints() == [f"10.0.0.0:{port}", f"10.0.0.2:{port}"]
    assert r.get_trainer_endpoints() == ["10.0.0.1", "10.0.0.3"]
    out = np.zeros(3)
    r.all_reduce_worker(np.array([1.0, 2.0, 3.0]), out, "max")
    np.testing.assert_array_equal(out, [2.0, 4.0, 6.0])
    assert log[-1] == ("allreduce", "MAX")
    with pytest.raises(ValueError, match="unknown mode: avg"):
        r.all_reduce_worker(np.zeros(1), np.zeros(1), "avg")


def test_general_role_maker_says_which_variables_are_unset(launch_env):
    with pytest.raises(ConfigError, match="TRAINING_ROLE, PADDLE_TRAINER_ENDPOINTS are unset"):
        GeneralRoleMaker().generate_role()
    launch_env(TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ENDPOINTS=TRAINERS, PADDLE_TRAINER_ID="2")
    with pytest.raises(ConfigError, match="PADDLE_TRAINER_ID=2 is not in 0..1"):
        GeneralRoleMaker().generate_role()
    with pytest.raises(ConfigError, match="expected 'ip:port'"):
        GeneralRoleMaker(http_ip_port="127.0.0.1")


def test_general_role_maker_without_a_store_reads_the_role_and_refuses_collectives(launch_env):
    launch_env(TRAINING_ROLE="PSERVER", PADDLE_TRAINER_ENDPOINTS=TRAINERS,
               PADDLE_PSERVERS_IP_PORT_LIST="127.0.0.1:7482,127.0.0.1:7483", PADDLE_PSERVER_ID="1")
    r = GeneralRoleMaker()
    r.generate_role()
    assert (r.is_server(), r.server_index(), r.worker_num(), r.server_num(), r.get_local_endpoint()) == \
        (True, 1, 2, 2, "127.0.0.1:7483")
    assert (r._get_rank(), r._get_size()) == (3, 4)  # trainers first, then pservers
    with pytest.raises(ConfigError, match="no store to barrier or reduce through"):
        r.barrier_all()


_GENERAL = textwrap.dedent("""
    import json, sys
    import numpy as np
    from placegroup.incubate.fleet.base.role_maker import GeneralRoleMaker
    kwargs = json.loads(sys.argv[1])
    r = GeneralRoleMaker(init_timeout_seconds=60, run_timeout_seconds=60, **kwargs)
    r.generate_role()
    out = {"worker": r.is_worker(), "index": r.worker_index() if r.is_worker() else r.server_index()}
    r.barrier_worker()
    total, top = [0.0, 0.0], np.zeros(2)
    mine = [out["index"] + 1.0, 10.0 * (out["index"] + 1)]
    r.all_reduce_worker(mine, total)
    r.all_reduce_worker(np.array(mine), top, "max")
    out.update(total=total, top=top.tolist(), gathered=r.all_gather(out["index"] * 100 + r.is_worker()),
               workers=r._worker_gather("w%d" % out["index"]))
    r.barrier_all()
    r._finalize()
    print(json.dumps(out))
""")


@pytest.mark.parametrize("store", ["path", "http"])
def test_general_role_maker_reduces_between_real_processes(tmp_path, store):
    """2 trainers and 1 pserver, each a process, meet in a shared directory or in trainer 0's
    HTTP store: sums and maxima over the trainers, the gather over all three in rank order."""
    kwargs = {"path": str(tmp_path / "store")} if store == "path" else {"http_ip_port": "127.0.0.1:7489"}
    common = dict(PADDLE_TRAINER_ENDPOINTS=TRAINERS, PADDLE_PSERVERS_IP_PORT_LIST="127.0.0.1:7482",
                  SYS_JOB_ID="job1")
    envs = [dict(TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID=str(i), **common) for i in (0, 1)]
    envs.append(dict(TRAINING_ROLE="PSERVER", POD_IP="127.0.0.1", PADDLE_PORT="7482", **common))
    procs = [subprocess.Popen([sys.executable, "-c", _GENERAL, json.dumps(kwargs)], env=_env(**e), cwd=str(tmp_path),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for e in envs]
    outs = [json.loads(o.strip().splitlines()[-1]) for o in _run_all(procs, 60 * TIME_FACTOR)]
    for i in (0, 1):
        assert outs[i]["worker"] and outs[i]["index"] == i
        assert outs[i]["total"] == [3.0, 30.0] and outs[i]["top"] == [2.0, 20.0]
        assert outs[i]["workers"] == ["w0", "w1"]
    assert not outs[2]["worker"] and outs[2]["total"] == [0.0, 0.0] and outs[2]["workers"] is None
    assert all(o["gathered"] == [1, 101, 0] for o in outs)
    if store == "path":
        assert (tmp_path / "store" / "job1" / "all").is_dir()  # SYS_JOB_ID prefixes the keys


def test_store_group_names_the_ranks_that_never_came(tmp_path):
    store = rendezvous.DirStore(str(tmp_path))
    g = rendezvous.StoreGroup(store, "g", rank=0, size=3, init_timeout=0.3)
    with pytest.raises(CommTimeout, match=r"rendezvous of group 'g' \(rank 0 of 3, round 0\): no word from "
                                          r"ranks \[1, 2\] in 0.3s"):
        g.init()


def test_store_group_keeps_two_rounds_and_reduces_in_threads(tmp_path):
    store = rendezvous.DirStore(str(tmp_path))
    results = {}

    def member(rank):
        g = rendezvous.StoreGroup(store, "t", rank, 3, 30, 30).init()
        for _ in range(3):
            g.barrier()
        results[rank] = (g.all_reduce([rank, -rank], "min"), g.all_gather([rank, "x"]))

    threads = [threading.Thread(target=member, args=(r,)) for r in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert all(results[r] == ([0, -2], [[0, "x"], [1, "x"], [2, "x"]]) for r in range(3))
    # rounds 0-5 ran (init, 3 barriers, the reduce's gather, the gather); only the last is kept
    assert os.listdir(tmp_path / "t") == ["5"] and sorted(os.listdir(tmp_path / "t" / "5")) == ["0", "1", "2"]


# -- utils.utils: programs as files ------------------------------------------------------------
def _model():
    x = fluid.layers.data("x", shape=[4], dtype="float32")
    ids = fluid.layers.data("ids", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(ids, size=[10, 3])
    pred = fluid.layers.fc(fluid.layers.concat([x, emb], axis=1), 2)
    loss = fluid.layers.mean(pred)
    fluid.optimizer.SGD(0.1).minimize(loss)
    return x, ids, pred, loss


def test_programs_go_to_text_and_back(tmp_path, fresh_programs):
    from placegroup.ir.framework import program_to_dict

    main, _ = fresh_programs
    _model()
    U.save_program(main, str(tmp_path / "m.txt"), is_text=True)
    text = (tmp_path / "m.txt").read_text()
    assert json.loads(text)["blocks"][0]["ops"][0]["type"] == "lookup_table"  # readable
    assert U.program_type_trans(str(tmp_path), "m.txt", True) == "m.txt.bin"
    back = U.load_program(str(tmp_path / "m.txt.bin"))
    assert program_to_dict(back) == program_to_dict(main)
    assert U.program_type_trans(str(tmp_path), "m.txt.bin", False) == "m.txt.bin.pbtxt"
    assert (tmp_path / "m.txt.bin.pbtxt").read_text() == text
    assert program_to_dict(U.load_program_text(str(tmp_path / "m.txt"))) == program_to_dict(main)
    U.save_program(main, str(tmp_path / "__model__"))
    assert U.load_program_binary(str(tmp_path / "__model__")).to_bytes() == main.to_bytes()


def test_a_damaged_text_program_is_refused_naming_the_file(tmp_path, fresh_programs):
    main, _ = fresh_programs
    _model()
    bad = tmp_path / "bad.txt"
    bad.write_text("{not json")
    with pytest.raises(SerializationError, match="bad.txt: not a program in text form \\(JSON\\)"):
        U.load_program(str(bad), is_text=True)
    d = json.loads(U._program_text(main))
    d["blocks"][0]["ops"][0]["role"] = 7
    bad.write_text(json.dumps(d))
    with pytest.raises(SerializationError, match=r"field 'blocks.0.ops.0.role'"):
        U.load_program_text(str(bad))
    with pytest.raises(SerializationError, match="not a prog.bin"):
        U.load_program_binary(str(bad))


def test_pruned_program_checks(fresh_programs, caplog):
    main, _ = fresh_programs
    x, ids, pred, loss = _model()
    pruned = main.clone(for_test=True)
    assert U.check_pruned_program_vars(main, pruned) is True
    pruned.global_block().var("fc_0.w_0").shape = (8, 2)
    with caplog.at_level(logging.ERROR):
        assert U.check_pruned_program_vars(main, pruned) is False
    assert "variable: fc_0.w_0 not match" in caplog.text
    with caplog.at_level(logging.WARNING):
        U.check_not_expected_ops(main)
    assert caplog.text.count("find op type 'lookup_table' in program") == 1


def test_parse_program_writes_its_three_lists(tmp_path, fresh_programs):
    main, _ = fresh_programs
    _model()
    U.parse_program(main, str(tmp_path))
    persist = (tmp_path / "vars_persistable.log").read_text().splitlines()
    assert persist[0] == "persistable vars:"
    assert "'name': 'fc_0.w_0', 'shape': '(7, 2)', 'lod_level': 0, 'dtype': 'float32'" in "\n".join(persist)
    ops = (tmp_path / "ops.log").read_text().splitlines()
    assert ops[0] == "ops:" and ops[1].startswith("{'type': 'lookup_table', 'input_arg_names': ")
    assert (tmp_path / "vars_all.log").read_text().startswith("all vars:\n")


def test_graphviz_writes_the_dot_source(tmp_path, fresh_programs):
    main, _ = fresh_programs
    _model()
    try:
        U.graphviz(main.global_block(), str(tmp_path), "g")
        assert (tmp_path / "g.pdf").exists()
    except FileNotFoundError as e:  # no graphviz here: said, after the .dot is written
        assert "`dot` program" in str(e)
    assert (tmp_path / "g.dot").read_text().startswith("digraph program {")


def test_save_var_and_load_var_round_trip(tmp_path):
    value = np.arange(12, dtype="float32").reshape(4, 3)
    U.save_var(value, "v", [3], "float32", str(tmp_path / "v"))
    got, = U.load_var("v", [3], "float32", str(tmp_path / "v"))
    np.testing.assert_array_equal(got, value)
    from placegroup.util.var_format import read as _read  # a var file, one record named after the file

    assert list(_read(str(tmp_path / "v"))) == ["v"]


def test_save_and_load_ops_attrs(tmp_path, fresh_programs):
    main, _ = fresh_programs
    x = fluid.layers.data("x", shape=[3], dtype="float64")
    block = main.global_block()
    U.append_save_op(block, x, str(tmp_path / "x"))
    block.append_op(type="save", inputs={"X": [x]}, outputs={},
                    attrs={"file_path": str(tmp_path / "x"), "overwrite": False})
    exe = fluid.Executor(fluid.CPUPlace())
    with pytest.raises(Exception, match="x exists!, cannot save to it when overwrite=false"):
        exe.run(main, feed={"x": np.ones((2, 3))})
    part = fluid.Program()
    with fluid.program_guard(part):
        y = part.global_block().create_var(name="y", shape=(2, 2), dtype="float16")
        part.global_block().append_op(type="load", inputs={}, outputs={"Out": [y]},
                                      attrs={"file_path": str(tmp_path / "x"), "seek": 1, "shape": [2, 2],
                                             "load_as_fp16": True})
    got, = exe.run(part, fetch_list=[y])
    assert got.dtype == np.float16 and got.shape == (2, 2) and got.ravel().tolist() == [1.0] * 4


def test_reader_and_feed_gen_cut_lines_into_batches(tmp_path):
    f = tmp_path / "d.txt"
    f.write_text("1 2 3 4 5 6 7\n8 9 10 11\n")
    # the expected values are what Fluid 1.8.5's reader and feed_gen give for this file
    batches = U.reader(2, str(f), [1, 2])  # 4 numbers a batch; a line's tail is dropped
    assert [b.tolist() for b in batches] == [[[[1, 2]], [[3, 4]]], [[[8, 9]], [[10, 11]]]]
    assert U.reader(1, str(f), 3)[1].tolist() == [[4, 5, 6]]
    assert [len(b) for b in U.feed_gen(1, [3, 2], [str(f), str(f)])] == [3, 5]


class _Config(types.SimpleNamespace):
    pass


def test_check_saved_vars_try_dump_runs_the_dumped_model(tmp_path, fresh_programs, caplog):
    main, startup = fresh_programs
    x = fluid.layers.data("x", shape=[4], dtype="float32")
    pred = fluid.layers.fc(x, 2)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    fluid.io.save_inference_model(str(tmp_path), ["x"], [pred], exe, main, params_filename="params")
    w = np.array(fluid.global_scope().find_var("fc_0.w_0").get_tensor())
    b = np.array(fluid.global_scope().find_var("fc_0.b_0").get_tensor())
    U.program_type_trans(str(tmp_path), "__model__", False)  # a text dump, as Fluid's tools make
    data = tmp_path / "x.txt"
    data.write_text(" ".join(str(v) for v in range(8)) + "\n")
    feed = _Config(feeded_vars_names=["x"], feeded_vars_dims=[[4]], feeded_vars_types=["float32"],
                   feeded_vars_filelist=[str(data)])
    fetch = _Config(fetch_vars_names=None)
    out, = U.check_saved_vars_try_dump(str(tmp_path), "__model__.pbtxt", True, feed, fetch, batch_size=2,
                                       save_filename="params")
    np.testing.assert_allclose(out, np.arange(8, dtype="float32").reshape(2, 4) @ w + b, rtol=1e-6)
    feed.feeded_vars_filelist, feed.feeded_vars_dims = [], [4]
    out, = U.check_saved_vars_try_dump(str(tmp_path), "__model__", False, feed, fetch, batch_size=3,
                                       save_filename="params")
    assert out.shape == (3, 2)
    feed.feeded_vars_dims = [[5]]
    with pytest.raises(RuntimeError, match=r"feed variable 'x' shape not match. infer program  shape: \(4,\)"):
        U.check_saved_vars_try_dump(str(tmp_path), "__model__", False, feed, fetch, save_filename="params")


# -- HDFS through a stand-in hadoop --------------------------------------------------------------
FAKE_HADOOP = textwrap.dedent('''\
    #!{python} -S
    """A stand-in `hadoop fs` acting on $FAKE_HDFS_ROOT; logs each call to $FAKE_HDFS_ROOT.calls."""
    import os, shutil, sys, time
    root = os.environ["FAKE_HDFS_ROOT"]
    with open(root + ".calls", "a") as f:
        f.write(" ".join(sys.argv[1:]) + "\\n")
    args = [a for a in sys.argv[2:] if not a.startswith("-D")]
    cmd, rest = args[0], args[1:]
    def loc(p):
        if "://" in p:
            p = "/" + p.split("://", 1)[1].split("/", 1)[1]
        return os.path.join(root, p.lstrip("/"))
    def line(p):
        st = os.stat(p)
        kind = "drwxr-xr-x" if os.path.isdir(p) else "-rw-r--r--"
        hp = "/" + os.path.relpath(p, root)
        return f"{{kind}}   3 user group {{st.st_size}} 2020-01-01 10:00 {{hp}}"
    def into(dst, src):
        return os.path.join(dst, os.path.basename(src.rstrip("/"))) if os.path.isdir(dst) else dst
    if cmd == "-test":
        p = loc(rest[1])
        sys.exit(0 if (os.path.isdir(p) if rest[0] == "-d" else os.path.exists(p)) else 1)
    if cmd == "-cat":
        p = loc(rest[0])
        if not os.path.isfile(p):
            sys.exit("cat: no such file")
        sys.stdout.write(open(p).read())
    elif cmd in ("-ls", "-lsr"):
        p = loc(rest[0])
        if not os.path.exists(p):
            sys.exit("ls: no such path")
        if cmd == "-ls":
            items = [os.path.join(p, n) for n in sorted(os.listdir(p))]
        else:
            items = [os.path.join(d, n) for d, ds, fs in sorted(os.walk(p)) for n in sorted(ds + fs)]
        print(f"Found {{len(items)}} items")
        for i in items:
            print(line(i))
    elif cmd == "-mkdir":
        os.makedirs(loc(rest[-1]), exist_ok=True)
    elif cmd == "-mv":
        os.rename(loc(rest[0]), into(loc(rest[1]), rest[0]))
    elif cmd in ("-rm", "-rmr"):
        p = loc(rest[-1])
        shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    elif cmd == "-put":
        src, dst = rest[-2], into(loc(rest[-1]), rest[-2])
        if os.path.exists(dst) and "-f" not in rest:
            sys.exit("put: File exists")
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, dst)
    elif cmd == "-get":
        src, dst = loc(rest[0]), into(rest[1], rest[0])
        (shutil.copytree if os.path.isdir(src) else shutil.copy)(src, dst)
    else:
        sys.exit("unknown command " + cmd)
''')


@pytest.fixture
def hadoop(tmp_path, monkeypatch):
    """A Hadoop home whose bin/hadoop is the stand-in over tmp_path/hdfs (also on the PATH)."""
    home = tmp_path / "hadoop_home"
    (home / "bin").mkdir(parents=True)
    exe = home / "bin" / "hadoop"
    exe.write_text(FAKE_HADOOP.format(python=sys.executable))
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    root = tmp_path / "hdfs"
    root.mkdir()
    monkeypatch.setenv("FAKE_HDFS_ROOT", str(root))
    monkeypatch.setenv("PATH", str(home / "bin") + os.pathsep + os.environ["PATH"])
    monkeypatch.setattr(hdfs.HDFSClient, "retry_sleep_seconds", 0.0)
    return types.SimpleNamespace(home=str(home), root=root, calls=tmp_path / "hdfs.calls")


def test_hdfs_client_runs_hadoop_fs(tmp_path, hadoop):
    c = hdfs.HDFSClient(hadoop.home, {"fs.default.name": "hdfs://nn:54310", "hadoop.job.ugi": "me,pw"})
    assert c.makedirs("/user/me/models") is True and c.makedirs("/user/me/models") is None
    assert c.is_exist("/user/me") and c.is_dir("/user/me/models") and not c.is_file("/user/me/models")
    local = tmp_path / "model"
    (local / "sub").mkdir(parents=True)
    (local / "a.txt").write_text(" hello \n")
    (local / "sub" / "b.txt").write_text("b")
    c.upload("/user/me/models", str(local), multi_processes=2)
    assert c.ls("/user/me/models") == ["/user/me/models/a.txt", "/user/me/models/sub"]
    assert c.lsr("/user/me/models", excludes=["/user/me/models/a.txt"]) == ["/user/me/models/sub/b.txt"]
    assert c.is_file("/user/me/models/a.txt") and c.cat("/user/me/models/a.txt") == "hello"
    assert c.cat("/user/me/models/sub") == "" and c.ls("/nothing") == []
    assert c.rename("/user/me/models/a.txt", "/user/me/a2.txt") and c.is_file("/user/me/a2.txt")
    got = c.download("/user/me/models", str(tmp_path / "back"))
    assert sorted(os.path.relpath(p, tmp_path / "back") for p in got) == ["sub/b.txt"]
    assert c.upload_dir("/user/me/dirs", str(local)) is True
    assert c.is_file("/user/me/dirs/model/sub/b.txt")
    assert c.delete("/user/me/dirs") is True and not c.is_exist("/user/me/dirs")
    assert c.delete("/user/me/never") is True
    calls = hadoop.calls.read_text().splitlines()
    assert calls[0] == "fs -Dfs.default.name=hdfs://nn:54310 -Dhadoop.job.ugi=me,pw -test -e /user/me/models"
    assert hdfs.HDFSClient.split_files(list(range(5)), 0, 2) == [0, 1, 2]
    assert hdfs.HDFSClient.split_files(list(range(5)), 1, 2) == [3, 4]


def test_hdfs_client_retries_a_failing_command(hadoop):
    c = hdfs.HDFSClient(hadoop.home, {})
    code, _, err = c._run(["-cat", "/missing"], retry_times=2)
    assert code != 0 and "no such file" in err
    assert hadoop.calls.read_text().splitlines() == ["fs -cat /missing"] * 3
    code, _, err = hdfs.HDFSClient("/no/hadoop/here", {})._run(["-ls", "/"], retry_times=0)
    assert code == 127 and "No such file" in err


def test_hdfs_get_logger_writes_hdfs_log(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = hdfs.get_logger("test_fluid_tree_fleet.hdfs", logging.INFO, fmt="%(levelname)s: %(message)s")
    log.info("hello")
    for h in log.handlers:
        h.flush()
    assert (tmp_path / "hdfs.log").read_text() == "INFO: hello\n"
    for h in list(log.handlers):
        log.removeHandler(h)
        h.close()


def test_store_group_over_hdfs(hadoop, monkeypatch):
    """GeneralRoleMaker(path="hdfs:...") meets through `hadoop fs` (HADOOP_HOME's)."""
    monkeypatch.setenv("HADOOP_HOME", hadoop.home)
    store = GeneralRoleMaker(path="hdfs://nn:9000/job/", hdfs_name="hdfs://nn:9000", hdfs_ugi="me,pw")._store(False)
    assert isinstance(store, rendezvous.HadoopStore) and store.root == "hdfs://nn:9000/job"
    store.poll = 0.02
    got = {}

    def member(rank):
        got[rank] = rendezvous.StoreGroup(store, "all", rank, 2, 30, 30).init().all_gather(rank * 10)

    threads = [threading.Thread(target=member, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert got == {0: [0, 10], 1: [0, 10]}
    assert sorted(os.listdir(hadoop.root / "job" / "all" / "1")) == ["0", "1"]
    assert "-Dhadoop.job.ugi=me,pw -put -f" in hadoop.calls.read_text()


def test_bdfs_and_local_fs(tmp_path, hadoop):
    fs = fs_wrapper.BDFS("hdfs://nn:9000", "me,pw", time_out=300, sleep_inter=10)
    fs.mkdir("/ck/a")
    (tmp_path / "f").write_text("x")
    fs.upload(str(tmp_path / "f"), "/ck/a/f")
    assert fs.stat("/ck/a/f") and fs.is_dir("/ck/a") and fs.ls_dir("/ck/a") == ([], ["f"])
    assert fs.list_dirs("/ck") == ["a"] and fs.need_upload_download()
    fs.mv("/ck/a", "/ck/b")
    (tmp_path / "dl").mkdir()
    fs.download("/ck/b", str(tmp_path / "dl"))
    assert (tmp_path / "dl" / "b" / "f").read_text() == "x"
    fs.delete("/ck/b")
    assert not fs.stat("/ck/b")
    with pytest.raises(CommTimeout, match="kept failing for 300 ms"):
        fs.mv("/nothing", "/ck/c")
    local = fs_wrapper.LocalFS()
    local.mkdir(str(tmp_path / "l" / "m"))
    assert local.list_dirs(str(tmp_path / "l")) == ["m"] and not local.need_upload_download()
    with pytest.raises(FileExistsError):
        local.mkdir(str(tmp_path / "f"))


def test_check_all_trainers_ready_waits_for_every_trainer(tmp_path, hadoop, monkeypatch):
    from placegroup.incubate.fleet.parameter_server.distribute_transpiler import fleet
    from placegroup.incubate.fleet.utils import fleet_barrier_util as fb

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HADOOP_HOME", hadoop.home)
    monkeypatch.setattr(fb, "POLL_SECONDS", 0.05)
    fleet.init(role_maker.UserDefinedRoleMaker(current_id=1, role=Role.WORKER, worker_num=2,
                                               server_endpoints=["127.0.0.1:7484"]))
    done = threading.Event()
    t = threading.Thread(target=lambda: (fb.check_all_trainers_ready("/ready", 3), done.set()), daemon=True)
    t.start()
    mine = hadoop.root / "ready" / "ready.3.1.done"
    for _ in range(200):  # each hadoop call starts a python
        if mine.exists():
            break
        t.join(0.05)
    t.join(0.5)
    assert mine.exists() and (tmp_path / "ready.3.1.done").exists()
    assert not done.is_set()  # trainer 0 has not come
    (hadoop.root / "ready" / "ready.3.0.done").write_text("")
    t.join(10)
    assert done.is_set()
    monkeypatch.delenv("HADOOP_HOME")
    with pytest.raises(ConfigError, match="needs HADOOP_HOME"):
        fb.check_all_trainers_ready("/ready", 4)


# -- collective fleet -------------------------------------------------------------------------
def test_collective_strategy_fields():
    s = DistributedStrategy()  # defaults: Fluid 1.8.5's
    assert (s.mode, s.collective_mode, s.use_local_sgd, s.forward_recompute, s.recompute_checkpoints,
            s.amp_loss_scaling, s.nccl_comm_num) == ("nccl2", None, False, False, [], 32768, 1)
    assert isinstance(s.exec_strategy, fluid.ExecutionStrategy) and s.exec_strategy is not \
        DistributedStrategy().exec_strategy
    assert isinstance(s, fluid.BuildStrategy)
    s.mode = "collective"
    s.my_own_note = 1  # a Python subclass in Fluid: any attribute is kept
    assert s.my_own_note == 1
    for name, value in (("use_local_sgd", True), ("collective_mode", "local_sgd"), ("use_amp", True),
                        ("use_dist_fc", True)):
        with pytest.raises(ConfigError, match=f"DistributedStrategy.{name} = "):
            setattr(s, name, value)
    with pytest.raises(ValueError, match="mode must be one of 'nccl2', 'collective'"):
        s.mode = "pserver"
    assert LambConfig() is not None and DistFCConfig() is not None
    assert TrainStatus(3).next() == 4 and TrainStatus(3) == TrainStatus(3) and TrainStatus(3) != TrainStatus()


def test_collective_optimizer_checks():
    sgd = fluid.optimizer.SGD(0.1)
    with pytest.raises(TypeError, match="strategy must be DistributedStrategy"):
        CollectiveOpBasedOptimizer(sgd, None)
    with pytest.raises(TypeError, match="strategy must be a collective DistributedStrategy"):
        CollectiveOptimizer(sgd, fluid.BuildStrategy())
    s = DistributedStrategy()
    s.recompute_checkpoints = "fc_0"
    with pytest.raises(ValueError, match="recompute_checkpoints should be a List"):
        CollectiveOptimizer(sgd, s)
    s = DistributedStrategy()
    s.forward_recompute = True
    x = fluid.layers.data("x", shape=[2])
    loss = fluid.layers.mean(fluid.layers.fc(x, 1))
    with pytest.raises(ValueError, match="please set strategy.recompute_checkpoints"):
        CollectiveOptimizer(sgd, s).minimize(loss)


def test_collective_fleet_of_one_trains_and_checkpoints(tmp_path, fresh_programs, caplog):
    """A one-trainer collective job (no allreduce to do) runs as one process does; its checkpoints
    are numbered, cleaned and loaded back with their train status."""
    main, startup = fresh_programs
    f = Collective()
    import placegroup.incubate.fleet.collective as col

    old, col.fleet = col.fleet, f  # the optimizer reports to the module's fleet, as in Fluid
    try:
        f.init(UserDefinedCollectiveRoleMaker(0, ["127.0.0.1:7485"]))
        x = fluid.layers.data("x", shape=[3])
        loss = fluid.layers.mean(fluid.layers.fc(x, 1))
        s = DistributedStrategy()
        s.mode = "collective"
        opt = f.distributed_optimizer(fluid.optimizer.SGD(0.1), s)
        opt.minimize(loss)
        assert f.main_program is main and f.startup_program is startup
        exe = fluid.Executor(fluid.CPUPlace())
        exe.run(f.startup_program)
        feed = {"x": np.ones((2, 3), "float32")}
        exe.run(f.main_program, feed=feed)
        scope = fluid.global_scope()
        w1 = np.array(scope.find_var("fc_0.w_0").get_tensor())
        f.save_check_point(exe, str(tmp_path), TrainStatus(0))
        exe.run(f.main_program, feed=feed)
        f.save_check_point(exe, str(tmp_path), TrainStatus(1))
        f.save_check_point(exe, str(tmp_path), TrainStatus(2), remain_all_checkpoint=False)
        assert sorted(os.listdir(tmp_path)) == ["__paddle_fleet_checkpoint__.2"]
        w3 = np.array(scope.find_var("fc_0.w_0").get_tensor())
        scope.find_var("fc_0.w_0").get_tensor().set(np.zeros_like(w1), fluid.CPUPlace())
        assert f.load_check_point(exe, str(tmp_path), trainer_id=0) == TrainStatus(2)
        np.testing.assert_array_equal(np.array(scope.find_var("fc_0.w_0").get_tensor()), w3)
        assert f.load_check_point(exe, str(tmp_path / "none"), 0) is None
        with pytest.raises(FileNotFoundError, match="no checkpoint"):
            f.load_check_point(exe, str(tmp_path / "none"), 0, ignore_empty=False)
        saved = f.save_persistables(exe, str(tmp_path / "p"))
        assert "fc_0.w_0" in [getattr(v, "name", v) for v in saved] or os.listdir(tmp_path / "p")
        with caplog.at_level(logging.WARNING):
            f.init_worker()
        assert "You should not call 'init_worker' method for collective mode." in caplog.text
        with pytest.raises(TypeError, match="executor must be as Executor type"):
            f.save_persistables(None, str(tmp_path))
    finally:
        col.fleet = old


_COLLECTIVE = textwrap.dedent("""
    import json, sys
    import numpy as np
    import placegroup as fluid
    from placegroup.incubate.fleet.base import role_maker
    from placegroup.incubate.fleet.collective import fleet, DistributedStrategy

    mode, out = sys.argv[1], sys.argv[2]
    x = fluid.layers.data("x", shape=[4], dtype="float32")
    y = fluid.layers.data("y", shape=[1], dtype="float32")
    pred = fluid.layers.fc(fluid.layers.fc(x, 8, act="tanh"), 1)
    loss = fluid.layers.mean(fluid.layers.square_error_cost(pred, y))
    opt = fluid.optimizer.Adam(0.05)
    rng = np.random.RandomState(0)
    xs, ys = rng.rand(5, 8, 4).astype("float32"), rng.rand(5, 8, 1).astype("float32")
    exe = fluid.Executor(fluid.CPUPlace())
    if mode == "local":
        opt.minimize(loss)
        prog, n, tid = fluid.default_main_program(), 1, 0
        exe.run(fluid.default_startup_program())
    else:
        fleet.init(role_maker.PaddleCloudRoleMaker(is_collective=True))
        strategy = DistributedStrategy()
        strategy.mode = mode
        fleet.distributed_optimizer(opt, strategy).minimize(loss)
        prog, n, tid = fleet.main_program, fleet.worker_num(), fleet.worker_index()
        assert isinstance(prog, fluid.CompiledProgram) == (mode == "nccl2")
        exe.run(fleet.startup_program)
    losses = []
    for xb, yb in zip(xs, ys):  # trainer t gets the t-th half of every batch
        lo, hi = tid * 8 // n, (tid + 1) * 8 // n
        l, = exe.run(prog, feed={"x": xb[lo:hi], "y": yb[lo:hi]}, fetch_list=[loss])
        losses.append(float(np.asarray(l).reshape(-1)[0]))
    scope = fluid.global_scope()
    params = {p: np.array(scope.find_var(p).get_tensor()).tolist() for p in ("fc_0.w_0", "fc_1.w_0", "fc_1.b_0")}
    json.dump({"losses": losses, "params": params}, open(out, "w"))
""")


@pytest.mark.parametrize("mode", ["nccl2", "collective"])
def test_two_trainers_allreduce_as_one_process_on_the_whole_batch(tmp_path, mode):
    script = tmp_path / "collective_job.py"
    script.write_text(_COLLECTIVE)

    def start(args, **env):
        return subprocess.Popen([sys.executable, str(script), *args], env=_env(**env), cwd=str(tmp_path),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    procs = [start(["local", str(tmp_path / "local.json")])]
    procs += [start([mode, str(tmp_path / f"t{i}.json")], TRAINING_ROLE="TRAINER", PADDLE_TRAINER_ID=str(i),
                    PADDLE_TRAINER_ENDPOINTS=TRAINERS, PADDLE_CURRENT_ENDPOINT=TRAINERS.split(",")[i],
                    PLACEGROUP_PEER_TIMEOUT=str(30 * TIME_FACTOR))
              for i in (0, 1)]
    _run_all(procs, 120 * TIME_FACTOR)
    ref = json.loads((tmp_path / "local.json").read_text())
    runs = [json.loads((tmp_path / f"t{i}.json").read_text()) for i in (0, 1)]
    np.testing.assert_allclose(np.mean([r["losses"] for r in runs], axis=0), ref["losses"], rtol=1e-5, atol=1e-6)
    for r in runs:
        for name, value in ref["params"].items():
            np.testing.assert_allclose(r["params"][name], value, rtol=1e-5, atol=1e-6, err_msg=name)


def test_the_fleet_barriers_and_reduces_through_its_role_maker():
    """fleet.barrier_worker / all_reduce_worker go to the role maker, as in Fluid: a role maker
    with a channel (GeneralRoleMaker, the MPI ones) acts; the others only warn."""
    from placegroup.incubate.fleet.base import role_maker
    from placegroup.incubate.fleet.base.fleet_base import Fleet, Mode

    calls = []

    class Recording(role_maker.UserDefinedRoleMaker):
        def barrier_worker(self):
            calls.append("barrier")

        def all_reduce_worker(self, input, output, mode="sum"):
            calls.append(("reduce", list(input)))
            output[:] = [2 * v for v in input]

    fleet = Fleet(Mode.TRANSPILER)
    fleet.init(Recording(current_id=0, role=role_maker.Role.WORKER, worker_num=2,
                         server_endpoints=["127.0.0.1:7486"]))
    out = [0.0, 0.0]
    fleet.barrier_worker()
    fleet.all_reduce_worker([1.0, 3.0], out)
    assert calls == ["barrier", ("reduce", [1.0, 3.0])] and out == [2.0, 6.0]
    fleet.init(role_maker.UserDefinedRoleMaker(current_id=0, role=role_maker.Role.WORKER, worker_num=2,
                                               server_endpoints=["127.0.0.1:7486"]))
    with pytest.warns(UserWarning, match="barrier worker"):
        fleet.barrier_worker()
