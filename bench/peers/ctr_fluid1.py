"""A CTR DNN written as a Fluid 1.x user writes it; bench_ctr.py runs it unchanged under
placegroup (``placegroup run``) and under Fluid 1.8.5.

    dense_input [13] + C1..C26 (lod_level=1 int64 ids, 1 + Poisson(4) per example and slot)
    each slot -> embedding "SparseFeatFactors" [1,000,000 x 10], is_sparse=True (one table,
                 shared by the 26 lookups) -> sequence_pool(sum)
    concat(26 x 10 + 13) -> fc(400, relu) -> fc(400, relu) -> fc(400, relu) -> fc(2, softmax)
    -> cross_entropy -> mean -> Adam(1e-4);  metric: fluid.layers.auc

The role comes from the environment, as Paddle's launchers give it: ``TRAINING_ROLE``
(TRAINER or PSERVER; unset: one process), ``PADDLE_PSERVERS_IP_PORT_LIST``,
``PADDLE_CURRENT_ENDPOINT`` (a pserver's own), ``PADDLE_TRAINERS_NUM``, ``PADDLE_TRAINER_ID``.
``CTR_MODE`` is ``sync`` (default) or ``async``: Fluid 1.8's async mode with its communicator,
as fleet's AsyncStrategy sets it up (``sync_mode = False``, then ``runtime_split_send_recv =
True``; the trainer starts ``fluid.communicator.Communicator(program, DistributedMode.ASYNC,
None, flags)`` with fleet's default flags, whose threads send the gradients and receive the
parameters). ``CTR_DISTRIBUTED=1`` makes the table ``is_distributed`` (looked up by prefetch from
the pservers; Fluid 1.8.5 needs ``fix_fluid185_distributed_table`` to transpile it, and trains
such a table with SGD whatever the optimizer: "distribute lookup table only support sgd
optimizer"). ``CTR_STEPS``, ``CTR_WARMUP``, ``CTR_BATCH`` size the run; ``CTR_PROFILE=1`` times
the ops of a one-process run with ``fluid.profiler``.

The data are synthetic, made from the trainer id by bench/peers/ctr_data.py (numpy only, shared
with the Paddle 2.6.2 peer), so every framework trains on the same batches: ids
``(zipf(1.1) * 2654435761) % 1,000,000``, a click drawn from the sigmoid of the ids' hidden
weights plus two dense features. A trainer prints one JSON line: examples per second over the
timed steps, the first and last loss, the AUC, and (with CTR_PROFILE) the ops' own time per step.
A pserver whose ``exe.run(pserver_prog)`` returns (placegroup's do when the trainers finish;
Fluid 1.8.5's serve until stopped, so print nothing) prints one too: the process CPU seconds,
all threads, spent in that call (every step, warm-up included), and ``CTR_STEPS``.
"""
from __future__ import print_function

import json
import os
import sys
import time

import numpy as np
import paddle.fluid as fluid

from ctr_data import DENSE, DIM, SLOTS, VOCAB, make_batches


def env_int(name, default):
    return int(os.environ.get(name, default))


def ctr_dnn(is_distributed):
    dense_input = fluid.layers.data(name="dense_input", shape=[DENSE], dtype="float32")
    sparse_ids = [fluid.layers.data(name="C" + str(i), shape=[1], lod_level=1, dtype="int64")
                  for i in range(1, SLOTS + 1)]
    label = fluid.layers.data(name="label", shape=[1], dtype="int64")

    def embedding_layer(ids):
        emb = fluid.layers.embedding(
            input=ids, size=[VOCAB, DIM], is_sparse=True, is_distributed=is_distributed,
            param_attr=fluid.ParamAttr(name="SparseFeatFactors",
                                       initializer=fluid.initializer.Uniform()))
        return fluid.layers.sequence_pool(input=emb, pool_type="sum")

    concated = fluid.layers.concat([embedding_layer(x) for x in sparse_ids] + [dense_input], axis=1)
    fc1 = fluid.layers.fc(input=concated, size=400, act="relu")
    fc2 = fluid.layers.fc(input=fc1, size=400, act="relu")
    fc3 = fluid.layers.fc(input=fc2, size=400, act="relu")
    predict = fluid.layers.fc(input=fc3, size=2, act="softmax")
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.reduce_mean(cost)
    auc_var, _, _ = fluid.layers.auc(input=predict, label=label)
    return [dense_input] + sparse_ids + [label], avg_cost, auc_var


def feeds(batches, place):
    out = []
    for dense, slots, lens, click in batches:
        feed = {"dense_input": dense, "label": click}
        for s in range(SLOTS):
            feed["C" + str(s + 1)] = fluid.create_lod_tensor(slots[s], [lens[s]], place)
        out.append(feed)
    return out


class _LookupTableTypes(list):
    """A list of op types that also equals each of its members (``"lookup_table" == types``)."""

    def __eq__(self, other):
        return other in self if isinstance(other, str) else list.__eq__(self, other)

    __hash__ = None


def fix_fluid185_distributed_table():
    """Fluid 1.8.5's DistributeTranspiler finds the lookups of an ``is_distributed`` table with
    ``op.type == LOOKUP_TABLE_TYPE`` where that constant is a list (["lookup_table",
    "lookup_table_v2"]), so it finds none and fails with ``IndexError: list index out of range``
    in ``_replace_lookup_table_op_with_prefetch``; fleet's transpiler mode runs the same code.
    Make the list equal its members; a framework without that list is left alone."""
    from paddle.fluid.transpiler import distribute_transpiler
    types = getattr(distribute_transpiler, "LOOKUP_TABLE_TYPE", None)
    if type(types) is list:
        distribute_transpiler.LOOKUP_TABLE_TYPE = _LookupTableTypes(types)


