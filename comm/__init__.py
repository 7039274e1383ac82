"""Communication between executors (installed as ``placegroup.comm``).

The ZeroMQ transport, framing, mailbox, heartbeats and collectives land with issue #3;
docs/protocol.md describes the wire format first.
"""
