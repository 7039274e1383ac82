"""``paddle.reader`` and Fluid 1.8's ``fluid.reader`` in one module: the reader decorators
(placegroup/reader_decorators.py) and the loaders Fluid's ``fluid.reader`` binds.

NOTE(fluid-reader-home): Fluid 1.8 has two reader modules, ``paddle.reader`` (the decorators) and
``paddle.fluid.reader`` (the loaders), and placegroup has this one for both. Nothing here is
defined here: the decorators live in reader_decorators.py, which placegroup.io imports too, and
the loaders in placegroup/io/ and placegroup/dataloader/, so no package imports this module back.

Example::

    import placegroup as paddle
    train_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.uci_housing.train(), 500), 20)
"""
from placegroup.dataloader.dataloader_iter import default_collate_fn
from placegroup.io.data_loader import GeneratorLoader
from placegroup.io.loader_base import DataLoaderBase, DatasetLoader, keep_data_loader_order
from placegroup.reader_decorators import *  # noqa: F401,F403
from placegroup.reader_decorators import __all__ as _decorators

__all__ = [*_decorators, "DataLoaderBase", "DatasetLoader", "GeneratorLoader", "default_collate_fn",
           "keep_data_loader_order"]
