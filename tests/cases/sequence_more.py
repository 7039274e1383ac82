"""OpCases for chunk_eval (ops/chunk_eval.py) and row_conv, im2sequence, filter_by_instag
(ops/sequence_more.py); tests/op_cases.py gathers them.

The references loop element by element, written from Fluid 1.8's kernels (chunk_eval_op.h's
GetSegments / EvalOneSeq, row_conv_op.cc, im2sequence's im2col, filter_by_instag_op.h), so they
check the vectorised kernels by another route. Fluid 1.8.5's own numbers for these ops are
checked in tests/test_fluid_tree_layers.py.
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import OutOfRange, ProgramError
from placegroup.values import LoDTensor
from tests.op_case import N, OpCase, spec

LOD = [[0, 2, 2, 6, 7, 9]]  # 5 sequences: lengths 2, 0, 4, 1, 2

# -- chunk_eval -------------------------------------------------------------------------------

_TAGS = {"IOB": (2, 0, 1, -1, -1), "IOE": (2, -1, 0, 1, -1), "IOBES": (4, 0, 1, 2, 3), "plain": (1, -1, -1, -1, -1)}


def _segments(ids, scheme: str, k: int) -> list:
    """Fluid's GetSegments, one element at a time: [(begin, end, type)]."""
    ntag, tb, ti, te, ts = _TAGS[scheme]
    other = k

    def ends(pt, pty, t, ty):
        if pty == other:
            return False
        if ty == other or ty != pty:
            return True
        if pt in (tb, ti):
            return t in (tb, ts)
        return pt in (te, ts)

    def begins(pt, pty, t, ty):
        if pty == other:
            return ty != other
        if ty == other:
            return False
        if ty != pty:
            return True
        if t in (tb, ts):
            return True
        return t in (ti, te) and pt in (te, ts)

    segs, start, inside, tag, typ = [], 0, False, -1, other
    for i, v in enumerate(ids):
        pt, pty = tag, typ
        tag, typ = int(v) % ntag, int(v) // ntag
        if inside and ends(pt, pty, tag, typ):
            segs.append((start, i - 1, pty))
            inside = False
        if begins(pt, pty, tag, typ):
            start, inside = i, True
    if inside:
        segs.append((start, len(ids) - 1, typ))
    return segs


def _chunk_ref(i, a):
    inf, lab = i["Inference"], i["Label"]
    if isinstance(inf, LoDTensor):
        off = inf.offsets[0]
        pairs = [(inf.data[off[s]:off[s + 1]].ravel(), lab.data[off[s]:off[s + 1]].ravel())
                 for s in range(len(off) - 1)]
    else:
        w = inf.shape[1]
        pairs = [(inf.reshape(-1, w)[r, :n], lab.reshape(-1, w)[r, :n]) for r, n in enumerate(i["SeqLength"])]
    excl = set(a["excluded_chunk_types"])
    n_inf = n_lab = n_ok = 0
    for p, q in pairs:
        sp = _segments(p, a["chunk_scheme"], a["num_chunk_types"])
        sq = _segments(q, a["chunk_scheme"], a["num_chunk_types"])
        n_inf += sum(s[2] not in excl for s in sp)
        n_lab += sum(s[2] not in excl for s in sq)
        n_ok += sum(s in sq and s[2] not in excl for s in sp)
    f = np.float32
    p = f(n_ok) / f(n_inf) if n_inf else f(0)
    r = f(n_ok) / f(n_lab) if n_lab else f(0)
    f1 = f(2) * p * r / (p + r) if n_ok else f(0)
    return {"Precision": np.array([p], np.float32), "Recall": np.array([r], np.float32),
            "F1-Score": np.array([f1], np.float32), "NumInferChunks": np.array([n_inf]),
            "NumLabelChunks": np.array([n_lab]), "NumCorrectChunks": np.array([n_ok])}


