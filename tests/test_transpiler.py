"""The transpiler's passes: merge, slice (parameter slicing) and placement, each checked alone."""
import math

import pytest
from hypothesis import given, settings, strategies as st

import placegroup as fluid
from placegroup.errors import PlacementError
from placegroup.ir.place_group import PlaceGroup
from placegroup.transpiler.slice import block_layout

PS2 = "127.0.0.1:7164,127.0.0.1:7165"


def _linear(opt=None):
    x = fluid.layers.data(name="x", shape=[13])
    y = fluid.layers.data(name="y", shape=[1])
    pred = fluid.layers.fc(input=x, size=1)
    cost = fluid.layers.mean(fluid.layers.square_error_cost(input=pred, label=y))
    (opt or fluid.optimizer.SGD(0.01)).minimize(cost)
    return cost


def _ops(prog):
    return [(op.type, str(op.place)) for op in prog.global_block().ops]


def test_placement_of_fit_a_line(fresh_programs):
    main, startup = fresh_programs
    _linear()
    before = str(main)
    t = fluid.DistributeTranspiler()
    t.transpile(0, pservers=PS2, trainers=2)
    assert before != str(main)  # transpile rewrote its input into trainer 0's part, as Fluid does
    assert str(main) == str(t.get_program(None, "trainer"))
    prog = t.get_program("127.0.0.1:7164", "PSERVER")
    assert str(prog.executor) == "pserver@127.0.0.1:7164"
    ops = _ops(prog)
    assert ops[:9] == [(t_, "trainer") for t_, _ in ops[:9]]  # forward + backward replicated
    assert ops[9:] == [("sum", "pserver/127.0.0.1:7164"), ("scale", "pserver/127.0.0.1:7164"),
                       ("sgd", "pserver/127.0.0.1:7164"), ("sum", "pserver/127.0.0.1:7165"),
                       ("scale", "pserver/127.0.0.1:7165"), ("sgd", "pserver/127.0.0.1:7165")]
    b = prog.global_block()
    assert str(b.var("fc_0.w_0").place) == "pserver/127.0.0.1:7164"
    assert str(b.var("fc_0.b_0").place) == "pserver/127.0.0.1:7165"
    assert str(b.var("learning_rate_0").place) == "pserver"
    assert str(b.var("x").place) == "trainer"
    assert b.ops[9].edges == {"X": "gather"} and b.ops[10].attrs["scale"] == 0.5
    assert prog.provenance == ["model_parallel", "merge", "allreduce", "slice", "sparse", "placement"]
    # no listen_and_serv, no send/recv anywhere
    assert not {"listen_and_serv", "send", "recv"} & {op.type for op in b.ops}
    # the startup program initializes each var where it lives
    s = t.get_startup_program("127.0.0.1:7164", "pserver")
    assert [(op.type, str(op.place)) for op in s.global_block().ops] == [
        ("uniform_random", "pserver/127.0.0.1:7164"), ("fill_constant", "pserver/127.0.0.1:7165"),
        ("fill_constant", "pserver")]


def test_program_survives_save_and_load(fresh_programs, tmp_path):
    _linear()
    t = fluid.DistributeTranspiler()
    t.transpile(1, pservers=PS2, trainers=2)
    prog = t.get_program(None, "trainer")
    back = fluid.Program.from_bytes(prog.to_bytes())
    assert str(back) == str(prog) and back.executor == prog.executor and back.executor.rank == 1
    assert back.cluster == prog.cluster


def test_the_parameter_slicing_example_gives_two_blocks(fresh_programs):
    """10 x 1000 over 3 pservers: min(ceil(10000 / 8192), 3) = 2 blocks (the parameter-slicing design's example)."""
    main, _ = fresh_programs
    x = fluid.layers.data(name="x", shape=[10])
    h = fluid.layers.fc(input=x, size=1000)
    cost = fluid.layers.mean(fluid.layers.fc(input=h, size=1))
    fluid.optimizer.SGD(0.01).minimize(cost)
    t = fluid.DistributeTranspiler()
    t.transpile(0, pservers="127.0.0.1:1,127.0.0.1:2,127.0.0.1:3", trainers=2)
    prog = t.get_program("127.0.0.1:1", "pserver")
    b = prog.global_block()
    assert b.var("fc_0.w_0.block0").shape == (5, 1000) and b.var("fc_0.w_0.block1").shape == (5, 1000)
    assert b.var("fc_0.w_0.block1").attrs["slice_of"] == ["fc_0.w_0", 1, 5, 1]  # var, part, row, stride
    assert not b.has_var("fc_0.w_0.block2")
    places = {n: str(b.var(n).place) for n in ("fc_0.w_0.block0", "fc_0.w_0.block1", "fc_0.b_0", "fc_1.w_0")}
    # RoundRobin: one counter over all blocks in optimizer order
    assert places == {"fc_0.w_0.block0": "pserver/127.0.0.1:1", "fc_0.w_0.block1": "pserver/127.0.0.1:2",
                      "fc_0.b_0": "pserver/127.0.0.1:3", "fc_1.w_0": "pserver/127.0.0.1:1"}
    types = [op.type for op in b.ops]
    assert "split" in types and types[-1] == "concat" and str(b.ops[-1].place) == "trainer"
    split = b.ops[types.index("split")]
    assert split.attrs["sections"] == [5, 5] and split.input("X") == ["fc_0.w_0@GRAD"]
    s = t.get_startup_program("127.0.0.1:1", "pserver").global_block()
    inits = [op for op in s.ops if op.output("Out")[0].startswith("fc_0.w_0.block")]
    assert [op.attrs["offsets"] for op in inits] == [[0, 0], [5, 0]]
    assert all(op.attrs["whole_shape"] == [10, 1000] for op in inits)


