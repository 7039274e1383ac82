"""Datasets as readers (Paddle 1.x's ``paddle.dataset``), read from local files only.

Each module gives ``train()`` and ``test()``, zero-argument reader creators whose samples are
``(features float32[n], [target] float32[1])`` tuples, ready for ``placegroup.batch`` and a
``DataFeeder``. Nothing is ever downloaded:

* ``uci_housing``: the UCI Boston housing file, looked up in ``$PLACEGROUP_DATA_HOME`` and then
  in Paddle's own cache; when missing, the error says where to put it and where it comes from.
* ``diabetes``: scikit-learn's bundled diabetes set (442 samples, 10 features), which ships
  inside the ``scikit-learn`` package (the ``examples`` and ``test`` extras).

Example::

    import placegroup as paddle
    reader = paddle.batch(paddle.dataset.diabetes.train(), batch_size=20)
"""
from placegroup.dataset import diabetes, uci_housing

__all__ = ["diabetes", "uci_housing"]
