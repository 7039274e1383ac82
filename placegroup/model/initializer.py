"""Initializers: each appends one init op for a var to the startup program.

Random initializers get a seed that depends only on the program's ``random_seed`` and the
var's name, so every process, and every slice of a var, agrees on its values.
Fan-based ones (Xavier, MSRA) take their fans from the whole shape. TruncatedNormal draws
N(loc, scale²) restricted to 2 standard deviations (Fluid 1.8's ``truncated_gaussian_random``,
NOTE(truncated-normal) in ops/random.py); Bilinear stores the upsampling kernel of a
``conv2d_transpose`` as constants (an ``assign_value``), which a pserver slice cuts by rows.

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
    """Initialize to a given array, pretrained weights say (an ``assign_value`` op in the
    startup program, holding the values).

    Wherever the transpiler puts the parameter, it starts as this array: a pserver's row block
    or a distributed table's row shard keeps only its own rows of the values, and a
    model-parallel trainer cuts its own columns at start-up (NOTE(init-cut) in ops/registry.py).

    Raises:
        ValueError: at ``init``, when the array's shape differs from the var's.

    Example::

        emb = fluid.layers.embedding(ids, size=list(pretrained.shape), is_sparse=True, param_attr=
                                     fluid.ParamAttr(initializer=fluid.initializer.NumpyArrayInitializer(pretrained)))
    """

    def __init__(self, value) -> None:
        self.value = np.asarray(value)

    def init(self, var, block):
        if tuple(self.value.shape) != tuple(var.shape):
            raise ValueError(f"NumpyArrayInitializer for {var.name!r}: array shape "
                             f"{list(self.value.shape)} differs from the var's {list(var.shape)}")
        return self._append(block, var, "assign_value",
                            values=self.value.astype(var.dtype).ravel().tolist())


class TruncatedNormalInitializer(Initializer):
    """Fluid's TruncatedNormal: N(loc, scale²) cut at 2 standard deviations, counter-based
    like Normal, so a row block or shard of the var is generated alone and equals that slice
    of the whole (NOTE(counter-rng) in ops/random.py). Fluid 1.8's kernel returns
    ``(z + loc) * scale`` for z in [-2, 2]: ``loc`` 0 (the default) is the usual truncated
    normal (NOTE(truncated-normal)).

    Example::

        fluid.ParamAttr(initializer=fluid.initializer.TruncatedNormal(loc=0.0, scale=0.02))
    """

    def __init__(self, loc: float = 0.0, scale: float = 1.0, seed: int = 0) -> None:
        self.loc, self.scale, self.seed = float(loc), float(scale), seed

    def init(self, var, block):
        return self._append(block, var, "truncated_gaussian_random", mean=self.loc, std=self.scale,
                            seed=var_seed(block.program, var.name, self.seed))


class BilinearInitializer(Initializer):
    """The bilinear upsampling kernel for a ``conv2d_transpose`` weight of shape
    ``[C_out, C_in, K, K]``, as Fluid builds it: with ``f = ceil(K / 2)`` and
    ``c = (2f - 1 - f % 2) / (2f)``, flat element i gets
    ``(1 - |x/f - c|) * (1 - |y/f - c|)``, ``x = i % K`` and ``y = (i / K) % K``.

    NOTE(bilinear-true-division): Fluid's Python computes ``y`` with ``/``, which under Python 3
    is true division, so ``y`` is fractional except every K-th element; Paddle's numbers (1.8 on
    Python 3 through 2.6) have that, and so do these. The values go into the startup program as
    an ``assign_value``.

    Raises:
        ValueError: unless the var is 4-D with equal last two dims.

    Example::

        w = fluid.ParamAttr(initializer=fluid.initializer.Bilinear(), learning_rate=0.0)
        up = fluid.layers.conv2d_transpose(x, num_filters=3, filter_size=4, stride=2, padding=1,
                                           param_attr=w, bias_attr=False)
    """

    def init(self, var, block):
        shape = list(var.shape)
        if len(shape) != 4 or shape[2] != shape[3]:
            raise ValueError(f"Bilinear initializer for {var.name!r}: the var must be [C_out, C_in, K, K], got "
                             f"shape {shape}")
        size = shape[3]
        f = np.ceil(size / 2.0)
        c = (2 * f - 1 - f % 2) / (2.0 * f)
        i = np.arange(math.prod(shape), dtype=np.float64)
        x, y = i % size, (i / size) % size  # NOTE(bilinear-true-division)
        weight = ((1 - np.abs(x / f - c)) * (1 - np.abs(y / f - c))).astype(np.float32)
        return self._append(block, var, "assign_value", values=weight.astype(var.dtype).tolist())


Constant = ConstantInitializer
Uniform = UniformInitializer
Normal = NormalInitializer
Xavier = XavierInitializer
MSRA = MSRAInitializer
TruncatedNormal = TruncatedNormalInitializer
Bilinear = BilinearInitializer
