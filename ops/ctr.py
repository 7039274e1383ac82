"""Ops of Fluid 1.x CTR and recommendation jobs: data_norm, cvm, hash, shard_index.

* ``data_norm`` normalizes each column of a ``[N, C]`` batch by running summaries
  (BatchSize, BatchSum, BatchSquareSum: trainable parameters). Its "gradient" for them is not
  a derivative but this batch's statistics (NOTE(data-norm-stats)).
* ``cvm`` takes the two leading show/click columns of a CTR embedding to log space, or drops
  them; its "gradient" for them is the CVM input (NOTE(cvm-grad)).
* ``hash`` maps each int row to ``num_hash`` ids in [0, mod_by) with XXH64 (NOTE(xxh64)).
* ``shard_index`` rewrites global ids to a shard's local ids.

Example (what ``fluid.layers.data_norm(x)`` appends, x: [-1, 8])::

    block.append_op("data_norm", {"X": [x], "BatchSize": ["dn.batch_size"], "BatchSum": ["dn.batch_sum"],
                                  "BatchSquareSum": ["dn.batch_square_sum"]},
                    {"Y": [y], "Means": [means], "Scales": [scales]}, {"epsilon": 1e-5})
"""
from __future__ import annotations

import numpy as np

from placegroup.ops.registry import Meta, OpSpec, Slot, check, grad_name, register

# -- data_norm -------------------------------------------------------------------------------

# NOTE(data-norm-stats): Y = (X - BatchSum / BatchSize) * sqrt(BatchSize / BatchSquareSum),
# per column. data_norm_grad writes X@GRAD = Y@GRAD * Scales (the true derivative: the
# summaries do not depend on X) and, for the three summaries, this batch's statistics in
# their gradient slots: N, sum_n x, and sum_n (x - mean)^2 + N * epsilon (mean: the one the
# forward used). The summaries are trainable parameters, so whatever optimizer the program
# has applies its rule to those numbers, exactly as Fluid 1.8's CPU kernels do (SGD:
# BatchSize -= lr * N). CTR jobs on Fluid's parameter server run a "summary" rule instead
# (s = decay * s + g, with ``summary_decay_rate``); the attr is kept for that, unused here.
# With ``slot_dim`` > 0 the columns form slots of ``slot_dim`` whose first column is a show
# count: a row whose show is 0 (|x| < 1e-7) gets Y = 0 in that slot and adds nothing to its
# statistics, and each slot's statistics are per-row means: 1, sum x / count,
# sum (x - mean)^2 / count + count * epsilon (for slots some row showed). X@GRAD stays
# Y@GRAD * Scales in every column, as Paddle's kernel has it.

_DN_ATTRS = {"epsilon": 1e-4, "data_layout": "NCHW", "slot_dim": -1, "summary_decay_rate": 0.9999999,
             "sync_stats": False}
_STATS = ("BatchSize", "BatchSum", "BatchSquareSum")
_SHOW_EPS = 1e-7


def _dn_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) == 2, f"data_norm: X must be [batch, channels], got X{list(x.shape)}")
    check(a["data_layout"] in ("NCHW", "NHWC"), f"data_norm: data_layout must be NCHW or NHWC, got "
                                                f"{a['data_layout']!r}")
    check(0.0 <= a["epsilon"] <= 1e-3, f"data_norm: epsilon must be in [0, 0.001], got {a['epsilon']}")
    c = x.shape[1]
    check(c > 0, f"data_norm: X{list(x.shape)} needs a known number of channels")
    for s in _STATS:
        m = ins[s]
        check(tuple(m.shape) == (c,) and m.dtype == x.dtype,
              f"data_norm: {s} must be {x.dtype}[{c}] (one per column of X{list(x.shape)}), got "
              f"{m.dtype}{list(m.shape)}")
    sd = a["slot_dim"]
    check(sd <= 0 or c % sd == 0, f"data_norm: slot_dim {sd} does not divide the {c} columns of X")
    col = Meta((c,), x.dtype)
    return {"Y": x, "Means": col, "Scales": col}


