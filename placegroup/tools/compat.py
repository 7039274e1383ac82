"""Running Fluid 1.x scripts unchanged: ``paddle`` and ``paddle.fluid`` as placegroup's modules.

``alias_paddle()`` makes ``import paddle``, ``import paddle.fluid as fluid`` and every submodule
under them (``paddle.fluid.layers``, ``paddle.fluid.io``, ``paddle.dataset.uci_housing``, ...)
give placegroup's own module objects: ``sys.modules["paddle.fluid"] is placegroup``. Nothing is
written to disk and nothing happens until it is called, so a real Paddle stays importable in
every other process. ``placegroup run script.py ARGS`` calls it and runs the script as
``python script.py ARGS`` would.

The other half is the honest gaps (``install_gaps``): a name Fluid 1.8 has and placegroup does
not (``fluid.layers.conv2d``) raises ``NotImplementedInPlacegroup`` saying so, a name Fluid
never had stays a plain AttributeError. docs/fluid_compat.md lists both, per module.

Thread-safety: call ``alias_paddle`` before starting threads that import; the finder itself
only reads its tables.
"""
from __future__ import annotations

import functools
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import runpy
import sys
import types

from placegroup.tools.compat_names import FLUID_18
from placegroup.tools.fluid_surface import (HOMES, MOVED, SURFACE, current_path, exclusion, module_exclusion,
                                            sharing_home)
from placegroup import config
from placegroup.errors import ConfigError, ModuleNotInPlacegroup, NotImplementedInPlacegroup

__all__ = ["alias_paddle", "facade", "home_of", "import_if_present", "install_gaps", "install_surface", "label_of",
           "not_implemented", "run_script", "surface_object", "unalias_paddle"]

# NOTE(paddle-alias): a Paddle module name maps to placegroup's by its longest prefix in this
# table, the rest of the name kept: paddle.fluid.layers -> placegroup.layers,
# paddle.dataset.uci_housing -> placegroup.dataset.uci_housing. The entries past the first three
# are Fluid modules that live elsewhere in placegroup, or are imported only when first used.
ALIASES = {
    "paddle.fluid": "placegroup",
    "paddle.reader": "placegroup.reader",
    "paddle.dataset": "placegroup.dataset",
    "paddle.fluid.framework": "placegroup.ir.framework",
    "paddle.fluid.unique_name": "placegroup.ir.unique_name",
    "paddle.fluid.incubate": "placegroup.incubate",  # imported on first use, as `fluid.incubate`
    # Paddle 2.x's names of tables keyed by raw ids (sparse_embedding and its entries)
    "paddle.distributed": "placegroup.distributed",
    "paddle.static": "placegroup.static",
}

# The module of placegroup that stands for each module of FLUID_18 (compat table, gaps).
MODULES = {label: "placegroup" + label[len("fluid"):] if label.startswith("fluid") else
           "placegroup" + label[len("paddle"):] for label in FLUID_18}
MODULES["fluid.unique_name"] = "placegroup.ir.unique_name"


_SHARED = sharing_home()
# package label -> its submodules that Fluid shadows with a name of the package (NOTE(shadowed-module))
_SHADOWED: dict[str, list[str]] = {}
for _label in HOMES:
    _parent, _, _leaf = _label.rpartition(".")
    if _leaf in HOMES.get(_parent, ()):
        _SHADOWED.setdefault(_parent, []).append(_label)


def label_of(paddle_name: str) -> str:
    """How messages and the compat table name a Paddle module: ``fluid.layers``, ``paddle.reader``."""
    return paddle_name[len("paddle."):] if paddle_name.startswith("paddle.fluid") else paddle_name


@functools.lru_cache(maxsize=None)
def home_of(paddle_name: str) -> str | None:
    """placegroup's module name for a Paddle module name (NOTE(paddle-alias)), or None."""
    for prefix in sorted(ALIASES, key=len, reverse=True):
        if paddle_name == prefix or paddle_name.startswith(prefix + "."):
            return ALIASES[prefix] + paddle_name[len(prefix):]
    return None


