"""Fleet's role makers (Fluid 1.8 ``fluid.incubate.fleet.base.role_maker``): who this process is.

A role maker answers, for ``fleet.init(role_maker)``: is this process a worker (trainer) or a
server (pserver), its index among them, how many workers there are and the servers'
endpoints. ``PaddleCloudRoleMaker`` reads them from the environment a cluster manager (or
``placegroup launch``) sets, through ``placegroup.config``; ``UserDefinedRoleMaker`` takes them
as arguments.

Example::

    role = role_maker.PaddleCloudRoleMaker()      # TRAINING_ROLE, PADDLE_PSERVERS_IP_PORT_LIST, ...
    fleet.init(role)
    role = role_maker.UserDefinedRoleMaker(current_id=0, role=role_maker.Role.SERVER, worker_num=2,
                                           server_endpoints=["127.0.0.1:6170", "127.0.0.1:6171"])

``GeneralRoleMaker`` reads the same job, and barriers, all-reduces and all-gathers between the
processes through a store they share (a directory, an HDFS path or an HTTP key-value server
on trainer 0: rendezvous.py), as Fluid's does through gloo. ``UserDefinedCollectiveRoleMaker``
names a collective job's trainers as arguments. ``MPIRoleMaker`` and ``MPISymetricRoleMaker``
take the role from MPI (mpi4py, under ``mpirun``); without mpi4py they fail when made, as in Fluid.
``MockBarrier`` is the barrier that does nothing.

Thread-safety: a role maker is made and read by one thread (the script's).
"""
from __future__ import annotations

import atexit
import os
import random
import socket
import warnings

from placegroup import config
from placegroup.tools.compat import install_gaps
from placegroup.errors import ConfigError
from placegroup.incubate.fleet.base.rendezvous import DirStore, HadoopStore, HTTPStore, KVServer, StoreGroup
from placegroup.transpiler.endpoints import parse

__all__ = ["Role", "RoleMakerBase", "MPISymetricRoleMaker", "UserDefinedRoleMaker", "UserDefinedCollectiveRoleMaker",
           "PaddleCloudRoleMaker", "GeneralRoleMaker"]


class Role:
    """A process's role in a parameter-server job: ``WORKER`` (trainer) or ``SERVER`` (pserver)."""
    WORKER = 1
    SERVER = 2


class MockBarrier:
    """A barrier that does nothing (Fluid's ``MockBarrier``): what ``GeneralRoleMaker`` uses for
    a group whose barriers are switched off (``PADDLE_IS_BARRIER_ALL_ROLE=0``).

    Example::

        MockBarrier().all_gather(3)   # [3]
    """

    def barrier(self) -> None:
        pass

    def barrier_all(self) -> None:
        pass

    def all_reduce(self, obj, mode: str = "sum"):
        """``obj`` itself: the reduction over a group of one (``mode`` as a real group's)."""
        return obj

    def all_gather(self, obj) -> list:
        return [obj]


class RoleMakerBase:
    """What every role maker answers, once ``generate_role`` has read the job (it runs on the
    first question if ``fleet.init`` has not run it)."""

    def __init__(self) -> None:
        self._worker_endpoints: list[str] = []
        self._server_endpoints: list[str] = []
        self._role_is_generated = False
        self._role: int | None = None
        self._current_id = -1
        self._trainers_num = 0

    def generate_role(self) -> None:
        raise NotImplementedError("a role maker defines generate_role()")

    def _ready(self) -> "RoleMakerBase":
        if not self._role_is_generated:
            self.generate_role()
        return self

    def is_worker(self) -> bool:
        return self._ready()._role == Role.WORKER

    def is_server(self) -> bool:
        return self._ready()._role == Role.SERVER

    def is_first_worker(self) -> bool:
        return self.is_worker() and self._current_id == 0

    def worker_index(self) -> int:
        """This worker's id, 0..worker_num()-1 (on a server: its server index, as in Fluid)."""
        return self._ready()._current_id

    def server_index(self) -> int:
        """This server's index in ``get_pserver_endpoints()`` (on a worker: its worker index)."""
        return self._ready()._current_id

    def worker_num(self) -> int:
        return self._ready()._trainers_num

    def get_trainer_endpoints(self) -> list[str]:
        """The workers' ``ip:port`` list where the job names them, else ``[]``."""
        return self._ready()._worker_endpoints

    def get_pserver_endpoints(self) -> list[str]:
        return self._ready()._server_endpoints

    def to_string(self) -> str:
        return (f"role: {self._role}, current_id: {self._current_id}, worker_endpoints: "
                f"{self._worker_endpoints}, server_endpoints: {self._server_endpoints}")

    # Fluid's base has no collectives: it warns and does nothing (GeneralRoleMaker and the MPI
    # role makers have them).
    def _none(self, what: str) -> None:
        warnings.warn(f"{type(self).__name__} does not have {what} (GeneralRoleMaker and the MPI role "
                      f"makers do)", stacklevel=3)

    def all_gather(self, input):
        """Every process's ``input``; here a warning and None."""
        return self._none("all gather")

    def all_reduce_worker(self, input, output, mode: str = "sum") -> None:
        """Reduce ``input`` over the workers into ``output``; here a warning, nothing else."""
        self._none("all reduce worker")

    def barrier_worker(self) -> None:
        self._none("barrier worker")

    def barrier_all(self) -> None:
        self._none("barrier all")


