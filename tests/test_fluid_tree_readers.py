"""Fluid 1.8's readers, datasets and trainer descriptions at their Fluid homes:
``fluid.reader`` (GeneratorLoader, DataLoaderBase, DatasetLoader, keep_data_loader_order),
``fluid.dataloader`` (Dataset, BatchSampler, ParentWatchDog; the map-style DataLoader),
``fluid.dataset`` (DatasetBase, FileInstantDataset), ``fluid.data_feed_desc``,
``fluid.trainer_desc`` / ``device_worker`` / ``trainer_factory``, ``fluid.communicator`` and
``fluid.layers.io.monkey_patch_reader_methods``.

Expected texts and values marked "Fluid 1.8.5" were printed by Fluid 1.8.5 itself on the same
inputs."""
import os
import time
from types import SimpleNamespace as NS

import numpy as np
import pytest

import placegroup as fluid
from placegroup.datafeed import dataset_factory
from placegroup.util import text_format
from placegroup.communicator import Communicator
from placegroup.data_feed_desc import DataFeedDesc, DataFeedDescMsg
from placegroup.dataloader import BatchSampler, Dataset
from placegroup.dataloader.dataloader_iter import ParentWatchDog, default_collate_fn
from placegroup.device_worker import DeviceWorker, DeviceWorkerFactory, Hogwild, Section
from placegroup.errors import ConfigError, NotImplementedInPlacegroup
from placegroup.executor.scope import Scope
from placegroup.datafeed.data_loader import DataLoader
from placegroup.reader import DataLoaderBase, DatasetLoader, GeneratorLoader, keep_data_loader_order
from placegroup.trainer_desc import DistMultiTrainer, MultiTrainer, PipelineTrainer
from placegroup.trainer_factory import FetchHandlerMonitor, TrainerFactory
from placegroup.transpiler.config import DistributedMode

D1 = """name: "MultiSlotDataFeed"
batch_size: 2
multi_slot_desc {
    slots {
         name: "words"
         type: "uint64"
         is_dense: false
         is_used: true
     }
     slots {
         name: "label"
         type: "uint64"
         is_dense: false
         is_used: false
    }
}
"""


def _desc_file(tmp_path, text, name="data.proto"):
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return str(path)


# -- fluid.DataFeedDesc and the text format ------------------------------------------------------
def test_data_feed_desc_reads_and_prints_as_fluid(tmp_path):
    d = DataFeedDesc(_desc_file(tmp_path, D1))
    # Fluid 1.8.5
    assert d.desc() == ('name: "MultiSlotDataFeed"\nbatch_size: 2\nmulti_slot_desc {\n  slots {\n    name: "words"\n'
                        '    type: "uint64"\n    is_dense: false\n    is_used: true\n  }\n  slots {\n    name: "label"\n'
                        '    type: "uint64"\n    is_dense: false\n    is_used: false\n  }\n}\npipe_command: "cat"\n')
    d.set_batch_size(128)
    d.set_dense_slots(["words"])
    d.set_use_slots(["label"])
    assert d.desc() == ('name: "MultiSlotDataFeed"\nbatch_size: 128\nmulti_slot_desc {\n  slots {\n    name: "words"\n'
                        '    type: "uint64"\n    is_dense: true\n    is_used: true\n  }\n  slots {\n    name: "label"\n'
                        '    type: "uint64"\n    is_dense: false\n    is_used: true\n  }\n}\npipe_command: "cat"\n')
    assert d.proto_desc.batch_size == 128 and [s.name for s in d.proto_desc.multi_slot_desc.slots] == ["words", "label"]


@pytest.mark.parametrize("text, expected", [  # Fluid 1.8.5
    ("multi_slot_desc { slots { name: \"a\" } }", 'multi_slot_desc {\n  slots {\n    name: "a"\n  }\n}\npipe_command: "cat"\n'),
    ("name: 'q\\'x\\n\\303\\251' 'yy' # c\n batch_size: 0x10; thread_num: -3",
     'name: "q\\\'x\\n\\303\\251yy"\nbatch_size: 16\npipe_command: "cat"\nthread_num: -3\n'),
    ('multi_slot_desc: { slots: [{name: "a" type: "f" shape: [1, 2]}] }',
     'multi_slot_desc {\n  slots {\n    name: "a"\n    type: "f"\n    shape: 1\n    shape: 2\n  }\n}\npipe_command: "cat"\n'),
    ('multi_slot_desc { slots < name: "a" type: "b" is_dense: 1 is_used: True > }',
     'multi_slot_desc {\n  slots {\n    name: "a"\n    type: "b"\n    is_dense: true\n    is_used: true\n  }\n}\n'
     'pipe_command: "cat"\n'),
    ('name: "\u00c3\u00a9"', 'name: "\\303\\203\\302\\251"\npipe_command: "cat"\n'),
    # Fluid fails here ("should not have multiple pipe_command fields"); placegroup takes the file's
    ('pipe_command: "zcat"\nname: "X"', 'name: "X"\npipe_command: "zcat"\n'),
])
def test_data_feed_desc_text_format_forms(tmp_path, text, expected):
    assert DataFeedDesc(_desc_file(tmp_path, text)).desc() == expected


