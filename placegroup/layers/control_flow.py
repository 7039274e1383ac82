"""``fluid.layers.control_flow``: Fluid's control-flow layers.

Scripts import the module by this path. The comparisons Fluid keeps here are the ones of
placegroup/layers/ops.py, and so is ``increment``; ``Print`` and ``is_empty`` are here, as in
Fluid 1.8 (ops/misc.py). Loops and branches, each a sub-block the executor runs (NOTE(sub-blocks)
in executor/blocks.py) and ``append_backward`` differentiates (NOTE(block-grad) in
placegroup/model/backward_blocks.py): ``While`` and ``ConditionalBlock`` with the tensor arrays
(placegroup/layers/blocks.py), and built on them ``while_loop``, ``cond``, ``case``,
``switch_case``, ``Switch``, ``IfElse`` (a batch of rows split by a mask: ``split_lod_tensor``,
``merge_lod_tensor``) and ``DynamicRNN`` (placegroup/layers/dynamic_rnn.py). ``StaticRNN`` is
unrolled instead (placegroup/layers/static_rnn.py).

Example::

    import placegroup as fluid
    x = fluid.layers.data("x", shape=[3])
    h = fluid.layers.Print(fluid.layers.fc(x, 4), message="hidden", summarize=8, first_n=2)
    empty = fluid.layers.is_empty(x)
"""
from __future__ import annotations

import contextlib

from placegroup.ir import unique_name
from placegroup.ir.framework import Program, Variable
from placegroup.model.layer_helper import LayerHelper
from placegroup.layers.blocks import (ConditionalBlock, While, _sub_block, array_length, array_read,  # noqa: F401
                                      array_write, create_array)
from placegroup.layers.ops import (equal, greater_equal, greater_than, increment, less_equal, less_than,
                                   logical_and, logical_not, not_equal)
from placegroup.layers.dynamic_rnn import (DynamicRNN, array_to_lod_tensor, lod_rank_table,  # noqa: F401
                                           lod_tensor_to_array, max_sequence_len, reorder_lod_tensor_by_rank,
                                           shrink_memory)
from placegroup.layers.static_rnn import StaticRNN, StaticRNNMemoryLink  # noqa: F401  (Fluid binds both here)
from placegroup.layers.tensor import assign, cast, fill_constant

__all__ = ["equal", "greater_equal", "greater_than", "less_equal", "less_than", "not_equal", "increment", "Print",
           "is_empty", "While", "while_loop", "cond", "case", "switch_case", "Switch", "ConditionalBlock", "IfElse",
           "create_array", "array_write", "array_read", "array_length", "StaticRNN", "DynamicRNN",
           "reorder_lod_tensor_by_rank"]

_PRINTABLE = ("float32", "float64", "int32", "int64", "bool")
_PHASES = ("forward", "backward", "both")


def Print(input, first_n: int = -1, message=None, summarize: int = 20, print_tensor_name: bool = True,  # noqa: N802
          print_tensor_type: bool = True, print_tensor_shape: bool = True, print_tensor_lod: bool = True,
          print_phase: str = "both"):
    """Pass ``input`` through a ``print`` op that writes it to stderr each time it runs, in Fluid
    1.8's format (NOTE(print-format) in ops/misc.py): the message, then the var's name, shape
    and dtype, then its first ``summarize`` elements.

    Use the returned var afterwards: the gradient of ``input`` flows through it, and with
    ``print_phase`` "backward" or "both" the print op of the backward pass writes that gradient.

    Args:
        input: a float32, float64, int32, int64 or bool Variable.
        first_n: print only the first ``first_n`` times the op runs (<= 0: always); the count
            lives as long as the executor's plan of the program (NOTE(print-first-n)).
        message: a text written before the value.
        summarize: how many elements to write (-1: all).
        print_tensor_name, print_tensor_type, print_tensor_shape: write the name, the dtype,
            the shape.
        print_tensor_lod: accepted; a dense value has no LoD to write.
        print_phase: "forward", "backward" or "both".

    Returns:
        A new Variable equal to ``input`` (named ``print_<input>_<n>.tmp_0`` as in Fluid).

    Raises:
        TypeError: ``input`` is not a Variable of a printable dtype.
        ValueError: an unknown ``print_phase``.

    Thread-safety: the op writes each value in one write; build programs from one thread.

    Example::

        loss = fluid.layers.Print(loss, message="loss", first_n=10)
    """
    if not isinstance(input, Variable) or input.dtype not in _PRINTABLE:
        raise TypeError(f"Print: input must be a Variable of dtype {list(_PRINTABLE)}, got {input!r}")
    if str(print_phase).lower() not in _PHASES:
        raise ValueError(f"Print: print_phase must be one of {list(_PHASES)}, got {print_phase!r}")
    helper = LayerHelper("print_" + input.name)
    out = helper.create_variable_for_type_inference(input.dtype)
    helper.append_op("print", {"In": [input]}, {"Out": [out]},
                     {"first_n": int(first_n), "summarize": int(summarize), "message": message or "",
                      "print_tensor_name": bool(print_tensor_name), "print_tensor_type": bool(print_tensor_type),
                      "print_tensor_shape": bool(print_tensor_shape), "print_tensor_lod": bool(print_tensor_lod),
                      "print_phase": print_phase.upper(), "_tensor_name": input.name})
    return out


