"""comm.framing against docs/protocol.md: round trips, zero copy, and hostile frames."""
import msgpack
import numpy as np
import pytest
import zmq
from hypothesis import given, settings, strategies as st

from placegroup.comm.framing import PROTOCOL_VERSION as V, FrameError, pack, unpack
from placegroup.values import SelectedRows


def test_round_trip_values_and_kinds():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    b = np.array([7], dtype=np.int64)
    frames = pack("values", "trainer:1", 5, [("w@GRAD", 5, a), ("step", -1, b)])
    m = unpack(frames)
    assert (m.kind, m.src, m.step) == ("values", "trainer:1", 5)
    (n1, v1, x1), (n2, v2, x2) = m.vals
    assert (n1, v1, n2, v2) == ("w@GRAD", 5, "step", -1)
    np.testing.assert_array_equal(x1, a)
    np.testing.assert_array_equal(x2, b)
    assert x1.dtype == np.float32 and x2.dtype == np.int64
    for kind in ("hello", "done", "error"):
        m = unpack(pack(kind, "pserver@127.0.0.1:7164", 0, msg="boom", digest="ab"))
        assert m.kind == kind and m.vals == []


def test_selected_rows_and_scalars():
    rows = np.array([3, 9], np.int64)
    vals = np.ones((2, 4), np.float32)
    m = unpack(pack("values", "s", 0, [("emb@GRAD", 0, SelectedRows(rows, vals, 100)),
                                        ("lr", 0, np.float32(0.5))]))
    sr = m.vals[0][2]
    np.testing.assert_array_equal(sr.rows, rows)
    np.testing.assert_array_equal(sr.values, vals)
    assert sr.height == 100
    assert m.vals[1][2].shape == () and m.vals[1][2] == np.float32(0.5)
    assert sr.weights is None


def test_selected_rows_with_sighting_weights_keep_them():
    """A ShowClickEntry table's gradient: a ``wrows`` entry carries one float32 weight per row
    id; a weights frame of the wrong size is malformed."""
    sr = SelectedRows(np.array([3, 9, 3], np.int64), np.ones((3, 2), np.float32), 2 ** 63 - 1, [0.1, 1.0, 0.3])
    frames = pack("values", "s", 0, [("emb@GRAD", 0, sr)])
    got = unpack(frames).vals[0][2]
    np.testing.assert_array_equal(got.rows, sr.rows)
    np.testing.assert_array_equal(got.weights, np.array([0.1, 1.0, 0.3], np.float32))
    with pytest.raises(FrameError, match="does not hold"):
        unpack(frames[:-1] + [bytes(frames[-1])[:8]])


def test_a_collective_part_carries_its_tag_in_a_field_of_its_own():
    frames = pack("values", "trainer:0", 3, [(("op7m", "rs0.1"), 3, np.ones(2, np.float32)),
                                             ("w", 3, np.zeros(1))])
    assert msgpack.unpackb(frames[0])["vals"][0] == ["rs0.1", 3, "<f4", [2], "coll", "op7m"]
    m = unpack(frames)
    assert [(v[0], v[1]) for v in m.vals] == [(("op7m", "rs0.1"), 3), ("w", 3)]
    np.testing.assert_array_equal(m.vals[0][2], np.ones(2, np.float32))


def test_zero_copy_over_a_real_socket():
    ctx = zmq.Context.instance()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        port = a.bind_to_random_port("tcp://127.0.0.1")
        b.connect(f"tcp://127.0.0.1:{port}")
        big = np.random.default_rng(0).normal(size=(256, 512)).astype(np.float32)
        b.send_multipart(pack("values", "x", 1, [("w", 1, big)]), copy=False)
        frames = a.recv_multipart(copy=False)
        m = unpack(frames)
        got = m.vals[0][2]
        np.testing.assert_array_equal(got, big)
        assert not got.flags.owndata  # a view of the received frame, not a copy
    finally:
        a.close(0)
        b.close(0)


@pytest.mark.parametrize("frames, why", [
    ([], "empty message"),
    ([b"\xc1"], "not msgpack"),
    ([msgpack.packb([1, 2])], "not a map"),
    ([msgpack.packb({"v": V + 1, "kind": "done", "src": "a", "step": 0})], f"protocol version {V + 1}"),
    ([msgpack.packb({"v": V, "kind": "shout", "src": "a", "step": 0})], "bad kind"),
    ([msgpack.packb({"v": V, "kind": "values", "src": "a", "step": 0,
                     "vals": [["w", 0, "|O", [1], "dense"]]}), b"12345678"], "not allowed"),
    ([msgpack.packb({"v": V, "kind": "values", "src": "a", "step": 0,
                     "vals": [["w", 0, "<f4", [2], "dense"]]}), b"1234"], "does not hold"),
    ([msgpack.packb({"v": V, "kind": "values", "src": "a", "step": 0,
                     "vals": [["w", 0, "<f4", [1], "dense"]]})], "missing frames"),
    ([msgpack.packb({"v": V, "kind": "done", "src": "a", "step": 0}), b"x"], "extra frame"),
    ([msgpack.packb({"v": V, "kind": "values", "src": "a", "step": 0,
                     "vals": [["h0", 0, "<f4", [1], "coll", 7]]}), b"1234"], "bad vals entry"),
    ([msgpack.packb({"v": V, "kind": "values", "src": "a", "step": 0,
                     "vals": [["w", 0, "<f4", [-1], "dense"]]}), b""], "not allowed"),
    ([b"\x00" * (70 * 1024)], "exceeds"),
])
def test_malformed_frames_raise_frame_error(frames, why):
    with pytest.raises(FrameError, match=why):
        unpack(frames)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=64), min_size=1, max_size=4))