def not_implemented(label: str, name: str) -> NotImplementedInPlacegroup:
    """The error for a Fluid 1.8 name placegroup lacks, e.g. ``fluid.layers.While``: why, when
    the name is left out on purpose (placegroup/tools/fluid_surface_exclusions.json)."""
    sub = f"{label}.{name}"
    why = module_exclusion(sub) if sub in HOMES else exclusion(label, name) if label in HOMES else None
    if why is not None:
        return NotImplementedInPlacegroup(f"placegroup does not implement {label}.{name}: {why.reason} "
                                          f"({why.category}; docs/fluid_compat.md)")
    return NotImplementedInPlacegroup(f"placegroup does not implement {label}.{name} yet "
                                      "(docs/fluid_compat.md)")


class _Gaps:
    """A module's ``__getattr__``: Fluid's names it lacks raise ``not_implemented``."""

    def __init__(self, label: str, module_name: str) -> None:
        self.label, self.module_name = label, module_name

    def __call__(self, name: str):
        moved = ALIASES.get(f"paddle.{self.label}.{name}")
        if moved is not None:  # a Fluid module placegroup keeps under another path
            return importlib.import_module(moved)
        sub = facade(f"{self.label}.{name}")  # a Fluid module placegroup has no module of its own for
        if sub is not None:
            return sub
        if (name in HOMES.get(self.label, ()) or name in MOVED.get(self.label, ())) and \
                exclusion(self.label, name) is None:
            obj = surface_object(self.label, name, load=True)  # defined in a module not imported yet
            if obj is not None:
                setattr(sys.modules[self.module_name], name, obj)
                return obj
        if name in FLUID_18.get(self.label, ()) or name in SURFACE.get(self.label, ()) or \
                name in MOVED.get(self.label, ()):
            raise not_implemented(self.label, name)
        raise AttributeError(f"module {self.module_name!r} has no attribute {name!r}")


def install_gaps() -> None:
    """Give each imported placegroup module of ``MODULES`` a ``__getattr__`` for Fluid's names.

    A module that defines its own ``__getattr__`` keeps it. placegroup/__init__.py calls this
    once, so ``import placegroup as fluid`` has the same honest gaps as ``import paddle.fluid``.

    Example:
        >>> import placegroup as fluid
        >>> hasattr(fluid.layers, "conv2d")
        False
    """
    for label, name in {**{label: home_of("paddle." + label) for label in SURFACE}, **MODULES}.items():
        module = sys.modules.get(name)
        if module is not None and "__getattr__" not in vars(module):
            module.__getattr__ = _Gaps(label, name)


def _bound_at(label: str, name: str, load: bool = False):
    """What placegroup's module for Fluid's ``label`` binds ``name`` to, if that module is
    imported (or, with ``load``, has a file to import) and the name is its own attribute (not a
    submodule), else None."""
    module = sys.modules.get(home_of("paddle." + label) or "")
    if module is None and load:
        module = import_if_present(home_of("paddle." + label))
    obj = vars(module).get(name) if module is not None else None
    return None if isinstance(obj, types.ModuleType) else obj


def import_if_present(name: str | None) -> types.ModuleType | None:
    """The module ``name``, imported if it is not yet, or None when there is no such module."""
    try:
        return importlib.import_module(name) if name and importlib.util.find_spec(name) else None
    except ModuleNotFoundError:  # a package above it is missing
        return None


