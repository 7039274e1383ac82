"""CURVE on every socket (comm/security.py, docs/security.md): traffic is encrypted, a client
whose key is not allowed gets nothing in and nothing out, and a keyed run trains exactly like
an unkeyed one while rogue clients knock on the pservers' ports."""
import contextlib
import json
import logging
import os
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import zmq
from click.testing import CliRunner
from zmq.auth import load_certificate
from zmq.utils.monitor import recv_monitor_message

import placegroup.tools.launch
from placegroup.tools.cli import main
from placegroup.comm.framing import pack, unpack
from placegroup.comm.security import Security, SecurityError, write_keys
from placegroup.comm.transport import Transport
from placegroup.tools.launch import free_ports
from tests.conftest import TIME_FACTOR
from tests.test_distributed import _run

MARKER = b"PLAINTEXT-GRADIENT-MARKER-0123456789abcdef" * 8  # 336 bytes: 84 float32


@pytest.fixture(scope="module")
def keydirs(tmp_path_factory):
    """Our cluster's keys (two clients) and another cluster's."""
    root = tmp_path_factory.mktemp("keys")
    write_keys(root / "ours", clients=2)
    write_keys(root / "theirs", clients=1)
    return root / "ours", root / "theirs"


def _poll_until(transport, done, seconds=5.0):
    got, deadline = [], time.monotonic() + seconds * TIME_FACTOR
    while not done(got) and time.monotonic() < deadline:
        got += transport.poll(50)
    return got


class Relay:
    """A TCP relay recording every byte it passes: what an eavesdropper on the link sees."""

    def __init__(self, upstream: int) -> None:
        self.seen, self.upstream, self.stopped = bytearray(), upstream, False
        self.lock, self.conns = threading.Lock(), []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while not self.stopped:
            try:
                a, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:  # closed
                return
            b = socket.create_connection(("127.0.0.1", self.upstream))
            self.conns += [a, b]
            for src, dst in ((a, b), (b, a)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src, dst):
        with contextlib.suppress(OSError):
            while data := src.recv(1 << 16):
                with self.lock:
                    self.seen += data
                dst.sendall(data)

    def close(self):
        self.stopped = True
        for s in self.conns + [self.sock]:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


@pytest.mark.parametrize("keyed", [True, False])
def test_two_transports_exchange_values_and_the_link_sees_only_ciphertext(keydirs, keyed):
    ours, _ = keydirs
    port, = free_ports(1)
    name = f"pserver@127.0.0.1:{port}"
    sec = (lambda client=None: Security.from_path(ours, client)) if keyed else (lambda client=None: None)
    server = Transport(name, f"127.0.0.1:{port}", {}, "digest", security=sec())
    relay = Relay(port)
    client = Transport("trainer:0", None, {name: f"127.0.0.1:{relay.port}"}, "digest",
                       security=sec("client-1"))
    try:
        value = np.frombuffer(MARKER, np.float32)
        client.send(name, pack("values", "trainer:0", 0, [("secret_weight", 0, value)]))
        got = _poll_until(server, lambda g: len(g) == 1)
        assert [(p, unpack(f).kind) for p, f in got] == [("trainer:0", "values")]
        np.testing.assert_array_equal(unpack(got[0][1]).vals[0][2], value)
        # its connection made the client addressable (the ROUTER learnt its routing id)
        server.send("trainer:0", pack("values", name, 0, [("secret_weight", 1, value * 2)]))
        back = _poll_until(client, lambda g: len(g) == 1)
        np.testing.assert_array_equal(unpack(back[0][1]).vals[0][2], value * 2)
        assert server.router.getsockopt(zmq.CURVE_SERVER) == keyed
        assert client.dealers[name].getsockopt(zmq.MECHANISM) == (zmq.CURVE if keyed else zmq.NULL)
        with relay.lock:
            seen = bytes(relay.seen)
        assert len(seen) > 2 * len(MARKER)
        for plain in (MARKER[:32], b"secret_weight", b"trainer:0"):  # payload, header, identity
            assert (plain in seen) != keyed, plain
    finally:
        client.close()
        server.close()
        relay.close()