def _shown(xp, x, slot_dim: int):
    """[N, C] bool: the column's slot has a non-zero show count in that row."""
    n, c = x.shape
    show = x.reshape(n, c // slot_dim, slot_dim)[:, :, :1]
    keep = (show <= -_SHOW_EPS) | (show >= _SHOW_EPS)
    return xp.broadcast_to(keep, (n, c // slot_dim, slot_dim)).reshape(n, c)


def _dn_grad(op):
    x = op.inputs["X"][0]
    outs = {}
    if x in op.need:
        outs["X@GRAD"] = [op.grad_of(x)]
    for s in _STATS:
        name = op.inputs[s][0]
        if name in op.need:
            outs[grad_name(s)] = [op.grad_of(name)]
    if not outs:
        return []
    ins = {"X": [x], "Means": list(op.outputs["Means"]), "Scales": list(op.outputs["Scales"]),
           "Y@GRAD": [grad_name(n) for n in op.outputs["Y"]]}
    return [OpSpec("data_norm_grad", ins, outs, dict(op.attrs))]


@register("data_norm", ins=("X", *(Slot(s, role="Param") for s in _STATS)),
          outs=("Y", Slot("Means", no_grad=True), Slot("Scales", no_grad=True)), attrs=_DN_ATTRS,
          infer=_dn_infer, grad=_dn_grad)
def data_norm(xp, ins, a, ctx):
    """Y = (X - Means) * Scales, Means = BatchSum / BatchSize, Scales = sqrt(BatchSize /
    BatchSquareSum), per column; with ``slot_dim``, slots whose show is 0 give 0
    (NOTE(data-norm-stats))."""
    x = ins["X"]
    means = ins["BatchSum"] / ins["BatchSize"]
    scales = xp.sqrt(ins["BatchSize"] / ins["BatchSquareSum"])
    y = (x - means) * scales
    if a["slot_dim"] > 0:
        y = xp.where(_shown(xp, x, a["slot_dim"]), y, xp.zeros((), x.dtype))
    return {"Y": y.astype(x.dtype, copy=False), "Means": means, "Scales": scales}


@register("data_norm_grad", ins=("X", "Means", "Scales", "Y@GRAD"),
          outs=tuple(Slot(grad_name(s), dispensable=True) for s in ("X",) + _STATS), attrs=_DN_ATTRS,
          role="backward")
def data_norm_grad(xp, ins, a, ctx):
    x, means, dy = ins["X"], ins["Means"], ins["Y@GRAD"]
    out = {}
    if "X@GRAD" in ctx.outputs:
        out["X@GRAD"] = (dy * ins["Scales"]).astype(x.dtype, copy=False)
    t = x.dtype.type
    eps = t(a["epsilon"])
    dev2 = (x - means) ** 2
    if a["slot_dim"] > 0:
        shown = _shown(xp, x, a["slot_dim"])
        count = shown.sum(axis=0).astype(x.dtype)
        some = count >= 1
        safe = xp.maximum(count, t(1))
        size = xp.where(some, t(1), t(0))
        total = xp.where(some, (x * shown).sum(axis=0) / safe, t(0))
        square = xp.where(some, (dev2 * shown).sum(axis=0) / safe + count * eps, t(0))
    else:
        n = t(x.shape[0])
        size = xp.full(means.shape, n, dtype=x.dtype)
        total, square = x.sum(axis=0), dev2.sum(axis=0) + n * eps
    for s, v in zip(_STATS, (size, total, square)):
        if grad_name(s) in ctx.outputs:
            out[grad_name(s)] = v.astype(x.dtype, copy=False)
    return out


# -- cvm -------------------------------------------------------------------------------------

# NOTE(cvm-grad): X's first two columns are show and click counts. use_cvm: Y = X with
# Y[:, 0] = log(show + 1) and Y[:, 1] = log(click + 1) - log(show + 1); otherwise Y = X[:, 2:].
# cvm_grad writes X@GRAD[:, 2:] = Y@GRAD's embedding columns, and X@GRAD[:, :2] = CVM (the
# batch's show/click), not a derivative: Fluid's parameter server reads those two numbers of
# an embedding's gradient as counts. The OpCase table checks only the embedding columns.


def _cvm_infer(ins, a):
    x, cvm = ins["X"], ins["CVM"]
    check(len(x.shape) == 2 and (x.shape[1] == -1 or x.shape[1] >= 2),
          f"cvm: X must be [batch, 2 + embedding dims] (show, click first), got X{list(x.shape)}")
    check(len(cvm.shape) == 2 and cvm.shape[1] == 2, f"cvm: CVM must be [batch, 2] (show, click), got "
                                                     f"CVM{list(cvm.shape)}")
    width = x.shape[1] if a["use_cvm"] or x.shape[1] == -1 else x.shape[1] - 2
    return {"Y": Meta((x.shape[0], width), x.dtype)}


def _cvm_grad(op):
    x = op.inputs["X"][0]
    if x not in op.need:
        return []
    return [OpSpec("cvm_grad", {"X": [x], "CVM": list(op.inputs["CVM"]), "Y@GRAD": [grad_name(op.outputs["Y"][0])]},
                   {"X@GRAD": [op.grad_of(x)]}, dict(op.attrs))]


@register("cvm", ins=("X", Slot("CVM", no_grad=True)), outs=("Y",), attrs={"use_cvm": True}, infer=_cvm_infer,
          grad=_cvm_grad)
def cvm(xp, ins, a, ctx):
    """use_cvm: Y = [log(show+1), log(click+1) - log(show+1), X[:, 2:]]; else Y = X[:, 2:]."""
    x = ins["X"]
    if not a["use_cvm"]:
        return {"Y": x[:, 2:].copy()}
    show = xp.log(x[:, :1] + x.dtype.type(1))
    click = xp.log(x[:, 1:2] + x.dtype.type(1)) - show
    return {"Y": xp.concatenate([show, click, x[:, 2:]], axis=1)}


@register("cvm_grad", ins=("X", "CVM", "Y@GRAD"), outs=("X@GRAD",), attrs={"use_cvm": True}, role="backward")
def cvm_grad(xp, ins, a, ctx):
    # NOTE(cvm-grad): the show/click columns get CVM, the rest Y@GRAD's embedding part
    dy = ins["Y@GRAD"]
    emb = dy[:, 2:] if a["use_cvm"] else dy
    return {"X@GRAD": xp.concatenate([ins["CVM"].astype(dy.dtype, copy=False), emb], axis=1)}


# -- hash ------------------------------------------------------------------------------------

# NOTE(xxh64): Fluid's hash op hashes the bytes of each row of X (int32 or int64, little
# endian) with XXH64 (xxHash 0.6.5), seeded with the hash's index 0..num_hash-1, and takes the
# 64-bit result modulo ``mod_by``. ``xxh64_rows`` is XXH64 in uint64 array arithmetic
# (wrapping multiplies), one lane per row: the loops run over a row's 32-byte stripes and
# leftover words, never over rows. Checked against xxHash's published vectors and Paddle's
# own outputs (tests/test_ctr_layers.py).

_P1, _P2, _P3, _P4, _P5 = (np.uint64(p) for p in (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                                                   0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5))


def _rotl(x, r: int):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


def _round(acc, lane):
    return _rotl(acc + lane * _P2, 31) * _P1


def _merge(h, v):
    return (h ^ _round(np.uint64(0), v)) * _P1 + _P4


def xxh64_rows(xp, data, seed: int):
    """XXH64 of each row of ``data`` (uint8 [rows, length]) with ``seed``: uint64 [rows]."""
    rows, length = data.shape
    seed = np.uint64(seed)
    data = xp.ascontiguousarray(data)
    with np.errstate(over="ignore"):
        pos = 0
        if length >= 32:
            v = [xp.full(rows, seed + _P1 + _P2, dtype=np.uint64), xp.full(rows, seed + _P2, dtype=np.uint64),
                 xp.full(rows, seed, dtype=np.uint64), xp.full(rows, seed - _P1, dtype=np.uint64)]
            while pos + 32 <= length:
                lanes = data[:, pos:pos + 32].copy().view("<u8").astype(np.uint64)
                v = [_round(v[i], lanes[:, i]) for i in range(4)]
                pos += 32
            h = _rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)
            for i in range(4):
                h = _merge(h, v[i])
        else:
            h = xp.full(rows, seed + _P5, dtype=np.uint64)
        h = h + np.uint64(length)
        while pos + 8 <= length:
            lane = data[:, pos:pos + 8].copy().view("<u8").astype(np.uint64).reshape(rows)
            h = _rotl(h ^ _round(np.uint64(0), lane), 27) * _P1 + _P4
            pos += 8
        if pos + 4 <= length:
            word = data[:, pos:pos + 4].copy().view("<u4").astype(np.uint64).reshape(rows)
            h = _rotl(h ^ (word * _P1), 23) * _P2 + _P3
            pos += 4
        while pos < length:
            h = _rotl(h ^ (data[:, pos].astype(np.uint64) * _P5), 11) * _P1
            pos += 1
        h = (h ^ (h >> np.uint64(33))) * _P2
        h = (h ^ (h >> np.uint64(29))) * _P3
        return h ^ (h >> np.uint64(32))


def _hash_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) == 2 and x.dtype in ("int32", "int64"),
          f"hash: X must be a 2-D int32 or int64 var, got {x.dtype}{list(x.shape)}")
    check(a["num_hash"] >= 1 and a["mod_by"] >= 1, f"hash: num_hash ({a['num_hash']}) and mod_by ({a['mod_by']}) "
                                                   f"must be >= 1")
    return {"Out": Meta((x.shape[0], int(a["num_hash"]), 1), x.dtype)}


