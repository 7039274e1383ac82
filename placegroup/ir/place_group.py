"""PlaceGroup: which executors run an op or hold a var, and on which devices.

Text form, lower case and without spaces; ``PlaceGroup.parse`` and ``str(pg)`` round-trip it::

    placegroup := roles [ "/" nodes ] [ "/" places ]
    roles      := role { "," role }            role := "trainer" | "pserver" | "master"
    nodes      := ip ":" port { "," ip ":" port }
    places     := "cpu" | "gpu:[" id { "," id } "]" | "gpu_pinned"

Every model here is a frozen, hashable pydantic model, so it is safe to share between threads.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Annotated, Optional, Sequence, Tuple, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

# NOTE(canonical-text): only text that formats back to the same characters is accepted, so
# ports and ids are plain decimals (no sign, no leading zero) and an ip is a lower-case host
# without ':' (ambiguous with the port), ',', '/', '@' or spaces. IPv6 is not in the grammar.
_UINT = re.compile(r"0|[1-9][0-9]*")
_HOST = re.compile(r"[0-9a-z._-]+")
_GPU = re.compile(r"gpu:\[(.*)\]")


class _TextEnum(str, Enum):
    def __str__(self) -> str:  # "trainer", not "ExecutorRole.TRAINER", on every Python
        return self.value


class ExecutorRole(_TextEnum):
    """The job an executor process does; its value is its text form."""

    TRAINER = "trainer"
    PSERVER = "pserver"
    MASTER = "master"


class PlaceType(_TextEnum):
    """The kind of device memory a Place names."""

    CPU = "CPU"
    CUDA = "CUDA"
    CUDAPinned = "CUDAPinned"


def _role(value: Union[ExecutorRole, str]) -> ExecutorRole:
    try:
        return ExecutorRole(value)
    except ValueError:
        names = ", ".join(r.value for r in ExecutorRole)
        raise ValueError(f"role {value!r} is not one of {names}") from None


def _uint(text: str, what: str) -> int:
    if not _UINT.fullmatch(text):
        why = "has a leading zero" if text.isascii() and text.isdigit() else "is not an integer"
        raise ValueError(f"{what} {text!r} {why}")
    return int(text)


def _unique(items: Sequence, what: str) -> Sequence:
    for i, item in enumerate(items):
        if item in items[:i]:
            raise ValueError(f"{what} '{item}' is repeated")
    return items


def _check_ip(ip: str) -> str:
    if not _HOST.fullmatch(ip):
        raise ValueError(f"ip {ip!r} must be lower-case letters, digits, '.', '-' or '_'")
    return ip


def _check_port(port: int) -> int:
    if not 1 <= port <= 65535:
        raise ValueError(f"port '{port}' is out of range 1..65535")
    return port


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Node(_Frozen):
    """One executor process's address.

    Example:
        >>> Node.parse("127.0.0.1:7164") == Node(ip="127.0.0.1", port=7164)
        True
    """

    ip: Annotated[str, AfterValidator(_check_ip)]
    # strict: Node(port=True) or port="80" is a caller's bug, not a port.
    port: Annotated[int, Field(strict=True), AfterValidator(_check_port)]

    @property
    def endpoint(self) -> str:
        """``"ip:port"``, the form used in PlaceGroup text and ExecutorId."""
        return f"{self.ip}:{self.port}"

    @classmethod
    def parse(cls, endpoint: str) -> Node:
        """Parses ``"ip:port"``.

        Raises:
            ValueError: naming the bad part, e.g. ``port 'x' is not an integer``.
        """
        ip, colon, port = endpoint.rpartition(":")
        if not colon:
            raise ValueError(f"node {endpoint!r} has no ':port'")
        return cls(ip=_check_ip(ip), port=_check_port(_uint(port, "port")))


class Place(_Frozen):
    """A device memory: ``Place(type=PlaceType.CUDA, device_id=1)`` is GPU 1."""

    type: PlaceType
    device_id: int = Field(default=0, strict=True, ge=0)

    def __str__(self) -> str:
        return f"{self.type}:{self.device_id}"


def _endpoint(endpoint: Optional[str]) -> Optional[str]:
    return None if endpoint is None else Node.parse(endpoint).endpoint


class ExecutorId(_Frozen):
    """Who an executor is: its role, its ``ip:port`` endpoint (if any) and its devices.

    Example:
        >>> str(ExecutorId.parse("PSERVER", "127.0.0.1:7164"))
        'pserver@127.0.0.1:7164'
    """

    role: ExecutorRole
    endpoint: Annotated[Optional[str], AfterValidator(_endpoint)] = None
    places: Tuple[Place, ...] = ()
    rank: Optional[int] = None  # the trainer id (trainers only)

    @classmethod
    def parse(cls, role: str, endpoint: Optional[str] = None,
              places: Sequence[Place] = (), rank: Optional[int] = None) -> ExecutorId:
        """Builds an ExecutorId from the launcher's strings; ``role`` may be any case.

        Raises:
            ValueError: the role is unknown or the endpoint is not ``ip:port``.
        """
        return cls(role=_role(role.lower()), endpoint=endpoint, places=tuple(places), rank=rank)

    @property
    def name(self) -> str:
        """The name on the wire (docs/protocol.md): ``trainer:0`` or ``pserver@ip:port``."""
        return str(self)

    def __str__(self) -> str:
        """The one name users read, in messages, logs and dumps, as on the wire: a trainer by
        its id (``trainer:0``), else the role and its endpoint (``pserver@ip:port``)."""
        if self.role == ExecutorRole.TRAINER and self.rank is not None:
            return f"trainer:{self.rank}"
        return str(self.role) if self.endpoint is None else f"{self.role}@{self.endpoint}"


def _format_places(places: Tuple[Place, ...]) -> str:
    """The places part of the text; ValueError where the grammar cannot say ``places``."""
    if not places:
        return ""
    if len(places) == 1 and places[0].device_id == 0 and places[0].type != PlaceType.CUDA:
        return "cpu" if places[0].type == PlaceType.CPU else "gpu_pinned"
    if any(p.type != PlaceType.CUDA for p in places):
        raise ValueError(f"places ({', '.join(map(str, places))}) are not one cpu, one "
                         "gpu_pinned (both device 0) or only CUDA places")
    return "gpu:[" + ",".join(map(str, _unique([p.device_id for p in places], "gpu id"))) + "]"


def _parse_places(text: str) -> Tuple[Place, ...]:
    if text in ("cpu", "gpu_pinned"):
        return (Place(type=PlaceType.CPU if text == "cpu" else PlaceType.CUDAPinned),)
    m = _GPU.fullmatch(text)
    if m is None:
        raise ValueError(f"places {text!r} is not cpu, gpu:[ids] or gpu_pinned")
    if not m.group(1):
        raise ValueError(f"places {text!r} lists no gpu id")
    return tuple(Place(type=PlaceType.CUDA, device_id=_uint(i, "gpu id"))
                 for i in m.group(1).split(","))


def _check_roles(roles: Tuple[ExecutorRole, ...]) -> Tuple[ExecutorRole, ...]:
    if not roles:
        raise ValueError("roles must not be empty")
    return _unique(roles, "role")


def _check_nodes(nodes: Tuple[Node, ...]) -> Tuple[Node, ...]:
    _unique([n.endpoint for n in nodes], "node")
    return nodes


def _check_places(places: Tuple[Place, ...]) -> Tuple[Place, ...]:
    _format_places(places)  # checked at construction so that every PlaceGroup formats
    return places


class PlaceGroup(_Frozen):
    """Where an op runs or a var lives: some roles, optionally some nodes and devices.

    Roles, nodes and gpu ids keep their order, so the text form round-trips exactly.

    Example:
        >>> pg = PlaceGroup.parse("pserver/127.0.0.1:7164/gpu:[1,2]")
        >>> pg.matches(ExecutorId.parse("pserver", "127.0.0.1:7164")), str(pg) == pg.format()
        (True, True)
    """

    roles: Annotated[Tuple[ExecutorRole, ...], AfterValidator(_check_roles)]
    nodes: Annotated[Tuple[Node, ...], AfterValidator(_check_nodes)] = ()
    places: Annotated[Tuple[Place, ...], AfterValidator(_check_places)] = ()

    @classmethod
    def of(cls, role: Union[ExecutorRole, str], endpoint: Optional[str] = None,
           places: Sequence[Place] = ()) -> PlaceGroup:
        """One role and at most one node: ``PlaceGroup.of("pserver", "127.0.0.1:7164")``."""
        nodes = () if endpoint is None else (Node.parse(endpoint),)
        return cls(roles=(_role(role),), nodes=nodes, places=tuple(places))

    @classmethod
    def parse(cls, text: str) -> PlaceGroup:
        """Parses the text form (grammar in the module docstring).

        Raises:
            ValueError: ``bad PlaceGroup '<text>': <the bad part and why>``.
        """
        try:
            if not text:
                raise ValueError("the text is empty")
            parts = text.split("/")
            if len(parts) > 3:
                raise ValueError(f"{len(parts)} '/'-separated parts, at most roles/nodes/places")
            for i, part in enumerate(parts):
                if not part:
                    raise ValueError(f"part {i + 1} of {len(parts)} is empty")
            roles = tuple(_role(r) for r in parts[0].split(","))
            rest = parts[1:]
            # A lone second part is nodes only if it has a ':port' and is not 'gpu:[...]'.
            if len(rest) == 1 and (":" not in rest[0] or rest[0].startswith("gpu:[")):
                rest = ["", rest[0]]
            nodes = tuple(Node.parse(n) for n in rest[0].split(",")) if rest and rest[0] else ()
            places = _parse_places(rest[1]) if len(rest) == 2 else ()
            return cls(roles=roles, nodes=nodes, places=places)
        except ValidationError as e:  # a rule that only the model checks, e.g. repeats
            err = e.errors()[0]
            reason = err.get("ctx", {}).get("error", err["msg"])
            raise ValueError(f"bad PlaceGroup {text!r}: {reason}") from None
        except ValueError as e:
            raise ValueError(f"bad PlaceGroup {text!r}: {e}") from None

    def format(self) -> str:
        """The canonical text form; ``PlaceGroup.parse(pg.format()) == pg``."""
        parts = [",".join(map(str, self.roles)), ",".join(n.endpoint for n in self.nodes),
                 _format_places(self.places)]
        return "/".join(p for p in parts if p)

    __str__ = format

    def __repr__(self) -> str:
        return f"PlaceGroup.parse({self.format()!r})"

    @property
    def is_replicated(self) -> bool:
        """True when no nodes are named: every executor of the roles holds its own copy."""
        return not self.nodes

    def matches(self, executor: ExecutorId) -> bool:
        """Whether ``executor`` runs the op / holds the var (its role is listed and, when
        nodes are named, its endpoint is one of them).

        The executor's places are not compared: they say where it runs, not who it is.

        Example:
            >>> PlaceGroup.of("trainer").matches(ExecutorId.parse("trainer", "10.0.0.9:1"))
            True
        """
        if executor.role not in self.roles:
            return False
        return self.is_replicated or executor.endpoint in {n.endpoint for n in self.nodes}
