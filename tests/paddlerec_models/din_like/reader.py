"""Batches for the DIN-style model: a line is ``history ids;target id;label``; a batch is padded
to its own longest history, with the mask -1e9 over the padding, so that two places' batches
of one step differ in width."""
import numpy as np
from paddlerec.core.reader import ReaderBase
from paddlerec.core.utils import envs


class Reader(ReaderBase):
    def init(self):
        self.batch_size = envs.get_global_env("dataset.train.batch_size")

    def generate_sample(self, line):
        def data_iter():
            yield None
        return data_iter

    def _batch(self, samples):
        width = max(len(h) for h, _, _ in samples)
        out = []
        for h, t, y in samples:
            pad = width - len(h)
            out.append([np.array(h + [0] * pad, "int64"), np.array([t], "int64"),
                        np.array([[0.0]] * len(h) + [[-1e9]] * pad, "float32"), np.array([y], "float32")])
        return out

    def generate_batch_from_trainfiles(self, files):
        samples = []
        for name in files:
            with open(name) as f:
                for line in f:
                    hist, target, label = line.strip().split(";")
                    samples.append(([int(i) for i in hist.split()], int(target), float(label)))

        def batches():
            for i in range(0, len(samples) - self.batch_size + 1, self.batch_size):
                yield self._batch(samples[i:i + self.batch_size])
        return batches
