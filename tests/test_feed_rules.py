"""What ``exe.run(feed={name: value})`` does with a value's dtype and shape, per var dtype and
per how the var was declared (``fluid.layers.data`` or ``fluid.data``), beside what
PaddlePaddle Fluid 1.8.5 does with the same feed (NOTE(feed-dtype) in executor/feed.py).

The ``fluid`` column of each row is what Fluid 1.8.5 did, run with paddlepaddle 1.8.5 on a
program that declares ``x`` and fetches it: ``"ok <dtype>"`` (took the feed, fetched that
dtype), ``"kept <dtype>"`` (took it in the array's own dtype, not the var's; ops that meet a
parameter then fail, e.g. ``fc``: "op mul does not have kernel for data_type[int64_t]"), or its
error text. Where Fluid raises at the feed, placegroup raises too; the rows marked ``departs``
say where placegroup does otherwise, and why.
"""
import dataclasses

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.executor.feed import fed_array

I64 = np.array([[1, 2, 3], [4, 5, 6]], dtype="int64")
F64 = np.array([[1.5, 2, 3], [4, 5, 6]], dtype="float64")
F32_FRAC = np.array([[1.7, 2, 3], [4, 5, -6.2]], dtype="float32")
BOOL = np.array([[True, False, True]] * 2)
F16 = np.array([[1, 2, 3], [4, 5, 6]], dtype="float16")
U8 = np.array([[1, 2, 3], [4, 5, 6]], dtype="uint8")

MUST_BE = "The data type of fed Variable 'x' must be"  # Fluid 1.8.5's check_feed_shape_type
SET_REFUSES = "tensor.set() supports bool, float16, float32, float64, int8, int16, int32, int64 and uint8"
LIST_REFUSED = "Some of your feed data hold LoD information"  # _as_lodtensor refuses every list


@dataclasses.dataclass
class FeedCase:
    var: str        # the var's dtype
    how: str        # "layers.data" ([-1, 3]) or "fluid.data" ([None, 3])
    fed: object
    fluid: str      # what Fluid 1.8.5 did with this feed (see the module docstring)
    want: object    # placegroup: the dtype of the fetched value, or a regex of the ProgramError
    departs: str = ""  # why placegroup does otherwise than Fluid, where it does


