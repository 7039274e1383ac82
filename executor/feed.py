"""What one fed value becomes: the dtype and shape rules of ``exe.run(feed={name: value})``.

NOTE(feed-dtype): Fluid 1.8.5's executor never casts a fed numpy array: ``_as_lodtensor``
hands it to ``LoDTensor.set`` as it is, and only a var that asks for it (``need_check_feed``,
which ``fluid.data`` sets and ``fluid.layers.data`` does not) is checked, by
``check_feed_shape_type``. Here, with what Fluid 1.8.5 itself does beside each rule:

* an array of the var's dtype is taken as it is;
* ``fluid.data`` var, an array of another dtype: refused, as Fluid refuses it ("The data type
  of fed Variable 'x' must be 'float32', but received 'int64'");
* ``fluid.layers.data`` var, an array of another number dtype: cast to the var's dtype when no
  value changes kind (numpy's ``same_kind``: bool -> int -> float, float64 -> float32,
  int64 -> int32). Fluid keeps the array's own dtype instead; it then fails in the first op
  that meets a parameter ("Tensor holds the wrong type"), or flows on in that dtype. Here a
  var holds its declared dtype (the plan and the wire check it), so the value is cast; a cast
  across kinds (int64 ids into a float32 var) is said once per feed, since it may be the wrong
  array;
* ``fluid.layers.data`` var, a float array for an int or bool var (or an int one for a bool
  var): refused rather than truncated. Fluid would pass the floats on to ops that want ids;
* strings, objects, complex numbers, dates: refused, as Fluid's ``LoDTensor.set`` refuses them;
* a Python number or numpy scalar: an array ``[value]`` of the var's dtype, as in Fluid, but
  refused where the cast would truncate (Fluid turns 3.7 into 3 for an int64 var);
* a Python list or tuple: Fluid refuses every list ("Some of your feed data hold LoD
  information"); here it becomes an array of the var's dtype when its numbers fit by the rule
  above (it has no dtype of its own to check): ``[[1, 2]]`` fits a float32 var, ``[[1.5]]``
  does not fit an int64 one.

Every refusal is a ``ProgramError`` that starts ``feed 'x':`` and says what the var expects.
The shape rule is NOTE(feed-shape) in ``fed_array``. The check is per feed, not per element:
a dtype comparison, and numpy's cast when one is due. ``DataFeeder`` casts each sample's
elements itself, as Fluid's does (placegroup/data_feeder.py).
"""
from __future__ import annotations

import logging

import numpy as np

from placegroup.errors import ProgramError

log = logging.getLogger("placegroup.executor")
_NUMBERS = "biuf"  # numpy dtype kinds a var can hold: bool, int, unsigned, float
_KINDS = {"U": "strings", "S": "bytes", "O": "Python objects", "c": "complex numbers", "M": "dates",
          "m": "time spans", "V": "records"}


def fed_array(name: str, var, dtype: np.dtype, shape, value):
    """``value`` (an array, a list or a number) fed to ``var`` as the array the step reads.

    Args:
        name: the feed's name, for errors.
        var: the data var (its ``attrs["need_check_feed"]`` marks ``fluid.data``).
        dtype: the var's numpy dtype; shape: its declared shape (-1: any size), or None.
        value: a numpy (or cupy) array, a Python list or tuple, or a number.

    Returns:
        An array of ``dtype`` whose shape fits ``shape`` (the value itself when it already is).

    Raises:
        ProgramError: ``feed 'x': ...`` for a dtype or shape the rules refuse (NOTE(feed-dtype)).
    """
    if type(value) is not np.ndarray and not hasattr(value, "__cuda_array_interface__"):
        value = _from_python(name, dtype, value)
    if value.dtype != dtype:
        value = _cast(name, var, dtype, value)
    # NOTE(feed-shape): the rank and every fixed dim must match; a fluid.layers.data var also
    # takes the right size in another shape ([N] for [-1, 1]), as Fluid's LoDTensor did
    if shape is not None and (len(value.shape) != len(shape) or any(
            d != -1 and d != a for d, a in zip(shape, value.shape))):
        value = _reshaped(name, var, value, shape)
    return value


