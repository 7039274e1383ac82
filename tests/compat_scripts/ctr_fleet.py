"""A PaddleRec-style CTR job written for Fluid 1.8's fleet (parameter-server mode): four sparse id
slots, each a sequence of ids, share one sparse embedding table (is_sparse=True); each slot's
embeddings are summed, concatenated with the dense features and go through a relu fc layer and
a softmax over click / no click; Adam. Run by tests/test_fleet.py (see _harness.py).

``python ctr_fleet.py DATA.npz OUT.npz [sync|async] [fixed|grown|clicked]``: ``grown`` makes the
table with Paddle 2.x's ``paddle.static.nn.sparse_embedding`` (keyed by raw ids, a row after two
sightings) instead of Fluid's ``embedding``, as a 2.x-era CTR job on fleet writes it; ``clicked``
with Paddle 2.0's ``fluid.contrib.layers.sparse_embedding``, a Normal initializer and a
``ShowClickEntry`` naming computed show and click vars (a show of 1 per example, the label as the
click), as PaddleRec's slot DNN does. Launched (TRAINING_ROLE set), it uses
fleet: PaddleCloudRoleMaker, the strategy named by the third argument, init_server/run_server
on a pserver, init_worker / fleet.main_program / stop_worker on a trainer, and trainer 0 saves
the inference model with fleet.save_inference_model. Alone (no TRAINING_ROLE: Fluid's fleet has
no one-process mode), it trains the same model without fleet, as PaddleRec's local runs do.
Either way it writes its losses, and the predictions of the saved model on the first batch, to
OUT (a trainer: OUT.trainer<ID>.npz).
"""
import os
import sys

import numpy as np
import paddle
import paddle.fluid as fluid
from paddle.fluid.incubate.fleet.base import role_maker
from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler import fleet
from paddle.fluid.incubate.fleet.parameter_server.distribute_transpiler.distributed_strategy import StrategyFactory

from _harness import batches

SLOTS, SPARSE_DIM, EMBED_SIZE, DENSE_DIM = 4, 100, 8, 5
FEEDS = ['dense_input'] + ['C%d' % i for i in range(1, SLOTS + 1)] + ['label']


def network(table='fixed'):
    dense_input = fluid.layers.data(name='dense_input', shape=[DENSE_DIM], dtype='float32')
    sparse_inputs = [fluid.layers.data(name='C%d' % i, shape=[1], lod_level=1, dtype='int64')
                     for i in range(1, SLOTS + 1)]
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    attr = fluid.ParamAttr(name='SparseFeatFactors', initializer=fluid.initializer.Uniform())
    if table == 'grown':
        entry = paddle.distributed.CountFilterEntry(count_filter=2)
        embs = [paddle.static.nn.sparse_embedding(input=ids, size=[SPARSE_DIM, EMBED_SIZE], entry=entry,
                                                  param_attr=attr) for ids in sparse_inputs]
    elif table == 'clicked':
        show = fluid.layers.fill_constant_batch_size_like(input=label, shape=[-1, 1], dtype='float32', value=1.0)
        click = fluid.layers.cast(label, 'float32')
        entry = paddle.distributed.ShowClickEntry(show.name, click.name)
        attr = fluid.ParamAttr(name='SparseFeatFactors', initializer=fluid.initializer.Normal(scale=0.1))
        embs = [fluid.contrib.layers.sparse_embedding(input=ids, size=[SPARSE_DIM, EMBED_SIZE], entry=entry,
                                                      param_attr=attr) for ids in sparse_inputs]
    else:
        embs = [fluid.layers.embedding(input=ids, is_sparse=True, size=[SPARSE_DIM, EMBED_SIZE], param_attr=attr)
                for ids in sparse_inputs]
    pooled = [fluid.layers.sequence_pool(input=emb, pool_type='sum') for emb in embs]
    hidden = fluid.layers.fc(input=fluid.layers.concat(pooled + [dense_input], axis=1), size=16, act='relu')
    predict = fluid.layers.fc(input=hidden, size=2, act='softmax')
    avg_cost = fluid.layers.mean(x=fluid.layers.cross_entropy(input=predict, label=label))
    return avg_cost, predict


def train(exe, program, loss, data, place, tid, n):
    losses = []
    for step, feed in enumerate(batches(fluid, data, FEEDS, place, tid, n)):
        loss_v, = exe.run(program, feed=feed, fetch_list=[loss])
        losses.append(float(np.asarray(loss_v).reshape(-1)[0]))
        print('step %d loss %.6f' % (step, losses[-1]))
    return np.array(losses)


def predict_saved(dirname, data, place):
    """The saved inference model's predictions on the first batch, in a scope of its own."""
    exe = fluid.Executor(place)
    with fluid.scope_guard(fluid.Scope()):
        program, feed_names, fetches = fluid.io.load_inference_model(dirname, exe)
        feed = next(batches(fluid, data, FEEDS, place))
        out, = exe.run(program, feed={k: feed[k] for k in feed_names}, fetch_list=fetches)
    return np.asarray(out)


def main(data_path, out_path, mode='sync', table='fixed'):
    data = np.load(data_path)
    place = fluid.CPUPlace()
    loss, predict = network(table)
    model_dir = out_path + '.model'
    if os.getenv('TRAINING_ROLE') is None:
        fluid.optimizer.Adam(learning_rate=0.01).minimize(loss)
        exe = fluid.Executor(place)
        exe.run(fluid.default_startup_program())
        init = {}
        for p in fluid.default_main_program().all_parameters():
            if table != 'fixed' and p.name == 'SparseFeatFactors':  # rows made as ids come: none to set
                continue
            if 'init/' + p.name in data.files:
                fluid.global_scope().find_var(p.name).get_tensor().set(data['init/' + p.name], place)
            init['init/' + p.name] = np.array(fluid.global_scope().find_var(p.name).get_tensor())
        losses = train(exe, fluid.default_main_program(), loss, data, place, 0, 1)
        fluid.io.save_inference_model(model_dir, FEEDS[:-1], [predict], exe)
        np.savez(out_path, loss=losses, predict=predict_saved(model_dir, data, place), **init)
        return
    fleet.init(role_maker.PaddleCloudRoleMaker())
    strategy = (StrategyFactory.create_sync_strategy() if mode == 'sync'
                else StrategyFactory.create_async_strategy())
    optimizer = fleet.distributed_optimizer(fluid.optimizer.Adam(learning_rate=0.01), strategy)
    optimizer.minimize(loss)
    if fleet.is_server():
        fleet.init_server()
        fleet.run_server()
        return
    fleet.init_worker()
    exe = fluid.Executor(place)
    exe.run(fleet.startup_program)
    losses = train(exe, fleet.main_program, loss, data, place, fleet.worker_index(), fleet.worker_num())
    result = {'loss': losses}
    if fleet.is_first_worker():
        fleet.save_inference_model(exe, model_dir, FEEDS[:-1], [predict])
        result['predict'] = predict_saved(model_dir, data, place)
    fleet.stop_worker()
    np.savez('%s.trainer%d.npz' % (out_path, fleet.worker_index()), **result)


if __name__ == '__main__':
    main(*sys.argv[1:])
