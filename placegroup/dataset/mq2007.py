"""LETOR 4.0 MQ2007 learning-to-rank data, as Paddle 1.8's ``paddle.dataset.mq2007``.

Paddle downloads ``MQ2007/<name>.rar`` and unpacks it beside itself with ``rarfile``. placegroup
reads no RAR archives: it reads the unpacked text, ``MQ2007/MQ2007/MQ2007/Fold1/train.txt``
and ``.../test.txt`` under a data root (Paddle's path: the archive's directory joined with
``MQ2007/MQ2007/Fold1/...``). Unpack the archive there yourself (``unrar x <file>.rar``);
when only the archive is found the error says so.

A line is LETOR's ``<relevance> qid:<id> 1:<f1> ... 46:<f46> #<comment>``; lines without
exactly 48 fields are skipped, consecutive lines of one query make a query list, and lists
whose relevances are all 0 are dropped. ``train(format="pairwise")`` yields per list, after
sorting by falling relevance, for each pair of documents with different relevances
``(array([1]), better features float64[46], worse features float64[46])``; ``"listwise"``
yields ``(relevances int[n, 1], features float64[n, 46])`` per list; ``"pointwise"`` and
``"plain_txt"`` yield (as Paddle does) only the first document of each list, as
``(relevance, features)`` and ``(qid, relevance, features)``.

Paddle's ``train`` returns a generator; these readers can be iterated and called alike.

Example::

    for label, left, right in paddle.dataset.mq2007.train(format="pairwise"):
        ...
"""
from __future__ import annotations

import os

import numpy as np

from placegroup.dataset import common

__all__ = ["train", "test", "fetch", "load_from_text"]

URL = ("http://www.bigdatalab.ac.cn/benchmark/upload/download_source/"
       "7b6dbbe2-842c-11e4-a536-bcaec51b9163_MQ2007.rar")
MD5 = "7be1640ae95c6408dab0ae7207bdc706"
TRAIN_FILE = "MQ2007/MQ2007/Fold1/train.txt"
TEST_FILE = "MQ2007/MQ2007/Fold1/test.txt"
FORMATS = ("pairwise", "listwise", "pointwise", "plain_txt")


def _text_file(filepath: str) -> str:
    tried = []
    for root, why in common.cache_roots():
        path = os.path.join(root, "MQ2007", filepath)
        if os.path.isfile(path):
            return path
        tried.append(f"  - {path}  ({why})")
    rar = common.find_optional("MQ2007", URL)
    hint = (f"The archive is at {rar}: unpack it in its directory yourself (unrar x), "
            f"placegroup reads no RAR files." if rar else
            f"placegroup never downloads data. Paddle 1.8 downloads {URL} (md5 {MD5}) into "
            f"<root>/MQ2007/ and unpacks it there; do the same yourself (unrar x).")
    raise common.DatasetFileNotFound("dataset mq2007: unpacked file not found. Looked in:\n"
                                     + "\n".join(tried) + "\n" + hint)


def _parse(line: str):
    """``(relevance, qid, features)`` of one line, or None for a line Paddle skips."""
    cut = line.find("#")
    # Paddle's slice: without a '#', find() is -1 and the line loses its last character.
    parts = line[:cut].strip().split()
    if len(parts) != 48:
        return None
    return int(parts[0]), int(parts[1].split(":")[1]), [float(p.split(":")[1]) for p in parts[2:]]


def load_from_text(filepath: str) -> list[list[tuple[int, int, list[float]]]]:
    """The query lists of ``filepath`` (relative to ``<root>/MQ2007``), in file order."""
    lists, prev = [], None
    with open(_text_file(filepath)) as f:
        for line in f:
            q = _parse(line)
            if q is None:
                continue
            if q[1] != prev:
                lists.append([])
                prev = q[1]
            lists[-1].append(q)
    return lists


def _samples(querylist, format: str):
    ranked = sorted(querylist, key=lambda q: q[0], reverse=True)  # stable, as list.sort
    if format == "plain_txt":
        yield ranked[0][1], ranked[0][0], np.array(ranked[0][2])
    elif format == "pointwise":
        yield ranked[0][0], np.array(ranked[0][2])
    elif format == "listwise":
        yield np.array([[q[0]] for q in ranked]), np.array([q[2] for q in ranked])
    else:
        for i, left in enumerate(ranked):
            for right in ranked[i + 1:]:
                if left[0] != right[0]:
                    hi, lo = (left, right) if left[0] > right[0] else (right, left)
                    yield np.array([1]), np.array(hi[2]), np.array(lo[2])


def _reader(filepath: str, format: str = "pairwise", shuffle: bool = False,
            fill_missing: int = -1) -> common.Replayable:
    if format not in FORMATS:
        raise ValueError(f"mq2007: format must be one of {FORMATS}, got {format!r}")
    _text_file(filepath)  # fail now, naming the paths

    def reader():
        for querylist in load_from_text(filepath):
            if sum(q[0] for q in querylist) != 0:
                yield from _samples(querylist, format)

    return common.Replayable(reader)


def train(format: str = "pairwise", shuffle: bool = False, fill_missing: int = -1):
    """Fold 1's training queries in ``format`` (see the module doc); ``shuffle`` and
    ``fill_missing`` are accepted and unused, as in Paddle.

    Raises:
        ValueError: an unknown ``format``.
        DatasetFileNotFound: the unpacked file is missing.
    """
    return _reader(TRAIN_FILE, format, shuffle, fill_missing)


def test(format: str = "pairwise", shuffle: bool = False, fill_missing: int = -1):
    """Fold 1's test queries; see ``train``."""
    return _reader(TEST_FILE, format, shuffle, fill_missing)


def fetch():
    """Check that the unpacked training file is present (placegroup never downloads)."""
    _text_file(TRAIN_FILE)
