"""HDFS from Python through the ``hadoop fs`` command (Fluid 1.8
``fluid.incubate.fleet.utils.hdfs``): ``HDFSClient(hadoop_home, configs)``.

Every method runs ``<hadoop_home>/bin/hadoop fs -D<key>=<value>... -<command> <args>`` (the
same commands as Fluid's client: ``-test -e``, ``-test -d``, ``-cat``, ``-ls``, ``-lsr``,
``-mkdir``, ``-mv``, ``-rm``, ``-rmr``, ``-put``, ``-get``), retrying a failed one, and answers
from its exit code and output; failures are logged and returned as False / [] / "", as Fluid's
are. Arguments go to the command as a list, never through a shell. ``download`` and
``upload`` spread the files over ``multi_processes`` workers (threads here: each only waits on
its ``hadoop`` process).

Example::

    client = HDFSClient("/home/client/hadoop", {"fs.default.name": "hdfs://nn:54310",
                                                "hadoop.job.ugi": "user,passwd"})
    client.makedirs("/user/me/models")
    client.upload("/user/me/models", "./model_dir")
    client.ls("/user/me/models")

Thread-safety: a client holds only its command prefix; calls may run from several threads.
"""
from __future__ import annotations

import errno
import logging
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor

from placegroup.tools.compat import install_gaps

__all__ = ["HDFSClient"]


def get_logger(name: str, level, fmt: str) -> logging.Logger:
    """Fluid's logger of this module: ``name`` at ``level``, writing ``fmt`` lines to the file
    ``hdfs.log`` in the working directory (truncated)."""
    logger = logging.getLogger(name)
    logger.setLevel(level)
    handler = logging.FileHandler("hdfs.log", mode="w")
    handler.setFormatter(logging.Formatter(fmt=fmt))
    logger.addHandler(handler)
    return logger


# Fluid makes its logger with get_logger at import, which creates hdfs.log in the working
# directory of every process that imports the module; here the client logs to the standard
# logging tree, and a script that wants the file calls get_logger itself.
_logger = logging.getLogger(__name__)
_LS_FIELDS = 8  # permissions, replication, owner, group, size, date, time, path


