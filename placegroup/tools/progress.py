"""Training progress that reads well wherever a script runs: ``progress(total)``.

A training loop calls ``bar.step(loss)`` per step and ``bar.write(line)`` for its report. What
the user sees depends on where the process runs:

* in one process on a terminal: a tqdm bar with the step count, the rate and a running loss;
* under ``placegroup launch`` on a terminal: one bar per trainer, drawn by the launcher. The
  trainer sends its progress to the launcher as records on its output (NOTE(progress-records)),
  which the launcher turns into bars instead of printing;
* anywhere else (a log file, a pipe, a cluster manager's log): a compact line at most every
  ``every`` seconds, and a last one at the end.

Example::

    from placegroup.tools.progress import progress
    with progress(passes * steps, desc=f"trainer {tid}") as bar:
        for batch in batches:
            loss, = exe.run(prog, feed=batch, fetch_list=[cost])
            bar.step(float(loss[0]))
        bar.write("pass 0 done")

NOTE(progress-records): a trainer under ``placegroup launch`` whose launcher draws bars
(``PLACEGROUP_PROGRESS=launch``, set by launch when its own output is a terminal) prints a
record per update, a line ``RECORD`` + JSON ``{"n": steps done, "total": steps, "loss": running
loss, "desc": label}``, at most ten a second. The launcher reads every line its processes print;
it draws a record in that process's bar and prints every other line above the bars.

NOTE(exit-record): under ``placegroup launch`` (``PLACEGROUP_PROGRESS`` set: ``launch`` or
``lines``) every process launch started (its parent is ``PLACEGROUP_LAUNCHER_PID``; not the
programs those start, such as a Dataset's pipe command, whose stdout is data) also prints, as it
exits, one record ``{"distributed": true
or false}``: whether it ever ran a distributed program, i.e. opened a link to its peers (the
executor's ``ran_distributed()``, set once per process, nothing per step; ``import placegroup``
registers the record with ``install_exit_record``). Launch warns when
no trainer did although it started pservers (NOTE(trained-alone) in tools/launch.py).
"""
from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
import time

import tqdm

from placegroup import config
from placegroup.executor.executor import ran_distributed

RECORD = "##placegroup-progress## "  # starts a progress record line
RECORDS_PER_S = 10.0


class Progress:
    """One training loop's progress; see the module docstring. ``mode`` is ``"bar"``,
    ``"records"`` or ``"lines"``; ``progress()`` picks it."""

    def __init__(self, total: int, desc: str = "", mode: str = "lines", every: float = 10.0,
                 out=None, smoothing: float = 0.9) -> None:
        self.total, self.desc, self.mode, self.every = int(total), desc, mode, every
        self.out = out if out is not None else sys.stderr
        self.smoothing = smoothing
        self.n, self.loss = 0, None
        self.t0 = self.last = time.monotonic()
        self.bar = None
        if mode == "bar":
            self.bar = tqdm.tqdm(total=self.total, desc=desc or None, unit="step", dynamic_ncols=True,
                                 leave=False, file=self.out)

    def step(self, loss: float | None = None, n: int = 1) -> None:
        """``n`` more steps done; ``loss`` updates the running (exponentially smoothed) loss."""
        self.n += n
        if loss is not None:
            self.loss = loss if self.loss is None else self.smoothing * self.loss + (1 - self.smoothing) * loss
        now = time.monotonic()
        if self.bar is not None:
            if self.loss is not None:
                self.bar.set_postfix_str(f"loss {self.loss:.4f}", refresh=False)
            self.bar.update(n)
        elif self.mode == "records":
            if now - self.last >= 1 / RECORDS_PER_S or self.n >= self.total:
                self._record()
                self.last = now
        elif now - self.last >= self.every:
            self._line(now)
            self.last = now

    def write(self, line: str) -> None:
        """A line of the report, printed above the bar (or as it is)."""
        if self.bar is not None:
            self.bar.write(line, file=self.out)
        else:
            print(line, file=sys.stdout, flush=True)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        elif self.mode == "records":
            self._record()
        elif self.n:
            self._line(time.monotonic())

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _record(self) -> None:
        rec = {"n": self.n, "total": self.total, "loss": self.loss, "desc": self.desc}
        print(RECORD + json.dumps(rec), file=sys.stdout, flush=True)

    def _line(self, now: float) -> None:
        rate = self.n / max(now - self.t0, 1e-9)
        loss = f", loss {self.loss:.4f}" if self.loss is not None else ""
        label = f"{self.desc}: " if self.desc else ""
        pct = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        print(f"{label}step {self.n:,}/{self.total:,}{pct}{loss}, {rate:,.1f} steps/s", file=sys.stdout, flush=True)


