"""Training across real processes equals the single-process run.

Each test starts a real local cluster with ``placegroup.tools.launch`` (pservers and trainers as
separate processes talking ZeroMQ on 127.0.0.1, roles from Fluid's launch environment), runs the
same script once single-process on the whole batch, and compares per-step losses (mean over
trainers) and final parameters. The executor's rules in every mode (optimizers, slicing,
async, bounded staleness, merge_steps, fetches, model parallelism) are tested in one process
over the loopback transport (tests/test_modes.py); what stays here is what needs real
processes and sockets: the launcher, the examples as users run them, trainer-to-trainer
connections, a peer that never comes.
"""
import io
import os
import re
import subprocess
import sys
import time

import numpy as np
import pytest

from placegroup.tools.launch import launch
from tests.conftest import TIME_FACTOR

SCRIPT = os.path.join(os.path.dirname(__file__), "dist", "train_model.py")


def _run(tmp_path, trainers, pservers, *args, env=None):
    out = io.StringIO()
    env = {"PLACEGROUP_PEER_TIMEOUT": str(30 * TIME_FACTOR), **(env or {})}
    code = launch(SCRIPT, ["--out", str(tmp_path), *args], trainers, pservers, grace=20 * TIME_FACTOR,
                  out=out, extra_env=env)
    return code, out.getvalue()


def _local(tmp_path, *args):
    subprocess.run([sys.executable, SCRIPT, "--out", str(tmp_path), *args], check=True,
                   env={k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}, timeout=120 * TIME_FACTOR)
    return np.load(tmp_path / "local0.npz")


