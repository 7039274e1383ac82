"""Inference models (placegroup/io/inference.py, Fluid's save/load_inference_model): pruned to
feed -> targets, loaded in a fresh scope or process to the same predictions, errors that name
what is wrong, and a transpiled trainer program saved as a one-process one."""
import os
import pathlib
import runpy
import subprocess
import sys

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError, SerializationError

ROOT = pathlib.Path(__file__).resolve().parents[1]
FETCH = ["save_infer_model/scale_0"]


def mlp(hidden=16, features=8):
    """x -> fc(relu) -> fc(3, softmax) -> cross_entropy(y) -> mean -> Adam, in the default
    programs; returns (prediction, avg_cost)."""
    x = fluid.layers.data(name="x", shape=[features], dtype="float32")
    y = fluid.layers.data(name="y", shape=[1], dtype="int64")
    h = fluid.layers.fc(input=x, size=hidden, act="relu")
    pred = fluid.layers.fc(input=h, size=3, act="softmax")
    avg = fluid.layers.mean(fluid.layers.cross_entropy(input=pred, label=y))
    fluid.optimizer.Adam(learning_rate=0.05).minimize(avg)
    return pred, avg


def feeds(features=8, n=6, seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, features)).astype("float32"),
            "y": rng.integers(0, 3, (n, 1)).astype("int64")}


@pytest.fixture
def trained(fresh_programs):
    """The MLP after 3 Adam steps in the global scope; (main, exe, pred, in-process predictions)."""
    main, startup = fresh_programs
    pred, avg = mlp()
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    for s in range(3):
        exe.run(main, feed=feeds(seed=s), fetch_list=[avg])
    test = main.clone(for_test=True)
    want, = exe.run(test, feed=feeds(seed=9), fetch_list=[pred])
    return main, exe, pred, want


def predict(exe, model_dir, **kw):
    with fluid.scope_guard(fluid.Scope()):
        program, feed_names, fetch_targets = fluid.io.load_inference_model(str(model_dir), exe, **kw)
        out, = exe.run(program, feed={"x": feeds(seed=9)["x"]}, fetch_list=fetch_targets)
    return program, feed_names, fetch_targets, out


@pytest.mark.parametrize("model_filename,params_filename", [
    (None, None), ("model.pgprog", None), (None, "params.pgvars"), ("m", "p")])
def test_save_then_load_in_a_fresh_scope_predicts_the_same(trained, tmp_path, model_filename, params_filename):
    main, exe, pred, want = trained
    got = fluid.io.save_inference_model(str(tmp_path), ["x"], [pred], exe, main, model_filename=model_filename,
                                        params_filename=params_filename)
    assert got == FETCH  # Fluid 1.8's names
    files = sorted(os.listdir(tmp_path))
    params = [params_filename] if params_filename else ["fc_0.b_0", "fc_0.w_0", "fc_1.b_0", "fc_1.w_0"]
    assert files == sorted([model_filename or "__model__"] + params)
    program, feed_names, fetch_targets, out = predict(exe, tmp_path, model_filename=model_filename,
                                                      params_filename=params_filename)
    assert feed_names == ["x"] and [v.name for v in fetch_targets] == FETCH
    assert all(v.block.program is program for v in fetch_targets)
    np.testing.assert_array_equal(out, want)


def test_the_saved_program_is_the_forward_subgraph_and_only_its_vars(trained, tmp_path):
    main, exe, pred, _ = trained
    before = str(main)
    fluid.io.save_inference_model(str(tmp_path), "x", pred, exe, main)  # one name, one Variable
    assert str(main) == before  # Fluid appends its scale ops to main; placegroup to a copy
    prog = fluid.io.load_program(str(tmp_path / "__model__"))
    assert {op.role for op in prog.global_block().ops} == {"forward"}
    assert [op.type for op in prog.global_block().ops] == [
        "mul", "elementwise_add", "relu", "mul", "elementwise_add", "softmax", "scale"]
    assert sorted(prog.global_block().vars) == sorted(
        ["x", "fc_0.w_0", "fc_0.b_0", "fc_0.tmp_0", "fc_0.tmp_1", "fc_0.tmp_2", "fc_1.w_0", "fc_1.b_0",
         "fc_1.tmp_0", "fc_1.tmp_1", "fc_1.tmp_2", FETCH[0]])  # no label, loss, grads, lr, moments
    assert prog.provenance == ["prune_for_inference"]
    assert prog.extra == {"feed_target_names": ["x"], "fetch_target_names": FETCH}
    assert "feed_target_names=['x'] fetch_target_names=['save_infer_model/scale_0']" in str(prog).splitlines()[0]