def is_empty(x, cond=None):
    """Whether ``x`` has no elements, as a bool Variable [1] computed at run time.

    Args:
        x: a float32, float64, int32 or int64 Variable.
        cond: a bool Variable to write the answer into (default: a new one).

    Returns:
        ``cond``, or the new bool Variable (no gradient).

    Raises:
        TypeError: ``cond`` is not bool.

    Example::

        empty = fluid.layers.is_empty(x)      # [False] for a batch with rows
    """
    helper = LayerHelper("is_empty")
    if cond is None:
        cond = helper.create_variable_for_type_inference("bool", stop_gradient=True)
    elif cond.dtype != "bool":
        raise TypeError(f"is_empty: cond must be a bool Variable, got {cond.dtype}")
    helper.append_op("is_empty", {"X": [x]}, {"Out": [cond]})
    return cond


# -- tensor arrays ---------------------------------------------------------------------------



def while_loop(cond, body, loop_vars, is_test: bool = False, name=None):
    """Fluid 1.8's ``while_loop``: ``while cond(*vars): vars = body(*vars)``; returns the vars.

    Args:
        cond: a function of the loop vars giving a bool Variable of one element.
        body: a function of the loop vars giving new values for them (as many, as a list or
            tuple, or one Variable for one var).
        loop_vars: a list or tuple of Variables.

    Raises:
        TypeError: ``cond`` or ``body`` is not callable, ``loop_vars`` is empty or not a
            list, or ``body`` returns another number of values.

    Example::

        i = fluid.layers.fill_constant([1], "int64", 0)
        ten = fluid.layers.fill_constant([1], "int64", 10)
        i, = fluid.layers.while_loop(lambda i: i < ten, lambda i: [i + 1], [i])
    """
    if not callable(cond) or not callable(body):
        raise TypeError("while_loop: cond and body must be callable")
    if not isinstance(loop_vars, (list, tuple)) or not loop_vars:
        raise TypeError("while_loop: loop_vars must be a non-empty list or tuple of Variables")
    pre = cond(*loop_vars)
    loop = While(pre, is_test, name)
    with loop.block():
        got = body(*loop_vars)
        got = list(got) if isinstance(got, (list, tuple)) else [got]
        if len(got) != len(loop_vars):
            raise TypeError(f"while_loop: body returns {len(got)} values for {len(loop_vars)} loop vars")
        for new, old in zip(got, loop_vars):
            assign(new, old)
        assign(cond(*loop_vars), pre)
    return list(loop_vars)


def select_input(inputs, mask):
    """``inputs[mask]``: the one of ``inputs`` an int32 [1] ``mask`` picks (what ``cond`` merges
    its branches with; a branch not taken leaves its outputs set to nothing, NOTE(sub-blocks)).

    Raises:
        TypeError: ``inputs`` is not a non-empty list of Variables, or ``mask`` is not int32.

    Example::

        out = fluid.layers.select_input([false_value, true_value], fluid.layers.cast(pred, "int32"))
    """
    if not isinstance(inputs, (list, tuple)) or not inputs or not all(isinstance(v, Variable) for v in inputs):
        raise TypeError(f"select_input: inputs must be a non-empty list of Variables, got {inputs!r}")
    if not isinstance(mask, Variable) or mask.dtype != "int32":
        raise TypeError(f"select_input: mask must be an int32 Variable, got {mask!r}")
    helper = LayerHelper("select_input")
    out = helper.block.create_var(unique_name.generate("select_input.tmp"), dtype=inputs[0].dtype,
                                  shape=inputs[0].shape, type=inputs[0].type)
    helper.append_op("select_input", {"X": list(inputs), "Mask": [mask]}, {"Out": [out]})
    return out


