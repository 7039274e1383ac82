"""An MLP classifier trained with Momentum, L2 weight decay and global-norm gradient clipping,
then exported with save_inference_model, loaded back into a fresh scope and used to predict.
Run by tests/test_paddle_programs.py (see _harness.py)."""
import sys
import tempfile

import numpy as np
import paddle
import paddle.fluid as fluid

from _harness import train


def network():
    x = fluid.layers.data(name='x', shape=[20], dtype='float32')
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    h = fluid.layers.fc(input=x, size=32, act='relu')
    h = fluid.layers.fc(input=h, size=32, act='tanh')
    prediction = fluid.layers.fc(input=h, size=4, act='softmax')
    loss = fluid.layers.mean(fluid.layers.cross_entropy(input=prediction, label=label))
    return loss, prediction


def predict(prediction):
    def run(exe, data):
        with tempfile.TemporaryDirectory() as d:
            fluid.io.save_inference_model(d, ['x'], [prediction], exe)
            with fluid.scope_guard(fluid.Scope()):
                program, feed_names, targets = fluid.io.load_inference_model(d, exe)
                out, = exe.run(program, feed={feed_names[0]: data['test_x']}, fetch_list=targets)
        return {'predict': np.asarray(out)}
    return run


if __name__ == '__main__':
    avg_loss, prediction = network()
    train(fluid, avg_loss, ['x', 'label'], sys.argv[1], sys.argv[2],
          lambda: fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9,
                                           regularization=fluid.regularizer.L2Decay(1e-3),
                                           grad_clip=fluid.clip.GradientClipByGlobalNorm(clip_norm=0.5)),
          extra=predict(prediction))
