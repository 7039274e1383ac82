"""PlaceGroup text form (`role/ip:port/device:[ids]`): round-trips, malformed input, and executor matching."""

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from placegroup.ir.place_group import (
    ExecutorId,
    ExecutorRole,
    Node,
    Place,
    PlaceGroup,
    PlaceType,
)

T, P, M = ExecutorRole.TRAINER, ExecutorRole.PSERVER, ExecutorRole.MASTER

EXAMPLES = [
    ("pserver/127.0.0.1:7164/gpu:[1,2]",
     PlaceGroup(roles=(P,), nodes=(Node(ip="127.0.0.1", port=7164),),
                places=(Place(type=PlaceType.CUDA, device_id=1),
                        Place(type=PlaceType.CUDA, device_id=2)))),
    ("trainer", PlaceGroup(roles=(T,))),
    ("trainer/192.168.10.1:7164",
     PlaceGroup(roles=(T,), nodes=(Node(ip="192.168.10.1", port=7164),))),
    ("pserver/127.0.0.1:7164/cpu",
     PlaceGroup(roles=(P,), nodes=(Node(ip="127.0.0.1", port=7164),),
                places=(Place(type=PlaceType.CPU),))),
    ("trainer/gpu:[0]", PlaceGroup(roles=(T,), places=(Place(type=PlaceType.CUDA, device_id=0),))),
    ("trainer,pserver", PlaceGroup(roles=(T, P))),
    ("pserver/127.0.0.1:7164,127.0.0.1:7165",
     PlaceGroup(roles=(P,), nodes=(Node(ip="127.0.0.1", port=7164),
                                   Node(ip="127.0.0.1", port=7165)))),
    ("master/gpu_pinned", PlaceGroup(roles=(M,), places=(Place(type=PlaceType.CUDAPinned),))),
    ("pserver,trainer/localhost:1/cpu",
     PlaceGroup(roles=(P, T), nodes=(Node(ip="localhost", port=1),),
                places=(Place(type=PlaceType.CPU),))),
]


@pytest.mark.parametrize("text,pg", EXAMPLES, ids=[t for t, _ in EXAMPLES])
def test_examples_round_trip(text, pg):
    assert PlaceGroup.parse(text) == pg
    assert str(pg) == pg.format() == text
    assert PlaceGroup.parse(str(pg)) == pg
    assert hash(PlaceGroup.parse(text)) == hash(pg)
    assert PlaceGroup.model_validate_json(pg.model_dump_json()) == pg


_ips = st.tuples(*[st.integers(0, 255)] * 4).map(lambda t: ".".join(map(str, t)))
_nodes = st.builds(Node, ip=_ips, port=st.integers(1, 65535))
_gpus = st.lists(st.integers(0, 15), min_size=1, max_size=4, unique=True).map(
    lambda ids: tuple(Place(type=PlaceType.CUDA, device_id=i) for i in ids))
_places = st.one_of(st.just(()), st.just((Place(type=PlaceType.CPU),)),
                    st.just((Place(type=PlaceType.CUDAPinned),)), _gpus)
placegroups = st.builds(
    PlaceGroup,
    roles=st.lists(st.sampled_from(list(ExecutorRole)), min_size=1, max_size=3,
                   unique=True).map(tuple),
    nodes=st.lists(_nodes, max_size=3, unique_by=lambda n: n.endpoint).map(tuple),
    places=_places,
)


@settings(max_examples=200, deadline=None)
@given(placegroups)
def test_random_placegroups_round_trip(pg):
    text = str(pg)
    assert PlaceGroup.parse(text) == pg
    assert str(PlaceGroup.parse(text)) == text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="trainepsvmd/:,.0123456789gpu[]_c A", max_size=30))
def test_any_text_parses_exactly_or_raises_value_error(text):
    # Whatever the grammar accepts must format back to the same characters.
    try:
        pg = PlaceGroup.parse(text)
    except ValueError as e:
        assert str(e).startswith(f"bad PlaceGroup {text!r}: ")
    else:
        assert str(pg) == text


