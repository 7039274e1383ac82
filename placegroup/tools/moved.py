"""Module paths that moved when the package was layered, still importable under their old names.

``import placegroup.framework`` (and the other names below) gives the module's new home, the
same module object, with a ``DeprecationWarning`` naming it; scripts written against the old
paths keep running while their authors move. Nothing below imports these names itself.

Thread-safety: the finder only reads its table.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys
import warnings

MOVED = {
    "placegroup.framework": "placegroup.ir.framework",
    "placegroup.place_group": "placegroup.ir.place_group",
    "placegroup.places": "placegroup.ir.places",
    "placegroup.cluster": "placegroup.ir.cluster",
    "placegroup.serialize": "placegroup.ir.serialize",
    "placegroup.verify": "placegroup.ir.verify",
    "placegroup.printer": "placegroup.ir.printer",
    "placegroup.checkpoint": "placegroup.io.checkpoint",
    "placegroup.checkpoint_store": "placegroup.io.checkpoint_store",
    "placegroup.checkpoint_reslice": "placegroup.io.checkpoint_reslice",
    "placegroup.cli": "placegroup.tools.cli",
    "placegroup.dump": "placegroup.tools.dump",
    "placegroup.launch": "placegroup.tools.launch",
    "placegroup.from_env": "placegroup.tools.from_env",
    "placegroup.resources": "placegroup.tools.resources",
    "placegroup.ops.selected_rows": "placegroup.values",
    "placegroup.atomic_files": "placegroup.util.atomic_files",
    "placegroup.averaging": "placegroup.runtime.averaging",
    "placegroup.compat_names": "placegroup.tools.compat_names",
    "placegroup.dataset_factory": "placegroup.datafeed.dataset_factory",
    "placegroup.dtype_checks": "placegroup.datafeed.dtype_checks",
    "placegroup.failures": "placegroup.util.failures",
    "placegroup.fields": "placegroup.util.fields",
    "placegroup.fluid_surface": "placegroup.tools.fluid_surface",
    "placegroup.io.data_loader": "placegroup.datafeed.data_loader",
    "placegroup.io.loader_base": "placegroup.datafeed.loader_base",
    "placegroup.multislot": "placegroup.datafeed.multislot",
    "placegroup.optimizer_base": "placegroup.model.optimizer_base",
    "placegroup.optimizer_wrappers": "placegroup.model.optimizer_wrappers",
    "placegroup.ports": "placegroup.util.ports",
    "placegroup.program_stats": "placegroup.util.program_stats",
    "placegroup.reader_decorators": "placegroup.datafeed.reader_decorators",
    "placegroup.reader_registry": "placegroup.datafeed.reader_registry",
    "placegroup.sample_codec": "placegroup.util.sample_codec",
    "placegroup.switches": "placegroup.model.switches",
    "placegroup.text_format": "placegroup.util.text_format",
    "placegroup.var_format": "placegroup.util.var_format",
}


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old name of ``MOVED`` and loads it as the module at its new one."""

    def find_spec(self, name, path=None, target=None):
        if name not in MOVED:
            return None
        home = importlib.util.find_spec(MOVED[name])
        return importlib.util.spec_from_loader(name, self, origin=home.origin if home else None)

    def create_module(self, spec):
        new = MOVED[spec.name]
        warnings.warn(f"{spec.name} moved to {new}; import it from there", DeprecationWarning, stacklevel=3)
        module = importlib.import_module(new)
        spec.loader_state = module.__spec__  # importlib sets __spec__ to the old name's: put it back
        return module

    def exec_module(self, module) -> None:
        """The module is its new home's, already executed."""
        module.__spec__ = module.__spec__.loader_state

    def get_code(self, name):
        """The new home's code, so that ``python -m placegroup.cli`` still runs the CLI."""
        spec = importlib.util.find_spec(MOVED[name])
        return spec.loader.get_code(spec.name)


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
        sys.meta_path.append(_MovedFinder())