def select_output(input, outputs, mask):
    """``outputs[mask] = input``: the one of ``outputs`` an int32 [1] ``mask`` picks gets
    ``input``; the others are not written (``select_input``'s gradient). Returns ``outputs``.

    Raises:
        TypeError: ``input`` is not a Variable, ``outputs`` not a non-empty list of them, or
            ``mask`` not int32.

    Example::

        fluid.layers.control_flow.select_output(x, [out_false, out_true], fluid.layers.cast(pred, "int32"))
    """
    if not isinstance(input, Variable):
        raise TypeError(f"select_output: input must be a Variable, got {input!r}")
    if not isinstance(outputs, (list, tuple)) or not outputs or not all(isinstance(v, Variable) for v in outputs):
        raise TypeError(f"select_output: outputs must be a non-empty list of Variables, got {outputs!r}")
    if not isinstance(mask, Variable) or mask.dtype != "int32":
        raise TypeError(f"select_output: mask must be an int32 Variable, got {mask!r}")
    LayerHelper("select_output").append_op("select_output", {"X": [input], "Mask": [mask]}, {"Out": list(outputs)})
    return outputs


def split_lod_tensor(input, mask, level: int = 0):
    """``(the rows of input whose bool mask [N, 1] holds, the others)``, each in the rows' order:
    what IfElse's ``input`` gives its two blocks. A batch of rows; ``level`` is Fluid's, for a
    batch of sequences, which placegroup does not split yet.

    Raises:
        TypeError: ``input`` or ``mask`` is not a Variable, or ``mask`` is not bool.

    Example::

        positive, negative = fluid.layers.split_lod_tensor(x, fluid.layers.greater_than(col, zero))
    """
    _rows_check("split_lod_tensor", input, mask)
    helper = LayerHelper("split_lod_tensor")
    halves = [helper.create_variable_for_type_inference(input.dtype) for _ in range(2)]
    helper.append_op("split_lod_tensor", {"X": [input], "Mask": [mask]},
                     {"OutTrue": [halves[0]], "OutFalse": [halves[1]]}, {"level": int(level)})
    return tuple(halves)


def merge_lod_tensor(in_true, in_false, x, mask, level: int = 0):
    """The rows of ``in_true`` where the bool ``mask`` [N, 1] holds and of ``in_false``
    elsewhere, in the rows' order: the inverse of ``split_lod_tensor`` (``x`` is the batch that
    was split, as in Fluid).

    Raises:
        TypeError: an argument is not a Variable, or ``mask`` is not bool.

    Example::

        out = fluid.layers.merge_lod_tensor(positive * 2.0, negative, x, mask)
    """
    _rows_check("merge_lod_tensor", x, mask)
    for name, v in (("in_true", in_true), ("in_false", in_false)):
        if not isinstance(v, Variable):
            raise TypeError(f"merge_lod_tensor: {name} must be a Variable, got {v!r}")
    helper = LayerHelper("merge_lod_tensor")
    out = helper.create_variable_for_type_inference(in_true.dtype)
    helper.append_op("merge_lod_tensor", {"X": [x], "Mask": [mask], "InTrue": [in_true], "InFalse": [in_false]},
                     {"Out": [out]}, {"level": int(level)})
    return out


def _rows_check(layer: str, x, mask) -> None:
    if not isinstance(x, Variable):
        raise TypeError(f"{layer}: the input must be a Variable, got {x!r}")
    if not isinstance(mask, Variable) or mask.dtype != "bool":
        raise TypeError(f"{layer}: mask must be a bool Variable, got {mask!r}")


def copy_var_to_parent_block(var, layer_helper):
    """A var of the parent block that holds ``var``'s value after the block being built (an
    ``assign`` to it, appended here); None for None. What ``cond`` hands its branches' results
    out with.

    Raises:
        ValueError: called outside a sub-block.

    Example::

        with fluid.layers.control_flow.ConditionalBlock([flag], is_scalar_condition=True).block():
            out = copy_var_to_parent_block(x * 2.0, LayerHelper("branch"))
    """
    if var is None:
        return None
    program = layer_helper.main_program
    parent_idx = program.current_block().parent_idx
    if parent_idx < 0:
        raise ValueError("copy_var_to_parent_block: the current block is the global block, which has no parent")
    out = program.block(parent_idx).create_var(None, dtype=var.dtype, shape=var.shape, type=var.type)
    assign(var, out)
    return out