def test_random_bytes_only_ever_raise_frame_error(frames):
    try:
        unpack(frames)
    except FrameError:
        pass


# -- LoD tensors (NOTE(lod-frame)) -------------------------------------------------------------
def _lod(data, lengths):
    from placegroup.values import LoDTensor
    return LoDTensor.from_lengths(data, lengths)


def test_a_lod_tensor_travels_with_its_offsets_one_frame_per_level():
    ids = _lod(np.arange(7, dtype=np.int64).reshape(7, 1), [[2, 1], [3, 0, 4]])
    frames = pack("values", "trainer:0", 2, [("words", 2, ids), ("w", 2, np.ones(1, np.float32))])
    assert msgpack.unpackb(frames[0])["vals"][0] == ["words", 2, "<i8", [7, 1], "lod", [3, 4]]
    assert len(frames) == 1 + 3 + 1
    m = unpack(frames)
    got = m.vals[0][2]
    assert got.lod() == [[0, 2, 3], [0, 3, 3, 7]]
    np.testing.assert_array_equal(got.data, ids.data)
    np.testing.assert_array_equal(m.vals[1][2], np.ones(1, np.float32))


def test_a_lod_tensor_without_offsets_is_sent_dense():
    from placegroup.values import LoDTensor
    frames = pack("values", "a", 0, [("x", 0, LoDTensor(np.ones((2, 3), np.float32), None))])
    assert msgpack.unpackb(frames[0])["vals"][0][4] == "dense"
    assert isinstance(unpack(frames).vals[0][2], np.ndarray)


def test_lod_frames_are_zero_copy_over_a_real_socket():
    ctx = zmq.Context.instance()
    a, b = ctx.socket(zmq.PAIR), ctx.socket(zmq.PAIR)
    try:
        port = a.bind_to_random_port("tcp://127.0.0.1")
        b.connect(f"tcp://127.0.0.1:{port}")
        x = _lod(np.random.default_rng(0).normal(size=(300, 64)).astype(np.float32), [[100, 0, 200]])
        b.send_multipart(pack("values", "x", 1, [("emb", 1, x)]), copy=False)
        got = unpack(a.recv_multipart(copy=False)).vals[0][2]
        np.testing.assert_array_equal(got.data, x.data)
        assert got.recursive_sequence_lengths() == [[100, 0, 200]]
        assert not got.data.flags.owndata and not got.offsets[0].flags.owndata
    finally:
        a.close(0)
        b.close(0)


def _lod_frames(levels, rows=4, counts=None):
    head = {"v": V, "kind": "values", "src": "a", "step": 0,
            "vals": [["x", 0, "<f4", [rows, 2], "lod", counts if counts is not None else [len(o) for o in levels]]]}
    return ([msgpack.packb(head)] + [np.asarray(o, np.int64).tobytes() for o in levels]
            + [np.zeros((rows, 2), np.float32).tobytes()])


@pytest.mark.parametrize("levels, rows, counts, why", [
    ([[1, 4]], 4, None, "starts at 1, not at 0"),
    ([[0, 3, 2, 4]], 4, None, "not monotone"),
    ([[0, 2, 3]], 4, None, "ends at 3, but the data has 4 rows"),
    ([[0, 1, 3], [0, 2, 4]], 4, None, "level 0 ends at 3, but level 1 holds 2 sequences"),
    ([[0, -1, 4]], 4, None, "not monotone"),
    ([[0, 4]], 4, [3], "does not hold"),            # the level table and the frame disagree
    ([[0, 4]], 4, [], "bad vals entry"),            # no levels
    ([[0, 4]], 4, [0], "bad vals entry"),
    ([[0, 4]], 4, [True], "bad vals entry"),
    ([[0, 4]] * 9, 4, None, "bad vals entry"),      # deeper than MAX_LOD_LEVELS
    ([[0, 4], [0, 4]], 4, [2], "does not hold"),   # one level announced, two sent
])
def test_offsets_that_are_no_lod_of_the_data_are_malformed(levels, rows, counts, why):
    with pytest.raises(FrameError, match=why):
        unpack(_lod_frames(levels, rows, counts))


def test_a_lod_entry_needs_its_frames_and_a_row_dim():
    frames = _lod_frames([[0, 4]])
    with pytest.raises(FrameError, match="missing frames"):
        unpack(frames[:2])
    head = {"v": V, "kind": "values", "src": "a", "step": 0, "vals": [["x", 0, "<f4", [], "lod", [1]]]}
    with pytest.raises(FrameError, match="row dimension"):
        unpack([msgpack.packb(head), np.zeros(1, np.int64).tobytes(), b"\0" * 4])
