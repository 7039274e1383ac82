"""DistributeTranspilerConfig, the dispatchers that deal parameter blocks to pservers, and the
pservers' runtime settings.

``DistributeTranspilerConfig`` has every field of Fluid 1.8.5's, set by assignment
(``config.slice_var_up = False``), plus placegroup's own (staleness, merge_steps, mp_fused).
Each field is acted on, inert (a one-time ``StrategyNotice`` says why it changes nothing here)
or refused when set to a value placegroup cannot honour (a ``ConfigError`` saying what to do);
docs/distributed.md, "Configuring the transpiler", has the table. The checks themselves are
placegroup/util/fields.py's.
"""
from __future__ import annotations

import zlib
from typing import Any, Sequence

from placegroup.util.fields import Field, Fields


class PSDispatcher:
    """Fluid's base class of the pserver dispatchers: ``dispatch(varlist)`` gives the endpoint of
    each var (or block) in ``varlist``, in order; a subclass implements ``_dispatch_one``, or
    overrides ``dispatch`` as Fluid's do. Given one name instead of a list, it answers for that
    one (how placegroup's placement pass asks). ``split_method=`` takes any such class.
    """

    def __init__(self, pserver_endpoints: Sequence[str]) -> None:
        self._eps = list(pserver_endpoints)
        self._step = 0

    @property
    def eps(self) -> list[str]:
        return self._eps

    def reset(self) -> None:
        """Start counting again from the first endpoint."""
        self._step = 0

    def dispatch(self, varlist):
        if isinstance(varlist, (list, tuple)):
            return [self._dispatch_one(_name_of(v)) for v in varlist]
        return self._dispatch_one(_name_of(varlist))

    def _dispatch_one(self, name: str) -> str:
        raise NotImplementedError(f"{type(self).__name__} must implement dispatch(varlist)")


def _name_of(var) -> str:
    name = getattr(var, "name", var)
    return name() if callable(name) else name


class RoundRobin(PSDispatcher):
    """Deal blocks to pservers in turn, one counter over all blocks.

    Example::

        rr = RoundRobin(["a:1", "b:2"]); rr.dispatch(["x", "y", "z"]) == ["a:1", "b:2", "a:1"]
    """

    def _dispatch_one(self, name: str) -> str:
        ep = self._eps[self._step % len(self._eps)]
        self._step += 1
        return ep


class HashName(PSDispatcher):
    """Place a block at ``crc32(name) % #pservers``: stable across processes. (Fluid hashes with
    Python's ``hash()``, which differs between processes unless PYTHONHASHSEED is set.)"""

    def _dispatch_one(self, name: str) -> str:
        return self._eps[zlib.crc32(name.encode()) % len(self._eps)]


class DistributedMode:
    """Fluid 1.8's names for how the pservers apply gradients (what fleet's strategies record in
    ``TrainerRuntimeConfig.mode``); placegroup runs SYNC as sync and the others as async."""

    SYNC = 0
    ASYNC = 1
    HALF_ASYNC = 2
    GEO = 3


_NCCL = "it is read only with mode = 'nccl2' (NCCL collective training), which placegroup does not have"
_COLLECTIVE_MODE = ("placegroup has no mode = 'collective': with no pservers the trainers all-reduce "
                    "their gradients (docs/distributed.md)")
_STAND_IN = ("{what} has no placegroup mode of its own: a job with sync_mode = False runs async (each "
             "trainer's gradient applied alone as it arrives), as fleet's {strategy} does")
_NO_MODE = ("DistributeTranspilerConfig.mode = {mode!r} ({what}) is not how placegroup trains without "
            "pservers: leave mode = 'pserver' and transpile with pservers='' and trainers='ip:port,...' "
            "(the trainers then all-reduce their gradients); each trainer runs t.get_program(endpoint, "
            "'trainer')")