def _branch(pred_var, fn, helper):
    """Run ``fn`` inside a conditional_block on ``pred_var``; its outputs copied out."""
    outs = None
    with ConditionalBlock([pred_var], is_scalar_condition=True).block():
        got = fn()
        if got is not None:
            outs = [copy_var_to_parent_block(v, helper) for v in (got if isinstance(got, (list, tuple)) else [got])]
    return got, outs


class Switch:
    """Fluid's ``Switch``: the first ``case`` whose condition holds runs, else ``default``; each
    a conditional_block on that case's condition and-ed with the negation of the ones before,
    as Fluid builds it. Learning-rate schedules are its common use.

    Raises:
        ValueError: ``default`` before any ``case``; TypeError: a condition that is not a bool
            Variable of one element.

    Example::

        with fluid.layers.Switch() as switch:
            with switch.case(step < warmup):
                fluid.layers.assign(warmup_lr, lr)
            with switch.default():
                fluid.layers.assign(base_lr, lr)
    """

    def __init__(self, name=None) -> None:
        self.helper = LayerHelper("switch", name=name)
        self.inside_scope = False
        self.pre_not_conditions: list = []

    def case(self, condition):
        if not self.inside_scope:
            raise ValueError("Switch: case must be used inside `with Switch() as switch:`")
        if not isinstance(condition, Variable) or condition.dtype != "bool":
            raise TypeError(f"Switch.case: the condition must be a bool Variable, got {condition!r}")
        if not self.pre_not_conditions:
            block = ConditionalBlock([condition], is_scalar_condition=True)
            self.pre_not_conditions.append(logical_not(condition))
        else:
            pre = self.pre_not_conditions[-1]
            self.pre_not_conditions.append(logical_and(pre, logical_not(condition)))
            block = ConditionalBlock([logical_and(pre, condition)], is_scalar_condition=True)
        return block.block()

    def default(self):
        if not self.pre_not_conditions:
            raise ValueError("Switch: there should be at least one case before default")
        return ConditionalBlock([self.pre_not_conditions[-1]], is_scalar_condition=True).block()

    def __enter__(self):
        self.inside_scope = True
        return self

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.inside_scope = False
        return exc_type is None


class IfElse:
    """Fluid's ``IfElse``: the rows of a batch whose bool ``cond`` [N, 1] holds go through the
    true block, the others through the false block, and ``ie()`` merges each block's outputs
    back into the rows' order. ``ie.input(x)`` inside a block gives that block's rows of ``x``
    (``split_lod_tensor``); ``ie.output(*vars)`` names the block's results. Each block is a
    conditional_block on ``cond`` that runs when the batch has rows, as in Fluid.

    Raises:
        ValueError: ``input`` or ``output`` outside a block, ``ie()`` inside one or before any
            block, or blocks with different numbers of outputs.

    Example::

        ie = fluid.layers.IfElse(fluid.layers.less_than(x_col, limit))
        with ie.true_block():
            ie.output(ie.input(x) * 2.0)
        with ie.false_block():
            ie.output(ie.input(x) - 1.0)
        out, = ie()
    """

    OUT_IF_ELSE_BLOCKS, IN_IF_ELSE_TRUE_BLOCKS, IN_IF_ELSE_FALSE_BLOCKS = 0, 1, 2

    def __init__(self, cond, name=None) -> None:
        if not isinstance(cond, Variable) or cond.dtype != "bool":
            raise TypeError(f"IfElse: cond must be a bool Variable, got {cond!r}")
        self.cond, self.helper = cond, LayerHelper("ifelse", name=name)
        self.status = self.OUT_IF_ELSE_BLOCKS
        self.input_table: dict = {}
        self.output_table: tuple = ([], [])  # the false block's outputs, the true block's

    def _parent(self):
        program = self.helper.main_program
        return program.block(program.current_block().parent_idx)

    def input(self, x):
        if self.status == self.OUT_IF_ELSE_BLOCKS:
            raise ValueError("IfElse.input must be called inside true_block() or false_block()")
        if id(x) not in self.input_table:
            parent = self._parent()
            halves = [parent.create_var(unique_name.generate(f"ifelse_input_{self.helper.name}"), dtype=x.dtype)
                      for _ in range(2)]
            parent.append_op("split_lod_tensor", {"X": [x], "Mask": [self.cond]},
                             {"OutTrue": [halves[0]], "OutFalse": [halves[1]]}, {"level": 0})
            self.input_table[id(x)] = halves
        true_rows, false_rows = self.input_table[id(x)]
        return true_rows if self.status == self.IN_IF_ELSE_TRUE_BLOCKS else false_rows

    def output(self, *outs) -> None:
        if self.status == self.OUT_IF_ELSE_BLOCKS:
            raise ValueError("IfElse.output must be called inside true_block() or false_block()")
        table = self.output_table[1 if self.status == self.IN_IF_ELSE_TRUE_BLOCKS else 0]
        parent = self._parent()
        for out in outs:
            outside = parent.create_var(unique_name.generate(f"{self.helper.name}_output"), dtype=out.dtype)
            assign(out, outside)
            table.append(outside)

    @contextlib.contextmanager
    def _block(self, is_true: bool):
        if self.status != self.OUT_IF_ELSE_BLOCKS:
            raise ValueError("IfElse: a block cannot be opened inside another")
        with ConditionalBlock([self.cond]).block():
            self.status = self.IN_IF_ELSE_TRUE_BLOCKS if is_true else self.IN_IF_ELSE_FALSE_BLOCKS
            try:
                yield
            finally:
                self.status = self.OUT_IF_ELSE_BLOCKS

    def true_block(self):
        return self._block(True)

    def false_block(self):
        return self._block(False)

    def __call__(self) -> list:
        if self.status != self.OUT_IF_ELSE_BLOCKS:
            raise ValueError("IfElse() must be called outside its blocks")
        false_outs, true_outs = self.output_table
        if not false_outs and not true_outs:
            raise ValueError("IfElse: open true_block() or false_block() and call output() before IfElse()")
        if false_outs and true_outs and len(false_outs) != len(true_outs):
            raise ValueError(f"IfElse: the true block gives {len(true_outs)} outputs and the false block "
                             f"{len(false_outs)}; they must give as many")
        if not false_outs or not true_outs:
            return list(false_outs or true_outs)
        return [merge_lod_tensor(t, f, self.cond, self.cond) for f, t in zip(false_outs, true_outs)]


