"""``fluid.graphviz``: Graphviz ``.dot`` text for a program's graph, as Fluid 1.8 writes it.

``Graph`` holds ``Node``s, ``Edge``s and ``Rank`` groups and prints them as a ``digraph``;
``GraphPreviewGenerator`` styles parameters, arguments and ops the way Fluid's debugger draws a
block (``fluid.debugger.draw_block_graphviz``). Writing the ``.dot`` text needs nothing;
``Graph.compile`` then renders it to PDF with Graphviz's ``dot`` program when that is on PATH,
and otherwise raises ``GraphvizNotFound`` (a ``FileNotFoundError``, what Fluid raised there)
saying where the ``.dot`` file is and how to get ``dot``.

Example::

    g = fluid.graphviz.Graph("demo", rankdir="TB")
    a = g.node('"a"', prefix="arg")
    b = g.node("<<B>mul</B>>", prefix="op", shape="box")
    g.edge(a, b, color="orange")
    print(g.code())          # digraph G { ... arg_1 -> op_2 [color="orange"] }

Where placegroup differs from Fluid 1.8, deliberately: nodes print in the order they were added
(Fluid shuffles them at random on every print, which changes nothing in the drawing but makes
the text undiffable); ``rank`` given to ``Graph.node`` puts the node in that rank group only
(Fluid also printed it as a node attribute); rank groups print in the order of their priority
(Fluid meant to sort them so, and its comparison left them as added); ``compile`` waits for ``dot`` and reports its
failure (Fluid started it in the background and never looked); the PDF goes beside the
``.dot`` file.

Thread-safety: a Graph is built by one thread; the node and rank counters are process-wide,
as in Fluid, and unguarded (two threads building graphs at once may share a number).
"""
from __future__ import annotations

import html
import logging
import os
import shutil
import subprocess
from typing import Any

__all__ = ["Edge", "Graph", "GraphPreviewGenerator", "GraphvizNotFound", "Node", "Rank", "crepr"]

log = logging.getLogger("placegroup.graphviz")


class GraphvizNotFound(FileNotFoundError):
    """Graphviz's ``dot`` (or a viewer) is not on PATH; the ``.dot`` text was written anyway."""


def crepr(v: Any) -> str:
    """A value as Graphviz text: a string in double quotes, anything else as ``str``."""
    if isinstance(v, str):
        return '"%s"' % v
    return str(v)


def _attr_list(attrs: dict) -> str:
    return ",".join(f"{k}={crepr(v)}" for k, v in attrs.items())


class Rank:
    """A group of nodes Graphviz puts on one rank (``{rank=same;a,b}``).

    Args:
        kind: Graphviz's rank kind (``same``, ``min``, ``max``, ``source``, ``sink``).
        name: the group's name in its Graph.
        priority: the group's order among the graph's groups (lower first).
    """

    def __init__(self, kind: str, name: str, priority: int) -> None:
        self.kind = kind
        self.name = name
        self.priority = priority
        self.nodes: list[Node] = []

    def __str__(self) -> str:
        if not self.nodes:
            return ""
        return "{rank=%s;%s}" % (self.kind, ",".join(node.name for node in self.nodes))


class Node:
    """A node: ``label`` is written as it is (quote it with ``crepr``, or give an HTML label
    ``<<B>x</B>>``); its name is ``<prefix>_<n>``, n counting every node of the process."""

    counter = 1

    def __init__(self, label: str, prefix: str, description: str = "", **attrs: Any) -> None:
        self.label = label
        self.name = "%s_%d" % (prefix, Node.counter)
        self.description = description
        self.attrs = attrs
        Node.counter += 1

    def __str__(self) -> str:
        extra = "," + _attr_list(self.attrs) if self.attrs else ""
        return "{name} [label={label} {extra} ];".format(name=self.name, label=self.label, extra=extra)


class Edge:
    """An edge from Node ``source`` to Node ``target``, with Graphviz attributes."""

    def __init__(self, source: Node, target: Node, **attrs: Any) -> None:
        self.source = source
        self.target = target
        self.attrs = attrs

    def __str__(self) -> str:
        extra = "[" + _attr_list(self.attrs) + "]" if self.attrs else ""
        return f"{self.source.name} -> {self.target.name} {extra}"