@pytest.mark.parametrize("text, message", [  # Fluid 1.8.5's ParseError messages
    ('name: "a" name: "b"', '1:17 : Message type "paddle.framework.DataFeedDesc" should not have multiple "name" fields.'),
    ("foo: 1", '1:1 : Message type "paddle.framework.DataFeedDesc" has no field named "foo".'),
    ('batch_size: "x"', "1:13 : 'batch_size: \"x\"': Couldn't parse integer: \"x\""),
    ("batch_size: 3000000000", "1:13 : 'batch_size: 3000000000': Value out of range: 3000000000"),
    ("is_dense: true", '1:1 : Message type "paddle.framework.DataFeedDesc" has no field named "is_dense".'),
])
def test_a_bad_data_feed_file_is_a_parse_error_at_its_place(tmp_path, text, message):
    with pytest.raises(text_format.TextFormatError) as e:
        DataFeedDesc(_desc_file(tmp_path, text))
    assert str(e.value) == message


def test_data_feed_desc_setters_refuse_as_fluid(tmp_path):
    d = DataFeedDesc(_desc_file(tmp_path, D1))
    with pytest.raises(KeyError, match="nope"):
        d.set_dense_slots(["nope"])
    other = DataFeedDesc(_desc_file(tmp_path, 'name: "Other"', "o.proto"))
    with pytest.raises(ValueError, match="Only MultiSlotDataFeed needs set_use_slots"):
        other.set_use_slots(["x"])
    other.set_batch_size(5)
    assert other.desc() == 'name: "Other"\nbatch_size: 5\npipe_command: "cat"\n'  # Fluid 1.8.5
    with pytest.raises(TypeError, match="'5' has type str, but expected one of: int"):
        other.set_batch_size("5")


def test_text_format_round_trips_and_checks_values():
    msg = DataFeedDescMsg(name='a"b\\c\td', batch_size=-7)
    msg.multi_slot_desc.slots.add(name="s", type="float", is_dense=True, shape=[-1, 3])
    again = text_format.parse(text_format.to_text(msg), DataFeedDescMsg)
    assert again == msg and again.name == 'a"b\\c\td' and list(again.multi_slot_desc.slots[0].shape) == [-1, 3]
    assert not DataFeedDescMsg().HasField("multi_slot_desc") and DataFeedDescMsg().batch_size == 32
    with pytest.raises(AttributeError, match='has no field named "nope"'):
        msg.nope = 1
    with pytest.raises(ValueError, match="Value out of range"):
        msg.batch_size = 2 ** 31


# -- fluid.dataset: DatasetBase, FileInstantDataset, desc() ---------------------------------------
def _vars():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        a = fluid.data(name="a", shape=[None, 1], dtype="int64", lod_level=1)
        b = fluid.data(name="b", shape=[None, 3], dtype="float32")
    return a, b


def test_dataset_desc_is_fluids_data_feed_text():
    a, b = _vars()
    ds = fluid.DatasetFactory().create_dataset("InMemoryDataset")
    ds.set_use_var([a, b])
    ds.set_batch_size(7)
    # Fluid 1.8.5
    assert ds.desc() == ('name: "MultiSlotInMemoryDataFeed"\nbatch_size: 7\nmulti_slot_desc {\n  slots {\n    name: "a"\n'
                         '    type: "uint64"\n    is_used: true\n  }\n  slots {\n    name: "b"\n    type: "float"\n'
                         '    is_dense: true\n    is_used: true\n    shape: -1\n    shape: 3\n  }\n}\npipe_command: "cat"\n')
    fi = fluid.DatasetFactory().create_dataset("FileInstantDataset")
    fi.set_use_var([a, b])
    assert fi.desc().startswith('name: "MultiSlotFileInstantDataFeed"\nmulti_slot_desc {')  # no batch_size: unset
    assert fi.batch_size == 32 and fi.proto_desc.batch_size == 32  # Fluid's DataFeedDesc default


def test_the_datasets_share_fluids_base_class():
    assert fluid.dataset.DatasetBase is dataset_factory.DatasetBase
    for kind in ("QueueDataset", "InMemoryDataset", "FileInstantDataset"):
        ds = fluid.DatasetFactory().create_dataset(kind)
        assert isinstance(ds, fluid.dataset.DatasetBase) and type(ds).__name__ == kind
    with pytest.raises(NotImplementedInPlacegroup, match="BoxPS"):
        fluid.DatasetFactory().create_dataset("BoxPSDataset")


