"""OpCases for batch_norm, layer_norm and dropout; tests/op_cases.py gathers them.

The references are written from the formulas (float64, channels moved to axis 1), not from
the kernels: batch statistics with the biased variance, running statistics moved by
``momentum``, SavedVariance the inverse std (Fluid's batch_norm_op.cc). Dropout's masks are
random, so its training cases test properties (``check``): the keep rate, the scaling, equal
masks for equal (seed, step), new masks at a new step, and the rows a trainer of rank r
draws being exactly the rows one process draws for those examples (NOTE(dropout-masks)).
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import ProgramError
from placegroup.ops.registry import KernelContext, get_op_def
from tests.op_case import N, OpCase, pos, spec

CASES: list[OpCase] = []

# -- batch_norm -----------------------------------------------------------------------------


def _bn_sample(shape, layout="NCHW"):
    c = shape[1] if layout == "NCHW" else shape[-1]

    def sample(r):
        return {"X": 2.0 * N(r, *shape) + 0.5, "Scale": pos(r, c), "Bias": N(r, c), "Mean": N(r, c),
                "Variance": pos(r, c)}

    return sample


def _bn_ref(i, a):
    x = np.asarray(i["X"], np.float64)
    if a["data_layout"] == "NHWC":
        x = np.moveaxis(x, -1, 1)
    n, c = x.shape[:2]
    x3 = x.reshape(n, c, -1)
    run_mean, run_var = (np.asarray(i[k], np.float64) for k in ("Mean", "Variance"))
    scale, bias, eps, m = i["Scale"], i["Bias"], a["epsilon"], a["momentum"]
    if a["use_global_stats"] or (a["is_test"] and not a["trainable_statistics"]):
        mean, var = run_mean, run_var
        mean_out, var_out = run_mean, run_var
    else:
        mean, var = x3.mean(axis=(0, 2)), x3.var(axis=(0, 2))  # numpy's var is the biased one
        mean_out, var_out = run_mean * m + mean * (1 - m), run_var * m + var * (1 - m)
    y = (x3 - mean[:, None]) / np.sqrt(var[:, None] + eps) * scale[:, None] + bias[:, None]
    y = y.reshape(x.shape)
    if a["data_layout"] == "NHWC":
        y = np.moveaxis(y, 1, -1)
    return {"Y": y, "MeanOut": mean_out, "VarianceOut": var_out, "SavedMean": mean,
            "SavedVariance": 1 / np.sqrt(var + eps)}


def _bn(name, shape, layout="NCHW", **attrs):
    return OpCase("batch_norm", _bn_sample(shape, layout), _bn_ref, attrs={"data_layout": layout, **attrs},
                  grad=("X", "Scale", "Bias"), grad_outs=("Y",), name=name)


_BN_ERR = {"X": spec(4, 3, 2, 2), "Scale": spec(3), "Bias": spec(3), "Mean": spec(3), "Variance": spec(3)}
CASES += [
    OpCase("batch_norm", _bn_sample((4, 3, 2, 2)), _bn_ref, grad=("X", "Scale", "Bias"), grad_outs=("Y",),
           name="train_nchw",
           errors=(({**_BN_ERR, "X": spec(4)}, {}, ProgramError, r"batch_norm: X must have rank 2 to 5.*X\[4\]"),
                   ({**_BN_ERR, "Scale": spec(4)}, {}, ProgramError, r"Scale must be \[C\] = \[3\].*Scale\[4\]"),
                   ({**_BN_ERR, "Variance": spec(3, 1)}, {}, ProgramError, r"Variance must be \[C\]"),
                   (_BN_ERR, {"data_layout": "NCWH"}, ProgramError, r"data_layout must be one of.*'NCWH'"),
                   (_BN_ERR, {"epsilon": 0.1}, ProgramError, r"epsilon must be in \[0, 0.001\].*0.1"),
                   (_BN_ERR, {"data_layout": "NHWC"}, ProgramError,  # C is X's last dim, 2
                    r"Scale must be \[C\] = \[2\].*data_layout NHWC"))),
    _bn("train_2d", (6, 4), momentum=0.5),
    _bn("train_nhwc", (3, 2, 2, 4), "NHWC"),
    _bn("train_5d", (2, 3, 2, 2, 2)),
    _bn("is_test", (4, 3, 2, 2), is_test=True),
    _bn("global_stats", (4, 3, 2, 2), use_global_stats=True),
    _bn("trainable_statistics", (4, 3, 2, 2), is_test=True, trainable_statistics=True),
    # one value per channel: Fluid passes X through and leaves the running statistics
    OpCase("batch_norm", _bn_sample((1, 3)),
           lambda i, a: {"Y": i["X"], "MeanOut": i["Mean"], "VarianceOut": i["Variance"],
                         "SavedMean": np.zeros(3), "SavedVariance": np.zeros(3)},
           grad=("X", "Scale", "Bias"), grad_outs=("Y",), name="one_per_channel"),
]

# -- layer_norm -----------------------------------------------------------------------------


def _ln_ref(i, a):
    x = np.asarray(i["X"], np.float64)
    ax = a["begin_norm_axis"]
    x2 = x.reshape(int(np.prod(x.shape[:ax])), -1)
    mean, var = x2.mean(axis=1), x2.var(axis=1)
    y = (x2 - mean[:, None]) / np.sqrt(var[:, None] + a["epsilon"])
    if "Scale" in i:
        y = y * i["Scale"]
    if "Bias" in i:
        y = y + i["Bias"]
    return {"Y": y.reshape(x.shape), "Mean": mean, "Variance": var}


def _ln(name, shape, axis, scale=True, bias=True, **kw):
    h = int(np.prod(shape[axis:]))

    def sample(r):
        ins = {"X": 1.5 * N(r, *shape) - 0.3}
        if scale:
            ins["Scale"] = pos(r, h)
        if bias:
            ins["Bias"] = N(r, h)
        return ins

    grad = ("X",) + (("Scale",) if scale else ()) + (("Bias",) if bias else ())
    return OpCase("layer_norm", sample, _ln_ref, attrs={"begin_norm_axis": axis}, grad=grad, grad_outs=("Y",),
                  name=name, **kw)


_LN_ERR = {"X": spec(2, 3, 4), "Scale": spec(12), "Bias": spec(12)}
CASES += [
    _ln("2d", (5, 6), 1, errors=(
        (_LN_ERR, {"begin_norm_axis": 0}, ProgramError, r"begin_norm_axis must be in \[1, rank\(X\)\) = \[1, 3\).*0$"),
        (_LN_ERR, {"begin_norm_axis": 3}, ProgramError, r"begin_norm_axis must be in \[1, rank\(X\)\).*got 3"),
        ({**_LN_ERR, "Scale": spec(4)}, {"begin_norm_axis": 1}, ProgramError, r"Scale must be \[12\].*Scale\[4\]"),
        ({**_LN_ERR, "Bias": spec(3, 4)}, {"begin_norm_axis": 1}, ProgramError, r"Bias must be \[12\]"),
        (_LN_ERR, {"begin_norm_axis": 1, "epsilon": 0.5}, ProgramError, r"epsilon must be in"))),
    _ln("3d_axis1", (2, 3, 4), 1),
    _ln("3d_axis2", (2, 3, 4), 2),
    _ln("no_affine", (3, 5), 1, scale=False, bias=False),
    _ln("scale_only", (3, 5), 1, bias=False),
]

# -- dropout --------------------------------------------------------------------------------


def _dropout(ins, attrs, rank=0, step=0):
    """The dropout kernel with ``ctx.rank``/``ctx.step`` set, as an executor calls it."""
    d = get_op_def("dropout")
    return d.kernels["cpu"](np, ins, {**d.attrs, **attrs}, KernelContext(outputs=("Out", "Mask"), rank=rank,
                                                                            step=step))


def _dropout_check(run, attrs):
    p, impl = attrs["dropout_prob"], attrs["dropout_implementation"]
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((400, 50)) + 3.0).astype(np.float32)  # no zeros: dropped = 0 exactly
    got = run({"X": x}, {})
    out, mask = got["Out"], got["Mask"]
    assert out.dtype == np.float32 and mask.dtype == np.uint8 and set(np.unique(mask)) <= {0, 1}
    assert abs(1 - mask.mean() - p) < 0.01, f"drop rate {1 - mask.mean()} for dropout_prob {p}"
    scale = 1 / np.float32(1 - p) if impl == "upscale_in_train" else 1
    np.testing.assert_allclose(out, x * mask * scale, rtol=1e-6)
    np.testing.assert_array_equal(out == 0, mask == 0)
    # the same (seed, step, rank) gives the same mask; a new step, a new seed: another
    base = {**attrs, "seed": 11}
    m5 = _dropout({"X": x}, base, step=5)["Mask"]
    np.testing.assert_array_equal(_dropout({"X": x}, base, step=5)["Mask"], m5)
    assert (m5 != _dropout({"X": x}, base, step=6)["Mask"]).mean() > 0.3
    assert (m5 != _dropout({"X": x}, {**base, "seed": 12}, step=5)["Mask"]).mean() > 0.3
    # fix_seed: every step draws the same mask (Fluid re-seeds with the fixed seed each run)
    fixed = {**base, "fix_seed": True}
    np.testing.assert_array_equal(_dropout({"X": x}, fixed, step=0)["Mask"],
                                  _dropout({"X": x}, fixed, step=7)["Mask"])
    # trainers: rank r of k running rows [r*n, (r+1)*n) draws exactly those rows' masks
    whole = (rng.standard_normal((12, 3, 4)) + 3.0).astype(np.float32)
    for step in (0, 3):
        one = _dropout({"X": whole}, base, step=step)
        for k in (2, 3, 4):
            n = len(whole) // k
            for r in range(k):
                part = _dropout({"X": whole[r * n:(r + 1) * n]}, base, rank=r, step=step)
                np.testing.assert_array_equal(part["Mask"], one["Mask"][r * n:(r + 1) * n])
                np.testing.assert_array_equal(part["Out"], one["Out"][r * n:(r + 1) * n])
    # the grad op scales by the same mask
    g = rng.standard_normal(x.shape).astype(np.float32)
    grad = get_op_def("dropout_grad").kernels["cpu"](np, {"Mask": mask, "Out@GRAD": g}, {**attrs},
                                                     KernelContext(outputs=("X@GRAD",)))["X@GRAD"]
    np.testing.assert_allclose(grad, g * mask * scale, rtol=1e-6)
    assert grad.dtype == np.float32
    # p = 0 keeps everything, p = 1 drops everything
    np.testing.assert_array_equal(run({"X": x}, {"dropout_prob": 0.0})["Out"], x)
    assert not run({"X": x}, {"dropout_prob": 1.0})["Out"].any()


def _dropout_test_ref(i, a):
    x = i["X"]
    k = 1.0 if a["dropout_implementation"] == "upscale_in_train" else 1 - a["dropout_prob"]
    return {"Out": x * k, "Mask": np.ones(x.shape, np.uint8)}


_DROP_ERR = {"X": spec(4, 3)}
CASES += [
    OpCase("dropout", lambda r: {"X": N(r, 4, 5)}, check=_dropout_check, grad=("X",), attrs={"dropout_prob": 0.3},
           name="downgrade_in_infer",
           errors=((_DROP_ERR, {"dropout_prob": 1.5}, ProgramError, r"dropout_prob must be in \[0, 1\], got 1.5"),
                   (_DROP_ERR, {"dropout_implementation": "upscale"}, ProgramError,
                    r"dropout_implementation must be one of.*'upscale'"))),
    OpCase("dropout", lambda r: {"X": N(r, 3, 2, 4)}, check=_dropout_check, grad=("X",),
           attrs={"dropout_prob": 0.6, "dropout_implementation": "upscale_in_train"}, name="upscale_in_train"),
    OpCase("dropout", lambda r: {"X": N(r, 4, 5)}, _dropout_test_ref, grad=("X",),
           attrs={"dropout_prob": 0.3, "is_test": True}, name="is_test_downgrade"),
    OpCase("dropout", lambda r: {"X": N(r, 4, 5)}, _dropout_test_ref, grad=("X",),
           attrs={"dropout_prob": 0.3, "is_test": True, "dropout_implementation": "upscale_in_train"},
           name="is_test_upscale"),
]

# -- instance_norm and group_norm -----------------------------------------------------------


def _grouped_ref(x, groups, eps, scale=None, bias=None, layout="NCHW"):
    """Normalize [N, C, ...] over groups of ceil(C / groups) consecutive channels (the last
    group may be smaller, as in Fluid 1.8) and all positions, one group at a time."""
    x = np.asarray(x, np.float64)
    if layout == "NHWC":
        x = np.moveaxis(x, -1, 1)
    n, c = x.shape[:2]
    size = -(-c // groups)
    y, means, variances = np.empty_like(x), [], []
    for g in range(groups):
        part = x[:, g * size:(g + 1) * size].reshape(n, -1)
        mean, var = part.mean(axis=1), part.var(axis=1)
        means.append(mean)
        variances.append(var)
        shape = (n,) + (1,) * (x.ndim - 1)
        y[:, g * size:(g + 1) * size] = (x[:, g * size:(g + 1) * size] - mean.reshape(shape)) / np.sqrt(
            var.reshape(shape) + eps)
    view = (1, c) + (1,) * (x.ndim - 2)
    if scale is not None:
        y = y * np.reshape(scale, view)
    if bias is not None:
        y = y + np.reshape(bias, view)
    if layout == "NHWC":
        y = np.moveaxis(y, 1, -1)
    return y, np.stack(means, axis=1), np.stack(variances, axis=1)


def _in_ref(i, a):
    x = i["X"]
    y, mean, var = _grouped_ref(x, x.shape[1], a["epsilon"], i.get("Scale"), i.get("Bias"))
    return {"Y": y, "SavedMean": mean.reshape(-1), "SavedVariance": 1 / np.sqrt(var.reshape(-1) + a["epsilon"])}


def _gn_ref(i, a):
    y, mean, var = _grouped_ref(i["X"], a["groups"], a["epsilon"], i.get("Scale"), i.get("Bias"), a["data_layout"])
    return {"Y": y, "Mean": mean, "Variance": var}


def _affine_sample(shape, c, affine=True):
    def sample(r):
        ins = {"X": 1.5 * N(r, *shape) + 0.4}
        if affine:
            ins.update(Scale=pos(r, c), Bias=N(r, c))
        return ins

    return sample


_AFFINE = ("X", "Scale", "Bias")
CASES += [
    OpCase("instance_norm", _affine_sample((3, 4, 2, 3), 4), _in_ref, grad=_AFFINE, grad_outs=("Y",), name="4d",
           errors=(({"X": spec(3)}, {}, ProgramError, r"instance_norm: X must have rank 2 to 5.*X\[3\]"),
                   ({"X": spec(3, 4, 2), "Scale": spec(3), "Bias": spec(4)}, {}, ProgramError,
                    r"instance_norm: Scale must be \[C\] = \[4\].*Scale\[3\]"))),
    OpCase("instance_norm", _affine_sample((2, 3, 5), 3, affine=False), _in_ref, grad=("X",), grad_outs=("Y",),
           name="3d_no_affine"),
    OpCase("group_norm", _affine_sample((3, 6, 2, 2), 6), _gn_ref, attrs={"groups": 3}, grad=_AFFINE,
           grad_outs=("Y",), name="nchw",
           errors=(({"X": spec(3, 6, 2)}, {"groups": 7}, ProgramError,
                    r"group_norm: groups must be in \[1, C\] = \[1, 6\].*got 7"),
                   ({"X": spec(3, 6, 2)}, {"groups": 2, "data_layout": "CHW"}, ProgramError,
                    r"data_layout must be one of"),
                   ({"X": spec(3, 6, 2), "Bias": spec(5)}, {"groups": 2}, ProgramError,
                    r"group_norm: Bias must be \[C\] = \[6\]"))),
    OpCase("group_norm", _affine_sample((2, 3, 2, 5), 5), _gn_ref, attrs={"groups": 2, "data_layout": "NHWC"},
           grad=_AFFINE, grad_outs=("Y",), name="nhwc_uneven"),  # groups of 3 and 2 channels
    OpCase("group_norm", _affine_sample((4, 6), 6, affine=False), _gn_ref, attrs={"groups": 2}, grad=("X",),
           grad_outs=("Y",), name="2d_no_affine"),
]