def surface_object(label: str, name: str, load: bool = False):
    """placegroup's object for Fluid's ``label.name``, or None where placegroup has none.

    NOTE(one-object-per-home): Fluid binds one object at several paths (``fluid.layers.nn.concat``,
    ``fluid.layers.tensor.concat``, ``fluid.layers.concat``); the recorded home of each name says
    which. The object is looked for at the path itself, at its home, and at every other path Fluid
    binds it to, so a name placegroup defines once is the same object at all of them, and two
    objects Fluid keeps apart (``fluid.data`` and ``fluid.layers.data``) stay apart. A name bound
    to a plain value, with no home, is taken from the enclosing package.
    """
    label, name = current_path(label, name)
    home = HOMES.get(label, {}).get(name, "")
    paths = [(label, name)]
    if home:
        module, _, qualname = home.partition(":")
        if module.startswith("paddle.fluid") and "." not in qualname:
            paths.append((label_of(module), qualname))
        paths += _SHARED.get(home, ())
    else:
        paths.append((label.rpartition(".")[0], name))
    for i, path in enumerate(paths):
        obj = _bound_at(*path, load=load and i == 1)
        if obj is not None:
            return obj
    return None


def _fill(label: str, module: types.ModuleType) -> bool:
    """Bind in ``module`` each of Fluid's names for ``label`` that placegroup has; True if any."""
    added = False
    for name in (HOMES.get(label, {}).keys() | MOVED.get(label, {}).keys()) - vars(module).keys():
        obj = surface_object(label, name) if exclusion(label, name) is None else None
        if obj is not None:
            setattr(module, name, obj)
            added = True
    return added


def install_surface() -> None:
    """Make every name of Fluid's module tree that placegroup has reachable at Fluid's module
    path, as the same object (NOTE(one-object-per-home)): ``fluid.layers.nn.concat is
    fluid.layers.concat``, ``fluid.layers.io.program_guard is fluid.program_guard``.

    Only modules already imported are filled in (a Fluid module with no placegroup module of its
    own becomes a ``facade`` when first imported), and a name a module defines itself is kept.
    placegroup/__init__.py calls this once,
    before ``install_gaps``.
    """
    labels = [label for label in HOMES if module_exclusion(label) is None and home_of("paddle." + label) in sys.modules]
    while True:  # a name found through a module filled in this pass may fill another in the next
        added = [_fill(label, sys.modules[home_of("paddle." + label)]) for label in labels]
        if not any(added):
            return


def _adopt(label: str, module: types.ModuleType) -> types.ModuleType:
    """Give placegroup's module for Fluid's ``label``, imported after ``install_surface`` ran, the
    names it lacks and its gaps, as that did for the modules imported by then."""
    if label in HOMES and module_exclusion(label) is None:
        _fill(label, module)
        if "__getattr__" not in vars(module):
            module.__getattr__ = _Gaps(label, module.__name__)
    return module


def facade(label: str) -> types.ModuleType | None:
    """placegroup's module for Fluid's module ``label``: its own, given the names it lacks, or,
    where placegroup has no file there (``fluid.transpiler.details``, ``fluid.communicator``), a
    module built from placegroup's objects for the names Fluid binds there, registered under
    placegroup's name for it. None when Fluid has no such module or placegroup leaves it out.

    Example:
        >>> import placegroup
        >>> facade("fluid.layers.nn").concat is placegroup.layers.concat
        True
    """
    name = home_of("paddle." + label)
    if label not in HOMES or module_exclusion(label) is not None:
        return sys.modules.get(name)
    module = sys.modules.get(name) or import_if_present(name)
    if module is not None:  # placegroup has a module of its own there
        return _adopt(label, module)
    package = any(other.startswith(label + ".") for other in HOMES)
    module = types.ModuleType(name, f"Fluid 1.8's module paddle.{label}: placegroup's objects for its names.")
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=package)
    if package:
        module.__path__ = []
    sys.modules[name] = module
    parent = sys.modules.get(name.rpartition(".")[0])
    if parent is not None and not hasattr(parent, name.rpartition(".")[2]):  # NOTE(shadowed-module)
        setattr(parent, name.rpartition(".")[2], module)
    _fill(label, module)
    module.__getattr__ = _Gaps(label, name)
    return module


