"""``fluid.layers.StaticRNN``: Fluid 1.8's RNN over sequences of one fixed length, unrolled.

NOTE(static-rnn-unroll): Fluid 1.8 runs a StaticRNN as one ``recurrent`` op that owns the step's
sub-block. placegroup unrolls it instead. The ops appended inside ``with rnn.step():`` are
recorded once, in a sub-block; when the block closes, ``unroll`` copies them T times into the
block the RNN was made in, and the sub-block is removed from the program. Each copy ``t``
reads:

* for each step input ``x`` [T, ...]: its slice ``t`` (one ``unstack`` op per input, before
  the copies);
* for each memory: the value the copy ``t - 1`` gave it with ``update_memory``; copy 0 reads
  the memory's init (the ``init`` var, or a ``fill_constant_batch_size_like`` from
  ``batch_ref``, as Fluid builds it);
* for every other var made inside the step: the copy's own var, named ``<name>@step<t>``.

Parameters (fc weights, ...) are made once, in the global block, with Fluid's names, and every
copy reads them. A random op of the step (``dropout``, ``uniform_random``, ...) whose seed is not
fixed gets a seed of its own in each copy after the first, derived from its seed and the step,
so each step draws anew, as Fluid's ``recurrent`` op does when it runs the op again each step;
a seed the user fixed stays the same in every copy, as it does there. Each step output is ``stack``-ed along axis 0 after the copies. The program
thus holds only ordinary ops, so ``append_backward`` differentiates it with their own gradient
rules; a parameter's gradient is the sum over the copies (its fan-in). The price: the program
holds T copies of the step, and T must be known when the program is built.
"""
from __future__ import annotations

import contextlib
import hashlib

from placegroup.datafeed.dtype_checks import check_type
from placegroup.errors import ProgramError
from placegroup.ir import unique_name
from placegroup.ir.framework import Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.ops.registry import get_op_def

__all__ = ["StaticRNN", "StaticRNNMemoryLink"]


class StaticRNNMemoryLink:
    """One memory of a StaticRNN: its ``init`` (a var outside the step), ``pre_mem`` (the var
    the step reads: the previous step's value) and ``mem`` (the var ``update_memory`` named:
    this step's value). Internal to StaticRNN, as in Fluid."""

    def __init__(self, init, pre_mem, mem=None) -> None:
        self.init = init
        self.pre_mem = pre_mem
        self.mem = mem


