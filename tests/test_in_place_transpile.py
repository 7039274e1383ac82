"""transpile rewrites the programs it was given into this process's part, as Fluid 1.8 does.

* In one process: the default programs, and a reference taken before ``transpile``, become
  trainer ``trainer_id``'s placed programs (a pserver's, for a pserver process); the shared
  program inside the transpiler stays whole; transpiling a program twice is refused; an
  unplaced program that would update parameters is refused while this process belongs to a job
  with pservers, and a forward-only clone taken before ``transpile`` runs locally.
* Real processes: a script in the book's style (tests/compat_scripts/in_place_transpile.py),
  which runs ``fluid.default_main_program()`` and ``exe.run(fetch_list=...)`` with no program
  after ``transpile`` and evaluates a ``clone(for_test=True)``, launched as 2 trainers + 2
  pservers, equals one process.
"""
import io
import sys
from pathlib import Path

import numpy as np
import pytest

import placegroup as fluid
from placegroup.util.var_format import read
from placegroup.errors import ConfigError
from placegroup.ir.framework import transpiled_job
from placegroup.tools.launch import launch
from tests.conftest import TIME_FACTOR, build_fit_a_line
from tests.paddle_ref.reference import run_python

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "compat_scripts" / "in_place_transpile.py"
PS = "127.0.0.1:7164,127.0.0.1:7165"


def test_the_default_programs_become_trainer_programs(fresh_programs, launch_env):
    main, startup = fresh_programs
    build_fit_a_line()
    t = fluid.DistributeTranspiler()
    t.transpile(1, pservers=PS, trainers=2)
    assert fluid.default_main_program() is main and fluid.default_startup_program() is startup
    assert str(main.executor) == "trainer:1" and str(startup.executor) == "trainer:1"
    assert str(main) == str(t.get_trainer_program())
    assert str(startup) == str(t.get_startup_program(None, "trainer"))
    # the shared program stays whole: the pservers' parts are still cut from it
    assert str(t.get_pserver_program("127.0.0.1:7165").executor) == "pserver@127.0.0.1:7165"
    assert list(transpiled_job().pservers) == PS.split(",")


def test_a_var_the_script_holds_stays_the_programs_var(fresh_programs, launch_env):
    main, _ = fresh_programs
    avg = build_fit_a_line()
    x = main.global_block().var("x")
    fluid.DistributeTranspiler().transpile(0, pservers=PS, trainers=2)
    assert main.global_block().var(avg.name) is avg and main.global_block().var("x") is x
    assert avg.block is main.global_block()


@pytest.mark.parametrize("how", ["current_endpoint", "environment"])
def test_a_pserver_process_gets_its_own_part(how, fresh_programs, launch_env):
    """TRAINING_ROLE=PSERVER says so; the endpoint comes from current_endpoint or POD_IP:PADDLE_INIT_PORT."""
    main, startup = fresh_programs
    build_fit_a_line()
    t = fluid.DistributeTranspiler()
    if how == "current_endpoint":
        launch_env(TRAINING_ROLE="PSERVER")
        t.transpile(0, pservers=PS, trainers=2, current_endpoint="127.0.0.1:7165")
    else:
        launch_env(TRAINING_ROLE="PSERVER", POD_IP="127.0.0.1", PADDLE_INIT_PORT="7165")
        t.transpile(0, pservers=PS, trainers=2)
    assert str(main.executor) == str(startup.executor) == "pserver@127.0.0.1:7165"


def test_a_pservers_endpoint_alone_does_not_make_a_pserver(fresh_programs, launch_env):
    """Fluid ignores current_endpoint in pserver mode, and scripts in the style of its distributed
    tests pass a pserver's endpoint from a trainer: the rewrite stays trainer trainer_id's."""
    main, _ = fresh_programs
    build_fit_a_line()
    fluid.DistributeTranspiler().transpile(1, pservers=PS, trainers=2, current_endpoint="127.0.0.1:7165")
    assert str(main.executor) == "trainer:1"


def test_a_trainer_whose_endpoint_is_the_default_stays_a_trainer(fresh_programs, launch_env):
    """Fluid's defaults: pservers and current_endpoint are both 127.0.0.1:6174."""
    main, _ = fresh_programs
    build_fit_a_line()
    fluid.DistributeTranspiler().transpile(0, pservers="127.0.0.1:6174", trainers=2)
    assert str(main.executor) == "trainer:0"


def test_a_program_given_as_argument_is_the_one_rewritten(fresh_programs, launch_env):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        build_fit_a_line()
    default = fluid.default_main_program()
    fluid.DistributeTranspiler().transpile(0, program=main, startup_program=startup, pservers=PS, trainers=2)
    assert str(main.executor) == str(startup.executor) == "trainer:0"
    assert default.executor is None and not default.global_block().ops


