"""``x[...]`` on a Variable: Fluid 1.8's ``Variable.__getitem__``, which appends a ``slice`` op
(a ``strided_slice`` op when a step is not 1, then a ``reverse`` op for ``::-1``). The IR's
Variable knows nothing of layers; ``monkey_patch_variable`` (math_op_patch.py) installs it.

NOTE(variable-index): what Fluid 1.8.5 builds, and so what this builds, per index entry i:

* an int k: a slice of [k, k + 1) along dim i (``k = -1``: [-1, end)) that drops dim i
  (``decrease_axis``); dropping every dim leaves [1], not a 0-d tensor, so
  ``fluid.layers.shape(x)[0]`` is an int32 [1] var holding the batch size;
* an int Variable k (int32 or int64 [1]): the same, its bounds read at run time (k and k + 1,
  the latter an ``elementwise_add`` op), the dim's size -1 until then;
* a slice a:b:s: a missing start is 0, a missing stop 10000000 (the op clamps it), a missing
  step 1; any step other than 1 makes the whole index one ``strided_slice`` op, whose negative
  steps take Fluid 1.8's entries (NOTE(strided-slice-1.8) in ops/shape.py). Starts, stops and
  steps may be int Variables (read at run time);
* ``:`` keeps the dim; ``::-1`` reverses it, by a ``reverse`` op over the result whose axis is
  the dim's index in ``x`` (as in Fluid, not shifted by the dims that ints dropped before it).

Fluid 1.8.5 refuses every other form, and so does this, with the error's type it raises where
that is a clear one: ``...``, ``None``, lists, arrays and floats are a TypeError; a slice with
neither start nor stop whose step is not -1 (``x[::2]``) an IndexError (an AssertionError in
Fluid; write ``x[0:n:2]``); more entries than ``x`` has dims, or an int outside a known dim, a
ProgramError from the op.

Example::

    x = fluid.data(name="x", shape=[None, 3], dtype="float32")
    n = fluid.layers.shape(x)[0]                      # int32 [1]: the batch size
    ones = fluid.layers.fill_constant(shape=[n, 1], dtype="float32", value=1.0)
    last = x[:, -1]                                   # [-1]
    every_other = x[0:8:2, 1:]                        # strided_slice: [-1, 2]
"""
from __future__ import annotations

from placegroup.ir import unique_name
from placegroup.ir.framework import Variable

__all__ = ["getitem"]

_TO_THE_END = 10000000  # Fluid's stop for a slice without one; the op clamps it to the dim
_INDEX_DTYPES = ("int32", "int64")


def _kind(item) -> str:
    """What an index entry is to Fluid 1.8: 'int', 'var', 'slice', or a TypeError."""
    if isinstance(item, slice):
        return "slice"
    if isinstance(item, Variable):
        if item.dtype not in _INDEX_DTYPES:
            raise TypeError(f"Variable index: {item.name} is {item.dtype}; an index Variable must be int32 or int64")
        return "var"
    if isinstance(item, int):  # bool included, as in Fluid
        return "int"
    raise TypeError(f"Variable index: {item!r} ({type(item).__name__}) is not an index Fluid 1.8 takes; index "
                    f"with ints, slices (a:b:s) and int Variables, one per dim from the first")


def _bound(value, what: str):
    if value is None or isinstance(value, (int, Variable)):
        if isinstance(value, Variable):
            _kind(value)
        return value
    raise TypeError(f"Variable index: slice {what} {value!r} must be an int or an int Variable")