class StaticRNN:
    """Fluid 1.8's ``StaticRNN``: a recurrent network over step inputs of shape [T, ...], all of
    one length T, whose step is the ops built inside ``with rnn.step():``.

    placegroup unrolls it (NOTE(static-rnn-unroll)): when the ``with`` block closes, the program
    gets T copies of the step's ops, one per time step, instead of Fluid's ``recurrent`` op.
    What that means for a script:

    * T, the first dim of each step input, must be known when the program is built (the batch
      dim may stay -1). Transpose a [batch, T, ...] input to [T, batch, ...] first, as Fluid's
      examples do.
    * The program grows with T: the printed program shows each step's ops, their vars named
      ``<name>@step<t>``.
    * The vars made inside the step (``h`` below) exist only as those per-step copies; read the
      results through ``rnn()``.
    * The numbers, the parameters and their names, and the gradients are Fluid's.

    Args:
        name: the RNN's name (default ``static_rnn_<n>``), the prefix of its vars' names.

    Raises:
        TypeError: ``name`` is not a str or None.

    Thread-safety: build programs from one thread.

    Example::

        x = fluid.layers.data("x", shape=[4, 8], dtype="float32", append_batch_size=False)  # [T=4, B=8]
        x = fluid.layers.reshape(x, [4, 8, 1])
        rnn = fluid.layers.StaticRNN()
        with rnn.step():
            x_t = rnn.step_input(x)                                  # [8, 1]
            h_pre = rnn.memory(shape=[-1, 32], batch_ref=x_t)        # zeros [8, 32] at step 0
            h = fluid.layers.fc([x_t, h_pre], size=32, act="tanh")
            rnn.update_memory(h_pre, h)
            rnn.step_output(h)
        out = rnn()                                                  # [4, 8, 32]
    """

    BEFORE_RNN_BLOCK, IN_RNN_BLOCK, AFTER_RNN_BLOCK = 0, 1, 2

    def __init__(self, name=None) -> None:
        check_type(name, "name", (str, type(None)), "fluid.layers.StaticRNN")
        self.helper = LayerHelper("static_rnn", name=name)
        self.memories: dict[str, StaticRNNMemoryLink] = {}  # pre_mem's name -> its link
        self.inputs: list[Variable] = []  # the step's vars of the step inputs
        self.outputs: list[Variable] = []  # the [T, ...] vars of the step outputs, in the parent block
        self._output_steps: list[Variable] = []  # the step's vars each output stacks
        self.status = self.BEFORE_RNN_BLOCK
        self.seq_len: int | None = None
        self._block = None  # the step's block, while the step is built

    @contextlib.contextmanager
    def step(self):
        """The ``with`` block whose ops make one step; it unrolls them when it closes.

        Raises:
            ValueError: ``step()`` entered a second time, or (on closing) no ``step_input``,
                a memory without ``update_memory``, or an op that writes a step input or a
                memory's previous value.
            ProgramError: the step holds a control-flow block (``While``, ``cond``, ...),
                which placegroup does not unroll yet.
        """
        if self.status != self.BEFORE_RNN_BLOCK:
            raise ValueError(f"StaticRNN {self.helper.name}: step() can be entered only once")
        program = self.helper.main_program
        self._block = block = program._create_block()
        self.status = self.IN_RNN_BLOCK
        try:
            yield
            self._complete(block)
        finally:
            self.status = self.AFTER_RNN_BLOCK  # also after an error: the step's block is gone
            program.current_block_idx = block.parent_idx
            # every block from this one on was made inside the step: none is left referenced
            del program.blocks[block.idx:]
            program._bump()

    def _assert_in_rnn_block_(self, method: str) -> None:
        if self.status != self.IN_RNN_BLOCK:
            raise ValueError(f"You must invoke {method} in rnn block")

    def _parent_block(self):
        return self._block.program.block(self._block.parent_idx)

    def memory(self, init=None, shape=None, batch_ref=None, init_value: float = 0.0, init_batch_dim_idx: int = 0,
               ref_batch_dim_idx: int = 1):
        """A memory: a var that holds, at each step, what the previous step gave it with
        ``update_memory``, and at step 0 ``init``, or, without ``init``, ``init_value`` in
        ``shape`` whose dim ``init_batch_dim_idx`` is dim ``ref_batch_dim_idx`` of ``batch_ref``.

        As in Fluid, that fill is made outside the step: a ``batch_ref`` that is a step input
        stands for the whole [T, batch, ...] sequence, so the default ``ref_batch_dim_idx=1``
        is its batch dim.

        Args:
            init: a var made outside the step, the memory's value at step 0.
            shape: the memory's shape, -1 for the batch dim (without ``init``).
            batch_ref: a step input or a var made outside the step (without ``init``).
            init_value: the value of every element at step 0 (without ``init``).
            init_batch_dim_idx, ref_batch_dim_idx: the batch dims of the memory and of
                ``batch_ref``.

        Returns:
            The memory's var for this step.

        Raises:
            ValueError: outside ``step()``; neither ``init`` nor both ``shape`` and
                ``batch_ref``; ``init`` or ``batch_ref`` made inside the step (not a step input).
            TypeError: an argument of the wrong type.

        Example::

            h_pre = rnn.memory(init=h0)
        """
        self._assert_in_rnn_block_("memory")
        where = "fluid.layers.StaticRNN.memory"
        check_type(init, "init", (Variable, type(None)), where)
        check_type(shape, "shape", (list, tuple, type(None)), where)
        check_type(batch_ref, "batch_ref", (Variable, type(None)), where)
        parent = self._parent_block()
        if init is None:
            if shape is None or batch_ref is None:
                raise ValueError("if init is None, memory at least need shape and batch_ref")
            if not parent.has_var(batch_ref.name):
                raise ValueError(f"StaticRNN.memory: batch_ref {batch_ref.name!r} is made inside the step; give a "
                                 f"step input or a var made outside the step")
            boot = parent.create_var(unique_name.generate_with_ignorable_key(f"{self.helper.name}@memory_boot"),
                                     dtype=batch_ref.dtype, stop_gradient=True)
            parent.append_op("fill_constant_batch_size_like", {"Input": [parent.var(batch_ref.name)]},
                             {"Out": [boot]},
                             {"value": float(init_value), "shape": [int(d) for d in shape], "dtype": batch_ref.dtype,
                              "input_dim_idx": int(ref_batch_dim_idx), "output_dim_idx": int(init_batch_dim_idx)})
            return self.memory(init=boot)
        if init.name in self._block.vars or not parent.has_var(init.name):
            raise ValueError(f"StaticRNN.memory: init {init.name!r} is made inside the step; the memory's value "
                             f"at step 0 must be made outside it")
        pre_mem = self._block.create_var(unique_name.generate_with_ignorable_key(f"{self.helper.name}@mem"),
                                         dtype=init.dtype, shape=init.shape)
        self.memories[pre_mem.name] = StaticRNNMemoryLink(init=init, pre_mem=pre_mem)
        return pre_mem

    def step_input(self, x):
        """Mark ``x`` [T, ...] as a sequence the RNN steps through.

        Args:
            x: a Variable made outside the step whose first dim, T, is known (> 0).

        Returns:
            The var of this step's slice of ``x``, of shape ``x.shape[1:]``.

        Raises:
            ValueError: outside ``step()``; T unknown or 0; a T other than the other inputs'.
            TypeError: ``x`` is not a Variable.

        Example::

            word = rnn.step_input(emb)        # emb [T, B, H] -> word [B, H]
        """
        self._assert_in_rnn_block_("step_input")
        check_type(x, "x", Variable, "fluid.layers.StaticRNN.step_input")
        if not x.shape or x.shape[0] is None or x.shape[0] <= 0:
            raise ValueError(f"StaticRNN.step_input: placegroup unrolls a StaticRNN, so the first dim of x (the "
                             f"sequence length T) must be known when the program is built; x {x.name!r} has shape "
                             f"{list(x.shape) if x.shape is not None else None}. Give the input a fixed length, or "
                             f"transpose a [batch, T, ...] input to [T, batch, ...]")
        if self.seq_len is None:
            self.seq_len = int(x.shape[0])
        elif self.seq_len != x.shape[0]:
            raise ValueError(f"Static RNN only take fix seq_len input: {x.name!r} has length {x.shape[0]}, the "
                             f"inputs before it {self.seq_len}")
        for ipt in self.inputs:
            if ipt.name == x.name:
                return ipt
        if x.name in self._block.vars or not self._parent_block().has_var(x.name):
            raise ValueError(f"StaticRNN.step_input: x {x.name!r} is made inside the step; give a var made outside")
        # the step's var has x's own name, as in Fluid: inside the step the name means this step's slice
        ipt = self._block.create_var(x.name, dtype=x.dtype, shape=list(x.shape[1:]), type=x.type)
        self.inputs.append(ipt)
        return ipt

    def step_output(self, o) -> None:
        """Mark ``o`` as an output: ``rnn()`` gives its values at every step, stacked [T, ...].

        Raises:
            ValueError: outside ``step()``. TypeError: ``o`` is not a Variable.

        Example::

            rnn.step_output(h)
        """
        self._assert_in_rnn_block_("step_output")
        check_type(o, "o", Variable, "fluid.layers.StaticRNN.step_output")
        name = unique_name.generate_with_ignorable_key(f"{self.helper.name}.tmp")
        self.outputs.append(self._parent_block().create_var(name, dtype=o.dtype))
        self._output_steps.append(o)

    def output(self, *outputs) -> None:
        """``step_output`` of each of ``outputs``, in order.

        Example::

            rnn.output(h, word)
        """
        for each in outputs:
            self.step_output(each)

    def update_memory(self, mem, var) -> None:
        """Give memory ``mem`` the value ``var`` (a var of this step, of ``mem``'s shape and
        dtype) for the next step.

        Raises:
            ValueError: outside ``step()``; ``mem`` is not a memory of this RNN; ``var``'s
                dtype or shape differs from ``mem``'s.
            TypeError: ``mem`` or ``var`` is not a Variable.

        Example::

            rnn.update_memory(h_pre, h)
        """
        self._assert_in_rnn_block_("update_memory")
        check_type(mem, "mem", Variable, "fluid.layers.StaticRNN.update_memory")
        check_type(var, "var", Variable, "fluid.layers.StaticRNN.update_memory")
        link = self.memories.get(mem.name)
        if link is None:
            raise ValueError(f"StaticRNN.update_memory: {mem.name!r} is not a memory of {self.helper.name}; "
                             f"make it with rnn.memory(...)")
        if var.dtype != mem.dtype or not _same_shape(var.shape, mem.shape):
            raise ValueError(f"StaticRNN.update_memory: memory {mem.name!r} is {mem.dtype}{list(mem.shape or [])} "
                             f"but var {var.name!r} is {var.dtype}{list(var.shape or [])}; they must match")
        link.mem = var

    def __call__(self, *args, **kwargs):
        """The outputs, each [T, ...]: one Variable, or a list of them for several.

        Raises:
            ValueError: inside or before ``step()``, or no output was marked.
        """
        if self.status != self.AFTER_RNN_BLOCK:
            raise ValueError("RNN output can only be retrieved after rnn block")
        if not self.outputs:
            raise ValueError("RNN has no output")
        return self.outputs[0] if len(self.outputs) == 1 else list(self.outputs)

    def _complete(self, block) -> None:
        """Check the step, then unroll it into the parent block."""
        if self.seq_len is None:
            raise ValueError(f"StaticRNN {self.helper.name}: the step has no step_input; call rnn.step_input(x) "
                             f"inside it")
        for link in self.memories.values():
            if link.mem is None:
                raise ValueError(f"{link.init.name} should be updated in every step: call "
                                 f"rnn.update_memory({link.pre_mem.name}, new_value) inside the step")
        fixed = {v.name for v in self.inputs} | set(self.memories)
        for i, op in enumerate(block.ops):
            if get_op_def(op.type).sub_block:
                raise ProgramError(f"StaticRNN {self.helper.name}: op #{i} {op.type!r} of the step owns a block; "
                                   f"placegroup unrolls a StaticRNN and does not unroll control flow inside its step yet")
            written = fixed.intersection(op.output_arg_names)
            if written:
                raise ValueError(f"StaticRNN {self.helper.name}: op #{i} {op.type!r} writes {sorted(written)}, a step "
                                 f"input or a memory's previous value; use rnn.update_memory for a memory")
        unroll(block, self._parent_block(), self.seq_len, self.inputs, list(self.memories.values()),
               list(zip(self._output_steps, self.outputs)))


