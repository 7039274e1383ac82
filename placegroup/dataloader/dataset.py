"""Fluid 1.8's map-style dataset base class, ``fluid.io.Dataset``."""
from __future__ import annotations

__all__ = ["Dataset"]


class Dataset:
    """A map-style dataset: ``dataset[i]`` is sample ``i`` and ``len(dataset)`` how many there
    are. Subclass it and implement both; ``fluid.io.DataLoader(dataset, ...)`` and
    ``BatchSampler(dataset=...)`` read it.

    Example::

        class RandomDataset(fluid.io.Dataset):
            def __init__(self, num_samples):
                self.num_samples = num_samples

            def __getitem__(self, idx):
                image = np.random.random([784]).astype("float32")
                label = np.random.randint(0, 9, (1,)).astype("int64")
                return image, label

            def __len__(self):
                return self.num_samples

    Thread-safety: a DataLoader with ``num_workers > 0`` reads it from forked processes, each
    with its own copy.
    """

    def __init__(self) -> None:
        pass

    def __getitem__(self, idx):
        raise NotImplementedError(f"'__getitem__' not implement in class {type(self).__name__}")

    def __len__(self) -> int:
        raise NotImplementedError(f"'__len__' not implement in class {type(self).__name__}")
