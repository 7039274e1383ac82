"""GRU4Rec, session-based recommendation as Fluid 1.x's models repo trains it: each session is
a sequence of item ids; embedding, an fc to the GRU's three gates, a dynamic_gru, and at every
position a softmax over the items predicting the next one; the cost is the mean over all
positions of all sessions; Adagrad, with per-parameter learning rates. Run by
tests/test_paddle_programs.py (see _harness.py)."""
import sys

import paddle
import paddle.fluid as fluid

from _harness import train

VOCAB_SIZE, HID_SIZE = 100, 16
INIT_LOW_BOUND, INIT_HIGH_BOUND = -0.1, 0.1
EMB_LR_X, GRU_LR_X, FC_LR_X = 10.0, 1.0, 1.0


def network(vocab_size, hid_size, init_low_bound, init_high_bound):
    src_wordseq = fluid.layers.data(name='src_wordseq', shape=[1], dtype='int64', lod_level=1)
    dst_wordseq = fluid.layers.data(name='dst_wordseq', shape=[1], dtype='int64', lod_level=1)
    emb = fluid.layers.embedding(
        input=src_wordseq, size=[vocab_size, hid_size], is_sparse=True,
        param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Uniform(low=init_low_bound, high=init_high_bound),
            learning_rate=EMB_LR_X))
    fc0 = fluid.layers.fc(
        input=emb, size=hid_size * 3,
        param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Uniform(low=init_low_bound, high=init_high_bound),
            learning_rate=GRU_LR_X))
    gru_h0 = fluid.layers.dynamic_gru(
        input=fc0, size=hid_size,
        param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Uniform(low=init_low_bound, high=init_high_bound),
            learning_rate=GRU_LR_X))
    fc = fluid.layers.fc(
        input=gru_h0, size=vocab_size, act='softmax',
        param_attr=fluid.ParamAttr(
            initializer=fluid.initializer.Uniform(low=init_low_bound, high=init_high_bound),
            learning_rate=FC_LR_X))
    cost = fluid.layers.cross_entropy(input=fc, label=dst_wordseq)
    acc = fluid.layers.accuracy(input=fc, label=dst_wordseq, k=20)
    avg_cost = fluid.layers.mean(x=cost)
    return avg_cost, acc


if __name__ == '__main__':
    avg_cost, acc = network(VOCAB_SIZE, HID_SIZE, INIT_LOW_BOUND, INIT_HIGH_BOUND)
    train(fluid, avg_cost, ['src_wordseq', 'dst_wordseq'], sys.argv[1], sys.argv[2],
          lambda: fluid.optimizer.Adagrad(learning_rate=0.01))