def progress(total: int, desc: str = "", enabled: bool | None = None, every: float = 10.0) -> Progress:
    """The ``Progress`` that suits this process (module docstring). ``enabled=False``: compact
    lines even on a terminal; True: a bar even when stderr is not one."""
    if config.get("PLACEGROUP_PROGRESS") == "launch" and enabled is not False:
        return Progress(total, desc, "records", every)
    on_terminal = sys.stderr.isatty() if enabled is None else enabled
    return Progress(total, desc, "bar" if on_terminal else "lines", every)


def exit_record() -> None:
    """Tell the launcher, as this process exits, whether it ever ran a distributed program
    (NOTE(exit-record)). Only the process launch started tells it, not a program that one
    started in turn (a Dataset's pipe command, whose stdout is data)."""
    if not config.get("PLACEGROUP_PROGRESS") or config.get("PLACEGROUP_LAUNCHER_PID") != os.getppid():
        return
    with contextlib.suppress(OSError, ValueError):  # the launcher may be gone; nothing to tell then
        print(RECORD + json.dumps({"distributed": ran_distributed()}), file=sys.__stdout__ or sys.stdout,
              flush=True)


def install_exit_record() -> None:
    """Register ``exit_record`` to run as the process exits; ``import placegroup`` calls it."""
    atexit.register(exit_record)


def parse_record(line: str) -> dict | None:
    """The record a line holds (NOTE(progress-records), NOTE(exit-record)), or None for any
    other line."""
    if not line.startswith(RECORD):
        return None
    try:
        rec = json.loads(line[len(RECORD):])
    except ValueError:
        return None
    ok = isinstance(rec, dict) and (isinstance(rec.get("n"), int) or isinstance(rec.get("distributed"), bool))
    return rec if ok else None


class Bars:
    """What ``placegroup launch`` draws on a terminal: a bar per process that sends progress
    records, below the lines the processes print. Callers hold one lock around every call."""

    def __init__(self, out) -> None:
        self.out = out
        self.bars: dict[str, tqdm.tqdm] = {}
        self.exits: dict[str, bool] = {}  # name -> its exit record: ran a distributed program

    def line(self, name: str, text: str) -> None:
        """One line process ``name`` printed (``trainer:0``, NOTE(process-names) in tools/launch.py):
        a record moves its bar; anything else is printed, prefixed ``[name]``."""
        rec = parse_record(text)
        if rec is None:
            if self.bars:
                tqdm.tqdm.write(f"[{name}] {text.rstrip()}", file=self.out)
            else:
                self.out.write(f"[{name}] {text}")
                self.out.flush()
            return
        if "distributed" in rec:  # a process this one started may report too: any link counts
            self.exits[name] = self.exits.get(name, False) or rec["distributed"]
            return
        bar = self.bars.get(name)
        if bar is None:
            bar = self.bars[name] = tqdm.tqdm(total=rec.get("total") or None, desc=f"[{name}]", unit="step",
                                             position=len(self.bars), dynamic_ncols=True, file=self.out)
        bar.n = rec["n"]
        if isinstance(rec.get("loss"), (int, float)):
            bar.set_postfix_str(f"loss {rec['loss']:.4f}", refresh=False)
        bar.refresh()

    def close(self) -> None:
        for bar in self.bars.values():
            bar.close()
        self.bars.clear()
