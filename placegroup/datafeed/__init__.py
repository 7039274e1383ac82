"""Data into programs: the reader decorators of ``paddle.reader`` (reader_decorators.py), the
reader registry the executor reads a program's readers from (reader_registry.py), ``DataFeeder``
(data_feeder.py) and the layers' dtype checks (dtype_checks.py), ``DataFeedDesc``
(data_feed_desc.py), the Dataset pipeline (dataset_factory.py, multislot.py), ``DataLoader`` and
``PyReader`` (data_loader.py, loader_base.py), and LoD tensors made in Python (lod_tensor.py).

Above the IR and comm, below the model API: the layers of ``fluid.layers.io`` build on these, and
the executor reads the registry. Fluid's names for them are the façade's modules
(``fluid.data_feeder``, ``fluid.reader``, ...)."""
