"""Fluid 1.8's trainer descriptions: ``TrainerDesc`` and the trainers ``MultiTrainer``,
``DistMultiTrainer`` and ``PipelineTrainer``.

``Executor.train_from_dataset`` in Fluid builds one of these (``TrainerFactory``,
placegroup/runtime/trainer_factory.py), fills it (threads, fetch vars, debug, program), lets its
device worker (placegroup/runtime/device_worker.py) add its part, and hands the C++ trainer the
serialized message. A description says *how* a dataset is trained: which trainer and worker,
how many threads, which vars to print every how many batches, what to dump.

NOTE(trainer-desc-text): here the description is a plain-Python message
(placegroup/util/text_format.py) with the fields of Fluid's ``paddle.framework.TrainerDesc``, and
both ``str(trainer)`` and ``trainer._desc()`` give its protobuf *text* format (Fluid's
``_desc()`` gives the binary serialization, which only its C++ trainer reads). A section's
``program_desc`` is its Program's printed text (``str(program)``, docs/ir.md), not a
serialized ProgramDesc.

placegroup's ``train_from_dataset`` runs one loop in one thread (executor/dataset_loop.py):
of a description it acts on what that loop has (the fetch vars, ``print_period``, ``debug``);
the thread count, dumps, table copies and the pslib/pipeline parameters describe Fluid's C++
trainers.

Example::

    trainer = TrainerFactory()._create_trainer()  # a MultiTrainer with a Hogwild worker
    trainer._set_program(main)
    trainer._set_fetch_var_and_info([loss], ["loss"], 10)
    trainer._gen_trainer_desc()
    print(trainer)  # class_name: "MultiTrainer" ... fetch_config { ... print_period: 10 } ...
"""
from __future__ import annotations

import os

from placegroup.datafeed.data_feed_desc import DataFeedDescMsg
from placegroup.util.text_format import message

__all__ = ["TrainerDesc", "MultiTrainer", "DistMultiTrainer", "PipelineTrainer"]

_TABLE = ("table_id:uint64 dense_value_name:*string dense_grad_name:*string push_dense_wait_times:*int32 "
          "sparse_key_name:*string sparse_value_name:*string sparse_grad_name:*string "
          "push_sparse_wait_times:*int32 emb_dim:int32 fea_dim:int32 label_var_name:string is_local:bool "
          "is_async:bool async_wait_op_name:string")
TableParameter = message("paddle.framework.TableParameter", _TABLE)
FetchConfig = message("paddle.framework.FetchConfig", "fetch_var_names:*string fetch_var_str_format:*string "
                      "print_period:int32=100 method:Method", Method={"PRINT": 0})
TableDependencyMap = message("paddle.framework.TableDependencyMap", "key:int32 values:*int32")
CopyTableConfig = message(
    "paddle.framework.CopyTableConfig",
    "need_copy:bool batch_num:int32=100 src_sparse_tables:*int32 dest_sparse_tables:*int32 "
    "src_dense_tables:*int32 dest_dense_tables:*int32 src_var_list:*string dest_var_list:*string "
    "dense_pull_after_copy:bool sparse_copy_by_feasign:bool=true enable_dependency:bool "
    "table_denpendency_map:*TableDependencyMap", TableDependencyMap=TableDependencyMap)
AdjustInsWeightConfig = message("paddle.framework.AdjustInsWeightConfig",
                                "need_adjust:bool nid_slot:string nid_adjw_threshold:float nid_adjw_ratio:float "
                                "ins_weight_slot:string")
HogwildWorkerParameter = message("paddle.framework.HogwildWorkerParameter", "skip_ops:*string stat_var_names:*string")
ProgramConfig = message("paddle.framework.ProgramConfig",
                        "program_id:string push_sparse_table_id:*int32 push_dense_table_id:*int32 "
                        "pull_sparse_table_id:*int32 pull_dense_table_id:*int32")
DownpourWorkerParameter = message(
    "paddle.framework.DownpourWorkerParameter",
    "sparse_table:*TableParameter dense_table:*TableParameter skip_ops:*string program_config:*ProgramConfig "
    "push_sparse:bool=true push_dense:bool=true stat_var_names:*string",
    TableParameter=TableParameter, ProgramConfig=ProgramConfig)
PullDenseWorkerParameter = message("paddle.framework.PullDenseWorkerParameter",
                                   "threshold:int32=1 device_num:int32 sleep_time_ms:int32=2 "
                                   "dense_table:*TableParameter", TableParameter=TableParameter)
PLACES = {"CPUPlace": 0, "CUDAPlace": 1, "CUDAPinnedPlace": 2}
SectionConfig = message("paddle.framework.SectionConfig",
                        "program_desc:string place:Place concurrency:int32=1 section_in_var_names:*string "
                        "section_out_var_names:*string",
                        Place=PLACES)