def _check_equivalent(tmp_path, trainers, pservers, *args, sharded=()):
    """``sharded``: parameters column-sliced over the trainers (model parallel): put together."""
    code, log = _run(tmp_path, trainers, pservers, *args)
    assert code == 0, log
    ref = _local(tmp_path, *args)
    runs = [np.load(tmp_path / f"trainer{i}.npz") for i in range(trainers)]
    mean_loss = np.mean([r["losses"] for r in runs], axis=0)
    np.testing.assert_allclose(mean_loss, ref["losses"], rtol=1e-5, atol=1e-6)
    for name in ref.files:
        if name == "losses":
            continue
        if name in sharded:
            whole = np.concatenate([r[name] for r in runs], axis=-1)
            np.testing.assert_allclose(whole, ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
            assert runs[0][name].shape[-1] == ref[name].shape[-1] // trainers  # each holds its shard only
            continue
        for r in runs:
            np.testing.assert_allclose(r[name], ref[name], rtol=1e-5, atol=1e-6, err_msg=name)
    return log


def test_sync_sgd_2_trainers_2_pservers_equals_one_process(tmp_path):
    """Cross edges in both directions every step (gradients to the pservers, parameters back):
    the version rule keeps every wait pointing earlier, so nothing deadlocks."""
    log = _check_equivalent(tmp_path, 2, 2, "--model", "linear", "--optimizer", "sgd", "--steps", "8")
    assert log.count("set guard: 'learning_rate_0' is held by pserver@") == 2


@pytest.mark.parametrize("optimizer", ["adam"])
def test_collective_data_parallel_without_pservers(tmp_path, optimizer):
    """No pservers: gradients all-reduced among the trainers, same as one process."""
    _check_equivalent(tmp_path, 2, 0, "--model", "wide", "--optimizer", optimizer, "--steps", "5")


@pytest.mark.parametrize("trainers, optimizer, fused", [(2, "adam", True), (4, "momentum", False)])
def test_model_parallel_fc_over_the_trainers(tmp_path, trainers, optimizer, fused):
    """Model parallelism: the last fc column-sliced over K trainers equals the one-device model, with the
    whole logits gathered (unfused) or never made (fused softmax cross-entropy)."""
    log = _check_equivalent(tmp_path, trainers, 0, "--model", "mp", "--optimizer", optimizer, "--steps", "5",
                            "--batch", "24", *(() if fused else ("--unfused",)), sharded=("fc_1.w_0", "fc_1.b_0"))
    for t in range(trainers):  # each checkpoints and reloads its own shard
        assert f"trainer {t} checkpoint: fc_1.w_0 [16, {8 // trainers}] reloaded equal" in log


def test_first_failure_stops_the_cluster_with_its_code(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import os, sys, time\n"
                   "if os.environ['TRAINING_ROLE'] == 'TRAINER' and os.environ['PADDLE_TRAINER_ID'] == '1':\n"
                   "    print('failing on purpose'); sys.exit(3)\n"
                   "time.sleep(60)\n")
    out = io.StringIO()
    t0 = time.monotonic()
    code = launch(str(bad), [], 2, 1, grace=5, out=out)
    assert code == 3
    assert time.monotonic() - t0 < 30 * TIME_FACTOR
    text = out.getvalue()
    assert "[trainer:1] failing on purpose" in text
    assert "[launch] trainer:1 (TRAINER, 127.0.0.1:" in text
    assert "failed first (exit code 3); stopping the others" in text


def test_a_peer_that_never_comes_is_named_after_the_timeout(tmp_path):
    """A pserver whose trainers never start stops with an error naming what it waited for."""
    code, log = _run(tmp_path, 2, 1, "--steps", "2", env={"PLACEGROUP_START_TIMEOUT": "3",
                                                         "PLACEGROUP_TEST_NO_TRAINER": "1"})
    assert code != 0
    assert "PeerLost: peer trainer:0 (trainer 0) never came: no connection in 3s" in log, log
    assert "was waiting in op #" in log and "for 'fc_0.w_0@GRAD' version 0 from trainer:0" in log


def test_fit_a_line_example_runs_unchanged_under_launch(tmp_path):
    """examples/fit_a_line.py: the same script, one process and a 2 + 2 cluster, same model."""
    import re

    example = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "fit_a_line.py")
    args = ["--passes", "3", "--data", "diabetes", "--no-progress", "--drop-last"]
    env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
    local = subprocess.run([sys.executable, example, *args], capture_output=True, text=True, env=env,
                           timeout=120 * TIME_FACTOR, check=True).stdout
    out = io.StringIO()
    code = launch(example, args, 2, 2, grace=20 * TIME_FACTOR, out=out)
    text = out.getvalue()
    assert code == 0, text
    pattern = r"train loss of the trained model ([0-9.]+)"
    want = float(re.search(pattern, local).group(1))
    got = [float(m) for m in re.findall(r"\[trainer:\d\] " + pattern, text)]
    # trainer 0 reports for the job (in sync mode every trainer ends with the same parameters)
    assert len(got) == 1 and abs(got[0] - want) <= 1e-5 * want, (want, got)
    for t in (0, 1):
        assert re.search(rf"\[trainer:{t}\] trainer {t}: step (\d+)/\1 \(100%\)", text), text
    assert "Traceback" not in text


def test_the_design_documents_train_runs_as_written(tmp_path):
    """The seed's own train(): every process runs the same loop, pservers included."""
    import numpy as np

    # A SYNTHETIC stand-in for UCI housing (made up here, 506 rows of 13 features and a
    # linear target), only so that the seed's reader has a file to read.
    home = tmp_path / "uci_housing"
    home.mkdir()
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 10, size=(506, 13))
    np.savetxt(home / "housing.data", np.hstack([x, (x @ rng.uniform(0, 1, 13))[:, None]]), fmt="%.4f")
    out = io.StringIO()
    code = launch(os.path.join(os.path.dirname(__file__), "dist", "placegroup_design_train.py"), [], 2, 2,
                  grace=30 * TIME_FACTOR, out=out, extra_env={"PLACEGROUP_DATA_HOME": str(tmp_path)})
    text = out.getvalue()
    assert code == 0, text[-3000:]
    losses = [float(line.split("[")[-1].rstrip("]")) for line in text.splitlines()
              if line.startswith("[trainer:0] [")]
    assert len(losses) == 100 * 21  # 404 training rows in batches of 20, 100 passes
    assert re.search(r"^\[pserver@127\.0\.0\.1:\d+\] None$", text, re.M)  # it fetches no trainer-held loss


