"""A little real network for the tests: a bridge in a network namespace of its own, and one
namespace per host joined to it by a veth pair.

    with Network(4) as net:                 # hosts 0..3 at 10.77.0.1 .. 10.77.0.4
        p = net.popen(0, [sys.executable, "worker.py"], env={"POD_IP": net.ips[0]})
        net.cut(1)                          # host 1's cable is pulled (at the bridge)
        net.heal(1)

Nothing is added to the root namespace: each veth pair is made inside the bridge's namespace
with its other end placed straight into the host's, and the addresses (one fixed private /24,
``SUBNET``) exist only inside the namespaces. Names carry a tag (by default ``pg<pid>-<n>``) so that
parallel runs do not clash. Leaving the ``with`` block deletes every namespace it made, which
deletes their links too, even when the block raised; a process still running in a namespace
keeps it alive without its name, so stop the processes first (``Network.stop``).

Building one needs root and iproute2's ``ip`` with ``netns``; where either is missing or the
kernel refuses (EPERM in a container), ``Network`` raises ``Unavailable`` with the reason
(tests skip on it).

Thread-safety: none; one test owns one network.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from typing import Sequence

SUBNET = "10.77.0"  # hosts are SUBNET.1, SUBNET.2, ...; /24; used only inside the namespaces


class Unavailable(RuntimeError):
    """Network namespaces cannot be made here (not root, no ``ip``, or not permitted)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


class Network:
    """``hosts`` namespaces on one bridge (see the module docstring).

    Args:
        hosts: how many host namespaces; host ``i`` has address ``ips[i]`` on its ``eth0``.
        tag: the prefix of every name made (default ``pg<pid>-<n>``, n counting the
            networks this process made).

    Attributes:
        ips: each host's address. namespaces: each host's namespace name.
        bridge_ns: the namespace holding the bridge ``br0`` and the ports ``p<i>``.
    """

    count = 0  # networks made by this process (their default tags differ)

    def __init__(self, hosts: int, tag: str | None = None) -> None:
        if not 1 <= hosts <= 250:
            raise ValueError(f"Network: hosts must be 1..250, not {hosts}")
        Network.count += 1
        self.tag = tag or f"pg{os.getpid()}-{Network.count}"
        self.bridge_ns = f"{self.tag}-br"
        self.namespaces = [f"{self.tag}-h{i}" for i in range(hosts)]
        self.ips = [f"{SUBNET}.{i + 1}" for i in range(hosts)]
        self.made: list[str] = []
        self.procs: list[subprocess.Popen] = []

    # -- building and removing -------------------------------------------------------------------
    def __enter__(self) -> "Network":
        why = unavailable()
        if why:
            raise Unavailable(why)
        try:
            self._build()
        except RuntimeError as e:
            self.remove()
            if "not permitted" in str(e) or "not supported" in str(e):  # EPERM, EOPNOTSUPP
                raise Unavailable(f"the kernel refuses to make the network: {e}") from e
            raise
        except BaseException:
            self.remove()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
        self.remove()

    def _add_ns(self, name: str) -> None:
        _ip("netns", "add", name)
        self.made.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def _build(self) -> None:
        br = self.bridge_ns
        self._add_ns(br)
        _ip("-n", br, "link", "add", "br0", "type", "bridge")
        _ip("-n", br, "link", "set", "br0", "up")
        for i, (ns, addr) in enumerate(zip(self.namespaces, self.ips)):
            self._add_ns(ns)
            _ip("-n", br, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", br, "link", "set", f"p{i}", "master", "br0")
            _ip("-n", br, "link", "set", f"p{i}", "up")
            _ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def remove(self) -> None:
        """Delete every namespace made (their links go with them). Idempotent; never raises."""
        for name in reversed(self.made):
            _ip("netns", "del", name, check=False)
        self.made.clear()

    # -- using -----------------------------------------------------------------------------------
    def popen(self, host: int, argv: Sequence[str], **kwargs) -> subprocess.Popen:
        """Start ``argv`` in host ``host``'s namespace (``ip netns exec``); ``kwargs`` go to
        ``subprocess.Popen``. ``stop`` (and leaving the ``with`` block) kills it if it runs."""
        p = subprocess.Popen(["ip", "netns", "exec", self.namespaces[host], *argv], **kwargs)
        self.procs.append(p)
        return p

    def stop(self) -> None:
        """Kill the processes ``popen`` started that still run, and reap them."""
        for p in self.procs:
            if p.poll() is None:
                p.kill()
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def cut(self, host: int) -> None:
        """Pull host ``host``'s cable: its port on the bridge goes down. The host keeps its
        address and routes; what it sends is lost, as on a dead switch port."""
        _ip("-n", self.bridge_ns, "link", "set", f"p{host}", "down")

    def heal(self, host: int) -> None:
        """Plug host ``host``'s cable back in."""
        _ip("-n", self.bridge_ns, "link", "set", f"p{host}", "up")

    def carrier(self, host: int) -> bool:
        """Whether host ``host``'s ``eth0`` sees a link (False while it is cut)."""
        out = _ip("-n", self.namespaces[host], "link", "show", "eth0").stdout
        return "NO-CARRIER" not in out


def unavailable() -> str:
    """Why network namespaces cannot be made here, or "" when they can (as far as is known
    before trying: the kernel may still refuse, see ``Unavailable``)."""
    if os.name != "posix" or not hasattr(os, "geteuid"):
        return "network namespaces need Linux"
    if os.geteuid() != 0:
        return "making network namespaces needs root"
    if shutil.which("ip") is None:
        return "iproute2's 'ip' command is not installed"
    return ""