@settings(max_examples=300, deadline=None)
@given(rows=st.integers(1, 5000), cols=st.integers(1, 64), n_ps=st.integers(1, 8),
       min_block=st.integers(1, 20000))
def test_blocks_tile_the_var(rows, cols, n_ps, min_block):
    layout = block_layout((rows, cols), n_ps, min_block)
    assert len(layout) <= n_ps
    assert sum(r for _, r in layout) == rows
    assert [off for off, _ in layout] == [sum(r for _, r in layout[:i]) for i in range(len(layout))]
    sizes = [r for _, r in layout]
    assert all(s == sizes[0] for s in sizes[:-1]) and sizes[-1] <= sizes[0]
    want = min(math.ceil(rows * cols / min_block), n_ps, rows)
    assert len(layout) <= want
    if len(layout) > 1:  # no block below the minimum, except the last
        assert all(r * cols >= min(min_block, rows * cols // n_ps) for r in sizes[:-1])


def test_hash_name_is_stable_and_different_from_round_robin(fresh_programs):
    _linear()
    t = fluid.DistributeTranspiler()
    t.transpile(0, pservers=PS2, trainers=2, split_method=fluid.HashName)
    prog = t.get_program(None, "trainer")
    import zlib
    eps = PS2.split(",")
    for name in ("fc_0.w_0", "fc_0.b_0"):
        want = eps[zlib.crc32(name.encode()) % 2]
        assert str(prog.global_block().var(name).place) == f"pserver/{want}"


def test_bad_arguments_are_clear(fresh_programs):
    _linear()
    t = fluid.DistributeTranspiler()
    with pytest.raises(ValueError, match="pservers: '1.2.3.4:x' is not ip:port"):
        t.transpile(0, pservers="1.2.3.4:x", trainers=2)
    t.transpile(2, pservers=PS2, trainers=2)  # a pserver ignores trainer_id; a trainer's program checks it
    with pytest.raises(ValueError, match=r"trainer_id 2 is not in 0..1"):
        t.get_trainer_program()
    with pytest.raises(RuntimeError, match="call transpile"):
        fluid.DistributeTranspiler().get_program("127.0.0.1:7164", "pserver")
    t.transpile(0, pservers=PS2, trainers=2)
    with pytest.raises(ValueError, match="not one of"):
        t.get_program("127.0.0.1:9999", "pserver")


def test_env_defaults_follow_the_seed(fresh_programs, monkeypatch):
    _linear()
    monkeypatch.setenv("PADDLE_TRAINER_ID", "1")
    monkeypatch.setenv("PADDLE_INIT_PORT", "7000")
    t = fluid.DistributeTranspiler()
    t.transpile(pservers="127.0.0.1,127.0.0.2", trainers="2")
    assert t.trainer_id == 1 and t.pserver_endpoints == ["127.0.0.1:7000", "127.0.0.2:7000"]
    assert t.get_trainer_program().executor.rank == 1
    # Fluid 1.x passes the pserver program second: accepted, not needed
    sp = t.get_startup_program("127.0.0.1:7000", t.get_pserver_program("127.0.0.1:7000"))
    assert str(sp.executor) == "pserver@127.0.0.1:7000"


def test_bad_cross_placement_read_is_reported(fresh_programs):
    from placegroup.ir.cluster import check_placement

    _linear()
    t = fluid.DistributeTranspiler()
    t.transpile(0, pservers=PS2, trainers=2)
    prog = t.get_program(None, "trainer")
    prog.global_block().ops[9].edges.clear()  # the sum no longer declares its gather edge
    with pytest.raises(PlacementError, match=r"op #9 `sum` @pserver/127.0.0.1:7164 reads "
                                             r"'fc_0.w_0@GRAD' @trainer, which 2 executors hold"):
        check_placement(prog)
    assert PlaceGroup.parse("trainer").is_replicated


@pytest.mark.parametrize("slice_var_up, warns", [(False, True), (True, False)])
def test_dump_reports_the_load_per_pserver(fresh_programs, slice_var_up, warns):
    from placegroup.tools.dump import render_text

    x = fluid.layers.data(name="x", shape=[1000])
    cost = fluid.layers.mean(fluid.layers.fc(input=x, size=1000))
    fluid.optimizer.SGD(0.01).minimize(cost)
    t = fluid.DistributeTranspiler()
    t.transpile(0, pservers=PS2, trainers=2, slice_var_up=slice_var_up)
    text = render_text(t.get_program("127.0.0.1:7164", "pserver"))
    assert "param bytes" in text and "127.0.0.1:7165" in text
    assert ("WARNING: uneven load" in text) == warns