def _endpoints(variable: str) -> list[str]:
    """The ``ip:port`` list of ``variable`` ([] when unset), checked as the transpiler checks
    its own (a malformed entry is a ConfigError naming the variable)."""
    text = config.get(variable)
    return parse(text, config.get("PADDLE_INIT_PORT"), variable) if text else []


class PaddleCloudRoleMaker(RoleMakerBase):
    """The role from the environment, as Fluid 1.8's PaddleCloudRoleMaker reads it.

    Parameter-server jobs (``is_collective=False``) need ``TRAINING_ROLE`` (TRAINER or PSERVER),
    ``PADDLE_PSERVERS_IP_PORT_LIST`` and ``PADDLE_TRAINERS_NUM``; a trainer also
    ``PADDLE_TRAINER_ID``, a pserver ``POD_IP`` and ``PADDLE_PORT`` (its endpoint, which must be
    in the list). ``PADDLE_TRAINER_ENDPOINTS``, when set, gives ``get_trainer_endpoints()``
    (Fluid leaves it empty). A collective job (``is_collective=True``) is a worker with id
    ``PADDLE_TRAINER_ID`` among ``PADDLE_TRAINER_ENDPOINTS``. ``placegroup launch`` sets all of
    them.

    As in Fluid there is no one-process default: with none of these set ``generate_role``
    raises; a script that also runs alone checks ``TRAINING_ROLE`` itself and trains without
    fleet then.

    Args:
        is_collective: read a collective (no pservers) job's variables instead.

    Raises:
        ConfigError: (from ``generate_role``, which ``fleet.init`` calls) naming every variable
            that is unset or wrong, and what it expects.

    Example::

        role = PaddleCloudRoleMaker()
        role.generate_role()
        role.is_server(), role.get_pserver_endpoints()
    """

    def __init__(self, is_collective: bool = False) -> None:
        super().__init__()
        self._is_collective = is_collective

    def generate_role(self) -> None:
        if self._role_is_generated:
            return
        self._worker_endpoints = _endpoints("PADDLE_TRAINER_ENDPOINTS")
        if self._is_collective:
            if not self._worker_endpoints:
                raise ConfigError("PaddleCloudRoleMaker(is_collective=True) needs PADDLE_TRAINER_ENDPOINTS "
                                  "(the trainers' ip:port list), which is unset")
            self._role, self._current_id = Role.WORKER, config.get("PADDLE_TRAINER_ID")
            self._trainers_num = len(self._worker_endpoints)
        else:
            self._generate_ps_role()
        self._role_is_generated = True

    def _generate_ps_role(self) -> None:
        role = config.get("TRAINING_ROLE")
        need = ["TRAINING_ROLE", "PADDLE_PSERVERS_IP_PORT_LIST", "PADDLE_TRAINERS_NUM"]
        need += {"TRAINER": ["PADDLE_TRAINER_ID"], "PSERVER": ["POD_IP", "PADDLE_PORT"]}.get(role, [])
        unset = [n for n in need if not config.is_set(n)]
        if unset:
            raise ConfigError(f"PaddleCloudRoleMaker reads a parameter-server job from the environment, and "
                              f"{', '.join(unset)} {'is' if len(unset) == 1 else 'are'} unset (it needs "
                              f"{', '.join(need)}; `placegroup launch` sets them). Fluid's fleet has no "
                              f"one-process mode: without TRAINING_ROLE, train without fleet")
        eps = _endpoints("PADDLE_PSERVERS_IP_PORT_LIST")
        n = config.get("PADDLE_TRAINERS_NUM")
        if n < 1:
            raise ConfigError(f"PADDLE_TRAINERS_NUM={n}: expected at least one trainer")
        if role == "TRAINER":
            current = config.get("PADDLE_TRAINER_ID")
            if current >= n:
                raise ConfigError(f"PADDLE_TRAINER_ID={current} is not in 0..{n - 1} "
                                  f"(PADDLE_TRAINERS_NUM={n})")
        else:
            me = f"{config.get('POD_IP')}:{config.get('PADDLE_PORT')}"
            if me not in eps:
                raise ConfigError(f"this pserver's endpoint {me} (POD_IP:PADDLE_PORT) is not in "
                                  f"PADDLE_PSERVERS_IP_PORT_LIST={','.join(eps)}")
            current = eps.index(me)
        self._role = Role.WORKER if role == "TRAINER" else Role.SERVER
        self._current_id, self._trainers_num, self._server_endpoints = current, n, eps


