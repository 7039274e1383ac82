"""PASCAL VOC2012 segmentation, as Paddle 1.8's ``paddle.dataset.voc2012``.

File: ``voc2012/VOCtrainval_11-May-2012.tar``, read member by member: the split lists
``VOCdevkit/VOC2012/ImageSets/Segmentation/{trainval,train,val}.txt``, the photos
``JPEGImages/<id>.jpg`` and the class maps ``SegmentationClass/<id>.png``.

Each sample is ``(image uint8[H, W, 3], label uint8[H, W])`` as Pillow decodes them (the label
PNG is palette-indexed, so its values are class ids, 255 on borders). Decoding needs the
``Pillow`` package, as in Paddle; without it, making a reader raises an ImportError saying so.
Paddle's names are kept: ``train()`` is the ``trainval`` list (2913 images), ``test()`` the
``train`` list (1464), ``val()`` the ``val`` list (1449).

Example::

    for im, label in paddle.dataset.voc2012.val()():
        ...
"""
from __future__ import annotations

import io
import tarfile

import numpy as np

from placegroup.dataset import common

__all__ = ["train", "test", "val"]

VOC_URL = "http://host.robots.ox.ac.uk/pascal/VOC/voc2012/VOCtrainval_11-May-2012.tar"
VOC_MD5 = "6cd6e144f989b92b3379bac3b3de84fd"
SET_FILE = "VOCdevkit/VOC2012/ImageSets/Segmentation/{}.txt"
DATA_FILE = "VOCdevkit/VOC2012/JPEGImages/{}.jpg"
LABEL_FILE = "VOCdevkit/VOC2012/SegmentationClass/{}.png"
CACHE_DIR = "voc2012"


def _pil():
    try:
        from PIL import Image
    except ImportError:
        raise ImportError("dataset voc2012 decodes its JPEG images and PNG labels with Pillow, "
                          "as Paddle does: pip install Pillow") from None
    return Image


def reader_creator(filename: str, sub_name: str):
    """A reader over the images of split ``sub_name`` of the archive ``filename``."""
    image = _pil()

    def reader():
        with tarfile.open(filename) as tf:
            for line in common.tar_member(tf, SET_FILE.format(sub_name), filename):
                name = line.strip().decode()
                if not name:
                    continue
                data = common.tar_member(tf, DATA_FILE.format(name), filename).read()
                label = common.tar_member(tf, LABEL_FILE.format(name), filename).read()
                yield (np.array(image.open(io.BytesIO(data))),
                       np.array(image.open(io.BytesIO(label))))

    return reader


def _make(sub_name: str):
    path = common.find(CACHE_DIR, VOC_URL, VOC_MD5, what="the VOC2012 trainval archive")
    return reader_creator(path, sub_name)


def train():
    """The ``trainval`` list; see the module doc.

    Raises:
        DatasetFileNotFound: the archive is missing.
        ImportError: Pillow is not installed.
    """
    return _make("trainval")


def test():
    """The ``train`` list (Paddle's naming)."""
    return _make("train")


def val():
    """The ``val`` list."""
    return _make("val")
