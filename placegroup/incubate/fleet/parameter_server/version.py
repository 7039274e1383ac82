"""Which parameter-server fleet this build has (Fluid 1.8 ``...parameter_server.version``).

Fluid's build writes ``BUILD_MODE``: ``Mode.TRANSPILER`` for the open-source build,
``Mode.PSLIB`` for Baidu's PSLib one. placegroup's parameter-server fleet is the transpiler
one (``parameter_server.distribute_transpiler``), so ``is_transpiler()`` is True.

Example::

    from paddle.fluid.incubate.fleet.parameter_server.version import is_transpiler
    if is_transpiler():
        from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler import fleet
"""
from placegroup.tools.compat import install_gaps
from placegroup.incubate.fleet.base.fleet_base import Mode

__all__ = ["BUILD_MODE", "Mode", "is_transpiler"]

BUILD_MODE = Mode.TRANSPILER


def is_transpiler() -> bool:
    """Whether this build's parameter-server fleet is the transpiler one (always, here)."""
    return Mode.TRANSPILER == BUILD_MODE


install_gaps()
