"""Readers carrying LoD (#15, slice 2; NOTE(reader-lod) in placegroup/datafeed/data_loader.py):
py_reader with ``lod_levels``, DataLoader.from_generator / PyReader over lod_level vars, fed
lists of lists or LoDTensors, give the LoDTensors a direct feed gives, and the same losses."""
import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.values import LoDTensor

V, D = 20, 4
SAMPLES = [([1, 2, 3], 0), ([4, 5], 1), ([6], 0), ([7, 8, 9, 10], 1), ([3, 3], 1), ([2], 0)]


def _net(words, label):
    emb = fluid.layers.embedding(words, size=[V, D], param_attr=fluid.ParamAttr(
        name="emb", initializer=fluid.initializer.NumpyArrayInitializer(
            np.random.default_rng(0).normal(0, 0.5, (V, D)).astype("float32"))))
    probs = fluid.layers.fc(fluid.layers.sequence_pool(emb, "average"), 2, act="softmax",
                            param_attr=fluid.ParamAttr(name="w", initializer=fluid.initializer.Constant(0.1)))
    loss = fluid.layers.mean(fluid.layers.cross_entropy(probs, label))
    fluid.optimizer.SGD(0.5).minimize(loss)
    return loss


def _batches():
    return [SAMPLES[i:i + 2] for i in range(0, len(SAMPLES), 2)]


def _direct_losses() -> list:
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1], dtype="int64")
        loss = _net(words, label)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    feeder = fluid.DataFeeder([words, label], fluid.CPUPlace(), program=main)
    return [float(exe.run(main, feed=feeder.feed(b), fetch_list=[loss], scope=scope)[0][0]) for b in _batches()]


def _py_reader_losses(batch_of) -> list:
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 1), (-1, 1)], dtypes=["int64", "int64"],
                                        lod_levels=[1, 0], name="lodr")
        words, label = fluid.layers.read_file(reader)
        loss = _net(words, label)
    reader.decorate_tensor_provider(lambda: (batch_of(b) for b in _batches()))
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    reader.start()
    losses = []
    try:
        while True:
            losses.append(float(exe.run(main, fetch_list=[loss], scope=scope)[0][0]))
    except fluid.core.EOFException:
        reader.reset()
    return losses


def _lists(b):
    return [[s for s, _ in b], [[c] for _, c in b]]


def _tensors(b):
    ids = np.array([w for s, _ in b for w in s], "int64").reshape(-1, 1)
    return [fluid.create_lod_tensor(ids, [[len(s) for s, _ in b]], fluid.CPUPlace()),
            np.array([[c] for _, c in b], "int64")]


@pytest.mark.parametrize("batch_of", [_lists, _tensors], ids=["lists_of_lists", "lod_tensors"])
def test_py_reader_with_lod_levels_trains_as_a_direct_feed(batch_of):
    np.testing.assert_allclose(_py_reader_losses(batch_of), _direct_losses(), rtol=1e-6)


@pytest.mark.parametrize("iterable", [True, False])
def test_data_loader_sample_lists_give_lod_tensors(iterable):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        words = fluid.layers.data("words", [1], dtype="int64", lod_level=1)
        label = fluid.layers.data("label", [1], dtype="int64")
        loss = _net(words, label)
        loader = fluid.io.DataLoader.from_generator(feed_list=[words, label], capacity=2, iterable=iterable)
    loader.set_sample_list_generator(lambda: iter(_batches()), places=fluid.CPUPlace())
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    if iterable:
        for data in loader():
            assert isinstance(data[0]["words"], LoDTensor)
            assert data[0]["words"].lod_level == 1
            losses.append(float(exe.run(main, feed=data[0], fetch_list=[loss], scope=scope)[0][0]))
    else:
        loader.start()
        try:
            while True:
                losses.append(float(exe.run(main, fetch_list=[loss], scope=scope)[0][0]))
        except fluid.core.EOFException:
            loader.reset()
    np.testing.assert_allclose(losses, _direct_losses(), rtol=1e-6)


def test_two_levels_from_nested_lists():
    from placegroup.datafeed.data_loader import Slot
    slot = Slot("para", (-1, 1), "int64", 2)
    t = slot.convert("reader 'r'", 0, [[[1, 2], [3]], [[4, 5, 6]]])
    assert t.recursive_sequence_lengths() == [[2, 1], [2, 1, 3]]
    assert t.data.shape == (6, 1) and t.data.dtype == np.int64


@pytest.mark.parametrize("item, match", [
    (np.array([[1], [2]]), r"var 'words' is declared lod_level=1 \(a batch of sequences\), but it got ndarray"),
    (LoDTensor.from_lengths(np.zeros((3, 1), np.int64), [[2, 1], [1, 1, 1]]), "the LoDTensor has 2 level"),
    ([[1.5, 2.5]], "does not convert without loss"),
    ([[[1, 2]], [[3]]], r"the rows of var 'words' \(lod_level=1\) are not one array"),
    ([[[1, 2]], [[3, 4]]], r"gets shape \[2, 2\], but it is declared \[-1, 1\] by fluid.data"),
])
def test_bad_sequence_batches_name_the_var_and_what_is_wrong(item, match):
    """The slot of a fluid.data var filled by a reader started with start(), whose read op checks
    the shape (NOTE(reader-shape))."""
    from placegroup.datafeed.data_loader import Slot
    with pytest.raises(ProgramError, match=match):
        Slot("words", (-1, 1), "int64", 1, checked=True).convert("reader 'r'", 3, item)


def test_a_too_shallow_nested_list_is_named():
    from placegroup.datafeed.data_loader import Slot
    with pytest.raises(ProgramError, match=r"var 'para' is declared lod_level=2, but the data is only 1 list"):
        Slot("para", (-1, 1), "int64", 2).convert("reader 'r'", 0, [[1, 2]])
