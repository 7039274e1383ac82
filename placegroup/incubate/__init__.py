"""Fluid 1.8's ``fluid.incubate`` modules (``incubate.fleet``: Fleet's parameter-server API)."""
