"""Run PaddlePaddle in a python of its own and bring its numbers back: the one way the tests do it.

Paddle is a reference, never a dependency. The comparisons run it in a separate interpreter,
named by ``PLACEGROUP_PADDLE_PYTHON`` (paddlepaddle 2.6.2; the ``paddle26_python`` fixture) or
``PLACEGROUP_PADDLE18_PYTHON`` (Fluid 1.8.5; the ``fluid18_python`` fixture, and
``eval "$(python -m tests.fluid18_env)"`` makes one), both in tests/conftest.py, which skip a
test when theirs is unset. Paddle's import (global static mode, glog, thread pools) thus never
touches the test process. Mark such tests ``paddle``.

Two functions:

* :func:`run_reference`: the usual exchange. The test's arrays go in ``data.npz``, a JSON spec
  names them (``spec["data"]``) and where the script writes its arrays (``spec["out"]``, an
  ``.npz``); the arrays come back as a dict. A script given as text runs with ``-c`` and reads
  the spec from ``json.loads(sys.argv[1])``; a script file (a :class:`~pathlib.Path`, such as
  ``tests/paddle_ref/paddle_runner.py``) gets the path of a ``spec.json`` as its argument.
* :func:`run_python`: any other command line (a Fluid script run unchanged with its own
  arguments, a script that prints its result), with the same checks: it must exit 0, and if it
  does not, the AssertionError shows the command and its stderr's tail.

Example::

    def test_relu_matches_paddle(paddle26_python, tmp_path):
        got = run_reference(paddle26_python, SCRIPT, tmp_path, {"x": x}, steps=3)
        np.testing.assert_allclose(ours, got["y"], rtol=1e-5)

where ``SCRIPT`` does ``spec = json.loads(sys.argv[1])``, ``d = np.load(spec["data"])`` ...
``np.savez(spec["out"], y=...)``.

Thread-safety: both only start a process and wait for it; two calls with the same ``tmp_path``
at once would overwrite each other's files.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Mapping
from pathlib import Path

import numpy as np

# How much of a failed command's output an AssertionError shows.
# How a script run by both frameworks starts (``run_reference`` passes the spec as argv[1]):
# the framework the spec names, as ``fluid``.
SCRIPT_HEAD = r'''
import json, sys
import numpy as np
spec = json.loads(sys.argv[1])
if spec["framework"] == "placegroup":
    import placegroup as fluid
else:
    import paddle.fluid as fluid
'''
TAIL = 3000


def _text(stream) -> str:
    # TimeoutExpired carries what was read so far as bytes, even with text=True
    return stream.decode(errors="replace") if isinstance(stream, bytes) else (stream or "")


def _failure(cmd: list[str], cwd, why: str, stdout, stderr) -> AssertionError:
    stdout, stderr = _text(stdout), _text(stderr)
    where = f" (cwd {cwd})" if cwd else ""
    msg = f"`{shlex.join(cmd)[:500]}`{where} {why}\n--- stderr, last {TAIL} characters ---\n{stderr[-TAIL:]}"
    if stdout.strip():
        msg += f"\n--- stdout, last 1000 characters ---\n{stdout[-1000:]}"
    return AssertionError(msg)


def run_python(python: str | os.PathLike, *args, cwd: str | os.PathLike | None = None, env: Mapping | None = None,
               timeout: float = 300, input: str | None = None) -> subprocess.CompletedProcess:
    """Runs ``python *args`` to its end and checks that it exited 0.

    Args:
        python: the interpreter (a Paddle python from a fixture, or ``sys.executable``).
        *args: its arguments; each is passed as ``str(arg)``.
        cwd: its working directory (default: this process's).
        env: its whole environment (default: this process's).
        timeout: seconds it may run.
        input: text for its stdin (default: none).

    Returns:
        The finished process; ``.stdout`` and ``.stderr`` are text.

    Raises:
        AssertionError: it exited with another status or ran past ``timeout`` (then it is
            killed); the message has the command and the tail of its stderr (and stdout).
    """
    cmd = [str(python), *map(str, args)]
    try:
        done = subprocess.run(cmd, cwd=cwd, env=None if env is None else dict(env), input=input, capture_output=True,
                              text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise _failure(cmd, cwd, f"ran past {timeout:.0f} s", e.stdout, e.stderr) from None
    if done.returncode != 0:
        raise _failure(cmd, cwd, f"exited with {done.returncode}", done.stdout, done.stderr)
    return done


def run_reference(python: str | os.PathLike, script: str | Path, tmp_path: str | os.PathLike,
                  data: Mapping | str | os.PathLike | None = None, *, timeout: float = 300,
                  cwd: str | os.PathLike | None = None, env: Mapping | None = None, **spec) -> dict[str, np.ndarray]:
    """Runs ``script`` in ``python`` on a spec and returns the arrays it wrote.

    Args:
        python: the Paddle interpreter (the ``paddle26_python`` or ``fluid18_python`` fixture).
        script: the script's text (run with ``-c``, the spec's JSON as ``sys.argv[1]``) or the
            path of a script file (run with the path of ``tmp_path/spec.json`` as its argument).
        tmp_path: a folder for ``data.npz``, ``spec.json`` and ``out.npz``; the files of an
            earlier call there are replaced.
        data: arrays to write to ``tmp_path/data.npz``, or the path of an ``.npz`` that exists;
            ``spec["data"]`` names the file. None: no ``"data"`` in the spec.
        timeout, cwd, env: as :func:`run_python`.
        **spec: the rest of the spec; JSON-able. ``"out"`` is set here (``tmp_path/out.npz``).

    Returns:
        The arrays of ``spec["out"]``, by name.

    Raises:
        AssertionError: the script failed (see :func:`run_python`) or wrote no ``spec["out"]``.
    """
    tmp_path = Path(tmp_path)
    if isinstance(data, Mapping):
        np.savez(tmp_path / "data.npz", **data)
        data = tmp_path / "data.npz"
    if data is not None:
        spec["data"] = str(data)
    out = tmp_path / "out.npz"
    out.unlink(missing_ok=True)  # a failed run must not return an earlier run's arrays
    spec["out"] = str(out)
    if isinstance(script, Path):
        (tmp_path / "spec.json").write_text(json.dumps(spec))
        args: tuple = (script, tmp_path / "spec.json")
    else:
        args = ("-c", script, json.dumps(spec))
    run_python(python, *args, cwd=cwd, env=env, timeout=timeout)
    if not out.exists():
        raise AssertionError(f"{script if isinstance(script, Path) else 'the script'} run by {python} exited 0 "
                             f"but wrote no {out}")
    with np.load(out, allow_pickle=False) as z:
        return dict(z)
