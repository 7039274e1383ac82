"""KeyIndex (placegroup/util/key_index.py) against a Python dict model, over random sequences of
insert / lookup / remove batches with duplicates, ids at both ends of 0..2**63-1, and growth
through several rebuilds."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from placegroup.util.key_index import KeyIndex, mix64

TOP = 2 ** 63 - 1
# a small pool so that batches repeat ids, hit, miss and remove what is there
POOL = st.one_of(st.integers(0, 40), st.integers(TOP - 40, TOP), st.integers(0, TOP))
BATCH = st.lists(POOL, max_size=60)
OPS = st.lists(st.tuples(st.sampled_from(["insert", "insert", "lookup", "remove"]), BATCH), max_size=25)


class Model:
    """The rules in a dict: new ids take the lowest free row, then the next unused one."""

    def __init__(self):
        self.rows, self.free, self.next = {}, [], 0

    def insert(self, keys):
        for k in keys:
            if k not in self.rows:
                if self.free:
                    self.free.sort()
                    self.rows[k] = self.free.pop(0)
                else:
                    self.rows[k] = self.next
                    self.next += 1
        return [self.rows[k] for k in keys]

    def lookup(self, keys):
        return [self.rows.get(k, -1) for k in keys]

    def remove(self, keys):
        out = self.lookup(keys)
        for k in set(keys) & set(self.rows):
            self.free.append(self.rows.pop(k))
        return out


def _run(ops):
    ix, m, out = KeyIndex(), Model(), []
    for op, keys in ops:
        got = getattr(ix, op)(np.array(keys, np.int64)).tolist()
        assert got == getattr(m, op)(keys), (op, keys)
        out.append(got)
    assert len(ix) == len(m.rows)
    k, r = ix.keys_and_rows()
    assert sorted(zip(r.tolist(), k.tolist())) == sorted((v, k) for k, v in m.rows.items())
    assert list(r) == sorted(r)
    return ix, out


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_matches_a_dict(ops):
    _run(ops)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2 ** 32), st.integers(1, 4))
def test_growth_through_rebuilds_and_tombstones(seed, rounds):
    rng = np.random.default_rng(seed)
    ops = []
    for _ in range(rounds):  # 16 slots at first: 600 ids rebuild it several times
        keys = rng.integers(0, 2 ** 63, 600, dtype=np.int64).tolist() + list(range(30))
        ops += [("insert", keys), ("remove", keys[::3]), ("lookup", keys)]
    ix, _ = _run(ops)
    assert ix.slots >= 630 / KeyIndex.MAX_LOAD and (len(ix) + ix._tomb) <= KeyIndex.MAX_LOAD * ix.slots


def test_inserts_alone_keep_the_load_between_a_half_and_three_quarters():
    """NOTE(slot-growth): 1.5x growth, any slot count; what bounds a slot's share of a live id
    at 8 bytes."""
    ix, rng, sizes = KeyIndex(), np.random.default_rng(4), set()
    for _ in range(300):
        ix.insert(rng.integers(0, 2 ** 63, int(rng.integers(1, 200)), dtype=np.int64))
        if ix.slots > KeyIndex.MIN_SLOTS:
            assert 0.5 <= len(ix) / ix.slots <= KeyIndex.MAX_LOAD
        sizes.add(ix.slots)
    assert any(n & (n - 1) for n in sizes)  # not only powers of two


def test_same_calls_give_same_rows():
    rng = np.random.default_rng(1)
    a, b = KeyIndex(), KeyIndex(4096)  # different start sizes: different layouts, same rows
    for _ in range(20):
        keys = rng.integers(0, 5000, 700)
        assert np.array_equal(a.insert(keys), b.insert(keys))
        gone = rng.integers(0, 5000, 200)
        assert np.array_equal(a.remove(gone), b.remove(gone))
    assert all(np.array_equal(x, y) for x, y in zip(a.keys_and_rows(), b.keys_and_rows()))


def test_checkpoint_round_trip():
    ix = KeyIndex()
    ix.insert(np.arange(1000) * 7919 + TOP - 10 ** 7)
    ix.remove(np.arange(0, 1000, 5) * 7919 + TOP - 10 ** 7)
    keys, rows = ix.keys_and_rows()
    back = KeyIndex.from_keys_and_rows(keys, rows)
    assert len(back) == len(ix) == 800
    assert np.array_equal(back.lookup(keys), rows)
    new = np.array([1, 2, 3])  # the freed rows are reused the same way, lowest first
    assert np.array_equal(back.insert(new), ix.insert(new)) and back.insert(new).tolist() == [0, 5, 10]


def test_mix64_is_splitmix64():
    assert int(mix64(np.array([0x9E3779B97F4A7C15], np.uint64))[0]) == 0xE220A8397B1DCDAF
    assert np.array_equal(mix64(np.array([5], np.int64)), mix64(np.array([5], np.uint64)))


def test_errors():
    ix = KeyIndex()
    with pytest.raises(ValueError, match=r"id -3 at position 1"):
        ix.insert([4, -3, -5])
    assert len(ix) == 0
    with pytest.raises(ValueError, match="18446744073709551615"):
        ix.lookup(np.array([2 ** 64 - 1], np.uint64))
    with pytest.raises(TypeError, match="float64"):
        ix.insert(np.array([1.0]))
    with pytest.raises(TypeError, match="bool"):
        ix.remove(np.array([True]))
    with pytest.raises(ValueError, match="distinct"):
        KeyIndex.from_keys_and_rows([1, 1], [0, 1])
    with pytest.raises(ValueError, match="2 ids but 1 rows"):
        KeyIndex.from_keys_and_rows([1, 2], [0])
    assert ix.insert([]).shape == (0,) and ix.lookup(np.zeros((2, 3), np.int64)).shape == (2, 3)
