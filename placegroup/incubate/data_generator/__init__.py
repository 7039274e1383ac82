"""Fluid 1.8's ``fluid.incubate.data_generator``: write the MultiSlot text a Dataset reads.

A data generator is the pipe command of a dataset (``dataset.set_pipe_command("python
gen.py")``): it reads raw lines on stdin and writes one MultiSlot line per sample on stdout
(NOTE(multislot-format) in placegroup/datafeed/multislot.py). Subclass ``MultiSlotDataGenerator`` and
override ``generate_sample(line)`` to return a function that yields samples, each a list of
``(name, [values...])`` in the order of the dataset's ``set_use_var``; optionally override
``generate_batch(samples)`` to rework ``set_batch(n)`` samples at once (padding, say).

Example (``gen.py``)::

    import paddle.fluid.incubate.data_generator as dg

    class MyGen(dg.MultiSlotDataGenerator):
        def generate_sample(self, line):
            def reader():
                click, *ids = line.split()
                yield [("click", [int(click)]), ("slot1", [int(i) for i in ids])]
            return reader

    MyGen().run_from_stdin()     # "1 3 7" on stdin -> "1 1 2 3 7" on stdout

Thread-safety: a generator writes to ``sys.stdout`` from the thread that runs it.
"""
from __future__ import annotations

import sys

__all__ = ["DataGenerator", "MultiSlotDataGenerator", "MultiSlotStringDataGenerator"]


class DataGenerator:
    """The base class: reading lines, batching samples, writing them (``_gen_str``)."""

    def __init__(self) -> None:
        self._proto_info = None
        self.batch_size_ = 32
        self._line_limit = None

    def _set_line_limit(self, line_limit: int) -> None:
        if not isinstance(line_limit, int):
            raise ValueError(f"line_limit{type(line_limit)} must be in int type")
        if line_limit < 1:
            raise ValueError("line_limit can not less than 1")
        self._line_limit = line_limit

    def set_batch(self, batch_size: int) -> None:
        """How many samples ``generate_batch`` gets at once (default 32)."""
        self.batch_size_ = batch_size

    def generate_sample(self, line):
        """Override: return a function yielding the samples of raw ``line`` (None: skipped)."""
        raise NotImplementedError("Please rewrite this function to return a list or tuple: "
                                  "[(name, [feasign, ...]), ...] or ((name, [feasign, ...]), ...)")

    def generate_batch(self, samples):
        """Override to rework a batch of samples; by default yields them unchanged."""
        def local_iter():
            yield from samples
        return local_iter

    def _gen_str(self, line) -> str:
        raise NotImplementedError("pls use MultiSlotDataGenerator or PairWiseDataGenerator")

    def _write(self, lines) -> None:
        """Samples from ``generate_sample`` over ``lines``, batched, written to stdout."""
        out = sys.stdout
        batch: list = []
        for line in lines:
            for sample in self.generate_sample(line)():
                if sample is None:
                    continue
                batch.append(sample)
                if len(batch) == self.batch_size_:
                    out.writelines(self._gen_str(s) for s in self.generate_batch(batch)())
                    batch = []
        if batch:
            out.writelines(self._gen_str(s) for s in self.generate_batch(batch)())

    def run_from_stdin(self) -> None:
        """Read raw lines on stdin; write one MultiSlot line per sample on stdout."""
        self._write(sys.stdin)

    def run_from_memory(self) -> None:
        """Write the samples of ``generate_sample(None)`` (for debugging and benchmarks)."""
        self._write([None])


def _check_sample(line) -> None:
    if not isinstance(line, (list, tuple)):
        raise ValueError("the output of process() must be in list or tuple type, e.g. "
                         "[('words', [1926, 8, 17]), ('label', [1])]")


class MultiSlotStringDataGenerator(DataGenerator):
    """Samples whose values are strings already: ``[("words", ["1926", "8"])]`` -> ``2 1926 8``."""

    def _gen_str(self, line) -> str:
        _check_sample(line)
        return " ".join(f"{len(values)} {' '.join(values)}" for _, values in line) + "\n"


class MultiSlotDataGenerator(DataGenerator):
    """Samples of ints (ids) and floats: ``[("words", [1926, 8]), ("label", [1])]`` -> ``2 1926 8 1 1``.

    The first sample fixes the slots' names and order; a slot with a float becomes a float
    slot (``_proto_info``). Every sample must give the same slots, each with one value at least.
    """

    def _gen_str(self, line) -> str:
        _check_sample(line)
        first = self._proto_info is None
        if first:
            self._proto_info = []
        elif len(line) != len(self._proto_info):
            raise ValueError(f"the complete field set of two given line are inconsistent: "
                             f"{len(line)} slots here, {len(self._proto_info)} in the first sample")
        parts = []
        for index, (name, elements) in enumerate(line):
            if not isinstance(name, str):
                raise ValueError(f"name{type(name)} must be in str type")
            if not isinstance(elements, list):
                raise ValueError(f"elements{type(elements)} must be in list type")
            if not elements:
                raise ValueError("the elements of each field can not be empty, you need padding it in process().")
            if first:
                self._proto_info.append((name, "uint64"))
            elif name != self._proto_info[index][0]:
                raise ValueError(f"the field name of two given line are not match: require<"
                                 f"{self._proto_info[index][0]}>, get<{name}>.")
            for elem in elements:
                if isinstance(elem, float):
                    self._proto_info[index] = (name, "float")
                elif not isinstance(elem, int):
                    raise ValueError(f"the type of element{type(elem)} must be in int or float")
            parts.append(f"{len(elements)} {' '.join(map(str, elements))}")
        return " ".join(parts) + "\n"
