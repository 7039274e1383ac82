"""``fluid.transpiler.details.program_utils``: a program as readable code, and small searches
and edits of a block's ops.

``program_to_code`` prints Fluid 1.8's format::

    { // block 0
        persist trainable parameter fc_0.w_0 : fluid.VarType.LOD_TENSOR.shape(13, 1).astype(VarType.FP32)
        var x : fluid.VarType.LOD_TENSOR.shape(-1, 13).astype(VarType.FP32)

        {Out=['fc_0.tmp_0']} = mul(inputs={X=['x'], Y=['fc_0.w_0']}, op_role = forward, x_num_col_dims = 1, y_num_col_dims = 1)
    }

An op's attrs are its OpDef's (not those starting with ``_``) and ``op_role``, placegroup's
role of the op (``forward``, ``backward``, ``optimize``, ...; Fluid prints its role number
there). Slots are those the op names vars in, in its OpDef's order. placegroup keeps no
``op_callstack``, so ``skip_op_callstack`` changes nothing.

Thread-safety: the printers and searches only read; ``delete_ops`` changes its block.
"""
from __future__ import annotations

import logging
import sys
from typing import IO, Any, Iterable

from placegroup.ir.variable import LOD_TENSOR, SELECTED_ROWS

__all__ = ["block_to_code", "delete_ops", "find_op_by_input_arg", "find_op_by_output_arg", "get_indent_space",
           "op_to_code", "program_to_code", "variable_to_code"]

log = logging.getLogger("placegroup.transpiler")


# placegroup's dtype and var-type names -> the names of Fluid's VarType members (fluid.core's
# VarDesc.VarType has them too; the IR's layer does not import fluid.core)
_VAR_TYPES = {"bool": "BOOL", "uint8": "UINT8", "int8": "INT8", "int16": "INT16", "int32": "INT32",
              "int64": "INT64", "float16": "FP16", "float32": "FP32", "float64": "FP64",
              "lod_tensor": "LOD_TENSOR", "selected_rows": "SELECTED_ROWS", "lod_tensor_array": "LOD_TENSOR_ARRAY",
              "lod_rank_table": "LOD_RANK_TABLE", "feed_minibatch": "FEED_MINIBATCH", "fetch_list": "FETCH_LIST",
              "step_scopes": "STEP_SCOPES", "place_list": "PLACE_LIST", "reader": "READER", "raw": "RAW"}


def type_repr(value: Any) -> str:
    """A var type or dtype as Fluid prints its ``VarType``: ``"float32"`` -> ``VarType.FP32``,
    ``"lod_tensor"`` -> ``VarType.LOD_TENSOR``; a value with no VarType member as it is."""
    name = _VAR_TYPES.get(str(value))
    return "VarType." + name if name else str(value)


def _shape(shape) -> str:
    return "(?)" if shape is None else str(tuple(shape))


def delete_ops(block, ops: Iterable) -> None:
    """Remove each op of ``ops`` from ``block``; one that is not in it is logged and skipped
    (``placegroup.transpiler`` log, a warning), as Fluid prints and goes on."""
    for op in ops:
        try:
            idx = next(i for i, o in enumerate(block.ops) if o is op)
        except StopIteration:
            log.warning("delete_ops: op `%s` is not in block %d; skipped", getattr(op, "type", op), block.idx)
            continue
        block.remove_op(idx)


def find_op_by_input_arg(block, arg_name: str) -> int:
    """The index of the first op of ``block`` that reads ``arg_name``, or -1."""
    for index, op in enumerate(block.ops):
        if arg_name in op.input_arg_names:
            return index
    return -1


def find_op_by_output_arg(block, arg_name: str, reverse: bool = False) -> int:
    """The index of the first (``reverse``: last) op of ``block`` that writes ``arg_name``, or -1."""
    indices = range(len(block.ops) - 1, -1, -1) if reverse else range(len(block.ops))
    for index in indices:
        if arg_name in block.ops[index].output_arg_names:
            return index
    return -1


def get_indent_space(indent: int, space_num: int = 4) -> str:
    """``indent * space_num`` spaces."""
    return " " * (indent * space_num)


def variable_to_code(var) -> str:
    """One var as Fluid's code-like line: ``[persist ][trainable ]parameter|var name : fluid.<type>
    .shape(<shape>).astype(<dtype>)`` (a var neither dense nor SelectedRows has no shape or dtype)."""
    if var.type in (SELECTED_ROWS, LOD_TENSOR):
        var_str = "{name} : fluid.{type}.shape{shape}.astype({dtype})".format(
            name=var.name, type=type_repr(var.type), shape=_shape(var.shape), dtype=type_repr(var.dtype))
    else:
        var_str = "{name} : fluid.{type}".format(name=var.name, type=type_repr(var.type))
    if var.is_parameter:
        var_str = ("trainable parameter " if var.trainable else "parameter ") + var_str
    else:
        var_str = "var " + var_str
    if var.persistable:
        var_str = "persist " + var_str
    return var_str


def _slots_code(declared, given: dict) -> str:
    return "{" + ", ".join(f"{s.name}={given[s.name]}" for s in declared if s.name in given) + "}"


def op_to_code(op, skip_op_callstack: bool = True) -> str:
    """One op as Fluid's code-like line: ``{Out=['y']} = type(inputs={X=['x']}, attr = value, ...)``
    (module docstring for which attrs)."""
    outputs_str = _slots_code(op.opdef.outputs, op.outputs)
    inputs_str = _slots_code(op.opdef.inputs, op.inputs)
    attrs = {k: v for k, v in op.attrs.items() if not k.startswith("_")}
    attrs["op_role"] = op.role
    attrs_str = ", ".join(f"{name} = {attrs[name]}" for name in sorted(attrs))
    call = f"{op.type}(inputs={inputs_str}, {attrs_str})"
    return f"{outputs_str} = {call}" if outputs_str != "{}" else call


def block_to_code(block, block_idx: int, fout: IO | None = None, skip_op_callstack: bool = False) -> None:
    """Print ``block`` (its vars sorted by name, then its ops) to ``fout`` (default stdout)."""
    out = fout if fout is not None else sys.stdout
    print("{0}{1} // block {2}".format(get_indent_space(0), "{", block_idx), file=out)
    all_vars = sorted(block.vars.items(), key=lambda x: x[0])
    for _, var in all_vars:
        print("{}{}".format(get_indent_space(1), variable_to_code(var)), file=out)
    if all_vars:
        print("", file=out)
    for op in block.ops:
        print("{}{}".format(get_indent_space(1), op_to_code(op, skip_op_callstack)), file=out)
    print("{0}{1}".format(get_indent_space(0), "}"), file=out)


def program_to_code(prog, fout: IO | None = None, skip_op_callstack: bool = True) -> None:
    """Print every block of ``prog`` as ``block_to_code`` does.

    Example::

        import io
        buf = io.StringIO()
        program_to_code(fluid.default_main_program(), fout=buf)
    """
    for block_idx, block in enumerate(prog.blocks):
        block_to_code(block, block_idx, fout, skip_op_callstack)
