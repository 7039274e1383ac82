"""A small image classifier with dropout (conv-pool, conv-pool, dropout, softmax fc), trained
with Momentum. Dropout's masks are drawn per example, so two trainers on halves of each batch
train exactly as one process on the whole batch. Run by tests/test_paddle_programs.py."""
import sys

import paddle
import paddle.fluid as fluid

from _harness import train


def network():
    img = fluid.layers.data(name='img', shape=[1, 16, 16], dtype='float32')
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    h = fluid.nets.simple_img_conv_pool(input=img, filter_size=3, num_filters=8, pool_size=2, pool_stride=2,
                                        act='relu')
    h = fluid.nets.simple_img_conv_pool(input=h, filter_size=3, num_filters=16, pool_size=2, pool_stride=2,
                                        act='relu')
    h = fluid.layers.dropout(h, dropout_prob=0.3)
    prediction = fluid.layers.fc(input=h, size=10, act='softmax')
    return fluid.layers.mean(fluid.layers.cross_entropy(input=prediction, label=label))


if __name__ == '__main__':
    avg_loss = network()
    train(fluid, avg_loss, ['img', 'label'], sys.argv[1], sys.argv[2],
          lambda: fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9))
