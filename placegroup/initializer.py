"""Initializers: each appends one init op for a var to the startup program.

Random initializers get a seed that depends only on the program's ``random_seed`` and the
var's name, so every process, and every slice of a var, agrees on its values.
Fan-based ones (Xavier, MSRA) take their fans from the whole shape.

Example::

    fluid.ParamAttr(initializer=fluid.initializer.Uniform(-0.1, 0.1))
"""
from __future__ import annotations

import math
import zlib

import numpy as np

_DEFAULT_SEED = 90  # used when program.random_seed is 0 ("any"), so processes agree


def var_seed(program, name: str, seed: int = 0) -> int:
    """The generator seed of var ``name``: ``seed`` if given, else from the program seed and name."""
    if seed:
        return int(seed)
    base = program.random_seed or _DEFAULT_SEED
    return zlib.crc32(f"{base}:{name}".encode()) | (base << 32)


def _fans(shape) -> tuple[int, int]:
    shape = list(shape)
    if len(shape) < 2:
        n = shape[0] if shape else 1
        return n, n
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


class Initializer:
    """Base class: ``init(var, block)`` appends the op that makes ``var``'s first value."""

    def __call__(self, var, block):
        return self.init(var, block)

    def init(self, var, block):  # pragma: no cover - abstract
        raise NotImplementedError

    def _append(self, block, var, type_: str, **attrs):
        attrs.setdefault("shape", list(var.shape))
        attrs.setdefault("dtype", var.dtype)
        return block.append_op(type_, outputs={"Out": [var.name]}, attrs=attrs, role="init")


class ConstantInitializer(Initializer):
    def __init__(self, value: float = 0.0, force_cpu: bool = False) -> None:
        self.value = float(value)

    def init(self, var, block):
        return self._append(block, var, "fill_constant", value=self.value)


class UniformInitializer(Initializer):
    def __init__(self, low: float = -1.0, high: float = 1.0, seed: int = 0) -> None:
        self.low, self.high, self.seed = float(low), float(high), seed

    def init(self, var, block):
        return self._append(block, var, "uniform_random", min=self.low, max=self.high,
                            seed=var_seed(block.program, var.name, self.seed))


class NormalInitializer(Initializer):
    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int = 0) -> None:
        self.loc, self.scale, self.seed = float(loc), float(scale), seed

    def init(self, var, block):
        return self._append(block, var, "gaussian_random", mean=self.loc, std=self.scale,
                            seed=var_seed(block.program, var.name, self.seed))


class XavierInitializer(Initializer):
    """Glorot: U(±√(6/(fan_in+fan_out))) or N(0, √(2/(fan_in+fan_out)))."""

    def __init__(self, uniform: bool = True, fan_in: int | None = None, fan_out: int | None = None,
                 seed: int = 0) -> None:
        self.uniform, self.fan_in, self.fan_out, self.seed = uniform, fan_in, fan_out, seed

    def init(self, var, block):
        fi, fo = _fans(var.shape)
        fi, fo = self.fan_in or fi, self.fan_out or fo
        seed = var_seed(block.program, var.name, self.seed)
        if self.uniform:
            limit = math.sqrt(6.0 / (fi + fo))
            return self._append(block, var, "uniform_random", min=-limit, max=limit, seed=seed)
        return self._append(block, var, "gaussian_random", mean=0.0, std=math.sqrt(2.0 / (fi + fo)), seed=seed)


class MSRAInitializer(Initializer):
    """He: U(±√(6/fan_in)) or N(0, √(2/fan_in))."""

    def __init__(self, uniform: bool = True, fan_in: int | None = None, seed: int = 0) -> None:
        self.uniform, self.fan_in, self.seed = uniform, fan_in, seed

    def init(self, var, block):
        fi = self.fan_in or _fans(var.shape)[0]
        seed = var_seed(block.program, var.name, self.seed)
        if self.uniform:
            limit = math.sqrt(6.0 / fi)
            return self._append(block, var, "uniform_random", min=-limit, max=limit, seed=seed)
        return self._append(block, var, "gaussian_random", mean=0.0, std=math.sqrt(2.0 / fi), seed=seed)


class NumpyArrayInitializer(Initializer):
    """Initialize to a given array (stored in the startup program as an ``assign_value`` op)."""

    def __init__(self, value) -> None:
        self.value = np.asarray(value)

    def init(self, var, block):
        if tuple(self.value.shape) != tuple(var.shape):
            raise ValueError(f"NumpyArrayInitializer for {var.name!r}: array shape "
                             f"{list(self.value.shape)} differs from the var's {list(var.shape)}")
        return self._append(block, var, "assign_value",
                            values=self.value.astype(var.dtype).ravel().tolist())


Constant = ConstantInitializer
Uniform = UniformInitializer
Normal = NormalInitializer
Xavier = XavierInitializer
MSRA = MSRAInitializer
