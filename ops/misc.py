"""Ops with no family of their own, as Fluid 1.8 has them: ``print`` (pass a value through and
print it), ``is_empty``, ``py_func`` (a Python function as an op) and
``get_tensor_from_selected_rows``.

NOTE(print-format): ``print`` writes what Fluid 1.8's print op (print_op.cc, its ``Formater``)
writes, to stderr here (Fluid writes to stdout) and as one write, so lines of two threads do
not mix::

    1600000000\tmessage\tThe place is:CPUPlace
    Tensor[fc_0.tmp_1]
    \tshape: [2,3,]
    \tdtype: f
    \tdata: 0.1,-2,3.5e+07,

the time in seconds, the message, the place (``CUDAPlace(n)`` on a GPU); the var's name, shape
and dtype when their ``print_tensor_*`` attr is true (the dtype is C++'s ``typeid`` name:
``f`` float32, ``d`` float64, ``i`` int32, ``l`` int64, ``b`` bool, ...); then the first
``summarize`` elements (all with -1) in row-major order, each as C++'s ``ostream`` writes it
(``%g``: six significant digits, bools as 1/0) followed by a comma. A dense value here has no
LoD, so ``print_tensor_lod`` prints nothing, as Fluid prints nothing for an empty LoD. The name
comes from the attr ``_tensor_name`` the layer and the grad maker set (a kernel sees no var
names). The grad of ``print`` is ``print`` with ``is_forward`` false, over the gradient;
``print_phase`` (FORWARD, BACKWARD or BOTH) says which of the two prints.

NOTE(print-first-n): Fluid counts the prints of each op object (``times_``) and stops after
``first_n`` (> 0). Its plain ``Executor.run`` makes the op objects afresh each run, so there the
count starts over every run; with ``use_program_cache`` or a CompiledProgram they live on.
Here the count is per op and per compiled plan (an executor keeps the plan of a program across
runs), so ``first_n`` bounds the prints over the whole run of the program, as Fluid's cached
programs do. The count is kept beside the op's ``KernelContext`` (one per op and plan).

NOTE(py-func-registry): a ``py_func`` op names its Python functions by an index into a
registry of this process (``register_callable``), as Fluid does (``forward_callable_id``,
``backward_callable_id``); the functions never leave the process and are never pickled. The
op also records each function's qualified name (attrs ``_forward_callable`` and
``_backward_callable``), so a program run in a process whose registry lacks the function, or
holds another at that index, fails with an error saying so instead of calling the wrong
function: every process that runs the op (each trainer of a distributed job) must build the
program itself, calling ``fluid.layers.py_func`` in the same order, as it does when every
process runs the same script. The function gets numpy arrays (copied off a GPU) in the order of
X and returns one array (or a list/tuple of them) per Out, None for none; a result is made an
array and cast to its Out var's declared dtype (attr ``_out_dtypes``, one per Out, with the
declared shapes in ``_out_shapes`` for ``infer``). Fluid keeps numpy's dtype, so there a
function returning float64 for a float32 var breaks the next op; its shape is not checked,
as Fluid's is not.

NOTE(py-func-grad): the gradient of a py_func op is a py_func op, as in Fluid: it calls the
backward function with the forward inputs, then the forward outputs (less
``backward_skip_vars``), then the gradients of the outputs, and writes the gradients of the
inputs; the function returns None for an input whose gradient is not needed. Where Fluid passes
None for the gradient of an output nobody differentiated, append_backward here has filled it
with zeros.
"""
from __future__ import annotations

import sys
import threading
import time

import numpy as np

from placegroup.ops.registry import EMPTY_VAR, Meta, OpSpec, Slot, check, grad_name, register
from placegroup.values import as_host, is_selected_rows, to_device

# -- print ------------------------------------------------------------------------------------

_PHASES = ("FORWARD", "BACKWARD", "BOTH")
_PRINT_ATTRS = {"first_n": -1, "message": "", "summarize": 20, "print_tensor_name": True,
                "print_tensor_type": True, "print_tensor_shape": True, "print_tensor_lod": True,
                "print_phase": "BOTH", "is_forward": True, "_tensor_name": ""}
# what C++'s typeid(T).name() gives for Paddle's element types (GCC's mangling)
_TYPEID = {"float32": "f", "float64": "d", "int32": "i", "int64": "l", "bool": "b", "uint8": "h", "int8": "a",
           "int16": "s", "float16": "N6paddle8platform7float16E"}
_PRINTABLE = ("float32", "float64", "int32", "int64", "bool")
_counts: dict[int, list] = {}  # id(ctx) -> [ctx, prints so far] (NOTE(print-first-n))
_counts_lock = threading.Lock()
_print_lock = threading.Lock()


def _print_infer(ins, a):
    check(a["print_phase"] in _PHASES, f"print: print_phase must be one of {list(_PHASES)}, got {a['print_phase']!r}")
    check(a["summarize"] >= -1, f"print: summarize must be -1 (all) or >= 0, got {a['summarize']}")
    return {"Out": ins["In"]}


