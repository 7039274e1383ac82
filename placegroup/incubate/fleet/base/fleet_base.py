"""What every fleet offers (Fluid 1.8 ``fluid.incubate.fleet.base.fleet_base``): the role queries.

``Fleet`` answers who this process is, from its role maker; a fleet mode (the
parameter-server one, ``parameter_server.distribute_transpiler``) adds the programs and the
serving. ``DistributedOptimizer`` is the base of the optimizer wrapper a fleet hands back from
``distributed_optimizer``.

Thread-safety: the fleet is one per process, set up by the script's thread.
"""
from __future__ import annotations

from placegroup.tools.compat import install_gaps
from placegroup.executor import Executor
from placegroup.incubate.fleet.base.role_maker import PaddleCloudRoleMaker, RoleMakerBase
from placegroup.ir.places import CPUPlace
from placegroup.model.optimizer_base import Optimizer

__all__ = ["Fleet", "DistributedOptimizer", "Mode"]


class Mode:
    """Fleet's implementations: ``TRANSPILER`` is the one here."""
    TRANSPILER = 1
    PSLIB = 2
    COLLECTIVE = 3


class Fleet:
    """The role queries every fleet answers after ``init(role_maker)``.

    Args:
        mode: a ``Mode``.

    Example::

        fleet.init(role_maker.PaddleCloudRoleMaker())
        if fleet.is_worker(): print(fleet.worker_index(), "of", fleet.worker_num())
    """

    def __init__(self, mode: int) -> None:
        self._is_initialized = False
        self._mode = mode
        self._optimizer = None
        self._role_maker: RoleMakerBase | None = None
        self._executor: Executor | None = None

    def init(self, role_maker: RoleMakerBase | None = None) -> None:
        """Read this process's role (``role_maker.generate_role()``) and make the fleet's executor.

        Args:
            role_maker: a ``RoleMakerBase``; None: ``PaddleCloudRoleMaker()`` (Fluid 1.8 needs one).

        Raises:
            TypeError: ``role_maker`` is no role maker.
            ConfigError: the role maker's, naming the environment variables it lacks.
        """
        if role_maker is not None and not isinstance(role_maker, RoleMakerBase):
            raise TypeError("role_maker must be an instance of RoleMakerBase")
        self._role_maker = role_maker if role_maker is not None else PaddleCloudRoleMaker()
        self._role_maker.generate_role()
        self._executor = Executor(CPUPlace())
        self._is_initialized = True

    def _role(self) -> RoleMakerBase:
        if self._role_maker is None:
            raise RuntimeError("call fleet.init(role_maker) first")
        return self._role_maker

    def is_first_worker(self) -> bool:
        return self._role().is_first_worker()

    def worker_index(self) -> int:
        return self._role().worker_index()

    def worker_num(self) -> int:
        return self._role().worker_num()

    def is_worker(self) -> bool:
        return self._role().is_worker()

    def is_server(self) -> bool:
        return self._role().is_server()

    def server_index(self) -> int:
        return self._role().server_index()

    def server_num(self) -> int:
        return len(self._role().get_pserver_endpoints())

    def worker_endpoints(self, to_string: bool = False):
        """The workers' endpoints (a list, or one comma-separated str); ``[]`` where the job
        does not name them."""
        eps = self._role().get_trainer_endpoints()
        return ",".join(eps) if to_string else eps

    def server_endpoints(self, to_string: bool = False):
        """The servers' endpoints, e.g. ``["127.0.0.1:6170", "127.0.0.1:6171"]`` (or one str)."""
        eps = self._role().get_pserver_endpoints()
        return ",".join(eps) if to_string else eps

    def split_files(self, files: list) -> list:
        """This worker's share of ``files``: contiguous parts, the first ones one longer.

        Example: 5 files over 2 workers: worker 0 gets the first 3, worker 1 the last 2.
        """
        if not isinstance(files, list):
            raise TypeError("files should be a list of file need to be read.")
        n, i = self.worker_num(), self.worker_index()
        base, extra = divmod(len(files), n)
        start = i * base + min(i, extra)
        return files[start:start + base + (i < extra)]

    def all_reduce_worker(self, input, output) -> None:
        """Sum ``input`` (a list or 1-D array) over the workers into ``output``, through the role
        maker, as in Fluid: a ``GeneralRoleMaker`` or an MPI one reduces; the others only warn
        (they have no channel between the processes)."""
        self._role().all_reduce_worker(input, output)

    def barrier_worker(self) -> None:
        """Wait until every worker has come here, through the role maker (as ``all_reduce_worker``)."""
        self._role().barrier_worker()


class DistributedOptimizer:
    """Wraps a ``fluid.optimizer`` for a fleet; its ``minimize`` also makes this process's programs.

    Args:
        optimizer: a ``fluid.optimizer`` instance.
        strategy: the fleet mode's configuration.

    Raises:
        TypeError: ``optimizer`` is no optimizer.
    """

    def __init__(self, optimizer, strategy=None) -> None:
        if not isinstance(optimizer, Optimizer):
            raise TypeError("optimizer must be an instance of Optimizer")
        self._optimizer = optimizer
        self._strategy = strategy


install_gaps()
