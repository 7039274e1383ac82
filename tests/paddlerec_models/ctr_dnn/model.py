"""A CTR DNN in PaddleRec 1.8.5's model format: sparse slots sum-pooled from one shared table,
dense features, fully connected layers, a softmax over click / no click, AUC and the loss."""
import paddle.fluid as fluid
from paddlerec.core.model import ModelBase
from paddlerec.core.utils import envs


class Model(ModelBase):
    def __init__(self, config):
        ModelBase.__init__(self, config)

    def _init_hyper_parameters(self):
        self.vocab = envs.get_global_env("hyper_parameters.vocab")
        self.dim = envs.get_global_env("hyper_parameters.dim")
        self.hidden = envs.get_global_env("hyper_parameters.hidden")

    def net(self, input, is_infer=False):
        label = self._sparse_data_var[0]
        table = fluid.ParamAttr(name="slot_table", initializer=fluid.initializer.Uniform(-0.1, 0.1))
        pooled = [fluid.layers.sequence_pool(fluid.layers.embedding(ids, size=[self.vocab, self.dim], is_sparse=True,
                                                                    param_attr=table), pool_type="sum")
                  for ids in self._sparse_data_var[1:]]
        h = fluid.layers.concat(pooled + [self._dense_data_var[0]], axis=1)
        for size in self.hidden:
            h = fluid.layers.fc(h, size, act="relu")
        prob = fluid.layers.fc(h, 2, act="softmax")
        auc, batch_auc, _ = fluid.layers.auc(input=prob, label=label, num_thresholds=255, slide_steps=5)
        loss = fluid.layers.reduce_mean(fluid.layers.cross_entropy(input=prob, label=label))
        self._cost = loss
        self._metrics["LOSS"] = loss
        self._metrics["AUC"] = auc
        self._metrics["BATCH_AUC"] = batch_auc
