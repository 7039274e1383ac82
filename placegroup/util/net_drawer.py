"""``fluid.net_drawer``: the data flow of a startup and a main program as one Graphviz graph.

Each op of a program's first block is a node (``mul_3``: its type and its index among the
graph's ops, so the main program's ops number on after the startup program's); each input an op reads is an edge labelled ``Slot(var)`` from the op that last wrote
the var, or from the node ``Feed`` for a var no op wrote before (data, parameters the startup
program has not made). ``draw_graph`` runs over the startup program, then the main one, so a
main op reading a parameter gets its edge from the startup op that initialized it; it writes the
``.dot`` text to ``filename`` (default ``<graph id>.gv``) and returns the
``placegroup.graphviz.Graph``.

Example::

    g = fluid.net_drawer.draw_graph(startup, main, filename="net.gv")
    print(g.code())

Fluid 1.8's module was written for the pip ``graphviz`` package's Graph and did not run with
its own (``Graph(name=...)`` has no ``title``; ``unique_id`` returned a function whose call
failed; ``graph_attr`` was read as an undefined name). This module does what it meant with
``fluid.graphviz.Graph``, with these choices: ``unique_id()`` returns the next graph id;
``graph_attr``, ``node_attr`` and ``edge_attr`` apply to that one call (Fluid updated the
module's styles for good); an op's inputs are linked before its outputs are recorded, so an
in-place op (``sgd`` writing the ``Param`` it reads) gets its edge from the op before it, not
from itself.

Thread-safety: ``unique_id`` counts with a module global, unguarded, as in Fluid.
"""
from __future__ import annotations

import logging
from typing import Any, NamedTuple

from placegroup.util.graphviz import Graph, Node, crepr
from placegroup.util.log_helper import get_logger

__all__ = ["draw_edge", "draw_graph", "draw_node", "parse_graph", "unique_id"]

logger = get_logger(__name__, logging.INFO)

OP_STYLE = {"shape": "oval", "color": "#0F9D58", "style": "filled", "fontcolor": "#FFFFFF"}
VAR_STYLE: dict = {}
GRAPH_STYLE = {"rankdir": "TB"}
GRAPH_ID = 0


class _Slot(NamedTuple):
    """One slot of an op as Fluid's OpDesc holds it: its name and the vars it names."""

    parameter: str
    arguments: list


class _OpView(NamedTuple):
    """An op under its node name (``mul_3``), with its slots, as ``draw_node``/``draw_edge`` see it."""

    type: str
    inputs: list
    outputs: list


def unique_id() -> int:
    """The next graph id of this process (1, 2, ...)."""
    global GRAPH_ID
    GRAPH_ID += 1
    return GRAPH_ID


def draw_node(op) -> dict:
    """A node's name, label and style for ``op`` (anything with ``type``: its node name)."""
    return {**OP_STYLE, "name": op.type, "label": op.type}


def draw_edge(var_parent: dict, op, var, arg: str) -> dict:
    """An edge's label, ends and style for op ``op`` reading ``arg`` through slot ``var``
    (anything with ``parameter``: the slot's name); ``var_parent`` maps a var to the node that
    wrote it.

    Raises:
        KeyError: ``var_parent`` does not know ``arg``.
    """
    return {**VAR_STYLE, "label": "%s(%s)" % (var.parameter, arg), "head_name": op.type,
            "tail_name": var_parent[arg]}


def _node(graph: Graph, name: str) -> Node:
    """The graph's node called ``name``; a new node when there is none (``Feed`` is one)."""
    found = graph.node_named(name)
    if found is not None:
        return found
    return graph.node(crepr(name), prefix="feed", description=name, shape="box")


def _view(op, index: int) -> _OpView:
    def slots(given: dict, declared) -> list:
        return [_Slot(s.name, list(given[s.name])) for s in declared if given.get(s.name)]

    return _OpView(f"{op.type}_{index}", slots(op.inputs, op.opdef.inputs), slots(op.outputs, op.opdef.outputs))


def parse_graph(program, graph: Graph, var_dict: dict, **kwargs: Any) -> None:
    """Add ``program``'s first block to ``graph``: a node per op, an edge per input whose
    writer ``var_dict`` knows (var name -> node name; every var of the program not in it yet
    starts as ``"Feed"``). ``var_dict`` is updated with this program's writers.

    Keyword Args:
        node_attr, edge_attr: Graphviz attributes added to every op node, every edge.
    """
    node_attr, edge_attr = dict(kwargs.get("node_attr") or {}), dict(kwargs.get("edge_attr") or {})
    for block in program.blocks:
        for name in block.vars:
            var_dict.setdefault(name, "Feed")
    first = sum(1 for n in graph.nodes if n.name.startswith("op_"))
    for index, op in enumerate(program.global_block().ops, start=first):  # only the first block, as Fluid
        view = _view(op, index)
        style = {**draw_node(view), **node_attr}
        name, label = style.pop("name"), style.pop("label")
        node = graph.node(crepr(label), prefix="op", description=name, **style)
        for slot in view.inputs:
            for arg in slot.arguments:
                if arg in var_dict:
                    e = {**draw_edge(var_dict, view, slot, arg), **edge_attr}
                    tail = _node(graph, e.pop("tail_name"))
                    e.pop("head_name")
                    graph.edge(tail, node, **e)
        for slot in view.outputs:
            for arg in slot.arguments:
                var_dict[arg] = view.type


def draw_graph(startup_program, main_program, **kwargs: Any) -> Graph:
    """The startup and main programs' data flow as one Graph, written to ``filename``.

    Keyword Args:
        filename: where the ``.dot`` text goes (default ``<graph id>.gv`` in the working directory).
        graph_attr, node_attr, edge_attr: Graphviz attributes for the graph, the op nodes, the edges.

    Returns:
        The ``placegroup.graphviz.Graph``.

    Raises:
        TypeError: another keyword argument.
    """
    unknown = set(kwargs) - {"filename", "graph_attr", "node_attr", "edge_attr"}
    if unknown:
        raise TypeError(f"draw_graph got unexpected keyword arguments {sorted(unknown)}; it takes filename, "
                        f"graph_attr, node_attr and edge_attr")
    graph_id = unique_id()
    filename = kwargs.get("filename") or f"{graph_id}.gv"
    g = Graph(str(graph_id), **{**GRAPH_STYLE, **(kwargs.get("graph_attr") or {})})
    var_dict: dict = {}
    parse_graph(startup_program, g, var_dict, **kwargs)
    parse_graph(main_program, g, var_dict, **kwargs)
    with open(filename, "w") as f:
        f.write(g.code())
    return g