SectionWorkerParameter = message("paddle.framework.SectionWorkerParameter",
                                 "section_config:*SectionConfig queue_size:int32=1 sync_steps:int64=1 "
                                 "start_cpu_core_id:int32=1 param_need_sync:*string", SectionConfig=SectionConfig)
TrainerDescMsg = message(
    "paddle.framework.TrainerDesc",
    "class_name:string device_worker_name:string thread_num:int32 binding_cpu:bool filelist:*string debug:bool "
    "fetch_config:FetchConfig use_cvm:bool dump_slot:bool scale_datanorm:float=-1 mpi_rank:int32=-1 "
    "dump_fields_path:string dump_fields:*string dump_converter:string dump_param:*string mpi_size:int32=-1 "
    "dump_file_num:int32=16 check_nan_var_names:*string copy_table_config:CopyTableConfig "
    "adjust_ins_weight_config:AdjustInsWeightConfig no_cvm:bool thread_barrier:bool loss_names:*string "
    "hogwild_param:HogwildWorkerParameter pull_dense_param:PullDenseWorkerParameter "
    "downpour_param:DownpourWorkerParameter section_param:SectionWorkerParameter data_desc:DataFeedDesc",
    FetchConfig=FetchConfig, CopyTableConfig=CopyTableConfig, AdjustInsWeightConfig=AdjustInsWeightConfig,
    HogwildWorkerParameter=HogwildWorkerParameter, DownpourWorkerParameter=DownpourWorkerParameter,
    PullDenseWorkerParameter=PullDenseWorkerParameter, SectionWorkerParameter=SectionWorkerParameter,
    DataFeedDesc=DataFeedDescMsg)


def _as_list(x) -> list:
    return x if isinstance(x, list) else [x]


