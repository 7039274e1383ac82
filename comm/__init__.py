"""Communication between executors (installed as ``placegroup.comm``).

Layers, each wrapping the one below (comm/base.py): a transport (``transport``: ZeroMQ;
``loopback``: in one process), the ``session`` (hello, done, peer status), the ``mailbox``
(values, fetches, errors) and the ``collectives``. docs/protocol.md is the wire format.
"""
