"""``fluid.transpiler.details.ufind``: a union-find (disjoint-set) structure."""
from __future__ import annotations

from typing import Hashable, Iterable

__all__ = ["UnionFind"]


class UnionFind:
    """Disjoint sets over the given elements, with path halving in ``find``.

    Args:
        elementes: the elements (Fluid's spelling), each in a set of its own at first.

    Example::

        uf = UnionFind(["a", "b", "c"])
        uf.union("a", "b")
        uf.is_connected("a", "b"), uf.is_connected("a", "c")    # (True, False)

    An element not given has no set: ``find`` gives -1 for it, so two such elements count
    as connected (both -1), as in Fluid.

    Thread-safety: none; ``find`` compresses paths, so even reads write.
    """

    def __init__(self, elementes: Iterable[Hashable] | None = None) -> None:
        self._parents: list[int] = []   # index -> parent index
        self._index: dict = {}          # element -> index
        self._curr_idx = 0
        for ele in elementes or []:
            self._parents.append(self._curr_idx)
            self._index[ele] = self._curr_idx
            self._curr_idx += 1

    def find(self, x: Hashable) -> int:
        """The index of the root of ``x``'s set, or -1 for an element not given."""
        if x not in self._index:
            return -1
        idx = self._index[x]
        while idx != self._parents[idx]:
            self._parents[idx] = self._parents[self._parents[idx]]
            idx = self._parents[idx]
        return idx

    def union(self, x: Hashable, y: Hashable) -> None:
        """Join the sets of ``x`` and ``y`` (nothing for an element not given)."""
        x_root, y_root = self.find(x), self.find(y)
        if x_root == y_root or -1 in (x_root, y_root):
            return
        self._parents[x_root] = y_root

    def is_connected(self, x: Hashable, y: Hashable) -> bool:
        """Whether ``x`` and ``y`` are in one set."""
        return self.find(x) == self.find(y)