class _Index:
    """The slice op's lists for one index, built entry by entry as Fluid 1.8 builds them."""

    def __init__(self, var: Variable) -> None:
        self.var, self.block = var, var.block
        self.axes, self.starts, self.ends, self.steps = [], [], [], []
        self.decrease, self.reverse = [], []
        self.strided = False

    def _var(self, dtype: str, hint: str, stop_gradient: bool = True) -> Variable:
        return self.block.create_var(unique_name.generate(f"{self.var.name}_{hint}"), dtype=dtype,
                                     stop_gradient=stop_gradient)

    def const(self, value: int, dtype: str = "int32") -> Variable:
        out = self._var(dtype, "index")
        self.block.append_op("fill_constant", outputs={"Out": [out]},
                             attrs={"shape": [1], "dtype": dtype, "value": float(value)}, role="forward")
        return out

    def add(self, dim: int, item) -> None:
        kind = _kind(item)
        if kind == "slice":
            start, stop, step = (_bound(v, w) for v, w in ((item.start, "start"), (item.stop, "stop"),
                                                           (item.step, "step")))
            if start is None and stop is None and step is None:
                return
            step = 1 if step is None else step
            if start is None and stop is None:
                if isinstance(step, Variable) or step != -1:
                    raise IndexError(f"Variable index: {item!r} on dim {dim} of {self.var.name}: a slice with neither "
                                     f"start nor stop takes only the step -1 (reversal) in Fluid 1.8; give them, "
                                     f"as in 0:n:{step if not isinstance(step, Variable) else 's'}")
                self.reverse.append(dim)
                return
            if isinstance(step, Variable) or step != 1:
                self.strided = True
            self.axes.append(dim)
            self.starts.append(0 if start is None else start)
            self.ends.append(_TO_THE_END if stop is None else stop)
            self.steps.append(step)
            return
        self.decrease.append(dim)
        self.axes.append(dim)
        self.starts.append(item)
        self.steps.append(1)
        if kind == "var":
            end = self._var(item.dtype, "index_end")
            self.block.append_op("elementwise_add", {"X": [item], "Y": [self.const(1, item.dtype)]},
                                 {"Out": [end]}, {"axis": -1})
            self.ends.append(end)
        else:
            self.ends.append(item + 1 if item != -1 else _TO_THE_END)

    def _tensor_list(self, values) -> list:
        out = []
        for v in values:
            if isinstance(v, Variable):
                v.stop_gradient = True
                out.append(v)
            else:
                out.append(self.const(v))
        return out

    def op(self) -> Variable:
        """Append the ops; the indexed var (``var`` itself when the index keeps everything)."""
        out = self.var
        if self.axes:
            inputs = {"Input": [self.var]}
            attrs = {"axes": self.axes, "decrease_axis": self.decrease}
            flags = [1] * len(self.axes)
            lists = (("starts", self.starts), ("ends", self.ends)) + ((("strides", self.steps),) if self.strided else ())
            for key, values in lists:
                if any(isinstance(v, Variable) for v in values):
                    inputs[key.capitalize() + "TensorList"] = self._tensor_list(values)
                    for i, v in enumerate(values):
                        if isinstance(v, Variable):
                            flags[i] = -1
                    values = [-1 if isinstance(v, Variable) else v for v in values]
                attrs[key] = [int(v) for v in values]
            attrs["infer_flags"] = flags
            op_type = "strided_slice" if self.strided else "slice"
            out = self._var(self.var.dtype, op_type, stop_gradient=False)
            self.block.append_op(op_type, inputs, {"Out": [out]}, attrs, role="forward")
        if self.reverse:
            rev = self._var(self.var.dtype, "slice_reverse", stop_gradient=False)
            self.block.append_op("reverse", {"X": [out]}, {"Out": [rev]}, {"axis": self.reverse}, role="forward")
            out = rev
        return out


def getitem(var: Variable, item) -> Variable:
    """``var[item]`` as Fluid 1.8 builds it (NOTE(variable-index)).

    Args:
        var: the Variable indexed.
        item: an int, an int Variable, a slice, or a tuple of them (one per dim from dim 0).

    Returns:
        A new Variable (``var`` itself for ``var[:]``), whose gradient flows back into ``var``.

    Raises:
        TypeError: an entry Fluid 1.8 does not take (``...``, ``None``, a list, a float, a
            float Variable).
        IndexError: a slice with neither start nor stop whose step is not -1.
        ProgramError: more entries than ``var`` has dims, or an int outside a known dim.
    """
    items = item if isinstance(item, tuple) else (item,)
    index = _Index(var)
    for dim, entry in enumerate(items):
        index.add(dim, entry)
    return index.op()
