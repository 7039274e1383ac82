"""Datasets as readers (Paddle 1.x's ``paddle.dataset``), read from local files only.

Each module gives Paddle 1.8's reader creators (``train()``, ``test()``, ...) with Paddle's
signatures and samples (types, dtypes, shapes), read from Paddle's own cache layout,
``<root>/<module>/<file>``, under ``$PLACEGROUP_DATA_HOME`` and then ``~/.cache/paddle/dataset``
(common.py). Nothing is ever downloaded: a missing file raises ``DatasetFileNotFound`` naming
the paths tried and the URL and md5 Paddle would have fetched. Nothing is ever unpickled
(NOTE(no-pickle) in common.py): cifar reads a ``.npz`` you convert its pickled archive to.

* ``mnist``, ``cifar``, ``flowers``, ``voc2012``: images (flowers' default mapper needs
  opencv-python and voc2012 needs Pillow, as in Paddle; ``image`` has Paddle's image helpers);
* ``imdb``, ``imikolov``, ``sentiment``, ``wmt14``, ``wmt16``, ``conll05``: text;
* ``movielens``, ``mq2007``, ``uci_housing``: ratings, ranking, regression;
* ``diabetes``: scikit-learn's bundled diabetes set with ``uci_housing``'s interface (not in
  Paddle; it needs no file).

It also gives Fluid's ``fluid.dataset`` names, ``DatasetFactory``, ``QueueDataset``,
``InMemoryDataset``, ``FileInstantDataset`` and their base ``DatasetBase``
(placegroup/datafeed/dataset_factory.py, docs/datasets.md): ``paddle.fluid.dataset`` and
``paddle.dataset`` are both this package. (Fluid's ``BoxPSDataset`` feeds Baidu's BoxPS,
which placegroup does not have.)

Example::

    import placegroup as paddle
    reader = paddle.batch(paddle.dataset.mnist.train(), batch_size=64)
"""
from placegroup.dataset import (cifar, common, conll05, diabetes, flowers, image, imdb, imikolov,
                                mnist, movielens, mq2007, sentiment, uci_housing, voc2012, wmt14,
                                wmt16)
from placegroup.dataset.common import DatasetFileNotFound
from placegroup.datafeed.dataset_factory import (DatasetBase, DatasetFactory, FileInstantDataset, InMemoryDataset,
                                                 QueueDataset)

__all__ = ["cifar", "common", "conll05", "diabetes", "flowers", "image", "imdb", "imikolov",
           "mnist", "movielens", "mq2007", "sentiment", "uci_housing", "voc2012", "wmt14",
           "wmt16", "DatasetFileNotFound", "DatasetBase", "DatasetFactory", "FileInstantDataset", "InMemoryDataset",
           "QueueDataset"]
