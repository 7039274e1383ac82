"""Fluid 1.8.5's module tree as data: every module a script can import, its names, and the home
of each name's object; and what placegroup leaves out of it, and why.

``fluid_surface.json`` is recorded from Fluid 1.8.5 itself (scripts/record_fluid_surface.py):
module label -> name -> home, where the home is the module and qualified name Fluid defines the
object under, ``"paddle.fluid.data_feeder:check_dtype"`` (``""`` for a name bound to a plain
value). Two names with one home are one object in Fluid (``fluid.layers.nn.concat``,
``fluid.layers.tensor.concat`` and ``fluid.layers.concat``), and so they are in placegroup.

``fluid_surface_exclusions.json`` names what is left out, by module or by object, each with a
category and a reason. A name is left out when its own path, or the home of its object, lies in
a module left out (``fluid.Conv2D`` is dygraph's ``Conv2D``), or when its object is named
(``fluid.layers.control_flow.While`` covers ``fluid.layers.While`` too). Only the categories
dygraph, core, detection, contrib and control-flow are out of scope; "other" counts as missing.

Pure data: nothing here imports the rest of placegroup.
"""
from __future__ import annotations

import json
import pathlib
from typing import NamedTuple

_HERE = pathlib.Path(__file__).parent

# label -> name -> home ("paddle.fluid.layers.tensor:concat", or "" for a value)
HOMES: dict[str, dict[str, str]] = json.loads((_HERE / "fluid_surface.json").read_text(encoding="utf-8"))
SURFACE: dict[str, frozenset[str]] = {label: frozenset(names) for label, names in HOMES.items()}

# Paths of Fluid 1.5 and 1.6 that 1.7 moved, and 1.8 kept there: old module label -> name -> the 1.8 module that has it
# (``fluid.layers.nn.dynamic_gru`` -> ``fluid.layers.rnn``). fluid_moved.json says how it was made.
MOVED: dict[str, dict[str, str]] = {
    label: {name: entry["to"] for name, entry in names.items()}
    for label, names in json.loads((_HERE / "fluid_moved.json").read_text(encoding="utf-8"))["moved"].items()}

_EXCLUDED = json.loads((_HERE / "fluid_surface_exclusions.json").read_text(encoding="utf-8"))
CATEGORIES: dict[str, str] = _EXCLUDED["categories"]
OUT_OF_SCOPE = frozenset({"dygraph", "core", "detection", "contrib", "control-flow"})


class Exclusion(NamedTuple):
    """Why a module or name of Fluid is not in placegroup: ``category`` (a key of CATEGORIES)
    and ``reason``; ``key`` is the module or object the exclusion file names."""
    key: str
    category: str
    reason: str


def current_path(label: str, name: str) -> tuple[str, str]:
    """Where Fluid 1.8.5 has ``label.name``: itself, or the module 1.8 moved it to.

    Example:
        >>> current_path("fluid.layers.nn", "dynamic_gru")
        ('fluid.layers.rnn', 'dynamic_gru')
    """
    if name not in HOMES.get(label, ()) and name in MOVED.get(label, ()):
        return MOVED[label][name], name
    return label, name


def label_of_home(home: str) -> str:
    """``"paddle.fluid.layers.nn:concat"`` -> ``"fluid.layers.nn.concat"``; ``""`` for no home."""
    module, _, qualname = home.partition(":")
    if not module.startswith("paddle."):
        return ""
    return f"{module[len('paddle.'):]}.{qualname}"


def module_exclusion(label: str) -> Exclusion | None:
    """The exclusion of module ``label`` (``"fluid.contrib.slim.prune"``), or of a package above it."""
    parts = label.split(".")
    for i in range(len(parts), 0, -1):
        key = ".".join(parts[:i])
        found = _EXCLUDED["modules"].get(key)
        if found is not None:
            return Exclusion(key, found["category"], found["reason"])
    return None


def exclusion(label: str, name: str) -> Exclusion | None:
    """Why ``label.name`` is left out, or None when placegroup must have it.

    Example:
        >>> exclusion("fluid.layers", "While").category
        'control-flow'
        >>> exclusion("fluid", "Conv2D").key
        'fluid.dygraph'
        >>> exclusion("fluid.layers.nn", "concat") is None
        True
    """
    found = module_exclusion(label)
    if found is not None:
        return found
    label, name = current_path(label, name)
    home = label_of_home(HOMES.get(label, {}).get(name, ""))
    for key in (home, f"{label}.{name}"):
        entry = _EXCLUDED["names"].get(key)
        if entry is not None:
            return Exclusion(key, entry["category"], entry["reason"])
    if home:
        module = home.rpartition(".")[0]
        while module.count(".") and module not in HOMES:  # a class's method: Foo.bar -> the module
            module = module.rpartition(".")[0]
        return module_exclusion(module)
    return None


def sharing_home() -> dict[str, list[tuple[str, str]]]:
    """home -> every (label, name) that binds the object, for the homes bound more than once."""
    out: dict[str, list[tuple[str, str]]] = {}
    for label, names in HOMES.items():
        for name, home in names.items():
            if home:
                out.setdefault(home, []).append((label, name))
    return {home: paths for home, paths in out.items() if len(paths) > 1}
