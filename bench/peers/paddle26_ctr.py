"""The CTR DNN of bench/peers/ctr_fluid1.py on PaddlePaddle 2.6.2 (``paddle.static`` and fleet's
parameter server), one process per role; the Paddle 2.6.2 peer of bench_ctr.py.

    dense_input [13] + C1..C26 (lod_level=1 int64 ids)
    each slot -> paddle.static.nn.embedding "SparseFeatFactors" [1,000,000 x 10], is_sparse=True
                 (one table, shared by the 26 lookups) -> paddle.static.nn.sequence_pool(sum)
    concat(26 x 10 + 13) -> fc(400, relu) x 3 -> fc(2, softmax) -> cross entropy -> mean
    -> Adam(1e-4);  metric: paddle.static.auc

The same model, initializers (the table Uniform(-1, 1)), seed (1) and batches as ctr_fluid1.py;
what 2.6.2's parameter server makes of the table differs (NOTE(paddle26-sparse-table)).
bench/peers/ctr_data.py makes the batches and writes them as MultiSlot text files, which the
trainer reads into an ``InMemoryDataset`` (one thread, ``CPU_NUM=1``) before the clock starts,
and trains on with Paddle's C++ loop, ``exe.train_from_dataset``: the only loop of 2.6.2's async
parameter server that pulls the dense parameters back from the servers
(bench/peers/paddle_fit_a_line.py, NOTE(paddle-async-ps)). Step ``i`` trains on batch ``i % 20``
of the trainer's 20, as in ctr_fluid1.py. One call runs the ``CTR_WARMUP`` warm-up steps, a
second one the timed ``CTR_STEPS - CTR_WARMUP`` steps; ``examples_per_s`` and
``cpu_ms_per_step`` (the process's CPU time, all its threads) cover the second call whole (reader
start and the client's flush at the end included: about 0.1 s against seconds of steps).

The losses and the AUC are what Paddle's loop prints for ``fetch_list=[loss, auc]`` with
``print_period=1`` (C++, one line per step, six significant digits): the trainer sends its
stdout and stderr to a file during each call and reads them back. ``first_loss`` is the loss
of the first warm-up step, ``last_loss`` that of the last timed step, each computed with the
parameters the trainer held at that step; ``auc`` is the AUC over all the trainer's steps
(``paddle.static.auc``'s global one).

The role comes from the environment, as ``fleetrun`` gives it (PaddleCloudRoleMaker):
``TRAINING_ROLE`` (TRAINER or PSERVER; unset: one process, plain static training with the same
loop and data, the kernel-speed reference), ``PADDLE_PSERVERS_IP_PORT_LIST``,
``PADDLE_TRAINERS_NUM``, ``PADDLE_TRAINER_ID``, ``PADDLE_TRAINER_ENDPOINTS``, ``POD_IP`` and
``PADDLE_PORT`` (a process's own endpoint), and ``PADDLE_WITH_GLOO``/``PADDLE_GLOO_*`` for the
trainers' barrier (trainer 1 starts from trainer 0's parameters); bench/peers/launch_peer.py
sets them all. ``CTR_MODE`` is ``async`` (default; ``strategy.a_sync = True``) or ``sync``
(``a_sync = False``, which 2.6.2 does not run: its trainers die of a SIGSEGV in
``SendBarrierOp`` at the first step, NOTE(paddle-async-ps)); ``CTR_DISTRIBUTED=1`` makes the
table distributed (NOTE(paddle26-distributed)); ``CTR_STEPS``, ``CTR_WARMUP``, ``CTR_BATCH``
size the run. ``CTR_DATA_DIR`` is where the data files and the captured output go (default: the
working directory), in a directory ``ctr_data_<pid>_*`` removed at the end (left behind when the
process dies in Paddle's loop: its ``<part><id>.log`` then holds Paddle's last words). A trainer
prints one JSON line, as ctr_fluid1.py does. Paddle writes ``<number>_train_desc.prototxt`` into
the working directory at each ``train_from_dataset``.

    CTR_STEPS=30 CTR_WARMUP=5 /path/to/paddle-2.6.2/python bench/peers/paddle26_ctr.py
"""
# NOTE(paddle26-sparse-table): what 2.6.2's parameter server (distributed/ps/the_one_ps.py,
# MemorySparseTable) does with the table, read from its sources and the server description it
# builds for this program: the table lives on the servers only, sharded by id, as a
# MemorySparseTable with a SparseAccessor whose rule, SparseAdamSGDRule, takes the program's
# Adam (learning rate 1e-4, betas, epsilon) and, as its initial range, the Uniform initializer's
# bound (1.0); the accessor may zero-initialize the first of each row's 10 values ("embed_w", by
# ctr_accessor_param.zero_init) and clips all of them to [-10, 10]. An id's row is made at its first push
# (FLAGS_pserver_create_value_when_push, default true, a gflag not read from the environment):
# until a trainer has pushed a gradient for it, looking it up gives zeros. So the first steps see
# all-zero embeddings (first loss ~ ln 2) and an id's row then appears with random values, which
# the dense layers have to follow: over tens of steps the loss stays near ln 2 and the AUC near
# 0.5, where one process (and Fluid) learn; the speed is what this peer is for. The trainer
# program keeps no optimizer op: one distributed_lookup_table op pulls the 26 slots' rows, one
# distributed_push_sparse op pushes their gradients, and one send op pushes all dense gradients.
#
# NOTE(paddle26-distributed): ``paddle.static.nn.embedding(is_distributed=True)`` does not run on
# 2.6.2's parameter server: the_one_ps takes a table as sparse only where its lookup has
# ``remote_prefetch`` (public.py, get_param_grads), which embedding sets only for is_sparse and
# not is_distributed; so the table joins the dense parameters, its initializer is dropped from the
# trainer's startup program, and fleet.init_worker fails pushing it: "(PreconditionNotMet) Tensor
# not initialized yet when DenseTensor::place() is called" in push_dense_params. 2.6.2's own
# spelling of a distributed table is ``paddle.static.nn.sparse_embedding`` (lookup_table with
# is_distributed and remote_prefetch), which this variant uses. One process has no table to
# distribute (sparse_embedding's table cannot be looked up locally: "Input id (...) is not in
# current rows table"), so there CTR_DISTRIBUTED changes nothing.
import contextlib
import json
import os
import re
import sys
import tempfile
import time

