"""Fluid 1.8's ``fluid.contrib.model_stat``: ``summary``, a table of a program's parameter and
FLOP counts per op, printed.

It counts the ops Fluid 1.8's does: conv2d and depthwise_conv2d, pool2d, an fc's mul (a mul
whose output's name holds "fc"), sigmoid, tanh, relu, leaky_relu, prelu and batch_norm; every
other op is left out. Shapes are the vars' declared shapes, less the batch dim. The table is
drawn as Fluid's PrettyTable draws it, right aligned (placegroup draws it itself: no
prettytable dependency).

Example::

    from placegroup.contrib.model_stat import summary
    summary(fluid.default_main_program())
"""
from __future__ import annotations

from collections import OrderedDict

__all__ = ["summary"]

_ACTS = ("sigmoid", "tanh", "relu", "leaky_relu", "prelu")


def summary(main_prog) -> None:
    """Print the table of every counted op of every block, then the totals.

    Args:
        main_prog: the Program.

    Example::

        summary(main_program)
        # +-----+--------+-------------+-------------+--------+--------+
        # | No. |   TYPE |       INPUT |      OUTPUT | PARAMs |  FLOPs |
        # ...
        # Total PARAMs: 48017344(48.0173M)
    """
    rows = []
    for block in main_prog.blocks:
        for op in block.ops:
            res = _summary_model(block.vars, op)
            if res is None:
                continue
            info = OrderedDict()
            info["type"] = op.type
            info["input_shape"] = tuple(res[0][1:])
            info["out_shape"] = tuple(res[1][1:])
            info["PARAMs"] = res[2]
            info["FLOPs"] = res[3]
            rows.append(info)
    table, total = _format_summary(rows)
    _print_summary(table, total)


def _shape(block_vars, name: str) -> tuple:
    return tuple(block_vars[name].shape)


def _summary_model(block_vars, op):
    """(input shape, output shape, params, flops) of one op, or None for an op not counted."""
    if op.type in ("conv2d", "depthwise_conv2d"):
        c_out, c_in, k_h, k_w = _shape(block_vars, op.input("Filter")[0])
        in_shape = _shape(block_vars, op.input("Input")[0])
        out_shape = _shape(block_vars, op.output("Output")[0])
        _, c_out2, h_out, w_out = out_shape
        if c_out != c_out2:
            raise ValueError(f"summary: {op.type} has {c_out} filters but its output {list(out_shape)} has "
                             f"{c_out2} channels")
        kernel_ops = k_h * k_w * (c_in / op.attr("groups"))
        bias_ops = 0 if op.input("Bias") == [] else 1
        params = c_out * (kernel_ops + bias_ops)
        flops = 2 * h_out * w_out * c_out * (kernel_ops + bias_ops)  # a multiply and an add, as Fluid
    elif op.type == "pool2d":
        in_shape = _shape(block_vars, op.input("X")[0])
        out_shape = _shape(block_vars, op.output("Out")[0])
        _, c_out, h_out, w_out = out_shape
        k = op.attr("ksize")
        params, flops = 0, h_out * w_out * c_out * (k[0] * k[1])
    elif op.type == "mul":
        k_in, k_out = _shape(block_vars, op.input("Y")[0])
        in_shape = _shape(block_vars, op.input("X")[0])
        out_shape = _shape(block_vars, op.output("Out")[0])
        if "fc" not in op.output("Out")[0]:  # Fluid's test for an fc's mul
            return None
        params, flops = k_in * k_out + 1, k_in * k_out
    elif op.type in _ACTS:
        in_shape = _shape(block_vars, op.input("X")[0])
        out_shape = _shape(block_vars, op.output("Out")[0])
        params = 1 if op.type == "prelu" else 0
        flops = 1
        for d in in_shape:
            flops *= d
    elif op.type == "batch_norm":
        in_shape = _shape(block_vars, op.input("X")[0])
        out_shape = _shape(block_vars, op.output("Y")[0])
        _, c_in, h_out, w_out = in_shape
        params, flops = c_in * 2, h_out * w_out * c_in * 2
    else:
        return None
    return in_shape, out_shape, params, flops


def _format_summary(rows):
    """(the table's text, {"params": [...], "flops": [...]})."""
    header = ["No.", "TYPE", "INPUT", "OUTPUT", "PARAMs", "FLOPs"]
    body = [[i, r["type"], r["input_shape"], r["out_shape"], int(r["PARAMs"]), int(r["FLOPs"])]
            for i, r in enumerate(rows)]
    total = {"params": [row[4] for row in body], "flops": [row[5] for row in body]}
    return _table(header, body), total


def _table(header, body) -> str:
    """PrettyTable's default drawing, every column right aligned."""
    cells = [[str(c) for c in header]] + [[str(c) for c in row] for row in body]
    widths = [max(len(r[k]) for r in cells) for k in range(len(header))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(row):
        return "|" + "|".join(" " + c.rjust(w) + " " for c, w in zip(row, widths)) + "|"

    return "\n".join([rule, line(cells[0]), rule] + [line(r) for r in cells[1:]] + [rule])


def _print_summary(table: str, total) -> None:
    params, flops = total["params"], total["flops"]
    print(table)
    print("Total PARAMs: {}({:.4f}M)".format(sum(params), sum(params) / (10 ** 6)))
    print("Total FLOPs: {}({:.2f}G)".format(sum(flops), sum(flops) / 10 ** 9))
    print("Notice: \n now supported ops include [Conv, DepthwiseConv, FC(mul), BatchNorm, Pool, Activation(sigmoid, "
          "tanh, relu, leaky_relu, prelu)]")