def _print_grad(op):
    if op.inputs["In"][0] not in op.need:
        return []
    out_grad = grad_name(op.outputs["Out"][0])
    return [OpSpec("print", {"In": [out_grad]}, {"Out": [op.grad_of(op.inputs["In"][0])]},
                   {**op.attrs, "is_forward": False, "_tensor_name": out_grad})]


def _place(xp, x) -> str:
    if xp is np:
        return "CPUPlace"
    return f"CUDAPlace({int(getattr(getattr(x, 'device', None), 'id', 0))})"


def _element(v, kind: str) -> str:
    if kind == "b":
        return "1" if v else "0"
    if kind == "f":
        return "%g" % float(v)
    return str(int(v))


def format_value(x, name: str, a, place: str) -> str:
    """The text Fluid 1.8's print op writes for the host array ``x`` (NOTE(print-format))."""
    lines = [f"{int(time.time())}\t{a['message']}\tThe place is:{place}\n"]
    if a["print_tensor_name"] and name:
        lines.append(f"Tensor[{name}]\n")
    if a["print_tensor_shape"] and x.ndim:
        lines.append("\tshape: [" + "".join(f"{d}," for d in x.shape) + "]\n")
    dtype = x.dtype.name
    code = _TYPEID.get(dtype, dtype)
    if a["print_tensor_type"]:
        lines.append(f"\tdtype: {code}\n")
    if dtype not in _PRINTABLE:
        lines.append(f"\tdata: unprintable type: {code}\n")
    else:
        flat = x.reshape(-1)
        n = flat.size if a["summarize"] == -1 else min(flat.size, int(a["summarize"]))
        kind = x.dtype.kind
        lines.append("\tdata: " + "".join(_element(v, kind) + "," for v in flat[:n].tolist()) + "\n")
    return "".join(lines)


def _may_print(a, ctx) -> bool:
    """Whether this run prints: the phase fits, and fewer than ``first_n`` prints came before."""
    if a["print_phase"] == ("BACKWARD" if a["is_forward"] else "FORWARD"):
        return False
    if a["first_n"] <= 0:
        return True
    with _counts_lock:
        entry = _counts.setdefault(id(ctx), [ctx, 0])  # holding ctx keeps its id from being reused
        entry[1] += 1
        return entry[1] <= a["first_n"]


@register("print", ins=("In",), outs=("Out",), attrs=_PRINT_ATTRS, infer=_print_infer, grad=_print_grad)
def print_op(xp, ins, a, ctx):
    """Out = In, and In printed to stderr in Fluid's format (NOTE(print-format)), at most
    ``first_n`` times when it is > 0 (NOTE(print-first-n))."""
    x = ins["In"]
    if _may_print(a, ctx):
        text = format_value(np.asarray(as_host(x)), a["_tensor_name"], a, _place(xp, x))
        with _print_lock:
            sys.stderr.write(text)
            sys.stderr.flush()
    return {"Out": x.copy()}  # a copy, as Fluid's TensorCopy: an in-place update of In leaves Out be


# -- is_empty ---------------------------------------------------------------------------------


@register("is_empty", ins=(Slot("X", no_grad=True),), outs=("Out",), infer=lambda ins, a: {"Out": Meta((1,), "bool")})
def is_empty(xp, ins, a, ctx):
    """Out = [True] when X has no elements, else [False]."""
    return {"Out": xp.full((1,), ins["X"].size == 0, dtype=bool)}


# -- get_tensor_from_selected_rows ------------------------------------------------------------


def _gtfsr_infer(ins, a):
    x = ins["X"]
    check(len(x.shape) >= 1, f"get_tensor_from_selected_rows: X must have rank >= 1, got X{list(x.shape)}")
    return {"Out": Meta((-1,) + tuple(x.shape[1:]), x.dtype)}  # one row per listed row, known at run time


@register("get_tensor_from_selected_rows", ins=(Slot("X", no_grad=True),), outs=("Out",), infer=_gtfsr_infer)
def get_tensor_from_selected_rows(xp, ins, a, ctx):
    """Out = the value tensor of the SelectedRows X: one row per listed row, in X's order (repeats
    kept; merge_selected_rows first sums them), as Fluid's op copies ``X.value()``.

    Raises:
        TypeError: X is a dense array.
    """
    x = ins["X"]
    if not is_selected_rows(x):
        raise TypeError(f"get_tensor_from_selected_rows: X must be a SelectedRows, got a dense array of shape "
                        f"{list(getattr(x, 'shape', ()))}")
    return {"Out": x.values.copy()}


# -- py_func ----------------------------------------------------------------------------------

_callables: list[tuple[str, object]] = []  # index -> (qualified name, function) (NOTE(py-func-registry))
_PY_ATTRS = {"forward_callable_id": 0, "backward_callable_id": -1, "backward_skip_vars": [],
             "_forward_callable": "", "_backward_callable": "", "_out_dtypes": [], "_out_shapes": [],
             "_in_dtypes": [], "_optional_outs": []}


