"""``paddle.distributed``'s names for tables keyed by raw ids: the admission entries of
``sparse_embedding`` (CountFilterEntry, ProbabilityEntry, ShowClickEntry) and its table config
(the code is in placegroup/util/dynamic_table.py).

Example::

    import placegroup
    emb = placegroup.contrib.layers.sparse_embedding(
        ids, size=[1024, 16], entry=placegroup.distributed.CountFilterEntry(5),
        table_config=placegroup.distributed.SparseTableConfig(ttl=1000))
"""
from placegroup.util.dynamic_table import CountFilterEntry, ProbabilityEntry, ShowClickEntry, SparseTableConfig

__all__ = ["CountFilterEntry", "ProbabilityEntry", "ShowClickEntry", "SparseTableConfig"]
