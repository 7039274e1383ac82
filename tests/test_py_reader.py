"""Readers that feed a program from a background thread: ``fluid.layers.py_reader`` +
``read_file``, ``fluid.io.DataLoader.from_generator`` and ``fluid.io.PyReader``.

Every training test compares with the same batches fed by feed dicts: a reader changes where the
data comes from, never a number.
"""
import os
import sys
import textwrap
import threading
import time

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import OpError, PlacegroupError, ProgramError
from tests.conftest import TIME_FACTOR

STEPS, BATCH = 5, 8


def _batches(seed=0, steps=STEPS, batch=BATCH):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(batch, 13)).astype(np.float32), rng.normal(size=(batch, 1)).astype(np.float32))
            for _ in range(steps)]


def _net(x, y):
    pred = fluid.layers.fc(input=x, size=1)
    cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    fluid.optimizer.SGD(learning_rate=0.05).minimize(cost)
    return cost


def _build(make_inputs):
    """Fresh programs and names; ``make_inputs()`` returns (x, y, reader-or-loader)."""
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        startup.random_seed = 7
        x, y, reader = make_inputs()
        cost = _net(x, y)
    return main, startup, reader, cost


def _data_inputs():
    return fluid.layers.data("x", [13]), fluid.layers.data("y", [1]), None


def _py_reader_inputs(capacity=2, **kw):
    def make():
        r = fluid.layers.py_reader(capacity=capacity, shapes=[(-1, 13), (-1, 1)], dtypes=["float32", "float32"], **kw)
        x, y = fluid.layers.read_file(r)
        return x, y, r
    return make


def _reference(batches, passes=1):
    """Losses of the same batches fed by feed dicts."""
    main, startup, _, cost = _build(_data_inputs)
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return [float(exe.run(main, feed={"x": x, "y": y}, fetch_list=[cost], scope=scope)[0][0])
            for _ in range(passes) for x, y in batches]


def _run_passes(main, startup, reader, cost, passes):
    """Train ``passes`` passes reading from a started reader; return the losses and the steps
    of each pass."""
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses, steps = [], []
    for _ in range(passes):
        reader.start()
        n = 0
        try:
            while True:
                losses.append(float(exe.run(main, fetch_list=[cost], scope=scope)[0][0]))
                n += 1
        except fluid.core.EOFException:
            reader.reset()
        steps.append(n)
    return losses, steps


@pytest.mark.parametrize("source", ["paddle_reader", "sample_list", "tensor_provider", "batch_generator"])
def test_py_reader_two_passes_equal_feed_dicts(source):
    """Two passes over a py_reader give the losses of the same batches fed by dicts; each pass
    ends with EOFException after its last batch, and reset() + start() begins the next."""
    batches = _batches()
    main, startup, reader, cost = _build(_py_reader_inputs())
    samples = lambda: ([(x[i], y[i]) for i in range(len(x))] for x, y in batches)  # noqa: E731
    if source == "paddle_reader":
        reader.decorate_paddle_reader(samples)
    elif source == "sample_list":
        reader.decorate_sample_list_generator(samples)
    elif source == "tensor_provider":
        reader.decorate_tensor_provider(lambda: iter(batches))
    else:
        reader.decorate_batch_generator(lambda: ([x.tolist(), y] for x, y in batches))
    losses, steps = _run_passes(main, startup, reader, cost, passes=2)
    assert steps == [STEPS, STEPS]
    np.testing.assert_allclose(losses, _reference(batches, passes=2), rtol=1e-6, atol=1e-7)


def test_eof_persists_until_reset_and_start_checks_the_state():
    main, startup, reader, cost = _build(_py_reader_inputs())
    exe = fluid.Executor()
    exe.run(startup)
    with pytest.raises(PlacegroupError, match="reader 'create_py_reader_0' has no data source"):
        reader.start()
    reader.decorate_tensor_provider(lambda: iter(_batches(steps=1)))
    with pytest.raises(PlacegroupError, match="reader 'create_py_reader_0' is not started: call its start"):
        exe.run(main, fetch_list=[cost])
    reader.start()
    with pytest.raises(PlacegroupError, match="is already started: call reset"):
        reader.start()
    exe.run(main, fetch_list=[cost])
    for _ in range(2):  # the end of the data stays the end until reset
        with pytest.raises(fluid.core.EOFException, match="no more data: call reset"):
            exe.run(main, fetch_list=[cost])
    reader.reset()
    reader.reset()  # resetting a reset reader is harmless
    reader.start()
    exe.run(main, fetch_list=[cost])