def _slot_files(tmp_path, n_files=2, lines=3):
    """MultiSlot lines for vars a (ids, lod 1) and b (3 floats): ``1 <i> 3 <i> <i> <i>``."""
    paths, i = [], 0
    for f in range(n_files):
        rows = []
        for _ in range(lines):
            rows.append(f"1 {i} 3 {i} {i + .5} {i + .25}")
            i += 1
        path = tmp_path / f"part-{f}"
        path.write_text("\n".join(rows) + "\n")
        paths.append(str(path))
    return paths


def test_file_instant_dataset_streams_as_queue_dataset_and_does_not_shuffle(tmp_path):
    a, b = _vars()
    files = _slot_files(tmp_path)
    got = {}
    for kind in ("QueueDataset", "FileInstantDataset"):
        ds = fluid.DatasetFactory().create_dataset(kind)
        ds.set_use_var([a, b])
        ds.set_batch_size(4)
        ds.set_filelist(files)
        got[kind] = [(fb["a"].data.ravel().tolist(), fb["b"].tolist()) for fb in ds.batches()]
    assert got["FileInstantDataset"] == got["QueueDataset"]
    assert [ids for ids, _ in got["FileInstantDataset"]] == [[0, 1, 2, 3], [4, 5]]
    with pytest.raises(NotImplementedError, match="FileInstantDataset does not support local shuffle"):
        ds.local_shuffle()
    with pytest.raises(NotImplementedError, match="FileInstantDataset does not support global shuffle"):
        ds.global_shuffle()


# -- fluid.reader: the loaders' classes -------------------------------------------------------------
def test_from_generator_gives_a_generator_loader_that_is_a_data_loader_base():
    x = fluid.data("x", [None, 1])
    loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=2)
    assert type(loader) is GeneratorLoader and isinstance(loader, DataLoaderBase)
    assert issubclass(fluid.io.PyReader, DataLoaderBase)
    loader.set_sample_generator(lambda: iter([(np.ones(1, "float32"),)] * 5), batch_size=2, drop_last=False,
                                places=fluid.cpu_places(1))
    assert [d[0]["x"].shape for d in loader()] == [(2, 1), (2, 1), (1, 1)]


def test_data_loader_base_is_abstract_and_checks_arrays():
    base = DataLoaderBase()
    assert base() is base
    with pytest.raises(NotImplementedError):
        iter(base)
    with pytest.raises(NotImplementedError):
        base.next()
    assert DataLoaderBase._check_input_array([[1, 2], [3, 4]]).shape == (2, 2)
    with pytest.raises(TypeError, match="nested lists with different lengths"):
        DataLoaderBase._check_input_array([[1, 2], [3]])


def test_keep_data_loader_order_gets_and_sets_the_switch():
    assert keep_data_loader_order() is True
    try:
        keep_data_loader_order(False)
        assert keep_data_loader_order() is False
        with pytest.raises(TypeError):
            keep_data_loader_order(1)
    finally:
        keep_data_loader_order(True)


def test_from_dataset_feeds_one_batch_per_place(tmp_path):
    a, b = _vars()
    ds = fluid.DatasetFactory().create_dataset("QueueDataset")
    ds.set_use_var([a, b])
    ds.set_batch_size(2)
    ds.set_filelist(_slot_files(tmp_path, lines=5))  # 10 instances: batches of 2
    loader = fluid.io.DataLoader.from_dataset(ds, fluid.cpu_places(2))
    assert isinstance(loader, DatasetLoader) and ds.thread_num == 2
    steps = [[feed["a"].data.ravel().tolist() for feed in step] for step in loader()]
    assert steps == [[[0, 1], [2, 3]], [[4, 5], [6, 7]]]  # the fifth batch has no partner: dropped
    ds.set_batch_size(4)  # batches of 4, 4, 2
    kept = [[len(f["b"]) for f in step] for step in fluid.io.DataLoader.from_dataset(ds, fluid.cpu_places(1), False)()]
    dropped = [[len(f["b"]) for f in step] for step in fluid.io.DataLoader.from_dataset(ds, fluid.cpu_places(1))()]
    assert kept == [[4], [4], [2]] and dropped == [[4], [4]]
    with pytest.raises(ValueError, match="Filelist number of dataset 2 must be not less than place number 3"):
        fluid.io.DataLoader.from_dataset(ds, fluid.cpu_places(3))
    with pytest.raises(TypeError, match="dataset must be type of DatasetBase"):
        fluid.io.DataLoader.from_dataset([1, 2], fluid.cpu_places(1))


