"""``paddle.static.nn``: the layers of Paddle 2.x's static API that placegroup has, re-exported
from where their code lives (``sparse_embedding``: placegroup/contrib/layers/nn.py)."""
from placegroup.contrib.layers.nn import sparse_embedding

__all__ = ["sparse_embedding"]
