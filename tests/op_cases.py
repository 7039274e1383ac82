"""The op test table (STYLE.md rule 12): one ``OpCase`` per op or op variant.

``tests/test_ops.py`` consumes it: the forward kernel against ``ref`` (float32), shapes and
dtypes against ``infer`` and ``Block.append_op``, the grad ops from the grad maker against
central differences (float64), and the error cases. Samplers draw inputs from each op's
domain (relu away from its kink, logs and divisors positive, labels valid class ids) and
return float64 arrays; the harness casts floating inputs to the dtype under test.

An error case is ``(inputs, attrs, ExcType, "regex")``: a ``ProgramError`` is expected from
``Block.append_op`` at build time (only the inputs' shapes and dtypes matter), any other
type from running the kernel on the given arrays.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from placegroup.errors import ProgramError
from placegroup.values import LoDTensor
from tests.cases import contrib, rnn_more, sequence_more  # the Fluid-tree ops' tables
from tests.cases import (conv, creation, grid, loss, manip, math, metric, misc, norm, rnn, sequence, sequence_pad,
                         shuffle)
from tests.op_case import OpCase, N, away, labels, onehot, pos, softmax, spec  # noqa: F401


def _matmul(x, y, tx=False, ty=False, alpha=1.0):
    x = x.swapaxes(-1, -2) if tx else x
    y = y.swapaxes(-1, -2) if ty else y
    out = alpha * np.matmul(x, y)
    return out.reshape(out.shape or (1,))


def _rand_check(kind: str) -> Callable:
    """Counter-RNG properties of uniform_random / gaussian_random (ops/random.py)."""

    def check(run, _attrs):
        base = {"uniform": {"min": -2.0, "max": 3.0}, "gaussian": {"mean": 1.0, "std": 2.0}}[kind]
        whole = run({}, {**base, "shape": [6, 5], "seed": 7})["Out"]
        box = run({}, {**base, "shape": [2, 3], "whole_shape": [6, 5], "offsets": [3, 1], "seed": 7})["Out"]
        np.testing.assert_array_equal(box, whole[3:5, 1:4])
        rows = run({}, {**base, "shape": [2, 5], "whole_shape": [6, 5], "offsets": [1, 0], "strides": [3, 1],
                        "seed": 7})["Out"]  # an embedding shard: rows 1, 4 of 6 (3 shards)
        np.testing.assert_array_equal(rows, whole[1::3])
        np.testing.assert_array_equal(run({}, {**base, "shape": [6, 5], "seed": 7})["Out"], whole)
        assert not np.array_equal(run({}, {**base, "shape": [6, 5], "seed": 8})["Out"], whole)
        big = run({}, {**base, "shape": [400, 100], "seed": 3})["Out"].astype(np.float64)
        if kind == "uniform":
            assert big.min() >= -2.0 and big.max() < 3.0
            assert abs(big.mean() - 0.5) < 0.05 and abs(big.std() - 5 / np.sqrt(12)) < 0.03
        else:
            assert abs(big.mean() - 1.0) < 0.05 and abs(big.std() - 2.0) < 0.05
        assert run({}, {**base, "shape": [2], "dtype": "float64", "seed": 1})["Out"].dtype == np.float64

    return check


def _elementwise(op: str, f, y_domain=N) -> list:
    """Same-shape, Fluid ``axis`` broadcasting (Y [3] at axis 1, Y [4] at -1, Y [3, 1] at 1
    with its trailing 1 dropped) and the shape errors, for one binary op."""
    out = []
    for name, ys, axis, view in [("same", (2, 3, 4), -1, (2, 3, 4)), ("axis1", (3,), 1, (1, 3, 1)),
                                 ("last", (4,), -1, (4,)), ("axis0", (2, 3), 0, (2, 3, 1)),
                                 ("trailing1", (3, 1), 1, (1, 3, 1))]:
        out.append(OpCase(op, lambda r, ys=ys: {"X": N(r, 2, 3, 4), "Y": y_domain(r, *ys)},
                          lambda i, a, view=view: {"Out": f(i["X"], i["Y"].reshape(view))},
                          attrs={"axis": axis}, grad=("X", "Y"), name=name,
                          errors=(({"X": spec(2, 3, 4), "Y": spec(5)}, {"axis": 1}, ProgramError, "do not broadcast"),
                                  ({"X": spec(2, 3, 4), "Y": spec(3, 4, 5)}, {"axis": 1}, ProgramError,
                                   r"axis 1 does not fit Y\[3, 4, 5\]"))))
    return out


def _reduce_ref(f):
    def ref(i, a):
        out = f(i["X"], axis=None if a["reduce_all"] else tuple(a["dim"]), keepdims=a["keep_dim"])
        return {"Out": np.reshape(out, np.shape(out) or (1,))}

    return ref


def _ce_ref(i, a):
    x, lab = i["X"], i["Label"]
    if a.get("soft_label"):
        return {"Y": -(lab * np.log(x)).sum(-1, keepdims=True)}
    y = -np.log(np.take_along_axis(x, np.where(lab == a.get("ignore_index", -100), 0, lab), -1))
    return {"Y": np.where(lab == a.get("ignore_index", -100), 0.0, y)}


def _swce_ref(i, a):
    x, lab = i["Logits"], i["Label"]
    p = softmax(x.astype(np.float64))
    if a.get("soft_label"):
        return {"Softmax": p, "Loss": -(lab * np.log(p)).sum(-1, keepdims=True)}
    ign = lab == a.get("ignore_index", -100)
    loss = -np.log(np.take_along_axis(p, np.where(ign, 0, lab), -1))
    return {"Softmax": p, "Loss": np.where(ign, 0.0, loss)}


def _lookup_ref(i, a):
    w, ids = i["W"], i["Ids"].reshape(-1)
    out = np.where((ids == a.get("padding_idx", -1))[:, None], 0.0, w[ids])
    return {"Out": out.reshape(i["Ids"].shape[:1] + w.shape[1:])}


def _acc_ref(i, a):
    hit = (i["Indices"] == i["Label"]).any(-1)
    return {"Accuracy": np.array([hit.mean()], np.float32), "Correct": np.array([hit.sum()]),
            "Total": np.array([len(hit)])}


_MATMUL_ERRORS = (({"X": spec(2, 3), "Y": spec(4, 5)}, {}, ProgramError, "3 columns but Y.* has 4 rows"),
                  ({"X": spec(3), "Y": spec(1, 4)}, {"transpose_X": True}, ProgramError, "1-D operand"),
                  ({"X": spec(2, 2, 3), "Y": spec(3, 3, 4)}, {}, ProgramError, "batch dims"))
_P = lambda r: {"X": softmax(N(r, 4, 5)), "Label": labels(r, 4, 5)}  # noqa: E731
_IDS = np.array([[3], [0], [9], [3], [5]])
_TIE = np.array([[1.0, 3.0, 3.0, 2.0], [5.0, 5.0, 5.0, 5.0]])
_UNARY = {"relu": (away, lambda x: np.maximum(x, 0)), "sigmoid": (lambda r, *s: 3 * N(r, *s),
          lambda x: 1 / (1 + np.exp(-x))), "tanh": (lambda r, *s: 2 * N(r, *s), np.tanh)}


def _places_lod_check(run):
    """concat_places joins the places' LoDs: each level's offsets shifted past the parts before."""
    a = LoDTensor(np.arange(6.0).reshape(6, 1), [[0, 1, 2], [0, 2, 6]])
    b = LoDTensor(np.arange(3.0).reshape(3, 1), [[0, 2], [0, 1, 3]])
    out = run({"X": [a, b]}, {})["Out"]
    assert [o.tolist() for o in out.offsets] == [[0, 1, 2, 4], [0, 2, 6, 7, 9]]
    np.testing.assert_array_equal(out.data.ravel(), [0, 1, 2, 3, 4, 5, 0, 1, 2])

CASES: list[OpCase] = [
    *_elementwise("elementwise_add", np.add), *_elementwise("elementwise_sub", np.subtract),
    *_elementwise("elementwise_mul", np.multiply), *_elementwise("elementwise_div", np.divide, away),
    *[OpCase(op, lambda r, d=d: {"X": d(r, 3, 4)}, lambda i, a, f=f: {"Out": f(i["X"])}, grad=("X",))
      for op, (d, f) in _UNARY.items()],
    OpCase("softmax", lambda r: {"X": N(r, 3, 5)}, lambda i, a: {"Out": softmax(i["X"])}, grad=("X",)),
    OpCase("softmax", lambda r: {"X": N(r, 3, 5)}, lambda i, a: {"Out": softmax(i["X"], 0)},
           attrs={"axis": 0}, grad=("X",), name="axis0",
           errors=(({"X": spec(3, 5)}, {"axis": 2}, ProgramError, "axis 2 is out of range"),)),
    # Paddle 3.x's own outputs for these logits (its softmax clips x - max at -64).
    OpCase("softmax", lambda r: {"X": np.array([[0.0, -100.0, -70.0], [100.0, 0.0, 1.0]])},
           lambda i, a: {"Out": np.array([[1.0, 1.6038109e-28, 1.6038109e-28]] * 2)}, name="paddle_tails"),
    OpCase("mul", lambda r: {"X": N(r, 2, 3), "Y": N(r, 3, 4)}, lambda i, a: {"Out": i["X"] @ i["Y"]},
           grad=("X", "Y"), errors=(({"X": spec(2, 3), "Y": spec(4, 5)}, {}, ProgramError, "3 columns"),)),
    OpCase("mul", lambda r: {"X": N(r, 2, 3, 4), "Y": N(r, 2, 2, 5)},
           lambda i, a: {"Out": (i["X"].reshape(6, 4) @ i["Y"].reshape(4, 5)).reshape(2, 3, 5)},
           attrs={"x_num_col_dims": 2, "y_num_col_dims": 2}, grad=("X", "Y"), name="num_col_dims"),
    *[OpCase("matmul", lambda r, xs=xs, ys=ys: {"X": N(r, *xs), "Y": N(r, *ys)},
             lambda i, a: {"Out": _matmul(i["X"], i["Y"], a["transpose_X"], a["transpose_Y"], a["alpha"])},
             attrs={"transpose_X": tx, "transpose_Y": ty, "alpha": al}, grad=("X", "Y"), name=name,
             errors=_MATMUL_ERRORS if name == "2d" else ())
      for name, xs, ys, tx, ty, al in [
          ("2d", (2, 3), (3, 4), False, False, 1.0), ("tx", (3, 2), (3, 4), True, False, 1.0),
          ("ty_alpha", (2, 3), (4, 3), False, True, 0.5), ("txty", (3, 2), (4, 3), True, True, 2.0),
          ("batched", (2, 2, 3), (2, 3, 4), False, False, 1.0), ("bcast", (2, 2, 3), (4, 3), False, True, 1.0),
          ("bcast_x", (2, 3), (2, 2, 3, 4), False, False, 1.0), ("vec_x", (3,), (3, 4), False, False, 1.0),
          ("vec_y", (2, 3), (3,), False, False, 1.0), ("dot", (3,), (3,), False, False, 1.0),
          ("vec_batched", (3,), (2, 3, 4), False, False, 1.0), ("bcast4d", (2, 1, 2, 3), (5, 3, 2), False, False, 1.0)]],
    *[OpCase("scale", lambda r: {"X": N(r, 3, 4)}, lambda i, a: {"Out": a["scale"] * i["X"] + a["bias"]
             if a["bias_after_scale"] else a["scale"] * (i["X"] + a["bias"])},
             attrs={"scale": 2.5, "bias": b, "bias_after_scale": after}, grad=("X",), name=f"after={after}")
      for b, after in [(0.5, True), (-1.0, False)]],
    *[OpCase(op, lambda r: {"X": N(r, 2, 3, 4)}, _reduce_ref(f), attrs=attrs, grad=("X",), name=name,
             errors=(({"X": spec(2, 3)}, {"dim": [2]}, ProgramError, "dim 2 is out of range"),))
      for op, f in [("reduce_sum", np.sum), ("reduce_mean", np.mean)]
      for name, attrs in [("dim1", {"dim": [1]}), ("keep_last", {"dim": [-1, 0], "keep_dim": True}),
                          ("all", {"reduce_all": True})]],
    OpCase("mean", lambda r: {"X": N(r, 3, 4)}, lambda i, a: {"Out": i["X"].mean().reshape(1)}, grad=("X",)),
    OpCase("sum", lambda r: {"X": [N(r, 2, 3) for _ in range(3)]}, lambda i, a: {"Out": sum(i["X"])}, grad=("X",),
           errors=(({"X": [spec(2, 3), spec(3)]}, {}, ProgramError, "differ in rank"),)),
    OpCase("square_error_cost", lambda r: {"X": N(r, 4, 1), "Y": N(r, 4, 1)},
           lambda i, a: {"Out": (i["X"] - i["Y"]) ** 2}, grad=("X", "Y"), batch=("X", "Y"),
           errors=(({"X": spec(4, 1), "Y": spec(4)}, {}, ProgramError, "differ in rank"),)),
    OpCase("cross_entropy", _P, _ce_ref, grad=("X",), batch=("X", "Label"),
           errors=(({"X": spec(4, 5), "Label": spec(4, 2, dtype="int64")}, {}, ProgramError, r"must have shape \[4, 1\]"),
                   ({"X": spec(4, 5), "Label": spec(4, 1)}, {}, ProgramError, "must be int64"),
                   ({"X": np.full((2, 5), 0.2, np.float32), "Label": np.array([[1], [5]])}, {}, ValueError,
                    "label 5 is out of range for 5 classes"))),
    OpCase("cross_entropy", lambda r: {"X": softmax(N(r, 4, 5)), "Label": np.array([[1], [4], [1], [0]])},
           _ce_ref, attrs={"ignore_index": 1}, grad=("X",), name="ignore_index"),
    OpCase("cross_entropy", lambda r: {"X": softmax(N(r, 4, 5)), "Label": softmax(N(r, 4, 5))}, _ce_ref,
           attrs={"soft_label": True}, grad=("X",), name="soft", batch=("X", "Label")),
    OpCase("softmax_with_cross_entropy", lambda r: {"Logits": 3 * N(r, 4, 5), "Label": labels(r, 4, 5)},
           _swce_ref, grad=("Logits",), grad_outs=("Loss",), batch=("Logits", "Label"),
           errors=(({"Logits": spec(4, 5), "Label": spec(4, 2, dtype="int64")}, {}, ProgramError, "hard label"),
                   ({"Logits": np.zeros((2, 3), np.float32), "Label": np.array([[0], [-1]])}, {}, ValueError,
                    "label -1 is out of range for 3 classes"))),
    OpCase("softmax_with_cross_entropy", lambda r: {"Logits": N(r, 4, 5), "Label": np.array([[2], [-100], [0], [4]])},
           _swce_ref, grad=("Logits",), grad_outs=("Loss",), name="ignore_index"),
    OpCase("softmax_with_cross_entropy", lambda r: {"Logits": N(r, 4, 5), "Label": softmax(N(r, 4, 5))}, _swce_ref,
           attrs={"soft_label": True}, grad=("Logits",), grad_outs=("Loss",), name="soft"),
    # Paddle 3.x's loss for these logits is 64 in both rows (NOTE(softmax-clip)).
    OpCase("softmax_with_cross_entropy", lambda r: {"Logits": np.array([[0.0, -100.0, -70.0], [100.0, 0.0, 1.0]]),
                                                    "Label": np.array([[1], [1]])},
           lambda i, a: {"Softmax": softmax(i["Logits"]), "Loss": np.array([[64.0], [64.0]])}, name="paddle_tails"),
    OpCase("concat", lambda r: {"X": [N(r, 2, 1), N(r, 2, 3), N(r, 2, 2)]},
           lambda i, a: {"Out": np.concatenate(i["X"], 1)}, attrs={"axis": 1}, grad=("X",),
           errors=(({"X": [spec(2, 3), spec(3, 3)]}, {"axis": 1}, ProgramError, "differ in dim 0"),
                   ({"X": [spec(2, 3), spec(2, 3)]}, {"axis": 2}, ProgramError, "axis 2 is out of range"))),
    OpCase("concat", lambda r: {"X": [N(r, 3, 2), N(r, 1, 2)]}, lambda i, a: {"Out": np.concatenate(i["X"], 0)},
           grad=("X",), name="axis0", batch=()),
    OpCase("concat_places", lambda r: {"X": [N(r, 3, 2), N(r, 1, 2)]}, lambda i, a: {"Out": np.concatenate(i["X"], 0)},
           batch=(), check=lambda run, a: _places_lod_check(run)),
    OpCase("split", lambda r: {"X": N(r, 2, 6)}, lambda i, a: {"Out": np.split(i["X"], 3, 1)},
           attrs={"num": 3, "axis": 1}, grad=("X",),
           errors=(({"X": spec(2, 5)}, {"num": 3, "axis": 1}, ProgramError, "does not divide"),
                   ({"X": spec(2, 5)}, {"sections": [1, 2], "axis": 1}, ProgramError, "do not add up"),
                   ({"X": spec(2, 5)}, {"num": 2, "sections": [1, 4]}, ProgramError, "exactly one"))),
    OpCase("split", lambda r: {"X": N(r, 2, 3, 6)}, lambda i, a: {"Out": np.split(i["X"], [1, 4], -1)},
           attrs={"sections": [1, -1, 2], "axis": -1}, grad=("X",), name="sections"),
    *[OpCase("reshape", lambda r: {"X": N(r, 2, 3, 4)}, lambda i, a, s=s: {"Out": i["X"].reshape(s)},
             attrs={"shape": shape}, grad=("X",), name=str(shape),
             errors=(({"X": spec(2, 3, 4)}, {"shape": [5, -1]}, ProgramError, "cannot take shape"),
                     ({"X": spec(2, 3, 4)}, {"shape": [-1, -1]}, ProgramError, "at most one -1"),
                     ({"X": spec(2, 3)}, {"shape": [4, 0, 0]}, ProgramError, "copies dim 2")))
      for shape, s in [([0, -1], (2, 12)), ([4, 6], (4, 6)), ([-1], (24,)), ([0, 2, -1, 2], (2, 2, 3, 2))]],
    OpCase("cast", lambda r: {"X": N(r, 3, 4)}, lambda i, a: {"Out": i["X"].astype(np.float64)},
           attrs={"out_dtype": "float64"}, grad=("X",)),
    OpCase("cast", lambda r: {"X": 5 * N(r, 3, 4)}, lambda i, a: {"Out": i["X"].astype(np.int64)},
           attrs={"out_dtype": "int64"}, name="to_int64"),
    OpCase("lookup_table", lambda r: {"W": N(r, 10, 4), "Ids": _IDS}, _lookup_ref, grad=("W",), batch=("Ids",),
           errors=(({"W": np.ones((10, 4), np.float32), "Ids": np.array([[1], [10]])}, {}, IndexError,
                    r"id 10 is out of range for a table of 10 rows"),
                   ({"W": np.ones((10, 4), np.float32), "Ids": np.array([[-1]])}, {}, IndexError,
                    "id -1 is out of range"),
                   ({"W": spec(10, 4), "Ids": spec(5, 1)}, {}, ProgramError, "Ids must be int64"),
                   ({"W": spec(10, 4), "Ids": spec(5, 1, dtype="int64")}, {"padding_idx": 10}, ProgramError,
                    "padding_idx 10 is outside"))),
    OpCase("lookup_table_v2", lambda r: {"W": N(r, 10, 4), "Ids": _IDS}, lambda i, a: {"Out": i["W"][i["Ids"]]},
           grad=("W",), batch=("Ids",)),
    OpCase("lookup_table_v2", lambda r: {"W": N(r, 10, 4), "Ids": _IDS.reshape(-1)},
           lambda i, a: {"Out": i["W"][i["Ids"]]}, grad=("W",), batch=("Ids",), name="flat"),
    OpCase("lookup_table", lambda r: {"W": N(r, 10, 4), "Ids": _IDS}, _lookup_ref, attrs={"padding_idx": 3},
           grad=("W",), name="padding", batch=("Ids",)),
    OpCase("lookup_table", lambda r: {"W": N(r, 10, 4), "Ids": _IDS.reshape(-1)}, _lookup_ref, grad=("W",),
           name="ids_1d", batch=()),
    OpCase("top_k", lambda r: {"X": N(r, 4, 6)}, lambda i, a: {
        "Indices": np.argsort(-i["X"], -1, kind="stable")[:, :2],
        "Out": np.take_along_axis(i["X"], np.argsort(-i["X"], -1, kind="stable")[:, :2], -1)},
           attrs={"k": 2}, errors=(({"X": spec(4, 6)}, {"k": 7}, ProgramError, "k=7 must be in 1..6"),)),
    OpCase("top_k", lambda r: {"X": _TIE}, lambda i, a: {"Out": np.array([[3.0, 3.0], [5.0, 5.0]]),
                                                         "Indices": np.array([[1, 2], [0, 1]])},
           attrs={"k": 2}, name="ties"),
    OpCase("accuracy", lambda r: {"Out": N(r, 6, 2), "Indices": r.integers(0, 4, (6, 2)), "Label": labels(r, 6, 4)},
           _acc_ref, batch=("Out", "Indices", "Label"),
           errors=(({"Out": spec(6, 2), "Indices": spec(6, 2, dtype="int64"), "Label": spec(6, dtype="int64")},
                    {}, ProgramError, "must be"),)),
    OpCase("assign", lambda r: {"X": N(r, 2, 3)}, lambda i, a: {"Out": i["X"]}, grad=("X",)),
    OpCase("fill_zeros_like", lambda r: {"X": N(r, 2, 3)}, lambda i, a: {"Out": np.zeros((2, 3))}),
    OpCase("increment", lambda r: {"X": np.array([3.0])}, lambda i, a: {"Out": np.array([5.0])}, attrs={"step": 2.0}),
    OpCase("fill_constant", ref=lambda i, a: {"Out": np.full((2, 3), 1.5, np.float32)},
           attrs={"shape": [2, 3], "value": 1.5}),
    OpCase("fill_constant", ref=lambda i, a: {"Out": np.full((4,), 7, np.int64)},
           attrs={"shape": [4], "value": 7, "dtype": "int64"}, name="int64"),
    OpCase("assign_value", ref=lambda i, a: {"Out": np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)},
           attrs={"shape": [2, 2], "values": [1.0, 2.0, 3.0, 4.0]}),
    OpCase("uniform_random", check=_rand_check("uniform"),
           errors=(({}, {"shape": [2, 3], "whole_shape": [4, 3], "offsets": [3, 0]}, ValueError, "lies outside"),)),
    OpCase("gaussian_random", check=_rand_check("gaussian")),
]


# -- unary activations (ops/unary.py), reduce_max/min/prod, comparisons and logical ops ----


def apart(lo, hi, *kinks):
    """A sampler of uniform reals in [lo, hi] kept at least 0.1 from each kink."""

    def draw(r, *shape):
        x = r.uniform(lo, hi, size=shape)
        for k in kinks:
            x = np.where(np.abs(x - k) < 0.1, x + 0.25, x)
        return x

    return draw


def _round_ref(x):
    return np.sign(x) * np.floor(np.abs(x) + 0.5)  # halves away from zero, as std::round


def _sigmoid_np(x):
    return 1 / (1 + np.exp(-x))


def _prod_zeros(r, both=True):
    """Zeros where Paddle's Out/X gradient would give NaN."""
    x = N(r, 2, 3, 4)
    x[0, 1, 2] = 0.0  # one zero in a group: the others' gradients are 0, its own is not
    if both:
        x[1, :2, 0] = 0.0  # two zeros in a group (dim 1): every gradient in it is 0
    return {"X": x}


