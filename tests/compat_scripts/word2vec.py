"""The N-gram word-embedding model of Fluid 1.x's word2vec chapter: four context words share
one sparse embedding table, concat, a sigmoid fc and a softmax over the dictionary, trained
with SGD and L2 weight decay. Run by tests/test_paddle_programs.py (see _harness.py)."""
import sys

import paddle
import paddle.fluid as fluid

from _harness import train

DICT_SIZE, EMBED_SIZE, HIDDEN_SIZE = 200, 16, 64


def network(is_sparse=True):
    words = [fluid.layers.data(name=n, shape=[1], dtype='int64')
             for n in ('firstw', 'secondw', 'thirdw', 'fourthw')]
    next_word = fluid.layers.data(name='nextw', shape=[1], dtype='int64')
    embeds = [fluid.layers.embedding(input=w, size=[DICT_SIZE, EMBED_SIZE], dtype='float32',
                                     is_sparse=is_sparse, param_attr='shared_w') for w in words]
    concat_embed = fluid.layers.concat(input=embeds, axis=1)
    hidden1 = fluid.layers.fc(input=concat_embed, size=HIDDEN_SIZE, act='sigmoid')
    predict_word = fluid.layers.fc(input=hidden1, size=DICT_SIZE, act='softmax')
    cost = fluid.layers.cross_entropy(input=predict_word, label=next_word)
    return fluid.layers.mean(cost)


if __name__ == '__main__':
    avg_cost = network()
    train(fluid, avg_cost, ['firstw', 'secondw', 'thirdw', 'fourthw', 'nextw'], sys.argv[1], sys.argv[2],
          lambda: fluid.optimizer.SGD(learning_rate=0.5, regularization=fluid.regularizer.L2Decay(1e-3)))
