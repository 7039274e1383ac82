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

Not here: Fluid's MPI role makers (``MPISymetricRoleMaker``), ``GeneralRoleMaker`` (its own
HTTP rendezvous) and ``UserDefinedCollectiveRoleMaker``; they raise NotImplementedInPlacegroup.

Thread-safety: a role maker is made and read by one thread (the script's).
"""
from __future__ import annotations

from placegroup import config
from placegroup.compat import install_gaps
from placegroup.errors import ConfigError
from placegroup.transpiler.endpoints import parse

__all__ = ["Role", "RoleMakerBase", "PaddleCloudRoleMaker", "UserDefinedRoleMaker"]


class Role:
    """A process's role in a parameter-server job: ``WORKER`` (trainer) or ``SERVER`` (pserver)."""
    WORKER = 1
    SERVER = 2


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


install_gaps()  # Fluid's role makers that are not here raise NotImplementedInPlacegroup
