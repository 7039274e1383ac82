"""Packaging: every package directory is in pyproject's ``packages``, and a plain
``pip install .`` gives one import name that works from any directory, the root included."""
import os
import shutil
import subprocess
import sys
import tomllib

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# top-level directory -> the import name it installs as
TOP = {"placegroup": "placegroup", "executor": "placegroup.executor", "ops": "placegroup.ops",
       "comm": "placegroup.comm"}


def _pyproject():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)


def _package_dirs():
    """Import name of every directory holding an ``__init__.py`` under the four top dirs."""
    found = []
    for top, name in TOP.items():
        for here, dirs, files in os.walk(os.path.join(ROOT, top)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
            if "__init__.py" in files:
                rel = os.path.relpath(here, os.path.join(ROOT, top))
                found.append(name if rel == "." else name + "." + rel.replace(os.sep, "."))
    return found


def test_packages_list_every_package_directory():
    setup = _pyproject()["tool"]["setuptools"]
    listed = setup["packages"]
    assert len(listed) == len(set(listed)), f"pyproject lists a package twice: {listed}"
    assert sorted(listed) == sorted(_package_dirs())
    assert setup["package-dir"] == {v: k for k, v in TOP.items() if k != "placegroup"}


def test_console_script_points_at_the_cli():
    assert _pyproject()["project"]["scripts"] == {"placegroup": "placegroup.tools.cli:main"}


def _run(cmd, cwd, env):
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, f"{cmd} failed:\n{out.stdout}\n{out.stderr}"
    return out.stdout


def _build_flags():
    """Build with what is installed when it can (no download); else let pip fetch pyproject's
    build requirements into an isolated environment, as ``.ci/run``'s install does."""
    try:
        import setuptools
    except ImportError:
        return []
    have = tuple(int(p) for p in setuptools.__version__.split(".")[:2] if p.isdigit())
    if have < (70, 1):  # setuptools < 70.1 needs the wheel package for bdist_wheel
        try:
            import wheel  # noqa: F401
        except ImportError:
            return []
    need = _pyproject()["build-system"]["requires"][0].partition(">=")[2] or "0"
    return ["--no-build-isolation"] if have >= tuple(int(p) for p in need.split(".")) else []


def _running_site_dirs():
    """The directories the running environment installs packages into (a venv's own, plus the
    base ones when it was made with ``--system-site-packages``; a system Python's, plus its user
    site when enabled)."""
    import site

    dirs = list(site.getsitepackages())
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    return [d for d in dirs if os.path.isdir(d)]


@pytest.mark.slow
def test_pip_install_works_from_root_and_elsewhere(tmp_path):
    """The wheel pip builds from the repository installs as one import name that works from any
    directory, the root included, and its ``placegroup`` console script runs.

    How the environment is made, so that this passes whether pytest runs in a venv or a system
    Python, without downloading the dependencies: the wheel is built by the running interpreter
    (with its own setuptools when they are recent enough, else pip fetches the build
    requirements as any ``pip install .`` would), then installed with ``--no-deps --no-index``
    into a fresh venv made by the same interpreter. That venv sees the running environment's
    packages (numpy, pyzmq, msgpack, ...) through a ``.pth`` file listing its site directories.
    Not ``--system-site-packages``: it exposes the base interpreter's packages, not those of the
    venv pytest runs in. Not ``PYTHONPATH``: it would come before the venv's own site-packages,
    so an installed copy of placegroup there could shadow the one under test. A ``.pth`` path
    comes after the venv's own, and its directories' own ``.pth`` files (such as the editable
    install's import hook) are not run, so the checkout stays out of sight."""
    # The build runs from a copy of the repository so that its build/ and *.egg-info do not
    # land in the working tree; the copy's root is the "repository root" below.
    repo = tmp_path / "repo"
    shutil.copytree(ROOT, repo, ignore=shutil.ignore_patterns(
        ".git", "build", "dist", "*.egg-info", "__pycache__", ".venv", ".hypothesis",
        ".pytest_cache", ".benchmarks"))
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    wheels = tmp_path / "wheels"
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", *_build_flags(), "-w", str(wheels), "."],
         repo, env)
    (wheel,) = wheels.glob("placegroup-*.whl")
    venv = tmp_path / "venv"
    _run([sys.executable, "-m", "venv", str(venv)], tmp_path, env)
    py, script = venv / "bin" / "python", venv / "bin" / "placegroup"
    purelib = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], tmp_path, env).strip()
    with open(os.path.join(purelib, "running_environment.pth"), "w") as f:
        f.write("".join(d + "\n" for d in _running_site_dirs()))
    _run([str(py), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)], tmp_path, env)
    probe = ("import placegroup, placegroup.ops, placegroup.executor, placegroup.comm, "
             "placegroup.io, placegroup.tools.cli\n"
             "print(placegroup.__file__); print(placegroup.ops.__file__)\n"
             "print(placegroup.Executor is placegroup.executor.Executor)")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    top, ops, same = _run([str(py), "-c", probe], elsewhere, env).split()
    # from elsewhere, the installed copy, not the checkout (nor its editable install)
    assert top.startswith(str(venv)) and ops.startswith(str(venv)) and same == "True"
    top, ops, same = _run([str(py), "-c", probe], repo, env).split()
    assert top == str(repo / "placegroup" / "__init__.py") and same == "True"
    assert _run([str(script), "--version"], elsewhere, env).strip() == "placegroup 0.1.0"
    assert _run([str(py), "-m", "placegroup.tools.cli", "--version"], repo, env).strip() == "placegroup 0.1.0"


@pytest.mark.parametrize("old, new", [("placegroup.framework", "placegroup.ir.framework"),
                                      ("placegroup.launch", "placegroup.tools.launch"),
                                      ("placegroup.ops.selected_rows", "placegroup.values"),
                                      ("placegroup.fields", "placegroup.util.fields"),
                                      ("placegroup.io.data_loader", "placegroup.datafeed.data_loader")])
def test_a_moved_module_imports_under_its_old_name_with_a_warning(old, new):
    import importlib
    import sys

    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)


def test_the_old_cli_module_still_runs():
    out = subprocess.run([sys.executable, "-m", "placegroup.cli", "--version"], capture_output=True, text=True,
                         check=True).stdout
    assert out.startswith("placegroup ")