CASES = [
    FeedCase("float32", "layers.data", I64, "kept int64", "float32",
             "a var holds its declared dtype here; int64 -> float32 changes no value's kind, so it is cast"),
    FeedCase("float32", "fluid.data", I64, f"{MUST_BE} 'float32', but received 'int64'",
             r"feed 'x': the var is float32 and was declared by fluid.data, .* but the array is int64: "
             r"feed arr.astype\('float32'\)"),
    FeedCase("float32", "layers.data", F64, "kept float64", "float32", "cast, as int64 above"),
    FeedCase("float32", "fluid.data", F64, f"{MUST_BE} 'float32', but received 'float64'",
             r"feed 'x': the var is float32 .* fluid.data.* the array is float64"),
    FeedCase("int64", "layers.data", F32_FRAC, "kept float32",
             r"feed 'x': the var is int64, but it was fed an array of float32, and that cast can change values "
             r"\(1.7 becomes 1\)", "a float array for an int var is refused, not truncated"),
    FeedCase("int64", "fluid.data", F32_FRAC, f"{MUST_BE} 'int64', but received 'float32'",
             r"feed 'x': the var is int64 .* fluid.data.* the array is float32"),
    FeedCase("int32", "layers.data", I64, "kept int64", "int32", "cast, as int64 -> float32"),
    FeedCase("int32", "fluid.data", I64, f"{MUST_BE} 'int32', but received 'int64'",
             r"feed 'x': the var is int32 .* fluid.data"),
    FeedCase("float32", "layers.data", BOOL, "kept bool", "float32", "cast: True is 1.0"),
    FeedCase("float32", "fluid.data", BOOL, f"{MUST_BE} 'float32', but received 'bool'",
             r"feed 'x': the var is float32 .* the array is bool"),
    FeedCase("bool", "layers.data", BOOL, "ok bool", "bool"),
    FeedCase("bool", "fluid.data", BOOL, "ok bool", "bool"),
    FeedCase("float32", "layers.data", F16, "kept float16", "float32", "cast, as int64 above"),
    FeedCase("float32", "fluid.data", F16, f"{MUST_BE} 'float32', but received 'float16'",
             r"feed 'x': .* the array is float16"),
    FeedCase("float32", "layers.data", U8, "kept uint8", "float32", "cast, as int64 above"),
    FeedCase("float32", "fluid.data", U8, f"{MUST_BE} 'float32', but received 'uint8'", r"feed 'x': .* uint8"),
    FeedCase("float32", "layers.data", np.array([["a", "b", "c"]] * 2), f"{SET_REFUSES}, ..., but got <U1!",
             r"feed 'x': the var is float32, but it was fed an array of strings \(<U1\): feed bool, int or float"),
    FeedCase("float32", "fluid.data", np.array([["a", "b", "c"]] * 2), f"{SET_REFUSES}, ..., but got <U1!",
             r"feed 'x': .* strings"),
    FeedCase("float32", "layers.data", np.array([[1, 2, 3]], dtype=object), f"{SET_REFUSES}, ..., but got object!",
             r"feed 'x': the var is float32, but it was fed an array of Python objects"),
    FeedCase("float32", "fluid.data", np.array([[1j, 2, 3]]), "EnforceNotMet (complex128 is no tensor type)",
             r"feed 'x': .* complex numbers"),
    FeedCase("float32", "layers.data", [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], LIST_REFUSED, "float32",
             "a list has no dtype of its own: it takes the var's, where its numbers fit"),
    FeedCase("float32", "fluid.data", [[1, 2, 3]], LIST_REFUSED, "float32", "as the list above"),
    FeedCase("int64", "layers.data", [[1.5, 2, 3]], LIST_REFUSED,
             r"feed 'x': the var is int64, but it was fed a list of float64, and that cast can change values"),
    FeedCase("float32", "layers.data", [[1, 2, 3], [4]], LIST_REFUSED,
             r"feed 'x': a list whose rows differ in length, which is no array: the var expects one "
             r"rectangular array of float32"),
    # shapes: NOTE(feed-shape), and Fluid 1.8.5's own cases in tests/cases/feed_shapes.py
    FeedCase("float32", "layers.data", np.zeros((2, 4), "float32"), "ok float32", "float32"),
    FeedCase("float32", "fluid.data", np.zeros((2, 4), "float32"), "The fed Variable 'x' should have dimensions "
             "= 2, shape = (-1, 3), but received fed shape [2, 4] on each device",
             r"feed 'x' has shape \[2, 4\], but the var is declared \[-1, 3\]"),
]


def _program(case_var: str, how: str, shape=(3,)):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        if how == "layers.data":
            x = fluid.layers.data(name="x", shape=list(shape), dtype=case_var)
        else:
            x = fluid.data(name="x", shape=[None, *shape], dtype=case_var)
    return main, x


def _feed(var: str, how: str, value, shape=(3,)):
    main, x = _program(var, how, shape)
    got, = fluid.Executor().run(main, feed={"x": value}, fetch_list=[x])
    return got


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c.var}-{c.how}-{type(c.fed).__name__}"
                         f"-{getattr(c.fed, 'dtype', 'py')}")
def test_a_fed_value_is_taken_cast_or_refused_as_the_table_says(case):
    fluid_raised = not case.fluid.startswith(("ok", "kept"))
    if fluid_raised and not case.departs:  # Fluid refuses it at the feed: so does placegroup
        assert isinstance(case.want, str) and case.want.startswith(r"feed 'x'")
    if isinstance(case.want, str) and case.want.startswith("feed"):
        with pytest.raises(ProgramError, match=case.want):
            _feed(case.var, case.how, case.fed)
        return
    got = _feed(case.var, case.how, case.fed)
    assert got.dtype == np.dtype(case.want)
    np.testing.assert_array_equal(got, np.asarray(case.fed).astype(case.want))
    if case.fluid.startswith("ok"):  # what Fluid fetched too
        assert case.fluid == f"ok {case.want}"