def test_reset_in_the_middle_of_a_pass_stops_the_thread():
    main, startup, reader, cost = _build(_py_reader_inputs(capacity=1))
    reader.decorate_tensor_provider(lambda: iter(_batches(steps=50)))
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()
    exe.run(main, fetch_list=[cost])
    thread = reader.thread
    reader.reset()  # the thread was blocked on the full queue
    assert not thread.is_alive() and reader.queue is None
    reader.start()
    for _ in range(50):
        exe.run(main, fetch_list=[cost])
    with pytest.raises(fluid.core.EOFException):
        exe.run(main, fetch_list=[cost])


def test_capacity_bounds_the_queue_and_the_producer_runs_ahead_on_its_own_thread():
    """Before any exe.run the background thread fills the queue to ``capacity`` batches and then
    blocks, holding the one it read next; each step makes room for one more."""
    capacity, produced, threads = 3, [], set()
    batches = _batches(steps=20)

    def source():
        for b in batches:
            produced.append(len(produced))
            threads.add(threading.get_ident())
            yield b

    main, startup, reader, cost = _build(_py_reader_inputs(capacity=capacity))
    reader.decorate_tensor_provider(source)
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()

    def settle(n):
        deadline = time.monotonic() + 10 * TIME_FACTOR
        while len(produced) < n and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.2)  # time enough to overrun, were the queue unbounded
        return len(produced)

    assert settle(capacity + 1) == capacity + 1  # capacity queued + one blocked on put
    assert reader.queue.size() == reader.queue.capacity() == capacity
    assert threads and threading.get_ident() not in threads  # read on the reader's thread
    exe.run(main, fetch_list=[cost])
    assert settle(capacity + 2) == capacity + 2
    reader.reset()


def test_a_bad_batch_is_an_error_naming_the_var_and_both_shapes():
    batches = _batches(steps=3)
    bad = [batches[0], (np.ones((8, 12), np.float32), batches[1][1])]
    main, startup, reader, cost = _build(_py_reader_inputs())
    reader.decorate_tensor_provider(lambda: iter(bad))
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()
    exe.run(main, fetch_list=[cost])  # the good batch before the bad one still runs
    # py_reader checks no shape (Fluid 1.8's neither: its vars are no fluid.data vars), so the
    # batch reaches the fc, whose mul names the var and both shapes (NOTE(reader-shape))
    with pytest.raises(OpError, match=r"While executing op #0 `mul`.*\n.*input shapes \{'read_file_0.tmp_0': "
                                      r"\(8, 12\), 'fc_0.w_0': \(13, 1\)\}"):
        exe.run(main, fetch_list=[cost])
    with pytest.raises(fluid.core.EOFException):
        exe.run(main, fetch_list=[cost])
    reader.reset()
    for source, pattern in [
        ([(batches[0][0],)], r"batch 0 is 1 items; expected a list or tuple of 2 arrays, one per var "
                             r"\['read_file_0.tmp_0', 'read_file_0.tmp_1'\]"),
        ([(batches[0][0], np.ones((8, 1)) * 0.5)], None),  # float64 -> float32: converted
        ([(batches[0][0], [[1.0], [2.0, 3.0]])], r"var 'read_file_0.tmp_1' is not one array"),
    ]:
        reader.decorate_tensor_provider(lambda s=source: iter(s))
        reader.start()
        if pattern is None:
            exe.run(main, fetch_list=[cost])
        else:
            with pytest.raises(ProgramError, match=pattern):
                exe.run(main, fetch_list=[cost])
        reader.reset()


