"""Record Fluid 1.8.5's module surface as data: module -> the public names a script may reach.

Run under a real PaddlePaddle 1.8.5, outside this repository so placegroup's ``paddle`` is not
on the path::

    cd /tmp && PYTHONPATH=/work/cv2stub /work/pd18/bin/python /work/main/scripts/record_fluid_surface.py

A module's names are its ``__all__`` plus every public attribute that is a function or class
defined under ``paddle`` (its ``__module__`` starts with ``paddle``); submodules are recorded as
modules of their own, not as names, and a name ``__all__`` lists but the module does not bind
(``fluid.MultiTrainer``, an AttributeError in Fluid too) is not one. A module Fluid itself
cannot import here (PSLib's, Python 2's) is recorded with no names. Every module under ``paddle.fluid`` that Fluid itself can
import is walked; which of them placegroup leaves out, and why, is
placegroup/tools/fluid_surface_exclusions.json, read by placegroup, not here.

Writes placegroup/tools/fluid_surface.json: module -> name -> the object's home in Fluid,
``"paddle.fluid.data_feeder:check_dtype"`` (where it is defined; ``""`` for a name bound to a
value, not a function or class). placegroup reads it to put each name it has at every module
path Fluid binds it, as one object (compat.install_surface).
"""
from __future__ import annotations

import importlib
import inspect
import json
import pathlib
import pkgutil
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
OUT = ROOT / "placegroup" / "tools" / "fluid_surface.json"


_OBJECTS: dict[str, int] = {}  # home -> id of the object first recorded under it


def home(obj) -> str:
    """Where Fluid defines ``obj``, unique per object: a function made by a factory (Fluid's
    activations, ``generate_activation_fn.<locals>.func``) is told apart by its ``__name__``;
    ``""`` for a value, or for a function a third-party decorator made."""
    if not (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)):
        return ""
    qualname = getattr(obj, "__qualname__", None) or ""
    if "<locals>" in qualname:
        qualname += f"@{obj.__name__}"
    module = getattr(obj, "__module__", None) or ""
    if not module.startswith("paddle"):  # made by a third-party decorator: no home in Fluid
        return ""
    found = f"{module}:{qualname}"
    if _OBJECTS.setdefault(found, id(obj)) != id(obj):
        raise AssertionError(f"two objects share the home {found}")
    return found


def names_of(module) -> list[str]:
    # a name of __all__ the module does not bind (fluid.MultiTrainer) is an AttributeError in Fluid too
    names = {n for n in getattr(module, "__all__", ()) if hasattr(module, n)}
    for attr, obj in vars(module).items():
        if attr.startswith("_") or inspect.ismodule(obj):
            continue
        if (inspect.isfunction(obj) or inspect.isclass(obj) or inspect.isbuiltin(obj)) and \
                (getattr(obj, "__module__", None) or "").startswith("paddle"):
            names.add(attr)
    return sorted(n for n in names if not inspect.ismodule(getattr(module, n, None)))


def walk(name: str, found: dict) -> None:
    if name in found:
        return
    try:
        module = importlib.import_module(name)
    except Exception as e:  # noqa: BLE001 - a module Fluid itself cannot import is kept, with no names
        print(f"cannot import {name}: {type(e).__name__}: {e}", file=sys.stderr)
        found[name] = {}
        return
    found[name] = {n: home(getattr(module, n, None)) for n in names_of(module)}
    for info in pkgutil.iter_modules(getattr(module, "__path__", []) or []):
        if not info.name.startswith(("_", "test")):
            walk(f"{name}.{info.name}", found)


def main() -> None:
    import paddle
    assert paddle.__version__ == "1.8.5", f"record under Paddle 1.8.5, not {paddle.__version__}"
    found = {}
    walk("paddle.fluid", found)
    data = {name[len("paddle."):]: names for name, names in sorted(found.items())}
    OUT.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUT}: {len(data)} modules, {sum(map(len, data.values()))} names")


if __name__ == "__main__":
    main()
