"""Reader decorators (Paddle 1.x semantics) and the dataset readers built on them."""
import os
import random

import numpy as np
import pytest

import placegroup
from placegroup import reader
from placegroup.dataset import diabetes, uci_housing


def from_list(items):
    return lambda: iter(list(items))


# -- shuffle ---------------------------------------------------------------------------------

def test_shuffle_keeps_every_sample_and_shuffles_within_windows():
    out = list(reader.shuffle(from_list(range(7)), buf_size=3, seed=0)())
    assert sorted(out) == list(range(7))
    # Paddle's shuffle is windowed: each run of buf_size samples is shuffled on its own.
    assert sorted(out[:3]) == [0, 1, 2] and sorted(out[3:6]) == [3, 4, 5] and out[6:] == [6]


def test_shuffle_with_seed_is_reproducible_and_differs_between_passes():
    a = reader.shuffle(from_list(range(50)), buf_size=100, seed=7)
    b = reader.shuffle(from_list(range(50)), buf_size=100, seed=7)
    pass1, pass2 = list(a()), list(a())
    assert pass1 == list(b()) and pass2 == list(b())
    assert pass1 != pass2 and pass1 != list(range(50))


def test_shuffle_without_seed_uses_the_global_random_module():
    r = reader.shuffle(from_list(range(30)), buf_size=30)
    random.seed(3)
    first = list(r())
    random.seed(3)
    assert list(r()) == first


@pytest.mark.parametrize("bad", [0, -1])
def test_shuffle_rejects_a_non_positive_buffer(bad):
    with pytest.raises(ValueError, match="buf_size must be a positive int"):
        reader.shuffle(from_list(range(3)), buf_size=bad)


# -- batch -----------------------------------------------------------------------------------

@pytest.mark.parametrize("n, size, drop_last, want", [
    (5, 2, False, [[0, 1], [2, 3], [4]]),
    (5, 2, True, [[0, 1], [2, 3]]),
    (4, 2, True, [[0, 1], [2, 3]]),
    (0, 2, False, []),
    (3, 10, False, [[0, 1, 2]]),
])
def test_batch(n, size, drop_last, want):
    r = reader.batch(from_list(range(n)), size, drop_last=drop_last)
    assert list(r()) == want
    assert list(r()) == want  # a reader can be called once per pass


@pytest.mark.parametrize("bad", [0, -3])
def test_batch_rejects_a_non_positive_size(bad):
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        reader.batch(from_list(range(3)), bad)


def test_placegroup_batch_is_paddle_batch():
    # The PlaceGroup design's example calls paddle.batch(paddle.reader.shuffle(...)) with `import placegroup as paddle`.
    assert placegroup.batch is reader.batch
    assert placegroup.reader is reader


# -- the other decorators --------------------------------------------------------------------

def test_buffered_keeps_order_and_reraises_the_readers_error():
    assert list(reader.buffered(from_list(range(100)), size=4)()) == list(range(100))

    def failing():
        yield 1
        raise OSError("disk gone")

    r = reader.buffered(failing, size=2)()
    assert next(r) == 1
    with pytest.raises(OSError, match="disk gone"):
        next(r)


def test_chain():
    assert list(reader.chain(from_list([1, 2]), from_list([]), from_list([3]))()) == [1, 2, 3]


def test_compose_flattens_tuples():
    r = reader.compose(from_list([(1, 2), (3, 4)]), from_list(["a", "b"]))
    assert list(r()) == [(1, 2, "a"), (3, 4, "b")]


def test_compose_raises_on_misaligned_readers_unless_told_not_to():
    r = reader.compose(from_list([1, 2, 3]), from_list([1, 2]))
    with pytest.raises(reader.ComposeNotAligned, match=r"readers \[1\] ended at sample 2"):
        list(r())
    loose = reader.compose(from_list([1, 2, 3]), from_list([1, 2]), check_alignment=False)
    assert list(loose()) == [(1, 1), (2, 2)]


def test_compose_accepts_none_samples():
    assert list(reader.compose(from_list([None]), from_list([1]))()) == [(None, 1)]


def test_firstn_and_map_readers():
    assert list(reader.firstn(from_list(range(10)), 3)()) == [0, 1, 2]
    assert list(reader.firstn(from_list(range(2)), 3)()) == [0, 1]
    add = reader.map_readers(lambda a, b: a + b, from_list([1, 2]), from_list([10, 20]))
    assert list(add()) == [11, 22]


def test_cache_reads_the_source_once():
    calls = []

    def source():
        calls.append(1)
        return iter([1, 2])

    r = reader.cache(source)
    assert list(r()) == list(r()) == [1, 2]
    assert len(calls) == 1


# -- uci_housing -----------------------------------------------------------------------------

