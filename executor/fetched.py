"""FetchedArray: the numpy array ``exe.run`` returns for a fetched var, which a Fluid-era script
may turn into a Python number even when it has shape [1].

NOTE(fetched-scalars): Fluid 1.x fetches a loss or an accuracy as an array of shape [1], and
its scripts write ``float(loss)``, ``int(acc)``, ``"loss %f" % loss`` everywhere. NumPy 1.16
converted any size-1 array to a Python number; 1.25 deprecated that for arrays of more than 0
dims and 2.4 refuses it, so those scripts would fail in the user's own code. Pinning numpy below
2.4 holds only while nothing else needs a newer one (and warns from 1.25 on); a 0-d fetch would
break ``loss[0]``, which the same scripts write. So a fetched array is this ndarray subclass, a
plain ndarray but for:

* ``float``, ``int``, ``complex`` (so ``%f``, ``%d``, ``%e``) take an array of size 1, as numpy
  1.16 did; ``format(x, spec)`` with a spec (``"{:.4f}".format(loss)``) formats its one element
  (numpy refuses a spec for any array of more than 0 dims, 1.16 included; a script that writes
  one asks for the number). Other sizes fail as numpy fails;
* arithmetic and the other ufuncs keep it where they give an array, as scripts accumulate a
  fetched loss and print the result (``total += loss; print("%f" % (total / n))``, numpy 1.16
  converted any size-1 array); a reduction to one number (``np.mean``, ``x.sum()``) gives a
  numpy scalar, and numpy functions (``np.concatenate``, ``np.array``) give plain ndarrays, so
  the type spreads no further than arithmetic on a fetch;
* ``repr`` is ndarray's, and a pickle of it loads as a plain ndarray, without placegroup.

``operator.index`` (``range(acc)``) stays refused, as numpy 1.16 refused it for such arrays.
"""
from __future__ import annotations

from typing import Any

import numpy as np


class FetchedArray(np.ndarray):
    """An ndarray that ``float()``/``int()``/``complex()`` and a format spec accept when it
    holds one element (NOTE(fetched-scalars)).

    Example::

        loss, = exe.run(main, feed=feed, fetch_list=[avg_cost])   # shape [1]
        print("loss %f" % loss, float(loss), "{:.4f}".format(loss))

    Thread-safety: as numpy arrays.
    """

    def _one(self, what: str):
        if self.size != 1:
            raise TypeError(f"only arrays of one element can be converted to a Python {what}; this one has shape "
                            f"{list(self.shape)} ({self.size} elements)")
        return self.reshape(-1).view(np.ndarray)[0]

    def __float__(self) -> float:
        return float(self._one("float"))

    def __int__(self) -> int:
        return int(self._one("int"))

    def __complex__(self) -> complex:
        return complex(self._one("complex"))

    def __format__(self, spec: str) -> str:
        if spec and self.size == 1:
            return format(self._one("number"), spec)
        return format(self.view(np.ndarray), spec)

    def __repr__(self) -> str:
        return repr(self.view(np.ndarray))

    def __reduce__(self):  # numpy's __reduce_ex__ defers to an overridden __reduce__, protocol 5 too
        return self.view(np.ndarray).__reduce__()

    def __array_ufunc__(self, ufunc, method: str, *inputs: Any, **kwargs: Any):
        out = kwargs.get("out")
        if out is not None:
            kwargs["out"] = tuple(_plain(o) for o in out)
        result = getattr(ufunc, method)(*(_plain(x) for x in inputs), **kwargs)
        if out is not None:  # in place (``x += 1``): the caller keeps the object it passed
            return out[0] if len(out) == 1 else tuple(out)
        if isinstance(result, tuple):
            return tuple(_kept(r) for r in result)
        return _kept(result)

    def __array_function__(self, func, types, args, kwargs):
        return _plain_result(super().__array_function__(func, types, args, kwargs))


def _plain(x: Any) -> Any:
    return x.view(np.ndarray) if isinstance(x, FetchedArray) else x


def _kept(x: Any) -> Any:
    return x.view(FetchedArray) if type(x) is np.ndarray else x


def _plain_result(x: Any) -> Any:
    if isinstance(x, FetchedArray):
        return x.view(np.ndarray)
    if type(x) in (tuple, list):
        return type(x)(_plain_result(v) for v in x)
    return x