# -- fluid.dataloader: Dataset, BatchSampler and the map-style DataLoader ----------------------------
class _Numbers(Dataset):
    def __init__(self, n, bad=None):
        self.n, self.bad = n, bad

    def __getitem__(self, i):
        if i == self.bad:
            raise ValueError(f"bad sample {i}")
        return np.full([2], i, "float32"), np.array([i], "int64")

    def __len__(self):
        return self.n


def test_batch_sampler_as_fluid():
    assert list(BatchSampler(indices=list(range(7)), batch_size=3)) == [[0, 1, 2], [3, 4, 5], [6]]  # Fluid 1.8.5
    bs = BatchSampler(indices=list(range(7)), batch_size=3, drop_last=True)
    assert list(bs) == [[0, 1, 2], [3, 4, 5]] and len(bs) == 2
    assert len(BatchSampler(dataset=_Numbers(7), batch_size=3)) == 3
    np.random.seed(3)
    assert list(BatchSampler(indices=list(range(6)), batch_size=4, shuffle=True)) == [[3, 5, 4, 1], [0, 2]]  # Fluid 1.8.5


@pytest.mark.parametrize("kwargs, exc, message", [  # Fluid 1.8.5's messages (its AssertionErrors)
    ({}, ValueError, "either dataset or indices should be set"),
    ({"indices": (1, 2), "dataset": _Numbers(3)}, ValueError, "should not set both dataset and indices"),
    ({"indices": range(3)}, TypeError, "indices should be a list or tuple, but got <class 'range'>"),
    ({"indices": [1], "batch_size": 0}, ValueError, "batch_size should be a positive integer, but got 0"),
    ({"indices": [1], "shuffle": 1}, TypeError, "shuffle should be a boolean value, but got <class 'int'>"),
    ({"dataset": [1, 2]}, TypeError, "dataset should be an instance of paddle.io.Dataset"),
])
def test_batch_sampler_refuses_bad_arguments(kwargs, exc, message):
    with pytest.raises(exc) as e:
        BatchSampler(**kwargs)
    assert str(e.value) == message


def test_dataset_base_class_says_what_to_implement():
    with pytest.raises(NotImplementedError, match="'__len__' not implement in class Dataset"):
        len(Dataset())
    with pytest.raises(NotImplementedError, match="'__getitem__' not implement in class Dataset"):
        Dataset()[0]
    assert fluid.io.Dataset is Dataset and fluid.io.BatchSampler is BatchSampler


def _xy():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()):
        x = fluid.data("x", [None, 2])
        y = fluid.data("y", [None, 1], "int64")
        total = fluid.layers.reduce_sum(x)
    return main, x, y, total


def test_map_style_data_loader_batches_a_dataset():
    main, x, y, total = _xy()
    loader = DataLoader(_Numbers(10), feed_list=[x, y], places=fluid.cpu_places(1), batch_size=3)
    assert len(loader) == 4
    steps = list(loader())
    # Fluid 1.8.5: steps of one feed dict, y = [0, 1, 2], [3, 4, 5], [6, 7, 8], [9]
    assert [s[0]["y"].ravel().tolist() for s in steps] == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert steps[0][0]["x"].dtype == np.float32 and steps[-1][0]["x"].tolist() == [[9.0, 9.0]]
    exe = fluid.Executor(fluid.CPUPlace())
    assert [float(exe.run(main, feed=s[0], fetch_list=[total])[0]) for s in steps] == [6.0, 24.0, 42.0, 18.0]
    as_list = list(DataLoader(_Numbers(10), feed_list=[x, y], places=fluid.cpu_places(1), batch_size=3,
                              drop_last=True, return_list=True)())
    assert len(as_list) == 3 and as_list[1][0][1].ravel().tolist() == [3, 4, 5]  # [[x, y]] per step
    unnamed = list(DataLoader(_Numbers(10), places=fluid.cpu_places(1), batch_size=4, return_list=True)())
    assert [s[0][1].ravel().tolist() for s in unnamed] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    two = list(DataLoader(_Numbers(5), feed_list=[x, y], places=fluid.cpu_places(2), batch_size=2)())
    assert [[f["x"].tolist() for f in s] for s in two] == [[[[0.0, 0.0], [1.0, 1.0]], [[2.0, 2.0], [3.0, 3.0]]]]


def _init_worker(worker_id):
    os.environ["PG_TEST_WORKER"] = str(worker_id)


class _WhichWorker(Dataset):
    def __getitem__(self, i):
        return np.array([i], "int64"), np.array([int(os.environ.get("PG_TEST_WORKER", "-1"))], "int64")

    def __len__(self):
        return 8


