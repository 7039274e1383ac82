"""Sequence semantic retrieval as Fluid 1.5's models repo trains it, written against Fluid 1.5's
module paths: a GRU over the user's click sequence (``fluid.layers.nn.dynamic_gru``, which
Fluid 1.8 moved to ``fluid.layers.rnn``), bag-of-words item encoders, cosines of user to positive
and negative item, a pairwise hinge loss; Adagrad. The layers come from the modules
(``paddle.fluid.layers.nn``, ``.tensor``, ``.control_flow``), not from ``fluid.layers``. Run by
tests/test_paddle_programs.py (see _harness.py); Fluid 1.8.5 runs it with the one moved path
rewritten to 1.8's.
"""
import sys

import paddle.fluid as fluid
import paddle.fluid.layers.control_flow as cf
import paddle.fluid.layers.nn as nn
import paddle.fluid.layers.tensor as tensor

from _harness import train

VOCAB, EMB_DIM, HIDDEN, MARGIN = 100, 16, 12, 0.8


def user_encoder(emb):
    gates = nn.fc(input=emb, size=HIDDEN * 3, param_attr="grnn_fc.w", bias_attr=False)
    hidden = nn.dynamic_gru(input=gates, size=HIDDEN, param_attr="grnn.param", bias_attr="grnn.bias")
    return nn.sequence_pool(input=hidden, pool_type="max")


def item_encoder(emb):
    return nn.sequence_pool(input=emb, pool_type="sum")


def hinge(pos, neg):
    margin = tensor.fill_constant_batch_size_like(input=pos, shape=[-1, 1], value=MARGIN, dtype="float32")
    part = nn.elementwise_add(nn.elementwise_sub(margin, pos), neg)
    zero = tensor.fill_constant_batch_size_like(input=part, shape=[-1, 1], value=0.0, dtype="float32")
    return nn.elementwise_max(zero, part)


def network():
    feeds = [fluid.data(name=n, shape=[None, 1], dtype="int64", lod_level=1) for n in ("user", "p_item", "n_item")]
    user, pos, neg = [fluid.embedding(input=f, size=[VOCAB, EMB_DIM], param_attr="emb.item") for f in feeds]
    user_hid = nn.fc(input=user_encoder(user), size=HIDDEN, param_attr="user.w", bias_attr="user.b")
    pos_hid = nn.fc(input=item_encoder(pos), size=HIDDEN, param_attr="item.w", bias_attr="item.b")
    neg_hid = nn.fc(input=item_encoder(neg), size=HIDDEN, param_attr="item.w", bias_attr="item.b")
    cos_pos, cos_neg = nn.cos_sim(user_hid, pos_hid), nn.cos_sim(user_hid, neg_hid)
    avg_cost = nn.mean(hinge(cos_pos, cos_neg))
    correct = nn.reduce_sum(tensor.cast(cf.less_than(cos_neg, cos_pos), dtype="float32"))
    return avg_cost, correct


if __name__ == "__main__":
    avg_cost, correct = network()
    train(fluid, avg_cost, ["user", "p_item", "n_item"], sys.argv[1], sys.argv[2],
          lambda: fluid.optimizer.Adagrad(learning_rate=0.01))
