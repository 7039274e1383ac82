"""Python operators on Variables (``x * 2``, ``a + b``, ``1 - x``, ``x < y``, ``-x``,
``x.astype("int64")``), each appending the ops Fluid 1.8.5's ``fluid/layers/math_op_patch.py``
appends, and ``x[i]`` (a slice op, placegroup/layers/indexing.py). The IR's Variable knows
nothing of layers; importing the layers package installs these operators on it
(``monkey_patch_variable``), as Fluid's own math_op_patch does.

What ``x <op> other`` appends (x a Variable; ``other <op> x`` for the reflected forms):

* ``+ - * /`` with a Python ``int`` or ``float`` (bool and numpy.float64 included, as they are
  ones): one ``scale`` op. ``x + v``, ``v + x``: scale 1, bias v; ``x - v``: scale 1, bias -v;
  ``v - x``: scale -1, bias v; ``x * v``, ``v * x``: scale v; ``x / v``: scale 1/v. A float on
  an int var must be a whole number (ValueError otherwise); ``x / v`` on an int var takes the
  elementwise path below instead, so that it divides as integers.
* anything else: one elementwise op (``elementwise_add``/``sub``/``mul``/``div``/``pow``/
  ``floordiv``/``mod``, or ``less_than``/``less_equal``/``greater_than``/``greater_equal``,
  whose output is bool). A value that is not a Variable becomes a constant of x's dtype:
  ``fill_constant`` of shape [1] on the right; on the left (``v / x``, ``v ** x``) a tensor of
  x's shape, ``fill_constant`` when x has no -1 dim, else ``fill_constant_batch_size_like`` of x.
  A Variable of another dtype is ``cast`` to x's. The op's ``axis`` is 0 when its Y's first dim
  is -1, else -1 (NOTE(broadcast) in ops/elementwise.py), and its output has x's dtype.
* ``-x``: scale -1. ``x.astype(dtype)``: a ``cast`` op.

The ops go to the current block of x's program, not of the default main program, as in Fluid.

NOTE(variable-eq): Fluid 1.8.5 also makes ``x == y`` and ``x != y`` append ``equal`` and
``not_equal`` ops. placegroup does not install them: its own code compares Variables with
``==`` and finds them in lists and dicts (``var in op_outputs``), which would then append ops
and take a Variable, always true, for the answer. ``==`` and ``!=`` on Variables keep Python's
identity meaning; call ``fluid.layers.equal(x, y)`` and ``fluid.layers.not_equal(x, y)`` for the
elementwise comparison.

NOTE(fill-batch-dtype): Fluid 1.8.5 builds the left constant of ``v / x`` (x with a -1 dim)
with no ``dtype`` attr, so it is float32 whatever x is, and ``2 / x`` on an int64 x fails at
run time ("holds int64_t, but desires to be float"). We give that op x's dtype, so the
constant is what the rest of the rule says it is; for float32 x the op is Fluid's.

Thread-safety: each operator appends to a program; build a program from one thread at a time.
"""
from __future__ import annotations

from typing import Callable, NamedTuple

from placegroup.ir import unique_name
from placegroup.ir.variable import Variable, normalize_dtype
from placegroup.layers.indexing import getitem

_INT_DTYPES = ("uint8", "int8", "int16", "int32", "int64")


class _Operator(NamedTuple):
    """One Python operator: the elementwise op it appends, whether ``self`` is its Y, and, for
    ``+ - * /``, the (scale, bias) of the one ``scale`` op a Python number makes instead."""
    op_type: str
    reverse: bool = False
    scalar: Callable[[float], tuple[float, float]] | None = None
    bool_out: bool = False


def _add(v):
    return 1.0, v


def _mul(v):
    return v, 0.0