def test_a_lossy_dtype_and_a_failing_source_are_reported():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup):
        reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 1)], dtypes=["int64"], name="labels")
        label = fluid.layers.read_file(reader)
    assert reader.name == "labels_reader" and label.dtype == "int64"
    exe = fluid.Executor()
    reader.decorate_tensor_provider(lambda: iter([[np.full((2, 1), 0.5)]]))
    reader.start()
    with pytest.raises(ProgramError, match=r"var 'read_file_0.tmp_0' is declared int64, the data is float64"):
        exe.run(main, fetch_list=[label])
    reader.reset()

    def broken():
        yield [np.ones((2, 1), np.int64)]
        raise KeyError("sample 17")

    reader.decorate_tensor_provider(broken)
    reader.start()
    np.testing.assert_array_equal(exe.run(main, fetch_list=[label])[0], np.ones((2, 1)))
    with pytest.raises(KeyError, match="sample 17") as info:
        exe.run(main, fetch_list=[label])
    assert "data source of reader 'labels_reader' at batch 1" in "".join(info.value.__notes__)
    reader.reset()


def test_py_reader_argument_errors():
    with pytest.raises(ValueError, match="one shape, dtype and lod level per var"):
        fluid.layers.py_reader(capacity=2, shapes=[(-1, 3)], dtypes=["float32", "int64"])
    with pytest.raises(ValueError, match="capacity must be a positive int"):
        fluid.layers.py_reader(capacity=0, shapes=[(-1, 3)], dtypes=["float32"])
    with pytest.raises(TypeError, match="read_file: expected a reader"):
        fluid.layers.read_file(fluid.layers.data("z", [3]))
    reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 3)], dtypes=["float32"])
    assert fluid.layers.double_buffer(reader) is reader
    fluid.layers.read_file(reader)
    with pytest.raises(ProgramError, match=r"already reads from reader 'create_py_reader_\d'"):
        fluid.layers.read_file(reader)


def test_the_program_records_its_reader_in_a_form_that_survives_copies():
    """The reader is in Program.extra: printed, serialized and kept by clone, so a copy of the
    program (the transpiler's, a test clone, prog.bin bytes) reads from the same live reader."""
    batches = _batches()
    main, startup, reader, cost = _build(_py_reader_inputs())
    assert main.extra["readers"] == [{"name": "create_py_reader_0", "queue": reader._live.queue_name,
                                      "feeds": ["read_file_0.tmp_0", "read_file_0.tmp_1"], "capacity": 2,
                                      "drop_last": True}]
    assert "readers=" in str(main).splitlines()[0]
    copy = fluid.Program.from_bytes(main.to_bytes())
    test_prog = main.clone(for_test=True)
    reader.decorate_tensor_provider(lambda: iter(batches))
    exe = fluid.Executor()
    exe.run(startup)
    reader.start()
    exe.run(copy, fetch_list=[cost])
    loss, = exe.run(test_prog, fetch_list=[cost.name])  # the second batch, through the clone
    reader.reset()
    assert loss.shape == (1,)
    # a feed that gives every var the reader fills runs without it (an inference run, say)
    exe.run(test_prog, feed={"read_file_0.tmp_0": batches[0][0], "read_file_0.tmp_1": batches[0][1]})
    with pytest.raises(ProgramError, match=r"feed gives \['read_file_0.tmp_0'\] but not \['read_file_0.tmp_1'\]"):
        exe.run(test_prog, feed={"read_file_0.tmp_0": batches[0][0]})
    # a program whose reader does not live in this process says so
    stray = fluid.Program.from_bytes(main.to_bytes())
    stray.extra["readers"] = [dict(stray.extra["readers"][0], queue="elsewhere_queue")]
    with pytest.raises(ProgramError, match="does not live in this process"):
        exe.run(stray)


def test_create_py_reader_by_data_takes_the_vars_shapes():
    batches = _batches()

    def make():
        image = fluid.layers.data("image", [13])
        label = fluid.layers.data("label", [1])
        reader = fluid.layers.create_py_reader_by_data(capacity=4, feed_list=[image, label])
        x, y = fluid.layers.read_file(reader)
        assert (x.shape, y.shape) == ((-1, 13), (-1, 1)) and x.name != "image"
        return x, y, reader

    main, startup, reader, cost = _build(make)
    reader.decorate_tensor_provider(lambda: iter(batches))
    losses, steps = _run_passes(main, startup, reader, cost, passes=1)
    np.testing.assert_allclose(losses, _reference(batches), rtol=1e-6, atol=1e-7)


# -- DataLoader and PyReader -----------------------------------------------------------------------

def _loader_inputs(cls, **kw):
    def make():
        x, y = fluid.layers.data("x", [13]), fluid.layers.data("y", [1])
        if cls is fluid.io.PyReader:
            return x, y, fluid.io.PyReader(feed_list=[x, y], capacity=3, **kw)
        return x, y, fluid.io.DataLoader.from_generator(feed_list=[x, y], capacity=3, **kw)
    return make


