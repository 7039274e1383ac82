"""The CTR DNN of Fluid 1.x's click-through-rate models (PaddleRec ctr-dnn): eight sparse id
slots, each a sequence of ids, share one sparse embedding table; each slot's embeddings are
summed, concatenated with the dense features, and go through three relu fc layers and a
softmax over click / no click; Adam, with the AUC computed beside the loss. Run by
tests/test_paddle_programs.py (see _harness.py)."""
import math
import sys

import paddle
import paddle.fluid as fluid

from _harness import train

SLOTS, SPARSE_DIM, EMBED_SIZE, DENSE_DIM = 8, 1000, 8, 13
LAYER_SIZES = [64, 32, 16]


def network():
    dense_input = fluid.layers.data(name='dense_input', shape=[DENSE_DIM], dtype='float32')
    sparse_inputs = [fluid.layers.data(name='C' + str(i), shape=[1], lod_level=1, dtype='int64')
                     for i in range(1, SLOTS + 1)]
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')

    def embedding_layer(input):
        emb = fluid.layers.embedding(
            input=input, is_sparse=True, size=[SPARSE_DIM, EMBED_SIZE],
            param_attr=fluid.ParamAttr(name='SparseFeatFactors',
                                       initializer=fluid.initializer.Uniform()))
        return fluid.layers.sequence_pool(input=emb, pool_type='sum')

    sparse_embed_seq = list(map(embedding_layer, sparse_inputs))
    concated = fluid.layers.concat(sparse_embed_seq + [dense_input], axis=1)
    hidden = concated
    for size in LAYER_SIZES:
        hidden = fluid.layers.fc(
            input=hidden, size=size, act='relu',
            param_attr=fluid.ParamAttr(initializer=fluid.initializer.Normal(
                scale=1 / math.sqrt(hidden.shape[1]))))
    predict = fluid.layers.fc(
        input=hidden, size=2, act='softmax',
        param_attr=fluid.ParamAttr(initializer=fluid.initializer.Normal(
            scale=1 / math.sqrt(hidden.shape[1]))))
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.mean(x=cost)
    auc_var, batch_auc_var, auc_states = fluid.layers.auc(
        input=predict, label=label, num_thresholds=2 ** 12, slide_steps=20)
    return avg_cost, auc_var


if __name__ == '__main__':
    avg_cost, auc_var = network()
    feeds = ['dense_input'] + ['C' + str(i) for i in range(1, SLOTS + 1)] + ['label']
    train(fluid, avg_cost, feeds, sys.argv[1], sys.argv[2],
          lambda: fluid.optimizer.Adam(learning_rate=1e-3))
