"""Fluid 1.8's ``fluid.contrib.op_frequence``: ``op_freq_statistic``, how often each op type and
each pair of adjacent op types occur in a program.

Example::

    uni, adj = fluid.contrib.op_freq_statistic(fluid.default_main_program())
    for op_type, n in uni:
        print("%s  \\t  %d" % (op_type, n))
"""
from __future__ import annotations

from collections import OrderedDict

from placegroup.ir.framework import Program

__all__ = ["op_freq_statistic"]


def op_freq_statistic(program):
    """Op type counts and "producer->consumer" pair counts of the global block.

    An op counts once if it writes any var that is not a parameter. A pair "a->b" counts
    once for each input of a ``b`` op (not a parameter) whose latest writer so far is an ``a``
    op; an input no op wrote (a fed var) is reported on stdout, as Fluid does. (Fluid 1.8's
    code is Python 2 only, ``dict.has_key``; this is its Python 3 form.)

    Args:
        program: the Program.

    Returns:
        (uni_op_freq, adj_2_op_freq): lists of (op type or "a->b", count), most frequent
        first, ties in order of first appearance.

    Raises:
        TypeError: ``program`` is not a Program.
    """
    if not isinstance(program, Program):
        raise TypeError(f"The input type should be Porgram.But you passed in {type(program)}")
    block = program.global_block()
    params = {p.name for p in program.blocks[0].all_parameters()}
    uni: OrderedDict = OrderedDict()
    for op in block.ops:
        if any(n not in params for n in op.output_arg_names):
            uni[op.type] = uni.get(op.type, 0) + 1
    writers: dict = {}
    consumers: OrderedDict = OrderedDict()
    for op in block.ops:
        for name in op.input_arg_names:
            if name in params:
                continue
            if name in writers:
                consumers.setdefault(op.type, []).append(writers[name][-1])
            else:
                print(f"Var's generate op is not found,{name}, {op.type}")
        for name in op.output_arg_names:
            writers.setdefault(name, []).append(op.type)
    adj: OrderedDict = OrderedDict()
    for op_type, producers in consumers.items():
        for producer in producers:
            key = f"{producer}->{op_type}"
            adj[key] = adj.get(key, 0) + 1
    return (sorted(uni.items(), key=lambda item: item[1], reverse=True),
            sorted(adj.items(), key=lambda item: item[1], reverse=True))