def _from_python(name: str, dtype: np.dtype, value):
    """A list, tuple or number as an array of ``dtype`` (a number becomes ``[value]``)."""
    if isinstance(value, np.ndarray):  # a subclass (np.matrix, a memmap): an array already
        return value
    if hasattr(value, "dtype") and not np.isscalar(value):  # a Tensor, a LoDTensor's view: its own dtype
        return np.asarray(value)
    scalar = np.isscalar(value)
    what = f"the {type(value).__name__} {value!r:.40}" if scalar else f"a {type(value).__name__}"
    try:
        arr = np.asarray([value] if scalar else value)
    except ValueError:  # a ragged list
        raise ProgramError(f"feed {name!r}: {what} whose rows differ in length, which is no array: "
                           f"the var expects one rectangular array of {dtype.name}") from None
    if arr.dtype.kind not in _NUMBERS:
        raise ProgramError(_not_numbers(name, dtype, arr, what if scalar else f"{what} of"))
    if not np.can_cast(arr.dtype, dtype, "same_kind"):
        raise ProgramError(_changes_values(name, dtype, arr, what if scalar else f"{what} of {arr.dtype.name}",
                                           "np.asarray(v)"))
    return arr.astype(dtype, copy=False)


def _cast(name: str, var, dtype: np.dtype, arr):
    """``arr`` cast to ``dtype`` where NOTE(feed-dtype) allows it."""
    if arr.dtype.kind not in _NUMBERS:
        raise ProgramError(_not_numbers(name, dtype, arr, "an array of"))
    if arr.dtype.name == dtype.name:  # the same dtype in another byte order
        return arr.astype(dtype)
    if var.attrs.get("need_check_feed"):
        raise ProgramError(f"feed {name!r}: the var is {dtype.name} and was declared by fluid.data, "
                           f"which takes arrays of its own dtype only (as Fluid 1.8 checks it), but the "
                           f"array is {arr.dtype.name}: feed arr.astype({dtype.name!r})")
    if not np.can_cast(arr.dtype, dtype, "same_kind"):
        raise ProgramError(_changes_values(name, dtype, arr, f"an array of {arr.dtype.name}", "arr"))
    if arr.dtype.kind != dtype.kind:
        _say_cast_once(name, arr.dtype, dtype)
    return arr.astype(dtype)


_told: set = set()


def _say_cast_once(name: str, have: np.dtype, want: np.dtype) -> None:
    """A cast across kinds (int or bool to float, bool to int) is said, once per feed and dtype:
    Fluid 1.8 would not have cast it, so the script may be feeding the wrong array."""
    if (name, have.name, want.name) in _told:
        return
    _told.add((name, have.name, want.name))
    log.warning("feed %r: an array of %s was cast to %s, the var's dtype (Fluid 1.8 keeps a fed "
                "array's dtype, and its first op with a parameter then fails); feed %s data to "
                "say it is meant", name, have.name, want.name, want.name)


def _changes_values(name: str, dtype: np.dtype, arr, what: str, expr: str) -> str:
    kind = arr.dtype.kind
    example = "2 becomes True" if dtype.kind == "b" else "1.7 becomes 1" if kind == "f" else "-1 wraps around"
    return (f"feed {name!r}: the var is {dtype.name}, but it was fed {what}, and that cast can change "
            f"values ({example}), so it is not done: feed {dtype.name} data "
            f"({expr}.astype({dtype.name!r}) if that is meant)")


def _not_numbers(name: str, dtype: np.dtype, arr, what: str) -> str:
    return (f"feed {name!r}: the var is {dtype.name}, but it was fed {what} "
            f"{_KINDS.get(arr.dtype.kind, arr.dtype.name)} ({arr.dtype.str}): feed bool, int or float data")


def _reshaped(name: str, var, arr, shape):
    """NOTE(feed-shape): ``arr`` in the shape of a ``fluid.layers.data`` var when they differ
    only by dims of 1; a ``fluid.data`` var takes no other shape, as in Fluid 1.8."""
    want = [d for d in shape if d != 1]
    have = [a for a in arr.shape if a != 1]
    if not var.attrs.get("need_check_feed") and shape.count(-1) <= 1 and len(want) == len(have) \
            and all(d in (-1, a) for d, a in zip(want, have)):
        return arr.reshape([-1 if d == -1 else d for d in shape])
    raise ProgramError(f"feed {name!r} has shape {list(arr.shape)}, but the var is declared "
                       f"{list(shape)} (-1 is any size)")