def _rogue(ctx, port, security, identity):
    """A DEALER that says hello to ``port``; its monitor shows how the handshake ended."""
    s = ctx.socket(zmq.DEALER)
    s.linger = 0
    s.identity = identity
    if security is not None:
        security.start(ctx)
        security.apply(s, server=False)
    mon = s.get_monitor_socket()
    s.connect(f"tcp://127.0.0.1:{port}")
    s.send_multipart(pack("hello", identity.decode(), -1, digest="digest"))
    s.send_multipart(pack("values", identity.decode(), 0, [("w", 0, np.full(4, 1e9, np.float32))]))
    return s, mon


def _events(mon):
    out = set()
    with contextlib.suppress(zmq.Again):
        while True:
            out.add(zmq.Event(recv_monitor_message(mon, zmq.NOBLOCK)["event"]).name)
    return out


def _rogues(ours, theirs):
    """identity -> Security: plain TCP, another cluster's keys, our server key with an unlisted
    client key (the server key is public: this is the attacker who read it)."""
    return {b"plain": None, b"other-cluster": Security.from_path(theirs),
            b"unlisted": Security(ours / "server.key", None, theirs / "client-0.key_secret", None)}


def test_a_client_without_an_allowed_key_gets_nothing_in_and_nothing_out(keydirs, caplog):
    ours, theirs = keydirs
    port, = free_ports(1)
    name = f"pserver@127.0.0.1:{port}"
    server = Transport(name, f"127.0.0.1:{port}", {}, "digest", security=Security.from_path(ours))
    ctx = zmq.Context()
    rogues = {i: _rogue(ctx, port, sec, i) for i, sec in _rogues(ours, theirs).items()}
    try:
        with caplog.at_level(logging.WARNING, logger="placegroup.comm"):
            time.sleep(0.5 * TIME_FACTOR)
            client = Transport("trainer:0", None, {name: f"127.0.0.1:{port}"}, "digest",
                               security=Security.from_path(ours))  # the allowed one, last
            client.send(name, pack("hello", "trainer:0", -1, digest="digest"))
            got = _poll_until(server, lambda g: len(g) == 1)
            got += server.poll(200)
        assert [p for p, _ in got] == ["trainer:0"]  # no rogue's hello or values came in
        events = {}
        for identity, (s, mon) in rogues.items():
            with pytest.raises(zmq.ZMQError) as e:  # ROUTER_MANDATORY: no such peer
                server.router.send_multipart([identity, b"anything"])
            assert e.value.errno == zmq.EHOSTUNREACH
            assert s.poll(0) == 0
            events[identity] = _events(mon)
        # each reached the port and failed its handshake (plain: NULL meets CURVE; another
        # cluster's: the server cannot open its box; unlisted: the ZAP check said no)
        assert all(any(e.startswith("HANDSHAKE_FAILED") for e in ev) and "HANDSHAKE_SUCCEEDED" not in ev
                   for ev in events.values()), events
        assert "HANDSHAKE_FAILED_AUTH" in events[b"unlisted"]
        refused = [r.getMessage() for r in caplog.records if "refused a CURVE client" in r.getMessage()]
        unlisted = load_certificate(theirs / "client-0.key_secret")[0].decode()
        assert len(refused) == 1 and unlisted in refused[0]
        client.close()
    finally:
        for s, mon in rogues.values():
            s.disable_monitor()
            mon.close(0)
            s.close(0)
        ctx.term()
        server.close()


def test_a_server_whose_authenticator_is_gone_refuses_every_client(keydirs):
    """NOTE(zap-fail-closed): without ZAP_ENFORCE_DOMAIN, libzmq lets any CURVE client in when
    no authenticator listens (as while a Transport closes)."""
    ours, _ = keydirs
    port, = free_ports(1)
    name = f"pserver@127.0.0.1:{port}"
    server = Transport(name, f"127.0.0.1:{port}", {}, "digest", security=Security.from_path(ours))
    server.security.stop()
    client = Transport("trainer:0", None, {name: f"127.0.0.1:{port}"}, "digest",
                       security=Security.from_path(ours))
    client.send(name, pack("hello", "trainer:0", -1, digest="digest"))
    try:
        assert _poll_until(server, lambda g: False, seconds=0.5) == []
    finally:
        client.dealers[name].setsockopt(zmq.LINGER, 0)  # its hello never leaves
        client.close()
        server.close()