def main():
    role = os.environ.get("TRAINING_ROLE")
    mode = os.environ.get("CTR_MODE", "sync")
    steps, warmup, batch = env_int("CTR_STEPS", 60), env_int("CTR_WARMUP", 10), env_int("CTR_BATCH", 1000)
    startup, main_prog = fluid.default_startup_program(), fluid.default_main_program()
    startup.random_seed = main_prog.random_seed = 1
    _, avg_cost, auc_var = ctr_dnn(os.environ.get("CTR_DISTRIBUTED") == "1")
    fluid.optimizer.Adam(learning_rate=1e-4).minimize(avg_cost)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    trainer_id = env_int("PADDLE_TRAINER_ID", 0)
    prog = main_prog
    communicator = None
    if role is None:
        exe.run(startup)
    else:
        if os.environ.get("CTR_DISTRIBUTED") == "1":
            fix_fluid185_distributed_table()
        config = fluid.DistributeTranspilerConfig()
        if mode == "async":  # Fluid 1.8 refuses runtime_split_send_recv while sync_mode is True
            config.sync_mode = False
            config.runtime_split_send_recv = True
        t = fluid.DistributeTranspiler(config=config)
        t.transpile(trainer_id, pservers=os.environ["PADDLE_PSERVERS_IP_PORT_LIST"],
                    trainers=env_int("PADDLE_TRAINERS_NUM", 1), sync_mode=mode == "sync")
        if role == "PSERVER":
            endpoint = os.environ["PADDLE_CURRENT_ENDPOINT"]
            pserver_prog = t.get_pserver_program(endpoint)
            exe.run(t.get_startup_program(endpoint, pserver_prog))
            c0 = time.process_time()
            exe.run(pserver_prog)  # serves until the trainers are done (Fluid's: until stopped)
            # one JSON line: the CPU (all threads) spent serving; bench_ctr_scaling.py reads it
            index = os.environ["PADDLE_PSERVERS_IP_PORT_LIST"].split(",").index(endpoint)
            print(json.dumps({"pserver": index,
                              "endpoint": endpoint, "cpu_s": time.process_time() - c0,
                              "steps": steps, "trainers": env_int("PADDLE_TRAINERS_NUM", 1)}))
            sys.stdout.flush()
            return
        prog = t.get_trainer_program()
        exe.run(startup)
        if mode == "async":
            # what fleet's init_worker does for an AsyncStrategy: the communicator's threads send
            # the gradients and receive the parameters; its flags are fleet's defaults
            from paddle.fluid.communicator import Communicator, DistributedMode
            from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy import (
                TrainerRuntimeConfig,
            )
            communicator = Communicator(prog, DistributedMode.ASYNC, None,
                                        TrainerRuntimeConfig().get_communicator_flags())
            communicator.start()

    data = feeds(make_batches(trainer_id, 20, batch), place)
    profile = role is None and os.environ.get("CTR_PROFILE") == "1"
    losses = []
    for i in range(steps):
        if i == warmup:
            t0, c0 = time.time(), time.process_time()
            if profile:
                fluid.profiler.start_profiler("CPU")
        loss, auc = exe.run(prog, feed=data[i % len(data)], fetch_list=[avg_cost, auc_var])
        losses.append(float(np.array(loss).ravel()[0]))
    seconds, cpu = time.time() - t0, time.process_time() - c0
    kernel_ms = None
    if profile:
        kernel_ms = ops_ms_per_step(steps - warmup)
    if communicator is not None:
        communicator.stop()
    timed = steps - warmup
    print(json.dumps({"trainer": trainer_id, "examples_per_s": timed * batch / seconds,
                      "step_ms": 1000 * seconds / timed, "cpu_ms_per_step": 1000 * cpu / timed,
                      "first_loss": losses[0], "last_loss": losses[-1],
                      "auc": float(np.array(auc).ravel()[0]), "kernel_ms_per_step": kernel_ms}))
    sys.stdout.flush()
    if role is not None:
        exe.close()


def ops_ms_per_step(steps):
    """The ops' own time per step, read from the table ``fluid.profiler.stop_profiler`` prints.
    Fluid's C++ prints it to file descriptor 1 (columns ``Event Calls Total(ms) ...``), and
    placegroup's Python to sys.stdout (columns ``op calls us/call ...``), so fd 1 is pointed
    at a file while it prints."""
    import tempfile
    path = os.environ.get("CTR_PROFILE_PATH", os.path.join(tempfile.gettempdir(), "ctr_profile_%d" % os.getpid()))
    with tempfile.TemporaryFile(mode="w+") as out:
        sys.stdout.flush()
        saved = os.dup(1)
        os.dup2(out.fileno(), 1)
        try:
            fluid.profiler.stop_profiler("total", path)
            sys.stdout.flush()
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        out.seek(0)
        text = out.read()
    fluid_table = "Event" in text
    total = 0.0
    for line in text.splitlines():
        cols = line.split()
        if len(cols) < 4 or cols[0].startswith("("):  # placegroup's (between steps) rows are no op
            continue
        calls = cols[1].replace(",", "")
        if not calls.isdigit():
            continue
        try:
            total += float(cols[2]) if fluid_table else int(calls) * float(cols[2]) / 1000.0
        except ValueError:
            continue
    return total / steps


if __name__ == "__main__":
    main()
