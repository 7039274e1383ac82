"""Where an executor's time goes, without a profiler: ``PLACEGROUP_PROFILE=1``.

Each executor then prints, when it closes (or when the process exits), a table to stderr:
per op type the calls, the microseconds per call, the time spent waiting for peers inside
those calls and the CPU time this thread spent on them (wall time also counts the time the
process waited for a core, which on a busy machine is much of it); the time between steps
(the feed, the fetch and the training loop's own code); the end of each step (sending what it
posted); and the messages sent and received, with the CPU each one cost (packing and sending;
receiving, checking and filing) and the time spent blocked with nothing to read::

    placegroup profile, trainer:0: 1,501 steps, 3.663 s
      op                                   calls    us/call  of which waiting  CPU us/call   share
      merge_selected_rows                  1,500     1812.8            1714.8         61.3   74.2%
      lookup_table                         1,500      131.3                           88.0    5.4%
      ...
      (between steps)                      1,499       39.2               2.1         30.5    1.6%
      messages: 3,002 sent (138.2 kB, 55.7 us of CPU each to pack and send); 3,004 received
      (88.6 kB, 127.6 us of CPU each to receive, check and file); blocked 3.037 s with nothing to read

How it works: the interpreter calls ``mark(name)`` before each op it runs and at the end of the
step; the time since the previous mark goes to the previous name. The plain ops that the
interpreter's fast loop (NOTE(lean-loop) in executor/interpreter.py) runs without looking at
them are marked too while profiling, so the figures include 1-2 us of marking per op (a wall
clock and a thread CPU clock read).

Thread-safety: a profile belongs to its interpreter's thread; ``report`` may run at exit.
"""
from __future__ import annotations

import atexit
import sys
import time
from collections import defaultdict

BETWEEN, END = "(between steps)", "(end of step)"


class Profile:
    """The op-by-op timings of one executor (``who``) and, through its ``mailbox``, the cost of
    its messages (the mailbox counts them once the profile exists)."""

    def __init__(self, who: str, mailbox=None) -> None:
        self.who = who
        self.mailbox = mailbox          # a comm.mailbox.Mailbox, or None (one process)
        if mailbox is not None:
            mailbox.stats(timed=True)
        self.seconds: dict = defaultdict(float)
        self.cpu: dict = defaultdict(float)
        self.waited: dict = defaultdict(float)
        self.calls: dict = defaultdict(int)
        self.longest: dict = defaultdict(float)  # the longest and shortest single call, seconds
        self.shortest: dict = {}
        self.steps = 0
        self.current: str | None = None
        self.since = self.since_cpu = 0.0
        self.printed = False
        self.extra: dict = {}  # name -> a function that gives one more line (the checkpoint saves)
        _profiles.append(self)

    def mark(self, name: str | None) -> None:
        """The time since the last mark was the last name's; from now on it is ``name``'s
        (None: nobody's, e.g. before the first step)."""
        now, cpu = time.perf_counter(), time.thread_time()
        current = self.current
        if current is not None:
            took = now - self.since
            self.seconds[current] += took
            self.cpu[current] += cpu - self.since_cpu
            self.calls[current] += 1
            if took > self.longest[current]:
                self.longest[current] = took
            if took < self.shortest.get(current, took + 1.0):
                self.shortest[current] = took
        self.current, self.since, self.since_cpu = name, now, cpu

    def wait(self, seconds: float) -> None:
        """``seconds`` of the current op went to waiting for peers."""
        if self.current is not None:
            self.waited[self.current] += seconds

    def step_done(self, startup: bool = False) -> None:
        """A step ended; the time until the next op is the loop's (not after a startup
        program: what a script does before it trains is no step's)."""
        self.steps += 1
        self.mark(None if startup else BETWEEN)

    def reset(self) -> None:
        """Forget what was timed so far (``fluid.profiler.reset_profiler``: skip a warm-up)."""
        for table in (self.seconds, self.cpu, self.waited, self.calls, self.longest, self.shortest):
            table.clear()
        self.steps = 0

    def report(self, out=None, sort: str = "total") -> None:
        """Print the table (once) to ``out`` (stderr), its ops ordered by ``sort``: ``total``
        (the time they took, the default), ``calls``, ``ave``, ``max`` or ``min`` (per call)."""
        if self.printed or not self.calls:
            return
        self.printed = True
        out = out if out is not None else sys.stderr
        total = sum(self.seconds.values())
        order = {"total": self.seconds.get, "calls": self.calls.get, "max": self.longest.get,
                 "min": lambda k: self.shortest.get(k, 0.0),
                 "ave": lambda k: self.seconds[k] / max(self.calls[k], 1)}[sort]
        print(f"placegroup profile, {self.who}: {self.steps:,} steps, {total:.3f} s", file=out)
        print(f"  {'op':<34}{'calls':>8}{'us/call':>11}{'of which waiting':>18}{'CPU us/call':>13}{'share':>8}",
              file=out)
        for name in sorted(self.seconds, key=order, reverse=True):
            n, s, w = self.calls[name], self.seconds[name], self.waited.get(name, 0.0)
            waiting = f"{w / n * 1e6:.1f}" if w else ""
            print(f"  {name:<34}{n:>8,}{s / n * 1e6:>11.1f}{waiting:>18}{self.cpu[name] / n * 1e6:>13.1f}"
                  f"{s / max(total, 1e-12):>8.1%}", file=out)
        if self.mailbox is not None:
            print("  " + messages_line(self.mailbox), file=out)
        for line in self.extra.values():
            print("  " + line(), file=out)
        out.flush()


def messages_line(mb) -> str:
    """The message counters of mailbox ``mb`` in one line."""
    st = mb.stats()
    sent = max(st.sent_msgs, 1)
    got = max(st.received_msgs, 1)
    return (f"messages: {st.sent_msgs:,} sent ({st.bytes_sent / sent / 1e3:.1f} kB, {st.send_s / sent * 1e6:.1f} us "
            f"of CPU each to pack and send); {st.received_msgs:,} received ({st.bytes_received / got / 1e3:.1f} kB, "
            f"{st.receive_s / got * 1e6:.1f} us of CPU each to receive, check and file); blocked "
            f"{st.idle_s:.3f} s with nothing to read")


_profiles: list[Profile] = []


class Switch:
    """``fluid.profiler``'s start and stop (placegroup/profiler.py), which every interpreter
    follows at its next step: on, each gets a profile of its own (unless it has one from
    ``PLACEGROUP_PROFILE``); off, those profiles are detached. ``generation`` counts the
    flips, so an interpreter checks one integer per step."""

    def __init__(self) -> None:
        self.on = False
        self.generation = 0
        self.profiles: list[Profile] = []  # the ones made since the last start

    def flip(self, on: bool) -> None:
        self.on = on
        self.generation += 1
        if on:
            self.profiles = []


SWITCH = Switch()


@atexit.register
def _report_all() -> None:
    for p in _profiles:
        p.report()
