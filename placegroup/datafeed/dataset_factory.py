"""Fluid 1.8's Dataset pipeline: ``fluid.DatasetFactory``, ``QueueDataset``, ``InMemoryDataset``,
``FileInstantDataset`` and their base class ``DatasetBase``.

A dataset reads text files, each through a pipe command (``cat`` by default; often
``python my_generator.py``, a ``MultiSlotDataGenerator``), parses the MultiSlot format
(NOTE(multislot-format) in placegroup/datafeed/multislot.py) for the vars of ``set_use_var``, and hands
``exe.train_from_dataset`` feed dicts of ``batch_size`` instances (the last batch may be
smaller): LoDTensors for ``lod_level=1`` vars, arrays for the others.

* ``QueueDataset`` streams: files are read one after another as batches are taken.
* ``InMemoryDataset`` reads every file at ``load_into_memory()``; then ``local_shuffle()``
  permutes the instances and ``release_memory()`` drops them.
* ``FileInstantDataset`` streams as ``QueueDataset`` does (Fluid's reads each file whole
  before batching it, which is what placegroup's readers do for every file).

``dataset.desc()`` is the data feed's description in Fluid's text (placegroup/datafeed/data_feed_desc.py)
and ``dataset.proto_desc`` that message; as in Fluid, ``batch_size`` is 32 until set.

NOTE(dataset-threads): placegroup runs one thread per process, so ``set_thread(n)`` is
accepted and the files are read in the order of ``set_filelist``, by one reader. In Fluid,
threads change only which batches a thread makes and in what order they run.

NOTE(dataset-shuffle-seed): the ``k``-th ``local_shuffle`` of a dataset (``k = 0, 1, ...``)
permutes its instances with ``numpy.random.RandomState(dataset.shuffle_seed + k)``;
``shuffle_seed`` is 0 unless you set it. So a script shuffles the same way on every run, and
each epoch's shuffle differs from the last.

Example::

    import placegroup as fluid
    dataset = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    dataset.set_use_var([click, slot1, slot2])
    dataset.set_batch_size(32)
    dataset.set_pipe_command("python my_generator.py")
    dataset.set_filelist(["part-0", "part-1"])
    dataset.load_into_memory()
    dataset.local_shuffle()
    exe.train_from_dataset(fluid.default_main_program(), dataset, fetch_list=[loss])

Thread-safety: a dataset is set up and read from one thread.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import warnings

import numpy as np

from placegroup.datafeed.data_feed_desc import DataFeedDescMsg
from placegroup.errors import ConfigError, NotImplementedInPlacegroup
from placegroup.datafeed.multislot import Instances, parse_text, slot_of

__all__ = ["DatasetBase", "DatasetFactory", "FileInstantDataset", "InMemoryDataset", "QueueDataset"]

_REMOTE = ("hdfs:", "afs:")
# NOTE(pipe-paddle): under ``placegroup run`` a pipe command's Python imports placegroup as paddle
# (placegroup/_paddle_shim/, beside this package)
_SHIM = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "_paddle_shim")


def _gap(what: str, why: str = "") -> NotImplementedInPlacegroup:
    return NotImplementedInPlacegroup(f"placegroup's dataset does not implement {what}"
                                      f"{': ' + why if why else ''} (docs/datasets.md)")


def _refuse(what: str, why: str, flag: bool = False):
    """A setter placegroup lacks: it raises NotImplementedInPlacegroup (with ``flag``: only when
    switched on; switching it off is what placegroup does anyway)."""
    def setter(self, *args, **kwargs):
        if not flag or (args[0] if args else next(iter(kwargs.values()), True)):
            raise _gap(what, why)
    setter.__doc__ = f"Not in placegroup: {why}" + (" (False is accepted)." if flag else ".")
    return setter


class DatasetFactory:
    """Makes datasets by class name, as Fluid's ``fluid.DatasetFactory``.

    Example::

        dataset = fluid.DatasetFactory().create_dataset("QueueDataset")
    """

    def create_dataset(self, datafeed_class: str = "QueueDataset"):
        """A new ``QueueDataset``, ``InMemoryDataset`` or ``FileInstantDataset``.

        Raises:
            ValueError: for a class name Fluid does not have (as Fluid).
            NotImplementedInPlacegroup: for ``BoxPSDataset`` (Baidu's BoxPS GPU parameter server).
        """
        if datafeed_class == "BoxPSDataset":
            raise _gap(datafeed_class, "it feeds Baidu's BoxPS GPU parameter server; use InMemoryDataset")
        cls = {"QueueDataset": QueueDataset, "InMemoryDataset": InMemoryDataset,
               "FileInstantDataset": FileInstantDataset}.get(datafeed_class)
        if cls is None:
            raise ValueError(f"datafeed class {datafeed_class} does not exist")
        return cls()


class DatasetBase:
    """What every dataset shares: the setters and reading one file (Fluid's ``DatasetBase``)."""

    _FEED = "MultiSlotDataFeed"  # the data feed's name in desc(), as Fluid's

    def __init__(self) -> None:
        self.slots: list = []
        self._shapes: list = []  # the vars' shapes, for desc()
        self.batch_size = 32  # the DataFeedDesc default, as in Fluid
        self._batch_size_set = False
        self.thread_num = 1
        self.filelist: list = []
        self.pipe_command = "cat"
        self.hdfs_config = None
        self.shuffle_seed = 0  # NOTE(dataset-shuffle-seed)

    # -- Fluid's setters ---------------------------------------------------------------
    def set_use_var(self, var_list) -> None:
        """The data vars a line holds, in the order of the text format (int64 or float32,
        lod_level 0 or 1)."""
        self.slots = [slot_of(v) for v in var_list]
        self._shapes = [list(v.shape or ()) for v in var_list]

    def set_batch_size(self, batch_size: int) -> None:
        if int(batch_size) < 1:
            raise ConfigError(f"set_batch_size: expected a positive number of instances, got {batch_size}")
        self.batch_size = int(batch_size)
        self._batch_size_set = True

    def set_thread(self, thread_num: int) -> None:
        """Accepted; placegroup reads the files with one reader, in order (NOTE(dataset-threads))."""
        self.thread_num = int(thread_num)

    def set_filelist(self, filelist) -> None:
        """The data files, read in this order. ``hdfs:``/``afs:`` paths are refused when read."""
        self.filelist = [str(f) for f in filelist]

    def set_pipe_command(self, pipe_command: str) -> None:
        """A shell command each file is piped through (file on stdin, MultiSlot text on stdout)."""
        self.pipe_command = pipe_command

    def set_hdfs_config(self, fs_name: str, fs_ugi: str) -> None:
        """Kept; reading an ``hdfs:`` path is refused (placegroup reads local files only)."""
        self.hdfs_config = (fs_name, fs_ugi)

    def set_queue_num(self, queue_num: int) -> None:
        """Accepted; one reader has one queue."""

    def set_fleet_send_batch_size(self, fleet_send_batch_size: int = 1024) -> None:
        """Accepted; instances are not sent between trainers (see ``global_shuffle``)."""

    def set_fleet_send_sleep_seconds(self, fleet_send_sleep_seconds: int = 0) -> None:
        """Accepted; instances are not sent between trainers (see ``global_shuffle``)."""

    set_download_cmd = _refuse("set_download_cmd", "placegroup reads local files only; fetch them first")
    set_rank_offset = _refuse("set_rank_offset", "PaddleBox's rank offsets")
    set_fea_eval = _refuse("set_fea_eval", "feature importance evaluation")
    slots_shuffle = _refuse("slots_shuffle", "feature importance evaluation")
    set_pv_batch_size = _refuse("set_pv_batch_size", "PaddleBox's page-view batches")

    @property
    def proto_desc(self):
        """The data feed's description, a ``DataFeedDesc`` message built from the settings
        (placegroup/datafeed/data_feed_desc.py): read it, set the dataset through its setters."""
        msg = DataFeedDescMsg(name=self._FEED, pipe_command=self.pipe_command)
        if self._batch_size_set:
            msg.batch_size = self.batch_size
        for s, shape in zip(self.slots, self._shapes):
            slot = msg.multi_slot_desc.slots.add(name=s.name, type="float" if s.dtype == "float32" else "uint64",
                                                 is_used=True)
            if not s.lod_level:
                slot.is_dense = True
                slot.shape.extend(shape)
        return msg

    def desc(self) -> str:
        """The data feed's settings in Fluid's text (protobuf text format of its DataFeedDesc)."""
        return str(self.proto_desc)

    # -- reading -----------------------------------------------------------------------
    def _read_file(self, path: str) -> Instances:
        """One file, through the pipe command, parsed."""
        if not self.slots:
            raise ConfigError("the dataset has no vars: call dataset.set_use_var([...]) before reading")
        if path.startswith(_REMOTE):
            raise _gap(f"reading {path!r}", "placegroup reads local files only (set_hdfs_config is kept "
                                            "but not used); copy the files to local disk")
        if not os.path.isfile(path):
            raise ConfigError(f"set_filelist: data file {path!r} does not exist (cwd {os.getcwd()})")
        if self.pipe_command.strip() == "cat":
            with open(path, encoding="utf-8") as f:
                return parse_text(f.read(), self.slots, path)
        with open(path, "rb") as f:
            done = subprocess.run(_pipe_program(self.pipe_command), shell=True, stdin=f, capture_output=True,
                                  env=_pipe_env())
        if done.returncode != 0:
            tail = done.stderr.decode(errors="replace").strip().splitlines()[-5:]
            raise ConfigError(f"set_pipe_command: {self.pipe_command!r} on {path!r} exited with "
                              f"{done.returncode}: " + " | ".join(tail))
        return parse_text(done.stdout.decode("utf-8"), self.slots,
                          f"{path} (through {self.pipe_command!r})")

    def _batches(self, instances_iter):
        """Feed dicts of ``batch_size`` instances from Instances in order (the rest last)."""
        pending: list = []
        have = 0
        for inst in instances_iter:
            pending.append(inst)
            have += len(inst)
            if have < self.batch_size:
                continue
            joined = Instances.concat(pending, self.slots)
            full = len(joined) - len(joined) % self.batch_size
            for start in range(0, full, self.batch_size):
                yield joined.feed(self.slots, np.arange(start, start + self.batch_size))
            rest = len(joined) - full
            pending = [joined.take(np.arange(full, len(joined)))] if rest else []
            have = rest
        if have:
            joined = Instances.concat(pending, self.slots)
            yield joined.feed(self.slots, np.arange(len(joined)))


class QueueDataset(DatasetBase):
    """Streams the files: each is read when the batches before it are taken."""

    _FEED = "MultiSlotDataFeed"

    def batches(self):
        """The feed dicts, batch after batch, over every file of the filelist."""
        return self._batches(self._read_file(p) for p in self.filelist)

    def local_shuffle(self) -> None:
        raise NotImplementedError("QueueDataset does not support local shuffle, "
                                  "please use InMemoryDataset for local_shuffle")

    def global_shuffle(self, fleet=None) -> None:
        raise NotImplementedError("QueueDataset does not support global shuffle, "
                                  "please use InMemoryDataset for global_shuffle")


class FileInstantDataset(DatasetBase):
    """Streams the files as ``QueueDataset`` (Fluid's ``MultiSlotFileInstantDataFeed`` reads
    each file whole, then batches it; so do placegroup's readers). No shuffles, as in Fluid."""

    _FEED = "MultiSlotFileInstantDataFeed"

    def batches(self):
        """The feed dicts, batch after batch, over every file of the filelist."""
        return self._batches(self._read_file(p) for p in self.filelist)

    def local_shuffle(self) -> None:
        raise NotImplementedError("FileInstantDataset does not support local shuffle, "
                                  "please use InMemoryDataset for local_shuffle")

    def global_shuffle(self, fleet=None) -> None:
        raise NotImplementedError("FileInstantDataset does not support global shuffle, "
                                  "please use InMemoryDataset for global_shuffle")


class InMemoryDataset(DatasetBase):
    """Reads every file at ``load_into_memory``; shuffles in memory."""

    _FEED = "MultiSlotInMemoryDataFeed"

    def __init__(self) -> None:
        super().__init__()
        self._memory: Instances | None = None
        self._shuffles = 0
        self._shuffled = 0

    def load_into_memory(self) -> None:
        """Read every file of the filelist (through the pipe command) into memory."""
        self._memory = Instances.concat([self._read_file(p) for p in self.filelist], self.slots)

    def preload_into_memory(self, thread_num=None) -> None:
        """As ``load_into_memory`` (it reads now; ``wait_preload_done`` then returns at once)."""
        self.load_into_memory()

    def wait_preload_done(self) -> None:
        """Returns: ``preload_into_memory`` has read already."""

    def _loaded(self, what: str) -> Instances:
        if self._memory is None:
            raise ConfigError(f"InMemoryDataset.{what}: no data in memory; call dataset.load_into_memory() first")
        return self._memory

    def local_shuffle(self) -> None:
        """Permute the instances in memory (NOTE(dataset-shuffle-seed))."""
        mem = self._loaded("local_shuffle")
        order = np.random.RandomState(self.shuffle_seed + self._shuffles).permutation(len(mem))
        self._memory = mem.take(order)
        self._shuffles += 1
        self._shuffled = len(mem)

    def global_shuffle(self, fleet=None, thread_num: int = 12) -> None:
        """In one process, ``local_shuffle``. With a fleet of several trainers, each trainer
        shuffles its own instances only (no instances move between trainers), with a warning."""
        if fleet is not None and _workers(fleet) > 1:
            warnings.warn("InMemoryDataset.global_shuffle: placegroup shuffles each trainer's own instances "
                          "(a local shuffle); no instances are exchanged between trainers", stacklevel=2)
        self.local_shuffle()

    def release_memory(self) -> None:
        """Drop the instances in memory."""
        self._memory = None
        self._shuffled = 0

    def get_memory_data_size(self, fleet=None) -> int:
        """How many instances are in memory (this trainer's; refused for a fleet of several)."""
        _one_trainer(fleet, "get_memory_data_size")
        return len(self._loaded("get_memory_data_size"))

    def get_shuffle_data_size(self, fleet=None) -> int:
        """How many instances the last shuffle permuted (this trainer's)."""
        _one_trainer(fleet, "get_shuffle_data_size")
        return self._shuffled

    def batches(self):
        """The feed dicts of the instances in memory, in their (shuffled) order."""
        return self._batches([self._loaded("batches")])

    set_merge_by_lineid = _refuse("set_merge_by_lineid", "merging instances by line id")
    set_merge_by_sid = _refuse("set_merge_by_sid(True)", "PaddleBox's merging by search id", flag=True)
    set_enable_pv_merge = _refuse("set_enable_pv_merge(True)", "PaddleBox's page-view merging", flag=True)
    set_parse_ins_id = _refuse("set_parse_ins_id(True)", "MultiSlot lines only, without an instance id", flag=True)
    set_parse_content = _refuse("set_parse_content(True)", "MultiSlot lines only, without content", flag=True)
    set_parse_logkey = _refuse("set_parse_logkey(True)", "MultiSlot lines only, without a log key", flag=True)


# NOTE(pipe-python): a pipe command whose program is ``python`` or ``python3`` runs with the
# interpreter that runs placegroup (``sys.executable``), not whatever ``python`` is first on PATH:
# without an activated virtual environment that one cannot import placegroup (a generator's
# ``import paddle.fluid.incubate.data_generator``). Only the command's first word is replaced.
_PYTHON = re.compile(r"^(\s*)python3?(?=\s|$)")


def _pipe_program(command: str) -> str:
    """``command`` with a leading ``python``/``python3`` made ``sys.executable`` (NOTE(pipe-python))."""
    return _PYTHON.sub(lambda m: m.group(1) + shlex.quote(sys.executable), command, count=1)


def _pipe_env() -> dict | None:
    """NOTE(pipe-paddle): when this process runs with ``paddle`` aliased to placegroup, the pipe
    command sees placegroup's ``paddle`` first on PYTHONPATH (a real Paddle is not imported
    there); otherwise it inherits this process's environment unchanged."""
    if getattr(sys.modules.get("paddle"), "fluid", None) is not sys.modules.get("placegroup"):
        return None
    env = dict(os.environ)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != _SHIM]  # placegroup run's
    env["PYTHONPATH"] = os.pathsep.join([_SHIM, *rest])
    return env


def _workers(fleet) -> int:
    return int(fleet.worker_num()) if hasattr(fleet, "worker_num") else 1


def _one_trainer(fleet, what: str) -> None:
    if fleet is not None and _workers(fleet) > 1:
        raise _gap(f"{what}(fleet) over {_workers(fleet)} trainers",
                   "call it without fleet for this trainer's count")