# op: (sampler, reference, attrs, variant name)
_ACTIVATIONS = [
    ("square", N, lambda x, a: x * x, {}, ""),
    ("sqrt", pos, lambda x, a: np.sqrt(x), {}, ""),
    ("rsqrt", pos, lambda x, a: 1 / np.sqrt(x), {}, ""),
    ("abs", away, lambda x, a: np.abs(x), {}, ""),
    ("exp", N, lambda x, a: np.exp(x), {}, ""),
    ("log", pos, lambda x, a: np.log(x), {}, ""),
    ("reciprocal", away, lambda x, a: 1 / x, {}, ""),
    ("softsign", N, lambda x, a: x / (1 + np.abs(x)), {}, ""),
    ("softplus", lambda r, *s: 4 * N(r, *s), lambda x, a: np.logaddexp(0, x), {}, ""),
    ("pow", N, lambda x, a: x ** a["factor"], {"factor": 3.0}, "cube"),
    ("pow", pos, lambda x, a: x ** a["factor"], {"factor": -1.5}, "negative"),
    ("leaky_relu", away, lambda x, a: np.where(x > 0, x, a["alpha"] * x), {}, ""),
    ("leaky_relu", away, lambda x, a: np.where(x > 0, x, a["alpha"] * x), {"alpha": 0.3}, "alpha"),
    ("elu", away, lambda x, a: np.where(x > 0, x, a["alpha"] * (np.exp(x) - 1)), {}, ""),
    ("elu", away, lambda x, a: np.where(x > 0, x, a["alpha"] * (np.exp(x) - 1)), {"alpha": 0.5}, "alpha"),
    ("relu6", apart(-2, 8, 0, 6), lambda x, a: np.clip(x, 0, 6), {}, ""),
    ("relu6", apart(-2, 4, 0, 2), lambda x, a: np.clip(x, 0, 2), {"threshold": 2.0}, "threshold"),
    ("brelu", apart(-3, 4, -1, 2), lambda x, a: np.clip(x, -1, 2), {"t_min": -1.0, "t_max": 2.0}, ""),
    ("hard_sigmoid", apart(-4, 4, -2.5, 2.5), lambda x, a: np.clip(0.2 * x + 0.5, 0, 1), {}, ""),
    ("hard_sigmoid", apart(-3, 3, -1, 1), lambda x, a: np.clip(0.5 * x + 0.5, 0, 1),
     {"slope": 0.5, "offset": 0.5}, "slope"),
    ("swish", lambda r, *s: 3 * N(r, *s), lambda x, a: x * _sigmoid_np(x), {}, ""),
    ("swish", lambda r, *s: 3 * N(r, *s), lambda x, a: x * _sigmoid_np(2 * x), {"beta": 2.0}, "beta"),
    ("clip", apart(-2, 2, -0.5, 0.8), lambda x, a: np.clip(x, -0.5, 0.8), {"min": -0.5, "max": 0.8}, ""),
    ("sign", away, lambda x, a: np.sign(x), {}, ""),
    ("floor", apart(-3, 3, -2, -1, 0, 1, 2), lambda x, a: np.floor(x), {}, ""),
    ("ceil", apart(-3, 3, -2, -1, 0, 1, 2), lambda x, a: np.ceil(x), {}, ""),
    ("round", apart(-3, 3, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5), lambda x, a: _round_ref(x), {}, ""),
]


