"""The cluster ``transpile`` is given, checked: the pservers' and the trainers' endpoints.

``transpile(pservers=..., trainers=...)`` takes them as Fluid 1.x scripts pass them, usually
straight from the launch environment (docs/launch.md): ``PADDLE_INIT_PSERVERS`` as
``"ip:port,..."`` (a bare ip takes ``PADDLE_INIT_PORT``) and ``PADDLE_INIT_TRAINERS`` as a
count. This module turns them into ``ip:port`` lists and says, in the names of those
variables, what is wrong when they describe no job.

NOTE(trainer-endpoints): trainers that exchange data with each other (no pservers: the
trainers form the group and all-reduce; or model-parallel layers: they exchange activations)
need each other's endpoints, and a count does not give them. Fluid's launchers (and
``placegroup launch``) set ``PADDLE_TRAINER_ENDPOINTS`` for every process, so when the
trainers need endpoints and were given only a count, they are taken from there; the count
must agree with it. Trainers that only talk to pservers need no endpoints, and then
``PADDLE_TRAINER_ENDPOINTS`` is not read, so a pserver job transpiles as it always did.

Example::

    pserver_endpoints("127.0.0.1:7164,127.0.0.1:7165", "6174")    # ['127.0.0.1:7164', ...]
    trainer_endpoints(2, "6174", need="no pservers: ...")          # from PADDLE_TRAINER_ENDPOINTS

Thread-safety: the once-per-process note about a bare ip is guarded by a flag only; the
worst a race does is say it twice.
"""
from __future__ import annotations

import logging
from typing import Any

from placegroup import config
from placegroup.errors import ConfigError
from placegroup.ir.place_group import Node

log = logging.getLogger("placegroup.transpiler")
_said_bare_ip = False  # the bare-ip note is said once per process


def _named(spec: Any, variable: str, arg: str) -> str:
    """How a message names ``spec``: the variable it came from when it is that variable's text."""
    return variable if str(spec).strip() == (config.raw(variable) or "") else f"transpile's {arg}"


def parse(spec: Any, default_port: str, what: str) -> list[str]:
    """``"ip,ip:port,..."`` (or a list) -> ``["ip:port", ...]``; a bare ip takes ``default_port``.

    The first bare ip of the process is noted on the ``placegroup.transpiler`` log (a warning,
    on stderr unless logging is set up): it silently means ``PADDLE_INIT_PORT``'s port.

    Raises:
        ConfigError: an item is not ``ip:port`` (several separated by spaces: "use commas"), or
            there is none (names ``what``).
    """
    global _said_bare_ip
    items = spec if isinstance(spec, (list, tuple)) else str(spec).split(",")
    out = []
    for item in (s.strip() for s in items):
        if not item:
            continue
        pieces = item.replace(";", " ").split()  # "ip:port ip:port": the separator is a comma
        if len(pieces) > 1 and all("." in p or ":" in p for p in pieces):
            raise ConfigError(f"{what}: {item!r} is several endpoints: use commas between them, "
                              f"as in {','.join(pieces)!r}")
        ep = item if ":" in item else f"{item}:{default_port}"
        if ep != item and not _said_bare_ip:
            _said_bare_ip = True
            where = (f"the port of PADDLE_INIT_PORT={default_port}" if config.is_set("PADDLE_INIT_PORT")
                     else "PADDLE_INIT_PORT is unset: its default port")
            log.warning("%s: %r has no port, so it means %s (%s); write ip:port to say which port",
                        what, item, ep, where)
        try:
            Node.parse(ep)
        except ValueError as e:
            raise ConfigError(f"{what}: {ep!r} is not ip:port ({e})") from None
        out.append(ep)
    if not out:
        raise ConfigError(f"{what}: no endpoints in {spec!r}")
    return out


def pserver_endpoints(pservers: Any, port: str) -> list[str]:
    """The pservers' ``ip:port`` list; ``[]`` when ``pservers`` is empty (no pservers)."""
    if not pservers:
        return []
    return parse(pservers, port, _named(pservers, "PADDLE_INIT_PSERVERS", "pservers"))


def is_count(trainers: Any) -> bool:
    return isinstance(trainers, int) or str(trainers).strip().isdigit()


def trainer_endpoints(trainers: Any, port: str, need: str | None) -> tuple[int, list[str]]:
    """``(trainer count, their endpoints)`` from ``trainers``: a count or an ``ip:port`` list.

    Args:
        need: why the trainers need endpoints (no pservers, model-parallel layers), or None
            when they do not; with a count and a need, the endpoints come from
            ``PADDLE_TRAINER_ENDPOINTS`` (NOTE(trainer-endpoints)), which may be unset only
            for a single trainer.

    Raises:
        ConfigError: a count below 1; endpoints needed and ``PADDLE_TRAINER_ENDPOINTS`` unset,
            or naming another number of trainers than the count.
    """
    named = _named(trainers, "PADDLE_INIT_TRAINERS", "trainers")
    if not is_count(trainers):
        eps = parse(trainers, port, named)
        return len(eps), eps
    n = int(trainers)
    if n < 1:
        raise ConfigError(f"{named}={n}: a job needs at least one trainer")
    text = config.raw("PADDLE_TRAINER_ENDPOINTS") if need is not None else None
    if text is None:
        if need is None or n == 1:  # one trainer alone has no one to exchange with
            return n, []
        raise ConfigError(f"{need}, so they need each other's endpoints; {named}={n} is a count and "
                          f"PADDLE_TRAINER_ENDPOINTS is unset: set it to the trainers' ip:port list "
                          f"(placegroup launch does), or pass trainers='ip:port,ip:port,...'")
    eps = parse(text, port, "PADDLE_TRAINER_ENDPOINTS")
    if len(eps) != n:
        raise ConfigError(f"{named}={n}, but PADDLE_TRAINER_ENDPOINTS names {len(eps)} trainers "
                          f"({text!r}): make them agree")
    return n, eps


def check_role_has_a_job(pservers: list[str], trainers: Any) -> None:
    """A process launched into a cluster (``TRAINING_ROLE`` set) must find one: pservers, or
    the trainers' endpoints (``trainers`` as a list, or ``PADDLE_TRAINER_ENDPOINTS``).

    Raises:
        ConfigError: a trainer with neither pservers (pserver mode) nor trainer endpoints
            (collective mode), which would silently train alone; a pserver with no pservers.
    """
    role = config.get("TRAINING_ROLE")
    if role is None or pservers:
        return
    if role == "PSERVER":
        raise ConfigError("TRAINING_ROLE=PSERVER, but PADDLE_INIT_PSERVERS (transpile's pservers) is "
                          "empty: list the pservers' ip:port there, this one's among them")
    if is_count(trainers) and not config.is_set("PADDLE_TRAINER_ENDPOINTS"):
        raise ConfigError("TRAINING_ROLE=TRAINER, but PADDLE_INIT_PSERVERS is empty (no pserver mode) "
                          "and PADDLE_TRAINER_ENDPOINTS is unset (no collective mode): set one of "
                          "them, or unset TRAINING_ROLE to train in one process")
