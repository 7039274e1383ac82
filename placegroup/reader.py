"""``paddle.reader`` and Fluid 1.8's ``fluid.reader`` in one module: the reader decorators
(placegroup/datafeed/reader_decorators.py) and the loaders Fluid's ``fluid.reader`` binds.

NOTE(fluid-reader-home): Fluid 1.8 has two reader modules, ``paddle.reader`` (the decorators) and
``paddle.fluid.reader`` (the loaders), and placegroup has this one for both. Nothing here is
defined here: the decorators and the loaders live in placegroup/datafeed/ and placegroup/dataloader/,
and nothing inside the package imports this module.

Example::

    import placegroup as paddle
    train_reader = paddle.batch(paddle.reader.shuffle(paddle.dataset.uci_housing.train(), 500), 20)
"""
from placegroup.datafeed.data_loader import GeneratorLoader
from placegroup.datafeed.loader_base import DataLoaderBase, DatasetLoader, keep_data_loader_order
from placegroup.datafeed.reader_decorators import *  # noqa: F401,F403
from placegroup.dataloader.dataloader_iter import default_collate_fn

__all__ = ["ComposeNotAligned", "batch", "buffered", "cache", "chain", "compose", "firstn", "map_readers",
           "multiprocess_reader", "shuffle", "xmap_readers",
           "DataLoaderBase", "DatasetLoader", "GeneratorLoader", "default_collate_fn", "keep_data_loader_order"]
