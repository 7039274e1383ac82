"""The package's layers: every import inside placegroup/, executor/, ops/ and comm/ goes to its
own layer or one below it, in the order of README's "Where things are" table.

The table is the one source of the order: each row's path column names the files and directories
of one layer (a directory holds everything under it, ``placegroup/*.py`` the top-level files no
other row names), top row lowest. Every import counts: module-level and in a function, ``import
a.b`` and ``from a import b``, relative ones too; ``from pkg import name`` counts as an import of
``pkg.name`` when that is a module. An exception is allowed only where README states it, as
"`importer.py` imports `imported.py`" in the text around the table.
"""
from __future__ import annotations

import ast
import fnmatch
import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
# the directories whose modules the layers cover -> the import name each installs as
CODE = {"placegroup": "placegroup", "executor": "placegroup.executor", "ops": "placegroup.ops",
        "comm": "placegroup.comm"}


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + len(heading))
    return text[start:end if end != -1 else len(text)]


def _readme_section() -> str:
    return _section((ROOT / "README.md").read_text(encoding="utf-8"), "## Where things are")


def readme_layers() -> list[tuple[str, list[str]]]:
    """(row label, path patterns) per row of README's table that names code, lowest first.

    A cell like ``placegroup/values.py``, ``errors.py`` gives ``placegroup/values.py`` and
    ``placegroup/errors.py``: a bare file name is in the directory of the path before it. Names
    that are not paths (``placegroup.ops``, the import name of ``ops/``) are skipped.
    """
    rows = []
    for line in _readme_section().splitlines():
        if not line.startswith("| `"):
            continue
        cell = line.split("|")[1]
        paths, here = [], ""
        for token in re.findall(r"`([^`]+)`", cell):
            if "/" in token:
                here = token.rsplit("/", 1)[0] + "/"
                paths.append(token)
            elif token.endswith(".py"):
                paths.append(here + token)
        paths = [p for p in paths if p.split("/")[0] in CODE]
        if paths:
            rows.append((cell.strip(), paths))
    return rows


def readme_exceptions() -> set[tuple[str, str]]:
    """The (importer, imported) file pairs README's text allows against the order."""
    return set(re.findall(r"`([\w/]+\.py)` imports `([\w/]+\.py)`", _readme_section()))


def modules() -> dict[str, pathlib.Path]:
    """Import name -> file, for every module of the four code directories."""
    found = {}
    for top, name in CODE.items():
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT / top).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            found[".".join([name, *parts])] = path
    return found


def _matches(rel: str, pattern: str) -> bool:
    if pattern.endswith("/"):
        return rel.startswith(pattern)
    if "*" in pattern:  # one level only: placegroup/*.py is the top-level files
        return rel.count("/") == pattern.count("/") and fnmatch.fnmatch(rel, pattern)
    return rel == pattern


def layer_of(path: pathlib.Path, layers) -> int | None:
    """The row index of the most specific pattern that holds ``path``, or None."""
    rel = path.relative_to(ROOT).as_posix()
    best = None
    for i, (_, patterns) in enumerate(layers):
        for pattern in patterns:
            if _matches(rel, pattern):
                score = (0 if "*" in pattern else 1, len(pattern))
                if best is None or score > best[0]:
                    best = (score, i)
    return None if best is None else best[1]


def imports(name: str, path: pathlib.Path, mods) -> list[tuple[int, str]]:
    """(line, imported module) for every import of a module of ``mods`` in ``path``."""
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = []

    def resolve(target: str) -> str | None:
        while target and target not in mods:
            target = target.rpartition(".")[0]
        return target or None

    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [resolve(a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[:len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            for a in node.names:
                full = f"{module}.{a.name}"
                targets.append(full if full in mods else resolve(module))
        out += [(node.lineno, t) for t in dict.fromkeys(targets) if t is not None and t != name]
    return out


def _rel(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_the_table_names_paths_that_exist():
    layers = readme_layers()
    assert len(layers) >= 10, f"README's table gave too few layers: {layers}"
    for label, patterns in layers:
        for pattern in patterns:
            found = list(ROOT.glob(pattern)) if "*" in pattern else [ROOT / pattern]
            assert found and all(p.exists() for p in found), f"README's row {label} names {pattern}, not in the tree"


def test_every_module_belongs_to_a_layer():
    layers = readme_layers()
    lost = [_rel(p) for p in modules().values() if layer_of(p, layers) is None]
    assert not lost, f"modules in no layer of README's table (add a row or move them): {lost}"


def test_no_module_imports_a_layer_above_its_own():
    layers, mods = readme_layers(), modules()
    allowed = readme_exceptions()
    bad, used = [], set()
    for name, path in mods.items():
        mine = layer_of(path, layers)
        for line, target in imports(name, path, mods):
            theirs = layer_of(mods[target], layers)
            if mine is None or theirs is None or theirs <= mine:
                continue
            pair = (_rel(path), _rel(mods[target]))
            if pair in allowed:
                used.add(pair)
                continue
            bad.append(f"{_rel(path)}:{line}: layer {layers[mine][0]} imports {target} "
                       f"of layer {layers[theirs][0]}, above it")
    assert not bad, "imports of a higher layer:\n" + "\n".join(bad)
    assert used == allowed, f"README allows imports that no longer happen: {sorted(allowed - used)}"


def test_the_exceptions_are_stated_in_docs_ir_too():
    ir = _section((ROOT / "docs" / "ir.md").read_text(encoding="utf-8"), "## Where things live")
    for importer, imported in readme_exceptions():
        assert importer in ir and imported in ir, f"docs/ir.md does not state README's exception {importer}"


def test_the_facade_modules_only_re_export():
    """A façade module (placegroup/*.py but __init__ and __main__) holds a docstring, imports and
    a literal ``__all__``: no code of its own."""
    layers = readme_layers()
    facade = len(layers) - 1
    for path in sorted((ROOT / "placegroup").glob("*.py")):
        if layer_of(path, layers) != facade or path.name in ("__init__.py", "__main__.py"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            ok = isinstance(node, (ast.Import, ast.ImportFrom)) or (
                isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)) or (
                isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["__all__"]
                and isinstance(node.value, ast.List) and all(isinstance(e, ast.Constant) for e in node.value.elts))
            assert ok, f"{_rel(path)}:{node.lineno}: a façade module only re-exports the layer with its code"


@pytest.mark.parametrize("snippet, expected", [
    ("from placegroup import config", "placegroup.config"),
    ("from placegroup.executor import Executor", "placegroup.executor"),
    ("from . import registry", "placegroup.ops.registry"),
    ("from .registry import OpDef", "placegroup.ops.registry"),
    ("import placegroup.ir.framework as f", "placegroup.ir.framework"),
    ("def f():\n    from placegroup.ir import unique_name", "placegroup.ir.unique_name"),
])
def test_imports_are_resolved_as_python_does(tmp_path, snippet, expected):
    mods = modules()
    path = tmp_path / "probe.py"
    path.write_text(snippet + "\n", encoding="utf-8")
    assert [t for _, t in imports("placegroup.ops.probe", path, mods)] == [expected]
