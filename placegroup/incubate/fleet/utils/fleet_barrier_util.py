"""A barrier of the trainers through HDFS (Fluid 1.8 ``...fleet.utils.fleet_barrier_util``).

Each trainer puts an empty file ``ready.<epoch>.<trainer_id>.done`` into a directory on HDFS,
then waits until the directory holds a multiple of the trainer count of files: every trainer
has come to the same point of epoch ``epoch``. The parameter-server fleet says how many
trainers there are and which one this is; HDFS is reached with ``HDFSClient`` (``hadoop fs``)
from ``HADOOP_HOME``, ``FS_NAME`` and ``FS_UGI``.

Example::

    fleet.init(role)            # the parameter-server fleet
    check_all_trainers_ready("/user/me/job1/ready", epoch)
"""
from __future__ import annotations

import time

from placegroup.tools.compat import install_gaps
from placegroup.errors import ConfigError
from placegroup.incubate.fleet.base.role_maker import _fluid_env
from placegroup.incubate.fleet.parameter_server.distribute_transpiler import fleet
from placegroup.incubate.fleet.utils.hdfs import HDFSClient

__all__ = ["check_all_trainers_ready"]

POLL_SECONDS = 10.0  # between two looks at the directory, as Fluid's


def check_all_trainers_ready(ready_path: str, epoch) -> None:
    """Wait until every trainer has reached ``epoch`` (module docstring).

    Writes ``ready.<epoch>.<id>.done`` in the working directory first, as Fluid does. A
    directory used for several epochs keeps every epoch's files, so the count it waits for is
    a multiple of the trainer count.

    Raises:
        ConfigError: ``HADOOP_HOME`` is unset; fleet.init has not run.
    """
    trainer_num, trainer_id = fleet.worker_num(), fleet.worker_index()
    hadoop_home = _fluid_env("HADOOP_HOME")
    if hadoop_home is None:
        raise ConfigError("check_all_trainers_ready needs HADOOP_HOME (the Hadoop whose bin/hadoop reaches "
                          "HDFS), and FS_NAME, FS_UGI for fs.default.name and hadoop.job.ugi")
    configs = {"fs.default.name": _fluid_env("FS_NAME") or "", "hadoop.job.ugi": _fluid_env("FS_UGI") or ""}
    node_ready = f"ready.{epoch}.{trainer_id}.done"
    with open(node_ready, "w"):
        pass
    client = HDFSClient(hadoop_home, {k: v for k, v in configs.items() if v})
    if not client.is_dir(ready_path):
        client.makedirs(ready_path)
    # Fluid's client (contrib's) deletes the whole directory when this trainer's file is there
    # already (a rerun), taking the others' files with it; only this trainer's own file goes here.
    mine = f"{ready_path.rstrip('/')}/{node_ready}"
    if client.is_exist(mine):
        client.delete(mine)
    client.upload(hdfs_path=ready_path, local_path=node_ready, retry_times=0)
    print(f"PUT {node_ready} ON HDFS {ready_path} OK")
    while True:
        ready_num = len(client.ls(ready_path))
        print(f"have {trainer_num - ready_num % trainer_num} trainers need to be ready")
        if ready_num % trainer_num == 0:
            break
        time.sleep(POLL_SECONDS)
    print("All trainers are ready, continue training")


install_gaps()