class UserDefinedRoleMaker(RoleMakerBase):
    """The role given as arguments (Fluid 1.8's checks and messages).

    Args:
        current_id: this process's worker id, or server index.
        role: ``Role.WORKER`` or ``Role.SERVER``.
        worker_num: how many workers the job has (> 0).
        server_endpoints: the servers' ``"ip:port"`` strs, no duplicates.

    Raises:
        TypeError: an argument of the wrong type.
        ConfigError: (a ValueError) an empty or duplicated endpoint list, a negative id, a
            server index past the list, worker_num <= 0.

    Example::

        UserDefinedRoleMaker(current_id=1, role=Role.WORKER, worker_num=2,
                             server_endpoints=["127.0.0.1:6170"])
    """

    def __init__(self, current_id: int = 0, role: int = Role.WORKER, worker_num: int = 0,
                 server_endpoints: list[str] | None = None) -> None:
        super().__init__()
        if not isinstance(server_endpoints, list):
            raise TypeError("server_endpoints must be as string list")
        if not server_endpoints:
            raise ConfigError("the length of server_endpoints list must be greater than 0")
        if len(server_endpoints) != len(set(server_endpoints)):
            raise ConfigError("server_endpoints can't have duplicate elements")
        if not all(isinstance(e, str) for e in server_endpoints):
            raise TypeError("every element in server_endpoints list must be as string")
        if role not in (Role.WORKER, Role.SERVER):
            raise TypeError("role must be as Role")
        if not isinstance(current_id, int):
            raise TypeError("current_id must be as int")
        if current_id < 0:
            raise ConfigError("current_id must be greater than or equal to 0")
        if role == Role.SERVER and current_id >= len(server_endpoints):
            raise ConfigError(f"if role is Role.SERVER, current_id must be less than or equal to "
                              f"len(server_endpoints) - 1 = {len(server_endpoints) - 1}")
        if not isinstance(worker_num, int):
            raise TypeError("worker_num must be as int")
        if worker_num <= 0:
            raise ConfigError("worker_num must be greater than 0")
        self._server_endpoints, self._role = list(server_endpoints), role
        self._current_id, self._trainers_num = current_id, worker_num

    def generate_role(self) -> None:
        self._role_is_generated = True