# a + b == b + a and a * b == b * a: __radd__ and __rmul__ need no reversal (as in Fluid).
# __div__ and __rdiv__ are Python 2's names, installed as Fluid installs them.
_OPERATORS = {
    "add": _Operator("elementwise_add", scalar=_add),
    "radd": _Operator("elementwise_add", scalar=_add),
    "sub": _Operator("elementwise_sub", scalar=lambda v: (1.0, -v)),
    "rsub": _Operator("elementwise_sub", True, scalar=lambda v: (-1.0, v)),
    "mul": _Operator("elementwise_mul", scalar=_mul),
    "rmul": _Operator("elementwise_mul", scalar=_mul),
    "div": _Operator("elementwise_div", scalar=lambda v: (1.0 / v, 0.0)),
    "truediv": _Operator("elementwise_div", scalar=lambda v: (1.0 / v, 0.0)),
    "rdiv": _Operator("elementwise_div", True),
    "rtruediv": _Operator("elementwise_div", True),
    "pow": _Operator("elementwise_pow"),
    "rpow": _Operator("elementwise_pow", True),
    "floordiv": _Operator("elementwise_floordiv"),
    "mod": _Operator("elementwise_mod"),
    "lt": _Operator("less_than", bool_out=True),  # NOTE(variable-eq): no eq, no ne
    "le": _Operator("less_equal", bool_out=True),
    "gt": _Operator("greater_than", bool_out=True),
    "ge": _Operator("greater_equal", bool_out=True),
}


def _tmp(block, dtype: str, stop_gradient: bool = False) -> Variable:
    return block.create_var(unique_name.generate("tmp"), dtype=dtype, stop_gradient=stop_gradient)


def _block(x: Variable):
    return x.block.program.current_block()


def _scale(x: Variable, scale: float, bias: float) -> Variable:
    """``scale * x + bias`` as one ``scale`` op (what ``x + 2``, ``3 * x``, ``-x`` append)."""
    block = _block(x)
    out = _tmp(block, x.dtype)
    block.append_op("scale", {"X": [x]}, {"Out": [out]}, {"scale": float(scale), "bias": float(bias)})
    return out


def astype(self: Variable, dtype) -> Variable:
    """``self`` converted to ``dtype`` by a ``cast`` op (installed as ``Variable.astype``).

    Args:
        self: the var to convert.
        dtype: the new dtype (``"int64"``, ``np.float32``, ...).

    Returns:
        A new var of ``dtype`` and ``self``'s shape.

    Example::

        ids = fluid.data(name="ids", shape=[None, 1], dtype="int64")
        as_float = ids.astype("float32")
    """
    block = _block(self)
    out = _tmp(block, normalize_dtype(dtype))
    block.append_op("cast", {"X": [self]}, {"Out": [out]}, {"out_dtype": out.dtype})
    return out


def _constant(x: Variable, value, left: bool) -> Variable:
    """``value`` as a constant var of x's dtype: [1] on the right of the op, x's shape on its left."""
    try:
        value = float(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{value!r} ({type(value).__name__}) cannot take part in an operator with Variable "
                        f"{x.name}: use a Variable or a Python number") from e
    block = _block(x)
    out = _tmp(block, x.dtype, stop_gradient=True)
    if not left:
        block.append_op("fill_constant", outputs={"Out": [out]},
                        attrs={"shape": [1], "value": value, "dtype": x.dtype}, role="forward")
        return out
    if x.shape is None:
        raise TypeError(f"{value!r} on the left of an operator needs the shape of {x.name}, which is not known yet")
    batch = [i for i, d in enumerate(x.shape) if d < 0]
    if not batch:
        block.append_op("fill_constant", outputs={"Out": [out]},
                        attrs={"shape": list(x.shape), "value": value, "dtype": x.dtype}, role="forward")
        return out
    # the first -1 dim follows x's batch size; any later one is 1, as in Fluid
    shape = [d if d >= 0 or i == batch[0] else 1 for i, d in enumerate(x.shape)]
    block.append_op("fill_constant_batch_size_like", {"Input": [x]}, {"Out": [out]},
                    {"shape": shape, "value": value, "input_dim_idx": batch[0], "output_dim_idx": batch[0],
                     "dtype": x.dtype})  # NOTE(fill-batch-dtype)
    return out


