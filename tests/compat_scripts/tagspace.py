"""TagSpace, text-to-tag matching as Fluid 1.x's models repo trains it: a convolution over the
text's word embeddings, max-pooled over each text (fluid.nets.sequence_conv_pool), an fc into
the tag space; the cosine to the text's tag, and the largest cosine to its sampled negative
tags, give a margin rank (hinge) loss; Adagrad. Run by tests/test_paddle_programs.py (see
_harness.py)."""
import sys

import paddle
import paddle.fluid as fluid

from _harness import train

VOCAB_TEXT_SIZE, VOCAB_TAG_SIZE = 200, 20
EMB_DIM, HID_DIM, WIN_SIZE, MARGIN, NEG_SIZE = 16, 16, 3, 0.1, 3


def network(vocab_text_size, vocab_tag_size, emb_dim=10, hid_dim=1000, win_size=5, margin=0.1,
            neg_size=5):
    text = fluid.layers.data(name='text', shape=[1], lod_level=1, dtype='int64')
    pos_tag = fluid.layers.data(name='pos_tag', shape=[1], lod_level=1, dtype='int64')
    neg_tag = fluid.layers.data(name='neg_tag', shape=[1], lod_level=1, dtype='int64')
    text_emb = fluid.layers.embedding(input=text, size=[vocab_text_size, emb_dim], param_attr='text_emb')
    pos_tag_emb = fluid.layers.embedding(input=pos_tag, size=[vocab_tag_size, emb_dim], param_attr='tag_emb')
    neg_tag_emb = fluid.layers.embedding(input=neg_tag, size=[vocab_tag_size, emb_dim], param_attr='tag_emb')

    conv_1d = fluid.nets.sequence_conv_pool(input=text_emb, num_filters=hid_dim, filter_size=win_size,
                                            act='tanh', pool_type='max', param_attr='cnn')
    text_hid = fluid.layers.fc(input=conv_1d, size=emb_dim, param_attr='text_hid')
    cos_pos = fluid.layers.cos_sim(pos_tag_emb, text_hid)
    mul_text_hid = fluid.layers.sequence_expand_as(x=text_hid, y=neg_tag_emb)
    mul_cos_neg = fluid.layers.cos_sim(neg_tag_emb, mul_text_hid)
    cos_neg_all = fluid.layers.sequence_reshape(input=mul_cos_neg, new_dim=neg_size)
    # the hardest negative tag
    cos_neg = fluid.layers.reduce_max(cos_neg_all, dim=1, keep_dim=True)
    # hinge loss: max(0, margin - cos_pos + cos_neg)
    loss_part1 = fluid.layers.elementwise_sub(
        fluid.layers.fill_constant_batch_size_like(input=cos_pos, shape=[-1, 1], value=margin, dtype='float32'),
        cos_pos)
    loss_part2 = fluid.layers.elementwise_add(loss_part1, cos_neg)
    loss_part3 = fluid.layers.elementwise_max(
        fluid.layers.fill_constant_batch_size_like(input=loss_part2, shape=[-1, 1], value=0.0, dtype='float32'),
        loss_part2)
    avg_cost = fluid.layers.mean(loss_part3)
    less = fluid.layers.cast(fluid.layers.less_than(cos_neg, cos_pos), dtype='float32')
    correct = fluid.layers.reduce_sum(less)
    return avg_cost, correct, cos_pos


if __name__ == '__main__':
    avg_cost, correct, cos_pos = network(VOCAB_TEXT_SIZE, VOCAB_TAG_SIZE, EMB_DIM, HID_DIM, WIN_SIZE, MARGIN,
                                         NEG_SIZE)
    train(fluid, avg_cost, ['text', 'pos_tag', 'neg_tag'], sys.argv[1], sys.argv[2],
          lambda: fluid.optimizer.Adagrad(learning_rate=0.01))
