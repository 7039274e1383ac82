"""``fluid.layers`` distributions of Fluid 1.8: ``Uniform``, ``Normal``, ``Categorical`` and
``MultivariateNormalDiag``, each built from layers as Fluid 1.8 builds it (its
layers/distributions.py), so their ops, shapes and numbers are Fluid's.

A distribution's parameters are Variables, or floats / lists / numpy arrays that become float32
constants of the program (``assign``), broadcast against each other, with a warning for any
that is not float32 already, as Fluid. Samples come from the counter-based random ops
(ops/random.py): seed 0 (the default) draws anew each step, a given seed the same values every
step (NOTE(layer-seeds) in placegroup/layers/tensor.py); their values differ from Paddle's
(another generator), their distribution does not.

NOTE(uniform-sample-1.8): Fluid 1.8's ``Uniform.sample`` for parameters of known shape draws
from ``uniform_random``'s default range [-1, 1), not [0, 1), and then scales by
``high - low`` and shifts by ``low``: its samples lie in [2·low - high, high). Paddle 2.0 draws
from [0, 1). This follows 1.8 (a script trained with 1.8 saw those samples); the batch-sized
path (Variable parameters with an unknown batch dim) draws from [0, 1) in both.

NOTE(normal-batch-sample): for Variable parameters with an unknown batch dim Fluid 1.8 feeds
``shape(zeros)`` to ``gaussian_random`` as a shape tensor; placegroup's ``gaussian_random``
takes a static shape, so the same draw is a ``gaussian_random_batch_size_like`` over those
zeros (N(0, 1), one value per element, the rows keyed by their example, NOTE(random-steps)).

Example::

    import placegroup as fluid
    a = fluid.layers.Normal(loc=[0.0, 1.0], scale=[1.0, 2.0])
    b = fluid.layers.Normal(loc=0.5, scale=1.5)
    x = a.sample([4], seed=7)          # [4, 2]
    kl = a.kl_divergence(b)            # [2]
    lp = a.log_prob(x)
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from placegroup.ir.framework import Variable
from placegroup.layers import manip, nn, ops, tensor

__all__ = ["Uniform", "Normal", "Categorical", "MultivariateNormalDiag"]


def _check_type(value, name: str, kinds: tuple, owner: str) -> None:
    if not isinstance(value, kinds):
        raise TypeError(f"{owner}: {name} must be one of {[k.__name__ for k in kinds]}, got {type(value).__name__}")


def _check_float_var(value, name: str, owner: str) -> None:
    if not isinstance(value, Variable) or value.dtype not in ("float32", "float64"):
        raise TypeError(f"{owner}: {name} must be a float32 or float64 Variable, got {value!r}")


class Distribution:
    """The interface of Fluid's distributions: ``sample``, ``entropy``, ``log_prob``,
    ``kl_divergence`` (each appends layers to the default main program)."""

    def sample(self):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def kl_divergence(self, other):
        raise NotImplementedError

    def log_prob(self, value):
        raise NotImplementedError

    @staticmethod
    def _validate_args(*args) -> bool:
        """True when the arguments are Variables; ValueError when Variables and numbers mix."""
        kinds = {isinstance(a, Variable) for a in args}
        if kinds == {True, False}:
            raise ValueError("if one argument is Variable, all arguments should be Variable")
        return kinds == {True}

    @staticmethod
    def _to_variable(*args) -> tuple:
        """float32 constants of the program for floats, lists or arrays, broadcast together."""
        arrays = []
        total = 0.0
        for arg in args:
            if not isinstance(arg, (float, list, np.ndarray, Variable)):
                raise TypeError(f"type of input args must be float, list, numpy.ndarray or Variable, got "
                                f"{type(arg).__name__}")
            arr = np.zeros(1) + arg if isinstance(arg, float) else np.array(arg)
            if str(arr.dtype) != "float32":
                warnings.warn("data type of argument only support float32, your argument will be convert to "
                              "float32.", stacklevel=3)
                arr = arr.astype("float32")
            total = total + arr
            arrays.append(arr)
        out = []
        for arr in arrays:
            var = tensor.create_tensor(dtype=total.dtype)
            tensor.assign(np.broadcast_arrays(arr, total)[0], var)
            out.append(var)
        return tuple(out)


class Uniform(Distribution):
    """The uniform distribution on [low, high): density ``1 / (high - low)``.

    Args:
        low, high: floats, lists, numpy arrays, or Variables (all of one kind), broadcast
            against each other.

    Raises:
        TypeError: an int or another type; ValueError: Variables mixed with numbers.

    Example::

        u = fluid.layers.Uniform(low=0.0, high=[1.0, 2.0])
        s = u.sample([3])                       # [3, 2]
        e = u.entropy()                         # log(high - low)
    """

    def __init__(self, low, high):
        _check_type(low, "low", (float, np.ndarray, Variable, list), "Uniform")
        _check_type(high, "high", (float, np.ndarray, Variable, list), "Uniform")
        self.all_arg_is_float = False
        self.batch_size_unknown = False
        if self._validate_args(low, high):
            self.batch_size_unknown = True
            self.low, self.high = low, high
        else:
            self.all_arg_is_float = isinstance(low, float) and isinstance(high, float)
            self.low, self.high = self._to_variable(low, high)

    def sample(self, shape, seed: int = 0):
        """Samples of shape ``shape + batch_shape`` (``shape`` alone for float parameters), in
        [2·low - high, high) for parameters of known shape (NOTE(uniform-sample-1.8))."""
        _check_type(shape, "shape", (list,), "sample")
        _check_type(seed, "seed", (int,), "sample")
        batch_shape = list((self.low + self.high).shape)
        output_shape = shape + batch_shape
        if self.batch_size_unknown:
            zero_tmp = manip.fill_constant_batch_size_like(self.low + self.high, batch_shape + shape, self.low.dtype,
                                                           0.0)
            uniform_tmp = tensor.uniform_random_batch_size_like(zero_tmp, zero_tmp.shape, min=0.0, max=1.0, seed=seed)
            output = uniform_tmp * (zero_tmp + self.high - self.low) + self.low
            return nn.reshape(output, output_shape)
        output = tensor.uniform_random(output_shape, seed=seed) * (
            tensor.zeros(output_shape, dtype=self.low.dtype) + (self.high - self.low)) + self.low
        return nn.reshape(output, shape) if self.all_arg_is_float else output

    def log_prob(self, value):
        """``log(1 / (high - low))`` inside (low, high), ``-inf`` outside."""
        _check_float_var(value, "value", "log_prob")
        lb = tensor.cast(ops.less_than(self.low, value), dtype=value.dtype)
        ub = tensor.cast(ops.less_than(value, self.high), dtype=value.dtype)
        return ops.log(lb * ub) - ops.log(self.high - self.low)

    def entropy(self):
        """``log(high - low)``."""
        return ops.log(self.high - self.low)


class Normal(Distribution):
    """The normal distribution N(loc, scale²).

    Args:
        loc, scale: floats, lists, numpy arrays, or Variables (all of one kind).

    Example::

        n = fluid.layers.Normal(loc=0.0, scale=2.0)
        lp = n.log_prob(x)
    """

    def __init__(self, loc, scale):
        _check_type(loc, "loc", (float, np.ndarray, Variable, list), "Normal")
        _check_type(scale, "scale", (float, np.ndarray, Variable, list), "Normal")
        self.batch_size_unknown = False
        self.all_arg_is_float = False
        if self._validate_args(loc, scale):
            self.batch_size_unknown = True
            self.loc, self.scale = loc, scale
        else:
            self.all_arg_is_float = isinstance(loc, float) and isinstance(scale, float)
            self.loc, self.scale = self._to_variable(loc, scale)

    def sample(self, shape, seed: int = 0):
        """Samples ``loc + scale·z``, z ~ N(0, 1), of shape ``shape + batch_shape`` (``shape``
        alone for float parameters; NOTE(normal-batch-sample))."""
        _check_type(shape, "shape", (list,), "sample")
        _check_type(seed, "seed", (int,), "sample")
        batch_shape = list((self.loc + self.scale).shape)
        output_shape = shape + batch_shape
        if self.batch_size_unknown:
            zero_tmp = manip.fill_constant_batch_size_like(self.loc + self.scale, batch_shape + shape, self.loc.dtype,
                                                           0.0)
            normal_tmp = tensor.gaussian_random_batch_size_like(zero_tmp, zero_tmp.shape, mean=0.0, std=1.0, seed=seed)
            output = normal_tmp * (zero_tmp + self.scale) + self.loc
            return nn.reshape(output, output_shape)
        output = tensor.gaussian_random(output_shape, mean=0.0, std=1.0, seed=seed) * (
            tensor.zeros(output_shape, dtype=self.loc.dtype) + self.scale) + self.loc
        return nn.reshape(output, shape) if self.all_arg_is_float else output

    def entropy(self):
        """``0.5 + 0.5·log(2π) + log(scale)``, batch-shaped."""
        batch_shape = list((self.loc + self.scale).shape)
        zero_tmp = manip.fill_constant_batch_size_like(self.loc + self.scale, batch_shape, self.loc.dtype, 0.0)
        return 0.5 + 0.5 * math.log(2 * math.pi) + ops.log(self.scale + zero_tmp)

    def log_prob(self, value):
        """``-(value - loc)² / (2·scale²) - log(scale) - log(sqrt(2π))``."""
        _check_float_var(value, "value", "log_prob")
        var = self.scale * self.scale
        log_scale = ops.log(self.scale)
        return -1.0 * ((value - self.loc) * (value - self.loc)) / (2.0 * var) - log_scale - math.log(
            math.sqrt(2.0 * math.pi))

    def kl_divergence(self, other):
        """KL(self || other) = ``0.5·(r + t² - 1 - log r)``, r = (scale / other.scale)², t =
        (loc - other.loc) / other.scale."""
        _check_type(other, "other", (Normal,), "kl_divergence")
        var_ratio = self.scale / other.scale
        var_ratio = var_ratio * var_ratio
        t1 = (self.loc - other.loc) / other.scale
        t1 = t1 * t1
        return 0.5 * (var_ratio + t1 - 1.0 - ops.log(var_ratio))


class Categorical(Distribution):
    """The categorical distribution of unnormalized log-probabilities ``logits`` (last dim).

    Example::

        a = fluid.layers.Categorical(fluid.layers.data("a", shape=[5]))
        ent = a.entropy()                    # [N, 1]
    """

    def __init__(self, logits):
        _check_type(logits, "logits", (np.ndarray, Variable, list), "Categorical")
        self.logits = logits if self._validate_args(logits) else self._to_variable(logits)[0]

    def kl_divergence(self, other):
        """Σ p·(log p - log q) over the last dim, kept as a dim of size 1."""
        _check_type(other, "other", (Categorical,), "kl_divergence")
        logits = self.logits - ops.reduce_max(self.logits, dim=-1, keep_dim=True)
        other_logits = other.logits - ops.reduce_max(other.logits, dim=-1, keep_dim=True)
        e_logits, other_e_logits = ops.exp(logits), ops.exp(other_logits)
        z = nn.reduce_sum(e_logits, dim=-1, keep_dim=True)
        other_z = nn.reduce_sum(other_e_logits, dim=-1, keep_dim=True)
        prob = e_logits / z
        return nn.reduce_sum(prob * (logits - ops.log(z) - other_logits + ops.log(other_z)), dim=-1, keep_dim=True)

    def entropy(self):
        """-Σ p·log p over the last dim, kept as a dim of size 1."""
        logits = self.logits - ops.reduce_max(self.logits, dim=-1, keep_dim=True)
        e_logits = ops.exp(logits)
        z = nn.reduce_sum(e_logits, dim=-1, keep_dim=True)
        prob = e_logits / z
        return -1.0 * nn.reduce_sum(prob * (logits - ops.log(z)), dim=-1, keep_dim=True)


class MultivariateNormalDiag(Distribution):
    """The multivariate normal with mean ``loc`` [k] and a diagonal covariance ``scale`` given
    as the [k, k] matrix (its off-diagonal entries zero), as Fluid 1.8 takes it.

    Pass Variables, as Fluid's own examples do: numpy or list arguments are broadcast against
    each other first (Fluid's ``_to_variable``), which makes a [k] ``loc`` [k, k].

    Example::

        loc = fluid.layers.assign(np.array([0.3, 0.5], "float32"))
        scale = fluid.layers.assign(np.diag([0.4, 0.5]).astype("float32"))
        a = fluid.layers.MultivariateNormalDiag(loc, scale)
        ent = a.entropy()                    # [1]
    """

    def __init__(self, loc, scale):
        _check_type(loc, "loc", (np.ndarray, Variable, list), "MultivariateNormalDiag")
        _check_type(scale, "scale", (np.ndarray, Variable, list), "MultivariateNormalDiag")
        if self._validate_args(loc, scale):
            self.loc, self.scale = loc, scale
        else:
            self.loc, self.scale = self._to_variable(loc, scale)

    def _det(self, value):
        """The product of the diagonal: every off-diagonal entry made 1 first."""
        batch_shape = list(value.shape)
        one_all = tensor.ones(shape=batch_shape, dtype=self.loc.dtype)
        one_diag = manip.diag(tensor.ones(shape=[batch_shape[0]], dtype=self.loc.dtype))
        return ops.reduce_prod(value + one_all - one_diag)

    def _inv(self, value):
        """The inverse of a diagonal matrix: each entry to the power 1 - 2·[on the diagonal]."""
        batch_shape = list(value.shape)
        one_all = tensor.ones(shape=batch_shape, dtype=self.loc.dtype)
        one_diag = manip.diag(tensor.ones(shape=[batch_shape[0]], dtype=self.loc.dtype))
        return ops.elementwise_pow(value, one_all - 2 * one_diag)

    def entropy(self):
        """``0.5·(k·(1 + log 2π) + log det(scale))``."""
        return 0.5 * (self.scale.shape[0] * (1.0 + math.log(2 * math.pi)) + ops.log(self._det(self.scale)))

    def kl_divergence(self, other):
        """KL(self || other) =
        ``0.5·(tr(Σo⁻¹Σ) + (μo - μ)ᵀΣo⁻¹(μo - μ) - k + log(det Σo / det Σ))``."""
        _check_type(other, "other", (MultivariateNormalDiag,), "kl_divergence")
        tr_cov_matmul = nn.reduce_sum(self._inv(other.scale) * self.scale)
        loc_matmul_cov = nn.matmul(other.loc - self.loc, self._inv(other.scale))
        tri_matmul = nn.matmul(loc_matmul_cov, other.loc - self.loc)
        k = list(self.scale.shape)[0]
        ln_cov = ops.log(self._det(other.scale)) - ops.log(self._det(self.scale))
        return 0.5 * (tr_cov_matmul + tri_matmul - k + ln_cov)