def case(pred_fn_pairs, default=None, name=None):
    """Fluid 1.8's ``case``: the function of the first pair whose bool [1] predicate holds, else
    ``default`` (else the last pair's function), built as nested ``cond``.

    Raises:
        TypeError: ``pred_fn_pairs`` is not a non-empty list of (bool Variable, callable) pairs.

    Example::

        out = fluid.layers.case([(x < y, lambda: a), (x == y, lambda: b)], default=lambda: c)
    """
    if not isinstance(pred_fn_pairs, (list, tuple)) or not pred_fn_pairs or not all(
            isinstance(p, (list, tuple)) and len(p) == 2 and callable(p[1]) for p in pred_fn_pairs):
        raise TypeError("case: pred_fn_pairs must be a non-empty list of (pred, fn) pairs")
    pairs = list(pred_fn_pairs)
    if default is None:
        pairs, (_, default) = pairs[:-1], pairs[-1]
        if not pairs:
            return default()
    pred, fn = pairs[0]
    rest = pairs[1:]
    return cond(pred, fn, (lambda: case(rest, default)) if rest else default)


def switch_case(branch_index, branch_fns, default=None, name=None):
    """Fluid 1.8's ``switch_case``: the function whose key equals the int [1] ``branch_index``,
    else ``default`` (else the one of the largest key). ``branch_fns``: a dict key -> fn, or a
    list of fns (keys 0, 1, ...) or of (key, fn) pairs.

    Raises:
        TypeError: ``branch_index`` is not an int Variable, or ``branch_fns`` has a function
            that is not callable or a key that is not an int.

    Example::

        out = fluid.layers.switch_case(index, {1: lambda: a, 2: lambda: b}, default=lambda: c)
    """
    if not isinstance(branch_index, Variable) or branch_index.dtype not in ("int32", "int64", "uint8"):
        raise TypeError(f"switch_case: branch_index must be an int Variable, got {branch_index!r}")
    if isinstance(branch_fns, dict):
        items = list(branch_fns.items())
    else:
        items = [p if isinstance(p, (list, tuple)) else (k, p) for k, p in enumerate(branch_fns)]
    if not items or not all(isinstance(k, int) and callable(f) for k, f in items):
        raise TypeError("switch_case: branch_fns must map int keys to callables")
    items.sort(key=lambda kf: kf[0])
    if default is None:
        items, (_, default) = items[:-1], items[-1]
    pairs = [(equal(branch_index, fill_constant([1], branch_index.dtype, k)), f) for k, f in items]
    return case(pairs, default) if pairs else default()