def _samples(batches):
    return lambda: ((x[i], y[i]) for x, y in batches for i in range(len(x)))


@pytest.mark.parametrize("cls", [fluid.io.DataLoader, fluid.io.PyReader])
@pytest.mark.parametrize("source", ["sample", "sample_list", "batch"])
def test_iterable_loader_yields_feeds_for_exe_run(cls, source):
    """``for data in loader():`` yields a list with one feed dict per place; two passes give the
    losses of the same batches fed by hand."""
    batches = _batches()
    main, startup, loader, cost = _build(_loader_inputs(cls))
    places = fluid.cpu_places(1)
    set_sample = loader.decorate_sample_generator if cls is fluid.io.PyReader else loader.set_sample_generator
    set_list = loader.decorate_sample_list_generator if cls is fluid.io.PyReader else loader.set_sample_list_generator
    set_batch = loader.decorate_batch_generator if cls is fluid.io.PyReader else loader.set_batch_generator
    if source == "sample":  # 5 x 8 samples in batches of 8, plus 3 dropped by drop_last
        extra = [(np.zeros(13, np.float32), np.zeros(1, np.float32))] * 3
        set_sample(lambda: iter([*_samples(batches)(), *extra]), batch_size=BATCH, places=places)
    elif source == "sample_list":
        set_list(fluid.batch(_samples(batches), BATCH), places=places)
    else:
        set_batch(lambda: iter(batches), places=places)
    assert loader.iterable
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for _ in range(2):
        for data in loader():
            assert isinstance(data, list) and len(data) == 1 and sorted(data[0]) == ["x", "y"]
            losses.append(float(exe.run(main, feed=data, fetch_list=[cost], scope=scope)[0][0]))
    np.testing.assert_allclose(losses, _reference(batches, passes=2), rtol=1e-6, atol=1e-7)
    with pytest.raises(PlacegroupError, match=r"start\(\) is for a DataLoader made with iterable=False"):
        loader.start()


def test_iterable_loader_return_list_and_places():
    batches = _batches(steps=5)
    main, startup, loader, cost = _build(_loader_inputs(fluid.io.DataLoader, return_list=True))
    with pytest.raises(ValueError, match="an iterable DataLoader needs places"):
        loader.set_batch_generator(lambda: iter(batches))
    loader.set_batch_generator(lambda: iter(batches), places=fluid.cpu_places(2))
    got = list(loader())
    assert len(got) == 2  # 5 batches over 2 places: the short last group is dropped, as in Fluid
    assert [len(g) for g in got] == [2, 2] and isinstance(got[0][0], list)
    np.testing.assert_array_equal(got[1][1][0], batches[3][0])
    main, startup, loader, cost = _build(_loader_inputs(fluid.io.DataLoader, drop_last=False))
    loader.set_batch_generator(lambda: iter(batches), places=fluid.cpu_places(2))
    assert [len(g) for g in loader()] == [2, 2, 1]  # drop_last=False: the short group too


@pytest.mark.parametrize("cls", [fluid.io.DataLoader, fluid.io.PyReader])
def test_non_iterable_loader_is_fed_by_the_program(cls):
    batches = _batches()
    main, startup, loader, cost = _build(_loader_inputs(cls, iterable=False))
    assert not loader.iterable
    assert main.extra["readers"][0]["feeds"] == ["x", "y"]
    if cls is fluid.io.PyReader:
        loader.decorate_sample_list_generator(fluid.batch(_samples(batches), BATCH))
    else:
        loader.set_sample_list_generator(fluid.batch(_samples(batches), BATCH))
    losses, steps = _run_passes(main, startup, loader, cost, passes=2)
    assert steps == [STEPS, STEPS]
    np.testing.assert_allclose(losses, _reference(batches, passes=2), rtol=1e-6, atol=1e-7)
    with pytest.raises(PlacegroupError, match="made with iterable=False"):
        iter(loader())