def binary(x: Variable, other, op_type: str, reverse: bool = False, bool_out: bool = False) -> Variable:
    """``x <op> other`` (``other <op> x`` with ``reverse``) as one elementwise or compare op, as
    Fluid 1.8.5 builds it (see the module docstring); a Python number has already been given
    its chance at the ``scale`` path.

    Returns:
        The op's output: x's dtype, or bool when ``bool_out``.
    """
    y = other if isinstance(other, Variable) else _constant(x, other, left=reverse)
    if y.dtype != x.dtype:
        y = astype(y, x.dtype)
    a, b = (y, x) if reverse else (x, y)
    block = _block(x)
    out = _tmp(block, "bool" if bool_out else x.dtype)
    axis = 0 if b.shape and b.shape[0] == -1 else -1
    block.append_op(op_type, {"X": [a], "Y": [b]}, {"Out": [out]}, {"axis": axis})
    return out


def _scalar(x: Variable, value, rule: _Operator):
    """(scale, bias) of the scale op ``x <op> value`` is, or None for the elementwise path."""
    if rule.scalar is None or not isinstance(value, (int, float)):
        return None
    if rule.op_type == "elementwise_div" and x.dtype in _INT_DTYPES:
        return None  # integer division keeps its integers (Fluid's fix of release 1.6)
    if x.dtype in _INT_DTYPES and isinstance(value, float) and not value.is_integer():
        raise ValueError(f"{value!r} is not a whole number and {x.name} is {x.dtype}; convert it first, "
                         f"as in {x.name}.astype('float32')")
    if rule.op_type == "elementwise_div" and value == 0:
        raise ZeroDivisionError(f"{x.name} / {value!r}: a Python zero divisor (Fluid's scale 1/0)")
    return rule.scalar(float(value))


def _method(name: str, rule: _Operator):
    def method(self, other):
        sb = _scalar(self, other, rule)
        if sb is not None:
            return _scale(self, *sb)
        return binary(self, other, rule.op_type, rule.reverse, rule.bool_out)
    method.__name__ = method.__qualname__ = f"__{name}__"
    method.__doc__ = f"``{'other <op> self' if rule.reverse else 'self <op> other'}`` by ``{rule.op_type}``."
    return method


def _neg(self: Variable) -> Variable:
    return _scale(self, -1.0, 0.0)


def _not_iterable(self):
    raise TypeError(f"a Variable is not iterable ({self.name}{list(self.shape or [])}); index it, as in {self.name}[0], "
                    f"or unstack it")


def monkey_patch_variable() -> None:
    """Give ``Variable`` Fluid 1.8.5's Python operators (module docstring), bar ``==`` and ``!=``
    (NOTE(variable-eq)), and ``x[i]``. Calling it again changes nothing.

    Example::

        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        y = (x * 2 + 1) / 4      # three scale ops
        z = 1 / x                # fill_constant_batch_size_like, then elementwise_div
        mask = x > 0.5           # fill_constant, then greater_than; bool

    NOTE(variable-iter): with ``__getitem__`` alone Python would iterate a Variable by indexing
    it 0, 1, 2, ... until an IndexError that never comes (a dim of -1 has no end), appending
    slice ops forever: ``list(var)`` or ``tuple(shape)`` of a Variable shape must fail at once
    instead, so ``__iter__`` raises TypeError (Fluid 1.8 has no ``__iter__`` and loops).
    """
    for name, rule in _OPERATORS.items():
        setattr(Variable, f"__{name}__", _method(name, rule))
    Variable.__neg__ = _neg
    Variable.astype = astype
    Variable.__getitem__ = getitem
    Variable.__iter__ = _not_iterable