def test_a_loaded_model_saved_again_keeps_its_names(trained, tmp_path):
    main, exe, pred, want = trained
    fluid.io.save_inference_model(str(tmp_path / "a"), ["x"], [pred], exe, main)
    program, feed_names, fetch_targets = fluid.io.load_inference_model(str(tmp_path / "a"), exe)
    assert fluid.io.save_inference_model(str(tmp_path / "b"), feed_names, fetch_targets, exe, program) == FETCH
    np.testing.assert_array_equal(predict(exe, tmp_path / "b")[3], want)


def test_load_in_another_process(trained, tmp_path):
    main, exe, pred, want = trained
    fluid.io.save_inference_model(str(tmp_path), ["x"], [pred], exe, main, params_filename="params")
    np.save(tmp_path / "x.npy", feeds(seed=9)["x"], allow_pickle=False)
    code = ("import sys, numpy as np, placegroup as fluid\n"
            "d = sys.argv[1]\n"
            "exe = fluid.Executor(fluid.CPUPlace())\n"
            "prog, names, targets = fluid.io.load_inference_model(d, exe, params_filename='params')\n"
            "out, = exe.run(prog, feed={names[0]: np.load(d + '/x.npy')}, fetch_list=targets)\n"
            "np.save(d + '/out.npy', out, allow_pickle=False)\n")
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=True, timeout=60, cwd=ROOT)
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy", allow_pickle=False), want)


def test_program_only_and_not_for_deployment(trained, tmp_path):
    main, exe, pred, _ = trained
    with pytest.warns(UserWarning, match="program_only"):
        fluid.io.save_inference_model(str(tmp_path / "p"), ["x"], [pred], exe, main, program_only=True)
    assert os.listdir(tmp_path / "p") == ["__model__"]
    fluid.io.save_inference_model(str(tmp_path / "w"), ["x"], [pred], exe, main, export_for_deployment=False)
    whole = fluid.io.load_program(str(tmp_path / "w" / "__model__.main_program"))
    assert {"backward", "optimize"} <= {op.role for op in whole.global_block().ops}
    assert "fc_0.w_0_moment1_0" in os.listdir(tmp_path / "w")  # every persistable, as Fluid


# -- errors ---------------------------------------------------------------------------------
def test_save_errors_name_what_is_wrong(trained, tmp_path):
    main, exe, pred, _ = trained
    d = str(tmp_path)
    with pytest.raises(ProgramError, match=r"feeded_var_names: 'z' is not a var of the program .*\['x', 'y'\]"):
        fluid.io.save_inference_model(d, ["z"], [pred], exe, main)
    w = main.global_block().var("fc_0.w_0")
    with pytest.raises(ProgramError, match=r"target 'fc_0.w_0' does not depend on the feeds \['x'\]"):
        fluid.io.save_inference_model(d, ["x"], [w], exe, main)
    loss = main.global_block().var("mean_0.tmp_0")
    with pytest.raises(ProgramError, match=r"reads 'y', which is a data var not among the feeds \['x'\]"):
        fluid.io.save_inference_model(d, ["x"], [loss], exe, main)
    with pytest.raises(ValueError, match="should be a list of str"):
        fluid.io.save_inference_model(d, [pred], [pred], exe, main)
    with pytest.raises(ValueError, match="should be a list of Variable"):
        fluid.io.save_inference_model(d, ["x"], ["fc_1.tmp_2"], exe, main)
    with fluid.scope_guard(fluid.Scope()), \
            pytest.raises(ProgramError, match=r"holds no value for: run the startup program"):
        fluid.io.save_inference_model(d, ["x"], [pred], exe, main)
    assert os.listdir(d) == []  # nothing written by a refused save


@pytest.fixture
def saved(trained, tmp_path):
    main, exe, pred, _ = trained
    fluid.io.save_inference_model(str(tmp_path), ["x"], [pred], exe, main)
    return exe, tmp_path


def test_load_errors_name_the_file(saved):
    exe, d = saved
    with pytest.raises(FileNotFoundError, match="no directory named"):
        fluid.io.load_inference_model(str(d / "nowhere"), exe)
    with pytest.raises(FileNotFoundError, match=r"model.pg'.*\['__model__', 'fc_0.b_0'"):
        fluid.io.load_inference_model(str(d), exe, model_filename="model.pg")
    with pytest.raises(SerializationError, match=r"no file '.*params': nothing was saved there"):
        fluid.io.load_inference_model(str(d), exe, params_filename="params")
    os.remove(d / "fc_1.w_0")
    with pytest.raises(SerializationError, match=r"var 'fc_1.w_0': no file .*fc_1.w_0"):
        fluid.io.load_inference_model(str(d), exe)


