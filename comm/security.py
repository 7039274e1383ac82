"""ZeroMQ CURVE on every socket of an executor: encrypted traffic, and only listed clients in.

``Transport`` calls ``start(ctx)`` once, ``apply(socket, server)`` for every socket before it
binds or connects, and ``stop()`` when it closes. ``Security.from_env`` builds one from
``PLACEGROUP_KEYS``; ``write_keys`` (``placegroup keys DIR``) makes the files: ``server.key``
(every client dials it), ``server.key_secret`` (whoever binds), ``client-<i>.key_secret``
(whoever connects), ``allowed/*.key`` (the clients let in). docs/security.md has the layout,
the threat model and how to deploy keys.

Example::

    >>> t = Transport("trainer:0", None, peers, digest, security=Security.from_env())  # doctest: +SKIP

Thread-safety: a Security belongs to the one Transport (and thread) that starts it; the ZAP
authenticator it starts runs on its own thread and only reads the allowed set.
"""
from __future__ import annotations

import datetime
import json
import logging
import os
import re
from pathlib import Path

import zmq
from zmq.auth import load_certificate
from zmq.utils import z85

from placegroup import config
from placegroup.errors import UserError

log = logging.getLogger("placegroup.comm")

KEYS_ENV = "PLACEGROUP_KEYS"          # a key directory, or a .toml/.json file naming the files
CLIENT_ENV = "PLACEGROUP_CLIENT_KEY"  # which client keypair: a name in the directory, or a path
SERVER_PUBLIC, SERVER_SECRET, ALLOWED = "server.key", "server.key_secret", "allowed"
DEFAULT_CLIENT = "client-0"
ZAP_DOMAIN = b"placegroup"
_CONFIG_KEYS = ("server", "server_secret", "client", "allowed")
_MANAGED = re.compile(r"server\.key(_secret)?|client-\d+\.key(_secret)?")


class SecurityError(UserError):
    """CURVE keys that are missing, unreadable or malformed, or a bad key configuration."""


def read_certificate(path: Path, secret: bool, origin: str) -> tuple[bytes, bytes | None]:
    """``(public, secret)`` Z85 keys from a certificate file (``secret`` None for a public one).

    Raises:
        SecurityError: naming the file when it is missing, unreadable, or lacks a key.
    """
    try:
        public, sec = load_certificate(path)
    except (OSError, ValueError) as e:
        why = "does not exist" if not path.exists() else getattr(e, "strerror", None) or str(e)
        raise SecurityError(f"CURVE key file {path} ({origin}): {why}") from None
    if secret and not sec:
        raise SecurityError(f"CURVE key file {path} ({origin}) holds no secret-key: it is a public "
                            f"key; the keypair is the matching .key_secret file")
    if secret and os.stat(path).st_mode & 0o004:
        # NOTE(key-modes): a world-readable secret is most often a Kubernetes secret volume left
        # at its default mode 0644; warn rather than refuse so that a first deployment works
        log.warning("CURVE secret key %s is readable by every user; make it 0600 "
                    "(Kubernetes: defaultMode: 0400 on the secret volume)", path)
    for what, key in (("public-key", public), ("secret-key", sec or b"0" * 40)):
        if len(key) != 40 or len(z85.decode(key)) != 32:  # z85.decode raises on bad characters too
            raise SecurityError(f"CURVE key file {path}: its {what} is not a 40-character Z85 key")
    return public, sec


class _Allowed:
    """The ZAP check (pyzmq's credentials-provider interface): a client key is in or out."""

    def __init__(self, keys: set[bytes]) -> None:
        self.keys = keys
        self.refused: set[bytes] = set()

    def callback(self, domain: str, key: bytes) -> bool:
        if key in self.keys:
            return True
        if key not in self.refused:  # a refused client redials every 100 ms: one line per key
            self.refused.add(key)
            log.warning("refused a CURVE client whose public key %s is not allowed",
                        key.decode("ascii", "replace"))
        return False