def test_many_classes_example_shards_the_last_layer(tmp_path):
    """examples/many_classes.py: the mean of the trainers' losses is the one-process loss."""
    import re

    example = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "many_classes.py")
    args = ["--classes", "20000", "--steps", "10"]
    env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
    local = subprocess.run([sys.executable, example, *args], capture_output=True, text=True, env=env,
                           timeout=120 * TIME_FACTOR, check=True).stdout
    out = io.StringIO()
    assert launch(example, args, 2, 0, grace=20 * TIME_FACTOR, out=out) == 0, out.getvalue()
    text = out.getvalue()
    assert "[trainer:0] trainer 0 of 2: holds fc_0.w_0 [32, 10000] of [32, 20000]" in text
    want = float(re.search(r"step  10  loss ([0-9.]+)", local).group(1))
    got = [float(v) for v in re.findall(r"\[trainer:\d\] step  10  loss ([0-9.]+)", text)]
    assert abs(sum(got) / 2 - want) < 2e-4 * want, (want, got)


@pytest.mark.slow  # a whole example, twice (~13 s): the slow suite runs it
def test_sliced_wide_layer_example_on_3_pservers(tmp_path):
    """examples/sliced_wide_layer.py: blocks on 3 pservers, the same test accuracy as one process."""
    import re

    example = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "sliced_wide_layer.py")
    env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
    local = subprocess.run([sys.executable, example, "--passes", "2"], capture_output=True, text=True, env=env,
                           timeout=120 * TIME_FACTOR, check=True).stdout
    out = io.StringIO()
    assert launch(example, ["--passes", "2"], 2, 3, grace=20 * TIME_FACTOR, out=out) == 0, out.getvalue()
    text = out.getvalue()
    assert "rows 0..682 of fc_1.w_0" in text  # parameter slicing: a 2048-row weight in 3 blocks
    want = re.search(r"test accuracy ([0-9.]+)", local).group(1)
    assert re.findall(r"\[trainer:\d\] test accuracy ([0-9.]+)", text) == [want, want]


@pytest.mark.slow  # three 20-pass jobs (~22 s): the slow suite runs it
def test_async_and_ssp_fit_a_line_converge_within_5_percent_of_sync(tmp_path):
    """On examples/fit_a_line.py: the trained model's loss in async and SSP(2)
    mode is within 5% of the sync one."""
    import re

    example = os.path.join(os.path.dirname(__file__), os.pardir, "examples", "fit_a_line.py")
    final = {}
    for mode in ("sync", "async", "ssp"):
        out = io.StringIO()
        code = launch(example, ["--mode", mode, "--passes", "20", "--data", "diabetes", "--no-progress"], 2, 2,
                      grace=20 * TIME_FACTOR, out=out)
        assert code == 0, out.getvalue()
        final[mode] = float(re.search(r"\[trainer:0\] train loss of the trained model ([0-9.]+)",
                                      out.getvalue()).group(1))
    assert abs(final["async"] - final["sync"]) <= 0.05 * final["sync"], final
    assert abs(final["ssp"] - final["sync"]) <= 0.05 * final["sync"], final



@pytest.mark.parametrize("distributed, says", [(True, "each step prefetches the rows"),
                                               (False, "sums dense gradients")])
def test_merge_steps_refuses_sparse_gradients_and_says_why(distributed, says):
    import placegroup as fluid

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        ids = fluid.layers.data(name="ids", shape=[1], dtype="int64")
        emb = fluid.layers.embedding(ids, size=[50, 4], is_sparse=True, is_distributed=distributed)
        fluid.optimizer.SGD(0.1).minimize(fluid.layers.mean(emb))
    t = fluid.DistributeTranspiler()
    with pytest.raises(ValueError, match=f"merge_steps=2 .*{says}.*Use merge_steps=1"):
        t.transpile(0, program=main, startup_program=startup, pservers="127.0.0.1:6170", trainers=1, merge_steps=2)
