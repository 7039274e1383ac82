"""Oxford 102 Flowers, as Paddle 1.8's ``paddle.dataset.flowers``.

Files under ``flowers/``: ``102flowers.tgz`` (members ``jpg/image_%05d.jpg``),
``imagelabels.mat`` and ``setid.mat`` (MATLAB files, read with ``scipy.io.loadmat``, which needs
scipy, installed with placegroup's ``test``/``examples`` extras).

Paddle's sets are swapped on purpose: ``train()`` reads the ``tstid`` list (6149 images) and
``test()`` the ``trnid`` list (1020), ``valid()`` the ``valid`` list. Each image's raw bytes and
label ``- 1`` (0..101) go through ``mapper``, by default Paddle's: decode, resize the short
edge to 256, crop 224 (random with a random mirror for training, centred otherwise), CHW,
minus the mean ``[103.94, 116.78, 123.68]``, flattened float32[150528]. That mapper decodes
JPEG with OpenCV (``opencv-python``), as Paddle does; without it, reading a sample raises an
ImportError saying so. Pass ``mapper=lambda s: s`` for the raw ``(jpeg bytes, label)``.

NOTE(no-pickle): Paddle 1.8 first re-packs the images into pickled batch files beside the
archive; placegroup reads the archive's members directly, in archive order, which yields the
same samples in the same order.

Example::

    reader = paddle.dataset.flowers.train(mapper=lambda s: s, use_xmap=False)
"""
from __future__ import annotations

import functools
import os
import tarfile

from placegroup.dataset import common, image
from placegroup.datafeed.reader_decorators import map_readers, xmap_readers

__all__ = ["train", "test", "valid", "fetch", "default_mapper", "train_mapper", "test_mapper"]

DATA_URL = "http://paddlemodels.bj.bcebos.com/flowers/102flowers.tgz"
LABEL_URL = "http://paddlemodels.bj.bcebos.com/flowers/imagelabels.mat"
SETID_URL = "http://paddlemodels.bj.bcebos.com/flowers/setid.mat"
DATA_MD5 = "52808999861908f626f3c1f4e79d11fa"
LABEL_MD5 = "e0620be6f572b9609742df49c70aed4d"
SETID_MD5 = "a5357ecc9cb78c4bef273ce3793fc85c"
TRAIN_FLAG = "tstid"
TEST_FLAG = "trnid"
VALID_FLAG = "valid"


def default_mapper(is_train: bool, sample):
    """Paddle's mapper: JPEG bytes -> float32[3*224*224] (needs opencv-python), label kept."""
    img, label = sample
    img = image.load_image_bytes(img)
    img = image.simple_transform(img, 256, 224, is_train, mean=[103.94, 116.78, 123.68])
    return img.flatten().astype("float32"), label


train_mapper = functools.partial(default_mapper, True)
test_mapper = functools.partial(default_mapper, False)


def _loadmat(path: str, key: str):
    try:
        from scipy import io as scio
    except ImportError:
        raise ImportError("dataset flowers reads its .mat label files with scipy: "
                          "pip install scipy (or placegroup[examples])") from None
    mat = scio.loadmat(path)
    if key not in mat:
        raise KeyError(f"flowers: {path} has no {key!r} array (it has {sorted(mat)})")
    return mat[key][0]


def reader_creator(data_file, label_file, setid_file, dataset_name, mapper, buffered_size=1024,
                   use_xmap=True, cycle=False):
    """Raw ``(jpeg bytes, label)`` of ``dataset_name``'s images through ``mapper`` (Paddle's
    signature; ``use_xmap`` maps in 4 threads, keeping up to ``buffered_size`` samples)."""

    def reader():
        labels = _loadmat(label_file, "labels")
        wanted = {f"jpg/image_{int(i):05d}.jpg": int(labels[int(i) - 1])
                  for i in _loadmat(setid_file, dataset_name)}
        while True:
            with tarfile.open(data_file) as tf:
                for m in tf:
                    if m.name in wanted:
                        yield tf.extractfile(m).read(), wanted[m.name] - 1
            if not cycle:
                break

    if use_xmap:
        return xmap_readers(mapper, reader, min(4, os.cpu_count() or 1), buffered_size)
    return map_readers(mapper, reader)


def _make(flag, mapper, buffered_size, use_xmap, cycle):
    find = functools.partial(common.find, "flowers")
    return reader_creator(find(DATA_URL, DATA_MD5, what="image archive"),
                          find(LABEL_URL, LABEL_MD5, what="label file"),
                          find(SETID_URL, SETID_MD5, what="split file"),
                          flag, mapper, buffered_size, use_xmap, cycle)


def train(mapper=train_mapper, buffered_size=1024, use_xmap=True, cycle=False):
    """The ``tstid`` images (Paddle's training set); see the module doc.

    Raises:
        DatasetFileNotFound: a file is missing.
    """
    return _make(TRAIN_FLAG, mapper, buffered_size, use_xmap, cycle)


def test(mapper=test_mapper, buffered_size=1024, use_xmap=True, cycle=False):
    """The ``trnid`` images (Paddle's test set); see ``train``."""
    return _make(TEST_FLAG, mapper, buffered_size, use_xmap, cycle)


def valid(mapper=test_mapper, buffered_size=1024, use_xmap=True):
    """The ``valid`` images; see ``train``."""
    return _make(VALID_FLAG, mapper, buffered_size, use_xmap, False)


def fetch():
    """Check that the three files are present (placegroup never downloads)."""
    _make(TRAIN_FLAG, train_mapper, 1, False, False)
