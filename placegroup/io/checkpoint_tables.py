"""Tables keyed by raw ids (``sparse_embedding``) in checkpoints: saved as their arrays, loaded
onto any number of pservers.

A table shard is no array of rows of its table: its rows are whatever ids it holds. It is saved
as one manifest entry per array of ``DynamicTable.state()`` (keys, values, the optimizer's
state, counts, last-seen steps, the candidates, the update counter, and the config as JSON
bytes), each of kind ``table``, named ``<var>:<array>``, ``of`` the table.

NOTE(table-reshard): a loading shard k of M takes from every saved piece the ids with
``mix64(id) % M == k`` (``shard`` in placegroup/util/dynamic_table.py), one piece at a time, so
a pserver holds its shard and one piece, never the whole table. Nothing a row holds depends on
which shard held it (NOTE(dynamic-table-determinism)), so a sync job resumed onto another
number of pservers continues bit for bit. The loading program's config (its eviction settings
may change on resume) replaces the saved one, but its dim, dtype and optimizer must match.
"""
from __future__ import annotations

import numpy as np

from placegroup.errors import SerializationError
from placegroup.util.dynamic_table import DynamicTable, TableConfig, shard, state_of_records

KIND = "table"


def is_table(value) -> bool:
    return isinstance(value, DynamicTable)


def where(var) -> tuple[str, int, int]:
    """(the table, shard count, this shard's index) of a table var, from the sparse pass's
    ``slice_of`` (a table of one process: itself, 1, 0)."""
    part = var.attrs.get("slice_of")
    return (part[0], int(part[3]), int(part[2])) if part and int(part[2]) >= 0 else (var.name, 1, 0)


def load_table(var, current: DynamicTable, pieces: list, read) -> DynamicTable:
    """The shard ``var`` holds now, from the saved ``pieces`` of its table (entries of kind
    ``table``; ``read(entry) -> array`` reads one whole). ``current`` is the table the startup
    program made: its config is kept (NOTE(table-reshard)).

    Raises:
        SerializationError: a piece misses an array, or was saved with another dim, dtype or
            optimizer (naming the var and what differs).
    """
    _, n, k = where(var)
    by_piece: dict[str, list] = {}
    for e in pieces:
        by_piece.setdefault(e.name.rpartition(":")[0], []).append(e)
    want = current.config
    parts = []
    for piece, entries in sorted(by_piece.items()):
        try:
            state = state_of_records(piece, {e.name: read(e) for e in entries})
            saved = TableConfig.from_json(str(state["config"]))
        except ValueError as e:
            raise SerializationError(f"table {var.name!r}: the saved piece {piece!r}: {e}") from None
        if "keys" not in state:
            raise SerializationError(f"table {var.name!r}: the saved piece {piece!r} has no keys")
        for field in ("dim", "dtype", "optimizer"):
            if getattr(saved, field) != getattr(want, field):
                raise SerializationError(
                    f"table {var.name!r}: the checkpoint's {piece!r} has {field} {getattr(saved, field)!r}, "
                    f"but this program's table has {getattr(want, field)!r}")
        state["config"] = np.array(want.to_json())
        parts.append(shard(state, n, k))  # this shard's ids of the piece, then the piece goes
    try:
        return DynamicTable.from_state(shard(parts, 1, 0)) if parts else current
    except (KeyError, ValueError) as e:
        raise SerializationError(f"table {var.name!r}: the checkpoint's pieces do not make a table: {e}") from None
