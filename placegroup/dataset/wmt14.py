"""A shrunk WMT14 French-English set, as Paddle 1.8's ``paddle.dataset.wmt14``.

File: ``wmt14/wmt14.tgz``, whose members ending in ``src.dict`` and ``trg.dict`` are the
dictionaries (a word per line; ``<s>``, ``<e>``, ``<unk>`` first) and whose members ending in
``train/train``, ``test/test`` and ``gen/gen`` hold tab-separated ``source\\ttarget`` lines.

``train(dict_size)`` / ``test(dict_size)`` / ``gen(dict_size)`` yield
``(src_ids, trg_ids, trg_ids_next)`` lists of ints: the source wrapped in ``<s> ... <e>``, the
target with ``<s>`` in front, and the target followed by ``<e>``. Words past the first
``dict_size`` lines of a dictionary are ``UNK_IDX`` (2); pairs whose source (with its marks) or
target is longer than 80 ids are skipped, and so are lines without exactly one tab.

Example::

    reader = paddle.batch(paddle.dataset.wmt14.train(30000), batch_size=64)
    src_dict, trg_dict = paddle.dataset.wmt14.get_dict(30000)   # id -> word
"""
from __future__ import annotations

import tarfile

from placegroup.dataset import common

__all__ = ["train", "test", "gen", "get_dict", "fetch"]

URL_TRAIN = "http://paddlemodels.bj.bcebos.com/wmt/wmt14.tgz"
MD5_TRAIN = "0791583d57d5beb693b9414c5b36798c"
START, END, UNK = "<s>", "<e>", "<unk>"
UNK_IDX = 2


def _archive() -> str:
    return common.find("wmt14", URL_TRAIN, MD5_TRAIN, what="the shrunk WMT14 set")


def _read_dicts(tar_file: str, dict_size: int) -> tuple[dict, dict]:
    def to_dict(f):
        out = {}
        for i, line in enumerate(f):
            if i >= dict_size:
                break
            out[line.strip().decode()] = i
        return out

    with tarfile.open(tar_file) as f:
        found = []
        for suffix in ("src.dict", "trg.dict"):
            names = [m.name for m in f if m.name.endswith(suffix)]
            if len(names) != 1:
                raise ValueError(f"wmt14: {tar_file} has {len(names)} members ending in "
                                 f"{suffix!r} ({names}); Paddle's archive has exactly one")
            found.append(to_dict(f.extractfile(names[0])))
    return found[0], found[1]


def reader_creator(tar_file: str, file_name: str, dict_size: int):
    """A reader over the members of ``tar_file`` ending in ``file_name`` (Paddle's signature)."""

    def reader():
        src_dict, trg_dict = _read_dicts(tar_file, dict_size)
        with tarfile.open(tar_file) as f:
            for name in [m.name for m in f if m.name.endswith(file_name)]:
                for line in f.extractfile(name):
                    parts = line.decode().strip().split("\t")
                    if len(parts) != 2:
                        continue
                    src_ids = [src_dict.get(w, UNK_IDX) for w in [START, *parts[0].split(), END]]
                    trg_ids = [trg_dict.get(w, UNK_IDX) for w in parts[1].split()]
                    if len(src_ids) > 80 or len(trg_ids) > 80:
                        continue
                    yield src_ids, [trg_dict[START], *trg_ids], [*trg_ids, trg_dict[END]]

    return reader


def train(dict_size: int):
    """The training pairs; see the module doc.

    Raises:
        DatasetFileNotFound: the archive is missing.
    """
    return reader_creator(_archive(), "train/train", dict_size)


def test(dict_size: int):
    """The test pairs; see ``train``."""
    return reader_creator(_archive(), "test/test", dict_size)


def gen(dict_size: int):
    """The generation pairs; see ``train``."""
    return reader_creator(_archive(), "gen/gen", dict_size)


def get_dict(dict_size: int, reverse: bool = True) -> tuple[dict, dict]:
    """``(src_dict, trg_dict)``: id -> word when ``reverse`` (the default), else word -> id."""
    src, trg = _read_dicts(_archive(), dict_size)
    if reverse:
        src, trg = {v: k for k, v in src.items()}, {v: k for k, v in trg.items()}
    return src, trg


def fetch():
    """Check that the archive is present (placegroup never downloads)."""
    _archive()
