"""The Penn Treebank text of Mikolov's ``simple-examples``, as Paddle 1.8's ``paddle.dataset.imikolov``.

File: ``imikolov/imikolov%2Fsimple-examples.tgz`` (or ``imikolov/simple-examples.tgz``), read
member by member: ``./simple-examples/data/ptb.train.txt`` and ``ptb.valid.txt``.

``build_dict(min_word_freq=50)`` counts words over the training and validation text (each line
also counts one ``<s>`` and one ``<e>``), drops ``<unk>``, keeps words seen *more than*
``min_word_freq`` times, numbers them by falling count then by the word, and gives ``<unk>``
the last id. As in Paddle under Python 3, the corpus words are ``bytes`` keys (``b'the'``)
while ``'<s>'``, ``'<e>'`` and ``'<unk>'`` are ``str`` keys.

``train(word_idx, n, data_type=DataType.NGRAM)`` yields, per line wrapped in ``<s> ... <e>``,
every window of ``n`` word ids as a tuple (lines shorter than ``n`` give none);
``DataType.SEQ`` yields ``(src_seq, trg_seq)`` lists, ``[<s>] + ids`` and ``ids + [<e>]``,
skipping lines whose ``src_seq`` is longer than ``n`` when ``n > 0``.

Example::

    word_idx = paddle.dataset.imikolov.build_dict()
    reader = paddle.dataset.imikolov.train(word_idx, 5)   # 5-grams
"""
from __future__ import annotations

import collections
import tarfile

from placegroup.dataset import common

__all__ = ["DataType", "build_dict", "train", "test", "fetch"]

URL = "https://dataset.bj.bcebos.com/imikolov%2Fsimple-examples.tgz"
MD5 = "30177ea32e27c525793142b6bf2c8e2d"
TRAIN_FILE = "./simple-examples/data/ptb.train.txt"
TEST_FILE = "./simple-examples/data/ptb.valid.txt"


class DataType:
    """What a sample is: ``NGRAM`` tuples of ``n`` ids, or ``SEQ`` (source, target) lists."""
    NGRAM = 1
    SEQ = 2


def _archive() -> str:
    return common.find("imikolov", URL, MD5, what="the PTB text (simple-examples)")


def word_count(f, word_freq=None):
    """Add the words of the lines of ``f`` (and one ``<s>``, ``<e>`` per line) to ``word_freq``."""
    if word_freq is None:
        word_freq = collections.defaultdict(int)
    for line in f:
        for w in line.strip().split():
            word_freq[w] += 1
        word_freq["<s>"] += 1
        word_freq["<e>"] += 1
    return word_freq


def build_dict(min_word_freq: int = 50) -> dict:
    """word -> id over ptb.train.txt and ptb.valid.txt; see the module doc for the order.

    Raises:
        DatasetFileNotFound: the archive is missing.
        TypeError: a bytes word and ``'<s>'``/``'<e>'`` tie in count, which Paddle cannot sort
            either (it compares the words to break the tie).
    """
    path = _archive()
    with tarfile.open(path) as tf:
        freq = word_count(common.tar_member(tf, TEST_FILE, path),
                          word_count(common.tar_member(tf, TRAIN_FILE, path)))
    # NOTE(imikolov-unk): as in Paddle under Python 3, this drops only the str '<unk>' (absent:
    # corpus words are bytes), so the corpus's own b'<unk>' keeps an id of its own.
    freq.pop("<unk>", None)
    kept = sorted(((w, c) for w, c in freq.items() if c > min_word_freq),
                  key=lambda x: (-x[1], x[0]))
    word_idx = {w: i for i, (w, _) in enumerate(kept)}
    word_idx["<unk>"] = len(kept)
    return word_idx


def reader_creator(filename: str, word_idx: dict, n: int, data_type: int):
    """A reader over one member of the archive (Paddle's signature)."""
    if data_type not in (DataType.NGRAM, DataType.SEQ):
        raise ValueError(f"imikolov: data_type must be DataType.NGRAM (1) or DataType.SEQ (2), "
                         f"got {data_type!r}")
    if data_type == DataType.NGRAM and n <= -1:
        raise ValueError(f"imikolov: an n-gram length must be >= 0, got n={n}")
    path = _archive()

    def reader():
        unk = word_idx["<unk>"]
        with tarfile.open(path) as tf:
            for line in common.tar_member(tf, filename, path):
                if data_type == DataType.NGRAM:
                    words = ["<s>", *line.strip().split(), "<e>"]
                    if len(words) >= n:
                        ids = [word_idx.get(w, unk) for w in words]
                        for i in range(n, len(ids) + 1):
                            yield tuple(ids[i - n:i])
                else:
                    ids = [word_idx.get(w, unk) for w in line.strip().split()]
                    src, trg = [word_idx["<s>"], *ids], [*ids, word_idx["<e>"]]
                    if n > 0 and len(src) > n:
                        continue
                    yield src, trg

    return reader


def train(word_idx: dict, n: int, data_type: int = DataType.NGRAM):
    """Samples of ptb.train.txt: ``n``-gram tuples of ids, or ``(src, trg)`` lists for SEQ.

    Raises:
        DatasetFileNotFound: the archive is missing.
    """
    return reader_creator(TRAIN_FILE, word_idx, n, data_type)


def test(word_idx: dict, n: int, data_type: int = DataType.NGRAM):
    """Samples of ptb.valid.txt (Paddle's test set); see ``train``."""
    return reader_creator(TEST_FILE, word_idx, n, data_type)


def fetch():
    """Check that the archive is present (placegroup never downloads)."""
    _archive()
