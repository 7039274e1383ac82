"""The math layers of placegroup/layers/ops.py and placegroup/layers/manip.py added for Fluid 1.8
(elementwise_max .. mod, the activations, prelu, resize, lrn, label_smooth, clip_by_norm,
reduce_all/any, where/nonzero, index_select, ...) build programs that the Executor runs to
numpy's answers, with Fluid 1.8's op types, attrs and parameter names; gradients flow through
them. Where PLACEGROUP_PADDLE_PYTHON names a python with paddle, every OpCase of
tests/cases/math.py whose op Paddle 2.6 still has with 1.8's meaning runs there too and must
give the same outputs and gradients."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import placegroup as fluid
from tests.cases.math import CASES
from tests.test_layers import check_program_gradients, fresh
from tests.test_manip_layers import PADDLE_PYTHON, run_in_paddle

L = fluid.layers

# Ops whose Paddle 2.6 kernel is not Fluid 1.8's (NOTE(int-division): 2.6 floors and takes the
# divisor's sign on integers) or that Paddle 2.6 no longer registers.
NOT_AS_IN_PADDLE_2 = {"elementwise_floordiv", "elementwise_mod", "isfinite", "diag", "space_to_depth",
                      "pad_constant_like",
                      # 1.8's mish_op takes softplus(x) = e^x below -threshold; 2.6's does not
                      "mish-threshold",
                      # Paddle 2.6 reads an NHWC affine_channel's channels from dim 1 (1.8: the last)
                      "affine_channel-nhwc",
                      # Paddle 2.6's strided_slice_grad fails on a decreased axis
                      "strided_slice-decrease",
                      # Paddle 2.6's max/min/pow grad kernels reject a Y aligned at axis 1
                      "elementwise_max-axis1", "elementwise_min-axis1", "elementwise_pow-axis1"}


# attrs Paddle 2.6 renamed: 1.8 name -> 2.6 name, per op type
RENAMED = {"trace": {"dim1": "axis1", "dim2": "axis2"}, "flip": {"dims": "axis"}, "roll": {"dims": "axis"}}


def _paddle_attrs(case, attrs):
    names = RENAMED.get(case.op, {})
    out = {names.get(k, k): v for k, v in attrs.items()}
    if case.op == "allclose":  # Paddle 2.6 takes its tolerances as strings
        out.update(rtol=str(out["rtol"]), atol=str(out["atol"]))
    return out


# Cases whose gradient is Paddle's rule rather than a derivative (no finite-difference check in
# the OpCase table): their gradients are compared with Paddle's here.
RULES = [dataclasses.replace(c, grad=("X",), name=f"{c.name}_rule".lstrip("_")) for c in CASES
         if c.id in ("shuffle_channel", "soft_relu-threshold")]


@pytest.mark.paddle
@pytest.mark.skipif(not PADDLE_PYTHON, reason="set PLACEGROUP_PADDLE_PYTHON to a python with paddle")
def test_math_ops_match_paddle(tmp_path):
    run_in_paddle(CASES + RULES, tmp_path, NOT_AS_IN_PADDLE_2, _paddle_attrs, squeezed={"dot"})