# SYNTHETIC test fixture: 10 made-up rows of 13 features and a price, in housing.data's layout
# (whitespace-separated, one house per line). Not UCI data; used only to test the parser and
# Paddle's normalization and split.
_rng = np.random.default_rng(2024)
SYNTHETIC_ROWS = np.round(_rng.uniform(0, 100, size=(10, 14)), 4)


@pytest.fixture
def housing_home(tmp_path, monkeypatch):
    """$PLACEGROUP_DATA_HOME with the synthetic housing.data, and a HOME without Paddle's cache."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PLACEGROUP_DATA_HOME", str(tmp_path / "data"))
    path = tmp_path / "data" / "uci_housing" / "housing.data"
    path.parent.mkdir(parents=True)
    path.write_text("\n".join(" ".join(f"{v:9.4f}" for v in row) for row in SYNTHETIC_ROWS) + "\n")
    return path


def paddle_reference(rows):
    """Paddle 1.x uci_housing.load_data, restated: stats over all rows, first 80% train."""
    data = rows.astype(np.float64).copy()
    mx, mn, avg = data.max(0), data.min(0), data.sum(0) / data.shape[0]
    for i in range(13):
        data[:, i] = (data[:, i] - avg[i]) / (mx[i] - mn[i])
    k = int(data.shape[0] * 0.8)
    return data[:k], data[k:]


def test_uci_housing_normalizes_and_splits_like_paddle(housing_home):
    want_train, want_test = paddle_reference(SYNTHETIC_ROWS)
    for make, want in ((uci_housing.train, want_train), (uci_housing.test, want_test)):
        samples = list(make()())
        assert len(samples) == len(want)
        for (x, y), row in zip(samples, want):
            assert x.dtype == np.float32 and x.shape == (13,)
            assert y.dtype == np.float32 and y.shape == (1,)
            np.testing.assert_allclose(x, row[:-1], rtol=1e-6, atol=1e-7)
            np.testing.assert_allclose(y, row[-1:], rtol=1e-6)
    assert uci_housing.data_file() == str(housing_home)
    assert len(uci_housing.feature_names) == 14 and uci_housing.feature_names[-1] == "convert"


def test_uci_housing_rereads_a_replaced_file_and_samples_are_copies(housing_home):
    x0, _ = next(uci_housing.train()())
    x0[:] = 1e9  # a caller editing its sample must not change the next pass
    again, _ = next(uci_housing.train()())
    assert again[0] != 1e9
    housing_home.write_text("\n".join(" ".join(str(v) for v in row) for row in SYNTHETIC_ROWS[:5]))
    os.utime(housing_home, ns=(1, 1))  # a different mtime, whatever the clock's resolution
    assert len(list(uci_housing.train()())) == 4


def test_uci_housing_missing_file_says_where_to_put_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("PLACEGROUP_DATA_HOME", str(tmp_path / "data"))
    with pytest.raises(FileNotFoundError) as e:
        uci_housing.train()
    msg = str(e.value)
    assert str(tmp_path / "data" / "uci_housing" / "housing.data") in msg
    assert os.path.join(".cache", "paddle", "dataset", "uci_housing", "housing.data") in msg
    assert "archive.ics.uci.edu" in msg and "never downloads" in msg


def test_uci_housing_rejects_a_ragged_file(housing_home):
    housing_home.write_text("1 2 3\n")
    with pytest.raises(ValueError, match="3 numbers, which is not a whole number of rows of 14"):
        list(uci_housing.train()())


# -- diabetes --------------------------------------------------------------------------------

def test_diabetes_split_shapes_and_standardization():
    pytest.importorskip("sklearn")
    train = list(diabetes.train()())
    test = list(diabetes.test()())
    assert len(train) == 353 and len(test) == 89
    x0, y0 = train[0]
    assert x0.shape == (10,) and y0.shape == (1,) and x0.dtype == y0.dtype == np.float32
    x = np.stack([s[0] for s in train + test]).astype(np.float64)
    y = np.concatenate([s[1] for s in train + test]).astype(np.float64)
    np.testing.assert_allclose(x.mean(0), 0, atol=1e-6)
    np.testing.assert_allclose(x.std(0), 1, rtol=1e-5)
    assert abs(y.mean()) < 1e-6 and abs(y.std() - 1) < 1e-5
    mean, std = diabetes.target_stats()
    assert train[0][1][0] * std + mean == pytest.approx(151.0, rel=1e-5)  # sklearn's first target
    assert [s[1][0] for s in diabetes.train()()] == [s[1][0] for s in train]  # deterministic


def test_dataset_package_exports_both():
    import placegroup.dataset as ds

    assert ds.uci_housing is uci_housing and ds.diabetes is diabetes