def _chunk_sample(scheme: str, padded: bool = False):
    ntag = _TAGS[scheme][0]

    def sample(r):
        top = 3 * ntag + 1
        if padded:
            inf = r.integers(0, top, size=(4, 7, 1))
            lab = np.where(r.random((4, 7, 1)) < 0.3, r.integers(0, top, size=(4, 7, 1)), inf)
            return {"Inference": inf, "Label": lab, "SeqLength": np.array([7, 0, 3, 5])}
        inf = r.integers(0, top, size=(40, 1))
        lab = np.where(r.random((40, 1)) < 0.3, r.integers(0, top, size=(40, 1)), inf)  # mostly right
        lod = [[0, 9, 9, 21, 22, 40]]
        return {"Inference": LoDTensor(inf, lod), "Label": LoDTensor(lab, lod)}

    return sample


_CHUNK_ERRORS = (
    ({"Inference": spec(4, 1, dtype="int64"), "Label": spec(4, 1, dtype="int64")},
     {"num_chunk_types": 3, "chunk_scheme": "BIO", "excluded_chunk_types": []}, ProgramError, "chunk_scheme 'BIO'"),
    ({"Inference": spec(4, 1, dtype="int32"), "Label": spec(4, 1, dtype="int32")},
     {"num_chunk_types": 3, "chunk_scheme": "IOB", "excluded_chunk_types": []}, ProgramError, "must be int64"),
    ({"Inference": spec(4, 1, dtype="int64"), "Label": spec(5, 1, dtype="int64")},
     {"num_chunk_types": 3, "chunk_scheme": "IOB", "excluded_chunk_types": []}, ProgramError, "the same shape"),
    ({"Inference": LoDTensor(np.array([[0], [7]]), [[0, 2]]), "Label": LoDTensor(np.array([[0], [1]]), [[0, 2]])},
     {"num_chunk_types": 3, "chunk_scheme": "IOB", "excluded_chunk_types": []}, OutOfRange,
     "label id 7 is out of range"),
    ({"Inference": np.zeros((2, 3), np.int64), "Label": np.zeros((2, 3), np.int64)},
     {"num_chunk_types": 3, "chunk_scheme": "IOB", "excluded_chunk_types": []}, ValueError, "SeqLength must give"),
    ({"Inference": LoDTensor(np.zeros((2, 1), np.int64), [[0, 2]]),
      "Label": LoDTensor(np.zeros((2, 1), np.int64), [[0, 1, 2]])},
     {"num_chunk_types": 3, "chunk_scheme": "IOB", "excluded_chunk_types": []}, ValueError, "Label's LoD must be"),
)

CASES: list[OpCase] = [
    OpCase("chunk_eval", _chunk_sample(scheme), _chunk_ref, name=f"{scheme}{'_excl' if excl else ''}",
           attrs={"chunk_scheme": scheme, "num_chunk_types": 3, "excluded_chunk_types": excl}, batch=(),
           errors=_CHUNK_ERRORS if scheme == "IOB" and not excl else ())
    for scheme in _TAGS for excl in ([], [1])
]
CASES += [OpCase("chunk_eval", _chunk_sample(scheme, padded=True), _chunk_ref, name=f"{scheme}_padded",
                 attrs={"chunk_scheme": scheme, "num_chunk_types": 3, "excluded_chunk_types": [2]}, batch=())
          for scheme in ("IOB", "IOBES")]

# -- row_conv ---------------------------------------------------------------------------------


def _row_conv_ref(i, a):
    x, f = i["X"], i["Filter"]
    if isinstance(x, LoDTensor):
        data, off = x.data, x.offsets[-1]
        seqs = [(off[s], off[s + 1]) for s in range(len(off) - 1)]
    else:
        b, t, d = x.shape
        data, seqs = x.reshape(b * t, d), [(k * t, (k + 1) * t) for k in range(b)]
    out = np.zeros_like(data)
    for lo, hi in seqs:
        for k in range(lo, hi):
            for w in range(f.shape[0]):
                if k + w < hi:
                    out[k] += data[k + w] * f[w]
    return {"Out": out if isinstance(x, LoDTensor) else out.reshape(x.shape)}