_REDUCE_VARIANTS = [("dim1", {"dim": [1]}), ("keep_last", {"dim": [-1, 0], "keep_dim": True}),
                    ("all", {"reduce_all": True})]
_CMP = {"less_than": np.less, "less_equal": np.less_equal, "greater_than": np.greater,
        "greater_equal": np.greater_equal, "equal": np.equal, "not_equal": np.not_equal}
_INTS = lambda r, *s: r.integers(-2, 3, size=s).astype(np.float64)  # noqa: E731  (ties on purpose)
_BOOLS = lambda r, *s: r.random(s) < 0.5  # noqa: E731

CASES += [
    *[OpCase(op, lambda r, d=d: {"X": d(r, 3, 4)}, lambda i, a, f=f: {"Out": f(i["X"], a)}, attrs=attrs, grad=("X",), name=name)
      for op, d, f, attrs, name in _ACTIVATIONS],
    OpCase("round", lambda r: {"X": np.array([[-2.5, -1.5, -0.5, 0.5, 1.5, 2.5]])},
           lambda i, a: {"Out": np.array([[-3.0, -2.0, -1.0, 1.0, 2.0, 3.0]])}, name="halves"),
    OpCase("clip", lambda r: {"X": np.array([[-1.0, -0.5, 0.0, 0.8, 2.0]])},
           lambda i, a: {"Out": np.array([[-0.5, -0.5, 0.0, 0.8, 0.8]])}, attrs={"min": -0.5, "max": 0.8},
           name="bounds", errors=(({"X": spec(2, 3)}, {"min": 1.0, "max": -1.0}, ProgramError,
                                   "min 1.0 is greater than max -1.0"),
                                  ({"X": spec(2, 3)}, {}, ProgramError, "min and max are required"))),
    *[OpCase(op, lambda r: {"X": N(r, 2, 3, 4)}, _reduce_ref(f), attrs=attrs, grad=("X",), name=name,
             errors=(({"X": spec(2, 3)}, {"dim": [-3]}, ProgramError, "dim -3 is out of range"),))
      for op, f in [("reduce_max", np.max), ("reduce_min", np.min), ("reduce_prod", np.prod)]
      for name, attrs in _REDUCE_VARIANTS],
    OpCase("reduce_prod", _prod_zeros, _reduce_ref(np.prod), attrs={"dim": [1]}, grad=("X",), name="zeros"),
    OpCase("reduce_prod", lambda r: _prod_zeros(r, both=False), _reduce_ref(np.prod), attrs={"reduce_all": True}, grad=("X",),
           name="zeros_all"),
    *[OpCase(op, lambda r: {"X": _INTS(r, 2, 3, 4), "Y": _INTS(r, 2, 3, 4)},
             lambda i, a, f=f: {"Out": f(i["X"], i["Y"])}, batch=("X", "Y"),
             errors=(({"X": spec(2, 3, 4), "Y": spec(5)}, {"axis": 1}, ProgramError, "do not broadcast"),))
      for op, f in _CMP.items()],
    OpCase("less_than", lambda r: {"X": _INTS(r, 2, 3, 4), "Y": _INTS(r, 3)},
           lambda i, a: {"Out": i["X"] < i["Y"].reshape(1, 3, 1)}, attrs={"axis": 1}, name="axis1"),
    OpCase("equal", lambda r: {"X": _INTS(r, 2, 3, 4), "Y": _INTS(r, 4)},
           lambda i, a: {"Out": i["X"] == i["Y"]}, name="last"),
    *[OpCase(op, lambda r: {"X": _BOOLS(r, 3, 4), "Y": _BOOLS(r, 3, 4)},
             lambda i, a, f=f: {"Out": f(i["X"], i["Y"])}, batch=("X", "Y"),
             errors=(({"X": spec(3, 4), "Y": spec(3, 4, dtype="bool")}, {}, ProgramError, "X must be bool"),))
      for op, f in [("logical_and", np.logical_and), ("logical_or", np.logical_or),
                    ("logical_xor", np.logical_xor)]],
    OpCase("logical_not", lambda r: {"X": _BOOLS(r, 3, 4)}, lambda i, a: {"Out": ~i["X"]},
           errors=(({"X": spec(3, 4, dtype="int64")}, {}, ProgramError, "X must be bool"),)),
]

CASES += (conv.CASES + norm.CASES + manip.CASES + loss.CASES + math.CASES + creation.CASES + metric.CASES
          + grid.CASES + misc.CASES + sequence.CASES + sequence_pad.CASES
          + rnn.CASES + shuffle.CASES)
CASES += sequence_more.CASES + rnn_more.CASES + contrib.CASES


def by_id() -> dict[str, OpCase]:
    """Case id -> case; ids are unique."""
    out: dict[str, OpCase] = {}
    for c in CASES:
        assert c.id not in out, f"duplicate OpCase id {c.id}"
        out[c.id] = c
    return out


def sample(case: OpCase, seed: int, dtype: Any) -> dict:
    """The case's inputs for ``seed``, floating arrays cast to ``dtype``."""
    rng = np.random.default_rng(seed)

    def cast(v):
        v = np.asarray(v)
        return v.astype(dtype) if v.dtype.kind == "f" else v

    return {k: [cast(x) for x in v] if isinstance(v, list) else cast(v) for k, v in case.sample(rng).items()}