def _attack(endpoints, ours, theirs, stop, events):
    """Rogue clients dial every pserver again and again while the job runs."""
    ctx = zmq.Context()
    try:
        while not stop.is_set():
            made = [(_rogue(ctx, int(ep.rsplit(":", 1)[1]), sec, b"trainer:0"), (ep, i))
                    for ep in endpoints for i, sec in _rogues(ours, theirs).items()]
            stop.wait(0.5)
            for (s, mon), i in made:
                events.setdefault(i, set()).update(_events(mon))
                s.disable_monitor()
                mon.close(0)
                s.close(0)
    finally:  # whatever went wrong, no socket is left for the context to wait on at exit
        ctx.destroy(linger=0)


def test_keyed_run_with_rogue_clients_equals_an_unkeyed_run(keydirs, tmp_path, monkeypatch):
    ours, theirs = keydirs
    # trainer 1 sleeps 0.1 s a step: the pservers live long enough (1.6 s of steps) for every
    # rogue client to be knocked on, even when its first connects are delayed
    args = ("--model", "linear", "--optimizer", "sgd", "--steps", "16", "--slow", "0.1")
    (tmp_path / "plain").mkdir()
    (tmp_path / "keyed").mkdir()
    code, log = _run(tmp_path / "plain", 2, 2, *args)
    assert code == 0, log
    envs = placegroup.tools.launch.cluster_envs
    stop, events, threads, attacked = threading.Event(), {}, [], []

    def cluster_envs(trainers, pservers):  # start the attack on the pservers the job gets
        out = envs(trainers, pservers)
        eps = attacked[:] = [m.endpoint for m in out if m.role == "PSERVER"]
        threads.append(threading.Thread(target=_attack, args=(eps, ours, theirs, stop, events), daemon=True))
        threads[0].start()
        return out

    monkeypatch.setattr(placegroup.tools.launch, "cluster_envs", cluster_envs)
    try:
        code, log = _run(tmp_path / "keyed", 2, 2, *args, env={"PLACEGROUP_KEYS": str(ours)})
    finally:
        stop.set()
        threads[0].join(10)
    assert code == 0, log
    assert len(attacked) == 2
    for ep in attacked:  # once per process (launch prefixes its lines with its name): the unlisted key
        assert log.count(f"[pserver@{ep}] refused a CURVE client") == 1, (log, events)
    assert all(any(e.startswith("HANDSHAKE_FAILED") for e in events[i]) for i in events), events
    assert all("HANDSHAKE_FAILED_AUTH" in e for (_, i), e in events.items() if i == b"unlisted"), events
    assert not any("HANDSHAKE_SUCCEEDED" in e for e in events.values()), events
    for t in range(2):
        plain = np.load(tmp_path / "plain" / f"trainer{t}.npz")
        keyed = np.load(tmp_path / "keyed" / f"trainer{t}.npz")
        for k in plain.files:
            np.testing.assert_array_equal(keyed[k], plain[k], err_msg=k)


def test_placegroup_keys_writes_files_with_modes_and_refuses_to_overwrite(tmp_path):
    d = tmp_path / "keys"
    runner = CliRunner()
    r = runner.invoke(main, ["keys", str(d), "--clients", "3"])
    assert r.exit_code == 0, r.output
    assert f"PLACEGROUP_KEYS={d}" in r.output
    secrets = ["server.key_secret", "client-0.key_secret", "client-1.key_secret", "client-2.key_secret"]
    publics = ["server.key", "allowed/client-0.key", "allowed/client-1.key", "allowed/client-2.key"]
    for f in secrets + publics:
        mode = os.stat(d / f).st_mode & 0o777
        assert mode == (0o600 if f in secrets else 0o644), (f, oct(mode))
        public, secret = load_certificate(d / f)
        assert (secret is not None) == (f in secrets) and len(public) == 40
    assert load_certificate(d / "server.key")[0] == load_certificate(d / "server.key_secret")[0]
    assert os.stat(d).st_mode & 0o777 == 0o700
    before = {f: (d / f).read_bytes() for f in secrets + publics}
    r = runner.invoke(main, ["keys", str(d)])
    assert r.exit_code == 2 and "already holds keys" in r.output and "--force" in r.output
    assert before == {f: (d / f).read_bytes() for f in secrets + publics}
    (d / "allowed" / "monitor.key").write_bytes(before["allowed/client-0.key"])  # not ours: kept
    r = runner.invoke(main, ["keys", str(d), "--force"])
    assert r.exit_code == 0, r.output
    assert (d / "server.key_secret").read_bytes() != before["server.key_secret"]
    assert sorted(p.name for p in (d / "allowed").iterdir()) == ["client-0.key", "monitor.key"]
    assert not (d / "client-2.key_secret").exists()  # a replaced key is no longer allowed


