"""Fluid 1.8's ``fluid.dataloader``: map-style datasets for ``fluid.io.DataLoader``.

* dataset.py: ``Dataset``, the base class of a map-style dataset (``__getitem__``, ``__len__``);
* batch_sampler.py: ``BatchSampler``, the index lists of the batches;
* dataloader_iter.py: the batch sources of ``DataLoader(dataset, ...)`` in this process or in
  worker processes, ``default_collate_fn`` and the workers' ``ParentWatchDog``.

``DataLoader`` itself is placegroup/datafeed/data_loader.py's (``fluid.io.DataLoader``).
"""
from placegroup.dataloader.batch_sampler import BatchSampler
from placegroup.dataloader.dataset import Dataset

__all__ = ["Dataset", "BatchSampler"]
