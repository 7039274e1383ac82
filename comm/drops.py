"""Counting and logging what an executor drops, rate-limited (docs/protocol.md, "What is dropped").

The session drops strangers', malformed and spoofed messages, the mailbox unwanted values;
both count them here under one reason each (``counts``: reason -> how many) and log one line
per (peer, reason) every ``LOG_EVERY`` seconds, with the count of the lines left out since.
Strangers share one key (the caller passes peer ``""``: random bytes on a port arrive under a
new name each), and past ``LOG_KEYS`` keys every peer shares one, so a flood writes a few
lines, not millions.

Thread-safety: one per executor thread, as the session and mailbox that use it.
"""
from __future__ import annotations

import logging
import time

from placegroup import config

log = logging.getLogger("placegroup.comm")


class DropLog:
    """Counts and rate-limited log lines of executor ``me``."""

    LOG_EVERY = config.get("PLACEGROUP_DROP_LOG_EVERY")
    LOG_KEYS = 256  # (peer, reason) keys kept (without a plan, names are not checked)

    def __init__(self, me: str) -> None:
        self.me = me
        self.counts: dict[str, int] = {}      # reason -> messages or values dropped
        self.lines: dict[tuple, tuple] = {}   # (peer, reason) -> (last logged, left out since)

    def drop(self, peer: str, reason: str, text: str) -> None:
        """Count a dropped message (or value) under ``reason`` and log ``text``, rate-limited."""
        self.counts[reason] = self.counts.get(reason, 0) + 1
        self.note(peer, reason, logging.WARNING, text)

    def note(self, peer: str, reason: str, level: int, text: str) -> None:
        """Log ``text`` unless a line for (peer, reason) went out less than LOG_EVERY s ago."""
        key = (peer, reason)
        if key not in self.lines and len(self.lines) >= self.LOG_KEYS:
            key = ("*", reason)  # a flood of random identities must not grow this without bound
        now = time.monotonic()
        last, since = self.lines.get(key, (None, 0))
        if last is not None and now - last < self.LOG_EVERY:
            self.lines[key] = (last, since + 1)
            return
        self.lines[key] = (now, 0)
        more = f" [{since} more like it ({reason}) in the last {now - last:.0f}s]" if since else ""
        log.log(level, "%s: %s%s", self.me, text[:400], more)


def who(peer: str, quote: bool = False) -> str:
    """A peer's name for a log line: escaped unless printable (no forged lines), cut short."""
    peer = peer if len(peer) <= 40 else peer[:37] + "..."
    return repr(peer) if quote and peer.isprintable() else peer if peer.isprintable() else ascii(peer)