@pytest.mark.parametrize("victim,message", [("__model__", "checksum mismatch"), ("fc_0.w_0", "checksum mismatch")])
def test_a_damaged_file_is_refused_naming_it(saved, victim, message):
    exe, d = saved
    data = bytearray((d / victim).read_bytes())
    data[-3] ^= 0xFF
    (d / victim).write_bytes(bytes(data))
    scope = fluid.Scope()
    with fluid.scope_guard(scope), pytest.raises(SerializationError, match=f"{victim}.*{message}"):
        fluid.io.load_inference_model(str(d), exe)
    assert scope.vars == {}  # nothing is loaded unless everything checks out


def test_a_program_that_is_not_an_inference_model(trained, tmp_path):
    main, exe, _, _ = trained
    fluid.io.save_program(main, str(tmp_path / "__model__"))
    with pytest.raises(SerializationError, match="not an inference model"):
        fluid.io.load_inference_model(str(tmp_path), exe)


def test_pserver_endpoints_is_named_as_unused(saved):
    exe, d = saved
    with fluid.scope_guard(fluid.Scope()), pytest.warns(UserWarning, match="pserver_endpoints"):
        fluid.io.load_inference_model(str(d), exe, pserver_endpoints=["127.0.0.1:6170"])


# -- a transpiled trainer program -------------------------------------------------------------
def transpile(main, startup):
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id=0, pservers="127.0.0.1:6170,127.0.0.1:6171", trainers=2, program=main,
                startup_program=startup)
    return t.get_trainer_program()


def test_a_transpiled_trainer_program_saves_as_a_one_process_model(fresh_programs, tmp_path):
    main, startup = fresh_programs
    pred, avg = mlp(hidden=160, features=130)  # fc_0.w_0 is sliced over both pservers
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    exe.run(main, feed=feeds(130), fetch_list=[avg])
    want, = exe.run(main.clone(for_test=True), feed=feeds(130, seed=9), fetch_list=[pred])
    trainer = transpile(main, startup)
    assert any(v.attrs.get("slice_of") for v in trainer.list_vars())
    fluid.io.save_inference_model(str(tmp_path), ["x"], [pred], exe, trainer)
    prog = fluid.io.load_program(str(tmp_path / "__model__"))
    assert prog.executor is None and prog.cluster is None
    assert all(v.place is None for v in prog.list_vars())
    assert all(op.place is None and not op.edges for op in prog.global_block().ops)
    assert prog.provenance[-1] == "prune_for_inference"
    with fluid.scope_guard(fluid.Scope()):
        program, names, targets = fluid.io.load_inference_model(str(tmp_path), exe)
        out, = exe.run(program, feed={"x": feeds(130, seed=9)["x"]}, fetch_list=targets)
    np.testing.assert_array_equal(out, want)


def test_a_distributed_table_without_its_parts_is_refused(fresh_programs, tmp_path):
    main, startup = fresh_programs
    ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
    emb = fluid.layers.embedding(input=ids, size=[100, 4], is_sparse=True, is_distributed=True)
    pred = fluid.layers.fc(input=emb, size=1)
    fluid.optimizer.SGD(learning_rate=0.1).minimize(fluid.layers.mean(pred))
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with pytest.raises(ProgramError, match=r"'embedding_0.w_0.shard0', part 0 of 'embedding_0.w_0'"):
        fluid.io.save_inference_model(str(tmp_path), ["ids"], [pred], exe, transpile(main, startup))


def test_a_model_parallel_program_is_refused(fresh_programs, tmp_path):
    main, startup = fresh_programs
    x = fluid.layers.data(name="x", shape=[8], dtype="float32")
    pred = fluid.layers.fc(input=x, size=40, model_parallel=True)
    fluid.optimizer.SGD(learning_rate=0.1).minimize(fluid.layers.mean(pred))
    t = fluid.DistributeTranspiler()
    t.transpile(trainer_id=0, pservers="", trainers="127.0.0.1:7170,127.0.0.1:7171", program=main,
                startup_program=startup)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    with pytest.raises(ProgramError, match=r"op #0 `c_allgather` .* is a collective over 2 trainers"):
        fluid.io.save_inference_model(str(tmp_path), ["x"], [pred], exe, t.get_trainer_program())


def test_save_and_load_params_are_parameters_only(trained, tmp_path):
    main, exe, _, _ = trained
    assert fluid.io.save_params(exe, str(tmp_path), main) == ["fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"]
    with fluid.scope_guard(fluid.Scope()):
        assert fluid.io.load_params(exe, str(tmp_path), main) == ["fc_0.w_0", "fc_0.b_0", "fc_1.w_0",
                                                                  "fc_1.b_0"]


def test_the_example_predicts_the_same_in_a_fresh_process(tmp_path):
    example = runpy.run_path(str(ROOT / "examples" / "inference.py"), run_name="inference_example")
    result = example["train_and_save"](str(tmp_path / "model"), passes=2, log=lambda *_: None)
    assert result["equal"] and result["fetch_names"] == FETCH and result["accuracy"] > 0.5