CASES += [
    OpCase("row_conv", lambda r: {"X": LoDTensor(N(r, 9, 3), LOD), "Filter": N(r, 3, 3)}, _row_conv_ref,
           grad=("X", "Filter"), name="lod",
           errors=(({"X": spec(9, 3), "Filter": spec(3, 4)}, {}, ProgramError, r"Filter must be \[future_context_size"),
                   ({"X": spec(9, 3, dtype="float64"), "Filter": spec(3, 3)}, {}, ProgramError, "must share"),
                   ({"X": np.zeros((9, 3), np.float32), "Filter": np.zeros((2, 3), np.float32)}, {}, ValueError,
                    "feed a LoDTensor"))),
    OpCase("row_conv", lambda r: {"X": N(r, 2, 5, 3), "Filter": N(r, 2, 3)}, _row_conv_ref, grad=("X", "Filter"),
           name="dense"),
    OpCase("row_conv", lambda r: {"X": LoDTensor(N(r, 9, 2), LOD), "Filter": N(r, 5, 2)}, _row_conv_ref,
           grad=("X", "Filter"), name="wide_context"),
]

# -- im2sequence ------------------------------------------------------------------------------


def _im2seq_ref(i, a):
    x = i["X"]
    n, c, h, w = x.shape
    (kh, kw), (sh, sw), (pu, pl, pd, pr) = a["kernels"], a["strides"], a["paddings"]
    oh, ow = (h + pu + pd - kh) // sh + 1, (w + pl + pr - kw) // sw + 1
    rows = []
    for b in range(n):
        for r in range(oh):
            for q in range(ow):
                patch = np.zeros((c, kh, kw), x.dtype)
                for ci in range(c):
                    for di in range(kh):
                        for dj in range(kw):
                            y, z = r * sh - pu + di, q * sw - pl + dj
                            if 0 <= y < h and 0 <= z < w:
                                patch[ci, di, dj] = x[b, ci, y, z]
                rows.append(patch.reshape(-1))
    return {"Out": LoDTensor(np.stack(rows), [np.arange(n + 1) * oh * ow])}


def _im2seq_real_check(run, a):
    """With Y, each image has the positions of ceil(Y / out_stride), read from the top left
    of the whole image (NOTE(im2seq)); with one image Y is ignored."""
    r = np.random.default_rng(0)
    x = r.standard_normal((3, 2, 6, 5)).astype(np.float32)
    sizes = np.array([[6, 5], [4, 4], [5, 3]], np.float32)
    attrs = {**a, "kernels": [2, 2], "strides": [1, 1], "paddings": [0, 0, 0, 0], "out_stride": [2, 2]}
    out = run({"X": x, "Y": sizes}, attrs)["Out"]
    full = _im2seq_ref({"X": x}, attrs)["Out"].data.reshape(3, 5, 4, -1)  # every position of the whole images
    want = np.concatenate([full[0, :2, :2].reshape(4, -1), full[1, :1, :1].reshape(1, -1),
                           full[2, :2, :1].reshape(2, -1)])
    np.testing.assert_allclose(out.data, want)
    assert [list(o) for o in out.offsets] == [[0, 4, 5, 7]]
    one = run({"X": x[:1], "Y": sizes[1:2]}, attrs)["Out"]
    np.testing.assert_allclose(one.data, full[0].reshape(20, -1))