class _PaddleFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``paddle`` and ``paddle.*`` and loads each as placegroup's module (one object)."""

    def find_spec(self, name, path=None, target=None):
        if name == "paddle":
            return importlib.util.spec_from_loader(name, self, is_package=True)
        if not name.startswith("paddle."):
            return None
        home = home_of(name)
        found = importlib.util.find_spec(home) if home else None
        if found is None:
            label = label_of(name)
            if facade(label) is not None:
                return importlib.util.spec_from_loader(name, self, is_package=hasattr(sys.modules[home], "__path__"))
            why = module_exclusion(label) if label in HOMES else None
            if why is not None:
                raise ModuleNotInPlacegroup(f"placegroup does not implement paddle.{label}: {why.reason} "
                                            f"({why.category}; docs/fluid_compat.md)", name=name)
            parent, _, leaf = label.rpartition(".")
            if leaf in FLUID_18.get(parent, ()):
                raise ModuleNotInPlacegroup(str(not_implemented(parent, leaf)), name=name)
            return None
        return importlib.util.spec_from_loader(name, self, origin=found.origin,
                                               is_package=found.submodule_search_locations is not None)

    def create_module(self, spec):
        if spec.name == "paddle":
            return types.ModuleType("paddle", "PaddlePaddle's top level, as placegroup (placegroup.compat).")
        module = importlib.import_module(home_of(spec.name))
        spec.loader_state = module.__spec__  # importlib sets __spec__ to the alias's: put it back
        return module

    def exec_module(self, module) -> None:
        if module.__name__ == "paddle":
            # NOTE(facade-import): paddle.fluid is the façade itself, placegroup/__init__.py. This is
            # the one import of the façade from a layer below it (README, "Where things are").
            import placegroup
            module.fluid, module.batch = placegroup, placegroup.batch
            module.reader, module.dataset = placegroup.reader, placegroup.dataset
            module.__getattr__ = _paddle_submodule
        else:
            alias, module.__spec__ = module.__spec__.name, module.__spec__.loader_state
            _adopt(label_of(alias), module)
            for child in _SHADOWED.get(label_of(alias), ()):
                # NOTE(shadowed-module): Fluid's package binds a function over its submodule of the
                # same name (fluid.data is a function; paddle.fluid.data a module). Registered
                # here, `import paddle.fluid.data` finds the module in sys.modules, and importlib
                # does not set the package's `data` to it.
                sys.modules.setdefault(f"paddle.{child}", facade(child))


def _paddle_submodule(name: str):
    """``paddle.<name>`` on first use, for the Paddle 2.x modules placegroup aliases
    (``paddle.distributed.CountFilterEntry`` after a bare ``import paddle``, as in Paddle 2.x)."""
    if f"paddle.{name}" in ALIASES:
        return importlib.import_module(f"paddle.{name}")
    raise AttributeError(f"module 'paddle' has no attribute {name!r}")


def _ours(module) -> bool:
    return isinstance(getattr(module, "__spec__", None) and module.__spec__.loader, _PaddleFinder) or \
        getattr(module, "__name__", "").startswith("placegroup")


def alias_paddle() -> None:
    """Make ``import paddle`` and ``import paddle.fluid ...`` give placegroup's modules.

    Installs a finder at the front of ``sys.meta_path`` (once; calling again does nothing).
    ``paddle`` is a small module whose ``fluid`` is placegroup and whose ``batch``, ``reader``
    and ``dataset`` are placegroup's; every ``paddle.fluid.X`` is ``placegroup.X`` (the same
    object, imported once), with the exceptions in NOTE(paddle-alias). A Fluid module placegroup
    lacks fails to import with a message that says so. Nothing is written to disk.

    Raises:
        ConfigError: a real Paddle is already imported in this process.

    Example:
        >>> from placegroup.compat import alias_paddle
        >>> alias_paddle()
        >>> import paddle.fluid as fluid, placegroup
        >>> fluid is placegroup
        True
    """
    if any(isinstance(f, _PaddleFinder) for f in sys.meta_path):
        return
    real = sys.modules.get("paddle")
    if real is not None and not _ours(real):
        raise ConfigError(f"a real Paddle is already imported ({getattr(real, '__file__', real)}); "
                          "call alias_paddle() before anything imports paddle, or run the "
                          "script with `placegroup run`")
    sys.meta_path.insert(0, _PaddleFinder())  # before the path finder: an installed Paddle loses