class UserDefinedCollectiveRoleMaker(RoleMakerBase):
    """A collective job's trainers as arguments (Fluid 1.8's checks and messages): every process
    is a worker, ``current_id`` its index in ``worker_endpoints``.

    Args:
        current_id: this trainer's index.
        worker_endpoints: the trainers' ``"ip:port"`` strs, no duplicates.

    Raises:
        TypeError: an argument of the wrong type.
        ConfigError: (a ValueError) an empty or duplicated list, an id outside it.

    Example::

        UserDefinedCollectiveRoleMaker(1, ["127.0.0.1:7480", "127.0.0.1:7481"])
    """

    def __init__(self, current_id: int = 0, worker_endpoints: list[str] | None = None) -> None:
        super().__init__()
        if not isinstance(worker_endpoints, list):
            raise TypeError("worker_endpoints must be as string list")
        if not worker_endpoints:
            raise ConfigError("the length of worker_endpoints list must be greater than 0")
        if len(worker_endpoints) != len(set(worker_endpoints)):
            raise ConfigError("worker_endpoints can't have duplicate elements")
        if not all(isinstance(e, str) for e in worker_endpoints):
            raise TypeError("every element in worker_endpoints list must be as string")
        if not isinstance(current_id, int):
            raise TypeError("current_id must be as int")
        if current_id < 0:
            raise ConfigError("current_id must be greater than or equal to 0")
        if current_id >= len(worker_endpoints):
            raise ConfigError(f"current_id must be less than or equal to len(worker_endpoints) - 1 = "
                              f"{len(worker_endpoints) - 1}")
        self._worker_endpoints, self._role = list(worker_endpoints), Role.WORKER
        self._current_id, self._trainers_num = current_id, len(worker_endpoints)

    def generate_role(self) -> None:
        self._role_is_generated = True


def _fluid_env(name: str) -> str | None:
    """Fluid's variable ``name`` (declared in placegroup.config), or None when unset or empty."""
    return config.raw(name)


def _fluid_int(name: str) -> int | None:
    text = _fluid_env(name)
    try:
        return None if text is None else int(text)
    except ValueError:
        raise ConfigError(f"{name}={text!r}: expected a whole number") from None


