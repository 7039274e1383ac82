"""Which executors a prog.bin names, and which one ``placegroup dump --role ...`` means.

A transpiled program records its job (``program.cluster``): its trainers (by id, with their
``ip:port`` when they were given as a list) and its pservers (by ``ip:port``). ``dump`` lists
them (``--endpoints``, and a header line of the text) and checks a view's flags against them,
so a pserver left unnamed or an endpoint not in the job is an error that lists the valid
choices, never an empty view. A program placed by hand records no job: any role and endpoint
is taken as given there.

Example:
    >>> pick(program, "pserver")          # doctest: +SKIP
    ConfigError: --role pserver: this program has 2 pservers; name one with --endpoint: ...
"""
from __future__ import annotations

from placegroup.errors import ConfigError
from placegroup.ir.cluster import Cluster
from placegroup.ir.place_group import ExecutorId, ExecutorRole

TRAINER, PSERVER = ExecutorRole.TRAINER, ExecutorRole.PSERVER


def members(program) -> list[ExecutorId] | None:
    """The executors of the job ``program`` records (trainers first), or None when it records none."""
    return None if program.cluster is None else list(Cluster.from_program(program).executors)


def flags(e: ExecutorId) -> str:
    """The ``dump`` flags that show what ``e`` runs and holds."""
    if e.role == TRAINER and e.rank is not None:
        return f"--role trainer --trainer-id {e.rank}"
    return f"--role {e.role}" + (f" --endpoint {e.endpoint}" if e.endpoint else "")


def choices(program, role: ExecutorRole) -> str:
    """How to name each executor of ``role``: ``--endpoint 127.0.0.1:7164 | 127.0.0.1:7165``."""
    mine = [e for e in members(program) or () if e.role == role]
    if role == TRAINER:
        if mine[0].endpoint is None:
            return "--trainer-id " + ("0" if len(mine) == 1 else f"0..{len(mine) - 1}")
        return "--trainer-id " + " | ".join(f"{e.rank} ({e.endpoint})" for e in mine)
    return "--endpoint " + " | ".join(e.endpoint for e in mine)


def header(program) -> str | None:
    """The text dump's line naming the job's executors and how to view one; None without a job."""
    everyone = members(program)
    if everyone is None:
        return None
    parts = []
    for role in (TRAINER, PSERVER):
        n = sum(e.role == role for e in everyone)
        if n:
            parts.append(f"{n} {role}{'s' if n > 1 else ''} (--role {role} {choices(program, role)})")
    return "// executors: " + ", ".join(parts) + "; --endpoints lists them"


def listing(program, path: str) -> str:
    """What ``dump --endpoints`` prints: one executor a line, with the flags of its view."""
    everyone = members(program)
    if everyone is None:
        return (f"{path} records no cluster (a program placed by hand, or not transpiled): "
                f"--role and --endpoint are taken as given\n")
    rows = [(e.name, f"placegroup dump {path} {flags(e)}") for e in everyone]
    width = max(len(n) for n, _ in rows)
    return "".join(f"{n.ljust(width)}  {cmd}\n" for n, cmd in rows)


def pick(program, role: str, endpoint: str | None = None, trainer_id: int | None = None) -> ExecutorId:
    """The executor that ``--role``, ``--endpoint`` and ``--trainer-id`` name in ``program``.

    Args:
        role: any case; ``endpoint``: ``ip:port``; ``trainer_id``: a trainer's id.
    Returns:
        The job's own entry for it (a trainer listed by endpoint gets that endpoint), or, for
        a program that records no job, ``ExecutorId.parse(role, endpoint, rank=trainer_id)``.
    Raises:
        ValueError: a role or endpoint that does not parse.
        ConfigError: one line listing the valid choices: the role has several executors and
            none is named, or the one named is not in the job.
    """
    wanted = ExecutorId.parse(role, endpoint, rank=trainer_id)
    if trainer_id is not None and wanted.role != TRAINER:
        raise ConfigError(f"--trainer-id goes with --role trainer, not --role {wanted.role}")
    everyone = members(program)
    if everyone is None:
        return wanted
    mine = [e for e in everyone if e.role == wanted.role]
    if not mine:
        roles = sorted({str(e.role) for e in everyone})
        raise ConfigError(f"--role {wanted.role}: this program's cluster has no {wanted.role}; "
                          f"its roles are {', '.join(roles)}")
    if endpoint is None and trainer_id is None:
        if len(mine) == 1:
            return mine[0]
        raise ConfigError(f"--role {wanted.role}: this program has {len(mine)} {wanted.role}s; name one "
                          f"with {choices(program, wanted.role)}")
    hits = [e for e in mine if (trainer_id is None or e.rank == trainer_id)
            and (endpoint is None or e.endpoint == endpoint)]
    if not hits:
        given = " ".join(f for f in (f"--endpoint {endpoint}" if endpoint else "",
                                     f"--trainer-id {trainer_id}" if trainer_id is not None else "") if f)
        raise ConfigError(f"{given} is no {wanted.role} of this program; name one of its {wanted.role}s with "
                          f"{choices(program, wanted.role)}")
    return hits[0]