# NOTE(paddle26-zlib): before paddle. With this Paddle 2.6.2 wheel, Python's zlib module first
# loaded after `import paddle` crashes in inflateReset2 (SIGSEGV) at its first use, and numpy.random's
# first import uses it: `python -c "import paddle, numpy as np; np.random.RandomState(1)"` dies,
# `python -c "import zlib, paddle, numpy as np; np.random.RandomState(1)"` does not.
import zlib  # noqa: F401

from ctr_data import DENSE, DIM, SLOTS, VOCAB, make_batches, write_multislot

N_BATCHES = 20  # a trainer's distinct batches, as ctr_fluid1.py feeds them


def env_int(name, default):
    return int(os.environ.get(name, default))


def ctr_dnn(paddle, is_distributed):
    """The model; returns (inputs in MultiSlot order, mean loss, global AUC)."""
    dense_input = paddle.static.data(name="dense_input", shape=[-1, DENSE], dtype="float32")
    sparse_ids = [paddle.static.data(name="C" + str(i), shape=[-1, 1], lod_level=1, dtype="int64")
                  for i in range(1, SLOTS + 1)]
    label = paddle.static.data(name="label", shape=[-1, 1], dtype="int64")

    def embedding_layer(ids):
        attr = paddle.ParamAttr(name="SparseFeatFactors", initializer=paddle.nn.initializer.Uniform())
        if is_distributed:  # NOTE(paddle26-distributed)
            emb = paddle.static.nn.sparse_embedding(input=ids, size=[VOCAB, DIM], param_attr=attr)
        else:
            emb = paddle.static.nn.embedding(input=ids, size=[VOCAB, DIM], is_sparse=True, param_attr=attr)
        pooled = paddle.static.nn.sequence_pool(input=emb, pool_type="sum")
        # embedding is lookup_table_v2, which keeps the ids' last dimension ([-1, 1] -> [-1, 1, 10];
        # Fluid 1.x's lookup_table dropped it)
        return paddle.reshape(pooled, [-1, DIM])

    concated = paddle.concat([embedding_layer(x) for x in sparse_ids] + [dense_input], axis=1)
    fc1 = paddle.static.nn.fc(concated, size=400, activation="relu")
    fc2 = paddle.static.nn.fc(fc1, size=400, activation="relu")
    fc3 = paddle.static.nn.fc(fc2, size=400, activation="relu")
    predict = paddle.static.nn.fc(fc3, size=2, activation="softmax")
    # fluid.layers.cross_entropy on probabilities: -log p[label]
    cost = paddle.nn.functional.cross_entropy(predict, label, use_softmax=False, reduction="none")
    avg_cost = paddle.mean(cost)
    auc_var, _, _ = paddle.static.auc(input=predict, label=label)
    return [dense_input] + sparse_ids + [label], avg_cost, auc_var


