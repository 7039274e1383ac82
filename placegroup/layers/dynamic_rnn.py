"""``fluid.layers.DynamicRNN`` and the LoD layers it is built from: an RNN over a batch of
sequences of different lengths, written as Fluid 1.8 writes it: a ``While`` loop over time steps.

The batch's sequences are ranked by length, longest first (``lod_rank_table``, NOTE(rank-table)
in ops/lod_rank.py), and cut into time steps (``lod_tensor_to_array``): step t holds the t-th
element of every sequence longer than t, in rank order. The loop runs ``max_sequence_len``
times. At each step a memory keeps only the rows of the sequences still running
(``shrink_memory``), an input read whole (``static_input``) likewise, and the outputs are
written into arrays that ``array_to_lod_tensor`` puts back into sequences in the batch's own
order. The gradient flows back through the loop like any ``While`` (NOTE(block-grad) in
placegroup/model/backward_blocks.py).

Building a program is single-threaded, as in Fluid.
"""
from __future__ import annotations

import contextlib

from placegroup.ir import unique_name
from placegroup.ir.variable import RANK_TABLE, TENSOR_ARRAY, Variable
from placegroup.layers.blocks import While, array_read, array_write
from placegroup.layers.ops import increment, less_than
from placegroup.layers.tensor import fill_constant
from placegroup.model.layer_helper import LayerHelper

__all__ = ["DynamicRNN", "lod_rank_table", "max_sequence_len", "lod_tensor_to_array", "array_to_lod_tensor",
           "shrink_memory", "reorder_lod_tensor_by_rank"]


def _check(layer: str, x, what: str = "x") -> None:
    if not isinstance(x, Variable):
        raise TypeError(f"{layer}: {what} must be a Variable, got {x!r}")


def lod_rank_table(x, level: int = 0):
    """A rank table of ``x``'s sequences at LoD ``level``: longest first, equal lengths in their
    order (NOTE(rank-table) in ops/lod_rank.py).

    Example::

        table = fluid.layers.lod_rank_table(sentences)
    """
    _check("lod_rank_table", x)
    helper = LayerHelper("lod_rank_table")
    table = helper.block.create_var(unique_name.generate("lod_rank_table"), type=RANK_TABLE, stop_gradient=True)
    helper.append_op("lod_rank_table", {"X": [x]}, {"Out": [table]}, {"level": int(level)})
    return table


def max_sequence_len(rank_table):
    """The longest sequence's length in ``rank_table``, an int64 [1].

    Example::

        steps = fluid.layers.max_sequence_len(table)
    """
    _check("max_sequence_len", rank_table, "rank_table")
    helper = LayerHelper("max_seqence_len")
    out = helper.create_variable_for_type_inference("int64", stop_gradient=True)
    helper.append_op("max_sequence_len", {"RankTable": [rank_table]}, {"Out": [out]})
    return out


def lod_tensor_to_array(x, table):
    """``x``'s sequences cut into time steps: a tensor array whose entry t holds the t-th element
    of every sequence longer than t, in ``table``'s order.

    Example::

        steps = fluid.layers.lod_tensor_to_array(sentences, table)
    """
    _check("lod_tensor_to_array", x)
    helper = LayerHelper("lod_tensor_to_array")
    array = helper.block.create_var(unique_name.generate("lod_tensor_to_array"), type=TENSOR_ARRAY, dtype=x.dtype)
    helper.append_op("lod_tensor_to_array", {"X": [x], "RankTable": [table]}, {"Out": [array]})
    return array


def array_to_lod_tensor(x, table):
    """The time steps of the tensor array ``x`` put back into sequences, in the batch's own order:
    the inverse of ``lod_tensor_to_array``.

    Example::

        sentences_again = fluid.layers.array_to_lod_tensor(steps, table)
    """
    _check("array_to_lod_tensor", x)
    helper = LayerHelper("array_to_lod_tensor")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("array_to_lod_tensor", {"X": [x], "RankTable": [table]}, {"Out": [out]})
    return out


def shrink_memory(x, i, table):
    """The first rows of ``x``, one per sequence of ``table`` still running at step ``i``.

    Example::

        mem = fluid.layers.shrink_memory(mem, step, table)
    """
    _check("shrink_memory", x)
    helper = LayerHelper("shrink_memory")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("shrink_rnn_memory", {"X": [x], "I": [i], "RankTable": [table]}, {"Out": [out]})
    return out


def reorder_lod_tensor_by_rank(x, rank_table):
    """``x`` in ``rank_table``'s order: its sequences, or its rows when it has no LoD (one row per
    sequence, as a memory's initial value).

    Example::

        boot = fluid.layers.reorder_lod_tensor_by_rank(boot, table)
    """
    _check("reorder_lod_tensor_by_rank", x)
    helper = LayerHelper("reorder_lod_tensor_by_rank")
    out = helper.create_variable_for_type_inference(x.dtype)
    helper.append_op("reorder_lod_tensor_by_rank", {"X": [x], "RankTable": [rank_table]}, {"Out": [out]})
    return out


