"""Fluid 1.8's ``fluid.backward.ProgramStats``: which ops read and write which vars in a run
of ops, what Fluid's recomputation (``RecomputeOptimizer``) asks to cut a program into segments
between checkpoints.

``build_stats()`` fills ``var_op_deps`` (var -> the indices of the ops reading it,
``var_as_input_ops``, and writing it, ``var_as_output_ops``) and ``op_deps`` (op index -> the ops
it reads from, ``in_ops``, and those reading from it, ``out_ops``); the questions below read them.

NOTE(recompute-dropout): before recomputing, Fluid inserts a ``seed`` op before each dropout and
makes the dropout read it, so that the recomputed dropout draws the mask the first one drew;
``get_reserved_vars`` names those seeds. Here a dropout's mask is a function of its attrs and the
step (NOTE(dropout-masks) in ops/dropout.py): a copy of the op draws the same mask with no seed
var, so ``modify_forward_desc_for_recompute`` changes nothing and there are no reserved vars.
Fluid also counts what a ``read`` op (a reader) writes as an input; placegroup's readers fill data
vars, which no op writes, so they are inputs by the first rule.

Example::

    stats = ProgramStats(block, block.ops)
    stats.build_stats()
    stats.get_input_nodes()                      # ['x', 'label']
    stats.sort_checkpoints(["fc_1.tmp_1", "fc_0.tmp_1"])    # in the order their writers run

Thread-safety: read a program no thread is changing.
"""
from __future__ import annotations

from typing import Any, Sequence

__all__ = ["ProgramStats"]


class ProgramStats:
    """The read/write relations of ``ops`` (a list of ``block``'s ops, in order).

    Args:
        block: the block the ops are in (its vars say which are persistable).
        ops: the ops, in program order; an op's index here is the one the stats give.
    """

    def __init__(self, block: Any, ops: Sequence[Any]) -> None:
        self.block = block
        self.ops = list(ops)
        self.op_deps: dict[int, dict[str, list[int]]] = {}
        self.var_op_deps: dict[str, dict[str, list[int]]] = {}

    def _deps(self, name: str) -> dict[str, list[int]]:
        return self.var_op_deps.setdefault(name, {"var_as_input_ops": [], "var_as_output_ops": []})

    def build_stats(self) -> None:
        """Fill ``var_op_deps`` and ``op_deps`` (once; a second call counts everything twice,
        as Fluid's does)."""
        for i, op in enumerate(self.ops):
            self.op_deps[i] = {"in_ops": [], "out_ops": []}
            for name in op.input_arg_names:
                self.op_deps[i]["in_ops"].extend(self._deps(name)["var_as_output_ops"])
            for name in op.input_arg_names:
                self._deps(name)["var_as_input_ops"].append(i)
            for name in op.output_arg_names:
                self._deps(name)["var_as_output_ops"].append(i)
            for j in self.op_deps[i]["in_ops"]:
                self.op_deps[j]["out_ops"].append(i)

    def get_input_nodes(self) -> list[str]:
        """The vars the ops read but none writes, persistable ones left out (the data)."""
        return [name for name, d in self.var_op_deps.items()
                if not d["var_as_output_ops"] and d["var_as_input_ops"]
                and not (self.block.has_var(name) and self.block.var(name).persistable)]

    def get_reserved_vars(self) -> list[str]:
        """The vars a recomputation must keep (dropout seeds): none here, NOTE(recompute-dropout)."""
        return []

    def get_out_of_subgraph_vars(self, begin_op_idx: int, end_op_idx: int) -> list[str]:
        """The vars that cross the border of ops ``[begin, end)``: written inside and read after
        it, or read inside and written before it (once per crossing, as Fluid lists them)."""
        names = []
        for i in range(begin_op_idx, end_op_idx):
            op = self.ops[i]
            for name in op.output_arg_names:
                names += [name for j in self.var_op_deps.get(name, {}).get("var_as_input_ops", ()) if j >= end_op_idx]
            for name in op.input_arg_names:
                names += [name for j in self.var_op_deps.get(name, {}).get("var_as_output_ops", ()) if j < begin_op_idx]
        return names

    def is_subgraph(self, var_group1: Sequence[str], var_group2: Sequence[str]) -> tuple[bool, int, int]:
        """``(ok, first, last)``: ``first`` is the first op reading ``var_group1``, ``last`` the
        last op writing ``var_group2``, and ``ok`` whether some ops run from one to the other
        (``first < last``; False too when a var is not among the ops')."""
        first, last = len(self.ops), -1
        if any(n not in self.var_op_deps for n in list(var_group1) + list(var_group2)):
            return False, first, last
        for name in var_group1:
            first = min([first] + self.var_op_deps[name]["var_as_input_ops"])
        for name in var_group2:
            last = max([last] + self.var_op_deps[name]["var_as_output_ops"])
        return first < last, first, last

    def sort_checkpoints(self, checkpoints_name: Sequence[str]) -> list[str]:
        """The checkpoints the ops use, ordered by their last writer (inputs first); a name the
        ops never use is left out."""
        known = [n for n in checkpoints_name if n in self.var_op_deps]
        key = {n: max(self.var_op_deps[n]["var_as_output_ops"], default=-1) for n in known}
        return sorted(known, key=key.__getitem__)

    def modify_forward_desc_for_recompute(self) -> None:
        """Nothing to do: a recomputed dropout draws its first mask again, NOTE(recompute-dropout)."""