def callable_name(func) -> str:
    """``module.qualname`` of a function, as a py_func op records it."""
    return f"{getattr(func, '__module__', '?')}.{getattr(func, '__qualname__', type(func).__name__)}"


def register_callable(func) -> int:
    """Add ``func`` to this process's py_func registry; return its id (NOTE(py-func-registry)).

    Thread-safety: call it while building programs, from one thread.
    """
    if not callable(func):
        raise TypeError(f"py_func: expected a Python function, got {func!r}")
    _callables.append((callable_name(func), func))
    return len(_callables) - 1


def registered_callable(idx: int):
    """The function registered under ``idx`` (Fluid's ``py_func.registered_func``)."""
    return _callables[idx][1]


def registered_callable_count() -> int:
    """How many functions this process registered (Fluid's ``py_func.registered_func_num``)."""
    return len(_callables)


def _lookup(idx: int, name: str):
    if 0 <= idx < len(_callables) and _callables[idx][0] == name:
        return _callables[idx][1]
    have = f"holds {_callables[idx][0]!r} there" if 0 <= idx < len(_callables) else \
        f"has {len(_callables)} functions"
    raise RuntimeError(f"py_func: function #{idx} ({name!r}) is not registered in this process (its registry {have}); "
                       f"py_func functions live in the process that called fluid.layers.py_func and are never sent "
                       f"or pickled, so every process that runs the program must build it itself, calling py_func "
                       f"in the same order (NOTE(py-func-registry) in ops/misc.py)")


def _py_grad(op):
    a = op.attrs
    if a["backward_callable_id"] < 0:
        return []
    xs, outs = op.inputs.get("X", []), op.outputs.get("Out", [])
    if not any(n in op.need for n in xs):
        return []
    skip = set(a["backward_skip_vars"])
    ins = [n for n in xs if n not in skip] + [n for n in outs if n not in skip] + [grad_name(n) for n in outs]
    grads = [op.grad_of(n) if n in op.need else EMPTY_VAR for n in xs]
    return [OpSpec("py_func", {"X": ins}, {"Out": grads},
                   {"forward_callable_id": a["backward_callable_id"], "backward_callable_id": -1,
                    "backward_skip_vars": [], "_forward_callable": a["_backward_callable"],
                    "_backward_callable": "", "_out_dtypes": list(a["_in_dtypes"]), "_out_shapes": [], "_in_dtypes": [],
                    "_optional_outs": [k for k, g in enumerate(grads) if g == EMPTY_VAR]})]


def _py_infer(ins, a):
    check(a["forward_callable_id"] >= 0, f"py_func: forward_callable_id must be >= 0, got {a['forward_callable_id']}")
    check(len(a["_out_shapes"]) in (0, len(a["_out_dtypes"])),
          f"py_func: {len(a['_out_shapes'])} _out_shapes for {len(a['_out_dtypes'])} _out_dtypes")
    # the shapes and dtypes the Out vars were made with (the layer records them; Fluid infers none)
    return {"Out": [Meta(tuple(s), d) for s, d in zip(a["_out_shapes"], a["_out_dtypes"])]} if a["_out_shapes"] else {}


@register("py_func", ins=(Slot("X", duplicable=True, dispensable=True),),
          outs=(Slot("Out", duplicable=True, dispensable=True),), attrs=_PY_ATTRS, infer=_py_infer, grad=_py_grad)
def py_func(xp, ins, a, ctx):
    """Out = the registered function of ``forward_callable_id`` applied to X
    (NOTE(py-func-registry), NOTE(py-func-grad)).

    Raises:
        RuntimeError: the function is not registered in this process.
        ValueError: the function returned another number of values than the op has outputs,
            or None for an output that is needed.
    """
    func = _lookup(int(a["forward_callable_id"]), a["_forward_callable"])
    args = [np.asarray(as_host(x)) for x in ins.get("X", [])]
    ret = func(*args)
    n_out = len(a["_out_dtypes"]) if "Out" in ctx.outputs else 0
    rets = list(ret) if isinstance(ret, (list, tuple)) else [ret]
    if n_out == 0 and rets in ([], [None]):
        return {}
    if len(rets) != n_out:
        raise ValueError(f"py_func: {a['_forward_callable']} returned {len(rets)} values for {n_out} outputs")
    optional = set(a["_optional_outs"])
    outs = []
    for k, (value, dtype) in enumerate(zip(rets, a["_out_dtypes"])):
        if value is None:
            if k not in optional:
                raise ValueError(f"py_func: {a['_forward_callable']} returned None for output {k}, which is needed")
            outs.append(None)
            continue
        outs.append(to_device(xp, np.asarray(value).astype(dtype, copy=False)))
    return {"Out": outs}


__all__ = ["callable_name", "format_value", "register_callable", "registered_callable", "registered_callable_count"]
