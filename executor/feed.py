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
The check is per feed, not per element: a dtype comparison, and numpy's cast when one is due.
``DataFeeder`` casts each sample's elements itself, as Fluid's does (placegroup/data_feeder.py).

NOTE(feed-shape): the shape rules are Fluid 1.8.5's, found by running it on the cases of
tests/cases/feed_shapes.py (tests/test_feed_shapes.py replays them against both). Fluid's
executor hands a fed array to the feed op in the shape it has, so the ops see the fed shape,
never the declared one; the only check is ``check_feed_shape_type``, for ``fluid.data`` vars.

* ``fluid.layers.data`` var: no shape check. A batch padded narrower than declared (``[N, 2, 1]``
  for ``[-1, 10, 1]``), a wider one, one without the batch dim, one of another rank: each is
  taken as it is, and an op whose weights need the declared size fails there (naming the shapes),
  as in Fluid. Ops over the padded dim (an fc over the last dim, a reduction) train on it.
* ``fluid.data`` var (``need_check_feed``): Fluid's ``diff_tensor_shape`` compares the fed dims
  with the declared ones from the left: the array may have no more dims than declared, and fed
  dim ``i`` must equal declared dim ``i`` unless that is -1. So ``[N, 10]`` passes for
  ``[-1, 10, 1]`` (and the ops see ``[N, 10]``), ``[N]`` for ``[-1, 1]``; ``[N, 2, 1]``,
  ``[10, 1]`` (no batch dim) and ``[N, 10, 1, 1]`` are refused. A LoDTensor's data is checked
  the same way. The refusal names the feed, both shapes, the dim at fault and a fix.
* A Python number is ``[value]`` (shape ``[1]``) before the check; a Python list becomes an
  array (NOTE(feed-dtype)) and follows the rule of its shape.
* Readers: a loader started with ``start()`` checks a ``fluid.data`` var as Fluid's read op does
  (same rank, each dim equal unless -1); an iterable loader's batches meet this check in
  ``exe.run``; ``py_reader`` checks nothing (placegroup/datafeed/data_loader.py, NOTE(reader-shape)).
  ``DataFeeder`` and the sample readers reshape a stack of another rank to the declared shape
  (NOTE(feeder-shape) in placegroup/data_feeder.py).
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
        An array of ``dtype`` in the shape it was fed (the value itself when it already is of
        ``dtype``): the ops see the fed shape, as in Fluid (NOTE(feed-shape)).

    Raises:
        ProgramError: ``feed 'x' ...`` for a dtype (NOTE(feed-dtype)) or, for a ``fluid.data``
            var, a shape (NOTE(feed-shape)) the rules refuse.
    """
    if type(value) is not np.ndarray and not hasattr(value, "__cuda_array_interface__"):
        value = _from_python(name, dtype, value)
    if value.dtype != dtype:
        value = _cast(name, var, dtype, value)
    if shape is not None and var.attrs.get("need_check_feed"):
        check_fluid_data_shape(name, shape, value.shape)
    return value


def check_fluid_data_shape(name: str, shape, fed) -> None:
    """NOTE(feed-shape): a value fed to a ``fluid.data`` var through ``exe.run`` (or an iterable
    reader) fits Fluid 1.8's check: no more dims than declared, and each fed dim equal to the
    declared dim at its place unless that one is -1.

    Raises:
        ProgramError: ``feed 'x' has shape ..., but ...`` naming both shapes and the dim at fault.
    """
    if len(fed) <= len(shape) and all(d < 0 or d == a for d, a in zip(shape, fed)):
        return
    if len(fed) > len(shape):
        why = f"it has {len(fed)} dims, more than the {len(shape)} declared"
        fix = "drop the extra dims of size 1 (arr.reshape(...))" if all(
            a == 1 for a in fed[len(shape):]) else "reshape it to the declared shape"
    elif len(fed) == len(shape) - 1 and all(d < 0 or d == a for d, a in zip(shape[1:], fed)):
        why = "it looks like one sample without its batch dim"
        fix = f"feed arr[np.newaxis] (shape {[1, *fed]})"
    else:
        i = next(i for i, (d, a) in enumerate(zip(shape, fed)) if d >= 0 and d != a)
        why = f"its dim {i} is {fed[i]} where the var has {shape[i]}"
        fix = (f"pad or cut each sample to {list(shape[1:])}, or declare that dim -1 (None) "
               f"if it varies" if i else "feed a batch of the declared size")
    raise ProgramError(f"feed {name!r} has shape {list(fed)}, but the var is declared {list(shape)} by "
                       f"fluid.data, which checks fed shapes (-1 is any size) as Fluid 1.8 does: {why}; {fix} "
                       f"(a fluid.layers.data var takes a batch of any shape)")


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
