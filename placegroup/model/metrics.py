"""``fluid.metrics``: Fluid 1.8's host-side metric accumulators, in numpy.

A metric object sums what each minibatch gives it (``update``) and turns the sums into a
value (``eval``). Nothing here touches a program: the numbers come from ``Executor.run``'s
fetches (``fluid.layers.accuracy``, ``edit_distance``, ``chunk_eval``, or the predictions
themselves). Every class does Fluid 1.8's arithmetic (python/paddle/fluid/metrics.py) on the
same inputs, vectorised where Fluid loops over examples; input Fluid rejects is rejected here
with a ``ValueError`` that names the metric and what it got.

NOTE(metric-states): as in Fluid, a metric's *states* are its attributes without a leading
underscore. ``get_config()`` returns ``{"name": ..., "states": deep copy of them}``, and
``reset()`` sets each to its zero by type (int -> 0, float -> 0.0, ndarray -> zeros like it,
anything else -> None). A state that became an ndarray (``Accuracy.update`` with an array
value) stays one.

NOTE(auc-reset): ``Auc`` keeps its bucket counts in ``_stat_pos``/``_stat_neg``, which start
with an underscore, so Fluid 1.8's ``reset()`` leaves them alone and ``eval()`` after a
``reset()`` still covers everything seen before. This module keeps that behaviour, so a
1.8 script prints the same numbers; make a new ``Auc`` to start over.

``DetectionMAP`` (a detection metric that builds ops) is not here: ``fluid.metrics.DetectionMAP``
raises ``NotImplementedInPlacegroup`` (docs/fluid_compat.md).

Thread safety: a metric object is plain mutable state; update it from one thread at a time.

Example::

    import placegroup as fluid
    acc = fluid.metrics.Accuracy()
    for batch in reader():
        batch_acc, = exe.run(main, feed=batch, fetch_list=[acc_var])
        acc.update(value=batch_acc, weight=len(batch["x"]))
    print(acc.eval())
"""
from __future__ import annotations

import copy

import numpy as np

from placegroup.ops.metric import roc_area

__all__ = ["MetricBase", "CompositeMetric", "Precision", "Recall", "Accuracy", "ChunkEvaluator", "EditDistance",
           "Auc"]


def _is_numpy_(var) -> bool:
    return isinstance(var, (np.ndarray, np.generic))


def _is_number_(var) -> bool:
    """Fluid's test: a Python int or float, an np.int64, or an ndarray of shape (1,)."""
    return isinstance(var, (int, float, np.int64)) or (isinstance(var, np.ndarray) and var.shape == (1,))


def _is_number_or_matrix_(var) -> bool:
    return _is_number_(var) or isinstance(var, np.ndarray)


def _float(v) -> float:
    """``float(v)``, also for the [1] arrays fetched counts are (NumPy 2 no longer converts
    those implicitly; the NumPy of Fluid 1.8's day did)."""
    return float(v.reshape(-1)[0]) if isinstance(v, np.ndarray) and v.size == 1 else float(v)


def _kind(var) -> str:
    return f"{type(var).__name__} of shape {var.shape}" if isinstance(var, np.ndarray) else type(var).__name__


