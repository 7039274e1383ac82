"""A Fluid 1.x CTR script fed by a Dataset: ``python train.py DATA_DIR OUT.npz [INIT.npz] [InMemoryDataset]``.

Reads DATA_DIR/part-* through gen.py (a trainer of a launched job reads only part-<trainer id>),
trains with train_from_dataset, printing ``loss: <value>`` per batch; a single process writes
its parameters to OUT.npz (after setting those found in INIT.npz, if given).
"""
import glob
import os
import sys

import numpy as np
import paddle.fluid as fluid

data_dir, out_path = sys.argv[1], sys.argv[2]
init_path = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] != "-" else None
kind = sys.argv[4] if len(sys.argv) > 4 else "QueueDataset"

click = fluid.layers.data(name="click", shape=[1], dtype="int64")
slot1 = fluid.layers.data(name="slot1", shape=[1], dtype="int64", lod_level=1)
slot2 = fluid.layers.data(name="slot2", shape=[1], dtype="int64", lod_level=1)


def pooled(ids, name):
    emb = fluid.layers.embedding(ids, size=[50, 4], param_attr=fluid.ParamAttr(name=name))
    return fluid.layers.sequence_pool(emb, "sum")


h = fluid.layers.concat([pooled(slot1, "emb1"), pooled(slot2, "emb2")], axis=1)
logits = fluid.layers.fc(h, 2, param_attr=fluid.ParamAttr(name="fc_w"), bias_attr=fluid.ParamAttr(name="fc_b"))
loss = fluid.layers.mean(fluid.layers.softmax_with_cross_entropy(logits, click))
fluid.optimizer.SGD(learning_rate=0.5).minimize(loss)

place = fluid.CPUPlace()
exe = fluid.Executor(place)
files = sorted(glob.glob(os.path.join(data_dir, "part-*")))
role = os.getenv("TRAINING_ROLE")
prog = fluid.default_main_program()
if role is None:
    exe.run(fluid.default_startup_program())
    if init_path:
        init = np.load(init_path)
        for name in init.files:
            fluid.global_scope().find_var(name).get_tensor().set(init[name], place)
else:
    tid = int(os.getenv("PADDLE_TRAINER_ID", "0"))
    endpoint = os.getenv("POD_IP") + ":" + os.getenv("PADDLE_INIT_PORT")
    t = fluid.DistributeTranspiler()
    t.transpile(tid, pservers=os.getenv("PADDLE_INIT_PSERVERS"), trainers=int(os.getenv("PADDLE_INIT_TRAINERS")))
    prog = t.get_program(endpoint, role)
    exe.run(t.get_startup_program(endpoint, role))
    if role == "PSERVER":
        exe.run(prog)
        sys.exit(0)
    files = [files[tid]]

dataset = fluid.DatasetFactory().create_dataset(kind)
dataset.set_use_var([click, slot1, slot2])
dataset.set_batch_size(4)
dataset.set_thread(1)
dataset.set_pipe_command(sys.executable + " " + os.path.join(os.path.dirname(os.path.abspath(__file__)), "gen.py"))
dataset.set_filelist(files)
if kind == "InMemoryDataset":
    dataset.load_into_memory()
exe.train_from_dataset(program=prog, dataset=dataset, fetch_list=[loss], fetch_info=["loss"], print_period=1)
if role is None:
    scope = fluid.global_scope()
    np.savez(out_path, **{p.name: np.array(scope.find_var(p.name).get_tensor())
                          for p in fluid.default_main_program().all_parameters()})
else:
    exe.close()