MALFORMED = [
    ("", r"the text is empty"),
    ("TRAINER", r"role 'TRAINER' is not one of trainer, pserver, master"),
    ("Trainer/127.0.0.1:7164", r"role 'Trainer'"),
    ("trainer /1.2.3.4:1", r"role 'trainer '"),
    ("trainer/ 1.2.3.4:1", r"ip ' 1.2.3.4'"),
    ("worker", r"role 'worker' is not one of"),
    ("trainer,,pserver", r"role '' is not one of"),
    ("trainer,trainer", r"role 'trainer' is repeated"),
    ("pserver/1.2.3.4:x", r"port 'x' is not an integer"),
    ("pserver/1.2.3.4:0", r"port '0' is out of range 1\.\.65535"),
    ("pserver/1.2.3.4:65536", r"port '65536' is out of range"),
    ("pserver/1.2.3.4:-1", r"port '-1' is not an integer"),
    ("pserver/1.2.3.4:07164", r"port '07164' has a leading zero"),
    ("pserver/1.2.3.4:", r"port '' is not an integer"),
    ("pserver/:7164", r"ip '' must be"),
    ("pserver/Host:7164", r"ip 'Host' must be lower-case"),
    ("pserver/1.2.3.4:1,1.2.3.4:1", r"node '1\.2\.3\.4:1' is repeated"),
    ("pserver/1.2.3.4:1/1.2.3.4:2", r"places '1\.2\.3\.4:2' is not cpu"),
    ("pserver/cpu/cpu", r"node 'cpu' has no ':port'"),
    ("trainer/localhost", r"places 'localhost' is not cpu, gpu:\[ids\] or gpu_pinned"),
    ("trainer/CPU", r"places 'CPU' is not cpu"),
    ("trainer/gpu", r"places 'gpu' is not cpu"),
    ("trainer/gpu:[]", r"places 'gpu:\[\]' lists no gpu id"),
    ("trainer/gpu:[a]", r"gpu id 'a' is not an integer"),
    ("trainer/gpu:[1,]", r"gpu id '' is not an integer"),
    ("trainer/gpu:[1, 2]", r"gpu id ' 2' is not an integer"),
    ("trainer/gpu:[01]", r"gpu id '01' has a leading zero"),
    ("trainer/gpu:[1,1]", r"gpu id '1' is repeated"),
    ("trainer/gpu:[1]x", r"places 'gpu:\[1\]x' is not cpu"),
    ("trainer/", r"part 2 of 2 is empty"),
    ("/cpu", r"part 1 of 2 is empty"),
    ("trainer//cpu", r"part 2 of 3 is empty"),
    ("trainer/1.2.3.4:1/cpu/", r"4 '/'-separated parts"),
]


@pytest.mark.parametrize("text,why", MALFORMED, ids=[repr(t) for t, _ in MALFORMED])
def test_malformed_text_names_the_bad_part(text, why):
    with pytest.raises(ValueError, match=re.escape(f"bad PlaceGroup {text!r}: ") + f"({why})"):
        PlaceGroup.parse(text)


@pytest.mark.parametrize("kwargs", [
    dict(roles=()),
    dict(roles=(T, T)),
    dict(roles=(T,), nodes=(Node(ip="a", port=1), Node(ip="a", port=1))),
    dict(roles=(T,), places=(Place(type=PlaceType.CPU, device_id=3),)),
    dict(roles=(T,), places=(Place(type=PlaceType.CUDAPinned, device_id=1),)),
    dict(roles=(T,), places=(Place(type=PlaceType.CPU), Place(type=PlaceType.CPU))),
    dict(roles=(T,), places=(Place(type=PlaceType.CPU), Place(type=PlaceType.CUDA))),
    dict(roles=(T,), places=(Place(type=PlaceType.CUDA, device_id=2),) * 2),
], ids=["no-roles", "dup-role", "dup-node", "cpu3", "pinned1", "2cpu", "cpu+cuda", "dup-gpu"])
def test_unformattable_placegroups_are_rejected_at_construction(kwargs):
    with pytest.raises(ValueError):
        PlaceGroup(**kwargs)


