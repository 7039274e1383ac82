"""``fluid.debugger``: a program as code-like text, a block as a Graphviz drawing, and Fluid's
"fast nan/inf" check, over placegroup's Program.

The text is Fluid 1.8's (``pprint_program_codes``)::

    // block-0  parent--1
    // variables
    Tensor x (tensor(type=float32, shape=[-1, 13]))
    LoDTensor words (level=1, tensor(type=int64, shape=[-1, 1]))

    // operators
    fc_0.tmp_0 = mul(X=x, Y=fc_0.w_0) [{x_num_col_dims=1,y_num_col_dims=1}]
    fill_0.tmp_0 = 0.5 [shape=[1]]

Fluid's functions read protobuf descs; these read placegroup's objects: ``repr_var`` and its
kin a ``Variable``, ``repr_op`` an ``Operator``, ``repr_attr`` one ``(name, value)`` item of
``op.attrs``. An op's attrs are its OpDef's (placegroup keeps no ``op_role``/``op_callstack``
attrs; ``str(program)`` shows roles and placements). With ``show_backward=False`` the text leaves
out the gradient side, as Fluid does: Fluid goes by ``@GRAD`` in names; here (names carry no
facts, docs/ir.md) it is the ops of role ``backward``, the vars they write, and every op that
reads or writes one of those vars (the optimizer's updates).

NOTE(fast-nan-inf): Fluid's ``prepare_fast_nan_inf_debug`` adds a one-input ``sum`` per var so
that its C++ executor, run with ``FLAGS_fast_check_nan_inf``, checks only those outputs and
raises at the first Inf/NaN; ``run_fast_nan_inf_debug`` catches the error and dumps the
persistables. placegroup's executor has no such flag, so the check is in the program itself:
``prepare_fast_nan_inf_debug`` appends one ``isfinite`` op per floating var that an op of the
block writes (its output var records the checked var in ``attrs["nan_inf_check_of"]``), and
``run_fast_nan_inf_debug`` fetches those flags with the step and raises ``FloatingPointError``
naming the first op, in program order, whose output is not finite. The flags are one bool per
var, so the check costs one extra reduction per var and no copies.

Thread-safety: the printers only read; ``prepare_fast_nan_inf_debug`` changes its program and
must not race a run of it.
"""
from __future__ import annotations

import random
import re
from typing import Any, Sequence

import numpy as np

from placegroup.errors import ConfigError
from placegroup.util.graphviz import GraphPreviewGenerator
from placegroup.ir import unique_name
from placegroup.ir.framework import Block, Program, Variable, default_main_program
from placegroup.model.layer_helper import LayerHelper
from placegroup.ir.variable import LOD_TENSOR, SELECTED_ROWS
from placegroup.io import save_persistables

# its functions, and what Fluid's module binds here too
__all__ = ["GraphPreviewGenerator", "LayerHelper", "Program", "Variable", "default_main_program", "draw_block_graphviz", "pprint_block_codes", "pprint_program_codes", "prepare_fast_nan_inf_debug",
           "repr_attr", "repr_data_type", "repr_lodtensor", "repr_op", "repr_selected_rows", "repr_tensor",
           "repr_tensor_array", "repr_var", "run_fast_nan_inf_debug"]

LOD_TENSOR_ARRAY = "lod_tensor_array"
# Fluid's proto numbers of the data types (VarType.BOOL = 0 ... FP64 = 6), which its descs hold
_dtype2str_ = ["bool", "int16", "int32", "int64", "float16", "float32", "float64"]
_CHECK_OF = "nan_inf_check_of"  # NOTE(fast-nan-inf)


def repr_data_type(type: Any) -> str:
    """A data type's name: Fluid's proto number (``5`` -> ``"float32"``), or placegroup's
    dtype (``"float32"``, ``VarType.FP32``, ``numpy.float32``).

    Raises:
        ValueError: a number that is no data type of Fluid's table (0..6).
    """
    if isinstance(type, (int, np.integer)) and not isinstance(type, bool):
        if not 0 <= int(type) < len(_dtype2str_):
            raise ValueError(f"data type number {type} is not one of Fluid's 0..{len(_dtype2str_) - 1} "
                             f"({', '.join(_dtype2str_)})")
        return _dtype2str_[int(type)]
    return np.dtype(str(type) if isinstance(type, str) else type).name


