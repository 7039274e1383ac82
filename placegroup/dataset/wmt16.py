"""WMT16 Multi30k English-German, as Paddle 1.8's ``paddle.dataset.wmt16``.

File: ``wmt16/wmt16.tar.gz`` (Paddle's ``save_name``), with members ``wmt16/train``,
``wmt16/test`` and ``wmt16/val`` of tab-separated ``english\\tgerman`` lines.

Dictionaries are built as Paddle builds them: ``<s>``, ``<e>``, ``<unk>`` (ids 0, 1, 2), then the
words of ``wmt16/train`` in the chosen language by falling count (ties in first-seen order), up
to ``dict_size`` entries in all. Like Paddle, each is kept in ``wmt16/<lang>_<size>.dict``
beside the archive and reused while it has ``dict_size`` lines (a file Paddle built is read as
it is); where that directory is read-only the dictionary is built in memory each time.

``train(src_dict_size, trg_dict_size, src_lang="en")`` / ``test`` / ``validation`` yield
``(src_ids, trg_ids, trg_ids_next)``: the source wrapped in ``<s> ... <e>``, the target with
``<s>`` in front, and the target followed by ``<e>`` (Paddle uses the source dictionary's mark
and unknown ids for both; they are the same, 0, 1 and 2). Sizes are capped at the vocabulary
sizes Paddle assumes (11250 English, 19220 German words).

Example::

    reader = paddle.dataset.wmt16.train(10000, 10000, src_lang="en")
    en = paddle.dataset.wmt16.get_dict("en", 10000)
"""
from __future__ import annotations

import collections
import os
import tarfile
import tempfile

from placegroup.dataset import common

__all__ = ["train", "test", "validation", "get_dict", "fetch"]

DATA_URL = "http://paddlemodels.bj.bcebos.com/wmt/wmt16.tar.gz"
DATA_MD5 = "0c38be43600334966403524a40dcd81e"
TOTAL_EN_WORDS = 11250
TOTAL_DE_WORDS = 19220
START_MARK, END_MARK, UNK_MARK = "<s>", "<e>", "<unk>"


def _archive() -> str:
    return common.find("wmt16", DATA_URL, DATA_MD5, save_name="wmt16.tar.gz",
                       what="the Multi30k pairs")


def _dict_path(tar_file: str, lang: str, dict_size: int) -> str:
    return os.path.join(os.path.dirname(tar_file), f"{lang}_{dict_size}.dict")


def _build_words(tar_file: str, dict_size: int, lang: str) -> list[str]:
    freq: dict = collections.defaultdict(int)
    with tarfile.open(tar_file) as f:
        for line in common.tar_member(f, "wmt16/train", tar_file):
            parts = line.decode().strip().split("\t")
            if len(parts) != 2:
                continue
            for w in (parts[0] if lang == "en" else parts[1]).split():
                freq[w] += 1
    words = [START_MARK, END_MARK, UNK_MARK]
    for idx, (w, _) in enumerate(sorted(freq.items(), key=lambda x: x[1], reverse=True)):
        if idx + 3 == dict_size:
            break
        words.append(w)
    return words


def _load_dict(tar_file: str, dict_size: int, lang: str, reverse: bool = False) -> dict:
    path = _dict_path(tar_file, lang, dict_size)
    words = None
    if os.path.isfile(path):
        with open(path, "rb") as f:
            lines = f.read().splitlines()
        if len(lines) == dict_size:
            words = [w.strip().decode() for w in lines]
    if words is None:
        words = _build_words(tar_file, dict_size, lang)
        try:  # keep it as Paddle does; atomically, so a concurrent reader never sees half
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), suffix=".tmp")
            with os.fdopen(fd, "wb") as f:
                f.write("".join(w + "\n" for w in words).encode())
            os.replace(tmp, path)
        except OSError:
            pass  # a read-only cache: the dictionary is rebuilt in memory next time too
    return {i: w for i, w in enumerate(words)} if reverse else {w: i for i, w in enumerate(words)}


def _sizes(src_dict_size: int, trg_dict_size: int, src_lang: str) -> tuple[int, int]:
    if src_lang not in ("en", "de"):
        raise ValueError(f"wmt16: src_lang must be 'en' (English) or 'de' (German), "
                         f"got {src_lang!r}")
    en, de = (src_dict_size, trg_dict_size) if src_lang == "en" else (trg_dict_size, src_dict_size)
    en, de = min(en, TOTAL_EN_WORDS), min(de, TOTAL_DE_WORDS)
    return (en, de) if src_lang == "en" else (de, en)


def reader_creator(tar_file: str, file_name: str, src_dict_size: int, trg_dict_size: int,
                   src_lang: str):
    """A reader over member ``file_name`` of ``tar_file`` (Paddle's signature)."""

    def reader():
        trg_lang = "de" if src_lang == "en" else "en"
        src_dict = _load_dict(tar_file, src_dict_size, src_lang)
        trg_dict = _load_dict(tar_file, trg_dict_size, trg_lang)
        start, end, unk = src_dict[START_MARK], src_dict[END_MARK], src_dict[UNK_MARK]
        src_col = 0 if src_lang == "en" else 1
        with tarfile.open(tar_file) as f:
            for line in common.tar_member(f, file_name, tar_file):
                parts = line.decode().strip().split("\t")
                if len(parts) != 2:
                    continue
                src_ids = [start, *(src_dict.get(w, unk) for w in parts[src_col].split()), end]
                trg_ids = [trg_dict.get(w, unk) for w in parts[1 - src_col].split()]
                yield src_ids, [start, *trg_ids], [*trg_ids, end]

    return reader


def _split(file_name: str, src_dict_size: int, trg_dict_size: int, src_lang: str):
    src_size, trg_size = _sizes(src_dict_size, trg_dict_size, src_lang)
    return reader_creator(_archive(), file_name, src_size, trg_size, src_lang)


def train(src_dict_size: int, trg_dict_size: int, src_lang: str = "en"):
    """The 29,000 training pairs; see the module doc.

    Raises:
        ValueError: ``src_lang`` is neither ``"en"`` nor ``"de"``.
        DatasetFileNotFound: the archive is missing.
    """
    return _split("wmt16/train", src_dict_size, trg_dict_size, src_lang)


def test(src_dict_size: int, trg_dict_size: int, src_lang: str = "en"):
    """The 1,000 test pairs; see ``train``."""
    return _split("wmt16/test", src_dict_size, trg_dict_size, src_lang)


def validation(src_dict_size: int, trg_dict_size: int, src_lang: str = "en"):
    """The 1,014 validation pairs; see ``train``."""
    return _split("wmt16/val", src_dict_size, trg_dict_size, src_lang)


def get_dict(lang: str, dict_size: int, reverse: bool = False) -> dict:
    """The ``lang`` dictionary of ``dict_size`` entries: word -> id, or id -> word if ``reverse``.

    Unlike Paddle, which asserts that a reader built the dictionary file first, this builds
    it when missing.
    """
    if lang not in ("en", "de"):
        raise ValueError(f"wmt16: lang must be 'en' or 'de', got {lang!r}")
    dict_size = min(dict_size, TOTAL_EN_WORDS if lang == "en" else TOTAL_DE_WORDS)
    return _load_dict(_archive(), dict_size, lang, reverse)


def fetch():
    """Check that the archive is present (placegroup never downloads)."""
    _archive()
