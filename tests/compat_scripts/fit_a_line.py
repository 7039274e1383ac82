"""Fluid 1.x's classic fit_a_line, written as a Paddle 1.x user would (``import paddle.fluid``).

Run by tests/test_compat.py under ``placegroup run`` and ``placegroup launch --paddle-compat``:
it must run unchanged. Its data are synthetic (a fixed linear map plus noise), made here, so
nothing is read or downloaded. It prints ``pass P step S loss L`` per step. Under a launcher's
environment (TRAINING_ROLE, PADDLE_INIT_PSERVERS, ...) it transpiles and trains distributed,
each trainer taking its contiguous share of every batch.
"""
from __future__ import print_function

import os
import random
import sys

import numpy as np
import paddle
import paddle.fluid as fluid


def synthetic_housing(n=64, seed=0):
    rng = np.random.RandomState(seed)
    xs = rng.uniform(-1, 1, size=(n, 13)).astype('float32')
    ys = (xs.dot(rng.uniform(-1, 1, size=(13, 1))) + 0.5 + 0.01 * rng.randn(n, 1)).astype('float32')

    def reader():
        for x, y in zip(xs, ys):
            yield x, y
    return reader


def main(passes):
    random.seed(1)  # paddle.reader.shuffle draws from Python's random
    train_reader = paddle.batch(paddle.reader.shuffle(synthetic_housing(), buf_size=500), batch_size=8)

    x = fluid.layers.data(name='x', shape=[13], dtype='float32')
    y = fluid.layers.data(name='y', shape=[1], dtype='float32')
    y_predict = fluid.layers.fc(input=x, size=1, act=None)
    cost = fluid.layers.square_error_cost(input=y_predict, label=y)
    avg_cost = fluid.layers.mean(cost)
    sgd_optimizer = fluid.optimizer.SGD(learning_rate=0.05)
    sgd_optimizer.minimize(avg_cost)

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    feeder = fluid.DataFeeder(place=place, feed_list=[x, y])
    role = os.getenv('TRAINING_ROLE')
    prog, trainer_id, trainers = fluid.default_main_program(), 0, 1
    if role is None:
        exe.run(fluid.default_startup_program())
    else:
        endpoint = os.getenv('POD_IP') + ':' + os.getenv('PADDLE_INIT_PORT')
        t = fluid.DistributeTranspiler()
        trainers = int(os.getenv('PADDLE_INIT_TRAINERS'))
        trainer_id = int(os.getenv('PADDLE_TRAINER_ID', '0'))
        t.transpile(trainer_id, pservers=os.getenv('PADDLE_INIT_PSERVERS'), trainers=trainers)
        prog = t.get_program(endpoint, role)
        exe.run(t.get_startup_program(endpoint, role))
        if role == 'PSERVER':
            exe.run(prog)
            print('pserver done')
            return
    for pass_id in range(passes):
        for step, data in enumerate(train_reader()):
            data = data[trainer_id * len(data) // trainers:(trainer_id + 1) * len(data) // trainers]
            loss, = exe.run(prog, feed=feeder.feed(data), fetch_list=[avg_cost])
            print('pass %d step %d loss %.6f' % (pass_id, step, float(loss[0])))
    if role is not None:
        exe.close()


if __name__ == '__main__':
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
