"""Running Fluid 1.x scripts unchanged (placegroup/tools/compat.py): the ``paddle`` aliases, the
honest "not implemented" errors, ``placegroup run`` / ``launch --paddle-compat``, and
docs/fluid_compat.md staying true to the code."""
import io
import os
import re
import subprocess
import sys

import pytest

import placegroup
import placegroup as fluid
from placegroup.compat import alias_paddle, unalias_paddle
from placegroup.tools import compat_table
from placegroup.tools.launch import launch
from tests.conftest import TIME_FACTOR

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "tests", "compat_scripts", "fit_a_line.py")
LOSS = re.compile(r"pass (\d+) step (\d+) loss (\d+\.\d+)")


@pytest.fixture
def aliased():
    alias_paddle()
    yield
    unalias_paddle()


def test_paddle_names_are_placegroups_module_objects(aliased):
    import paddle
    import paddle.dataset.uci_housing
    import paddle.fluid as pf
    import paddle.fluid.core
    import paddle.fluid.framework
    import paddle.fluid.io
    import paddle.fluid.layers
    import paddle.fluid.layers.control_flow
    import paddle.fluid.nets
    import paddle.fluid.optimizer
    import paddle.fluid.unique_name
    import paddle.reader

    assert pf is placegroup and sys.modules["paddle.fluid"] is placegroup
    assert paddle.fluid.layers is placegroup.layers is sys.modules["paddle.fluid.layers"]
    assert sys.modules["paddle.fluid.layers.control_flow"] is placegroup.layers.control_flow
    assert paddle.fluid.io is placegroup.io and paddle.fluid.optimizer is placegroup.optimizer
    assert paddle.fluid.nets is placegroup.nets and paddle.fluid.core is placegroup.core
    assert sys.modules["paddle.fluid.framework"] is sys.modules["placegroup.ir.framework"]
    assert sys.modules["paddle.fluid.unique_name"] is placegroup.unique_name
    assert paddle.dataset.uci_housing is placegroup.dataset.uci_housing
    assert paddle.reader is placegroup.reader and paddle.batch is placegroup.batch
    # the modules keep their own identity: imported once, under their own spec
    assert placegroup.__spec__.name == "placegroup" and placegroup.layers.__spec__.name == "placegroup.layers"


def test_alias_is_idempotent_undoable_and_writes_nothing(aliased):
    alias_paddle()
    import paddle
    assert sum(type(f).__name__ == "_PaddleFinder" for f in sys.meta_path) == 1
    assert paddle.__spec__.origin is None  # no file: nothing named paddle on disk
    unalias_paddle()
    assert "paddle" not in sys.modules and "paddle.fluid" not in sys.modules
    assert not any(type(f).__name__ == "_PaddleFinder" for f in sys.meta_path)


def test_importing_placegroup_does_not_alias_paddle():
    code = "import sys, placegroup; print(any(type(f).__name__ == '_PaddleFinder' for f in sys.meta_path))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60 * TIME_FACTOR)
    assert out.stdout.strip() == "False", out.stderr


def test_paddle_fluid_builds_a_model(aliased):
    import paddle.fluid as pf
    x = pf.layers.data(name="x", shape=[13], dtype="float32")
    y = pf.layers.fc(input=x, size=1)
    assert y.shape[-1] == 1


@pytest.mark.parametrize("expr, label", [
    ("fluid.layers.roi_pool", "fluid.layers.roi_pool"),  # detection and dygraph: out of scope
    ("fluid.layers.multiclass_nms", "fluid.layers.multiclass_nms"),
    ("fluid.dygraph", "fluid.dygraph"),
    ("fluid.optimizer.PipelineOptimizer", "fluid.optimizer.PipelineOptimizer"),
    ("fluid.metrics.DetectionMAP", "fluid.metrics.DetectionMAP"),
    ("fluid.layers.io.ListenAndServ", "fluid.layers.io.ListenAndServ"),
])
def test_a_fluid_name_placegroup_lacks_says_so(expr, label):
    with pytest.raises(NotImplementedError, match=re.escape(f"placegroup does not implement {label}") + "( yet|: )"):
        eval(expr)
    with pytest.raises(fluid.NotImplementedInPlacegroup, match="docs/fluid_compat.md"):
        eval(expr)
    module, name = expr.rsplit(".", 1)
    assert not hasattr(eval(module), name)


def test_a_name_fluid_never_had_is_a_plain_attribute_error():
    for module in (fluid, fluid.layers, fluid.optimizer):
        with pytest.raises(AttributeError) as e:
            module.no_such_layer
        assert type(e.value) is AttributeError and "no_such_layer" in str(e.value)


def test_importing_a_fluid_module_placegroup_lacks_says_so(aliased):
    with pytest.raises(ModuleNotFoundError, match="placegroup does not implement paddle.fluid.contrib.slim: model compression"):
        import paddle.fluid.contrib.slim  # noqa: F401
    with pytest.raises(ModuleNotFoundError, match="No module named 'paddle.no_such'"):
        import paddle.no_such  # noqa: F401


def _losses(text: str, tag: str = "") -> list:
    return [float(m.group(3)) for line in text.splitlines() if line.startswith(tag)
            for m in [LOSS.search(line)] if m]


def test_placegroup_run_runs_an_unmodified_script(tmp_path):
    out = subprocess.run([sys.executable, "-m", "placegroup", "run", SCRIPT, "2"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=120 * TIME_FACTOR)
    assert out.returncode == 0, out.stderr
    losses = _losses(out.stdout)
    assert len(losses) == 16 and losses[-1] < losses[0], out.stdout  # 2 passes of 8 batches


def test_run_gives_the_script_argv_main_and_its_directory(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text("import sys, paddle.fluid as f, placegroup\n"
                      "print(__name__, sys.argv[1:], sys.path[0], f is placegroup)\n")
    out = subprocess.run([sys.executable, "-m", "placegroup", "run", str(script), "--x", "1"],
                         capture_output=True, text=True, timeout=60 * TIME_FACTOR)
    assert out.stdout.split() == ["__main__", "['--x',", "'1']", str(tmp_path), "True"], out.stderr


def test_launch_paddle_compat_trains_the_script_distributed(tmp_path):
    out = io.StringIO()
    code = launch(SCRIPT, ["1"], 2, 2, out=out, grace=30 * TIME_FACTOR, paddle_compat=True)
    assert code == 0, out.getvalue()
    for t in ("[trainer:0]", "[trainer:1]"):
        assert len(_losses(out.getvalue(), t)) == 8, out.getvalue()
    assert out.getvalue().count("pserver done") == 2


def test_run_and_the_launch_flag_are_in_the_help():
    from click.testing import CliRunner
    from placegroup.tools.cli import main
    assert "run" in CliRunner().invoke(main, ["--help"]).output
    assert "--paddle-compat" in CliRunner().invoke(main, ["launch", "--help"]).output


def test_the_compat_table_is_generated_from_the_code():
    with open(compat_table.PAGE, encoding="utf-8") as f:
        page = f.read()
    assert page == compat_table.render(), \
        "docs/fluid_compat.md is out of date: run `python -m placegroup.tools.compat_table`"
    layers = compat_table.coverage()["fluid.layers"]
    assert "fc" in layers.present and layers.excluded["roi_pool"].category == "detection"
