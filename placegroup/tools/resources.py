"""What this process uses: the figures the examples and benches print."""
from __future__ import annotations

import resource


def peak_rss_mb() -> float:
    """This process's peak resident memory in MiB.

    Read from ``VmHWM`` in /proc/self/status where there is one: unlike ``ru_maxrss``, it is not
    inherited across ``exec`` from a parent that was bigger (a bench that made a table first).
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
