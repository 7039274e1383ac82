"""OpCases (being written); tests/op_cases.py gathers them."""
from __future__ import annotations

from tests.op_case import OpCase  # noqa: F401

CASES: list[OpCase] = []