@register("hash", ins=(Slot("X", no_grad=True),), outs=("Out",), attrs={"num_hash": 1, "mod_by": 100000},
          infer=_hash_infer)
def hash_(xp, ins, a, ctx):
    """Out[i, k, 0] = XXH64(bytes of row i, seed k) % mod_by (NOTE(xxh64))."""
    x = ins["X"]
    data = xp.ascontiguousarray(x.astype(x.dtype.newbyteorder("<"), copy=False)).view(np.uint8)
    data = data.reshape(x.shape[0], -1)
    mod = np.uint64(a["mod_by"])
    outs = [xxh64_rows(xp, data, k) % mod for k in range(int(a["num_hash"]))]
    return {"Out": xp.stack(outs, axis=1).astype(x.dtype).reshape(x.shape[0], -1, 1)}


# -- shard_index -----------------------------------------------------------------------------


def _shard_infer(ins, a):
    x = ins["X"]
    check(x.dtype in ("int32", "int64") and len(x.shape) >= 1 and x.shape[-1] == 1,
          f"shard_index: X must be int32 or int64 ids with a last dim of 1, got {x.dtype}{list(x.shape)}")
    n, k = a["nshards"], a["shard_id"]
    check(a["index_num"] > 0 and n > 0 and 0 <= k < n,
          f"shard_index: need index_num > 0 (got {a['index_num']}), nshards > 0 (got {n}) and 0 <= shard_id < "
          f"nshards (got {k})")
    return {"Out": x}


@register("shard_index", ins=(Slot("X", no_grad=True),), outs=("Out",),
          attrs={"index_num": 0, "nshards": 0, "shard_id": 0, "ignore_value": -1}, infer=_shard_infer)
def shard_index(xp, ins, a, ctx):
    """Out = X - shard_id * size where X // size == shard_id, else ignore_value; size =
    ceil(index_num / nshards). An id outside [0, index_num) is a ValueError."""
    x = ins["X"]
    size = (a["index_num"] + a["nshards"] - 1) // a["nshards"]
    bad = (x < 0) | (x >= a["index_num"])
    if bool(bad.any()):
        raise ValueError(f"shard_index: X holds {x[bad].reshape(-1)[0]}, outside [0, index_num={a['index_num']})")
    mine = (x // size) == a["shard_id"]
    return {"Out": xp.where(mine, x - a["shard_id"] * size, a["ignore_value"]).astype(x.dtype)}