class MetricBase:
    """The base of every metric: a name, states (NOTE(metric-states)), ``update`` and ``eval``.

    Subclass it for a metric of your own: keep the states in attributes without a leading
    underscore (so ``reset`` and ``get_config`` see them) and implement ``update`` and ``eval``.

    Args:
        name: the metric's name (``str(metric)``); None gives the class name.
    """

    def __init__(self, name=None) -> None:
        self._name = str(name) if name is not None else self.__class__.__name__

    def __str__(self) -> str:
        return self._name

    def _states(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def _fail(self, what: str) -> ValueError:
        return ValueError(f"{type(self).__name__} {self._name!r}: {what}")

    def reset(self) -> None:
        """Set every state to its zero by type (NOTE(metric-states))."""
        for attr, value in self._states().items():
            if isinstance(value, int):
                setattr(self, attr, 0)
            elif isinstance(value, float):
                setattr(self, attr, 0.0)
            elif isinstance(value, (np.ndarray, np.generic)):
                setattr(self, attr, np.zeros_like(value))
            else:
                setattr(self, attr, None)

    def get_config(self) -> dict:
        """``{"name": the name, "states": a deep copy of the states}``."""
        return {"name": self._name, "states": copy.deepcopy(self._states())}

    def update(self, preds, labels) -> None:
        """Add one minibatch's predictions and labels to the states."""
        raise NotImplementedError("Should not use it directly, please extend it.")

    def eval(self):
        """The metric over every minibatch since construction or the last ``reset``."""
        raise NotImplementedError("Should not use it directly, please extend it.")


class CompositeMetric(MetricBase):
    """Several metrics updated with the same ``(preds, labels)``; ``eval`` lists their values.

    Example::

        comp = fluid.metrics.CompositeMetric()
        comp.add_metric(fluid.metrics.Precision())
        comp.add_metric(fluid.metrics.Recall())
        comp.update(preds=preds, labels=labels)
        precision, recall = comp.eval()
    """

    def __init__(self, name=None) -> None:
        super().__init__(name)
        self._metrics: list[MetricBase] = []

    def add_metric(self, metric: MetricBase) -> None:
        """Add ``metric``; it must take ``update(preds, labels)``.

        Raises:
            ValueError: ``metric`` is not a MetricBase.
        """
        if not isinstance(metric, MetricBase):
            raise self._fail(f"SubMetric should be inherit from MetricBase, got {type(metric).__name__}")
        self._metrics.append(metric)

    def update(self, preds, labels) -> None:
        for m in self._metrics:
            m.update(preds, labels)

    def eval(self) -> list:
        return [m.eval() for m in self._metrics]


class _BinaryCounts(MetricBase):
    """What Precision and Recall share: rounding the predictions and checking both arrays."""

    def _rows(self, preds, labels) -> tuple:
        """(rounded int32 predictions, labels), one value per example, both [N]."""
        if not _is_numpy_(preds):
            raise self._fail(f"The 'preds' must be a numpy ndarray, got {_kind(preds)}")
        if not _is_numpy_(labels):
            raise self._fail(f"The 'labels' must be a numpy ndarray, got {_kind(labels)}")
        preds, labels = np.asarray(preds), np.asarray(labels)
        ok = preds.ndim >= 1 and labels.ndim >= 1 and len(preds) == len(labels) \
            and preds.size == len(preds) and labels.size == len(labels)
        if not ok:
            raise self._fail(f"preds and labels must hold one value per example ([N] or [N, 1]) with the same N, "
                             f"got preds of shape {preds.shape} and labels of shape {labels.shape}")
        return np.rint(preds).astype("int32").reshape(-1), labels.reshape(-1)


class Precision(_BinaryCounts):
    """Of the examples predicted positive, the fraction that are: ``tp / (tp + fp)`` (0.0 when
    nothing was predicted positive). A prediction is positive when it rounds to 1.

    Example::

        metric = fluid.metrics.Precision()
        metric.update(preds=np.array([[0.1], [0.7], [0.8]]), labels=np.array([[0], [1], [0]]))
        metric.eval()  # 0.5
    """

    def __init__(self, name=None) -> None:
        super().__init__(name)
        self.tp = 0  # true positives
        self.fp = 0  # false positives

    def update(self, preds, labels) -> None:
        """Count this minibatch.

        Args:
            preds: [N, 1] or [N] scores, rounded to the nearest int (1 is positive).
            labels: [N, 1] or [N] labels (1 is positive).

        Raises:
            ValueError: an argument is not a numpy array, or the shapes do not fit.
        """
        pred, label = self._rows(preds, labels)
        said = pred == 1
        self.tp += int(np.count_nonzero(said & (label == 1)))
        self.fp += int(np.count_nonzero(said & (label != 1)))

    def eval(self) -> float:
        ap = self.tp + self.fp
        return float(self.tp) / ap if ap != 0 else 0.0


class Recall(_BinaryCounts):
    """Of the positive examples, the fraction predicted positive: ``tp / (tp + fn)`` (0.0 when
    there was no positive example). A prediction is positive when it rounds to 1.

    Example::

        metric = fluid.metrics.Recall()
        metric.update(preds=np.array([[0.1], [0.7], [0.8]]), labels=np.array([[1], [1], [0]]))
        metric.eval()  # 0.5
    """

    def __init__(self, name=None) -> None:
        super().__init__(name)
        self.tp = 0  # true positives
        self.fn = 0  # false negatives

    def update(self, preds, labels) -> None:
        """Count this minibatch; arguments as ``Precision.update``."""
        pred, label = self._rows(preds, labels)
        positive = label == 1
        self.tp += int(np.count_nonzero(positive & (pred == 1)))
        self.fn += int(np.count_nonzero(positive & (pred != 1)))

    def eval(self) -> float:
        recall = self.tp + self.fn
        return float(self.tp) / recall if recall != 0 else 0.0


class Accuracy(MetricBase):
    """The mean of minibatch accuracies weighted by their sizes: ``Σ value·weight / Σ weight``.

    Example::

        acc = fluid.metrics.Accuracy()
        acc.update(value=0.9, weight=128)
        acc.update(value=0.8, weight=128)
        acc.eval()  # 0.85
    """

    def __init__(self, name=None) -> None:
        super().__init__(name)
        self.value = 0.0
        self.weight = 0.0

    def update(self, value, weight) -> None:
        """Add one minibatch.

        Args:
            value: its accuracy: a Python number or a numpy array (``fluid.layers.accuracy``'s
                fetched [1] array; the state then becomes an array, as in Fluid).
            weight: its size: an int, a float, an np.int64 or a numpy array of shape (1,).

        Raises:
            ValueError: ``value`` or ``weight`` is of another type, or ``weight`` < 0.
        """
        if not _is_number_or_matrix_(value):
            raise self._fail(f"The 'value' must be a number(int, float) or a numpy ndarray, got {_kind(value)}")
        if not _is_number_(weight):
            raise self._fail(f"The 'weight' must be a number(int, float), got {_kind(weight)}")
        if weight < 0:
            raise self._fail(f"The 'weight' can not be negative, got {weight}")
        self.value += value * weight
        self.weight += weight

    def eval(self):
        """The weighted mean.

        Raises:
            ValueError: nothing was added (the total weight is 0).
        """
        if self.weight == 0:
            raise self._fail("There is no data in Accuracy Metrics. Please check layers.accuracy output has added "
                             "to Accuracy.")
        return self.value / self.weight


class ChunkEvaluator(MetricBase):
    """Precision, recall and F1 of chunk detection from the counts ``chunk_eval`` gives per
    minibatch: ``precision = correct / infer``, ``recall = correct / label``,
    ``f1 = 2·p·r / (p + r)``, each 0 where its denominator (for F1: ``correct``) is 0.

    Example::

        metric = fluid.metrics.ChunkEvaluator()
        metric.update(num_infer_chunks=10, num_label_chunks=9, num_correct_chunks=8)
        precision, recall, f1 = metric.eval()  # 0.8, 0.889, 0.842
    """

    def __init__(self, name=None) -> None:
        super().__init__(name)
        self.num_infer_chunks = 0
        self.num_label_chunks = 0
        self.num_correct_chunks = 0

    def update(self, num_infer_chunks, num_label_chunks, num_correct_chunks) -> None:
        """Add one minibatch's counts (numbers or numpy arrays, e.g. the fetched [1] arrays).

        Raises:
            ValueError: a count is neither a number nor a numpy array.
        """
        for arg, v in (("num_infer_chunks", num_infer_chunks), ("num_label_chunks", num_label_chunks),
                       ("num_correct_chunks", num_correct_chunks)):
            if not _is_number_or_matrix_(v):
                raise self._fail(f"The '{arg}' must be a number(int, float) or a numpy ndarray, got {_kind(v)}")
        self.num_infer_chunks += num_infer_chunks
        self.num_label_chunks += num_label_chunks
        self.num_correct_chunks += num_correct_chunks

    def eval(self) -> tuple:
        """(precision, recall, f1)."""
        # as floats: Fluid's float(count) / array-count gave a [1] array, which NumPy 2 no longer
        # turns into the float its F1 line then needs
        correct = _float(self.num_correct_chunks)
        precision = correct / _float(self.num_infer_chunks) if self.num_infer_chunks else 0
        recall = correct / _float(self.num_label_chunks) if self.num_label_chunks else 0
        f1 = float(2 * precision * recall) / (precision + recall) if self.num_correct_chunks else 0
        return precision, recall, f1


class EditDistance(MetricBase):
    """The mean edit distance over sequence pairs and the fraction of pairs that differ, from
    what ``fluid.layers.edit_distance`` gives per minibatch.

    Args:
        name: the metric's name (required, as in Fluid).

    Example::

        dist = fluid.metrics.EditDistance("ed")
        dist.update(distances=np.array([[0.0], [2.0], [1.0]]), seq_num=3)
        avg_distance, instance_error = dist.eval()  # 1.0, 0.667
    """

    def __init__(self, name) -> None:
        super().__init__(name)
        self.total_distance = 0.0
        self.seq_num = 0
        self.instance_error = 0

    def update(self, distances, seq_num) -> None:
        """Add one minibatch.

        Args:
            distances: numpy array of its pairs' distances ([N, 1]).
            seq_num: how many pairs (a number, or the fetched [1] SequenceNum).

        Raises:
            ValueError: ``distances`` is not a numpy array or ``seq_num`` not a number.
        """
        if not _is_numpy_(distances):
            raise self._fail(f"The 'distances' must be a numpy ndarray, got {_kind(distances)}")
        if not _is_number_(seq_num):
            raise self._fail(f"The 'seq_num' must be a number(int, float), got {_kind(seq_num)}")
        seq_right_count = np.sum(distances == 0)
        self.seq_num += seq_num
        self.instance_error += seq_num - seq_right_count
        self.total_distance += np.sum(distances)

    def eval(self) -> tuple:
        """(mean distance, fraction of pairs with a non-zero distance).

        Raises:
            ValueError: no pair was added.
        """
        if self.seq_num == 0:
            raise self._fail("There is no data in EditDistance Metric. Please check layers.edit_distance output "
                             "has been added to EditDistance.")
        return self.total_distance / self.seq_num, self.instance_error / _float(self.seq_num)


class Auc(MetricBase):
    """The area under the ROC curve over every minibatch, bucketed as the ``auc`` op does
    (NOTE(auc-buckets) in ops/metric.py): column 1 of ``preds`` (the positive class's
    probability) falls in bucket ``int(p * num_thresholds)``. ``reset()`` keeps the counts, as
    in Fluid 1.8 (NOTE(auc-reset)).

    Args:
        name: the metric's name (required, as in Fluid).
        curve: ``'ROC'``; ``'PR'`` is accepted and, as in Fluid, computes the ROC area.
        num_thresholds: the predictions fall in ``num_thresholds + 1`` buckets.

    Example::

        auc = fluid.metrics.Auc("auc")
        auc.update(preds=np.array([[0.8, 0.2], [0.3, 0.7]]), labels=np.array([[0], [1]]))
        auc.eval()  # 1.0
    """

    def __init__(self, name, curve: str = "ROC", num_thresholds: int = 4095) -> None:
        super().__init__(name=name)
        self._curve = curve
        self._num_thresholds = num_thresholds
        self._stat_pos = np.zeros(num_thresholds + 1)
        self._stat_neg = np.zeros(num_thresholds + 1)

    def update(self, preds, labels) -> None:
        """Count this minibatch.

        Args:
            preds: [N, 2] numpy array; ``preds[i, 1]`` is example i's positive probability.
            labels: [N, 1] or [N] numpy array; non-zero is positive.

        Raises:
            ValueError: not numpy arrays, shapes that do not fit, or a probability outside [0, 1].
        """
        if not _is_numpy_(labels):
            raise self._fail(f"The 'labels' must be a numpy ndarray, got {_kind(labels)}")
        if not _is_numpy_(preds):
            raise self._fail(f"The 'predictions' must be a numpy ndarray, got {_kind(preds)}")
        preds, labels = np.asarray(preds), np.asarray(labels)
        if preds.ndim != 2 or preds.shape[1] < 2 or labels.ndim < 1 or len(labels) != len(preds) \
                or labels.size != len(labels):
            raise self._fail(f"preds must be [N, 2] and labels [N, 1] or [N], got preds of shape {preds.shape} "
                             f"and labels of shape {labels.shape}")
        p = preds[:, 1]
        bad = ~((p >= 0) & (p <= 1))
        if bad.any():
            row = int(np.argmax(bad))
            raise self._fail(f"preds[{row}, 1] = {p[row]} is not a probability in [0, 1]")
        bins = (p * self._num_thresholds).astype(np.int64)  # in preds' dtype, then truncated, as Fluid
        positive = labels.reshape(-1) != 0
        n = self._num_thresholds + 1
        self._stat_pos += np.bincount(bins[positive], minlength=n)
        self._stat_neg += np.bincount(bins[~positive], minlength=n)

    @staticmethod
    def trapezoid_area(x1, x2, y1, y2) -> float:
        return abs(x1 - x2) * (y1 + y2) / 2.0

    def eval(self) -> float:
        """The bucketed ROC area, 0.0 until both a positive and a negative example were seen."""
        return float(roc_area(np, self._stat_pos, self._stat_neg))