def test_every_row_that_departs_from_fluid_says_why():
    for case in CASES:
        fluid_same = case.fluid == f"ok {case.want}" or (
            not case.fluid.startswith(("ok", "kept")) and str(case.want).startswith("feed"))
        assert fluid_same or case.departs, case


@pytest.mark.parametrize("how", ["layers.data", "fluid.data"])
def test_a_number_is_an_array_of_one_value_in_the_vars_dtype(how):
    # Fluid 1.8.5: 3 -> float32 [3.0] for both (``_as_lodtensor`` casts Python scalars)
    got = _feed("float32", how, 3, shape=())
    assert got.dtype == np.float32 and got.tolist() == [3.0]
    got = _feed("int64", how, np.int32(7), shape=())
    assert got.dtype == np.int64 and got.tolist() == [7]
    # Fluid 1.8.5 turns 3.7 into [3] for an int64 var: refused here rather than truncated
    with pytest.raises(ProgramError, match=r"feed 'x': the var is int64, but it was fed the float 3.7, "
                                           r"and that cast can change values \(1.7 becomes 1\)"):
        _feed("int64", how, 3.7, shape=())


def test_an_array_of_the_vars_dtype_is_passed_on_as_it_is():
    """The check a step pays per feed: one dtype comparison and one shape comparison, no copy."""
    main, x = _program("float32", "fluid.data")
    arr = np.ones((4, 3), "float32")
    assert fed_array("x", x, np.dtype("float32"), x.shape, arr) is arr


def test_a_cast_feed_trains_as_the_cast_array_does():
    """An int64 array fed to a fluid.layers.data float32 var trains an fc exactly as its float32
    cast does (in Fluid 1.8.5 the same feed fails in the fc: no mul kernel for int64)."""
    def losses(xs):
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            startup.random_seed = 3
            x = fluid.layers.data(name="x", shape=[3])
            y = fluid.layers.data(name="y", shape=[1])
            loss = fluid.layers.mean(fluid.layers.square_error_cost(fluid.layers.fc(x, 1), y))
            fluid.optimizer.SGD(0.01).minimize(loss)
        exe, scope = fluid.Executor(), fluid.Scope()
        exe.run(startup, scope=scope)
        ys = np.array([[1.0], [2.0]], "float32")
        return [exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss], scope=scope)[0].item() for _ in range(3)]

    assert losses(I64) == losses(I64.astype("float32"))


def test_a_cast_across_kinds_is_said_once_per_feed(caplog):
    """int64 ids cast into a float32 var may be the wrong array: said once, naming the feed;
    float64 -> float32 (the same kind) is not."""
    from placegroup.executor import feed as feed_rules

    feed_rules._told.clear()
    main, x = _program("float32", "layers.data")
    with caplog.at_level("WARNING", logger="placegroup.executor"):
        for _ in range(3):
            fed_array("x", x, np.dtype("float32"), x.shape, I64)
        fed_array("x", x, np.dtype("float32"), x.shape, I64.astype("float64"))
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and said[0].startswith("feed 'x': an array of int64 was cast to float32"), said


def test_a_refused_feed_runs_no_op():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        x = fluid.data(name="x", shape=[None, 3], dtype="float32")
        n = fluid.layers.create_global_var([1], 0.0, "float32", persistable=True, name="n")
        fluid.layers.increment(n, 1.0, in_place=True)
        fluid.layers.reduce_sum(x)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(ProgramError, match="feed 'x'"):
        exe.run(main, feed={"x": I64}, scope=scope)
    assert np.array(scope.find_var("n").get_tensor()).tolist() == [0.0]