class DistributeTranspilerConfig(Fields):
    """``fluid.DistributeTranspilerConfig``: what the transpiler may do, set by assignment as in
    Fluid 1.8.5 (keyword arguments of ``transpile`` win over it).

    Acted on:
        slice_var_up: slice big parameters into blocks over the pservers.
        split_method: ``RoundRobin``, ``HashName`` or a ``PSDispatcher`` subclass (None:
            RoundRobin, as in Fluid).
        min_block_size: the smallest block, in elements.
        sync_mode: merge the trainers' gradients each step (True) or apply each alone.
        staleness: bounded staleness k. Sync mode: a trainer runs at most k steps ahead
            of the slowest (0 = sync). Async mode: a trainer computes on parameters at most k
            of its own updates old, without waiting for the newest (docs/distributed.md, "Modes").
        merge_steps: local steps merged into one update, applied once per round of
            that many steps (NOTE(merge-steps) in merge.py).
        mp_fused: model parallel: softmax cross-entropy over the shards, never the whole logits.

    The other fields of Fluid 1.8.5 are inert or refused (docs/distributed.md, "Configuring the
    transpiler"). A name that is no field is kept, as Fluid keeps it, with a one-time notice
    naming the closest field; a value of the wrong type is a TypeError naming the field.

    Example::

        config = fluid.DistributeTranspilerConfig()
        config.slice_var_up = False
        config.split_method = fluid.transpiler.HashName
        t = fluid.DistributeTranspiler(config=config)
    """

    _OPEN = True
    _FIELDS = {
        "slice_var_up": Field(bool, True),
        "split_method": Field("class", None),
        "min_block_size": Field(int, 8192, least=1),
        "enable_dc_asgd": Field(bool, False, refused={True: (
            "DC-ASGD (the pservers correct each async gradient for its delay) is not supported: "
            "placegroup's pservers apply each gradient as it is, which gives other numbers than "
            "Fluid's DC-ASGD; leave enable_dc_asgd = False (plain async: sync_mode = False), or "
            "train in sync mode")}),
        "mode": Field(str, "pserver", choices=("pserver", "nccl2", "collective"), refused={
            "nccl2": _NO_MODE.format(mode="nccl2", what="trainers all-reducing through NCCL"),
            "collective": _NO_MODE.format(mode="collective", what="collective training through NCCL")}),
        "print_log": Field(bool, False, "the transpiler logs nothing more; print(program) or `placegroup "
                                        "dump` shows what it made"),
        "wait_port": Field(bool, True, "every executor waits for its peers to connect anyway (up to "
                                       "PLACEGROUP_START_TIMEOUT), saying who it waits for"),
        "runtime_split_send_recv": Field(bool, False, "it picks how Fluid's communicator splits what it "
                                                      "sends; with sync_mode = False placegroup runs "
                                                      "async either way"),
        "sync_mode": Field(bool, True),
        "half_async": Field(bool, False, _STAND_IN.format(what="half-async",
                                                          strategy="HalfAsyncStrategy")),
        "completely_not_async": Field(bool, False, refused={True: (
            "Fluid's sync training through its communicator is chosen by sync_mode alone here, so this "
            "value would be ignored and the job would run async; for sync training leave sync_mode = "
            "True (the default) and runtime_split_send_recv = False, or use fleet's "
            "StrategyFactory.create_sync_strategy()")}),
        "geo_sgd_mode": Field(bool, False, _STAND_IN.format(what="GEO-SGD", strategy="GeoStrategy")),
        "geo_sgd_need_push_nums": Field(int, 100, "it is read only by GEO-SGD, which placegroup runs as "
                                                  "async"),
        "nccl_comm_num": Field(int, 1, _NCCL),
        "use_hierarchical_allreduce": Field(bool, False, _NCCL),
        "hierarchical_allreduce_inter_nranks": Field(int, 0, _NCCL),
        "collective_mode": Field("optstr", None, _COLLECTIVE_MODE),
        # placegroup's own
        "staleness": Field(int, 0, least=0),
        "merge_steps": Field(int, 1, least=1),
        "mp_fused": Field(bool, True),
    }

    # NOTE(sync-split): Fluid 1.8.5 refuses to have sync_mode and runtime_split_send_recv both
    # True (each setter raises ValueError if the other is already True), so a script sets
    # sync_mode = False first. The same rule here keeps a script that runs on Fluid running
    # here, and one that fails there failing here, with the same fix.
    def _check(self, name: str, value: Any) -> None:
        other = {"sync_mode": "runtime_split_send_recv", "runtime_split_send_recv": "sync_mode"}.get(name)
        if other and value and self._values[other]:
            raise ValueError(f"DistributeTranspilerConfig.{name} = True while {other} is True: Fluid "
                             f"allows only one of them; set {other} = False first")


class ServerRuntimeConfig(Fields):
    """Fluid 1.8's pserver RPC thread counts (fleet's ``get/set_server_runtime_config``): kept,
    and they change nothing here, where one thread serves each pserver's connections."""

    _OPEN = True
    _WHY = "placegroup's pservers have no RPC thread pools to size"
    _FIELDS = {
        "_rpc_send_thread_num": Field(int, 12, _WHY),
        "_rpc_get_thread_num": Field(int, 12, _WHY),
        "_rpc_prefetch_thread_num": Field(int, 12, _WHY),
    }
