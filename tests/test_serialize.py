"""prog.bin (placegroup/ir/serialize.py, docs/prog_bin.md): round trips of real programs, and every
way a file can be bad raising SerializationError that names the problem."""
import hashlib

import msgpack
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import placegroup as fluid
from placegroup.ir import serialize
from placegroup.ir.framework import program_to_dict
from placegroup.errors import SerializationError
from placegroup.ir.place_group import ExecutorId, PlaceGroup
from tests.conftest import build_fit_a_line

PSERVER = "pserver/127.0.0.1:7164"


def fit_a_line():
    return build_fit_a_line(0.01)


def place_by_hand(main):
    """Optimizer ops and persistable vars on one pserver, the rest on the trainers."""
    for op in main.global_block().ops:
        op.place = PlaceGroup.parse(PSERVER if op.role == "optimize" else "trainer")
        if op.type == "sgd":
            op.edges = {"Grad": "each"}
    for v in main.global_block().vars.values():
        v.place = PlaceGroup.parse(PSERVER if v.persistable else "trainer/gpu:[0]")
    main.executor = ExecutorId.parse("pserver", "127.0.0.1:7164")
    main.provenance = ["placement"]


def run_steps(main, startup, loss_name, steps=3):
    rng = np.random.default_rng(7)
    exe, scope = fluid.Executor(fluid.CPUPlace()), fluid.Scope()
    exe.run(startup, scope=scope)
    losses = []
    for _ in range(steps):
        feed = {"x": rng.standard_normal((8, 13)).astype("float32"),
                "y": rng.standard_normal((8, 1)).astype("float32")}
        losses.append(exe.run(main, feed=feed, fetch_list=[loss_name], scope=scope)[0])
    return np.concatenate(losses), scope


def frame(payload: bytes, version: int = serialize.SCHEMA_VERSION, magic: bytes = serialize.MAGIC):
    """A valid header over ``payload``: the digest passes, so only the schema can object."""
    digest = hashlib.blake2b(payload, digest_size=16).digest()
    return serialize._HEAD.pack(magic, version, len(payload), digest) + payload


@pytest.mark.parametrize("placed", [False, True], ids=["fit_a_line", "placed_by_hand"])
def test_round_trip_keeps_text_and_execution(fresh_programs, placed):
    main, startup = fresh_programs
    avg = fit_a_line()
    if placed:
        place_by_hand(main)
    data = main.to_bytes()
    back = fluid.Program.from_bytes(data)
    assert str(back) == str(main)
    assert back.to_bytes() == data  # deterministic: the same program, the same bytes
    assert back.executor == main.executor and back.provenance == main.provenance
    for a, b in zip(main.global_block().ops, back.global_block().ops):
        assert (a.place, a.role, a.attrs, a.edges, a.param) == (b.place, b.role, b.attrs, b.edges,
                                                                 b.param)
    startup_back = fluid.Program.from_bytes(startup.to_bytes())
    want, _ = run_steps(main, startup, avg.name)
    got, _ = run_steps(back, startup_back, avg.name)
    np.testing.assert_array_equal(got, want)


def test_placed_text_shows_places(fresh_programs):
    main, _ = fresh_programs
    fit_a_line()
    place_by_hand(main)
    text = str(fluid.Program.from_bytes(main.to_bytes()))
    assert text.startswith("program seed=0 executor=pserver@127.0.0.1:7164 passes=['placement']")
    assert "var fc_0.w_0 : float32[13, 1] param persistable @pserver/127.0.0.1:7164" in text
    assert "var x : float32[-1, 13] data @trainer/gpu:[0]" in text


@pytest.fixture
def good(fresh_programs):
    fit_a_line()
    return fresh_programs[0].to_bytes()


def _flip(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x40]) + data[at + 1:]


CORRUPTIONS = [
    ("short_header", lambda d: d[:10], r"truncated: 10 bytes, shorter than its 32-byte header"),
    ("truncated", lambda d: d[:-1], r"truncated or padded: header says \d+ payload bytes, file has"),
    ("padded", lambda d: d + b"\0", r"truncated or padded"),
    ("flipped_payload_byte", lambda d: _flip(d, len(d) - 5), r"checksum mismatch"),
    ("flipped_digest_byte", lambda d: _flip(d, 20), r"checksum mismatch"),
    ("wrong_magic", lambda d: b"NOTPG!" + d[6:], r"not a prog.bin: magic is b'NOTPG!', expected b'PGPROG'"),
    ("wrong_version", lambda d: d[:6] + (7).to_bytes(2, "little") + d[8:],
     r"schema version 7; this placegroup reads version 1"),
    ("empty", lambda d: b"", r"truncated: 0 bytes"),
]


