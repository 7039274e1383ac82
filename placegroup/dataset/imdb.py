"""IMDB movie reviews (aclImdb), as Paddle 1.8's ``paddle.dataset.imdb``.

File: ``imdb/imdb%2FaclImdb_v1.tar.gz`` (or ``imdb/aclImdb_v1.tar.gz``); the reviews are its
members ``aclImdb/{train,test}/{pos,neg}/*.txt``, read in archive order.

A review is tokenized as Paddle does, on bytes: trailing newlines stripped, ASCII punctuation
deleted, lower-cased, split on whitespace. ``word_dict()`` keeps the words seen more than 150
times over all four folders, numbered by falling count then by the word, with ``'<unk>'`` last
(the words are ``bytes`` keys, ``'<unk>'`` a ``str``, as in Paddle under Python 3).
``train(word_idx)`` / ``test(word_idx)`` yield ``(ids list of int, label)`` with label 0 for
a positive review and 1 for a negative one, all positives first.

Example::

    word_idx = paddle.dataset.imdb.word_dict()
    reader = paddle.batch(paddle.dataset.imdb.train(word_idx), batch_size=32)

Like Paddle, ``train``/``test`` read the whole folder when called and replay it on each pass.
"""
from __future__ import annotations

import collections
import re
import string
import tarfile

from placegroup.dataset import common

__all__ = ["build_dict", "word_dict", "train", "test", "fetch"]

URL = "https://dataset.bj.bcebos.com/imdb%2FaclImdb_v1.tar.gz"
MD5 = "7c2ac02c03563afcf9b574c7e56c153a"
_PUNCT = string.punctuation.encode("latin-1")


def _archive() -> str:
    return common.find("imdb", URL, MD5, what="the aclImdb reviews")


def tokenize(pattern: re.Pattern):
    """The token lists (bytes words) of the members whose names match ``pattern``."""
    path = _archive()
    with tarfile.open(path) as tarf:
        for member in tarf:
            if member.isfile() and pattern.match(member.name):
                text = tarf.extractfile(member).read()
                yield text.rstrip(b"\n\r").translate(None, _PUNCT).lower().split()


def build_dict(pattern: re.Pattern, cutoff: int) -> dict:
    """word -> id for the words of ``pattern``'s reviews seen more than ``cutoff`` times."""
    freq: dict = collections.defaultdict(int)
    for doc in tokenize(pattern):
        for word in doc:
            freq[word] += 1
    kept = sorted(((w, c) for w, c in freq.items() if c > cutoff), key=lambda x: (-x[1], x[0]))
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def reader_creator(pos_pattern: re.Pattern, neg_pattern: re.Pattern, word_idx: dict):
    """Read the matching reviews now; the reader replays ``(ids, 0)`` positives then ``(ids, 1)``
    negatives."""
    unk = word_idx["<unk>"]
    samples = [([word_idx.get(w, unk) for w in doc], label)
               for pattern, label in ((pos_pattern, 0), (neg_pattern, 1))
               for doc in tokenize(pattern)]

    def reader():
        for ids, label in samples:
            yield list(ids), label  # a copy, so a caller editing a sample cannot change the next pass

    return reader


def train(word_idx: dict):
    """The 25,000 training reviews as ``(ids, label)``; see the module doc.

    Raises:
        DatasetFileNotFound: the archive is missing.
    """
    return reader_creator(re.compile(r"aclImdb/train/pos/.*\.txt$"),
                          re.compile(r"aclImdb/train/neg/.*\.txt$"), word_idx)


def test(word_idx: dict):
    """The 25,000 test reviews as ``(ids, label)``; see ``train``."""
    return reader_creator(re.compile(r"aclImdb/test/pos/.*\.txt$"),
                          re.compile(r"aclImdb/test/neg/.*\.txt$"), word_idx)


def word_dict() -> dict:
    """Paddle's dictionary: words seen more than 150 times in train and test, ``'<unk>'`` last."""
    return build_dict(re.compile(r"aclImdb/((train)|(test))/((pos)|(neg))/.*\.txt$"), 150)


def fetch():
    """Check that the archive is present (placegroup never downloads)."""
    _archive()
