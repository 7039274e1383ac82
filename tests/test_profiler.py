"""fluid.profiler: Fluid 1.8's profiler API, timing every op between start and stop."""
import os
import subprocess
import sys

import numpy as np
import pytest

import placegroup as fluid
import placegroup.profiler as profiler
from placegroup.errors import NotImplementedInPlacegroup


def _model(fresh_programs):
    main, startup = fresh_programs
    x = fluid.layers.data(name="x", shape=[3])
    y = fluid.layers.data(name="y", shape=[1])
    loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
    fluid.optimizer.SGD(0.01).minimize(loss)
    exe = fluid.Executor()
    exe.run(startup)
    feed = {"x": np.ones((4, 3), "float32"), "y": np.ones((4, 1), "float32")}
    return exe, main, feed, loss


def _rows(text):
    """op -> calls, from a printed table."""
    out = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1].replace(",", "").isdigit() and not line.startswith("placegroup"):
            out[parts[0]] = int(parts[1].replace(",", ""))
    return out


def test_the_profiler_times_the_steps_inside_it_only(fresh_programs, tmp_path, capsys):
    exe, main, feed, loss = _model(fresh_programs)
    exe.run(main, feed=feed, fetch_list=[loss])  # before: not timed
    path = tmp_path / "profile"
    with profiler.profiler("CPU", "calls", str(path)):
        for i in range(5):
            if i == 2:
                profiler.reset_profiler()  # leave out the first two, as Fluid's examples do
            exe.run(main, feed=feed, fetch_list=[loss])
    exe.run(main, feed=feed, fetch_list=[loss])  # after: not timed
    printed = capsys.readouterr().out
    assert printed.startswith("------------------------->     Profiling Report     <")
    assert "placegroup profile, local: 3 steps" in printed
    rows = _rows(printed)
    assert rows["mul"] == 3 and rows["mul_grad"] == 3 and rows["sgd"] == 6  # a weight and a bias
    calls = [n for n in rows.values()]
    assert calls == sorted(calls, reverse=True)  # ordered by calls
    assert path.read_text() == printed
    assert exe.profile is None  # detached: no marking after stop


def test_start_and_stop_by_hand_and_the_keys_sort_the_table(fresh_programs, tmp_path, capsys):
    exe, main, feed, loss = _model(fresh_programs)
    profiler.start_profiler("All", "OpDetail")
    profiler.start_profiler("CPU")  # a second start does nothing
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=[loss])
    profiler.stop_profiler("max", "")
    assert "placegroup profile, local: 3 steps" in capsys.readouterr().out
    profiler.stop_profiler("total")  # not running: nothing


@pytest.mark.parametrize("call, message", [
    (lambda: profiler.start_profiler("TPU"), "The state must be 'CPU' or 'GPU' or 'All'"),
    (lambda: profiler.start_profiler("CPU", "Everything"), "tracer option must be"),
    (lambda: profiler.stop_profiler("median"), "The sorted_key must be None or in"),
])
def test_bad_arguments_get_fluids_errors(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_cuda_profiler_says_what_to_use_instead(tmp_path):
    with pytest.raises(NotImplementedInPlacegroup, match="nvprof"):
        with profiler.cuda_profiler(str(tmp_path / "out")):
            pass


def test_an_unmodified_fluid_script_imports_and_uses_the_profiler(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        "import numpy as np\n"
        "import paddle.fluid as fluid\n"
        "import paddle.fluid.profiler as profiler\n"
        "x = fluid.layers.data(name='x', shape=[3])\n"
        "loss = fluid.layers.mean(fluid.layers.fc(x, 1))\n"
        "fluid.optimizer.SGD(0.01).minimize(loss)\n"
        "exe = fluid.Executor(fluid.CPUPlace())\n"
        "exe.run(fluid.default_startup_program())\n"
        f"with profiler.profiler('CPU', 'total', {str(tmp_path / 'p')!r}):\n"
        "    for _ in range(2):\n"
        "        exe.run(fluid.default_main_program(), feed={'x': np.ones((2, 3), 'float32')}, fetch_list=[loss])\n")
    env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
    got = subprocess.run([sys.executable, "-m", "placegroup", "run", str(script)], capture_output=True, text=True,
                         env=env, timeout=120)
    assert got.returncode == 0, got.stderr[-2000:]
    assert "placegroup profile, local: 2 steps" in got.stdout and (tmp_path / "p").exists()
