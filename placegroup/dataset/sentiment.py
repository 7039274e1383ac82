"""NLTK's movie_reviews polarity corpus, as Paddle 1.8's ``paddle.dataset.sentiment``.

Paddle reads it through ``nltk`` from ``DATA_HOME/corpora/movie_reviews`` (where
``nltk.download('movie_reviews', download_dir=DATA_HOME)`` puts it). placegroup reads the same
files without nltk: ``corpora/movie_reviews/{neg,pos}/*.txt`` under a data root (or the
``corpora/movie_reviews.zip`` nltk downloads), ASCII text tokenized as nltk's
``WordPunctTokenizer`` does (runs of word characters, and runs of other non-space characters).

``get_word_dict()`` is Paddle's list of ``(word, id)``: every word of every review, by falling
count (ties in first-seen order, neg files before pos, files in name order). The samples
``(word ids, label)`` (label 0 neg, 1 pos) alternate neg and pos files; the first 1600 are
``train()`` and the last 400 ``test()``. Like Paddle, a word is looked up lower-cased (the
corpus is lower-case already).

Paddle's ``train()`` returns a generator, not a reader creator; these readers can be iterated
directly and also called (``common.Replayable``).

Example::

    for ids, label in paddle.dataset.sentiment.train():
        ...
"""
from __future__ import annotations

import collections
import functools
import os
import re
import zipfile

from placegroup.dataset import common

__all__ = ["train", "test", "get_word_dict", "fetch"]

NUM_TRAINING_INSTANCES = 1600
NUM_TOTAL_INSTANCES = 2000
_TOKEN = re.compile(r"\w+|[^\w\s]+")
_NLTK_HINT = ("python -c \"import nltk; nltk.download('movie_reviews', "
              "download_dir='<root>')\" (nltk's own downloader, run by you)")


def _corpus() -> tuple[str, str]:
    """``(kind, path)``: a ``corpora/movie_reviews`` directory or ``.zip`` under a data root."""
    tried = []
    for root, why in common.cache_roots():
        d = os.path.join(root, "corpora", "movie_reviews")
        if os.path.isdir(d):
            return "dir", d
        if os.path.isfile(d + ".zip"):
            return "zip", d + ".zip"
        tried.append(f"  - {d}[.zip]  ({why})")
    raise common.DatasetFileNotFound(
        "dataset sentiment: NLTK's movie_reviews corpus not found. Looked in:\n"
        + "\n".join(tried) + "\nplacegroup never downloads data (nor needs nltk to read it). Paddle "
        "1.8 fetches it with nltk.download('movie_reviews', download_dir=DATA_HOME); get it with "
        + _NLTK_HINT + ", or unzip movie_reviews.zip there so that corpora/movie_reviews/neg and "
        "pos hold the .txt files.")


@functools.lru_cache(maxsize=1)
def _files(kind: str, path: str) -> tuple[tuple[str, str], ...]:
    """``(category, text)`` of every review: neg files then pos files, in name order."""
    out = []
    if kind == "dir":
        for cat in ("neg", "pos"):
            folder = os.path.join(path, cat)
            for name in sorted(n for n in os.listdir(folder) if n.endswith(".txt")
                               and not n.startswith(".")):
                with open(os.path.join(folder, name), encoding="ascii") as f:
                    out.append((cat, f.read()))
    else:
        with zipfile.ZipFile(path) as z:
            names = sorted(z.namelist())
            for cat in ("neg", "pos"):
                for n in names:
                    if n.startswith(f"movie_reviews/{cat}/") and n.endswith(".txt"):
                        out.append((cat, z.read(n).decode("ascii")))
    return tuple(out)


def _reviews() -> list[tuple[str, list[str]]]:
    return [(cat, _TOKEN.findall(text)) for cat, text in _files(*_corpus())]


def get_word_dict() -> list[tuple[str, int]]:
    """Paddle's ``[(word, id), ...]``, the most frequent word first.

    Raises:
        DatasetFileNotFound: the corpus is missing.
    """
    freq: dict = collections.defaultdict(int)
    for _, words in _reviews():
        for w in words:
            freq[w] += 1
    ranked = sorted(freq.items(), key=lambda x: -x[1])  # stable: ties stay in first-seen order
    return [(w, i) for i, (w, _) in enumerate(ranked)]


def load_sentiment_data() -> list[tuple[list[int], int]]:
    """All 2000 samples, neg and pos files alternating (Paddle's ``sort_files``)."""
    reviews = _reviews()
    ids = dict(get_word_dict())
    neg = [r for r in reviews if r[0] == "neg"]
    pos = [r for r in reviews if r[0] == "pos"]
    data = []
    for pair in zip(neg, pos):
        for cat, words in pair:
            try:
                data.append(([ids[w.lower()] for w in words], 0 if cat == "neg" else 1))
            except KeyError as e:
                raise KeyError(f"sentiment: word {e.args[0]!r} occurs only capitalized; Paddle "
                               f"looks words up lower-cased and fails the same way") from None
    return data


def _reader(lo: int, hi: int | None) -> common.Replayable:
    data = load_sentiment_data()[lo:hi]
    return common.Replayable(lambda: ((list(ids), label) for ids, label in data))


def train() -> common.Replayable:
    """The first 1600 samples ``(word ids, label)``; iterable and callable."""
    return _reader(0, NUM_TRAINING_INSTANCES)


def test() -> common.Replayable:
    """The last 400 samples; see ``train``."""
    return _reader(NUM_TRAINING_INSTANCES, None)


def fetch():
    """Check that the corpus is present (placegroup never downloads)."""
    _corpus()
