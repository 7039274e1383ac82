"""Paddle 2.x's ``paddle.static``, as far as placegroup serves it: ``paddle.static.nn`` with
``sparse_embedding`` (the rest of Paddle 2.x's static API is not here; a Fluid 1.x script uses
``paddle.fluid``)."""
from placegroup.static import nn  # noqa: F401

__all__ = ["nn"]
