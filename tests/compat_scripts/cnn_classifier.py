"""An image classifier as Fluid 1.x's MNIST chapter writes it (two conv-pool blocks, a
batch_norm between them, a softmax fc), trained with Adam. Run by tests/test_paddle_programs.py:
``placegroup run cnn_classifier.py DATA.npz OUT.npz`` (see _harness.py)."""
import sys

import paddle
import paddle.fluid as fluid

from _harness import train


def network():
    img = fluid.layers.data(name='img', shape=[1, 16, 16], dtype='float32')
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    conv_pool_1 = fluid.nets.simple_img_conv_pool(
        input=img, filter_size=5, num_filters=8, pool_size=2, pool_stride=2, act='relu')
    conv_pool_1 = fluid.layers.batch_norm(conv_pool_1)
    conv_pool_2 = fluid.nets.simple_img_conv_pool(
        input=conv_pool_1, filter_size=3, num_filters=16, pool_size=2, pool_stride=2, act='relu')
    prediction = fluid.layers.fc(input=conv_pool_2, size=10, act='softmax')
    loss = fluid.layers.cross_entropy(input=prediction, label=label)
    return fluid.layers.mean(loss)


if __name__ == '__main__':
    avg_loss = network()
    train(fluid, avg_loss, ['img', 'label'], sys.argv[1], sys.argv[2],
          lambda: fluid.optimizer.Adam(learning_rate=0.001))