def cond(pred, true_fn=None, false_fn=None, name=None):
    """``true_fn()`` if the bool [1] ``pred`` holds, else ``false_fn()``, as Fluid 1.8 builds it:
    each branch a conditional_block, the result chosen by ``select_input``.

    Raises:
        TypeError: ``pred`` is not a bool Variable of one element, or a function is not callable.
        ValueError: one branch returns a value and the other None, or they return different
            numbers of values.

    Example::

        out = fluid.layers.cond(x_sum > limit, lambda: x * 2.0, lambda: x - 1.0)
    """
    if not isinstance(pred, Variable) or pred.dtype != "bool":
        raise TypeError(f"cond: pred must be a bool Variable of one element, got {pred!r}")
    for fn in (true_fn, false_fn):
        if fn is not None and not callable(fn):
            raise TypeError(f"cond: true_fn and false_fn must be callable or None, got {fn!r}")
    helper = LayerHelper("cond")
    true_out = _branch(pred, true_fn, helper)[1] if true_fn is not None else None
    false_out = _branch(logical_not(pred), false_fn, helper)[1] if false_fn is not None else None
    if true_out is None and false_out is None:
        return None
    if true_out is None or false_out is None:
        which = "true_fn" if true_out is None else "false_fn"
        raise ValueError(f"cond: {which} returns None while the other branch returns values")
    if len(true_out) != len(false_out):
        raise ValueError(f"cond: true_fn returns {len(true_out)} values and false_fn {len(false_out)}")
    mask = cast(pred, "int32")
    merged = [select_input([f, t], mask) for f, t in zip(false_out, true_out)]
    return merged[0] if len(merged) == 1 else merged


# -- Fluid's block guards: the ``with`` objects its layers open blocks with -------------------

class BlockGuard:
    """``with BlockGuard(program):`` builds a new block of ``program`` (a child of the current
    one); the block before it is current again after. The guards below open a layer's block.

    Raises:
        TypeError: ``main_program`` is not a Program.
    """

    def __init__(self, main_program) -> None:
        if not isinstance(main_program, Program):
            raise TypeError("BlockGuard takes a program")
        self.main_program = main_program

    def __enter__(self):
        self.main_program._create_block()

    def __exit__(self, exc_type, exc_val, exc_tb):
        self.main_program._rollback()
        return False


class _LayerGuard:
    """A guard over a layer's own block context (``self._cm``), as Fluid's guards wrap theirs."""

    _cm = None

    def __enter__(self):
        return self._cm.__enter__()

    def __exit__(self, exc_type, exc_val, exc_tb):
        return self._cm.__exit__(exc_type, exc_val, exc_tb)


class WhileGuard(_LayerGuard):
    """``with WhileGuard(loop):`` is ``with loop.block():``."""

    def __init__(self, while_op) -> None:
        if not isinstance(while_op, While):
            raise TypeError("WhileGuard takes a while op")
        self._cm = while_op.block()


class ConditionalBlockGuard(_LayerGuard):
    """``with ConditionalBlockGuard(cb):`` is ``with cb.block():``."""

    def __init__(self, block) -> None:
        if not isinstance(block, ConditionalBlock):
            raise TypeError(f"ConditionalBlockGuard: block must be a ConditionalBlock, got {block!r}")
        self._cm = block.block()


class IfElseBlockGuard(_LayerGuard):
    """``with IfElseBlockGuard(True, ie):`` is ``with ie.true_block():`` (False: the false block)."""

    def __init__(self, is_true: bool, ifelse) -> None:
        if not isinstance(ifelse, IfElse):
            raise TypeError("ifelse must be an instance of IfElse class")
        if ifelse.status != IfElse.OUT_IF_ELSE_BLOCKS:
            raise ValueError("You cannot invoke IfElse.block() inside a block")
        self._cm = ifelse.true_block() if is_true else ifelse.false_block()


class BlockGuardWithCompletion(_LayerGuard):
    """``with BlockGuardWithCompletion(rnn):`` is ``with rnn.step():`` (a StaticRNN)."""

    def __init__(self, rnn) -> None:
        if not isinstance(rnn, StaticRNN):
            raise TypeError("BlockGuardWithCompletion takes a StaticRNN")
        self._cm = rnn.step()
