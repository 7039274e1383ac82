"""The ``OpCase`` record and the samplers op tables share (STYLE.md rule 12).

``tests/op_cases.py`` gathers every table (its own and one per op family under
``tests/cases/``); ``tests/test_ops.py`` runs them. See op_cases.py for what a case checks.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import numpy as np


@dataclasses.dataclass(frozen=True)
class OpCase:
    """One op under test.

    Attributes:
        op: the op type.
        sample: ``rng -> {slot: array or [arrays]}`` (floats as float64).
        ref: ``(inputs, attrs) -> {slot: array or [arrays]}``, a numpy reference for every
            output; None when ``check`` tests properties instead (random ops).
        attrs: attrs beyond the OpDef's defaults.
        grad: input slots whose gradient is checked.
        grad_outs: output slots that get a random cotangent (default: every float output).
        errors: ``(inputs, attrs, ExcType, regex)`` tuples (see the module docstring).
        batch: input slots whose dim 0 ``infer`` must accept as -1 (default: the first input).
        check: ``(run, attrs) -> None`` property test; ``run(ins, attrs)`` runs the kernel.
        name: the variant, shown in the test id.
    """

    op: str
    sample: Callable[[np.random.Generator], dict] = lambda r: {}
    ref: Callable[[dict, dict], dict] | None = None
    attrs: dict = dataclasses.field(default_factory=dict)
    grad: tuple = ()
    grad_outs: tuple | None = None
    errors: tuple = ()
    batch: tuple | None = None
    check: Callable | None = None
    name: str = ""

    @property
    def id(self) -> str:
        return f"{self.op}-{self.name}" if self.name else self.op


# -- samplers and references ----------------------------------------------------------------


def N(r, *shape):
    return r.standard_normal(shape)


def away(r, *shape):
    """Reals with |x| in [0.2, 1.5]: away from kinks (relu) and poles (division)."""
    return r.choice([-1.0, 1.0], size=shape) * r.uniform(0.2, 1.5, size=shape)


def pos(r, *shape):
    return r.uniform(0.2, 1.5, size=shape)


def labels(r, n, c):
    return r.integers(0, c, size=(n, 1)).astype(np.int64)


def softmax(x, axis=-1):
    s = np.maximum(x - x.max(axis, keepdims=True), -64.0)  # Paddle clips here (ops/activation.py)
    e = np.exp(s)
    return e / e.sum(axis, keepdims=True)


def spec(*shape, dtype="float32"):
    """An input for a build-time error case: only its shape and dtype matter."""
    return np.zeros(shape, dtype=dtype)


def onehot(label, c):
    return (np.arange(c) == label).astype(np.float64)