class TrainerDesc:
    """A trainer's description (Fluid's ``TrainerDesc``): ``proto_desc`` holds its fields
    (NOTE(trainer-desc-text)); the ``_set_*`` methods fill them as Fluid's executor and
    ``TrainerFactory`` do. ``thread_num`` starts at the CPU count, as in Fluid.

    Attributes:
        proto_desc: the fields, a plain-Python ``paddle.framework.TrainerDesc`` message.

    Thread-safety: build it in one thread.
    """

    def __init__(self) -> None:
        self.proto_desc = TrainerDescMsg()
        self.proto_desc.thread_num = os.cpu_count() or 1
        self._fleet_desc = None
        self._device_worker = None
        self._program = None
        self._infer = False

    def _set_fetch_var_and_info(self, fetch_vars, fetch_info, print_period) -> None:
        """Print ``fetch_vars`` (Variables) labelled ``fetch_info`` every ``print_period`` batches."""
        fetch_info = list(fetch_info)
        if len(fetch_info) != len(fetch_vars):
            raise ValueError(f"fetch_info has {len(fetch_info)} labels for {len(fetch_vars)} fetch vars; give one "
                             f"label per var")
        config = self.proto_desc.fetch_config
        for var, label in zip(fetch_vars, fetch_info):
            config.fetch_var_names.append(var if isinstance(var, str) else var.name)
            config.fetch_var_str_format.append(label)
        config.print_period = print_period

    def _set_debug(self, debug) -> None:
        self.proto_desc.debug = debug

    def _set_thread(self, thread_num) -> None:
        self.proto_desc.thread_num = thread_num

    def _set_device_worker(self, device_worker) -> None:
        self._device_worker = device_worker

    def _set_infer(self, infer) -> None:
        self._infer = infer

    def _set_fleet_desc(self, fleet_desc) -> None:
        self._fleet_desc = fleet_desc

    def _gen_trainer_desc(self) -> None:
        """Fill in the trainer's and its device worker's parts (the trainers override it)."""

    def _set_program(self, program) -> None:
        self._program = program

    def _set_use_cvm(self, use_cvm=False) -> None:
        self.proto_desc.use_cvm = use_cvm

    def _set_no_cvm(self, no_cvm=False) -> None:
        self.proto_desc.no_cvm = no_cvm

    def _set_scale_datanorm(self, scale_datanorm=-1) -> None:
        self.proto_desc.scale_datanorm = scale_datanorm

    def _set_dump_slot(self, dump_slot) -> None:
        self.proto_desc.dump_slot = dump_slot

    def _set_mpi_rank(self, mpi_rank) -> None:
        self.proto_desc.mpi_rank = mpi_rank

    def _set_mpi_size(self, mpi_size) -> None:
        self.proto_desc.mpi_size = mpi_size

    def _set_dump_fields(self, dump_fields) -> None:
        self.proto_desc.dump_fields.extend(dump_fields)

    def _set_dump_fields_path(self, path) -> None:
        self.proto_desc.dump_fields_path = path

    def _set_dump_file_num(self, dump_file_num) -> None:
        self.proto_desc.dump_file_num = dump_file_num

    def _set_dump_converter(self, converter) -> None:
        self.proto_desc.dump_converter = converter

    def _set_dump_param(self, dump_param) -> None:
        self.proto_desc.dump_param.extend(dump_param)

    def _set_thread_barrier(self, thread_barrier) -> None:
        self.proto_desc.thread_barrier = thread_barrier

    def _set_check_nan_var_names(self, check_nan_var_names) -> None:
        self.proto_desc.check_nan_var_names.extend(check_nan_var_names)

    def _set_loss_names(self, loss_names) -> None:
        self.proto_desc.loss_names.extend(loss_names)

    def _set_adjust_ins_weight(self, config_dict) -> None:
        """Instance-weight adjustment by node id (keys as Fluid's; missing ones are zero)."""
        c = self.proto_desc.adjust_ins_weight_config
        c.need_adjust = config_dict.get("need_adjust", False)
        c.nid_slot = config_dict.get("nid_slot", "")
        c.nid_adjw_threshold = config_dict.get("nid_adjw_threshold", 0.0)
        c.nid_adjw_ratio = config_dict.get("nid_adjw_ratio", 0.0)
        c.ins_weight_slot = config_dict.get("ins_weight_slot", "")

    def _set_copy_table_config(self, config_dict) -> None:
        """Which tables and vars to copy into which (keys as Fluid's).

        Raises:
            ValueError: source and destination lists of different lengths, or a dependency
                with other than one value (Fluid's messages).
        """
        c = self.proto_desc.copy_table_config
        c.need_copy = config_dict.get("need_copy", False)
        c.batch_num = config_dict.get("batch_num", 100)
        for src_key, dest_key, what in (("src_sparse_tables", "dest_sparse_tables", "sparse_tables"),
                                        ("src_dense_tables", "dest_dense_tables", "dense_tables"),
                                        ("src_var_list", "dest_var_list", "var_list")):
            src, dest = _as_list(config_dict.get(src_key, [])), _as_list(config_dict.get(dest_key, []))
            if len(src) != len(dest):
                raise ValueError(f"len(src_{what}) != len(dest_{what}), {len(src)} vs {len(dest)}")
            getattr(c, src_key).extend(src)
            getattr(c, dest_key).extend(dest)
        for key, values in config_dict.get("dependency_map", {}).items():
            values = _as_list(values)
            if len(values) != 1:
                raise ValueError(f"dependency len {len(values)} != 1")
            c.table_denpendency_map.add(key=key, values=values)
        c.dense_pull_after_copy = config_dict.get("dense_pull_after_copy", True)
        c.enable_dependency = config_dict.get("enable_dependency", False)
        c.sparse_copy_by_feasign = config_dict.get("sparse_copy_by_feasign", True)

    def _desc(self) -> str:
        """The description as text (Fluid: the binary protobuf; NOTE(trainer-desc-text))."""
        return str(self.proto_desc)

    def __str__(self) -> str:
        return str(self.proto_desc)


class _OneWorkerTrainer(TrainerDesc):
    """A trainer whose ``_gen_trainer_desc`` names its class and has its device worker
    describe itself over the trainer's program."""

    _needs_program = True

    def _gen_trainer_desc(self) -> None:
        """Name the trainer and add its device worker's description.

        Raises:
            RuntimeError: no program was set (``DistMultiTrainer``/``PipelineTrainer``, as Fluid).
            ValueError: no device worker was set.
        """
        self.proto_desc.class_name = type(self).__name__
        if self._needs_program and self._program is None:
            raise RuntimeError("None Program")
        if self._device_worker is None:
            raise ValueError(f"{type(self).__name__} has no device worker: call _set_device_worker (TrainerFactory "
                             f"does) before _gen_trainer_desc")
        self._device_worker._set_infer(self._infer)
        self._device_worker._set_program(self._program)
        self._device_worker._gen_worker_desc(self.proto_desc)


class MultiTrainer(_OneWorkerTrainer):
    """Fluid's default trainer: ``thread_num`` threads each run the program over their part of
    the dataset (with a ``Hogwild`` worker)."""

    _needs_program = False


class DistMultiTrainer(_OneWorkerTrainer):
    """``MultiTrainer`` for pslib's distributed training (a ``DownpourSGD`` worker)."""


class PipelineTrainer(_OneWorkerTrainer):
    """The trainer of a pipeline of program sections (a ``Section`` worker)."""