def _same_shape(a, b) -> bool:
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(-1 in (p, q) or p == q for p, q in zip(a, b))


def unroll(step, parent, seq_len: int, inputs, links, outputs) -> None:
    """Append ``seq_len`` copies of block ``step``'s ops to block ``parent``
    (NOTE(static-rnn-unroll)); ``step`` itself is left as it is.

    Args:
        step: the step's block.
        parent: the block to append to.
        seq_len: T.
        inputs: the step's vars of the step inputs (each named as its [T, ...] var outside).
        links: the memories (``StaticRNNMemoryLink``s, each with its ``mem`` set).
        outputs: (the step's var, the [T, ...] var of ``parent`` it is stacked into) pairs.

    Raises:
        ProgramError: an op copy fails its OpDef's checks; ``parent`` is then left as it was.
    """
    pre = {link.pre_mem.name: link for link in links}
    per_step = [n for n, v in step.vars.items() if n not in pre and not v.persistable]  # in order: stable programs
    local = set(per_step)

    def at(name: str, t: int) -> str:
        """The name the var ``name`` of the step has in the copy ``t``."""
        if name in pre:
            link = pre[name]
            return link.init.name if t == 0 else at(link.mem.name, t - 1)
        return f"{name}@step{t}" if name in local else name

    kept_ops, kept_vars = len(parent.ops), dict(parent.vars)
    try:
        for name, var in step.vars.items():  # a persistable var made in the step is one var for all steps
            if name not in pre and var.persistable and not parent.has_var(name):
                _copy_var(parent, var, name)
        for t in range(seq_len):
            for name in per_step:
                _copy_var(parent, step.vars[name], at(name, t))
        for ipt in inputs:
            parent.append_op("unstack", {"X": [parent.var(ipt.name)]},
                             {"Y": [at(ipt.name, t) for t in range(seq_len)]}, {"axis": 0, "num": seq_len})
        for t in range(seq_len):
            for op in step.ops:
                copy = parent.append_op(op.type, {s: [at(n, t) for n in ns] for s, ns in op.inputs.items()},
                                        {s: [at(n, t) for n in ns] for s, ns in op.outputs.items()},
                                        _step_seed(op.attrs, t), role=op.role, place=op.place)
                copy.edges, copy.param = dict(op.edges), op.param
        for inner, outer in outputs:
            parent.append_op("stack", {"X": [at(inner.name, t) for t in range(seq_len)]}, {"Y": [outer]}, {"axis": 0})
    except Exception:
        del parent.ops[kept_ops:]
        parent.vars.clear()
        parent.vars.update(kept_vars)
        parent.program._bump()
        raise


def _step_seed(attrs, t: int) -> dict:
    """The attrs of step ``t``'s copy of an op: a random op whose seed is not fixed (dropout
    without ``fix_seed``, a random op with ``per_step``) gets its own seed after step 0."""
    attrs = dict(attrs)
    if t and attrs.get("seed") and not attrs.get("fix_seed", False) and attrs.get("per_step", True):
        digest = hashlib.blake2b(f"{attrs['seed']}@step{t}".encode(), digest_size=4).digest()
        attrs["seed"] = int.from_bytes(digest, "little") & 0x7FFFFFFF or 1
    return attrs


def _copy_var(block, var, name: str) -> None:
    block.create_var(name, shape=var.shape, dtype=var.dtype, persistable=var.persistable,
                     stop_gradient=var.stop_gradient, type=var.type, lod_level=var.lod_level, place=var.place,
                     attrs=var.attrs)