@pytest.mark.parametrize("kwargs", [
    dict(ip="a", port=0), dict(ip="a", port=65536), dict(ip="a", port=True),
    dict(ip="a", port="80"), dict(ip="", port=1), dict(ip="a b", port=1),
    dict(ip="a,b", port=1), dict(ip="a/b", port=1), dict(ip="a:b", port=1),
])
def test_bad_nodes_are_rejected(kwargs):
    with pytest.raises(ValueError):
        Node(**kwargs)


def test_models_are_frozen_and_hashable():
    pg = PlaceGroup.parse("trainer/1.2.3.4:5")
    with pytest.raises(ValueError):
        pg.roles = (P,)
    assert len({pg, PlaceGroup.parse("trainer/1.2.3.4:5"), PlaceGroup.parse("trainer")}) == 2


def test_node_and_executor_id_helpers():
    node = Node.parse("127.0.0.1:7164")
    assert node == Node(ip="127.0.0.1", port=7164) and node.endpoint == "127.0.0.1:7164"
    with pytest.raises(ValueError, match=r"node '127\.0\.0\.1' has no ':port'"):
        Node.parse("127.0.0.1")
    ex = ExecutorId.parse("PSERVER", "127.0.0.1:7164")
    assert ex == ExecutorId(role=P, endpoint="127.0.0.1:7164")
    assert str(ex) == "pserver@127.0.0.1:7164" and str(ExecutorId.parse("Trainer")) == "trainer"
    with pytest.raises(ValueError, match="role 'worker'"):
        ExecutorId.parse("worker")
    with pytest.raises(ValueError, match="port 'x'"):
        ExecutorId.parse("trainer", "1.2.3.4:x")
    assert PlaceGroup.of("pserver", "127.0.0.1:7164") == PlaceGroup.parse("pserver/127.0.0.1:7164")
    assert PlaceGroup.of(T, places=(Place(type=PlaceType.CPU),)) == PlaceGroup.parse("trainer/cpu")


def _executors(role, n=4, gpus=()):
    places = tuple(Place(type=PlaceType.CUDA, device_id=g) for g in gpus)
    return [ExecutorId(role=role, endpoint=f"10.0.0.{i}:7164", places=places) for i in range(n)]


def test_replicated_matches_every_executor_of_its_roles():
    pg = PlaceGroup.parse("trainer")
    assert pg.is_replicated
    assert all(pg.matches(e) for e in _executors(T) + [ExecutorId(role=T)])
    assert all(pg.matches(e) for e in _executors(T, gpus=(3,)))  # places say where, not who
    both = PlaceGroup.parse("trainer,pserver/gpu:[0]")
    assert all(both.matches(e) for e in _executors(T) + _executors(P))
    assert not any(both.matches(e) for e in _executors(M))


def test_node_specific_matches_only_its_endpoints():
    pg = PlaceGroup.parse("pserver/10.0.0.1:7164,10.0.0.3:7164/cpu")
    assert not pg.is_replicated
    assert [pg.matches(e) for e in _executors(P)] == [False, True, False, True]
    assert not pg.matches(ExecutorId(role=P))  # an executor without an endpoint is no node
    assert not pg.matches(ExecutorId(role=P, endpoint="10.0.0.1:7165"))


def test_wrong_role_never_matches():
    for text in ["pserver", "pserver/10.0.0.1:7164", "master,pserver/10.0.0.0:7164"]:
        pg = PlaceGroup.parse(text)
        assert not any(pg.matches(e) for e in _executors(T) + [ExecutorId(role=T)])
