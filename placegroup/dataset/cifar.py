"""CIFAR-10 and CIFAR-100, as Paddle 1.8's ``paddle.dataset.cifar``, from a converted file.

Paddle reads ``cifar/cifar-10-python.tar.gz`` (and ``cifar-100-python.tar.gz``), whose batches
are Python pickles. NOTE(no-pickle): unpickling runs whatever code the file names, so placegroup
never loads them. Convert the archive once yourself, with your own Python, into a numpy
``.npz`` of plain arrays (``CONVERT_SCRIPT``, also printed by the error), and placegroup reads
that, with ``allow_pickle=False``::

    <root>/cifar/cifar-10-python.npz     (beside cifar-10-python.tar.gz)
    <root>/cifar/cifar-100-python.npz

The ``.npz`` holds ``names`` (the archive's batch member names, in archive order) and, for the
i-th, ``data_<i>`` (uint8 [N, 3072]) and ``labels_<i>`` (int64 [N]: ``labels`` or
``fine_labels``). Readers go through the members whose names contain ``data_batch`` /
``test_batch`` (CIFAR-10) or ``train`` / ``test`` (CIFAR-100), as Paddle does, and yield
``(image float32[3072] = pixels / 255.0, label int)``, the pixels in CIFAR's order (1024 red,
1024 green, 1024 blue, each row by row).

Example::

    reader = paddle.batch(paddle.dataset.cifar.train10(), batch_size=128)
"""
from __future__ import annotations

import numpy as np

from placegroup.dataset import common

__all__ = ["train10", "test10", "train100", "test100", "fetch", "CONVERT_SCRIPT",
           "CifarPickleRefused"]

URL_PREFIX = "https://dataset.bj.bcebos.com/cifar/"
CIFAR10_URL = URL_PREFIX + "cifar-10-python.tar.gz"
CIFAR10_MD5 = "c58f30108f718f92721af3b95e74349a"
CIFAR100_URL = URL_PREFIX + "cifar-100-python.tar.gz"
CIFAR100_MD5 = "eb9058c3a382ffc7106e4002c42a8d85"

CONVERT_SCRIPT = """\
# Run this yourself, once, with a Python you trust the archive to (it unpickles its batches).
import pickle, sys, tarfile
import numpy as np
src = sys.argv[1]                                   # .../cifar/cifar-10-python.tar.gz
out, names = {}, []
with tarfile.open(src) as tf:
    for m in tf:
        if m.isfile() and any(s in m.name for s in ("data_batch", "test_batch", "train", "test")):
            batch = pickle.load(tf.extractfile(m), encoding="bytes")
            labels = batch.get(b"labels", batch.get(b"fine_labels"))
            out[f"data_{len(names)}"] = np.asarray(batch[b"data"], dtype=np.uint8)
            out[f"labels_{len(names)}"] = np.asarray(labels, dtype=np.int64)
            names.append(m.name)
np.savez(src[:-len(".tar.gz")] + ".npz", names=np.array(names), **out)
"""


class CifarPickleRefused(common.DatasetFileNotFound):
    """Only Paddle's pickled archive is there; it must be converted to ``.npz`` first."""


def _npz(url: str, md5: str) -> str:
    """The converted file, or an error naming the archive, why, and how to convert it."""
    npz_name = url.split("/")[-1][:-len(".tar.gz")] + ".npz"
    hit = common.find_optional("cifar", url, save_name=npz_name)
    if hit is not None:
        return hit
    archive = common.find_optional("cifar", url)
    if archive is None:
        err = common.missing("cifar", url, md5, what="the archive to convert,")
        raise common.DatasetFileNotFound(f"{err}\nplacegroup reads {npz_name}, made from that "
                                         f"archive by cifar.CONVERT_SCRIPT; neither is there.")
    raise CifarPickleRefused(
        f"dataset cifar: {archive} is Paddle's archive, whose batches are Python pickles; "
        f"placegroup does not load pickles, for safety (unpickling runs code the file names). "
        f"Convert it once yourself into {archive[:-len('.tar.gz')]}.npz, which placegroup reads "
        f"as plain arrays: save this as convert_cifar.py and run "
        f"`python convert_cifar.py {archive}`:\n\n{CONVERT_SCRIPT}")


def reader_creator(filename: str, sub_name: str, cycle: bool = False):
    """A reader over the batches of the converted ``filename`` whose names contain ``sub_name``."""

    def reader():
        while True:
            with np.load(filename, allow_pickle=False) as z:
                if "names" not in z.files:
                    raise ValueError(f"cifar: {filename} has no 'names' array; write it with "
                                     f"cifar.CONVERT_SCRIPT")
                for i, name in enumerate(z["names"].tolist()):
                    if sub_name not in name:
                        continue
                    data, labels = z[f"data_{i}"], z[f"labels_{i}"]
                    if data.ndim != 2 or data.shape[0] != labels.shape[0]:
                        raise ValueError(f"cifar: {filename}: batch {name!r} has data "
                                         f"{list(data.shape)} and labels {list(labels.shape)}; "
                                         f"expected [N, 3072] and [N]")
                    images = (data / 255.0).astype(np.float32)
                    for x, y in zip(images, labels.tolist()):
                        yield x, int(y)
            if not cycle:
                break

    return reader


def train10(cycle: bool = False):
    """CIFAR-10's 50,000 training images as ``(float32[3072] in [0, 1], label 0..9)``.

    Raises:
        CifarPickleRefused: only the pickled archive is there (the message shows the
            conversion script).
        DatasetFileNotFound: neither the archive nor the converted file is there.
    """
    return reader_creator(_npz(CIFAR10_URL, CIFAR10_MD5), "data_batch", cycle=cycle)


def test10(cycle: bool = False):
    """CIFAR-10's 10,000 test images; see ``train10``."""
    return reader_creator(_npz(CIFAR10_URL, CIFAR10_MD5), "test_batch", cycle=cycle)


def train100():
    """CIFAR-100's 50,000 training images, fine labels 0..99; see ``train10``."""
    return reader_creator(_npz(CIFAR100_URL, CIFAR100_MD5), "train")


def test100():
    """CIFAR-100's 10,000 test images; see ``train100``."""
    return reader_creator(_npz(CIFAR100_URL, CIFAR100_MD5), "test")


def fetch():
    """Check that both converted files are present (placegroup never downloads)."""
    _npz(CIFAR10_URL, CIFAR10_MD5)
    _npz(CIFAR100_URL, CIFAR100_MD5)
