"""The sequence layout layers (placegroup/layers/sequence_pad.py) as programs.

One Fluid 1.x script (``SCRIPT``) builds sequence_pad (maxlen None and 5), sequence_mask
(maxlen None, an int), sequence_unpad, sequence_reverse, lod_reset, lod_append,
sequence_enumerate and sequence_scatter, and the gradients of x and of the scatter's updates;
it runs unchanged under placegroup (``import placegroup as fluid``) and, paddle-marked, under
Fluid 1.8.5 itself (``PLACEGROUP_PADDLE18_PYTHON``). placegroup's outputs, LoDs and gradients
are checked against numpy loops here, and against Fluid 1.8.5's when that python is given.
Build-time shapes and lod_levels, and the layers' argument errors, are checked too.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import placegroup as fluid
from tests.paddle_ref.reference import run_reference

LENS = [2, 0, 3, 1, 3]  # 9 rows, an empty sequence

SCRIPT = r"""
import numpy as np
def build(fluid):
    x = fluid.data("x", [-1, 3], "float32", lod_level=1)
    x.stop_gradient = False
    ids = fluid.data("ids", [-1, 1], "int64", lod_level=1)
    z = fluid.data("z", [-1, 2], "float32")
    sx = fluid.data("sx", [-1, 4], "float32")
    sx.stop_gradient = False  # Fluid 1.8.5's sequence_scatter_grad writes X@GRAD always
    up = fluid.data("up", [-1, 1], "float32", lod_level=1)
    up.stop_gradient = False
    c1 = fluid.data("c1", [-1, 5, 3], "float32")
    c2 = fluid.data("c2", [-1, 3], "float32")
    c3 = fluid.data("c3", [-1, 4], "float32")
    pv = fluid.layers.assign(np.array([0.5], np.float32))
    padded, length = fluid.layers.sequence_pad(x, pv)
    padded5, _ = fluid.layers.sequence_pad(x, pv, maxlen=5)
    out = dict(padded=padded, length=length, padded5=padded5,
               mask=fluid.layers.sequence_mask(length, dtype="float32"),
               mask6=fluid.layers.sequence_mask(length, maxlen=6),
               unpad=fluid.layers.sequence_unpad(padded5, length),
               rev=fluid.layers.sequence_reverse(x),
               reset=fluid.layers.lod_reset(x, target_lod=[0, 4, 9]),
               reset_y=fluid.layers.lod_reset(z, y=x),
               app=fluid.layers.lod_append(z, [0, 4, 9]),
               enum=fluid.layers.sequence_enumerate(ids, win_size=3, pad_value=0),
               scat=fluid.layers.sequence_scatter(sx, ids, up))
    loss = (fluid.layers.reduce_sum(padded5 * c1) + fluid.layers.reduce_sum(out["rev"] * c2)
            + fluid.layers.reduce_sum(out["reset"] * c2) + fluid.layers.reduce_sum(out["scat"] * c3))
    out["gx"], out["gup"] = fluid.gradients([loss], [x, up])
    return out

def run(fluid, d, lens):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        out = build(fluid)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup)
    place = fluid.CPUPlace()
    feed = {"x": fluid.create_lod_tensor(d["x"], [lens], place),
            "ids": fluid.create_lod_tensor(d["ids"], [lens], place),
            "up": fluid.create_lod_tensor(d["up"], [lens], place),
            "z": d["z"], "sx": d["sx"], "c1": d["c1"], "c2": d["c2"], "c3": d["c3"]}
    names = sorted(out)
    got = exe.run(main, feed=feed, fetch_list=[out[n] for n in names], return_numpy=False)
    return {n: np.array(v) for n, v in zip(names, got)}, {n: v.lod() for n, v in zip(names, got)}
"""

FLUID18 = SCRIPT + r"""
import json, sys
import paddle.fluid as fluid
spec = json.loads(sys.argv[1])
vals, lods = run(fluid, dict(np.load(spec["data"])), spec["lens"])
np.savez(spec["out"], **vals)
json.dump(lods, open(spec["lods"], "w"))
"""


def _data() -> dict:
    r = np.random.default_rng(0)
    n = len(LENS)
    return {"x": r.standard_normal((9, 3)).astype("float32"), "ids": r.integers(0, 4, (9, 1)).astype("int64"),
            "up": r.standard_normal((9, 1)).astype("float32"), "z": r.standard_normal((9, 2)).astype("float32"),
            "sx": r.standard_normal((n, 4)).astype("float32"), "c1": r.standard_normal((n, 5, 3)).astype("float32"),
            "c2": r.standard_normal((9, 3)).astype("float32"), "c3": r.standard_normal((n, 4)).astype("float32")}


def _ours(d):
    scope: dict = {}
    exec(SCRIPT, scope)  # noqa: S102 - our own script text, shared with the Fluid 1.8.5 run
    return scope["run"](fluid, d, LENS)


def _numpy(d) -> dict:
    """The layers' outputs and gradients, one sequence at a time."""
    o = np.concatenate([[0], np.cumsum(LENS)])
    x, n = d["x"], len(LENS)
    padded5 = np.full((n, 5, 3), 0.5, np.float32)
    rev, gx = x.copy(), d["c2"].copy()
    for k in range(n):
        padded5[k, :LENS[k]] = x[o[k]:o[k + 1]]
        rev[o[k]:o[k + 1]] = x[o[k]:o[k + 1]][::-1]
        gx[o[k]:o[k + 1]] += d["c2"][o[k]:o[k + 1]][::-1] + d["c1"][k, :LENS[k]]
    mask6 = (np.arange(6)[None, :] < np.array(LENS)[:, None]).astype("int64")
    enum = np.zeros((9, 3), np.int64)
    scat, gup = d["sx"].copy(), np.zeros((9, 1), np.float32)
    for k in range(n):
        for r in range(o[k], o[k + 1]):
            enum[r] = [d["ids"][r + w, 0] if r + w < o[k + 1] else 0 for w in range(3)]
            scat[k, d["ids"][r, 0]] += d["up"][r, 0]
            gup[r, 0] = d["c3"][k, d["ids"][r, 0]]
    return {"padded": padded5[:, :3], "length": np.array(LENS), "padded5": padded5, "mask": mask6[:, :3],
            "mask6": mask6, "unpad": x, "rev": rev, "reset": x, "reset_y": d["z"], "app": d["z"], "enum": enum,
            "scat": scat, "gx": gx, "gup": gup}


