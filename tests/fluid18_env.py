"""A PaddlePaddle Fluid 1.8.5 environment for the tests that compare placegroup with Fluid itself.

Those tests run Fluid 1.8.5 in a subprocess, with the python that ``PLACEGROUP_PADDLE18_PYTHON``
names, and skip when it is unset. This module makes such a python, once, in a cache folder::

    eval "$(python -m tests.fluid18_env)"     # builds or reuses it; prints the export line
    python -m pytest -m paddle                # the Fluid 1.8.5 comparisons now run

CI does the same through tests/test_fluid18_in_ci.py (marked ``slow``). The environment is a
test tool only: nothing in the package imports it or depends on it. It needs only the standard
library, pyenv's Python 3.8 and the package registry.

The recipe (``RECIPE`` below is its one written form):

1. A venv of pyenv's Python 3.8 (``pyenv install 3.8.18``): Fluid 1.8.5's wheels stop at cp38.
2. ``pip install --no-deps paddlepaddle==1.8.5``: its declared requirements pin versions that no
   longer install (opencv-python among them), so
3. the modules its import really needs are installed by hand: ``DEPENDENCIES``. nltk and rarfile
   are there because ``import paddle`` imports ``paddle.dataset``.
4. An empty ``cv2`` module in the venv's site-packages: ``paddle.dataset.image`` imports OpenCV,
   which these tests never use. (In the venv rather than on ``PYTHONPATH`` so that placegroup's
   own python, which inherits ``PYTHONPATH``, still sees that OpenCV is absent.)
5. ``paddle/fluid/core_avx.so`` renamed to ``core_avx.so.aside``, so Fluid loads its non-AVX core
   ``core_noavx.so``: NOTE(fluid18-noavx).
6. A check: the venv imports ``paddle.fluid`` 1.8.5 from ``core_noavx.so``. Only then is the
   marker file written that says the environment is complete.

Layout of the cache folder (``PLACEGROUP_FLUID18_CACHE``, default
``~/.cache/placegroup/fluid-1.8.5``): ``env/`` the venv, ``env/placegroup-fluid18.json`` the
marker (the recipe it was built from and ``pip freeze``), ``lock`` the build lock.

Thread-safety: :func:`ensure` may run in several processes at once; an exclusive ``flock`` on
the cache's ``lock`` file makes one of them build while the others wait, then reuse it.

Example::

    from tests import fluid18_env
    env = fluid18_env.ensure()            # minutes the first time (~100 MB download), then ~3 s
    subprocess.run([...], env=env.environ())
"""
from __future__ import annotations

import argparse
import dataclasses
import fcntl
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path

CACHE_VAR = "PLACEGROUP_FLUID18_CACHE"
PYTHON_VAR = "PLACEGROUP_PADDLE18_PYTHON"
DEFAULT_CACHE = Path("~/.cache/placegroup/fluid-1.8.5")
PYENV_VERSION = "3.8.18"

PADDLE = "paddlepaddle==1.8.5"
DEPENDENCIES = ("numpy<1.24", "protobuf==3.20.3", "six", "decorator", "gast==0.3.3", "astor", "funcsigs",
                "pyyaml", "requests", "prettytable", "objgraph", "Pillow", "scipy", "nltk", "rarfile")
CV2_STUB = '"""An empty stand-in for OpenCV: Fluid 1.8.5\'s import wants cv2, the tests never use it."""\n'
# What the marker records; an environment built from another recipe is rebuilt.
RECIPE = {"python": "3.8", "paddle": PADDLE, "dependencies": list(DEPENDENCIES), "cv2": "stub in site-packages",
          "core": "core_noavx.so (core_avx.so renamed .aside)"}
MARKER = "placegroup-fluid18.json"

# NOTE(fluid18-noavx): Fluid 1.8.5 ships two cores and picks core_avx.so whenever /proc/cpuinfo
# mentions avx. On the machines these tests run on, that core crashes in some comparisons and
# gives numbers that differ from its own non-AVX core (its lstm_grad, for one: see
# tests/test_paddle_programs.py); the comparisons are written against core_noavx.so. Fluid's
# paddle/fluid/core.py falls back to core_noavx.so when core_avx.so is absent (it prints a
# warning saying so), hence the rename. The non-AVX core has a bug of its own: pad_grad (and
# pad_constant_like's Y gradient) gets one element wrong (a 2x3 X padded by [1, 0, 2, 1]:
# X@GRAD[1, 0]), where the AVX core and placegroup give the slice of Out@GRAD.

