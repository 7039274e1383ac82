"""A DIN-style model in PaddleRec 1.8.5's model format: a padded history of item ids, weighted
by its attention to the target item (the padding masked out), pooled, then fully connected
layers and a logistic loss. Each batch is padded to its own longest history (reader.py)."""
import paddle.fluid as fluid
from paddlerec.core.model import ModelBase
from paddlerec.core.utils import envs


class Model(ModelBase):
    def __init__(self, config):
        ModelBase.__init__(self, config)

    def _init_hyper_parameters(self):
        self.items = envs.get_global_env("hyper_parameters.items")
        self.dim = envs.get_global_env("hyper_parameters.dim")

    def input_data(self, is_infer=False, **kwargs):
        hist = fluid.data(name="hist", shape=[None, -1], dtype="int64")
        target = fluid.data(name="target", shape=[None, 1], dtype="int64")
        mask = fluid.data(name="mask", shape=[None, -1, 1], dtype="float32")
        label = fluid.data(name="label", shape=[None, 1], dtype="float32")
        return [hist, target, mask, label]

    def net(self, inputs, is_infer=False):
        hist, target, mask, label = inputs
        table = fluid.ParamAttr(name="item_table", initializer=fluid.initializer.Uniform(-0.1, 0.1))
        hist_emb = fluid.embedding(hist, size=[self.items, self.dim], param_attr=table)      # [N, L, D]
        target_emb = fluid.embedding(target, size=[self.items, self.dim], param_attr=table)  # [N, 1, D]
        score = fluid.layers.reduce_sum(hist_emb * target_emb, dim=2, keep_dim=True) + mask  # [N, L, 1]
        weight = fluid.layers.softmax(score, axis=1)
        pooled = fluid.layers.reduce_sum(hist_emb * weight, dim=1)                          # [N, D]
        h = fluid.layers.concat([pooled, fluid.layers.reshape(target_emb, [-1, self.dim])], axis=1)
        h = fluid.layers.fc(h, 16, act="relu")
        logit = fluid.layers.fc(h, 1)
        loss = fluid.layers.reduce_mean(fluid.layers.sigmoid_cross_entropy_with_logits(x=logit, label=label))
        prob = fluid.layers.sigmoid(logit)
        auc, _, _ = fluid.layers.auc(input=fluid.layers.concat([1 - prob, prob], axis=1),
                                     label=fluid.layers.cast(label, "int64"), num_thresholds=255, slide_steps=0)
        self._cost = loss
        self._metrics["LOSS"] = loss
        self._metrics["AUC"] = auc
