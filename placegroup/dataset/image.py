"""Image helpers of Paddle 1.8's ``paddle.dataset.image``: decode, resize, crop, flip, CHW.

The crops, the flip, ``to_chw`` and the mean subtraction are numpy and always work. Decoding
(``load_image``, ``load_image_bytes``) and ``resize_short`` (bicubic) are OpenCV's in Paddle;
here too, so the pixels equal Paddle's: they need the ``opencv-python`` package and raise an
ImportError saying so when it is missing. ``batch_images_from_tar`` is not provided: Paddle's
writes pickled batch files, which placegroup never writes nor reads (NOTE(no-pickle) in
common.py).

Images are HWC (as decoded, BGR for OpenCV) until ``to_chw``; random crops and flips draw from
numpy's global generator, as in Paddle.

Example::

    im = load_image("cat.jpg")                            # needs opencv-python
    x = simple_transform(im, 256, 224, is_train=False)    # float32 [3, 224, 224]
"""
from __future__ import annotations

import numpy as np

__all__ = ["batch_images_from_tar", "center_crop", "left_right_flip", "load_and_transform",
           "load_image", "load_image_bytes", "random_crop", "resize_short", "simple_transform",
           "to_chw"]


def _cv2(what: str):
    try:
        import cv2
    except ImportError:
        raise ImportError(f"paddle.dataset.image.{what} decodes or resizes with OpenCV, as "
                          f"Paddle does: pip install opencv-python") from None
    return cv2


def load_image_bytes(bytes, is_color: bool = True) -> np.ndarray:
    """Decode an encoded image (JPEG, PNG, ...) to HWC BGR uint8 (HW when not ``is_color``)."""
    cv2 = _cv2("load_image_bytes")
    return cv2.imdecode(np.frombuffer(bytes, dtype=np.uint8), 1 if is_color else 0)


def load_image(file: str, is_color: bool = True) -> np.ndarray:
    """Read and decode an image file; see ``load_image_bytes``."""
    cv2 = _cv2("load_image")
    im = cv2.imread(file, 1 if is_color else 0)
    if im is None:
        raise ValueError(f"load_image: OpenCV could not read an image from {file!r}")
    return im


def resize_short(im: np.ndarray, size: int) -> np.ndarray:
    """Resize (bicubic) so that the shorter edge is ``size``, keeping the aspect ratio."""
    cv2 = _cv2("resize_short")
    h, w = im.shape[:2]
    h_new, w_new = size, size
    if h > w:
        h_new = size * h // w
    else:
        w_new = size * w // h
    return cv2.resize(im, (w_new, h_new), interpolation=cv2.INTER_CUBIC)


def to_chw(im: np.ndarray, order=(2, 0, 1)) -> np.ndarray:
    """Transpose HWC to CHW (or by ``order``)."""
    if im.ndim != len(order):
        raise ValueError(f"to_chw: a {im.ndim}-d image cannot take order {tuple(order)}")
    return im.transpose(order)


def _crop(im, h0: int, w0: int, size: int, is_color: bool) -> np.ndarray:
    return im[h0:h0 + size, w0:w0 + size, :] if is_color else im[h0:h0 + size, w0:w0 + size]


def center_crop(im: np.ndarray, size: int, is_color: bool = True) -> np.ndarray:
    """The ``size`` x ``size`` centre of an HWC (or HW) image."""
    h, w = im.shape[:2]
    return _crop(im, (h - size) // 2, (w - size) // 2, size, is_color)


def random_crop(im: np.ndarray, size: int, is_color: bool = True) -> np.ndarray:
    """A ``size`` x ``size`` window at a place drawn from numpy's global generator."""
    h, w = im.shape[:2]
    h0 = np.random.randint(0, h - size + 1)
    w0 = np.random.randint(0, w - size + 1)
    return _crop(im, h0, w0, size, is_color)


def left_right_flip(im: np.ndarray, is_color: bool = True) -> np.ndarray:
    """Mirror an HWC (or HW) image left to right."""
    return im[:, ::-1, :] if im.ndim == 3 and is_color else im[:, ::-1]


def simple_transform(im, resize_size: int, crop_size: int, is_train: bool, is_color: bool = True,
                     mean=None) -> np.ndarray:
    """Paddle's augmentation: resize the short edge, crop (random and a coin-flip mirror when
    training, else centred), CHW, float32, minus ``mean`` (per channel or per element)."""
    im = resize_short(im, resize_size)
    if is_train:
        im = random_crop(im, crop_size, is_color=is_color)
        if np.random.randint(2) == 0:
            im = left_right_flip(im, is_color)
    else:
        im = center_crop(im, crop_size, is_color=is_color)
    if im.ndim == 3:
        im = to_chw(im)
    im = im.astype("float32")
    if mean is not None:
        mean = np.array(mean, dtype=np.float32)
        if mean.ndim == 1 and is_color:
            mean = mean[:, np.newaxis, np.newaxis]
        elif mean.ndim != 1 and mean.shape != im.shape:
            raise ValueError(f"simple_transform: an element-wise mean of shape {mean.shape} does "
                             f"not fit the image's {im.shape}")
        im -= mean
    return im


def load_and_transform(filename: str, resize_size: int, crop_size: int, is_train: bool,
                       is_color: bool = True, mean=None) -> np.ndarray:
    """``simple_transform(load_image(filename, is_color), ...)``."""
    return simple_transform(load_image(filename, is_color), resize_size, crop_size, is_train,
                            is_color, mean)


def batch_images_from_tar(data_file, dataset_name, img2label, num_per_batch=1024):
    """Not provided: Paddle's writes pickled batch files (NOTE(no-pickle) in common.py).

    Raises:
        NotImplementedError: always; read the images from the archive member by member instead
            (as ``placegroup.dataset.flowers`` does).
    """
    raise NotImplementedError("paddle.dataset.image.batch_images_from_tar writes pickled batch "
                              "files, which placegroup never writes nor reads; read the archive's "
                              "members directly (tarfile.extractfile), as dataset.flowers does")