# Subprocesses of the build get the caller's environment without what would make the 3.8
# interpreter read another Python's modules.
_DROP = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "PYTHONNOUSERSITE")


class Fluid18EnvError(RuntimeError):
    """The Fluid 1.8.5 environment cannot be built (no Python 3.8, a failed install, ...)."""


@dataclasses.dataclass(frozen=True)
class Fluid18Env:
    """A complete Fluid 1.8.5 environment.

    Attributes:
        python: its interpreter (``<cache>/env/bin/python``), the value for
            ``PLACEGROUP_PADDLE18_PYTHON``.
        built: True when this call built it, False when it reused a complete one.
    """
    python: Path
    built: bool

    def environ(self, base: dict | None = None) -> dict:
        """``base`` (default ``os.environ``) with ``PLACEGROUP_PADDLE18_PYTHON`` naming it."""
        return {**(os.environ if base is None else base), PYTHON_VAR: str(self.python)}


def cache_dir() -> Path:
    """The cache folder: ``PLACEGROUP_FLUID18_CACHE``, else ``~/.cache/placegroup/fluid-1.8.5``."""
    return Path(os.environ.get(CACHE_VAR) or DEFAULT_CACHE).expanduser().resolve()


def base_python() -> Path:
    """pyenv's Python 3.8: ``$PYENV_ROOT/versions/3.8.18``, else the newest 3.8.x there.

    Raises:
        Fluid18EnvError: no Python 3.8 under pyenv, with the command that installs one.
    """
    root = Path(os.environ.get("PYENV_ROOT") or "~/.pyenv").expanduser()
    found = [Path(p) for p in glob.glob(str(root / "versions" / "3.8.*" / "bin" / "python3.8"))]
    found.sort(key=lambda p: (p.parent.parent.name != PYENV_VERSION,
                              [-int(x) for x in p.parent.parent.name.split(".") if x.isdigit()]))
    if not found:
        raise Fluid18EnvError(
            f"the Fluid 1.8.5 environment needs Python 3.8 (paddlepaddle 1.8.5 has no wheel for newer "
            f"Pythons) and there is none under {root}/versions/3.8.*/bin/python3.8; install it with "
            f"`pyenv install {PYENV_VERSION}` (or set PYENV_ROOT to where pyenv keeps its Pythons)")
    return found[0]


def _log(msg: str) -> None:
    print(f"fluid18_env: {msg}", file=sys.stderr, flush=True)


def _run(cmd: list, what: str, timeout: float, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k not in _DROP}
    try:
        proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                              env={**env, "GLOG_minloglevel": "3", "CUDA_VISIBLE_DEVICES": ""})
    except subprocess.TimeoutExpired as e:
        raise Fluid18EnvError(f"{what}: `{shlex.join(map(str, cmd))}` ran past {timeout:.0f} s") from e
    if proc.returncode != 0:
        raise Fluid18EnvError(f"{what}: `{shlex.join(map(str, cmd))}` exited with {proc.returncode}:\n"
                              f"{(proc.stdout + proc.stderr)[-3000:]}")
    return proc.stdout


_CHECK = ("import paddle, paddle.fluid as fluid\n"
          "assert paddle.__version__ == '1.8.5', paddle.__version__\n"
          "print(fluid.core.__file__)\n")


def _import_check(python: Path, cwd: Path) -> None:
    """Raises Fluid18EnvError unless ``python`` imports Fluid 1.8.5 from its non-AVX core."""
    core = _run([python, "-c", _CHECK], "importing paddle.fluid", 300, cwd).strip().splitlines()
    if not core or not core[-1].endswith("core_noavx.so"):
        raise Fluid18EnvError(f"paddle.fluid loaded {core[-1] if core else 'no core'}, not core_noavx.so "
                              f"(NOTE(fluid18-noavx) in tests/fluid18_env.py)")