def test_worker_processes_give_the_same_batches_in_order():
    _, x, y, _ = _xy()
    single = [s[0]["y"].ravel().tolist() for s in DataLoader(_Numbers(10), feed_list=[x, y],
                                                             places=fluid.cpu_places(1), batch_size=3)()]
    multi = [s[0]["y"].ravel().tolist() for s in DataLoader(_Numbers(10), feed_list=[x, y], places=fluid.cpu_places(1),
                                                            batch_size=3, num_workers=2)()]
    assert multi == single
    a = fluid.data("a", [None, 1], "int64")
    w = fluid.data("w", [None, 1], "int64")
    steps = list(DataLoader(_WhichWorker(), feed_list=[a, w], places=fluid.cpu_places(1), batch_size=2,
                            num_workers=2, worker_init_fn=_init_worker)())
    assert [s[0]["a"].ravel().tolist() for s in steps] == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert [s[0]["w"].ravel().tolist() for s in steps] == [[0, 0], [1, 1], [0, 0], [1, 1]]  # dealt round robin
    assert "PG_TEST_WORKER" not in os.environ  # worker_init_fn ran in the workers only
    # Fluid 1.8.5: with workers, return_list and one place, a step is the list of arrays itself
    flat = list(DataLoader(_Numbers(4), feed_list=[x, y], places=fluid.cpu_places(1), batch_size=2, num_workers=2,
                           return_list=True)())
    assert [s[1].ravel().tolist() for s in flat] == [[0, 1], [2, 3]]


def test_a_failing_dataset_raises_in_the_consumer():
    _, x, y, _ = _xy()
    with pytest.raises(RuntimeError, match="(?s)worker . failed on batch 1.*bad sample 4"):
        list(DataLoader(_Numbers(10, bad=4), feed_list=[x, y], places=fluid.cpu_places(1), batch_size=3,
                        num_workers=2)())
    with pytest.raises(ValueError, match="bad sample 4"):
        list(DataLoader(_Numbers(10, bad=4), feed_list=[x, y], places=fluid.cpu_places(1), batch_size=3)())


@pytest.mark.parametrize("kwargs, exc, message", [
    ({"dataset": [1]}, TypeError, "dataset should be subclass instance of paddle.io.Dataset"),
    ({"feed_list": None}, ValueError, "feed_list should be set when return_list=False"),
    ({"places": None}, ValueError, "places cannot be None"),
    ({"batch_sampler": BatchSampler(indices=[1]), "batch_size": 2}, ValueError,
     "batch_size/shuffle/drop_last should not be set when batch_sampler is given"),
    ({"batch_size": 0}, ValueError, "batch_size should be a positive value when batch_sampler is not given"),
    ({"num_workers": -1}, ValueError, "num_workers should be a non-negative value"),
])
def test_map_style_data_loader_refuses_bad_arguments(kwargs, exc, message):
    _, x, y, _ = _xy()
    args = {"dataset": _Numbers(3), "feed_list": [x, y], "places": fluid.cpu_places(1), **kwargs}
    with pytest.raises(exc, match=message.replace("/", ".").replace("(", r"\(")):
        DataLoader(**args)


def test_default_collate_fn_and_parent_watch_dog():
    x, y = default_collate_fn([(np.zeros(2), 1), (np.ones(2), 2)])
    assert x.tolist() == [[0, 0], [1, 1]] and y.tolist() == [1, 2]
    assert ParentWatchDog().is_alive()
    ready_r, ready_w = os.pipe()
    out_r, out_w = os.pipe()
    child = os.fork()
    if child == 0:  # the parent of a grandchild that outlives it
        try:
            if os.fork() == 0:
                dog = ParentWatchDog()
                alive = dog.is_alive()
                os.write(ready_w, b"r")
                deadline = time.time() + 10
                while dog.is_alive() and time.time() < deadline:
                    time.sleep(0.01)
                os.write(out_w, f"{alive} {dog.is_alive()}".encode())
                os._exit(0)
            os.read(ready_r, 1)
        finally:
            os._exit(0)
    os.close(out_w)
    os.waitpid(child, 0)
    assert os.read(out_r, 100) == b"True False"
    os.close(out_r)


# -- fluid.layers.io.monkey_patch_reader_methods ----------------------------------------------------
def test_monkey_patch_reader_methods_gives_the_reader_reset():
    reader = fluid.layers.py_reader(capacity=2, shapes=[(-1, 1)], dtypes=["float32"])
    reader.persistable = reader.stop_gradient = False
    assert fluid.layers.io.monkey_patch_reader_methods(reader) is reader
    assert reader.persistable and reader.stop_gradient
    reader.decorate_batch_generator(lambda: iter([[np.ones((1, 1), "float32")]]))
    reader.start()
    reader.reset()  # the patched reset ends the pass: start() works again
    reader.start()
    reader.reset()
    with pytest.raises(TypeError, match="expected a reader"):
        fluid.layers.io.monkey_patch_reader_methods(object())


