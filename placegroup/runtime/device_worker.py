"""Fluid 1.8's device workers: what each thread of a trainer does with its batches.

A device worker adds its part to a trainer's description (placegroup/runtime/trainer_desc.py,
NOTE(trainer-desc-text)) in ``_gen_worker_desc(trainer_desc)``, as in Fluid:

* ``Hogwild``: run the whole program on each batch, threads updating the parameters without
  locks (``HogwildWorker``); placegroup's ``train_from_dataset`` is this with one thread.
* ``DownpourSGD`` / ``DownpourSGDOPT``: pslib's workers (``DownpourWorker``,
  ``DownpourWorkerOpt``), which pull and push sparse and dense tables of Baidu's PSLib
  parameter server. Their description is made from ``program._fleet_opt`` exactly as Fluid
  makes it (``program_configs``, ``program_id_to_worker``, ``fleet_desc``, ...), but nothing in
  placegroup runs it: placegroup's parameter servers are the transpiler's (docs/distributed.md).
* ``Section``: one section of a pipeline (``SectionWorker``), described from
  ``program._pipeline_opt``.

``DeviceWorkerFactory()._create_device_worker("hogwild")`` makes one by name (Fluid
capitalizes the name, so only ``hogwild`` and ``section`` are found).

Thread-safety: build a worker in one thread.
"""
from __future__ import annotations

from placegroup.ir.places import CPUPlace, CUDAPinnedPlace, CUDAPlace

__all__ = ["DeviceWorker", "Hogwild", "DownpourSGD", "Section", "DownpourSGDOPT", "DeviceWorkerFactory"]


class DeviceWorker:
    """The base class: holds the program and the inference flag; ``_gen_worker_desc`` is the
    subclasses'."""

    def __init__(self) -> None:
        self._program = None
        self._infer = None
        self._fleet_desc = None

    def _set_infer(self, infer=False) -> None:
        """Whether the trainer only infers (its worker then skips feeding/pushing ops)."""
        self._infer = infer

    def _set_fleet_desc(self, fleet_desc) -> None:
        """pslib's ``PSParameter`` (read for the sparse tables' ``fea_dim``)."""
        self._fleet_desc = fleet_desc

    def _set_program(self, program) -> None:
        self._program = program

    def _gen_worker_desc(self, trainer_desc) -> None:
        raise NotImplementedError("DeviceWorker does not implement gen_worker_desc, "
                                  "please use Hogwild or DownpourSGD, etc.")

    def _opt_info(self):
        """The program's ``_fleet_opt`` (None for a program no pslib fleet optimized).

        Raises:
            ValueError: no program set (Fluid prints this and exits the process).
        """
        if self._program is None:
            raise ValueError("program of current device worker is not configured")
        return getattr(self._program, "_fleet_opt", None)

    def _describe_tables(self, trainer_desc, opt_info: dict, worker_name: str, fea_dims) -> None:
        """The pslib part shared by Hogwild and the Downpour workers: this program's table ids,
        the dense tables its pull thread pulls, its sparse and dense tables (``fea_dims(i)``
        gives sparse table i's ``(emb_dim, fea_dim, label_var_name)``) and the ops to skip.

        Raises:
            ValueError: ``opt_info`` has no ``program_id_to_worker``, or not this program (Fluid's messages).
        """
        program_id = str(id(self._program))
        downpour, dense_ids = trainer_desc.downpour_param, set()
        config = opt_info["program_configs"].get(program_id)
        if config is not None:
            pc = downpour.program_config.add(program_id=program_id)
            for key in ("push_sparse", "push_dense", "pull_sparse", "pull_dense"):
                getattr(pc, f"{key}_table_id").extend(config[key])
                if key.endswith("dense"):
                    dense_ids.update(config[key])
        trainer_desc.device_worker_name = worker_name
        pull = trainer_desc.pull_dense_param
        pull.device_num = trainer_desc.thread_num
        if opt_info.get("program_id_to_worker") is None:
            raise ValueError("opt_info must have program_id_to_worker")
        if opt_info["program_id_to_worker"].get(program_id) is None:
            raise ValueError(f"{program_id} not found in program_id_to_worker")
        desc = opt_info["program_id_to_worker"][program_id].get_desc()
        dense = [t for t in desc.dense_table if t.table_id in dense_ids]
        for t in dense:
            pull.dense_table.add(table_id=t.table_id, dense_value_name=list(t.dense_variable_name))
        for i, t in enumerate(desc.sparse_table):
            emb_dim, fea_dim, label = fea_dims(i)
            downpour.sparse_table.add(table_id=t.table_id, sparse_key_name=list(t.slot_key),
                                      sparse_value_name=list(t.slot_value), sparse_grad_name=list(t.slot_gradient),
                                      emb_dim=emb_dim, fea_dim=fea_dim, label_var_name=label)
        downpour.stat_var_names.extend(opt_info["stat_var_names"] or [])
        for t in dense:
            downpour.dense_table.add(table_id=t.table_id, dense_value_name=list(t.dense_variable_name),
                                     dense_grad_name=list(t.dense_gradient_variable_name))
        return list(desc.skip_op)

    def _accessor_dim(self, i: int) -> int:
        params = self._fleet_desc.server_param.downpour_server_param.downpour_table_param
        return params[i].accessor.fea_dim