class HDFSClient:
    """A client of the HDFS that ``configs`` names, through ``hadoop_home``'s ``bin/hadoop``.

    Args:
        hadoop_home: the Hadoop installation (its ``bin/hadoop`` is run).
        configs: ``-D`` settings, usually ``{"fs.default.name": ..., "hadoop.job.ugi": ...}``.

    Attributes:
        retry_sleep_seconds: the pause before retrying a failed command (3, as Fluid's).
    """

    retry_sleep_seconds = 3.0

    def __init__(self, hadoop_home: str, configs: dict) -> None:
        self.pre_commands = [os.path.join(hadoop_home, "bin", "hadoop"), "fs"]
        self.pre_commands += [f"-D{k}={v}" for k, v in configs.items()]

    def _run(self, commands: list[str], retry_times: int = 5) -> tuple[int, str, str]:
        """``(exit code, stdout, stderr)`` of ``hadoop fs <commands>``, tried up to
        ``retry_times + 1`` times until it succeeds."""
        whole = self.pre_commands + list(commands)
        code, out, err = 1, "", ""
        for x in range(retry_times + 1):
            try:
                proc = subprocess.run(whole, capture_output=True, text=True)
                code, out, err = proc.returncode, proc.stdout, proc.stderr
            except OSError as e:  # no hadoop binary there
                code, out, err = 127, "", str(e)
            _logger.info("Times: %d, Running command: %s. Return code: %d, Msg: %s", x, " ".join(whole), code, err)
            if code == 0:
                break
            if x < retry_times:
                time.sleep(self.retry_sleep_seconds)
        return code, out, err

    def cat(self, hdfs_path: str | None = None) -> str:
        """The content of file ``hdfs_path`` (stripped); "" if it is no file or cannot be read."""
        if not self.is_file(hdfs_path):
            return ""
        code, out, _ = self._run(["-cat", hdfs_path], retry_times=1)
        if code:
            _logger.error("HDFS cat HDFS path: %s failed", hdfs_path)
            return ""
        return out.strip()

    def is_exist(self, hdfs_path: str | None = None) -> bool:
        code, _, _ = self._run(["-test", "-e", hdfs_path], retry_times=1)
        return code == 0

    def is_dir(self, hdfs_path: str | None = None) -> bool:
        if not self.is_exist(hdfs_path):
            return False
        code, _, _ = self._run(["-test", "-d", hdfs_path], retry_times=1)
        return code == 0

    def is_file(self, hdfs_path: str | None = None) -> bool:
        if not self.is_exist(hdfs_path):
            return False
        code, _, _ = self._run(["-test", "-d", hdfs_path], retry_times=1)
        return code != 0

    def delete(self, hdfs_path: str) -> bool:
        """Remove a file or a directory tree; True also when nothing was there."""
        if not self.is_exist(hdfs_path):
            _logger.warning("HDFS path: %s do not exist", hdfs_path)
            return True
        cmd = ["-rmr", hdfs_path] if self.is_dir(hdfs_path) else ["-rm", hdfs_path]
        code, _, _ = self._run(cmd, retry_times=0)
        if code:
            _logger.error("HDFS path: %s delete files failure", hdfs_path)
        return code == 0

    def rename(self, hdfs_src_path: str, hdfs_dst_path: str, overwrite: bool = False) -> bool:
        """Move a file or directory (``overwrite`` is only logged about, as in Fluid: the move
        is tried either way, and ``hadoop fs -mv`` refuses an existing file)."""
        if hdfs_src_path is None or hdfs_dst_path is None:
            raise ValueError("rename: hdfs_src_path and hdfs_dst_path must be given")
        if not self.is_exist(hdfs_src_path):
            _logger.info("HDFS path do not exist: %s", hdfs_src_path)
        if self.is_exist(hdfs_dst_path) and not overwrite:
            _logger.error("HDFS path is exist: %s and overwrite=False", hdfs_dst_path)
        code, _, _ = self._run(["-mv", hdfs_src_path, hdfs_dst_path], retry_times=1)
        return code == 0

    @staticmethod
    def make_local_dirs(local_path: str) -> None:
        """``mkdir -p`` on the local disk."""
        try:
            os.makedirs(local_path)
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise

    def makedirs(self, hdfs_path: str) -> bool | None:
        """Make directory ``hdfs_path``; None (an error logged) when it exists already."""
        if hdfs_path is None:
            raise ValueError("makedirs: hdfs_path must be given")
        if self.is_exist(hdfs_path):
            _logger.error("HDFS path is exist: %s", hdfs_path)
            return None
        code, _, _ = self._run(["-mkdir", hdfs_path], retry_times=1)
        return code == 0

    @staticmethod
    def _listed(out: str) -> list[list[str]]:
        return [f for f in (re.split(r"\s+", line) for line in out.strip().split("\n")) if len(f) == _LS_FIELDS]

    def ls(self, hdfs_path: str) -> list[str]:
        """The paths in directory ``hdfs_path`` ([] when it does not exist)."""
        if hdfs_path is None:
            raise ValueError("ls: hdfs_path must be given")
        if not self.is_exist(hdfs_path):
            return []
        code, out, _ = self._run(["-ls", hdfs_path], retry_times=10)
        if code:
            _logger.error("HDFS list path: %s failed", hdfs_path)
            return []
        return [f[7] for f in self._listed(out)]

    def lsr(self, hdfs_path: str, excludes=()) -> list[str]:
        """The files (not directories) under ``hdfs_path``, recursively, less ``excludes``."""
        if hdfs_path is None:
            raise ValueError("lsr: hdfs_path must be given")
        if not self.is_exist(hdfs_path):
            return []
        code, out, _ = self._run(["-lsr", hdfs_path], retry_times=1)
        if code:
            _logger.error("HDFS list all files: %s failed", hdfs_path)
            return []
        return [f[7] for f in self._listed(out) if f[0][0] != "d" and f[7] not in excludes]

    @staticmethod
    def split_files(files: list, trainer_id: int, trainers: int) -> list:
        """Trainer ``trainer_id``'s contiguous share of ``files`` (the first shares one longer)."""
        base, extra = divmod(len(files), trainers)
        start = trainer_id * base + min(trainer_id, extra)
        return files[start:start + base + (trainer_id < extra)]

    def _spread(self, items: list, workers: int, job) -> None:
        parts = [self.split_files(items, i, workers) for i in range(workers)]
        with ThreadPoolExecutor(max(workers, 1)) as pool:
            list(pool.map(job, [p for p in parts if p]))

    def download(self, hdfs_path: str, local_path: str, multi_processes: int = 5, overwrite: bool = False,
                 retry_times: int = 5) -> list[str]:
        """Copy the entries of directory ``hdfs_path`` into ``local_path`` (made if missing).

        Returns:
            every file under ``local_path`` afterwards.
        """
        def fetch(paths):
            for p in paths:
                if self._run(["-get", p, local_path], retry_times=retry_times)[0]:
                    _logger.error("Get local path: %s from HDFS path: %s failed", local_path, p)
                    return

        self.make_local_dirs(local_path)
        self._spread(self.ls(hdfs_path), multi_processes, fetch)
        return [os.path.join(d, f) for d, _, files in os.walk(local_path) for f in files]

    def upload(self, hdfs_path: str, local_path: str, multi_processes: int = 5, overwrite: bool = False,
               retry_times: int = 5) -> None:
        """Put ``local_path`` (a file, or each entry of a directory) into ``hdfs_path``; with
        ``overwrite``, an existing ``hdfs_path`` is deleted and made again first."""
        def put(paths):
            for p in paths:
                if self._run(["-put", p, hdfs_path], retry_times=retry_times)[0]:
                    _logger.error("Put local path: %s to HDFS path: %s failed", p, hdfs_path)
                    return

        if not os.path.exists(local_path):
            _logger.info("there are nothing need to upload, exit")
            return
        files = ([os.path.join(local_path, f) for f in os.listdir(local_path)] if os.path.isdir(local_path)
                 else [local_path])
        if not files:
            _logger.info("there are nothing need to upload, exit")
            return
        if overwrite and self.is_exist(hdfs_path):
            self.delete(hdfs_path)
            self.makedirs(hdfs_path)
        self._spread(files, multi_processes, put)

    def upload_dir(self, dest_dir: str, local_dir: str, overwrite: bool = False) -> bool:
        """Put directory ``local_dir`` into ``dest_dir`` (made if missing) as
        ``dest_dir/<basename>``; with ``overwrite`` an existing one is deleted first."""
        local_dir, dest_dir = local_dir.rstrip("/"), dest_dir.rstrip("/")
        target = dest_dir + "/" + os.path.basename(local_dir)
        if overwrite and self.is_exist(target):
            self.delete(target)
        if not self.is_exist(dest_dir):
            self.makedirs(dest_dir)
        code, _, _ = self._run(["-put", local_dir, dest_dir])
        if code:
            _logger.error("Put local dir: %s to HDFS dir: %s failed", local_dir, dest_dir)
        return code == 0


install_gaps()