class GeneralRoleMaker(RoleMakerBase):
    """The role from the environment, with barriers and reductions between the processes
    (Fluid 1.8's ``GeneralRoleMaker``; Fluid runs them on gloo, here on ``rendezvous.StoreGroup``).

    It reads ``TRAINING_ROLE``, ``PADDLE_TRAINER_ENDPOINTS`` (the trainers; their count is
    ``worker_num()``), ``PADDLE_PSERVERS_IP_PORT_LIST`` (may be empty), and for a trainer
    ``PADDLE_TRAINER_ID``, for a pserver ``PADDLE_PSERVER_ID`` (its index in the list) or else
    ``POD_IP``:``PADDLE_PORT``, as Fluid's does; ``placegroup launch`` sets them.
    ``PADDLE_IS_BARRIER_ALL_ROLE=0`` turns the trainers' own group into a ``MockBarrier``;
    ``SYS_JOB_ID`` prefixes the store's keys.

    The processes meet in a store (NOTE(store-rounds) in rendezvous.py): ``path`` (a directory
    they all see, or an ``hdfs:``/``afs:`` path reached with ``hadoop fs`` and ``hdfs_name``,
    ``hdfs_ugi``), or ``http_ip_port`` (trainer 0 serves a key-value store there). As Fluid's
    gloo init, ``generate_role`` (``fleet.init``) then waits until every process has come, up to
    ``init_timeout_seconds``. With neither, the role is read and the collectives raise.

    Args:
        path: the store's directory, or ``hdfs:``/``afs:`` path.
        hdfs_name, hdfs_ugi: ``fs.default.name`` and ``hadoop.job.ugi`` for an hdfs path.
        http_ip_port: ``"ip:port"`` of trainer 0's key-value server (wins over ``path``).
        init_timeout_seconds: how long to wait for the others at ``generate_role`` (3600).
        run_timeout_seconds: how long a barrier or reduction waits (9999999).

    Raises:
        ConfigError: (from ``generate_role``) a variable unset or wrong, naming it; a
            collective with no store.
        CommTimeout: a process did not come in time, naming it by rank.

    Example::

        role = GeneralRoleMaker(path="/shared/job1")
        fleet.init(role)
        fleet.barrier_worker(); total = [0.0]; role.all_reduce_worker([local], total)
    """

    def __init__(self, **kwargs) -> None:
        super().__init__()
        self._hdfs_name = kwargs.get("hdfs_name", "")
        self._hdfs_ugi = kwargs.get("hdfs_ugi", "")
        self._hdfs_path = kwargs.get("path", "").rstrip("/")
        self._init_timeout_seconds = kwargs.get("init_timeout_seconds", 3600)
        self._run_timeout_seconds = kwargs.get("run_timeout_seconds", 9999999)
        ip_port = kwargs.get("http_ip_port", "")
        self._http_ip_port = ip_port.split(":") if ip_port else []
        if ip_port and (len(self._http_ip_port) != 2 or not self._http_ip_port[1].isdigit()):
            raise ConfigError(f"GeneralRoleMaker(http_ip_port={ip_port!r}): expected 'ip:port'")
        self._prefix = _fluid_env("SYS_JOB_ID") or ""
        self._http_server: KVServer | None = None
        self._node_type_comm = self._all_comm = None
        self._cur_endpoint = ""
        self._rank = self._size = 0

    def _store(self, first_trainer: bool):
        if self._http_ip_port:
            ip, port = self._http_ip_port[0], int(self._http_ip_port[1])
            if first_trainer:  # Fluid's trainer 0 runs the key-value server
                self._http_server = KVServer(port).start()
                atexit.register(self._finalize)  # NOTE(store-owner-leaves) in rendezvous.py
            return HTTPStore(ip, port)
        if self._hdfs_path.startswith(("hdfs:", "afs:")):
            home = _fluid_env("HADOOP_HOME")
            return HadoopStore(self._hdfs_path, self._hdfs_name, self._hdfs_ugi,
                               os.path.join(home, "bin", "hadoop") if home else "hadoop")
        return DirStore(self._hdfs_path) if self._hdfs_path else None

    def generate_role(self) -> None:
        if self._role_is_generated:
            return
        role = config.get("TRAINING_ROLE")
        need = ["TRAINING_ROLE", "PADDLE_TRAINER_ENDPOINTS"] + (["PADDLE_TRAINER_ID"] if role == "TRAINER" else [])
        unset = [n for n in need if not config.is_set(n)]
        if unset:
            raise ConfigError(f"GeneralRoleMaker reads the job from the environment, and {', '.join(unset)} "
                              f"{'is' if len(unset) == 1 else 'are'} unset (it needs {', '.join(need)}, and "
                              f"PADDLE_PSERVERS_IP_PORT_LIST; `placegroup launch` sets them)")
        workers, servers = _endpoints("PADDLE_TRAINER_ENDPOINTS"), _endpoints("PADDLE_PSERVERS_IP_PORT_LIST")
        if role == "TRAINER":
            current = config.get("PADDLE_TRAINER_ID")
            if current >= len(workers):
                raise ConfigError(f"PADDLE_TRAINER_ID={current} is not in 0..{len(workers) - 1} "
                                  f"(PADDLE_TRAINER_ENDPOINTS names {len(workers)})")
            me, group, rank = workers[current], "trainer", current
        else:
            current = _fluid_int("PADDLE_PSERVER_ID")
            if current is None:
                own = f"{config.get('POD_IP')}:{config.get('PADDLE_PORT')}"
                if own not in servers:
                    raise ConfigError(f"this pserver's endpoint {own} (POD_IP:PADDLE_PORT; or set "
                                      f"PADDLE_PSERVER_ID) is not in PADDLE_PSERVERS_IP_PORT_LIST={','.join(servers)}")
                current = servers.index(own)
            elif not 0 <= current < len(servers):
                raise ConfigError(f"PADDLE_PSERVER_ID={current} is not in 0..{len(servers) - 1} "
                                  f"(PADDLE_PSERVERS_IP_PORT_LIST names {len(servers)})")
            me, group, rank = servers[current], "pserver", len(workers) + current
        self._role = Role.WORKER if role == "TRAINER" else Role.SERVER
        self._current_id, self._trainers_num = current, len(workers)
        self._worker_endpoints, self._server_endpoints, self._cur_endpoint = workers, servers, me
        self._rank, self._size = rank, len(workers) + len(servers)
        store = self._store(role == "TRAINER" and current == 0)
        if store is not None:
            scope = lambda name: f"{self._prefix}/{name}" if self._prefix else name  # noqa: E731
            timeouts = (self._init_timeout_seconds, self._run_timeout_seconds, bool(self._http_ip_port))
            if role == "TRAINER" and _fluid_int("PADDLE_IS_BARRIER_ALL_ROLE") == 0:
                self._node_type_comm = MockBarrier()
            else:
                size = len(workers) if role == "TRAINER" else len(servers)
                self._node_type_comm = StoreGroup(store, scope(group), current, size, *timeouts).init()
            self._all_comm = StoreGroup(store, scope("all"), rank, self._size, *timeouts).init()
        self._role_is_generated = True

    def _comm(self, which: str):
        self._ready()
        comm = getattr(self, which)
        if comm is None:
            raise ConfigError("GeneralRoleMaker has no store to barrier or reduce through: make it with "
                              "path= (a directory every process sees, or an hdfs: path) or http_ip_port= "
                              "(trainer 0's key-value server)")
        return comm

    def get_local_endpoint(self) -> str:
        return self._ready()._cur_endpoint

    def server_num(self) -> int:
        return len(self._ready()._server_endpoints)

    def all_gather(self, input) -> list:
        """Every process's ``input`` (a number, str or list of them), trainers first, then
        pservers; after a barrier of them all, as in Fluid."""
        return self._all_gather(input)

    def all_reduce_worker(self, input, output, mode: str = "sum") -> None:
        """Reduce ``input`` (a list or 1-D array) over the trainers by ``mode`` (``"sum"``,
        ``"min"``, ``"max"``) into ``output`` (same length); nothing on a pserver."""
        if self.is_worker():
            self._all_reduce(input, output, mode)

    def barrier_worker(self) -> None:
        self._barrier_worker()

    def barrier_all(self) -> None:
        self._barrier_all()

    def _barrier_worker(self) -> None:
        if self.is_worker():
            self._comm("_node_type_comm").barrier()

    def _barrier_server(self) -> None:
        if self.is_server():
            self._comm("_node_type_comm").barrier()

    def _barrier_all(self) -> None:
        self._comm("_all_comm").barrier()

    def _all_reduce(self, input, output, mode: str = "sum") -> None:
        for i, v in enumerate(self._comm("_node_type_comm").all_reduce(list(input), mode)):
            output[i] = v

    def _all_gather(self, obj) -> list:
        self._barrier_all()
        return self._comm("_all_comm").all_gather(obj)

    def _worker_gather(self, obj) -> list | None:
        if not self.is_worker():
            return None
        self._barrier_worker()
        return self._comm("_node_type_comm").all_gather(obj)

    def _worker_num(self) -> int:
        return self.worker_num()

    def _server_num(self) -> int:
        return self.server_num()

    def _get_rank(self) -> int:
        return self._ready()._rank

    def _get_size(self) -> int:
        return self._ready()._size

    def _finalize(self) -> None:
        """Trainer 0 of an HTTP store: wait (up to ``PLACEGROUP_PEER_TIMEOUT``) until the others
        have read the last round, then stop the key-value server (NOTE(store-owner-leaves) in
        rendezvous.py); it runs at the end of the process too. Nothing for the others."""
        if self._http_server is None:
            return
        grace = config.get("PLACEGROUP_PEER_TIMEOUT")
        for comm in (self._node_type_comm, self._all_comm):
            if isinstance(comm, StoreGroup):
                behind = comm.wait_done(grace)
                if behind:
                    warnings.warn(f"GeneralRoleMaker: stopping the key-value server while ranks {behind} of "
                                  f"group {comm.scope!r} have not finished its last round (after {grace:g}s)")
        self._http_server.stop()
        self._http_server = None
        atexit.unregister(self._finalize)