_IM2SEQ = {"kernels": [2, 3], "strides": [2, 1], "paddings": [1, 0, 1, 1], "out_stride": [1, 1]}
CASES += [
    OpCase("im2sequence", lambda r: {"X": N(r, 2, 2, 5, 4)}, _im2seq_ref, attrs=_IM2SEQ, grad=("X",), name="pad_stride",
           errors=(({"X": spec(2, 3, 4)}, _IM2SEQ, ProgramError, r"X must be \[N, C, H, W\]"),
                   ({"X": spec(2, 2, 5, 4)}, {**_IM2SEQ, "kernels": [2]}, ProgramError, "kernels must hold 2 ints"),
                   ({"X": spec(2, 2, 5, 4)}, {**_IM2SEQ, "strides": [0, 1]}, ProgramError, "must be >= 1"))),
    OpCase("im2sequence", lambda r: {"X": N(r, 1, 3, 4, 4)}, _im2seq_ref, grad=("X",), name="square",
           attrs={"kernels": [3, 3], "strides": [2, 2], "paddings": [1, 1, 1, 1], "out_stride": [1, 1]}),
    OpCase("im2sequence", check=_im2seq_real_check, name="real_sizes"),
]

# -- filter_by_instag -------------------------------------------------------------------------

_TAG_LOD = [[0, 2, 4, 6, 8]]
_TAG_IDS = np.array([[0], [1], [1], [3], [0], [3], [2], [6]])


def _instag_ref(i, a):
    x, tags, keep = i["Ins"], i["Ins_tag"], set(np.asarray(i["Filter_tag"]).ravel().tolist())
    data = x.data if isinstance(x, LoDTensor) else x
    off = x.offsets[0] if a["is_lod"] else np.arange(data.shape[0] + 1)
    t = tags.offsets[0]
    rows, lens, imap = [], [], []
    for k in range(len(t) - 1):
        if set(tags.data[t[k]:t[k + 1]].ravel().tolist()) & keep:
            imap.append([sum(lens), off[k], off[k + 1] - off[k]])
            lens.append(off[k + 1] - off[k])
            rows.extend(range(off[k], off[k + 1]))
    if not lens:
        one = [[0, 1]]
        return {"Out": LoDTensor(np.full((1, data.shape[1]), a["out_val_if_empty"], data.dtype), one),
                "LossWeight": LoDTensor(np.zeros((1, 1), np.float32), one),
                "IndexMap": LoDTensor(np.array([[0, 1, 1]]), one)}
    per = [np.arange(len(lens) + 1)]
    return {"Out": LoDTensor(data[rows], [np.concatenate([[0], np.cumsum(lens)])]),
            "LossWeight": LoDTensor(np.ones((len(lens), 1), np.float32), per),
            "IndexMap": LoDTensor(np.array(imap), per)}


def _instag(ftag, is_lod: bool):
    def sample(r):
        ins = LoDTensor(N(r, 6, 3), [[0, 1, 3, 3, 6]]) if is_lod else N(r, 4, 3)
        return {"Ins": ins, "Ins_tag": LoDTensor(_TAG_IDS, _TAG_LOD), "Filter_tag": np.array(ftag)}

    return sample


CASES += [
    OpCase("filter_by_instag", _instag(ftag, is_lod), _instag_ref, attrs={"is_lod": is_lod, "out_val_if_empty": 7},
           grad=("Ins",), name=name, batch=(),
           errors=(({"Ins": spec(4, 3), "Ins_tag": spec(8, 1, dtype="int32"), "Filter_tag": spec(2, dtype="int64")},
                    {"is_lod": False, "out_val_if_empty": 0}, ProgramError, "must be int64"),
                   ({"Ins": np.zeros((4, 3), np.float32), "Ins_tag": _TAG_IDS, "Filter_tag": np.array([1])},
                    {"is_lod": False, "out_val_if_empty": 0}, ValueError, "Ins_tag must be a LoDTensor"))
           if name == "plain" else ())
    for name, ftag, is_lod in (("plain", [1], False), ("two_tags", [3, 2], False), ("none_kept", [9], False),
                               ("lod", [0, 6], True))
]
