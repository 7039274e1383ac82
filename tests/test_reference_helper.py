"""tests/paddle_ref/reference.py, the helper the Paddle comparisons run Paddle through, checked
with this python in Paddle's place (no Paddle needed)."""
import sys
import textwrap

import numpy as np
import pytest

from tests.paddle_ref.reference import run_python, run_reference

DOUBLE = textwrap.dedent("""
    import json, sys
    import numpy as np
    spec = json.loads(sys.argv[1] if sys.argv[1].startswith("{") else open(sys.argv[1]).read())
    d = np.load(spec["data"])
    np.savez(spec["out"], y=d["x"] * spec["k"])
""")


def test_the_arrays_and_the_spec_go_in_and_the_outs_come_back(tmp_path):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = run_reference(sys.executable, DOUBLE, tmp_path, {"x": x}, k=2)
    assert list(got) == ["y"] and got["y"].dtype == np.float32
    np.testing.assert_array_equal(got["y"], 2 * x)
    # a script file gets a spec.json; data may be an .npz that exists
    (tmp_path / "double.py").write_text(DOUBLE)
    again = run_reference(sys.executable, tmp_path / "double.py", tmp_path, tmp_path / "data.npz", k=3)
    np.testing.assert_array_equal(again["y"], 3 * x)


def test_a_failure_shows_the_command_and_its_stderr(tmp_path):
    with pytest.raises(AssertionError, match=r"(?s)exited with 3.*--- stderr.*the reason"):
        run_python(sys.executable, "-c", "import sys; sys.stderr.write('the reason'); sys.exit(3)")
    with pytest.raises(AssertionError, match="ran past 1 s"):
        run_python(sys.executable, "-c", "import time; time.sleep(30)", timeout=1)
    # an earlier run's out.npz is not taken for this one's
    run_reference(sys.executable, DOUBLE, tmp_path, {"x": np.ones(2)}, k=1)
    with pytest.raises(AssertionError, match="exited 0 but wrote no .*out.npz"):
        run_reference(sys.executable, "pass", tmp_path)
