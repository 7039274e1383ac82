"""MNIST, as Paddle 1.8's ``paddle.dataset.mnist`` gives it.

Files (Paddle's cache layout, see ``placegroup.dataset.common``): ``mnist/train-images-idx3-ubyte.gz``,
``mnist/train-labels-idx1-ubyte.gz``, ``mnist/t10k-images-idx3-ubyte.gz`` and
``mnist/t10k-labels-idx1-ubyte.gz``, gzipped big-endian idx files.

Each sample is ``(image float32[784], label int)``: the pixels row by row, scaled as Paddle
does in float32, ``x / 255.0 * 2.0 - 1.0`` (so in [-1, 1]), and the digit 0-9 as a Python int.

Example::

    import placegroup as paddle
    reader = paddle.batch(paddle.dataset.mnist.train(), batch_size=64)

Thread-safety: each pass reads the files anew; passes share nothing.
"""
from __future__ import annotations

import gzip

import numpy as np

from placegroup.dataset import common

__all__ = ["train", "test", "fetch"]

URL_PREFIX = "https://dataset.bj.bcebos.com/mnist/"
TEST_IMAGE_URL = URL_PREFIX + "t10k-images-idx3-ubyte.gz"
TEST_IMAGE_MD5 = "9fb629c4189551a2d022fa330f9573f3"
TEST_LABEL_URL = URL_PREFIX + "t10k-labels-idx1-ubyte.gz"
TEST_LABEL_MD5 = "ec29112dd5afa0611ce80d1b7f02629c"
TRAIN_IMAGE_URL = URL_PREFIX + "train-images-idx3-ubyte.gz"
TRAIN_IMAGE_MD5 = "f68b3c2dcbeaaa9fbdd348bbdeb94873"
TRAIN_LABEL_URL = URL_PREFIX + "train-labels-idx1-ubyte.gz"
TRAIN_LABEL_MD5 = "d53e105ee54ea40749a09fcbcd1e9432"


def _idx(path: str, magic: int, ndim: int) -> np.ndarray:
    """An idx file's uint8 payload, shaped by its header; errors name the file."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    head = 4 + 4 * ndim
    if len(raw) < head:
        raise ValueError(f"mnist: {path} is {len(raw)} bytes, too short for an idx header")
    dims = np.frombuffer(raw, ">u4", 1 + ndim)
    if int(dims[0]) != magic:
        raise ValueError(f"mnist: {path} has magic number {int(dims[0])}, expected {magic} "
                         f"(an idx{ndim} ubyte file)")
    shape = tuple(int(d) for d in dims[1:])
    body = np.frombuffer(raw, np.uint8, offset=head)
    if body.size != int(np.prod(shape)):
        raise ValueError(f"mnist: {path} holds {body.size} bytes of data, its header says "
                         f"{shape} = {int(np.prod(shape))}")
    return body.reshape(shape)


def reader_creator(image_filename: str, label_filename: str, buffer_size: int = 100):
    """A reader over one pair of idx files (Paddle's signature; ``buffer_size`` is unused:
    the files are decoded whole)."""

    def reader():
        images = _idx(image_filename, 2051, 3)
        labels = _idx(label_filename, 2049, 1)
        if images.shape[0] != labels.shape[0]:
            raise ValueError(f"mnist: {image_filename} has {images.shape[0]} images but "
                             f"{label_filename} has {labels.shape[0]} labels")
        # Paddle's float32 arithmetic, in its order, so the values are bit-identical.
        x = images.reshape(images.shape[0], -1).astype("float32")
        x = x / 255.0
        x = x * 2.0
        x = x - 1.0
        for i in range(x.shape[0]):
            yield x[i, :], int(labels[i])

    return reader


def train():
    """The 60,000 training images.

    Returns:
        A reader yielding ``(image float32[784] in [-1, 1], label int in 0..9)``.

    Raises:
        DatasetFileNotFound: naming the paths tried, the URL and md5 of the missing file.
    """
    return reader_creator(common.find("mnist", TRAIN_IMAGE_URL, TRAIN_IMAGE_MD5),
                          common.find("mnist", TRAIN_LABEL_URL, TRAIN_LABEL_MD5), 100)


def test():
    """The 10,000 test images; see ``train``."""
    return reader_creator(common.find("mnist", TEST_IMAGE_URL, TEST_IMAGE_MD5),
                          common.find("mnist", TEST_LABEL_URL, TEST_LABEL_MD5), 100)


def fetch():
    """Check that all four files are present (placegroup never downloads).

    Raises:
        DatasetFileNotFound: for the first missing file.
    """
    for url, md5 in ((TRAIN_IMAGE_URL, TRAIN_IMAGE_MD5), (TRAIN_LABEL_URL, TRAIN_LABEL_MD5),
                     (TEST_IMAGE_URL, TEST_IMAGE_MD5), (TEST_LABEL_URL, TEST_LABEL_MD5)):
        common.find("mnist", url, md5)