def test_transpiling_a_program_twice_is_refused(fresh_programs, launch_env):
    build_fit_a_line()
    fluid.DistributeTranspiler().transpile(0, pservers=PS, trainers=2)
    with pytest.raises(ConfigError, match="transpiled already"):
        fluid.DistributeTranspiler().transpile(0, pservers=PS, trainers=2)


def test_an_unplaced_training_program_is_refused_not_trained_alone(fresh_programs, launch_env):
    main, _ = fresh_programs
    build_fit_a_line()
    alone = main.clone()  # taken before transpile: still the one-process program
    fluid.DistributeTranspiler().transpile(0, pservers=PS, trainers=2)
    exe = fluid.Executor(fluid.CPUPlace())
    feed = {"x": np.ones((2, 13), "float32"), "y": np.ones((2, 1), "float32")}
    with pytest.raises(ConfigError, match=r"job with pservers .*would train alone.*default_main_program"):
        exe.run(alone, feed=feed)


def test_without_pservers_nothing_is_refused(fresh_programs, launch_env):
    """Collective data parallel (no pservers) keeps no job to guard."""
    build_fit_a_line()
    launch_env(PADDLE_TRAINER_ENDPOINTS="127.0.0.1:7170,127.0.0.1:7171")
    fluid.DistributeTranspiler().transpile(0, pservers="", trainers=2)
    assert transpiled_job() is None


def _data(path: Path) -> Path:
    r = np.random.default_rng(7)
    np.savez(path, steps=6, x=r.standard_normal((6, 16, 20)).astype("float32"),
             label=r.integers(0, 4, (6, 16, 1)), test_x=r.standard_normal((8, 20)).astype("float32"),
             test_label=r.integers(0, 4, (8, 1)))
    return path


def _one_process(data: Path, out: Path, python: str | None = None) -> dict:
    """The script in one process: under placegroup run, or under ``python`` (Fluid 1.8.5)."""
    cmd = [python, str(SCRIPT)] if python else [sys.executable, "-m", "placegroup", "run", str(SCRIPT)]
    run_python(*cmd, data, out, timeout=300 * TIME_FACTOR, cwd=SCRIPT.parent if python else ROOT)
    return dict(np.load(out))


@pytest.mark.parametrize("executors", ["one", "pe"])
def test_a_book_style_script_launched_2x2_equals_one_process(executors, tmp_path):
    """``pe``: the trainers train with a ParallelExecutor, a second executor beside the one that
    ran the startup program; both speak for the same trainer (NOTE(one-link-per-process))."""
    data = _data(tmp_path / "data.npz")
    one = _one_process(data, tmp_path / "one.npz")
    out = io.StringIO()
    extra = ["pe"] if executors == "pe" else []
    code = launch(str(SCRIPT), [str(data), str(tmp_path / "dist")] + extra, 2, 2, out=out, grace=30 * TIME_FACTOR,
                  paddle_compat=True)
    assert code == 0, out.getvalue()[-3000:]
    runs = [dict(np.load(tmp_path / f"dist.trainer{t}.npz")) for t in range(2)]
    np.testing.assert_allclose(np.mean([r["loss"] for r in runs], axis=0), one["loss"], rtol=1e-5)
    for r in runs:  # each trainer evaluates the job's parameters after every step
        np.testing.assert_allclose(r["test_loss"], one["test_loss"], rtol=1e-5)
    # fluid.save on a trainer's program (NOTE(save-a-part)): the parameters it holds, the job's
    # final ones, and none of the optimizer state its pservers keep
    whole = read(str(tmp_path / "one.npz.model.pdparams"))
    assert read(str(tmp_path / "one.npz.model.pdopt"))  # one process: Adam's moments too
    for t in range(2):
        mine = read(str(tmp_path / f"dist.trainer{t}.npz.model.pdparams"))
        assert sorted(mine) == sorted(whole)
        for name in whole:
            np.testing.assert_allclose(mine[name], whole[name], rtol=1e-5, atol=1e-7)
        assert read(str(tmp_path / f"dist.trainer{t}.npz.model.pdopt")) == {}


@pytest.mark.paddle
def test_the_script_under_fluid_18_gives_the_same_losses(fluid18_python, tmp_path):
    """The script unchanged under Fluid 1.8.5 (``PLACEGROUP_PADDLE18_PYTHON``), from our initial
    values: the same training and test losses."""
    data = _data(tmp_path / "data.npz")
    ours = _one_process(data, tmp_path / "ours.npz")
    np.savez(tmp_path / "with_init.npz", **dict(np.load(data)), **{k: v for k, v in ours.items() if k.startswith("init/")})
    theirs = _one_process(tmp_path / "with_init.npz", tmp_path / "fluid.npz", fluid18_python)
    assert sorted(k for k in theirs if k.startswith("init/")) == sorted(k for k in ours if k.startswith("init/"))
    np.testing.assert_allclose(ours["loss"], theirs["loss"], rtol=1e-4)
    np.testing.assert_allclose(ours["test_loss"], theirs["test_loss"], rtol=1e-4)