LODS = {"unpad": [[0, 2, 2, 5, 6, 9]], "rev": [[0, 2, 2, 5, 6, 9]], "reset": [[0, 4, 9]],
        "reset_y": [[0, 2, 2, 5, 6, 9]], "app": [[0, 4, 9]], "enum": [[0, 2, 2, 5, 6, 9]]}


def test_the_layers_give_the_loop_references():
    d = _data()
    vals, lods = _ours(d)
    want = _numpy(d)
    for name, ref in want.items():
        np.testing.assert_allclose(vals[name], ref, rtol=1e-6, atol=1e-6, err_msg=name)
    assert vals["mask"].dtype == np.float32 and vals["mask6"].dtype == np.int64 and vals["length"].dtype == np.int64
    for name in ("padded", "padded5", "length", "mask", "mask6", "scat"):
        assert lods[name] == [], name
    for name, lod in LODS.items():
        assert lods[name] == lod, f"{name}: {lods[name]}"


def test_build_time_shapes_and_lod_levels():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        scope: dict = {}
        exec(SCRIPT, scope)  # noqa: S102
        out = scope["build"](fluid)
    shapes = {n: (tuple(v.shape), v.lod_level) for n, v in out.items()}
    assert shapes["padded"] == ((-1, -1, 3), 0)  # NOTE(pad-1.8): Fluid writes 1 for the unknown length
    assert shapes["padded5"] == ((-1, 5, 3), 0) and shapes["length"] == ((-1,), 0)
    assert shapes["mask"] == ((-1, -1), 0) and shapes["mask6"] == ((-1, 6), 0)
    assert shapes["unpad"] == ((-1, 3), 1) and shapes["rev"] == ((-1, 3), 1)
    assert shapes["reset"][1] == 1 and shapes["app"][1] == 1 and shapes["enum"] == ((-1, 3), 1)
    assert shapes["scat"] == ((-1, 4), 0)
    types = [op.type for op in main.global_block().ops]
    assert types.count("lod_reset") == 3 and "sequence_reverse_grad" in types and "sequence_pad_grad" in types


def test_the_layers_refuse_bad_arguments():
    with fluid.program_guard(fluid.Program(), fluid.Program()):
        x = fluid.data("x", [-1, 3], "float32", lod_level=1)
        ids = fluid.data("ids", [-1, 1], "float32", lod_level=1)
        lens = fluid.data("lens", [-1], "int32")
        with pytest.raises(TypeError, match="'pad_value' in fluid.layers.sequence_pad must be Variable"):
            fluid.layers.sequence_pad(x, 0.0)
        with pytest.raises(TypeError, match="'length' in fluid.layers.sequence_unpad must be \\['int64'\\]"):
            fluid.layers.sequence_unpad(x, lens)
        with pytest.raises(TypeError, match="'input' in sequence_enumerate must be"):
            fluid.layers.sequence_enumerate(ids, 2)
        with pytest.raises(ValueError, match="y and target_lod should not be both none"):
            fluid.layers.lod_reset(x)
        with pytest.raises(ValueError, match="Input\\(level\\) must be list, tuple or Variable"):
            fluid.layers.lod_append(x, 3)


@pytest.mark.paddle
def test_the_layers_equal_fluid_1_8_5(fluid18_python, tmp_path):
    d = _data()
    theirs = run_reference(fluid18_python, FLUID18, tmp_path, d, timeout=600, lods=str(tmp_path / "lods.json"),
                           lens=LENS)
    their_lods = json.loads((tmp_path / "lods.json").read_text())
    vals, lods = _ours(d)
    for name in vals:
        np.testing.assert_allclose(vals[name], theirs[name], rtol=1e-6, atol=1e-6, err_msg=name)
        # a gradient keeps its var's LoD here (NOTE(lod-rule)); 1.8.5's scatter grad drops it
        assert name in ("gx", "gup") or lods[name] == their_lods[name], \
            f"{name}: ours {lods[name]}, Fluid 1.8.5's {their_lods[name]}"