class Security:
    """CURVE keys for one executor's sockets (see the module docstring for the layout).

    Args:
        server_public: the server public key file (``server.key``), needed to connect.
        server_secret: the server keypair (``server.key_secret``), needed to bind.
        client: this process's client keypair (``client-0.key_secret``), needed to connect.
        allowed: a directory whose ``*.key`` files are the client keys allowed in.
        origin: where the paths came from, for error messages (``PLACEGROUP_KEYS=/keys``).

    A path may be None; it is an error only when a socket needs it, so that a trainer that
    never binds needs no server secret. Files are read when first needed, never pickled.
    """

    def __init__(self, server_public: Path | None, server_secret: Path | None,
                 client: Path | None, allowed: Path | None, origin: str = "") -> None:
        self.paths = {"server": server_public, "server_secret": server_secret,
                      "client": client, "allowed": allowed}
        self.origin = origin or "Security(...)"
        self.ctx: zmq.Context | None = None
        self.auth = None
        self._keys: dict[str, tuple] = {}

    @classmethod
    def from_path(cls, path: str | os.PathLike, client: str | None = None) -> Security:
        """Keys from a directory made by ``placegroup keys``, or a ``.toml``/``.json`` file.

        The file maps ``server``, ``server_secret``, ``client``, ``allowed`` to paths (relative
        ones from the file's folder); any may be left out. ``client`` picks the client keypair:
        a name in the directory (``client-1``) or a path; it overrides the file's.

        Raises:
            SecurityError: ``path`` does not exist, or the file is malformed.
        """
        path = Path(path).expanduser().absolute()
        origin = f"{KEYS_ENV}={path}"
        if path.is_dir():
            base, entries = path, {"server": path / SERVER_PUBLIC, "server_secret": path / SERVER_SECRET,
                                   "client": path / f"{DEFAULT_CLIENT}.key_secret", "allowed": path / ALLOWED}
        elif path.is_file():
            entries, base = _read_config(path, origin), path.parent
        else:
            raise SecurityError(f"{origin}: no such directory or file (make keys with "
                                f"`placegroup keys DIR`)")
        if client:
            named = "/" not in client and not client.endswith((".key", ".key_secret"))
            entries["client"] = base / f"{client}.key_secret" if named else Path(client).absolute()
            origin += f", {CLIENT_ENV}={client}"
        return cls(*(entries[k] if entries[k] is None or entries[k].is_absolute() else base / entries[k]
                     for k in _CONFIG_KEYS), origin=origin)

    @classmethod
    def from_env(cls, environ=None) -> Security | None:
        """``Security.from_path($PLACEGROUP_KEYS, $PLACEGROUP_CLIENT_KEY)``; None when unset."""
        where = config.raw(KEYS_ENV, environ)
        return cls.from_path(where, config.raw(CLIENT_ENV, environ)) if where else None

    def _need(self, name: str, secret: bool) -> tuple[bytes, bytes | None]:
        hit = self._keys.get(name)
        if hit is None:
            path = self.paths[name]
            if path is None:
                raise SecurityError(f"{self.origin} names no {name!r} key file, and this executor "
                                    f"needs one to {'bind' if name == 'server_secret' else 'connect'}")
            hit = self._keys[name] = read_certificate(path, secret, self.origin)
        return hit

    def allowed_keys(self) -> set[bytes]:
        """The Z85 public keys in the ``allowed`` directory (``*.key``, as czmq reads them)."""
        where = self.paths["allowed"]
        if where is None or not where.is_dir():
            raise SecurityError(f"{self.origin}: the allowed-clients directory {where} does not "
                                f"exist; an executor that binds a port needs it")
        keys = {read_certificate(f, False, self.origin)[0] for f in sorted(where.glob("*.key"))}
        if not keys:
            raise SecurityError(f"{self.origin}: {where} holds no *.key file, so no client could "
                                f"connect; copy the clients' public keys there")
        return keys

    def start(self, ctx: zmq.Context) -> None:
        """Remember the Transport's context; the ZAP authenticator starts with the first
        server socket (NOTE(zap-fail-closed))."""
        if self.ctx is not None and self.ctx is not ctx:
            raise SecurityError("a Security serves one Transport; make one per Transport")
        self.ctx = ctx

    def apply(self, socket: zmq.Socket, server: bool) -> None:
        """Turn CURVE on for ``socket`` (before bind or connect).

        Args:
            socket: the ROUTER an executor binds (``server=True``) or a DEALER it connects.
        Raises:
            SecurityError: a key file this side needs is missing or malformed.
        """
        if server:
            public, secret = self._need("server_secret", True)
            if self.auth is None:
                self._start_auth()
            # NOTE(zap-fail-closed): libzmq lets every CURVE client in when no ZAP handler is
            # listening, unless the domain is enforced; so the authenticator starts before the
            # first bind, and ZAP_ENFORCE_DOMAIN refuses clients if it is ever gone.
            socket.setsockopt(zmq.ZAP_DOMAIN, ZAP_DOMAIN)
            socket.setsockopt(zmq.ZAP_ENFORCE_DOMAIN, 1)
            socket.setsockopt(zmq.CURVE_SERVER, 1)
            socket.setsockopt(zmq.CURVE_PUBLICKEY, public)
            socket.setsockopt(zmq.CURVE_SECRETKEY, secret)
        else:
            server_public = self._need("server", False)[0]
            public, secret = self._need("client", True)
            socket.setsockopt(zmq.CURVE_SERVERKEY, server_public)
            socket.setsockopt(zmq.CURVE_PUBLICKEY, public)
            socket.setsockopt(zmq.CURVE_SECRETKEY, secret)

    def _start_auth(self) -> None:
        if self.ctx is None:
            raise SecurityError("Security.apply before start(ctx): the Transport starts it first")
        from zmq.auth.thread import ThreadAuthenticator

        allowed = _Allowed(self.allowed_keys())
        client = self.paths["client"]
        if client is not None and client.exists():
            mine = self._need("client", True)[0]
            if mine not in allowed.keys:
                log.warning("this executor's client key %s is not in %s: its peers will refuse it",
                            client, self.paths["allowed"])
        self.auth = ThreadAuthenticator(self.ctx, log=logging.getLogger("placegroup.comm.zap"))
        self.auth.start()
        self.auth.configure_curve_callback(domain=ZAP_DOMAIN.decode(), credentials_provider=allowed)

    def stop(self) -> None:
        """Stop the authenticator (idempotent); the Transport closes its sockets next."""
        if self.auth is not None:
            self.auth.stop()
            self.auth = None


