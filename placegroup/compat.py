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

import importlib
import importlib.abc
import importlib.util
import os
import runpy
import sys
import types

from placegroup.compat_names import FLUID_18, SURFACE
from placegroup.errors import ConfigError, ModuleNotInPlacegroup, NotImplementedInPlacegroup

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
}

# The module of placegroup that stands for each module of FLUID_18 (compat table, gaps).
MODULES = {label: "placegroup" + label[len("fluid"):] if label.startswith("fluid") else
           "placegroup" + label[len("paddle"):] for label in FLUID_18}
MODULES["fluid.unique_name"] = "placegroup.ir.unique_name"


def label_of(paddle_name: str) -> str:
    """How messages and the compat table name a Paddle module: ``fluid.layers``, ``paddle.reader``."""
    return paddle_name[len("paddle."):] if paddle_name.startswith("paddle.fluid") else paddle_name


def home_of(paddle_name: str) -> str | None:
    """placegroup's module name for a Paddle module name (NOTE(paddle-alias)), or None."""
    for prefix in sorted(ALIASES, key=len, reverse=True):
        if paddle_name == prefix or paddle_name.startswith(prefix + "."):
            return ALIASES[prefix] + paddle_name[len(prefix):]
    return None


def not_implemented(label: str, name: str) -> NotImplementedInPlacegroup:
    """The error for a Fluid 1.8 name placegroup lacks, e.g. ``fluid.layers.conv2d``."""
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
        if name in FLUID_18.get(self.label, ()) or name in SURFACE.get(self.label, ()):
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


def surface_object(label: str, name: str):
    """placegroup's object for Fluid's ``label.name``: the name as the enclosing package exports
    it (``fluid.layers.nn.concat`` -> ``placegroup.layers.concat``, ``fluid.framework.Program``
    -> ``placegroup.Program``), or None where placegroup has no such name."""
    module = sys.modules.get(home_of("paddle." + label.rpartition(".")[0]))
    obj = vars(module).get(name) if module is not None else None
    return None if isinstance(obj, types.ModuleType) else obj


def install_surface() -> None:
    """Make every name of Fluid's module tree (``SURFACE``) that placegroup has reachable at
    Fluid's module path, as the same object: ``fluid.layers.nn.concat is fluid.layers.concat``.

    Only modules already imported are filled in, and a name a module defines itself is kept.
    placegroup/__init__.py calls this once, before ``install_gaps``.
    """
    for label, names in SURFACE.items():  # fluid.layers is the union of its modules: fluid.load is not its load
        module = sys.modules.get(home_of("paddle." + label)) if label.count(".") and label != "fluid.layers" else None
        for name in names - vars(module).keys() if module is not None else ():
            obj = surface_object(label, name)
            if obj is not None:
                setattr(module, name, obj)


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
            parent, _, leaf = label_of(name).rpartition(".")
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
            import placegroup
            module.fluid, module.batch = placegroup, placegroup.batch
            module.reader, module.dataset = placegroup.reader, placegroup.dataset
        else:
            module.__spec__ = module.__spec__.loader_state


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


def run_script(script: str, args: list[str]) -> None:
    """Run ``script`` in this process as ``python script ARGS`` would, with ``alias_paddle()``.

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
    alias_paddle()
    sys.argv = [script, *args]
    sys.path[0:1] = [os.path.dirname(os.path.abspath(script))]
    runpy.run_path(script, run_name="__main__")