def _mpi():
    """mpi4py's MPI module; a clear error without it (Fluid's MPI role makers need it too)."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ModuleNotFoundError(f"Fluid's MPI role makers need mpi4py, which is not installed ({e}): "
                                  f"install it (`pip install mpi4py`, over an MPI library) and start the "
                                  f"job with mpirun, or use PaddleCloudRoleMaker / GeneralRoleMaker "
                                  f"(`placegroup launch`)", name="mpi4py") from None
    return MPI


class MPIRoleMaker(RoleMakerBase):
    """The base of the role makers that learn the job from MPI (``mpi4py``'s ``COMM_WORLD``).

    Raises:
        ModuleNotFoundError: (when made) mpi4py is not installed, as in Fluid.
    """

    def __init__(self) -> None:
        super().__init__()
        self.MPI = _mpi()
        self._comm = self.MPI.COMM_WORLD
        self._node_type_comm = None
        self._ips: list[str] | None = None
        self._ip: str | None = None

    def _get_rank(self) -> int:
        self._rank = self._comm.Get_rank()
        return self._rank

    def _get_size(self) -> int:
        self._size = self._comm.Get_size()
        return self._size

    def _all_gather(self, obj) -> list:
        self._barrier_all()
        return self._comm.allgather(obj)

    def _worker_gather(self, obj) -> list | None:
        if self.is_worker():
            self._node_type_comm.barrier()
            return self._node_type_comm.allgather(obj)
        return None

    def _barrier_all(self) -> None:
        self._comm.barrier()

    def _finalize(self) -> None:
        self.MPI.Finalize()

    def _get_ips(self) -> list[str]:
        """Every rank's IP address, in rank order."""
        if not self._ips:
            self._ips = self._comm.allgather(self.get_local_ip())
        return self._ips

    def get_local_ip(self) -> str:
        self._ip = socket.gethostbyname(socket.gethostname())
        return self._ip

    def generate_role(self) -> None:
        raise NotImplementedError("an MPI role maker defines generate_role()")


class MPISymetricRoleMaker(MPIRoleMaker):
    """A server and a worker on every node, under MPI (Fluid 1.8's): even ranks are servers,
    odd ranks workers; node k's server listens on a port every rank draws alike (seeded by
    the number of servers, 60001-64000, as Fluid's).

    Raises:
        ModuleNotFoundError: (when made) mpi4py is not installed, as in Fluid.

    Example (under ``mpirun -np 4``)::

        role = MPISymetricRoleMaker(); fleet.init(role)   # ranks 0, 2 serve; 1, 3 train
    """

    def __init__(self) -> None:
        super().__init__()
        self._node_type: int | None = None
        self._proc_per_node = 2
        self._pserver_rand_port = 0

    def generate_role(self) -> None:
        if self._role_is_generated:
            return
        ips = self._get_ips()
        self._worker_endpoints, self._server_endpoints = ips[1::2], ips[::2]
        rank = self._get_rank()
        self._node_type = 0 if rank % self._proc_per_node % 2 == 0 else 1
        self._role = Role.SERVER if self._node_type == 0 else Role.WORKER
        self._node_type_comm = self._comm.Split(self._node_type)
        self._current_id = rank // self._proc_per_node
        self._trainers_num = self._get_size() // self._proc_per_node
        self._role_is_generated = True

    def _server_num(self) -> int:
        return self._ready()._get_size() // self._proc_per_node

    def _worker_num(self) -> int:
        return self.worker_num()

    def get_pserver_endpoints(self) -> list[str]:
        """The servers' ``ip:port``: every node's IP with the port all ranks draw alike."""
        if self._pserver_rand_port <= 0:
            self._pserver_rand_port = random.Random(self._server_num()).randint(60001, 64000)
        return [f"{ip}:{self._pserver_rand_port}" for ip in self._ready()._server_endpoints]

    def all_gather(self, input) -> list:
        self._ready()
        return self._all_gather(input)

    def all_reduce_worker(self, input, output, mode: str = "sum") -> None:
        """``output`` = ``input`` reduced over the workers by ``mode`` (numpy arrays, MPI's
        buffer Allreduce); a warning on a server."""
        if not self.is_worker():
            warnings.warn("current role is not worker in all_reduce_worker", stacklevel=2)
            return
        self._all_reduce(input, output, mode)

    def _all_reduce(self, input, output, mode: str = "sum") -> None:
        ops = {"sum": self.MPI.SUM, "max": self.MPI.MAX, "min": self.MPI.MIN}
        if mode not in ops:
            raise ValueError(f"unknown mode: {mode}")
        self._ready()._node_type_comm.Allreduce(input, output, op=ops[mode])

    def barrier_worker(self) -> None:
        if self.is_worker():
            self._node_type_comm.barrier()
        else:
            warnings.warn("current role is not worker in barrier_worker", stacklevel=2)

    def barrier_all(self) -> None:
        self._ready()._comm.barrier()

    def _barrier_worker(self) -> None:
        if self.is_worker():
            self._node_type_comm.barrier()

    def _barrier_server(self) -> None:
        if self.is_server():
            self._node_type_comm.barrier()


install_gaps()