def _read_config(path: Path, origin: str) -> dict[str, Path | None]:
    if path.suffix not in (".json", ".toml"):
        raise SecurityError(f"{origin}: a key config file ends in .toml or .json")
    try:
        if path.suffix == ".json":
            data = json.loads(path.read_text())
        else:
            import tomllib  # Python 3.11; on 3.10 write the file as JSON
            data = tomllib.loads(path.read_text())
    except (OSError, ValueError, ImportError) as e:  # the decode errors are ValueErrors
        raise SecurityError(f"{origin}: cannot read the key config: {e}") from None
    if not isinstance(data, dict) or set(data) - set(_CONFIG_KEYS) or \
            not all(isinstance(v, str) for v in data.values()):
        raise SecurityError(f"{origin}: a key config maps some of {list(_CONFIG_KEYS)} to paths "
                            f"(strings); got {data!r}")
    return {k: Path(data[k]).expanduser() if k in data else None for k in _CONFIG_KEYS}


def _write(path: Path, text: str, mode: int) -> None:
    """Write ``path`` whole with ``mode`` from its first byte (a temp file, then a rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w") as f:
        os.fchmod(f.fileno(), mode)  # a leftover temp file may have had another mode
        f.write(text)
    os.replace(tmp, path)


def _certificate(name: str, public: bytes, secret: bytes | None) -> str:
    """czmq's certificate format (what ``zmq.auth.load_certificate`` reads)."""
    return (f"#   ZeroMQ CURVE {'Secret' if secret else 'Public'} Certificate: {name}, made by "
            f"`placegroup keys` on {datetime.date.today()}\n\nmetadata\n    name = \"{name}\"\n"
            f"curve\n    public-key = \"{public.decode()}\"\n"
            + (f"    secret-key = \"{secret.decode()}\"\n" if secret else ""))


def managed_files(directory: Path) -> list[Path]:
    """The files in ``directory`` that ``write_keys`` makes and ``--force`` replaces."""
    d = Path(directory)
    found = [d / SERVER_PUBLIC, *d.glob("*.key_secret"), *(d / ALLOWED).glob("client-*.key")]
    return sorted(p for p in found if p.exists() and _MANAGED.fullmatch(p.name))


def write_keys(directory: str | os.PathLike, clients: int = 1, force: bool = False) -> list[Path]:
    """Make a key directory: the server keypair, ``clients`` client keypairs, allowed/.

    Secret files are created with mode 0600, public ones 0644, the directory 0700.

    Args:
        directory: where (made when missing).
        clients: how many client keypairs (``client-0`` ... ``client-<clients-1>``).
        force: replace keys made before (every ``server.*``, ``client-*`` and
            ``allowed/client-*.key``, so a replaced key is no longer allowed).
    Returns:
        The files written.
    Raises:
        SecurityError: keys exist and ``force`` is False; or ``clients`` < 1.

    Example::

        >>> write_keys("/tmp/pgkeys", clients=2)                    # doctest: +SKIP
    """
    if clients < 1:
        raise SecurityError(f"need at least one client keypair, got clients={clients}")
    d = Path(directory)
    old = managed_files(d) if d.is_dir() else []
    if old and not force:
        raise SecurityError(f"{d} already holds keys ({', '.join(str(p.relative_to(d)) for p in old)}); "
                            f"pass --force to replace them (every process then needs the new ones)")
    if not d.exists():
        os.makedirs(d, mode=0o700)  # a folder the user already had keeps its mode
    os.makedirs(d / ALLOWED, exist_ok=True)
    for p in old:
        p.unlink()
    public, secret = zmq.curve_keypair()
    written = [d / SERVER_SECRET, d / SERVER_PUBLIC]
    _write(written[0], _certificate("server", public, secret), 0o600)
    _write(written[1], _certificate("server", public, None), 0o644)
    for i in range(clients):
        name = f"client-{i}"
        public, secret = zmq.curve_keypair()
        written += [d / f"{name}.key_secret", d / ALLOWED / f"{name}.key"]
        _write(written[-2], _certificate(name, public, secret), 0o600)
        _write(written[-1], _certificate(name, public, None), 0o644)
    return written