def test_loader_argument_errors():
    x = fluid.layers.data("x", [13])
    with pytest.raises(ValueError, match="give capacity"):
        fluid.io.DataLoader.from_generator(feed_list=[x])
    with pytest.raises(ValueError, match="feed_list must be given"):
        fluid.io.PyReader(capacity=2)
    loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2)
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        loader.set_sample_generator(lambda: iter(()), batch_size=0, places=fluid.cpu_places(1))
    with pytest.raises(TypeError, match="the data source must be a callable"):
        loader.set_batch_generator([np.ones((2, 13))], places=fluid.cpu_places(1))
    with pytest.raises(TypeError, match="dataset must be type of DatasetBase"):
        fluid.io.DataLoader.from_dataset(None, fluid.cpu_places(1))


# -- a reader in a distributed program ------------------------------------------------------------

SCRIPT = textwrap.dedent('''
    """Trains fit-a-line from a py_reader, one process alone or as one process of a cluster."""
    import os, sys
    import numpy as np
    import placegroup as fluid

    out, steps, batch = sys.argv[1], 6, 8
    rng = np.random.default_rng(5)
    data = [(rng.normal(size=(batch, 13)).astype("float32"), rng.normal(size=(batch, 1)).astype("float32"))
            for _ in range(steps)]
    fluid.default_startup_program().random_seed = 7
    reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 13), (-1, 1)], dtypes=["float32", "float32"])
    x, y = fluid.layers.read_file(reader)
    pred = fluid.layers.fc(input=x, size=1)
    cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    fluid.optimizer.SGD(learning_rate=0.05).minimize(cost)
    role = os.environ.get("TRAINING_ROLE")
    exe = fluid.Executor(fluid.CPUPlace())
    if role is None:
        tag, prog, n, tid = "local", fluid.default_main_program(), 1, 0
        exe.run(fluid.default_startup_program())
    else:
        endpoint = os.environ["POD_IP"] + ":" + os.environ["PADDLE_INIT_PORT"]
        t = fluid.DistributeTranspiler()
        pservers = os.environ.get("PADDLE_INIT_PSERVERS")  # none: collective, the trainers by endpoint
        t.transpile(pservers=pservers, trainers=os.environ["PADDLE_INIT_TRAINERS"] if pservers
                    else os.environ["PADDLE_TRAINER_ENDPOINTS"])
        prog = t.get_program(endpoint, role)
        exe.run(t.get_startup_program(endpoint, role))
        if role == "PSERVER":
            exe.run(prog)  # serves the job; the pserver reads no data
            exe.close()
            sys.exit(0)
        n, tid, tag = t.trainer_num, t.trainer_id, "trainer%d" % t.trainer_id
    # each trainer's reader gives its share of every batch
    reader.decorate_tensor_provider(lambda: ((a[tid * batch // n:(tid + 1) * batch // n],
                                              b[tid * batch // n:(tid + 1) * batch // n]) for a, b in data))
    losses = []
    for _ in range(2):
        reader.start()
        try:
            while True:
                losses.append(float(exe.run(prog, fetch_list=[cost])[0][0]))
        except fluid.core.EOFException:
            reader.reset()
    exe.close()
    np.save(os.path.join(out, tag + ".npy"), np.array(losses))
''')


@pytest.mark.parametrize("pservers", [1, 0])
def test_a_reader_feeds_each_trainer_of_a_distributed_program(tmp_path, pservers):
    """2 trainers and a pserver (or none: all-reduce) as real processes: each trainer starts its
    own reader on its share of every batch; the pserver reads none; the trainers' mean loss is
    the one-process loss, step by step."""
    import io
    import subprocess

    from placegroup.tools.launch import launch

    script = tmp_path / "train_reader.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "TRAINING_ROLE"}
    subprocess.run([sys.executable, str(script), str(tmp_path)], check=True, env=env, timeout=120 * TIME_FACTOR)
    out = io.StringIO()
    code = launch(str(script), [str(tmp_path)], 2, pservers, grace=20 * TIME_FACTOR, out=out,
                  extra_env={"PLACEGROUP_PEER_TIMEOUT": str(30 * TIME_FACTOR)})
    assert code == 0, out.getvalue()
    local = np.load(tmp_path / "local.npy")
    trainers = [np.load(tmp_path / f"trainer{i}.npy") for i in range(2)]
    assert len(local) == 12 and all(len(t) == 12 for t in trainers)
    np.testing.assert_allclose(np.mean(trainers, axis=0), local, rtol=1e-5, atol=1e-6)