def _shape(var) -> str:
    return "?" if var.shape is None else str(list(var.shape))


def repr_tensor(proto) -> str:
    """``tensor(type=float32, shape=[-1, 13])`` for anything with ``dtype`` and ``shape``."""
    return "tensor(type={}, shape={})".format(repr_data_type(proto.dtype), _shape(proto))


reprtpl = "{ttype} {name} ({reprs})"


def repr_lodtensor(proto) -> str | None:
    """``Tensor x (...)`` or ``LoDTensor words (level=1, ...)``; None for another var type."""
    if proto.type != LOD_TENSOR:
        return None
    level = proto.lod_level
    reprs = repr_tensor(proto)
    return reprtpl.format(ttype="LoDTensor" if level > 0 else "Tensor", name=proto.name,
                          reprs="level=%d, %s" % (level, reprs) if level > 0 else reprs)


def repr_selected_rows(proto) -> str | None:
    """``SelectedRows emb@GRAD (tensor(...))``; None for another var type."""
    if proto.type != SELECTED_ROWS:
        return None
    return reprtpl.format(ttype="SelectedRows", name=proto.name, reprs=repr_tensor(proto))


def repr_tensor_array(proto) -> str | None:
    """``TensorArray a (level=0, tensor(...))``; None for another var type."""
    if proto.type != LOD_TENSOR_ARRAY:
        return None
    return reprtpl.format(ttype="TensorArray", name=proto.name,
                          reprs="level=%d, %s" % (proto.lod_level, repr_tensor(proto)))


type_handlers = [repr_lodtensor, repr_selected_rows, repr_tensor_array]


def repr_var(vardesc) -> str | None:
    """The first of ``type_handlers`` that knows the var's type; None when none does."""
    for handler in type_handlers:
        res = handler(vardesc)
        if res:
            return res
    return None


def repr_attr(desc) -> tuple[str, tuple[str, Any]]:
    """One attr, an item ``(name, value)`` of ``op.attrs``: ``("key=value", (key, value))``,
    a ``dtype`` attr's value given by its name."""
    key, value = desc
    if key == "dtype":
        value = repr_data_type(value)
    return "{key}={value}".format(key=key, value=str(value)), (key, value)


def _repr_op_fill_constant(optype, inputs, outputs, attrs) -> str | None:
    if optype == "fill_constant":
        return "{output} = {data} [shape={shape}]".format(output=",".join(outputs), data=attrs["value"],
                                                          shape=str(attrs["shape"]))
    return None


op_repr_handlers = [_repr_op_fill_constant]


def _slots(op, slots, given: dict) -> list[tuple[str, list[str]]]:
    """The op's slots that name vars, in its OpDef's order."""
    return [(s.name, given[s.name]) for s in slots if given.get(s.name)]


def repr_op(opdesc) -> str:
    """``out = type(X=x, Y=['a', 'b']) [{k=v,...}]`` for an ``Operator`` (a ``fill_constant``:
    ``out = value [shape=[...]]``)."""
    def value_of(args):
        return args[0] if len(args) == 1 else str(list(args))

    inputs = ["%s=%s" % (slot, value_of(args)) for slot, args in _slots(opdesc, opdesc.opdef.inputs, opdesc.inputs)]
    outputs = [value_of(args) for _, args in _slots(opdesc, opdesc.opdef.outputs, opdesc.outputs)]
    attrs, attr_dict = [], {}
    for item in sorted((k, v) for k, v in opdesc.attrs.items() if not k.startswith("_")):
        text, (key, value) = repr_attr(item)
        attrs.append(text)
        attr_dict[key] = value
    for handler in op_repr_handlers:
        res = handler(opdesc.type, inputs, outputs, attr_dict)
        if res:
            return res
    return "{outputs} = {optype}({inputs}) [{attrs}]".format(
        outputs=", ".join(outputs), optype=opdesc.type, inputs=", ".join(inputs), attrs="{%s}" % ",".join(attrs))