@contextlib.contextmanager
def output_into(path):
    """Send this process's fds 1 and 2 (C++ and Python alike) to ``path`` for the block; on an
    exception, copy the file's last lines to the real stderr."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    ok = False
    try:
        yield
        ok = True
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for i, old in enumerate(saved, 1):
            os.dup2(old, i)
            os.close(old)
        if not ok:
            with open(path) as f:
                sys.stderr.write("".join(f.readlines()[-40:]))


def fetched(path):
    """The ``(loss, auc)`` of each step from what train_from_dataset printed into ``path``, lines
    such as ``time: [...], batch: [3], loss[1]:[0.719853], auc[1]:[0.50854]`` (six significant
    digits)."""
    out = []
    with open(path) as f:
        for line in f:
            if "batch: [" not in line:
                continue
            vals = []
            for name in ("loss", "auc"):
                m = re.search(r"\b" + name + r"(?:\[\d+\])?:\s*\[?\s*(-?[\d.]+(?:e[-+]?\d+)?)", line)
                vals.append(float(m.group(1)) if m else float("nan"))
            out.append(tuple(vals))
    return out


def make_dataset(paddle, inputs, path, batch):
    ds = paddle.distributed.InMemoryDataset()
    ds.init(batch_size=batch, thread_num=1, use_var=inputs, pipe_command="cat")
    ds.set_filelist([path])
    ds.load_into_memory()
    return ds


def main():
    role = os.environ.get("TRAINING_ROLE")
    mode = os.environ.get("CTR_MODE", "async")
    steps, warmup, batch = env_int("CTR_STEPS", 60), env_int("CTR_WARMUP", 10), env_int("CTR_BATCH", 1000)
    if not 0 < warmup < steps:
        raise SystemExit(f"paddle26_ctr: need 0 < CTR_WARMUP < CTR_STEPS, got {warmup} and {steps}")
    trainer_id = env_int("PADDLE_TRAINER_ID", 0)
    with tempfile.TemporaryDirectory(prefix=f"ctr_data_{os.getpid()}_", dir=os.environ.get("CTR_DATA_DIR", ".")) as tmp:
        parts = {}
        if role != "PSERVER":
            # the data first, before Paddle starts (and before its datasets read them)
            batches = make_batches(trainer_id, N_BATCHES, batch)
            for part, order in (("warmup", range(warmup)), ("timed", range(warmup, steps))):
                parts[part] = os.path.join(tmp, f"{part}{trainer_id}.txt")
                write_multislot(parts[part], batches, [i % N_BATCHES for i in order])
            del batches
        train(role, mode, parts, steps - warmup, batch, trainer_id, tmp)


def train(role, mode, parts, timed, batch, trainer_id, tmp):
    """Build the model, take the role and train on the files ``parts`` (warmup, timed)."""
    import paddle

    paddle.enable_static()
    startup, main_prog = paddle.static.default_startup_program(), paddle.static.default_main_program()
    startup.random_seed = main_prog.random_seed = 1
    # one process has no distributed table to look up (NOTE(paddle26-distributed))
    inputs, avg_cost, auc_var = ctr_dnn(paddle, role is not None and os.environ.get("CTR_DISTRIBUTED") == "1")
    optimizer = paddle.optimizer.Adam(learning_rate=1e-4)
    exe = paddle.static.Executor(paddle.CPUPlace())
    datasets = {part: make_dataset(paddle, inputs, path, batch) for part, path in parts.items()}
    fleet = None
    if role is None:
        optimizer.minimize(avg_cost)
        exe.run(startup)
    else:
        from paddle.distributed import fleet
        from paddle.distributed.fleet.base.role_maker import PaddleCloudRoleMaker

        fleet.init(role_maker=PaddleCloudRoleMaker())
        strategy = fleet.DistributedStrategy()
        strategy.a_sync = mode == "async"
        fleet.distributed_optimizer(optimizer, strategy).minimize(avg_cost)
        # fleet's minimize rewrites clones of both programs for the role and makes them the
        # defaults: the ones taken above would train alone, on the trainer's own parameters
        startup, main_prog = paddle.static.default_startup_program(), paddle.static.default_main_program()
        if fleet.is_server():
            fleet.init_server()
            fleet.run_server()  # serves until stopped from outside (launch_peer.py)
            return
        exe.run(startup)
        fleet.init_worker()
        fleet.barrier_worker()  # both trainers start together (gloo; a no-op without it)

    results = {}
    for part in ("warmup", "timed"):
        log = os.path.join(tmp, f"{part}{trainer_id}.log")
        with output_into(log):
            t0, c0 = time.perf_counter(), time.process_time()
            exe.train_from_dataset(program=main_prog, dataset=datasets[part], fetch_list=[avg_cost, auc_var],
                                   fetch_info=["loss", "auc"], print_period=1, debug=False)
            results[part] = (time.perf_counter() - t0, time.process_time() - c0, fetched(log))
        datasets[part].release_memory()
    if fleet is not None:
        fleet.stop_worker()
    seconds, cpu, seen = results["timed"]
    if len(seen) != timed:
        raise RuntimeError(f"paddle26_ctr: train_from_dataset printed {len(seen)} timed steps, expected {timed}")
    print(json.dumps({"trainer": trainer_id, "examples_per_s": timed * batch / seconds,
                      "step_ms": 1000 * seconds / timed, "cpu_ms_per_step": 1000 * cpu / timed,
                      "first_loss": results["warmup"][2][0][0], "last_loss": seen[-1][0],
                      "auc": seen[-1][1], "kernel_ms_per_step": None}))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