class Graph:
    """A directed graph, printed as Graphviz ``digraph`` text.

    Args:
        title: written as the graph's ``title``.
        **attrs: graph attributes (``rankdir="TB"``, ``layout="dot"``).
    """

    rank_counter = 0

    def __init__(self, title: str, **attrs: Any) -> None:
        self.title = title
        self.attrs = attrs
        self.nodes: list[Node] = []
        self.edges: list[Edge] = []
        self.rank_groups: dict[str, Rank] = {}
        self._described: dict[str, Node] = {}

    def code(self) -> str:
        """The ``.dot`` text."""
        return self.__str__()

    def rank_group(self, kind: str, priority: int) -> str:
        """A new rank group; returns its name, which ``node(..., rank=name)`` takes."""
        name = "rankgroup-%d" % Graph.rank_counter
        Graph.rank_counter += 1
        self.rank_groups[name] = Rank(kind, name, priority)
        return name

    def node(self, label: str, prefix: str, description: str = "", **attrs: Any) -> Node:
        """Add a node (``rank=<group name>`` puts it in that rank group) and return it.

        Raises:
            KeyError: ``rank`` names no group of this graph.
        """
        rank = attrs.pop("rank", None)
        node = Node(label, prefix, description, **attrs)
        if rank is not None:
            self.rank_groups[rank].nodes.append(node)
        self.nodes.append(node)
        if description:
            self._described[description] = node
        return node

    def node_named(self, description: str) -> Node | None:
        """The node added last with this ``description``, or None."""
        return self._described.get(description)

    def edge(self, source: Node, target: Node, **attrs: Any) -> Edge:
        """Add an edge from ``source`` to ``target`` and return it."""
        edge = Edge(source, target, **attrs)
        self.edges.append(edge)
        return edge

    def compile(self, dot_path: str) -> str:
        """Write the ``.dot`` text to ``dot_path`` and render it to the PDF beside it.

        Returns:
            The PDF's path (``dot_path`` with ``.pdf`` for its extension).

        Raises:
            GraphvizNotFound: Graphviz's ``dot`` is not on PATH (the ``.dot`` file is written).
            RuntimeError: ``dot`` failed (its message), or took more than a minute.
        """
        with open(dot_path, "w") as f:
            f.write(self.__str__())
        image_path = os.path.splitext(dot_path)[0] + ".pdf"
        dot = shutil.which("dot")
        if dot is None:
            raise GraphvizNotFound(
                f"wrote {dot_path}; making {image_path} from it needs Graphviz's `dot` program, which is not "
                f"on PATH: install Graphviz (apt-get install graphviz, brew install graphviz, conda install "
                f"graphviz), or open {dot_path} in any Graphviz viewer")
        try:
            done = subprocess.run([dot, "-Tpdf", dot_path, "-o", image_path], capture_output=True, text=True,
                                  timeout=60)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"`dot -Tpdf {dot_path}` took more than 60s; the .dot file is written") from None
        if done.returncode != 0:
            raise RuntimeError(f"`dot -Tpdf {dot_path} -o {image_path}` failed (exit code {done.returncode}): "
                               f"{done.stderr.strip()}")
        log.warning("write block debug graph to %s", image_path)
        return image_path

    def show(self, dot_path: str) -> None:
        """``compile``, then open the PDF in the desktop's viewer (``xdg-open`` or ``open``).

        Raises:
            GraphvizNotFound: no ``dot``, or no viewer command on PATH.
        """
        image = self.compile(dot_path)
        viewer = shutil.which("xdg-open") or shutil.which("open")
        if viewer is None:
            raise GraphvizNotFound(f"made {image}, but neither `xdg-open` nor `open` is on PATH to show it")
        subprocess.Popen([viewer, image], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)

    def _rank_repr(self) -> str:
        ranks = sorted(self.rank_groups.values(), key=lambda r: r.priority)
        return "\n".join(str(r) for r in ranks) + "\n"

    def __str__(self) -> str:
        reprs = ["digraph G {", "title = {}".format(crepr(self.title))]
        reprs += ["{key}={value};".format(key=k, value=crepr(v)) for k, v in self.attrs.items()]
        reprs.append(self._rank_repr())
        reprs += [str(node) for node in self.nodes]
        reprs += [str(edge) for edge in self.edges]
        reprs.append("}")
        return "\n".join(reprs)


class GraphPreviewGenerator:
    """A Graph styled for a program's block: parameters as teal tables, arguments as grey
    boxes, ops as dark boxes; ``highlight=True`` paints one orange.

    Args:
        title: the graph's title.

    Example::

        g = GraphPreviewGenerator("block 0")
        w = g.add_param("fc_0.w_0", "float32[13, 1]")
        op = g.add_op("mul")
        g.add_edge(w, op)
        g("block0.dot")          # writes block0.dot, then block0.pdf when `dot` is installed
    """

    def __init__(self, title: str) -> None:
        self.graph = Graph(title, layout="dot", concentrate="true", rankdir="TB")
        self.op_rank = self.graph.rank_group("same", 2)
        self.param_rank = self.graph.rank_group("same", 1)
        self.arg_rank = self.graph.rank_group("same", 0)

    def __call__(self, path: str = "temp.dot", show: bool = False) -> None:
        """Write the graph to ``path`` and render it (``Graph.compile``); ``show``: open it too."""
        if show:
            self.graph.show(path)
        else:
            self.graph.compile(path)

    def add_param(self, name: str, data_type: Any, highlight: bool = False) -> Node:
        label = "\n".join([
            '<<table cellpadding="5">', "  <tr>", '    <td bgcolor="#2b787e">', "    <b>",
            html.escape(name, quote=False), "    </b>", "    </td>", "  </tr>", "  <tr>", "    <td>",
            str(data_type), "    </td>  </tr>", "</table>>"])
        return self.graph.node(label, prefix="param", description=name, shape="none",
                               style="rounded,filled,bold", width="1.3",
                               color="#148b97" if not highlight else "orange", fontcolor="#ffffff",
                               fontname="Arial")

    def add_op(self, opType: str, **kwargs: Any) -> Node:
        highlight = kwargs.pop("highlight", False)
        return self.graph.node("<<B>%s</B>>" % html.escape(opType, quote=False), prefix="op",
                               description=opType, shape="box", style="rounded, filled, bold",
                               color="#303A3A" if not highlight else "orange", fontname="Arial",
                               fontcolor="#ffffff", width="1.3", height="0.84")

    def add_arg(self, name: str, highlight: bool = False) -> Node:
        return self.graph.node(crepr(name), prefix="arg", description=name, shape="box",
                               style="rounded,filled,bold", fontname="Arial", fontcolor="#999999",
                               color="#dddddd" if not highlight else "orange")

    def add_edge(self, source: Node, target: Node, **kwargs: Any) -> Edge:
        highlight = kwargs.pop("highlight", False)
        return self.graph.edge(source, target, color="#000000" if not highlight else "orange", **kwargs)