# -- trainer descriptions -------------------------------------------------------------------------
def _fc_program():
    main = fluid.Program()
    with fluid.program_guard(main, fluid.Program()), fluid.unique_name.guard():
        y = fluid.layers.fc(fluid.data("x", [None, 2]), 1)
    return main, y


def test_multi_trainer_description_is_fluids_text():
    t = TrainerFactory()._create_trainer()
    assert type(t) is MultiTrainer and type(t._device_worker) is Hogwild
    assert t.proto_desc.thread_num == os.cpu_count()  # as Fluid: the CPU count until set
    main, y = _fc_program()
    t._set_program(main)
    t._set_thread(3)
    t._set_debug(True)
    t._set_fetch_var_and_info([y], ["yy"], 7)
    t._set_scale_datanorm(0.1)
    t._set_adjust_ins_weight({"need_adjust": True, "nid_adjw_ratio": 0.3})
    t._set_copy_table_config({"need_copy": True, "src_sparse_tables": 1, "dest_sparse_tables": [2],
                              "dependency_map": {3: 4}})
    t._set_dump_fields(["a", "b"])
    t._set_infer(True)
    t._gen_trainer_desc()
    # Fluid 1.8.5's str(trainer)
    assert str(t) == t._desc() == (
        'class_name: "MultiTrainer"\ndevice_worker_name: "HogwildWorker"\nthread_num: 3\ndebug: true\nfetch_config {\n'
        '  fetch_var_names: "fc_0.tmp_1"\n  fetch_var_str_format: "yy"\n  print_period: 7\n}\nscale_datanorm: 0.1\n'
        'dump_fields: "a"\ndump_fields: "b"\ncopy_table_config {\n  need_copy: true\n  batch_num: 100\n'
        '  src_sparse_tables: 1\n  dest_sparse_tables: 2\n  dense_pull_after_copy: true\n  sparse_copy_by_feasign: true\n'
        '  enable_dependency: false\n  table_denpendency_map {\n    key: 3\n    values: 4\n  }\n}\n'
        'adjust_ins_weight_config {\n  need_adjust: true\n  nid_slot: ""\n  nid_adjw_threshold: 0.0\n'
        '  nid_adjw_ratio: 0.3\n  ins_weight_slot: ""\n}\nhogwild_param {\n  skip_ops: "feed"\n}\n')
    with pytest.raises(ValueError, match=r"len\(src_dense_tables\) != len\(dest_dense_tables\), 1 vs 0"):
        t._set_copy_table_config({"src_dense_tables": [1]})


def _pslib_opt(main, device_worker, use_cvm, **extra):
    """A pslib fleet's ``_fleet_opt`` made of plain objects shaped as pslib's (its worker's
    ``get_desc()`` tables and the server's accessor)."""
    worker_desc = NS(dense_table=[NS(table_id=1, dense_variable_name=["w"], dense_gradient_variable_name=["w@GRAD"]),
                                  NS(table_id=9, dense_variable_name=["z"], dense_gradient_variable_name=["z@GRAD"])],
                     sparse_table=[NS(table_id=0, slot_key=["k1", "k2"], slot_value=["v1", "v2"],
                                      slot_gradient=["g1", "g2"])], skip_op=["lookup_table"])
    fleet_desc = NS(server_param=NS(downpour_server_param=NS(downpour_table_param=[NS(accessor=NS(fea_dim=11))])))
    pid = str(id(main))
    return dict(trainer="DistMultiTrainer", device_worker=device_worker, fleet_desc=fleet_desc, use_cvm=use_cvm,
                stat_var_names=["s1"], program_configs={pid: {"push_sparse": [0], "push_dense": [1],
                                                              "pull_sparse": [0], "pull_dense": [1]}},
                program_id_to_worker={pid: NS(get_desc=lambda: worker_desc)}, **extra)


_PSLIB_COMMON = ('pull_dense_param {\n  device_num: 2\n  dense_table {\n    table_id: 1\n    dense_value_name: "w"\n  }\n}\n'
                 'downpour_param {\n  sparse_table {\n    table_id: 0\n    sparse_key_name: "k1"\n    sparse_key_name: "k2"\n'
                 '    sparse_value_name: "v1"\n    sparse_value_name: "v2"\n    sparse_grad_name: "g1"\n'
                 '    sparse_grad_name: "g2"\n')
_PSLIB_TAIL = ('  dense_table {\n    table_id: 1\n    dense_value_name: "w"\n    dense_grad_name: "w@GRAD"\n  }\n'
               '{skip}  program_config {\n    program_id: "PID"\n    push_sparse_table_id: 0\n    push_dense_table_id: 1\n'
               '    pull_sparse_table_id: 0\n    pull_dense_table_id: 1\n  }\n{push}  stat_var_names: "s1"\n}\n')


