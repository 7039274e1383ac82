"""The LSTM sentiment classifier of Fluid 1.x's understand_sentiment chapter: word embeddings,
an fc to the LSTM's four gates, a dynamic_lstm, max-pooling over each sentence of both the fc
and the LSTM outputs, and a softmax fc over the classes; Adagrad. Run by
tests/test_paddle_programs.py (see _harness.py)."""
import sys

import paddle
import paddle.fluid as fluid

from _harness import train

# HID_DIM is no multiple of 8: there, Fluid 1.8.5's CPU lstm_grad takes an AVX path that gives
# only the output gate a gradient (tests/test_paddle_programs.py)
DICT_DIM, CLASS_DIM, EMB_DIM, HID_DIM = 300, 2, 16, 12


def lstm_net(data, label, input_dim, class_dim=2, emb_dim=128, hid_dim=128):
    emb = fluid.layers.embedding(input=data, size=[input_dim, emb_dim], is_sparse=True)
    fc1 = fluid.layers.fc(input=emb, size=hid_dim * 4)
    lstm1, cell1 = fluid.layers.dynamic_lstm(input=fc1, size=hid_dim * 4)
    fc_last = fluid.layers.sequence_pool(input=fc1, pool_type='max')
    lstm_last = fluid.layers.sequence_pool(input=lstm1, pool_type='max')
    prediction = fluid.layers.fc(input=[fc_last, lstm_last], size=class_dim, act='softmax')
    cost = fluid.layers.cross_entropy(input=prediction, label=label)
    avg_cost = fluid.layers.mean(cost)
    acc = fluid.layers.accuracy(input=prediction, label=label)
    return avg_cost, acc, prediction


if __name__ == '__main__':
    words = fluid.layers.data(name='words', shape=[1], dtype='int64', lod_level=1)
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    avg_cost, acc, prediction = lstm_net(words, label, DICT_DIM, CLASS_DIM, EMB_DIM, HID_DIM)
    train(fluid, avg_cost, ['words', 'label'], sys.argv[1], sys.argv[2],
          lambda: fluid.optimizer.Adagrad(learning_rate=0.05))