def _gradient_side(block) -> tuple[set, set]:
    """(ops, var names) of the block's gradient side: backward ops, the vars they write, and
    the ops that read or write one of those vars."""
    grads = {n for op in block.ops if op.role == "backward" for n in op.output_arg_names}
    ops = {id(op) for op in block.ops
           if op.role == "backward" or grads & set(op.input_arg_names + op.output_arg_names)}
    return ops, grads


def _as_block(block_desc) -> Block:
    if isinstance(block_desc, Block):
        return block_desc
    raise TypeError(f"expected a Block (program.block(i), program.global_block()), got {type(block_desc).__name__}")


def pprint_block_codes(block_desc, show_backward: bool = False) -> str:
    """A block as Fluid's code-like text: its vars, then its ops (module docstring).

    Args:
        block_desc: a Block.
        show_backward: also the gradient side (backward ops, gradients, updates).

    Raises:
        TypeError: not a Block.
    """
    block = _as_block(block_desc)
    hidden_ops, hidden_vars = (set(), set()) if show_backward else _gradient_side(block)
    var_reprs = [repr_var(v) or f"{v.type} {v.name}" for name, v in block.vars.items() if name not in hidden_vars]
    op_reprs = [repr_op(op) for op in block.ops if id(op) not in hidden_ops]
    tpl = "// block-{idx}  parent-{pidx}\n// variables\n{vars}\n\n// operators\n{ops}\n"
    return tpl.format(idx=block.idx, pidx=block.parent_idx, vars="\n".join(var_reprs), ops="\n".join(op_reprs))


def pprint_program_codes(program_desc) -> str:
    """Every block of a Program as ``pprint_block_codes`` writes it (no gradient side).

    Example::

        print(fluid.debugger.pprint_program_codes(fluid.default_main_program()))
    """
    if not isinstance(program_desc, Program):
        raise TypeError(f"expected a Program, got {type(program_desc).__name__}")
    return "\n".join(pprint_block_codes(program_desc.block(i)) for i in range(program_desc.num_blocks))


def draw_block_graphviz(block, highlights: Sequence[str] | None = None, path: str = "./temp.dot") -> None:
    """Draw a block: persistable vars as parameters, the other vars as arguments, ops as boxes,
    an edge per op input and output; writes ``path`` (``.dot``) and renders it to PDF.

    Args:
        block: a Block.
        highlights: regular expressions; vars and ops whose names match one (``re.match``),
            and their edges, are painted orange.
        path: where the ``.dot`` text goes; the PDF goes beside it.

    Raises:
        TypeError: not a Block, or a highlight that is not a string.
        placegroup.graphviz.GraphvizNotFound: Graphviz's ``dot`` is not installed (``path`` is
            written all the same).
    """
    block = _as_block(block)
    patterns = list(highlights or [])
    for p in patterns:
        if not isinstance(p, str):
            raise TypeError(f"draw_block_graphviz: highlights are regular expressions (str), got {p!r}")

    def need_highlight(name: str) -> bool:
        return any(re.match(p, name) for p in patterns)

    graph = GraphPreviewGenerator("some graph")
    nodes = {}
    for name, var in block.vars.items():
        if var.persistable:
            nodes[name] = graph.add_param(name, f"{var.type} {var.dtype}{_shape(var)}",
                                          highlight=need_highlight(name))
        else:
            nodes[name] = graph.add_arg(name, highlight=need_highlight(name))

    def link(opn, args, op_to_var: bool) -> None:
        for arg in args:
            if arg not in nodes:
                nodes[arg] = graph.add_arg(arg, highlight=need_highlight(arg))
            varn = nodes[arg]
            highlight = need_highlight(opn.description) or need_highlight(varn.description)
            if op_to_var:
                graph.add_edge(opn, varn, highlight=highlight)
            else:
                graph.add_edge(varn, opn, highlight=highlight)

    for op in block.ops:
        opn = graph.add_op(op.type, highlight=need_highlight(op.type))
        for _, args in _slots(op, op.opdef.inputs, op.inputs):
            link(opn, args, False)
        for _, args in _slots(op, op.opdef.outputs, op.outputs):
            link(opn, args, True)
    graph(path, show=False)