@pytest.mark.parametrize("worker, infer, head, table", [  # Fluid 1.8.5's str(trainer), program id aside
    ("DownpourSGD", False, 'device_worker_name: "DownpourWorker"\nthread_num: 2\nuse_cvm: false\n',
     '    emb_dim: 9\n    fea_dim: 11\n    label_var_name: "click"\n  }\n'),
    ("DownpourSGDOPT", True, 'device_worker_name: "DownpourWorkerOpt"\nthread_num: 2\nuse_cvm: true\n',
     '    emb_dim: 11\n    fea_dim: 11\n    label_var_name: "click"\n    is_local: true\n    is_async: true\n  }\n'),
    ("Hogwild", True, 'device_worker_name: "HogwildWorker"\nthread_num: 2\nuse_cvm: true\nhogwild_param {\n'
     '  skip_ops: "feed"\n  skip_ops: "lookup_table"\n  skip_ops: "push_sparse"\n  skip_ops: "push_sparse_v2"\n'
     '  skip_ops: "push_dense"\n  stat_var_names: "s1"\n}\n',
     '    emb_dim: -1\n    fea_dim: 11\n    label_var_name: ""\n  }\n'),
])
def test_pslib_workers_describe_their_tables_as_fluid(worker, infer, head, table):
    main, _ = _fc_program()
    main._fleet_opt = _pslib_opt(main, worker, use_cvm=infer, local_tables=[0], async_tables=[0])
    t = TrainerFactory()._create_trainer(main._fleet_opt)
    assert type(t) is DistMultiTrainer
    t._set_program(main)
    t._set_thread(2)
    t._set_infer(infer)
    t._gen_trainer_desc()
    downpour = worker != "Hogwild"
    tail = (_PSLIB_TAIL.replace("PID", str(id(main))).replace("{skip}", '  skip_ops: "lookup_table"\n' if downpour else "")
            .replace("{push}", "  push_sparse: false\n  push_dense: false\n" if downpour and infer else ""))
    assert str(t) == 'class_name: "DistMultiTrainer"\n' + head + _PSLIB_COMMON + table + tail


def test_section_worker_describes_the_pipeline():
    main, _ = _fc_program()
    section, _ = _fc_program()
    main._pipeline_opt = {"trainer": "PipelineTrainer", "device_worker": "Section", "queue_size": 4, "sync_steps": 2,
                          "start_cpu_core_id": 0, "param_need_sync": ["w"], "place_list": [fluid.CPUPlace()],
                          "concurrency_list": [3],
                          "section_program_list": [{"program": section, "input_set": {"x"}, "output_set": {"y"}}]}
    t = TrainerFactory()._create_trainer(main._pipeline_opt)
    assert type(t) is PipelineTrainer and type(t._device_worker) is Section
    t._set_program(main)
    t._gen_trainer_desc()
    config = t.proto_desc.section_param.section_config[0]
    assert t.proto_desc.device_worker_name == "SectionWorker" and t.proto_desc.section_param.queue_size == 4
    assert config.program_desc == str(section) and config.concurrency == 3 and list(config.section_in_var_names) == ["x"]
    assert '  section_config {\n    program_desc: "program seed=' in str(t) and "place: CPUPlace\n" in str(t)


def test_factories_and_trainers_refuse_as_fluid():
    assert type(DeviceWorkerFactory()._create_device_worker("hogwild")) is Hogwild
    assert type(DeviceWorkerFactory()._create_device_worker("section")) is Section
    with pytest.raises(KeyError, match="Downpoursgd"):  # Fluid capitalizes the name
        DeviceWorkerFactory()._create_device_worker("DownpourSGD")
    with pytest.raises(KeyError, match="Nope"):
        TrainerFactory()._create_trainer({"trainer": "Nope", "device_worker": "Hogwild"})
    with pytest.raises(KeyError, match="device_worker"):
        TrainerFactory()._create_trainer({"trainer": "MultiTrainer"})
    with pytest.raises(NotImplementedError, match="DeviceWorker does not implement gen_worker_desc"):
        DeviceWorker()._gen_worker_desc(None)
    t = TrainerFactory()._create_trainer({"trainer": "DistMultiTrainer", "device_worker": "Hogwild"})
    with pytest.raises(RuntimeError, match="None Program"):
        t._gen_trainer_desc()
    multi = MultiTrainer()
    multi._set_device_worker(Hogwild())
    with pytest.raises(ValueError, match="program of current device worker is not configured"):
        multi._gen_trainer_desc()


# -- FetchHandlerMonitor -----------------------------------------------------------------------------
class _Handler:
    def __init__(self, var_dict, period_secs):
        self.var_dict, self.period_secs, self.calls = var_dict, period_secs, []

    def handler(self, res_dict):
        self.calls.append(res_dict)