@pytest.mark.parametrize("name,corrupt,message", CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_bad_file_names_the_problem(good, name, corrupt, message):
    with pytest.raises(SerializationError, match=message):
        fluid.Program.from_bytes(corrupt(good))


def _set(d, path, value):
    *parents, last = path
    for k in parents:
        d = d[k]
    if value is _DELETE:
        del d[last]
    else:
        d[last] = value


_DELETE = object()
TAMPERED = [
    ("missing_op_type", ("blocks", 0, "ops", 0, "type"), _DELETE,
     r"does not fit schema 1: field 'blocks\.0\.ops\.0\.type': Field required"),
    ("missing_blocks", ("blocks",), _DELETE, r"field 'blocks': Field required"),
    ("shape_not_a_list", ("blocks", 0, "vars", 0, "shape"), "abc",
     r"field 'blocks\.0\.vars\.0\.shape': Input should be a valid list"),
    ("dtype_not_a_str", ("blocks", 0, "vars", 1, "dtype"), 5,
     r"field 'blocks\.0\.vars\.1\.dtype': Input should be a valid string"),
    ("unknown_field", ("blocks", 0, "ops", 2, "colour"), "red",
     r"field 'blocks\.0\.ops\.2\.colour': Extra inputs are not permitted"),
    ("unknown_op_type", ("blocks", 0, "ops", 1, "type"), "no_such_op",
     r"prog.bin block 0: unknown op type 'no_such_op'"),
]


@pytest.mark.parametrize("name,path,value,message", TAMPERED, ids=[t[0] for t in TAMPERED])
def test_tampered_payload_is_rejected_by_the_schema(fresh_programs, name, path, value, message):
    fit_a_line()
    d = program_to_dict(fresh_programs[0])
    _set(d, path, value)
    with pytest.raises(SerializationError, match=message):
        fluid.Program.from_bytes(frame(msgpack.packb(d, use_bin_type=True)))


def test_payload_that_is_not_msgpack():
    with pytest.raises(SerializationError, match="payload is not valid msgpack"):
        fluid.Program.from_bytes(frame(b"\xc1"))  # 0xc1 is never used in msgpack


# Values that fit the schema's types but not the IR: serialize.py lets the ValueError of
# PlaceGroup.parse / ExecutorId.parse and the ProgramError of normalize_dtype escape (reported
# to its owner). Not strict, so the fix turns these green without a test edit.
INVALID_VALUES = [
    ("bad_var_place", ("blocks", 0, "vars", 0, "place"), "bogus!", "bogus"),
    ("bad_op_place", ("blocks", 0, "ops", 0, "place"), "trainer/x", "trainer/x"),
    ("bad_dtype", ("blocks", 0, "vars", 0, "dtype"), "float33", "float33"),
    ("bad_executor_role", ("executor",), {"role": "chef"}, "chef"),
]


@pytest.mark.parametrize("name,path,value,message", INVALID_VALUES, ids=[t[0] for t in INVALID_VALUES])
def test_values_the_ir_rejects_are_serialization_errors(fresh_programs, name, path, value, message):
    fit_a_line()
    d = program_to_dict(fresh_programs[0])
    _set(d, path, value)
    with pytest.raises(SerializationError, match=message):
        fluid.Program.from_bytes(frame(msgpack.packb(d, use_bin_type=True)))


_GOOD = None


def _good_bytes() -> bytes:
    """One valid prog.bin for the hypothesis tests (built once; fixtures do not mix with @given)."""
    global _GOOD
    if _GOOD is None:
        main, startup = fluid.Program(), fluid.Program()
        with fluid.program_guard(main, startup), fluid.unique_name.guard():
            fit_a_line()
        place_by_hand(main)
        _GOOD = main.to_bytes()
    return _GOOD


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=list(HealthCheck))


@FUZZ
@given(st.binary(max_size=512))
def test_random_bytes_raise_only_serialization_error(data):
    with pytest.raises(SerializationError):
        fluid.Program.from_bytes(data)


@FUZZ
@given(st.binary(max_size=256))
def test_random_bytes_after_a_valid_magic_raise_only_serialization_error(tail):
    with pytest.raises(SerializationError):
        fluid.Program.from_bytes(serialize.MAGIC + (1).to_bytes(2, "little") + tail)


@FUZZ
@given(st.data())
def test_random_truncations_raise_only_serialization_error(data):
    good = _good_bytes()
    cut = data.draw(st.integers(min_value=0, max_value=len(good) - 1))
    with pytest.raises(SerializationError):
        fluid.Program.from_bytes(good[:cut])


@FUZZ
@given(st.data())
def test_random_byte_flips_raise_only_serialization_error(data):
    good = bytearray(_good_bytes())
    at = data.draw(st.integers(min_value=0, max_value=len(good) - 1))
    good[at] ^= data.draw(st.integers(min_value=1, max_value=255))
    with pytest.raises(SerializationError):
        fluid.Program.from_bytes(bytes(good))


def test_clone_is_a_round_trip(fresh_programs):
    main, _ = fresh_programs
    fit_a_line()
    place_by_hand(main)
    clone = main.clone()
    assert str(clone) == str(main) and clone.to_bytes() == main.to_bytes()
