"""A script run by ``placegroup run`` may start Python processes of its own (PaddleRec's local
cluster starts each role as ``python -m ...``; data readers use multiprocessing): each of them
imports placegroup's ``paddle`` too (NOTE(child-alias) in placegroup/tools/compat.py)."""
import subprocess
import sys
import textwrap

import pytest

from placegroup.tools import compat

SCRIPT = textwrap.dedent('''
    import multiprocessing
    import subprocess
    import sys

    import paddle.fluid as fluid

    ASK = "import paddle.fluid as f, placegroup; print(f is placegroup)"


    def probe(queue):
        import paddle.fluid as f, placegroup
        queue.put(f is placegroup)


    if __name__ == "__main__":
        seen = {"parent": fluid.__name__}
        seen["python -c"] = subprocess.run([sys.executable, "-c", ASK], capture_output=True, text=True).stdout.strip()
        seen["python -m"] = subprocess.run([sys.executable, "-m", "child_entry"], capture_output=True,
                                           text=True).stdout.strip()
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        p = ctx.Process(target=probe, args=(queue,))
        p.start()
        seen["spawn"] = str(queue.get(timeout=120))
        p.join()
        print(seen)
''')


def test_processes_a_script_starts_see_the_paddle_alias(tmp_path):
    if compat._real_paddle() is not None:
        pytest.skip("a real Paddle is installed here: children keep it (NOTE(child-alias))")
    (tmp_path / "train.py").write_text(SCRIPT)
    (tmp_path / "child_entry.py").write_text("import paddle.fluid as f, placegroup\nprint(f is placegroup)\n")
    out = subprocess.run([sys.executable, "-m", "placegroup", "run", "train.py"], cwd=tmp_path, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    seen = eval(out.stdout.strip().splitlines()[-1])  # a dict literal the script printed
    assert seen == {"parent": "placegroup", "python -c": "True", "python -m": "True", "spawn": "True"}, seen


def test_a_child_without_placegroup_run_is_untouched(tmp_path):
    """Only the process tree of ``placegroup run`` gets the alias: a plain ``python`` does not."""
    out = subprocess.run([sys.executable, "-c", "import importlib.util as u; print(u.find_spec('paddle'))"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "None" or "_paddle_shim" not in out.stdout
