"""``fluid.profiler``: Fluid 1.8's profiler API over placegroup's own op timings.

A script that profiles a few iterations the Fluid way runs unchanged::

    import paddle.fluid.profiler as profiler
    with profiler.profiler("CPU", "total", "/tmp/profile"):
        for batch in batches:
            exe.run(prog, feed=batch, fetch_list=[loss])

Between start and stop every executor of this process times each op it runs, as
``PLACEGROUP_PROFILE=1`` does for a whole run (docs/performance.md): calls, µs per call, the
part spent waiting for peers, the thread's CPU, and, in a cluster, what its messages cost.
``stop_profiler`` prints one table per executor to stdout, ordered by ``sorted_key``, and writes
the same text to ``profile_path``. Fluid writes a binary profile there for its timeline tool;
placegroup writes the table as text, and has no timeline. ``state`` may be ``"CPU"``, ``"GPU"``
or ``"All"``, as in Fluid; all three time every op the same way (for a CUDA place the time of
an op is the time to launch its kernels unless it waits for their results).
``cuda_profiler`` needs NVIDIA's nvprof and is refused with an error that says what to use.
"""
from __future__ import annotations

import contextlib
import io
import sys

from placegroup.errors import NotImplementedInPlacegroup
from placegroup.executor.profile import SWITCH

__all__ = ["cuda_profiler", "reset_profiler", "profiler", "start_profiler", "stop_profiler"]

STATES = ("CPU", "GPU", "All")
TRACER_OPTIONS = ("Default", "OpDetail", "AllOpDetail")
SORTED_KEYS = (None, "calls", "total", "max", "min", "ave")


def start_profiler(state: str, tracer_option: str = "Default") -> None:
    """Start timing every op of every executor in this process (from each one's next step).
    A second start while it runs does nothing, as in Fluid.

    Raises:
        ValueError: ``state`` is not CPU, GPU or All, or ``tracer_option`` not Default,
            OpDetail or AllOpDetail (Fluid's messages).
    """
    if SWITCH.on:
        return
    if state not in STATES:
        raise ValueError("The state must be 'CPU' or 'GPU' or 'All'.")
    if tracer_option not in TRACER_OPTIONS:
        raise ValueError("tracer option must be 'Default', 'OpDetail', 'AllOpDetail'.")
    SWITCH.flip(True)


def reset_profiler() -> None:
    """Forget what was timed so far (to leave out the first iterations)."""
    for p in SWITCH.profiles:
        p.reset()


def stop_profiler(sorted_key: str | None = None, profile_path: str = "/tmp/profile") -> None:
    """Stop timing; print each executor's table to stdout, ordered by ``sorted_key`` (None:
    by total time; ``calls``, ``total``, ``max``, ``min``, ``ave``), and write it to
    ``profile_path`` (empty: not written).

    Raises:
        ValueError: for another ``sorted_key`` (Fluid's message).
    """
    if sorted_key not in SORTED_KEYS:
        raise ValueError("The sorted_key must be None or in 'calls', 'total', 'max', 'min' and 'ave'")
    if not SWITCH.on:
        return
    SWITCH.flip(False)
    text = io.StringIO()
    for p in SWITCH.profiles:
        p.mark(None)  # the time since the last op ends with it
        p.report(text, sort=sorted_key or "total")
    report = "------------------------->     Profiling Report     <-------------------------\n" + text.getvalue()
    print(report, end="", file=sys.stdout, flush=True)
    if profile_path:
        with open(profile_path, "w") as f:
            f.write(report)


@contextlib.contextmanager
def profiler(state: str, sorted_key: str | None = None, profile_path: str = "/tmp/profile",
             tracer_option: str = "Default"):
    """``start_profiler(state, tracer_option)`` on entry, ``stop_profiler(sorted_key,
    profile_path)`` on exit."""
    start_profiler(state, tracer_option)
    try:
        yield
    finally:
        stop_profiler(sorted_key, profile_path)


@contextlib.contextmanager
def cuda_profiler(output_file: str, output_mode: str | None = None, config=None):
    """Fluid drives NVIDIA's nvprof here, which placegroup does not."""
    raise NotImplementedInPlacegroup(
        "fluid.profiler.cuda_profiler drives NVIDIA's nvprof, which placegroup does not: use "
        "fluid.profiler.profiler('GPU') for placegroup's per-op table, or run the script under "
        "nsys/nvprof yourself")
    yield  # a generator, so that the error comes on entering the with block
