"""Tensor layers: constants, globals, casts, concatenation and the like."""
from __future__ import annotations

__all__: list[str] = []
