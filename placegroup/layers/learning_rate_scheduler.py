"""Learning-rate schedules as ops in the program (the placement pass moves them)."""
from __future__ import annotations

__all__: list[str] = []
