"""The op registry: one `OpDef` per op type, registered by decorator.

An OpDef says everything the rest of the system needs to know about an op type:

* its input and output *slots* (``Slot``: duplicable, dispensable, and a semantic ``role``
  such as ``"Param"``, ``"Grad"`` or ``"LearningRate"`` that passes ask for instead of
  keeping lists of op types);
* its attributes with their defaults;
* ``infer``: ``(ins, attrs) -> {slot: Meta}`` where ``ins`` maps each input slot to a
  ``Meta(shape, dtype)`` (a list of them for duplicable slots, ``None`` when absent);
* its kernels, ``{"cpu": f, "gpu": f}``: pure array functions ``f(xp, ins, attrs, ctx)``
  returning ``{slot: array}``, where ``xp`` is ``numpy`` or ``cupy`` and ``ctx`` is the
  ``KernelContext`` the executor hands every kernel (the output slots the op has, the step,
  this executor's rank among those running the op, a collective's communicator, whether the
  kernel may update its in-place vars); attrs hold only what the program says;
* ``grad``: a gradient maker ``(op: GradOpView) -> [OpSpec]`` that describes the backward ops
  (``append_backward`` only walks the graph and sums fan-in);
* ``role``: ``forward``, ``loss``, ``backward``, ``optimize``, ``lr_sched``, ``init`` or ``comm``;
* ``cut``: an initializer's rule for making only a part of its output (``Cut``,
  NOTE(init-cut)); ``is_initializer``: the op makes a var's first value (role ``init``);
* ``uses_step``: the kernel reads ``ctx.step`` (dropout's masks), so the executor keeps it
  current for the op (it is never run as a plain op, NOTE(lean-loop));
* ``lod``: its LoD rule, which outputs are sequences (NOTE(lod-rule)); ``wants_lod``: the
  input slots whose kernel gets the ``LoDTensor`` itself (sequence ops) instead of its data.

NOTE(lod-rule): Fluid's ShareLoD, as a table entry. ``"share"`` (the default): an output
keeps the LoD of the first input (in slot order) that has one when it keeps that input's rows,
i.e. its dim 0 is that input's dim 0 (-1 and -1 included): elementwise ops keep X's, ``mul``
(fc) keeps its input's, ``lookup_table`` keeps the ids', a grad op's X@GRAD keeps X's, while
``mean`` ([1]) or a weight's gradient ([V, D]) get none. ``"drop"``: no output is a
sequence. A callable ``(levels, attrs) -> {out slot: lod_level}`` (``levels``: input slot ->
[lod_level per var]) says it for ops that make or change LoD (sequence_pool: one level less);
their kernels return ``LoDTensor`` outputs themselves. ``Block.append_op`` sets each output's
``lod_level`` by the rule; the executor wraps a "share" output's data in the input's LoD at
run time (executor/plan.py, NOTE(lod-run)).

Kernels import nothing from the framework, the executor or comm.

Example::

    @register("relu", ins=("X",), outs=("Out",), infer=same_as("X"), grad=grad_of(("X",)))
    def relu(xp, ins, attrs, ctx):
        return {"Out": xp.maximum(ins["X"], 0)}
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from placegroup.errors import ProgramError

GRAD_SUFFIX = "@GRAD"
# The name a grad op writes for a gradient nobody wants (Fluid's kEmptyVarName); the
# executor drops it.
EMPTY_VAR = "@EMPTY@"
# The attr of an op that runs once per merge_steps round, not every step (NOTE(merge-steps)
# in placegroup/transpiler/merge.py); a trainer skips it mid-round.
ROUND_END = "_round_end"
# The attr of an op that combines values of several parameters' updates (a global-norm
# clip's factor, NOTE(clip-placement) in placegroup/clip.py); the transpiler runs it on the
# pservers that hold those updates.
CROSS_PARAM = "_cross_param"

ROLES = ("forward", "backward", "optimize", "lr_sched", "init", "comm", "loss")


class KernelContext:
    """What a kernel may know of the run besides its inputs and attrs: one per op and
    executor, made once per plan; a kernel only reads it. The executor keeps ``step`` current
    for the ops that are not plain (collectives, ops with remote inputs or pushes, and ops
    registered with ``uses_step=True``); a plain op's kernel, called straight
    (NOTE(lean-loop)), must not depend on it.

    Attributes:
        outputs: the output slots the op has; a kernel may skip computing the others (a grad
            op whose caller wants only some gradients).
        rank: this executor's index among the executors that run the op (0 in one process);
            a column shard's initializer offsets itself by it.
        step: the step being run: the training steps this executor ran before this one
            (one process: ``Executor._steps_done``; a trainer: ``Link.step``), so step k of a
            run is the same k in one process and on every trainer; -1 for a startup program.
        comm: a collective op's communicator (``allreduce``/``allgather``/``reducescatter``,
            ``rank``, ``size``); None for any other op.
        tag: what tells this op's collective messages from another op's (unique per op).
        inplace: the kernel may write its in-place outputs (``OpDef.inplace``) into the
            input arrays, because no other executor holds a reference to them.
    """

    __slots__ = ("outputs", "rank", "step", "comm", "tag", "inplace")

    def __init__(self, outputs=frozenset(), rank: int = 0, step: int = 0, comm: Any = None,
                 tag: str = "", inplace: bool = False) -> None:
        self.outputs = frozenset(outputs)
        self.rank = rank
        self.step = step
        self.comm = comm
        self.tag = tag
        self.inplace = inplace

    def __repr__(self) -> str:
        return (f"KernelContext(outputs={sorted(self.outputs)}, rank={self.rank}, step={self.step}, "
                f"comm={type(self.comm).__name__ if self.comm is not None else None}, tag={self.tag!r}, "
                f"inplace={self.inplace})")


class Meta(NamedTuple):
    """Static shape and dtype of a var. ``-1`` in a shape is the unknown batch size."""

    shape: tuple
    dtype: str


@dataclasses.dataclass(frozen=True)
class Slot:
    """One named input or output of an op type."""

    name: str
    duplicable: bool = False
    dispensable: bool = False
    role: str | None = None  # Param, Grad, LearningRate, Moment, ParamOut, ... (NOTE(opt-roles))
    no_grad: bool = False  # never differentiable (ids, labels, counters)
    sparse_if: str | None = None  # output: a SelectedRows when this bool attr is true (is_sparse)
    # input: the op reads only the rows of this var that the ids in slot ``rows_by`` name (a
    # lookup), so a pass may serve the var by those rows (NOTE(block-prefetch))
    rows_by: str | None = None


@dataclasses.dataclass(frozen=True)
class Cut:
    """The part of an initializer's output that one op is to make alone (``OpDef.cut``).

    NOTE(init-cut): a var the transpiler splits (a pserver's row block, a distributed table's
    row shard, a model-parallel trainer's column shard) gets its first value from its own copy
    of the initializer op, which must make exactly the part of what the whole var would have
    been, so that the parts put together equal one process's var. How an op does that is the
    op's own fact, not the pass's: a counter-based random op generates just the part's
    indices (NOTE(counter-rng) in ops/random.py), ``fill_constant`` needs only the shape, and
    ``assign_value`` keeps just the part's values. ``OpDef.cut(attrs, cut) -> attrs`` gives
    the attrs of the op that makes the part; an initializer without one cannot be split, and
    the pass that would split it says so.

    Along dim d of the op's output (of ``attrs["shape"]``) the part holds the indices
    ``offsets[d] + strides[d] * arange(shape[d])``: a row block is ``offsets [r, 0, ...]``
    with strides 1, a table shard k of M is ``offsets [k, 0]``, ``strides [M, 1]``.
    ``rank_axis`` >= 0 cuts further along that axis at run time: the executor of rank r makes
    the r-th run of ``shape[rank_axis]`` indices there (a column shard of one program that
    every trainer runs); its offset and stride there must be 0 and 1.
    """

    shape: tuple
    offsets: tuple
    strides: tuple
    rank_axis: int = -1

    @classmethod
    def rows(cls, shape, offset: int, stride: int = 1) -> Cut:
        """The part of ``shape`` whose rows are ``offset + stride * arange(shape[0])``."""
        rank = len(shape)
        return cls(tuple(shape), (offset,) + (0,) * (rank - 1), (stride,) + (1,) * (rank - 1))

    @classmethod
    def per_rank(cls, shape, axis: int) -> Cut:
        """The ``ctx.rank``-th part of ``shape[axis]`` indices along ``axis``."""
        return cls(tuple(shape), (0,) * len(shape), (1,) * len(shape), axis)

    def check(self, op: str, whole) -> None:
        """Raise ValueError naming ``op`` unless the part lies inside an output of shape ``whole``."""
        whole = tuple(int(d) for d in whole)
        ok = len(whole) == len(self.shape) == len(self.offsets) == len(self.strides) and all(
            o >= 0 and st >= 1 and (n == 0 or o + st * (n - 1) < w)
            for n, o, st, w in zip(self.shape, self.offsets, self.strides, whole))
        if ok and self.rank_axis >= 0:
            ax = self.rank_axis
            ok = ax < len(whole) and self.offsets[ax] == 0 and self.strides[ax] == 1
        if not ok:
            raise ValueError(f"{op}: the part {list(self.shape)} at offsets {list(self.offsets)} with strides "
                             f"{list(self.strides)} (rank axis {self.rank_axis}) is not inside its output "
                             f"{list(whole)}")


@dataclasses.dataclass(frozen=True)
class OpSpec:
    """An op to be appended, as a grad maker or a pass describes it."""

    type: str
    inputs: Mapping[str, Sequence[str]]
    outputs: Mapping[str, Sequence[str]]
    attrs: Mapping[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class OpDef:
    type: str
    inputs: tuple[Slot, ...]
    outputs: tuple[Slot, ...]
    attrs: Mapping[str, Any]
    kernels: Mapping[str, Callable]
    infer: Callable | None = None
    grad: Callable | None = None
    role: str = "forward"
    # a collective: the executor gives the kernel the group's communicator in ``ctx.comm``
    wants_comm: bool = False
    # the collective calls the kernel makes per run, each tagged ``ctx.tag + call`` (the
    # receiver accepts exactly these tags from the group): one untagged call unless it says
    collective_calls: tuple = ("",)
    # output slot -> input slot that it updates in place (ParamOut -> Param); the executor
    # and the version rule treat the pair as one loop-carried var.
    inplace: Mapping[str, str] = dataclasses.field(default_factory=dict)
    # the kernel reads ``ctx.step`` (a counter-based random op keyed by the step): the plan
    # never marks it plain, so the interpreter sets ``ctx.step`` before each call
    uses_step: bool = False
    # NOTE(lod-rule): "share", "drop", or (levels, attrs) -> {out slot: lod_level}
    lod: str | Callable = "share"
    # input slots whose kernel takes the LoDTensor itself (its data otherwise)
    wants_lod: tuple = ()
    # an initializer's rule for making only part of its output: (attrs, Cut) -> attrs
    # (NOTE(init-cut)); None: it cannot be split
    cut: Callable | None = None
    # a control-flow op: attr ``sub_block`` names a block the executor runs for it (its kernel
    # only says so), NOTE(sub-blocks) in executor/plan.py
    sub_block: bool = False
    doc: str = ""

    @property
    def is_initializer(self) -> bool:
        """The op makes a var's first value (a startup program's op, role ``init``)."""
        return self.role == "init"

    def slot(self, name: str) -> Slot:
        for s in self.inputs + self.outputs:
            if s.name == name:
                return s
        raise KeyError(name)

    def input_slots(self, role: str) -> list[str]:
        """Names of the input slots that carry the given semantic role."""
        return [s.name for s in self.inputs if s.role == role]

    def output_slots(self, role: str) -> list[str]:
        return [s.name for s in self.outputs if s.role == role]


_REGISTRY: dict[str, OpDef] = {}


def _slots(spec: Sequence[str | Slot]) -> tuple[Slot, ...]:
    return tuple(s if isinstance(s, Slot) else Slot(s) for s in spec)


def register(type: str, *, ins: Sequence[str | Slot], outs: Sequence[str | Slot],
             attrs: Mapping[str, Any] | None = None, infer: Callable | None = None,
             grad: Callable | None = None, role: str = "forward", gpu: Callable | None = None,
             inplace: Mapping[str, str] | None = None, wants_comm: bool = False,
             collective_calls: Sequence[str] = ("",), uses_step: bool = False,
             lod: str | Callable = "share", wants_lod: Sequence[str] = (), cut: Callable | None = None,
             sub_block: bool = False):
    """Register the decorated function as the cpu kernel of op ``type``.

    Every kernel is called as ``f(xp, ins, attrs, ctx)`` (``ctx``: a ``KernelContext``). The
    same function serves cupy arrays on CUDA places unless ``gpu`` gives another. A kernel
    that reads ``ctx.step`` must say ``uses_step=True`` (the executor keeps ``ctx.step``
    current only for such ops and the non-plain ones, NOTE(lean-loop)). ``lod`` and
    ``wants_lod``: NOTE(lod-rule). ``cut``: an initializer's part rule, NOTE(init-cut).

    Raises:
        ValueError: if ``type`` is registered twice, or ``role`` or ``lod`` is unknown.
    """
    if role not in ROLES:
        raise ValueError(f"op {type!r}: unknown role {role!r}; expected one of {ROLES}")
    if not callable(lod) and lod not in ("share", "drop"):
        raise ValueError(f"op {type!r}: unknown lod rule {lod!r}; expected 'share', 'drop' or a callable")

    def deco(fn: Callable) -> Callable:
        if type in _REGISTRY:
            raise ValueError(f"op {type!r} is registered twice")
        _REGISTRY[type] = OpDef(
            type=type, inputs=_slots(ins), outputs=_slots(outs), attrs=dict(attrs or {}),
            kernels={"cpu": fn, "gpu": gpu or fn}, infer=infer, grad=grad, role=role,
            inplace=dict(inplace or {}), wants_comm=wants_comm, collective_calls=tuple(collective_calls),
            uses_step=uses_step, lod=lod, wants_lod=tuple(wants_lod), cut=cut, sub_block=sub_block,
            doc=fn.__doc__ or "")
        return fn

    return deco


def get_op_def(type: str) -> OpDef:
    """The OpDef of ``type``.

    Raises:
        ProgramError: naming the unknown type and the closest known ones.
    """
    try:
        return _REGISTRY[type]
    except KeyError:
        import difflib

        near = difflib.get_close_matches(type, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(near)}?" if near else ""
        raise ProgramError(f"unknown op type {type!r}{hint}") from None


def registered_ops() -> list[str]:
    return sorted(_REGISTRY)


# ---------------------------------------------------------------------------------------
# Helpers that op families use to keep each entry to a few lines.


def grad_name(name: str) -> str:
    return name + GRAD_SUFFIX


class GradOpView(NamedTuple):
    """What a grad maker sees of a forward op.

    ``inputs``/``outputs`` map slot -> var names; ``need`` is the set of input var names whose
    gradient is wanted; ``grad_of(name)`` is the name the gradient of ``name`` must be
    written to (append_backward renames for fan-in).
    """

    type: str
    inputs: Mapping[str, Sequence[str]]
    outputs: Mapping[str, Sequence[str]]
    attrs: Mapping[str, Any]
    need: frozenset
    grad_of: Callable[[str], str]


def grad_of(wrt: Sequence[str], *, uses: Sequence[str] | None = None, out: str = "Out",
            outs: Sequence[str] | None = None, type: str | None = None) -> Callable:
    """A grad maker for the common case: one ``<type>_grad`` op.

    The grad op takes the forward inputs named in ``uses`` (default: all forward inputs), the
    forward outputs ``outs`` (default: none) and ``<out>@GRAD`` for each differentiated
    output, and writes ``<slot>@GRAD`` for each slot in ``wrt`` whose gradient is needed.

    Args:
        wrt: input slots to differentiate with respect to.
        uses: forward slots (inputs or outputs) the grad kernel reads.
        out: the forward output slot whose gradient flows in.
        outs: forward output slots the grad kernel reads (e.g. ``Out`` for sigmoid).
        type: the grad op type; default ``<forward type>_grad``.
    """

    def maker(op: GradOpView) -> list[OpSpec]:
        ins: dict[str, list[str]] = {}
        for slot in (uses if uses is not None else list(op.inputs)):
            if slot in op.inputs and op.inputs[slot]:
                ins[slot] = list(op.inputs[slot])
        for slot in outs or ():
            ins[slot] = list(op.outputs[slot])
        ins[out + GRAD_SUFFIX] = [grad_name(n) for n in op.outputs[out]]
        outputs = {}
        for slot in wrt:
            names = op.inputs.get(slot) or []
            if names and any(n in op.need for n in names):
                outputs[slot + GRAD_SUFFIX] = [op.grad_of(n) if n in op.need else EMPTY_VAR for n in names]
        if not outputs:
            return []
        return [OpSpec(type or op.type + "_grad", ins, outputs, dict(op.attrs))]

    return maker


def same_as(slot: str, out: str = "Out") -> Callable:
    """An ``infer`` whose output ``out`` has the shape and dtype of input ``slot``."""

    def infer(ins, attrs):
        return {out: ins[slot]}

    return infer


def check(cond: bool, msg: str) -> None:
    """Raise ProgramError(msg) unless cond: for shape checks in ``infer`` functions."""
    if not cond:
        raise ProgramError(msg)