@pytest.mark.parametrize("layout, error", [
    ({"rm": "client-0.key_secret"}, r"client-0\.key_secret .*does not exist"),
    ({"rm": "server.key"}, r"server\.key .*does not exist"),
    ({"garble": "client-0.key_secret"}, r"client-0\.key_secret.*secret-key is not a 40-character"),
    ({"client": "client-7"}, r"client-7\.key_secret .*does not exist"),
    ({"config": {"server": "server.key", "client": "allowed/client-0.key"}},
     r"client-0\.key .*holds no secret-key"),
])
def test_a_bad_key_setup_names_the_file(tmp_path, layout, error):
    d = tmp_path / "k"
    write_keys(d)
    if "rm" in layout:
        (d / layout["rm"]).unlink()
    if "garble" in layout:
        p = d / layout["garble"]
        p.write_text(p.read_text().replace('secret-key = "', 'secret-key = "x'))
    where = d
    if "config" in layout:
        where = d / "keys.json"
        where.write_text(json.dumps(layout["config"]))
    sec = Security.from_env({"PLACEGROUP_KEYS": str(where), "PLACEGROUP_CLIENT_KEY": layout.get("client", "")})
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    try:
        sec.start(ctx)
        with pytest.raises(SecurityError, match=error):
            sec.apply(s, server=False)
    finally:
        s.close(0)
        ctx.term()


def test_configuration_from_the_environment_and_a_toml_file(tmp_path):
    assert Security.from_env({}) is None and Security.from_env({"PLACEGROUP_KEYS": " "}) is None
    with pytest.raises(SecurityError, match="PLACEGROUP_KEYS=.*nowhere: no such directory or file"):
        Security.from_env({"PLACEGROUP_KEYS": str(tmp_path / "nowhere")})
    d = tmp_path / "k"
    write_keys(d, clients=2)
    cfg = tmp_path / "keys.toml"  # a trainer that never binds: no server secret, no allowed/
    cfg.write_text(f'server = "{d}/server.key"\nclient = "k/client-1.key_secret"\n')
    sec = Security.from_env({"PLACEGROUP_KEYS": str(cfg)})
    assert sec.paths["client"] == d / "client-1.key_secret" and sec.paths["server_secret"] is None
    ctx = zmq.Context()
    s = ctx.socket(zmq.DEALER)
    try:
        sec.start(ctx)
        sec.apply(s, server=False)
        assert s.getsockopt(zmq.MECHANISM) == zmq.CURVE and not s.getsockopt(zmq.CURVE_SERVER)
        with pytest.raises(SecurityError, match=r"names no 'server_secret' key file.*bind"):
            sec.apply(s, server=True)
    finally:
        s.close(0)
        ctx.term()
    cfg.write_text('server = "a"\nsever_secret = "b"\n')
    with pytest.raises(SecurityError, match="maps some of"):
        Security.from_env({"PLACEGROUP_KEYS": str(cfg)})


def test_a_client_whose_key_is_refused_fails_at_once_naming_the_server(keydirs):
    """A trainer with a key the pserver does not allow learns it from the refused handshake
    (PeerLost naming the server and the keys), not after PLACEGROUP_START_TIMEOUT."""
    from placegroup.comm.mailbox import Mailbox
    from placegroup.errors import PeerLost

    ours, theirs = keydirs
    port, = free_ports(1)
    name = f"pserver@127.0.0.1:{port}"
    server = Transport(name, f"127.0.0.1:{port}", {}, "digest", security=Security.from_path(ours))
    client = Transport("trainer:0", None, {name: f"127.0.0.1:{port}"}, "digest",
                       security=Security.from_path(ours, client=str(theirs / "client-0.key_secret")))
    mb = Mailbox(client)
    try:
        t0 = time.monotonic()
        with pytest.raises(PeerLost, match=rf"peer {name} refused this executor's CURVE handshake.*waiting for w"):
            mb.wait([("w", 0, name)], 30 * TIME_FACTOR, lambda missing: "waiting for w")
        assert time.monotonic() - t0 < 10 * TIME_FACTOR
    finally:
        client.close()
        server.close()
