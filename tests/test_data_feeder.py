"""DataFeeder: minibatches of sample tuples -> feed dicts, and the errors for bad samples."""
import numpy as np
import pytest

import placegroup as fluid
from placegroup.data_feeder import DataFeeder
from placegroup.errors import ProgramError


@pytest.fixture
def prog():
    """A program with x: float32 [-1, 3], label: int64 [-1, 1], img: float32 [-1, 2, 3]."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        fluid.layers.data(name="x", shape=[3])
        fluid.layers.data(name="label", shape=[1], dtype="int64")
        fluid.layers.data(name="img", shape=[2, 3])
        fluid.layers.data(name="words", shape=[1], dtype="int64", lod_level=1)
    return main


def test_feed_stacks_each_var_in_its_dtype_and_shape(prog):
    feeder = DataFeeder(["x", "label"], fluid.CPUPlace(), program=prog)
    out = feeder.feed([(np.arange(3.0), 1), ([1, 2, 3], 0), ((4, 5, 6), np.int64(2))])
    assert set(out) == {"x", "label"}
    assert out["x"].dtype == np.float32 and out["x"].shape == (3, 3)
    np.testing.assert_array_equal(out["x"][1], [1, 2, 3])
    assert out["label"].dtype == np.int64 and out["label"].shape == (3, 1)
    np.testing.assert_array_equal(out["label"][:, 0], [1, 0, 2])
    out = feeder.feed([([1, 2, 3], [1]), ([4, 5, 6], [0])])  # labels as lists of one
    assert out["label"].shape == (2, 1) and out["label"][:, 0].tolist() == [1, 0]


def test_feed_reshapes_flat_samples_to_the_vars_inner_shape(prog):
    """A stack of another rank is reshaped to the declared shape; one of the declared rank is
    taken as it is (NOTE(feeder-shape); tests/test_feed_shapes.py has Fluid 1.8.5's cases)."""
    out = DataFeeder(["img"], None, program=prog).feed([(np.arange(6),), ([0] * 6,)])
    assert out["img"].shape == (2, 2, 3) and out["img"].dtype == np.float32
    np.testing.assert_array_equal(out["img"][0], [[0, 1, 2], [3, 4, 5]])
    out = DataFeeder(["img"], None, program=prog).feed([(np.zeros((1, 3)),), (np.ones((1, 3)),)])
    assert out["img"].shape == (2, 1, 3)  # padded narrower than declared: as Fluid, taken


def test_feed_list_of_variables_and_the_default_main_program():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.layers.data(name="x", shape=[2])
        by_var = DataFeeder(feed_list=[x], place=fluid.CPUPlace())
        by_name = DataFeeder(feed_list=["x"], place=fluid.CPUPlace())  # resolved in main
    for feeder in (by_var, by_name):
        assert feeder.feed([([1, 2],)])["x"].shape == (1, 2)


def test_lod_vars_become_lod_tensors_of_their_samples(prog):
    words = DataFeeder(["words"], None, program=prog).feed([([1, 2, 3],), ([4],), ([5, 6],)])["words"]
    assert words.shape() == [6, 1] and np.array(words).dtype == np.int64
    assert words.recursive_sequence_lengths() == [[3, 1, 2]]
    np.testing.assert_array_equal(np.array(words)[:, 0], [1, 2, 3, 4, 5, 6])


def test_decorate_reader_feeds_each_minibatch(prog):
    feeder = DataFeeder(["x", "label"], None, program=prog)
    batches = lambda: iter([[([0, 0, 0], 1)], [([1, 1, 1], 0), ([2, 2, 2], 1)]])  # noqa: E731
    sizes = [d["x"].shape[0] for d in feeder.decorate_reader(batches)()]
    assert sizes == [1, 2]
    with pytest.raises(NotImplementedError, match="multi_devices"):
        feeder.decorate_reader(batches, multi_devices=True)


# Bad minibatches: (feed_list, minibatch, error regex). Each error names the sample and var.
BAD = [
    (["x", "label"], [([1, 2, 3], 0), ([1, 2, 3],)],
     r"sample 1 has 1 elements, but feed_list has 2 vars \['x', 'label'\]"),
    (["x", "label"], [([1, 2, 3], 0, 7)], r"sample 0 has 3 elements, but feed_list has 2 vars"),
    (["x"], [np.zeros(3)], r"sample 0 has a ndarray, not a tuple"),
    (["x", "label"], [([1, 2, 3], 0), ([1, 2, 3], 1), ([1, 2], 0)],
     r"the samples' elements for var 'x' \(shape \[-1, 3\], float32\) do not stack into one array: "
     r"sample 0's shape is \[3\] and sample 2's \[2\]"),
    (["x", "label"], [([1, 2, 3], 0), ([1, 2, 3], [1])],
     r"elements for var 'label' .* sample 0's shape is \[\] and sample 1's \[1\]"),
    (["img"], [([1, 2, 3],)], r"the samples for var 'img' .* stack into shape \[1, 3\], of rank 2, .* its 3 values "
                              r"do not fill \[-1, 2, 3\]: each sample needs 6 values"),
    (["x"], [(["a", "b", "c"],)], r"the samples' elements for var 'x' .* are not float32 data"),
    (["x"], [], r"the minibatch for \['x'\] is empty"),
    (["words"], [([1, 2],), ([[1, 2], [3, 4]],)], r"steps of the sequences for var 'words' .* do not stack into "
                                                   r"one array: sequence 0's shape is \[\] and sequence 1's \[2\]"),
]


@pytest.mark.parametrize("feed_list, minibatch, match", BAD)
def test_bad_minibatches_name_the_sample_and_the_var(prog, feed_list, minibatch, match):
    feeder = DataFeeder(feed_list, None, program=prog)
    if match is None:
        feeder.feed(minibatch)
        return
    with pytest.raises(ProgramError, match=match):
        feeder.feed(minibatch)


def test_unknown_names_and_bad_entries_are_rejected(prog):
    with pytest.raises(ProgramError, match=r"'nope', which is not a var .* data vars are "
                                           r"\['img', 'label', 'words', 'x'\]"):
        DataFeeder(["x", "nope"], None, program=prog)
    with pytest.raises(TypeError, match="expected Variables or var names"):
        DataFeeder([3], None, program=prog)


def test_feed_runs_fit_a_line_in_the_executor():
    main, startup = fluid.Program(), fluid.Program()
    main.random_seed = startup.random_seed = 5
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        x = fluid.layers.data(name="x", shape=[13])
        y = fluid.layers.data(name="y", shape=[1])
        avg = fluid.layers.mean(fluid.layers.square_error_cost(
            input=fluid.layers.fc(input=x, size=1), label=y))
        fluid.optimizer.SGD(learning_rate=0.01).minimize(avg)
    rng = np.random.default_rng(0)
    batch = [(rng.standard_normal(13), [float(i)]) for i in range(20)]
    feeder = DataFeeder(feed_list=[x, y], place=fluid.CPUPlace())
    exe = fluid.Executor(fluid.CPUPlace())
    with fluid.scope_guard(fluid.Scope()):
        exe.run(startup)
        loss, = exe.run(main, feed=feeder.feed(batch), fetch_list=[avg])
    assert loss.shape == (1,) and np.isfinite(loss[0])
