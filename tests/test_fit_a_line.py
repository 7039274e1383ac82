"""examples/fit_a_line.py: trains to the least-squares optimum, in-process and as a script."""
import os
import pathlib
import runpy
import subprocess
import sys

import pytest

import placegroup as fluid

pytest.importorskip("sklearn")  # the diabetes set ships inside scikit-learn

EXAMPLE = pathlib.Path(__file__).resolve().parents[1] / "examples" / "fit_a_line.py"


@pytest.fixture(scope="module")
def example():
    return runpy.run_path(str(EXAMPLE), run_name="fit_a_line")


@pytest.fixture
def no_housing(tmp_path, monkeypatch):
    """An environment where uci_housing's file is nowhere, so "auto" picks diabetes."""
    env = {"HOME": str(tmp_path / "home"), "PLACEGROUP_DATA_HOME": str(tmp_path / "data")}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


def test_sgd_converges_to_the_least_squares_optimum(example, no_housing):
    lines = []
    r = example["train"](passes=30, progress=False, log=lines.append)
    assert r["dataset"] == "diabetes"
    assert "housing.data was not found" in lines[0]
    # The loss above the best any linear model can do falls by a large factor...
    excess_before = r["first_batch_loss"] - r["lstsq_loss"]
    excess_after = r["train_loss"] - r["lstsq_loss"]
    assert excess_before > 0.3 and excess_after < excess_before / 50
    # ...the trained model is within 1% of that optimum, and the test loss is of its size.
    assert r["train_loss"] < 1.01 * r["lstsq_loss"]
    assert r["test_loss"] < 0.6 and len(r["pass_losses"]) == 30
    assert r["pass_losses"][-1] < r["pass_losses"][0]
    assert any(line.startswith("pass  29  train loss") for line in lines)


def test_the_same_seed_gives_the_same_run(example, no_housing):
    a = example["train"](passes=2, progress=False, log=lambda s: None)
    b = example["train"](passes=2, progress=False, log=lambda s: None)
    assert a["pass_losses"] == b["pass_losses"] and a["test_loss"] == b["test_loss"]


def test_momentum_with_piecewise_decay(example, no_housing):
    r = example["train"](passes=15, optimizer="momentum", progress=False, log=lambda s: None)
    assert r["train_loss"] < 1.01 * r["lstsq_loss"]


def test_asking_for_uci_housing_without_its_file_fails_clearly(example, no_housing):
    with pytest.raises(FileNotFoundError, match="archive.ics.uci.edu"):
        example["train"](passes=1, data="uci_housing", progress=False, log=lambda s: None)


def test_runs_as_a_script_and_saves_the_program(tmp_path, no_housing):
    env = {**os.environ, **no_housing}
    save = tmp_path / "saved"
    proc = subprocess.run([sys.executable, str(EXAMPLE), "--passes", "2", "--no-progress",
                           "--save-dir", str(save)],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert out.startswith("data set: diabetes (")
    assert "pass   0  train loss" in out and "pass   1  train loss" in out
    assert "test loss" in out and "least-squares optimum" in out
    try:
        from placegroup import io
    except ImportError:
        assert "nothing saved" in out
    else:
        assert (save / "prog.bin").is_file()
        prog = io.load_program(str(save / "prog.bin"))
        assert [op.type for op in prog.global_block().ops][:2] == ["mul", "elementwise_add"]


def test_the_design_documents_train_loop_with_placegroup_as_paddle(no_housing):
    """The PlaceGroup design's train_loop, verbatim but for the data set and the pass count."""
    import placegroup as paddle

    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard(), \
            fluid.scope_guard(fluid.Scope()):
        x = fluid.layers.data(name='x', shape=[10], dtype='float32')  # diabetes has 10 features
        y_predict = fluid.layers.fc(input=x, size=1, act=None)
        y = fluid.layers.data(name='y', shape=[1], dtype='float32')
        cost = fluid.layers.square_error_cost(input=y_predict, label=y)
        avg_cost = fluid.layers.mean(cost)
        fluid.optimizer.SGD(learning_rate=0.01).minimize(avg_cost)
        train_reader = paddle.batch(
            paddle.reader.shuffle(paddle.dataset.diabetes.train(), buf_size=500),
            batch_size=20)
        place = fluid.CPUPlace()
        exe = fluid.Executor(place)
        feeder = fluid.DataFeeder(place=place, feed_list=[x, y])
        exe.run(startup)
        losses = []
        for pass_id in range(3):
            for data in train_reader():
                avg_loss_value, = exe.run(main, feed=feeder.feed(data), fetch_list=[avg_cost])
                losses.append(float(avg_loss_value[0]))
    assert len(losses) == 3 * 18 and sum(losses[-18:]) < sum(losses[:18])