def _is_float(var) -> bool:
    try:
        return np.issubdtype(np.dtype(var.dtype), np.floating)
    except TypeError:
        return False


def prepare_fast_nan_inf_debug(_program: Program | None) -> None:
    """Append to each block an ``isfinite`` op per floating var an op of the block writes, for
    ``run_fast_nan_inf_debug`` to check (NOTE(fast-nan-inf)). Calling it again adds checks
    only for vars not checked yet.

    Args:
        _program: the program (None: the default main program); call it before ``transpile``.

    Raises:
        ConfigError: the program is transpiled already (one process's part of a job).
    """
    program = _program if _program is not None else default_main_program()
    if program.cluster is not None:
        raise ConfigError("prepare_fast_nan_inf_debug: this program is one process's part of a transpiled "
                          "job; add the checks to the model before DistributeTranspiler.transpile")
    for block in program.blocks:
        checked = {v.attrs[_CHECK_OF] for v in block.vars.values() if _CHECK_OF in v.attrs}
        written = {n for op in block.ops for n in op.output_arg_names}
        for name, var in list(block.vars.items()):
            if name in checked or name not in written or var.type != LOD_TENSOR or not _is_float(var):
                continue
            out = block.create_var(unique_name.generate("debug_var_" + name), shape=(1,), dtype="bool",
                                   stop_gradient=True, attrs={_CHECK_OF: name})
            block.append_op("isfinite", {"X": [name]}, {"Out": [out]}, infer=False)


def _first_bad(program: Program, bad: set) -> str:
    for block in program.blocks:
        for i, op in enumerate(block.ops):
            hit = [n for n in op.output_arg_names if n in bad]
            if hit:
                return (f"Operator `{op.type}` (op #{i} of block {block.idx}) output {hit[0]!r} contains Inf "
                        f"or NaN; the vars not finite after the step: {sorted(bad)}")
    return f"vars {sorted(bad)} contain Inf or NaN"


def run_fast_nan_inf_debug(executor, program=None, feed=None, fetch_list=None, feed_var_name: str = "feed",
                           fetch_var_name: str = "fetch", scope=None, return_numpy: bool = True,
                           use_program_cache: bool = False, dump_core: bool = True):
    """Run one step with ``executor`` as ``executor.run`` does; if it fails, or a check of
    ``prepare_fast_nan_inf_debug`` finds Inf or NaN, print the error, save the persistables to
    ``./core<n>.pdckpt`` (``fluid.io.save_persistables``) and return None, as Fluid does.

    Returns:
        What ``executor.run`` returns for ``fetch_list``; None after an error.

    Raises:
        ValueError: ``executor`` is None.
    """
    if executor is None:
        raise ValueError("run_fast_nan_inf_debug needs an executor")
    target = program if program is not None else default_main_program()
    prog = getattr(target, "program", target)  # a CompiledProgram runs its program
    user = list(fetch_list or [])
    checks = [(v.name, v.attrs[_CHECK_OF]) for b in prog.blocks for v in b.vars.values() if _CHECK_OF in v.attrs]
    try:
        out = executor.run(program=program, feed=feed, fetch_list=user + [c for c, _ in checks],
                           feed_var_name=feed_var_name, fetch_var_name=fetch_var_name, scope=scope,
                           return_numpy=return_numpy, use_program_cache=use_program_cache)
        flags = out[len(user):]
        bad = {var for (_, var), ok in zip(checks, flags) if not bool(np.asarray(np.array(ok)).ravel()[0])}
        if bad:
            raise FloatingPointError(_first_bad(prog, bad))
        return out[:len(user)]
    except Exception as e:  # noqa: BLE001 - Fluid's contract: report, dump, return None
        print("catch an exception:")
        print(e)
        if dump_core:
            core_filename = "core" + str(int(random.random() * 10000)) + ".pdckpt"
            save_persistables(executor, "./", main_program=prog, filename=core_filename, scope=scope)
            print("dumping a core into ./%s" % core_filename)
        return None
