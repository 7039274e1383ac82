"""The file systems collective fleet keeps its checkpoints on (Fluid 1.8's
``paddle.distributed.fs_wrapper``, which ``fluid.incubate.fleet.collective`` binds as
``LocalFS`` and ``BDFS``): one interface, a local directory or HDFS through ``hadoop fs``.

``need_upload_download()`` says whether files must go through a local copy first (HDFS:
yes), which ``Collective.save_check_point`` asks.

Example::

    fs = LocalFS()
    fs.mkdir("ckpt/a"); fs.list_dirs("ckpt")     # ['a']
    fs = BDFS("hdfs://host:9000", "user,passwd")  # hadoop fs on the PATH

Thread-safety: the objects hold no state but their settings.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import time
from pathlib import PurePosixPath

from placegroup.errors import CommTimeout

__all__ = ["FS", "LocalFS", "BDFS"]


class FS:
    """What a file system of fleet's checkpoints offers."""

    def list_dirs(self, fs_path): raise NotImplementedError
    def ls_dir(self, fs_path): raise NotImplementedError
    def stat(self, fs_path): raise NotImplementedError
    def upload(self, local_path, fs_path): raise NotImplementedError
    def download(self, fs_path, local_path): raise NotImplementedError
    def mkdir(self, fs_path): raise NotImplementedError
    def mv(self, fs_src_path, fs_dst_path): raise NotImplementedError
    def rmr(self, fs_path): raise NotImplementedError
    def rm(self, fs_path): raise NotImplementedError
    def delete(self, fs_path): raise NotImplementedError
    def need_upload_download(self): raise NotImplementedError


class LocalFS(FS):
    """The local file system."""

    def list_dirs(self, fs_path: str) -> list[str]:
        """The names of the directories in ``fs_path`` ([] when it does not exist)."""
        if not self.stat(fs_path):
            return []
        return [f for f in os.listdir(fs_path) if os.path.isdir(os.path.join(fs_path, f))]

    def ls_dir(self, fs_path: str) -> list[str]:
        return list(os.listdir(fs_path))

    def stat(self, fs_path: str) -> bool:
        return os.path.exists(fs_path)

    def mkdir(self, fs_path: str) -> None:
        """Make ``fs_path`` and its parents.

        Raises:
            FileExistsError: ``fs_path`` is a file.
        """
        if os.path.isfile(fs_path):
            raise FileExistsError(f"{fs_path} is already a file")
        os.makedirs(fs_path, exist_ok=True)

    def mv(self, fs_src_path: str, fs_dst_path: str) -> None:
        os.rename(fs_src_path, fs_dst_path)

    def rmr(self, fs_path: str) -> None:
        shutil.rmtree(fs_path)

    def rm(self, fs_path: str) -> None:
        os.remove(fs_path)

    def delete(self, fs_path: str) -> None:
        """Remove a file or a directory tree; nothing if it does not exist."""
        if not self.stat(fs_path):
            return
        if os.path.isfile(fs_path):
            return self.rm(fs_path)
        return self.rmr(fs_path)

    def need_upload_download(self) -> bool:
        return False


class BDFS(FS):
    """HDFS through ``hadoop fs`` (on the PATH), with ``fs.default.name`` ``hdfs_name`` and
    ``hadoop.job.ugi`` ``hdfs_ugi``.

    Args:
        hdfs_name, hdfs_ugi: the cluster and its user.
        time_out: milliseconds a command may keep failing (retried every ``sleep_inter`` ms)
            before ``CommTimeout``.
        sleep_inter: milliseconds between tries.
    """

    def __init__(self, hdfs_name: str, hdfs_ugi: str, time_out: int = 20 * 60 * 1000, sleep_inter: int = 1000) -> None:
        self._base_cmd = (f"hadoop fs -Dfs.default.name={shlex.quote(hdfs_name)} "
                          f"-Dhadoop.job.ugi={shlex.quote(hdfs_ugi)}")
        self._time_out = time_out
        self._sleep_inter = sleep_inter

    def _run(self, args: str) -> list[str]:
        """The command's output lines, retried while it fails (Fluid's ``core.run_cmd``)."""
        cmd = f"{self._base_cmd} {args}"
        deadline = time.monotonic() + self._time_out / 1000
        while True:
            done = subprocess.run(cmd, shell=True, capture_output=True, text=True)
            if done.returncode == 0:
                return done.stdout.splitlines()
            if time.monotonic() > deadline:
                raise CommTimeout(f"`{cmd}` kept failing for {self._time_out} ms (exit {done.returncode}): "
                                  f"{done.stderr.strip()}")
            time.sleep(self._sleep_inter / 1000)

    def _test(self, flag: str, fs_path: str) -> bool:
        return self._run(f"-test {flag} {shlex.quote(fs_path)} ; echo $?")[-1:] == ["0"]

    def list_dirs(self, fs_path: str) -> list[str]:
        return self.ls_dir(fs_path)[0] if self.stat(fs_path) else []

    def ls_dir(self, fs_path: str) -> tuple[list[str], list[str]]:
        """``(dirs, files)`` in ``fs_path``: their names, not their paths."""
        dirs, files = [], []
        for line in self._run(f"-ls {shlex.quote(fs_path)}"):
            arr = line.split()
            if len(arr) != 8 or fs_path not in arr[7]:
                continue
            (dirs if arr[0][0] == "d" else files).append(PurePosixPath(arr[7]).name)
        return dirs, files

    def is_dir(self, fs_path: str) -> bool:
        return self._test("-d", fs_path)

    def stat(self, fs_path: str) -> bool:
        return self._test("-e", fs_path)

    def upload(self, local_path: str, fs_path: str) -> None:
        self._run(f"-put {shlex.quote(local_path)} {shlex.quote(fs_path)}")

    def download(self, fs_path: str, local_path: str) -> None:
        self._run(f"-get {shlex.quote(fs_path)} {shlex.quote(local_path)}/")

    def mkdir(self, fs_path: str) -> None:
        if not self.stat(fs_path):
            self._run(f"-mkdir {shlex.quote(fs_path)}")

    def mv(self, fs_src_path: str, fs_dst_path: str) -> None:
        self._run(f"-mv {shlex.quote(fs_src_path)} {shlex.quote(fs_dst_path)}")

    def rmr(self, fs_path: str) -> None:
        if self.stat(fs_path):
            self._run(f"-rmr {shlex.quote(fs_path)}")

    def rm(self, fs_path: str) -> None:
        if self.stat(fs_path):
            self._run(f"-rm {shlex.quote(fs_path)}")

    def delete(self, fs_path: str) -> None:
        if self.stat(fs_path):
            (self.rmr if self.is_dir(fs_path) else self.rm)(fs_path)

    def need_upload_download(self) -> bool:
        return True
