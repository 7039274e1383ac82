"""The bookkeeping of append_backward: which vars need a gradient, and the partial gradients
of each var until they are summed into ``x@GRAD`` (placegroup/model/backward.py walks the ops,
placegroup/model/backward_blocks.py the blocks of loops and branches)."""
from __future__ import annotations

from placegroup.ir.framework import SELECTED_ROWS
from placegroup.ops.registry import EMPTY_VAR, grad_name


def differentiable_inputs(op) -> list[str]:
    names = []
    for s in op.opdef.inputs:
        if not s.no_grad:
            names += op.inputs.get(s.name, [])
    return names


def vars_needing_grad(block, ops, params: set[str], no_grad: set[str]) -> set[str]:
    need = set(params)
    for op in ops:
        if any(n in need for n in differentiable_inputs(op)):
            for n in op.output_arg_names:
                v = block.var(n)
                if n not in no_grad and not (v.stop_gradient and not v.is_parameter):
                    need.add(n)
    return need


def leaves_wanting_grad(block) -> set[str]:
    """Vars no op writes that ask for a gradient (``stop_gradient=False``), as Fluid gives one:
    typically a data var the user marked so, for the gradient of the loss with respect to the
    input. Parameters are chosen by ``parameter_list`` instead, and other persistable vars
    (learning rates, running statistics) never get one."""
    written = {n for op in block.ops for n in op.output_arg_names}
    leaves = set()
    for op in block.ops:
        for n in differentiable_inputs(op):
            if n in written or n in leaves or not block.has_var(n):
                continue
            v = block.var(n)
            if not v.stop_gradient and not v.persistable and not v.is_parameter:
                leaves.add(n)
    return leaves


class Grads:
    """Tracks the partial gradients of each var; ``finish`` turns them into ``x@GRAD``.

    Every contribution is first written under a fresh name ``x@GRAD@RENAME@k``. When the
    first reader of ``x@GRAD`` comes, a single part is renamed in place in the op that wrote
    it, and several parts are summed by a ``sum`` op. A var an op writes over (``increment(i)``
    in place, a loop var a block assigns) starts a new set of parts once that op is passed
    (``renew``): the earlier readers read the value before the write.
    """

    def __init__(self, block, callbacks=()) -> None:
        self.block = block
        self.callbacks = tuple(callbacks)  # NOTE(backward-callbacks)
        self.parts: dict[str, list[str]] = {}
        self.pending: set[str] = set()  # part names not yet renamed or summed
        self.writer: dict[str, object] = {}  # part name -> the op that writes it
        self.done: set[str] = set()
        self.made: dict[str, int] = {}  # var -> parts named so far, so that no name repeats

    def _make(self, fwd: str, name: str, type: str | None = None) -> str:
        v = self.block.var(fwd)
        self.block.create_var(name, shape=v.shape, dtype=v.dtype, type=type or v.type, lod_level=v.lod_level)
        return name

    def name_for(self, fwd: str) -> str:
        parts = self.parts.setdefault(fwd, [])
        k = self.made[fwd] = self.made.get(fwd, -1) + 1
        parts.append(self._make(fwd, f"{grad_name(fwd)}@RENAME@{k}"))
        self.pending.add(parts[-1])
        return parts[-1]

    def seed(self, fwd: str) -> None:
        """``fwd@GRAD`` is given (from outside a block): a part no op here writes."""
        self.parts.setdefault(fwd, []).append(self._make(fwd, grad_name(fwd)))

    def renew(self, fwd: str) -> None:
        """An op wrote ``fwd`` over: contributions from here on are for the value before."""
        self.parts.pop(fwd, None)
        self.done.discard(fwd)

    def wrote(self, op) -> None:
        for n in op.output_arg_names:
            if n in self.pending:
                self.writer[n] = op

    def finish(self, fwd: str) -> bool:
        """Make ``fwd@GRAD`` from its parts; False if it has none."""
        parts = self.parts.get(fwd)
        if not parts:
            return False
        if fwd in self.done:
            return True
        final = grad_name(fwd)
        # SelectedRows parts sum to a SelectedRows (NOTE(sum-sparse) in ops/math.py)
        sparse = all(self.block.var(p).type == SELECTED_ROWS for p in parts)
        self._make(fwd, final, SELECTED_ROWS if sparse else None)
        if len(parts) == 1 and parts[0] != final:
            op = self.writer[parts[0]]
            for slot, names in op.outputs.items():
                op.outputs[slot] = [final if n == parts[0] else n for n in names]
            self.block.remove_var(parts[0])
        elif len(parts) > 1:
            self.block.append_op("sum", {"X": parts}, {"Out": [final]}, role="backward", infer=False)
        self.parts[fwd] = [final]
        self.done.add(fwd)
        for cb in self.callbacks:
            cb(block=self.block, context={final: fwd})
        return True


def type_sparse_outputs(block, op) -> None:
    """Outputs of a slot with ``sparse_if`` are SelectedRows when the op's attr says so."""
    for s in op.opdef.outputs:
        if s.sparse_if and op.attrs.get(s.sparse_if):
            for n in op.outputs.get(s.name, ()):
                if n != EMPTY_VAR:
                    block.var(n).type = SELECTED_ROWS