class DynamicRNN:
    """Fluid 1.8's ``DynamicRNN``: a recurrent network over a batch of sequences of different
    lengths (LoDTensors), whose step is the ops built inside ``with drnn.block():``.

    Inside the block: ``step_input(x)`` gives this step's element of each sequence still running;
    ``static_input(x)`` the rows of ``x`` for those sequences; ``memory(...)`` a value carried from
    step to step, set with ``update_memory``; ``output(...)`` marks what ``drnn()`` returns, one
    element per step, as sequences with the input's LoD.

    Raises:
        ValueError: a method called outside the block (or ``drnn()`` inside it), ``block()``
            entered twice, ``memory`` or ``update_memory`` before ``step_input``.
        TypeError: an argument that is not a Variable.

    Example::

        sentence = fluid.layers.data("sentence", [32], lod_level=1)
        drnn = fluid.layers.DynamicRNN()
        with drnn.block():
            word = drnn.step_input(sentence)
            memory = drnn.memory(shape=[10], value=0.0)
            hidden = fluid.layers.fc([word, memory], 10, act="tanh")
            drnn.update_memory(memory, hidden)
            drnn.output(hidden)
        hidden_seq = drnn()
    """

    BEFORE_RNN, IN_RNN, AFTER_RNN = 0, 1, 2

    def __init__(self, name=None) -> None:
        self.helper = LayerHelper("dynamic_rnn", name=name)
        self.status = self.BEFORE_RNN
        self.lod_rank_table = self.max_seq_len = self.step_idx = self.zero_idx = None
        self.mem_dict: dict = {}  # a memory's var in the block -> its array
        self.output_array: list = []
        self.outputs: list = []
        self.cond = self.helper.create_variable_for_type_inference("bool")
        self.cond.stop_gradient = False
        self.while_op = While(self.cond)
        self.input_array: list = []  # (array, dtype) of each step input
        self.mem_link: list = []  # (new value, its memory's array)

    def _parent(self):
        program = self.helper.main_program
        return program.block(program.current_block().parent_idx)

    def _in_block(self, method: str) -> None:
        if self.status != self.IN_RNN:
            raise ValueError(f"{method} can only be invoked inside rnn block.")

    def step_input(self, x, level: int = 0):
        """This step's element of each running sequence of the LoD tensor ``x``.

        Raises:
            ValueError: outside the block; TypeError: ``x`` is not a Variable.
        """
        self._in_block("step_input")
        _check("DynamicRNN.step_input", x)
        parent = self._parent()
        if self.lod_rank_table is None:
            self.lod_rank_table = parent.create_var(unique_name.generate("lod_rank_table"), type=RANK_TABLE,
                                                    stop_gradient=True)
            parent.append_op("lod_rank_table", {"X": [x]}, {"Out": [self.lod_rank_table]}, {"level": int(level)})
            self.max_seq_len = parent.create_var(unique_name.generate("dynamic_rnn_max_seq_len"), dtype="int64",
                                                 shape=[1])
            parent.append_op("max_sequence_len", {"RankTable": [self.lod_rank_table]}, {"Out": [self.max_seq_len]})
            parent.append_op("less_than", {"X": [self.step_idx], "Y": [self.max_seq_len]}, {"Out": [self.cond]},
                             {"force_cpu": True})
        array = parent.create_var(unique_name.generate("dynamic_rnn_input_array"), type=TENSOR_ARRAY, dtype=x.dtype)
        self.input_array.append((array, x.dtype))
        parent.append_op("lod_tensor_to_array", {"X": [x], "RankTable": [self.lod_rank_table]}, {"Out": [array]})
        return array_read(array, self.step_idx)

    def static_input(self, x):
        """The rows of ``x`` (one per sequence, or whole sequences) of the sequences still
        running, in the rank order the step inputs use.

        Raises:
            ValueError: outside the block; RuntimeError: before ``step_input``; TypeError:
                ``x`` is not a Variable.
        """
        self._in_block("static_input")
        if not isinstance(x, Variable):
            raise TypeError("static_input() can only take a Variable as its input")
        if self.lod_rank_table is None:
            raise RuntimeError("static_input() must be called after step_input().")
        parent = self._parent()
        reordered = parent.create_var(unique_name.generate("dynamic_rnn_static_input_reordered"), dtype=x.dtype)
        parent.append_op("reorder_lod_tensor_by_rank", {"X": [x], "RankTable": [self.lod_rank_table]},
                         {"Out": [reordered]})
        return shrink_memory(reordered, self.step_idx, self.lod_rank_table)

    @contextlib.contextmanager
    def block(self):
        """The ``with`` block of the ops of one time step (run ``max_sequence_len`` times).

        Raises:
            ValueError: entered a second time.
        """
        if self.status != self.BEFORE_RNN:
            raise ValueError("rnn.block() can only be invoke once")
        self.step_idx = fill_constant([1], "int64", 0, force_cpu=True)
        self.step_idx.stop_gradient = False
        self.status = self.IN_RNN
        with self.while_op.block():
            yield
            increment(self.step_idx, value=1.0, in_place=True)
            for new_mem, mem_array in self.mem_link:
                array_write(new_mem, self.step_idx, array=mem_array)
            less_than(self.step_idx, self.max_seq_len, force_cpu=True, cond=self.cond)
        self.status = self.AFTER_RNN
        self.outputs = [array_to_lod_tensor(array, self.lod_rank_table) for array in self.output_array]

    def __call__(self, *args, **kwargs):
        """The outputs as sequences: one Variable, or a list for several.

        Raises:
            ValueError: before the block has closed.
        """
        if self.status != self.AFTER_RNN:
            raise ValueError("Output of the dynamic RNN can only be visited outside the rnn block.")
        return self.outputs[0] if len(self.outputs) == 1 else self.outputs

    def memory(self, init=None, shape=None, value: float = 0.0, need_reorder: bool = False, dtype: str = "float32"):
        """A memory: ``init`` (one row per sequence; ``need_reorder`` puts its rows in the step
        inputs' rank order), or ``value`` in ``[batch] + shape``, kept for the running sequences.

        Raises:
            ValueError: outside the block, ``need_reorder`` or no ``init`` before ``step_input``.
            TypeError: ``init`` is not a Variable.
        """
        self._in_block("memory")
        parent = self._parent()
        if self.zero_idx is None:
            self.zero_idx = parent.create_var(unique_name.generate("zero_idx"), dtype="int64", shape=[1],
                                              stop_gradient=True)
            parent.append_op("fill_constant", {}, {"Out": [self.zero_idx]},
                             {"shape": [1], "dtype": "int64", "value": 0.0})
        if init is None:
            if not self.input_array:
                raise ValueError("step_input should be invoked before memory(shape=..., value=...)")
            first, first_dtype = self.input_array[0]
            step0 = parent.create_var(unique_name.generate("in0"), dtype=first_dtype)
            parent.append_op("read_from_array", {"X": [first], "I": [self.zero_idx]}, {"Out": [step0]})
            init = parent.create_var(unique_name.generate("mem_init"), dtype=dtype)
            parent.append_op("fill_constant_batch_size_like", {"Input": [step0]}, {"Out": [init]},
                             {"shape": [-1] + list(shape or []), "value": float(value), "dtype": dtype})
            return self.memory(init=init)
        if not isinstance(init, Variable):
            raise TypeError("The input arg `init` of memory() must be a Variable")
        if need_reorder:
            if self.lod_rank_table is None:
                raise ValueError("If set need_reorder to True, make sure step_input be invoked before "
                                 "memory(init=init, need_reordered=True, ...).")
            reordered = parent.create_var(unique_name.generate("dynamic_rnn_mem_init_reordered"), dtype=init.dtype)
            parent.append_op("reorder_lod_tensor_by_rank", {"X": [init], "RankTable": [self.lod_rank_table]},
                             {"Out": [reordered]})
            init = reordered
        mem_array = parent.create_var(unique_name.generate("dynamic_rnn_mem_array"), type=TENSOR_ARRAY,
                                      dtype=init.dtype)
        parent.append_op("create_array", {}, {"Out": [mem_array]}, {"dtype": init.dtype})
        parent.append_op("write_to_array", {"X": [init], "I": [self.zero_idx], "Array": [mem_array]},
                         {"Out": [mem_array]})
        mem = shrink_memory(array_read(mem_array, self.step_idx), self.step_idx, self.lod_rank_table)
        self.mem_dict[mem.name] = mem_array
        return mem

    def update_memory(self, ex_mem, new_mem) -> None:
        """Give the memory ``ex_mem`` the value ``new_mem`` for the next step.

        Raises:
            ValueError: outside the block, ``ex_mem`` is not a memory, or before ``step_input``.
            TypeError: an argument is not a Variable.
        """
        self._in_block("update_memory")
        if not isinstance(ex_mem, Variable):
            raise TypeError("The input arg `ex_mem` of update_memory() must be a Variable")
        if not isinstance(new_mem, Variable):
            raise TypeError("The input arg `new_mem` of update_memory() must be a Variable")
        mem_array = self.mem_dict.get(ex_mem.name)
        if mem_array is None:
            raise ValueError("Please invoke memory before update_memory")
        if self.lod_rank_table is None:
            raise ValueError("Please invoke step_input before update_memory")
        self.mem_link.append((new_mem, mem_array))

    def output(self, *outputs) -> None:
        """Mark ``outputs`` as the RNN's outputs: ``drnn()`` gives each as sequences.

        Raises:
            ValueError: outside the block.
        """
        self._in_block("output")
        parent = self._parent()
        for each in outputs:
            array = parent.create_var(unique_name.generate_with_ignorable_key(
                "_".join([self.helper.name, "output_array", each.name])), type=TENSOR_ARRAY, dtype=each.dtype)
            parent.append_op("create_array", {}, {"Out": [array]}, {"dtype": each.dtype})
            array_write(each, self.step_idx, array=array)
            self.output_array.append(array)