class Hogwild(DeviceWorker):
    """Each thread runs the whole program on its batches (``HogwildWorker``)."""

    def _gen_worker_desc(self, trainer_desc) -> None:
        """Name the worker; with a pslib fleet's ``_fleet_opt`` add its tables.

        Raises:
            ValueError: no program set, or a ``_fleet_opt`` without this program.
        """
        trainer_desc.device_worker_name = "HogwildWorker"
        if self._infer:  # an inference run is fed by the dataset, not by feed ops
            trainer_desc.hogwild_param.skip_ops.append("feed")
        opt_info = self._opt_info()
        if not opt_info or "fleet_desc" not in opt_info:
            return  # no pslib fleet (placegroup's build is the transpiler one, as Fluid's open one)
        skip = self._describe_tables(trainer_desc, opt_info, "HogwildWorker",
                                     lambda i: (-1, self._accessor_dim(i), ""))
        hogwild = trainer_desc.hogwild_param
        hogwild.stat_var_names.extend(opt_info["stat_var_names"] or [])
        hogwild.skip_ops.extend(skip)
        if self._infer:
            hogwild.skip_ops.extend(["push_sparse", "push_sparse_v2", "push_dense"])


class DownpourSGD(DeviceWorker):
    """pslib's asynchronous SGD worker (``DownpourWorker``): described, not run (module docstring)."""

    _WORKER = "DownpourWorker"

    def _gen_worker_desc(self, trainer_desc) -> None:
        """Describe the pslib tables of ``program._fleet_opt``.

        Raises:
            ValueError: no program set, or ``_fleet_opt`` lacks ``program_id_to_worker`` or this program.
        """
        opt_info = self._opt_info()
        if not opt_info:
            raise ValueError(f"{type(self).__name__} describes a pslib fleet's program: the program has no "
                             f"_fleet_opt (pslib's fleet.distributed_optimizer sets it)")
        cvm = opt_info["use_cvm"] or opt_info.get("no_cvm") is True

        def dims(i: int) -> tuple:  # with CVM the show/click columns are part of the embedding
            fea = self._accessor_dim(i)
            return (fea, fea, "click") if cvm else (fea - 2, fea, "click")

        skip = self._describe_tables(trainer_desc, opt_info, self._WORKER, dims)
        self._more(trainer_desc, opt_info)
        downpour = trainer_desc.downpour_param
        downpour.skip_ops.extend(skip)
        if self._infer:
            downpour.push_dense = False
            downpour.push_sparse = False

    def _more(self, trainer_desc, opt_info) -> None:
        """What DownpourSGDOPT adds."""


class DownpourSGDOPT(DownpourSGD):
    """pslib's optimized Downpour worker (``DownpourWorkerOpt``): as DownpourSGD, and the last
    sparse table may be local or asynchronous (``opt_info["local_tables"]``/``["async_tables"]``),
    as in Fluid. Described, not run."""

    _WORKER = "DownpourWorkerOpt"

    def _more(self, trainer_desc, opt_info) -> None:
        tables = trainer_desc.downpour_param.sparse_table
        if not tables:
            return
        last = tables[-1]  # Fluid marks only the last sparse table
        if last.table_id in opt_info.get("local_tables", ()):
            last.is_local = True
        if last.table_id in opt_info.get("async_tables", ()):
            last.is_async = True


class Section(DeviceWorker):
    """One section of a pipeline (``SectionWorker``), from ``program._pipeline_opt``."""

    def _gen_worker_desc(self, trainer_desc) -> None:
        """Describe each section: its program (as text, NOTE(trainer-desc-text)), place,
        concurrency and the vars it takes and gives.

        Raises:
            ValueError: the program has no ``_pipeline_opt``.
            NotImplementedError: a place other than CPUPlace, CUDAPlace, CUDAPinnedPlace (as Fluid).
        """
        trainer_desc.device_worker_name = "SectionWorker"
        opt = getattr(self._program, "_pipeline_opt", None)
        if not opt:
            raise ValueError("Section describes a pipeline: the program has no _pipeline_opt "
                             "(fluid.optimizer.PipelineOptimizer sets it)")
        param = trainer_desc.section_param
        param.queue_size = opt["queue_size"]
        param.sync_steps = opt["sync_steps"]
        param.start_cpu_core_id = opt["start_cpu_core_id"]
        param.param_need_sync.extend(opt["param_need_sync"])
        for i, section in enumerate(opt["section_program_list"]):
            place = opt["place_list"][i]
            # CUDAPinnedPlace first: it may share a base with the others
            kind = next((name for cls, name in ((CUDAPinnedPlace, "CUDAPinnedPlace"), (CUDAPlace, "CUDAPlace"),
                                                (CPUPlace, "CPUPlace")) if isinstance(place, cls)), None)
            if kind is None:
                raise NotImplementedError("SectionWorker only supports CPUPlace, CUDAPlace and CUDAPinnedPlace now.")
            param.section_config.add(program_desc=str(section["program"]), place=kind,
                                     concurrency=opt["concurrency_list"][i],
                                     section_in_var_names=list(section["input_set"]),
                                     section_out_var_names=list(section["output_set"]))


class DeviceWorkerFactory:
    """Makes a device worker by name, as Fluid: ``worker_type.capitalize()`` names the class."""

    _WORKERS = {"Hogwild": Hogwild, "Section": Section, "DownpourSGD": DownpourSGD, "DownpourSGDOPT": DownpourSGDOPT,
                "DeviceWorker": DeviceWorker}

    def _create_device_worker(self, worker_type: str) -> DeviceWorker:
        """A new worker of class ``worker_type.capitalize()``.

        Raises:
            KeyError: no such class (``"DownpourSGD".capitalize()`` is ``"Downpoursgd"``, so
                Fluid finds only ``hogwild`` and ``section``).
        """
        classname = worker_type.capitalize()
        if classname not in self._WORKERS:
            raise KeyError(f"{classname!r}: no device worker of that name; Fluid capitalizes the name, so pass "
                           f"'hogwild' or 'section'")
        return self._WORKERS[classname]()
