"""Where the data sets' files are looked up, and the error that says where to put a missing one.

Paddle 1.x downloads each file to ``DATA_HOME/<module>/<name>``, with ``DATA_HOME`` =
``~/.cache/paddle/dataset`` and ``<name>`` the last part of its URL (``imdb%2FaclImdb_v1.tar.gz``
for a mirror URL that quotes the slash). placegroup never downloads anything: it reads the
files from that layout, looked up under two roots in order:

1. ``$PLACEGROUP_DATA_HOME`` (``placegroup.config``), when set;
2. Paddle's own cache, ``~/.cache/paddle/dataset``, so a machine where Paddle ran already works.

Under each root a file may have either Paddle's saved name or the plain name (the URL's last
part unquoted: ``aclImdb_v1.tar.gz``), since Paddle's mirrors changed over the 1.x releases.
A missing file raises ``DatasetFileNotFound`` naming every path tried, the URL Paddle would have
downloaded and its md5. The md5 is not checked: hashing a 1 GB archive on every pass costs more
than it protects, and a hand-made or trimmed file is the user's choice.

NOTE(no-pickle): nothing under ``placegroup.dataset`` unpickles. Paddle's cifar archive and its
flowers batch files are pickles; placegroup refuses them and says how to convert them (cifar.py).
Archives are only read member by member into memory (``tarfile.extractfile``, ``zipfile.open``),
never extracted to disk, so a member's name cannot write outside the cache.

NOTE(hash-order): a few of Paddle's dictionaries (movielens' title words and categories, conll05's
labels) number the elements of a Python ``set`` in iteration order, which depends on
``PYTHONHASHSEED``. placegroup builds the same sets by the same insertions, so its ids equal
Paddle's under the same Python and the same ``PYTHONHASHSEED``; set it for reproducible ids.

Thread-safety: these functions only read the environment and the file system.
"""
from __future__ import annotations

import os
import tarfile
import urllib.parse
from typing import Callable, Iterator

from placegroup import config
from placegroup.errors import UserError

__all__ = ["DatasetFileNotFound", "Replayable", "cache_roots", "find", "find_optional",
           "missing", "tar_member"]


class DatasetFileNotFound(UserError, FileNotFoundError):
    """A data set's file is in none of the places placegroup looks (placegroup never downloads)."""


def cache_roots() -> list[tuple[str, str]]:
    """``(root, what it is)`` in lookup order: ``$PLACEGROUP_DATA_HOME``, then Paddle's cache."""
    roots = []
    home = config.get("PLACEGROUP_DATA_HOME")
    if home:
        roots.append((os.path.expanduser(home), "$PLACEGROUP_DATA_HOME"))
    roots.append((os.path.join(os.path.expanduser("~"), ".cache", "paddle", "dataset"),
                  "Paddle's dataset cache"))
    return roots


def _names(url: str, save_name: str | None) -> list[str]:
    if save_name:
        return [save_name]
    saved = url.split("/")[-1]
    plain = os.path.basename(urllib.parse.unquote(saved))
    return [saved] if plain == saved else [saved, plain]


def _candidates(module: str, url: str, save_name: str | None) -> list[tuple[str, str]]:
    return [(os.path.join(root, module, name), why) for root, why in cache_roots()
            for name in _names(url, save_name)]


def find_optional(module: str, url: str, save_name: str | None = None) -> str | None:
    """The first existing path of ``url``'s file under ``<root>/<module>/``, or None."""
    for path, _ in _candidates(module, url, save_name):
        if os.path.isfile(path):
            return path
    return None


def find(module: str, url: str, md5: str, save_name: str | None = None, what: str = "") -> str:
    """The local path of the file Paddle would have downloaded from ``url`` into ``module``.

    Args:
        module: the cache subdirectory (Paddle's ``module_name``: ``"mnist"``, ``"conll05st"``).
        url: the URL Paddle 1.8 downloads; its last part is the file name.
        md5: Paddle's md5 of the file, quoted in the error.
        save_name: Paddle's ``save_name`` when it gives one (wmt16), else None.
        what: a few words on what the file holds, for the error.

    Returns:
        The first path that exists, in ``cache_roots()`` order.

    Raises:
        DatasetFileNotFound: naming every path tried, the URL and the md5.

    Example::

        path = find("mnist", "https://dataset.bj.bcebos.com/mnist/t10k-labels-idx1-ubyte.gz",
                    "ec29112dd5afa0611ce80d1b7f02629c")
    """
    hit = find_optional(module, url, save_name)
    if hit is not None:
        return hit
    raise missing(module, url, md5, save_name, what)


def missing(module: str, url: str, md5: str, save_name: str | None = None,
            what: str = "") -> DatasetFileNotFound:
    """The error ``find`` raises (also for a file whose presence a data set checks itself)."""
    cands = _candidates(module, url, save_name)
    looked = "\n".join(f"  - {p}  ({why})" for p, why in cands)
    if not config.is_set("PLACEGROUP_DATA_HOME"):
        looked += f"\n  - $PLACEGROUP_DATA_HOME/{module}/{_names(url, save_name)[0]}  (not set)"
    name = _names(url, save_name)[0]
    return DatasetFileNotFound(
        f"dataset {module}: {what + ' ' if what else ''}file {name!r} not found. Looked in:\n"
        f"{looked}\nplacegroup never downloads data. Paddle 1.8 downloads it from\n  {url}\n"
        f"(md5 {md5}); put that file at the first path above, e.g.\n"
        f"  mkdir -p {os.path.dirname(cands[0][0])} && cp {name} {os.path.dirname(cands[0][0])}/")


def tar_member(tf: tarfile.TarFile, name: str, archive: str):
    """The file object of member ``name`` (``./a/b`` and ``a/b`` are the same member).

    Raises:
        KeyError: naming the member and the archive.
    """
    try:
        return tf.extractfile(tf.getmember(name))
    except KeyError:
        want = os.path.normpath(name)
        for m in tf.getmembers():
            if os.path.normpath(m.name) == want:
                return tf.extractfile(m)
    raise KeyError(f"{archive}: no member {name!r}; is it the archive Paddle downloads?")


class Replayable:
    """A reader that is also iterable: ``r()`` and ``iter(r)`` both start a fresh pass.

    Paddle's ``sentiment.train()`` and ``mq2007.train()`` return generators, not reader
    creators, so Paddle scripts iterate them directly; these readers serve both uses.
    """

    def __init__(self, make: Callable[[], Iterator]) -> None:
        self._make = make

    def __call__(self) -> Iterator:
        return self._make()

    def __iter__(self) -> Iterator:
        return self._make()