def test_fetch_handler_monitor_hands_over_values_every_period_and_stops():
    scope = Scope()
    scope.var("w").get_tensor().set(np.array([1.5, 2.5], "float32"))
    main, y = _fc_program()
    handler = _Handler({"weight": "w", "out": y}, period_secs=0.02)
    monitor = FetchHandlerMonitor(scope, handler)
    monitor.start()
    deadline = time.time() + 10
    while len(handler.calls) < 3 and time.time() < deadline:
        time.sleep(0.01)
    monitor.stop()
    seen = len(handler.calls)
    time.sleep(0.1)
    assert 3 <= seen == len(handler.calls) and not monitor.fetch_thread.is_alive()
    assert handler.calls[0]["weight"].tolist() == [1.5, 2.5] and handler.calls[0]["out"] is None  # no value yet
    assert monitor.error is None


def test_fetch_handler_monitor_refuses_a_lod_value():
    scope = Scope()
    scope.var("s").get_tensor().set(fluid.create_lod_tensor(np.ones((3, 1), "float32"), [[1, 2]], fluid.CPUPlace()))
    handler = _Handler({"seq": "s"}, period_secs=0.01)
    monitor = FetchHandlerMonitor(scope, handler)
    monitor.start()
    monitor.fetch_thread.join(10)
    monitor.stop()
    assert isinstance(monitor.error, RuntimeError) and "LoD" in str(monitor.error) and not handler.calls


# -- Communicator -----------------------------------------------------------------------------------
def _trainer_program(sync_mode):
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        loss = fluid.layers.mean(fluid.layers.fc(fluid.data("x", [None, 2]), 1))
        fluid.optimizer.SGD(0.1).minimize(loss)
    config = fluid.DistributeTranspilerConfig()
    config.sync_mode = sync_mode
    t = fluid.DistributeTranspiler(config)
    t.transpile(0, program=main, pservers="127.0.0.1:6170", trainers=1, startup_program=startup)
    return main, t.get_trainer_program()


def test_communicator_is_a_handle_over_the_trainer_program():
    origin, trainer = _trainer_program(sync_mode=False)
    comm = Communicator(trainer, DistributedMode.ASYNC, envs={"communicator_send_queue_size": "20"})
    assert comm.mode == "ASYNC" and not comm.is_running()
    comm.start()
    assert comm.is_running()
    comm.stop()
    assert not comm.is_running()
    with pytest.raises(ConfigError, match="was stopped"):
        comm.start()
    assert Communicator(trainer, DistributedMode.GEO).mode == "GEO"  # runs async here
    with pytest.raises(ConfigError, match="transpiled for async training"):
        Communicator(trainer, DistributedMode.SYNC)
    with pytest.raises(ConfigError, match="not a DistributedMode"):
        Communicator(trainer, 7)
    with pytest.raises(ConfigError, match="not a trainer's program"):
        Communicator(fluid.Program(), DistributedMode.ASYNC)
    with pytest.raises(TypeError, match="must be a fluid.Program"):
        Communicator("prog", DistributedMode.ASYNC)
    _, sync_trainer = _trainer_program(sync_mode=True)
    assert Communicator(sync_trainer, DistributedMode.SYNC).mode == "SYNC"


# -- the names at Fluid's paths --------------------------------------------------------------------
def test_fluid_paths_hold_these_objects():
    from placegroup.compat import surface_object

    assert surface_object("fluid.reader", "GeneratorLoader") is GeneratorLoader
    assert surface_object("fluid.reader", "DataLoaderBase") is DataLoaderBase
    assert surface_object("fluid.reader", "DatasetLoader") is DatasetLoader
    assert surface_object("fluid.reader", "keep_data_loader_order") is keep_data_loader_order
    assert surface_object("fluid.reader", "DatasetBase") is fluid.dataset.DatasetBase
    assert surface_object("fluid.io", "BatchSampler") is BatchSampler
    assert surface_object("fluid.dataloader.batch_sampler", "Dataset") is Dataset
    assert surface_object("fluid.reader", "default_collate_fn") is default_collate_fn is fluid.io.default_collate_fn
    assert surface_object("fluid.dataset", "FileInstantDataset") is fluid.dataset.FileInstantDataset
    assert surface_object("fluid.executor", "TrainerFactory") is TrainerFactory
    assert surface_object("fluid.trainer_factory", "Section") is Section
    assert surface_object("fluid", "DataFeedDesc") is DataFeedDesc
    assert surface_object("fluid.reader", "monkey_patch_reader_methods") is fluid.layers.io.monkey_patch_reader_methods
    assert surface_object("fluid.communicator", "Communicator") is Communicator
