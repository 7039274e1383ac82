"""A classifier trained the way Fluid 1.x's book chapters and distributed tests write it: the
transpiler rewrites the default programs in place, and the trainer then runs
``fluid.default_main_program()`` (and, every other step, ``exe.run(feed=..., fetch_list=...)``
with no program at all), and evaluates a ``clone(for_test=True)`` taken before ``minimize`` on
the parameters it holds. The pserver runs ``get_pserver_program`` and the startup program
``get_startup_program(endpoint, pserver_program)`` gives it.

Run by tests/test_in_place_transpile.py as ``placegroup run SCRIPT DATA.npz OUT.npz [pe]`` and
under ``placegroup launch --paddle-compat`` (see _harness.py for DATA and OUT). With ``pe``, the
trainer trains with a ``fluid.ParallelExecutor`` over the default main program, a second
executor beside the one that ran the startup program, as PaddlePaddle/models' CTR scripts do. OUT also holds
``test_loss``: the for-test clone's loss on DATA's ``test_x``/``test_label`` after each step.
At the end the script (each trainer, or the one process) calls ``fluid.save`` on the default main
program into ``OUT.model`` (``OUT.trainer<ID>.npz.model`` for a trainer).
In one process, the parameters start from DATA's ``init/<name>`` where it has them.
"""
import os
import sys

import numpy as np
import paddle.fluid as fluid

from _harness import batches, role


def network():
    x = fluid.layers.data(name='x', shape=[20], dtype='float32')
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    h = fluid.layers.fc(input=x, size=32, act='relu', bias_attr=True)
    prediction = fluid.layers.fc(input=h, size=4, act='softmax')
    return fluid.layers.mean(fluid.layers.cross_entropy(input=prediction, label=label))


def main(data_path, out_path, parallel=False):
    data = np.load(data_path)
    avg_cost = network()
    test_program = fluid.default_main_program().clone(for_test=True)
    fluid.optimizer.Adam(learning_rate=0.01).minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    r, trainer_id, trainers, endpoint = role()
    if r is not None:
        config = fluid.DistributeTranspilerConfig()
        config.slice_var_up = True
        config.min_block_size = 64  # cut the first weight into blocks over both pservers
        t = fluid.DistributeTranspiler(config=config)
        t.transpile(trainer_id, pservers=os.getenv('PADDLE_INIT_PSERVERS'), trainers=trainers)
        if r == 'PSERVER':
            pserver_prog = t.get_pserver_program(endpoint)
            exe.run(t.get_startup_program(endpoint, pserver_prog))
            exe.run(pserver_prog)
            return
    exe.run(fluid.default_startup_program())
    init = {}
    for p in (fluid.default_main_program().all_parameters() if r is None else ()):  # trainers: pservers hold them
        key = 'init/' + p.name
        if key in data.files:
            fluid.global_scope().find_var(p.name).get_tensor().set(data[key], place)
        init[key] = np.array(fluid.global_scope().find_var(p.name).get_tensor())
    test_feed = {'x': data['test_x'], 'label': data['test_label']}
    losses, test_losses = [], []
    for step, feed in enumerate(batches(fluid, data, ['x', 'label'], place, trainer_id, trainers)):
        if parallel:
            if step == 0:
                pe = fluid.ParallelExecutor(use_cuda=False, loss_name=avg_cost.name,
                                            main_program=fluid.default_main_program())
            loss, = pe.run(fetch_list=[avg_cost.name], feed=feed)
        elif step % 2 == 0:
            loss, = exe.run(fluid.default_main_program(), feed=feed, fetch_list=[avg_cost])
        else:
            loss, = exe.run(feed=feed, fetch_list=[avg_cost.name])
        test_loss, = exe.run(test_program, feed=test_feed, fetch_list=[avg_cost])
        losses.append(float(np.asarray(loss).reshape(-1)[0]))
        test_losses.append(float(np.asarray(test_loss).reshape(-1)[0]))
    out = out_path if r is None else '%s.trainer%d.npz' % (out_path, trainer_id)
    np.savez(out, loss=np.array(losses), test_loss=np.array(test_losses), **init)
    fluid.save(fluid.default_main_program(), out + '.model')  # a trainer: the parameters it holds
    if r is not None:
        exe.close()


if __name__ == '__main__':
    main(sys.argv[1], sys.argv[2], sys.argv[3:] == ['pe'])