def _complete(cache: Path) -> bool:
    """Whether ``cache/env`` was built from this RECIPE and still imports Fluid 1.8.5."""
    python, marker = cache / "env" / "bin" / "python", cache / "env" / MARKER
    try:
        recorded = json.loads(marker.read_text())["recipe"]
    except (OSError, ValueError, KeyError):
        return False
    if recorded != RECIPE:
        _log(f"{cache / 'env'} was built from another recipe; rebuilding it")
        return False
    try:
        _import_check(python, cache)
    except Fluid18EnvError as e:
        _log(f"{cache / 'env'} is broken ({e}); rebuilding it")
        return False
    return True


def _build(cache: Path, base: Path) -> None:
    env = cache / "env"
    shutil.rmtree(env, ignore_errors=True)
    python = env / "bin" / "python"
    steps = [([base, "-m", "venv", env], "making the venv", 300),
             ([python, "-m", "pip", "install", "-q", "--no-deps", PADDLE], f"pip install {PADDLE}", 1800),
             ([python, "-m", "pip", "install", "-q", *DEPENDENCIES], "pip install Fluid's dependencies", 1800)]
    for cmd, what, timeout in steps:
        _log(what)
        _run(cmd, what, timeout, cache)
    site = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     "finding site-packages", 60, cache).strip())
    (site / "cv2.py").write_text(CV2_STUB)
    avx = site / "paddle" / "fluid" / "core_avx.so"
    if avx.exists():  # NOTE(fluid18-noavx)
        avx.rename(avx.with_name("core_avx.so.aside"))
    _log("checking that it imports paddle.fluid 1.8.5 (non-AVX core)")
    _import_check(python, cache)
    freeze = _run([python, "-m", "pip", "freeze"], "pip freeze", 120, cache).split()
    tmp = env / (MARKER + ".tmp")
    tmp.write_text(json.dumps({"recipe": RECIPE, "base": str(base), "freeze": freeze}, indent=1))
    tmp.replace(env / MARKER)  # the marker appears whole, and last


def ensure(cache: Path | None = None, rebuild: bool = False) -> Fluid18Env:
    """Builds the Fluid 1.8.5 environment in ``cache``, or reuses it when it is complete.

    Complete means: its marker records this module's RECIPE and its python imports Fluid 1.8.5
    from the non-AVX core. Anything else (absent, half built by a run that was killed, broken
    since) is deleted and built again.

    Args:
        cache: the cache folder; default :func:`cache_dir`.
        rebuild: build it again even when it is complete.

    Returns:
        The environment; ``.python`` is the value for ``PLACEGROUP_PADDLE18_PYTHON``.

    Raises:
        Fluid18EnvError: no pyenv Python 3.8, or a step failed (the message has its output).

    Thread-safety: safe across processes (an exclusive lock on ``cache/lock``); a caller waits
    while another builds, then reuses what it built.
    """
    cache = Path(cache).expanduser().resolve() if cache is not None else cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _log(f"another process is building {cache}; waiting for it")
            fcntl.flock(lock, fcntl.LOCK_EX)
        if not rebuild and _complete(cache):
            return Fluid18Env(cache / "env" / "bin" / "python", built=False)
        base, started = base_python(), time.monotonic()
        _log(f"building the Fluid 1.8.5 environment in {cache / 'env'} (a few minutes; ~100 MB download)")
        _build(cache, base)
        _log(f"built in {time.monotonic() - started:.0f} s")
        return Fluid18Env(cache / "env" / "bin" / "python", built=True)


def main(argv: list | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.fluid18_env",
        description="Build (or reuse) the PaddlePaddle Fluid 1.8.5 environment the comparison tests "
                    "run; print the line that points PLACEGROUP_PADDLE18_PYTHON at it.")
    parser.add_argument("--cache", type=Path, help=f"the cache folder (default: ${CACHE_VAR} or {DEFAULT_CACHE})")
    parser.add_argument("--rebuild", action="store_true", help="build it again even when it is complete")
    args = parser.parse_args(argv)
    try:
        env = ensure(args.cache, rebuild=args.rebuild)
    except Fluid18EnvError as e:
        print(f"fluid18_env: error: {e}", file=sys.stderr)
        return 1
    print(f"export {PYTHON_VAR}={shlex.quote(str(env.python))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