def unalias_paddle() -> None:
    """Undo ``alias_paddle``: remove the finder and the ``paddle*`` entries it made (for tests).

    Example:
        >>> from placegroup.compat import alias_paddle, unalias_paddle
        >>> alias_paddle(); unalias_paddle()
    """
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _PaddleFinder)]
    for name in [n for n in sys.modules if n == "paddle" or n.startswith("paddle.")]:
        if _ours(sys.modules[name]):
            del sys.modules[name]


# NOTE(child-alias): a script run by ``placegroup run`` may start Python processes of its own:
# ``subprocess`` (``python worker.py``, ``python -m pkg.entry``), or ``multiprocessing`` with
# the spawn or forkserver start method. Each is a fresh interpreter that has not run
# ``alias_paddle``. The directory placegroup/_paddle_shim/ holds a ``paddle`` package that
# installs the alias when imported, so it is put on such a process's path: at the end of this
# process's ``sys.path`` (which multiprocessing hands to its children) and on ``PYTHONPATH``
# (which every child inherits). On ``PYTHONPATH`` it would come before site-packages, so it is
# added there only when no real Paddle is installed: a real Paddle beside placegroup is never
# shadowed in a child that did not ask for placegroup.
_SHIM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_paddle_shim")


def children_see_alias() -> None:
    """Make the Python processes this one starts import placegroup's ``paddle``
    (NOTE(child-alias)); calling it again does nothing."""
    if _SHIM not in sys.path:
        sys.path.append(_SHIM)
    paths = (config.raw("PYTHONPATH") or "").split(os.pathsep)
    if _SHIM in paths or _real_paddle() is not None:
        return
    config.set_for_children("PYTHONPATH", os.pathsep.join([_SHIM] + [p for p in paths if p]))


def _real_paddle() -> str | None:
    """Where an installed Paddle is, on this process's path without the shim, or None."""
    spec = importlib.machinery.PathFinder.find_spec("paddle", [p for p in sys.path if p != _SHIM])
    return None if spec is None else (spec.origin or str(spec.submodule_search_locations))


def run_script(script: str, args: list[str]) -> None:
    """Run ``script`` in this process as ``python script ARGS`` would, with ``alias_paddle()``;
    the Python processes it starts see the alias too (NOTE(child-alias)).

    ``sys.argv`` is ``[script, *args]``, ``__name__`` is ``"__main__"`` and ``sys.path[0]`` is
    the script's directory. The script's exceptions and ``SystemExit`` pass through.

    Args:
        script: path of a Python file.
        args: its command-line arguments.

    Raises:
        FileNotFoundError: ``script`` is not a file.

    Example:
        >>> run_script("train.py", ["--passes", "2"])  # doctest: +SKIP
    """
    if not os.path.isfile(script):
        raise FileNotFoundError(f"no script {script!r} to run")
    children_see_alias()
    alias_paddle()
    sys.argv = [script, *args]
    sys.path[0:1] = [os.path.dirname(os.path.abspath(script))]
    runpy.run_path(script, run_name="__main__")


def run_module(module: str, args: list[str]) -> None:
    """Run ``module`` in this process as ``python -m module ARGS`` would, with ``alias_paddle()``;
    the Python processes it starts see the alias too (NOTE(child-alias)).

    ``sys.argv`` is ``[the module's file, *args]``, ``__name__`` is ``"__main__"`` and
    ``sys.path[0]`` is the current directory.

    Raises:
        ImportError: no module ``module`` (raised by ``runpy``).

    Example:
        >>> run_module("paddlerec.run", ["-m", "config.yaml"])  # doctest: +SKIP
    """
    children_see_alias()
    alias_paddle()
    sys.argv = [module, *args]
    sys.path[0:1] = [os.getcwd()]
    runpy.run_module(module, run_name="__main__", alter_sys=True)
