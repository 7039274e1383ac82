"""Every forward op against the table in op_cases.py (STYLE.md rule 12).

For each ``OpCase``: ``test_output`` runs the cpu kernel on float32 inputs and compares every
output with the numpy reference (rtol 1e-5, atol 1e-6), checks output dtypes, and checks that
``Block.append_op`` (validation + ``infer``) gives the kernel's output shapes, also with the
batch dim unknown (-1). ``test_grad`` builds the grad ops through the op's grad maker from a
``GradOpView`` with made-up var names, runs their kernels on a dict scope in float64, and
compares ``<dX, u>`` with the central difference of ``<Out, V>`` along a random direction
``u`` for a random cotangent ``V``; only the slot under test is asked for, and no other
gradient may be written (OpTest's ``no_grad_set``). ``test_error`` runs the error cases.

Sequence ops: a sampler may give a ``LoDTensor`` (placegroup/values.py). ``_sample`` casts its
data and keeps its LoD; ``run_kernel`` hands a kernel the data of each LoD input except in the
slots its OpDef ``wants_lod``, as the executor does (NOTE(lod-run) in executor/plan.py); an
output that is a LoDTensor is compared with the reference's data and LoD, and its var's
inferred ``lod_level`` must be its depth; the gradient check perturbs the data and keeps the
LoD. The rows of an output of an op with a LoD input depend on the LoD, so its dim 0 may be
-1 in ``infer`` even with every input's shape known.
"""
from __future__ import annotations

import numpy as np
import pytest

from placegroup.errors import ProgramError
from placegroup.ir.framework import Program
from placegroup.ops.registry import EMPTY_VAR, GradOpView, KernelContext, get_op_def, registered_ops
from placegroup.values import LoDTensor, as_host, to_device
from tests.op_cases import CASES, OpCase, by_id

RTOL, ATOL = 1e-5, 1e-6
GRAD_RTOL = 1e-5


IDS = list(by_id())


def _attrs(case: OpCase, extra=None) -> dict:
    return {**get_op_def(case.op).attrs, **case.attrs, **(extra or {})}


def _data(v):
    return v.data if isinstance(v, LoDTensor) else v


def _lod(v) -> list:
    return v.lod() if isinstance(v, LoDTensor) else []


def _like(v, data):
    """``data`` with the LoD of ``v`` (``data`` itself when ``v`` has none)."""
    return v.with_data(data) if isinstance(v, LoDTensor) else data


def _sample(case: OpCase, seed: int, dtype) -> dict:
    """The case's inputs for ``seed`` (op_cases.sample's draws), floating data cast to
    ``dtype``; a LoDTensor keeps its LoD."""
    rng = np.random.default_rng(seed)

    def cast(v):
        if isinstance(v, LoDTensor):
            return v.with_data(cast(v.data))
        v = np.asarray(v)
        return v.astype(dtype) if v.dtype.kind == "f" else v

    return {k: [cast(x) for x in v] if isinstance(v, list) else cast(v) for k, v in case.sample(rng).items()}


def _kernel_ins(opdef, ins: dict) -> dict:
    """What the executor hands the kernel: the data of LoD inputs outside ``wants_lod``."""
    keep = set(opdef.wants_lod)
    return {k: v if k in keep else ([_data(x) for x in v] if isinstance(v, list) else _data(v))
            for k, v in ins.items()}


def run_kernel(op: str, ins: dict, attrs: dict, xp=np, device: str = "cpu") -> dict:
    """Run ``op``'s kernel as the executor does (``ctx.outputs`` = every output slot)."""
    opdef = get_op_def(op)
    return opdef.kernels[device](xp, _kernel_ins(opdef, ins), attrs,
                                 KernelContext(outputs=(s.name for s in opdef.outputs)))


def _names(slot: str, value) -> list[str]:
    return [f"{slot}{i}" for i in range(len(value))] if isinstance(value, list) else [slot]


def _listed(value) -> list:
    return value if isinstance(value, list) else [value]


def _build(op: str, ins: dict, attrs: dict, n_outs: dict, batch=()) -> dict:
    """Append ``op`` to a fresh program (vars shaped like ``ins``, dim 0 of the ``batch``
    slots unknown, a LoDTensor's var of its lod_level); return slot -> [output vars] as
    inferred."""
    block = Program().global_block()
    inputs = {}
    for slot, value in ins.items():
        inputs[slot] = _names(slot, value)
        for name, arr in zip(inputs[slot], _listed(value)):
            shape = list(_data(arr).shape)
            if slot in batch and shape:
                shape[0] = -1
            block.create_var(name, shape=shape, dtype=_data(arr).dtype,
                             lod_level=arr.lod_level if isinstance(arr, LoDTensor) else 0)
    outputs = {slot: [f"out.{slot}{i}" for i in range(n)] for slot, n in n_outs.items()}
    block.append_op(op, inputs, outputs, attrs)
    return {slot: [block.var(n) for n in names] for slot, names in outputs.items()}


def _default_batch(case: OpCase, ins: dict) -> tuple:
    if case.batch is not None:
        return case.batch
    first = next(iter(ins.items()), None)
    return (first[0],) if first and _listed(first[1])[0].ndim >= 2 else ()


@pytest.mark.parametrize("cid", IDS)
def test_output(cid):
    case = by_id()[cid]
    attrs = _attrs(case)
    if case.ref is None:
        case.check(lambda ins, a: run_kernel(case.op, ins, _attrs(case, a)), attrs)
        return
    ins = _sample(case, 0, np.float32)
    got = run_kernel(case.op, ins, attrs)
    want = case.ref(ins, attrs)
    assert set(got) == {s.name for s in get_op_def(case.op).outputs}, f"{cid}: kernel outputs {sorted(got)}"
    for slot, ref in want.items():
        for g, r in zip(_listed(got[slot]), _listed(ref), strict=True):
            np.testing.assert_allclose(_data(g), _data(r), rtol=RTOL, atol=ATOL, err_msg=f"{cid}: output {slot}")
            assert _lod(g) == _lod(r), f"{cid}: output {slot} has LoD {_lod(g)}, the reference {_lod(r)}"
    sequences = any(isinstance(x, LoDTensor) for v in ins.values() for x in _listed(v))
    for batch in ((), _default_batch(case, ins)):
        outs = _build(case.op, ins, attrs, {s: len(_listed(v)) for s, v in got.items()}, batch)
        for slot, value in got.items():
            for var, out in zip(outs[slot], _listed(value), strict=True):
                meta, arr = var.meta, _data(out)
                assert meta.dtype == arr.dtype.name, f"{cid}: {slot} is {arr.dtype}, infer says {meta.dtype}"
                ok = len(meta.shape) == arr.ndim and all(d in (-1, a) for d, a in zip(meta.shape, arr.shape))
                known = meta.shape[1:] if sequences else meta.shape  # rows may follow the LoD
                assert ok and (batch or -1 not in known), \
                    f"{cid}: {slot} has shape {arr.shape}, infer says {meta.shape} (batch slots {batch})"
                if isinstance(out, LoDTensor):
                    assert var.lod_level == out.lod_level, \
                        f"{cid}: {slot} has a LoD of {out.lod_level} levels, its var lod_level {var.lod_level}"


def _run_grad_ops(specs, scope: dict) -> dict:
    """Validate each grad op against its OpDef, run it, and sum what is written twice."""
    block = Program().global_block()
    grads: dict = {}
    for spec in specs:
        op = block.append_op(spec.type, spec.inputs, spec.outputs, spec.attrs, role="backward", infer=False)
        opdef = get_op_def(spec.type)
        ins = {s.name: ([scope[n] for n in op.input(s.name)] if s.duplicable else scope[op.input(s.name)[0]])
               for s in opdef.inputs if op.input(s.name)}
        outs = opdef.kernels["cpu"](np, _kernel_ins(opdef, ins), op.attrs, KernelContext(outputs=op.outputs))
        for slot, names in op.outputs.items():
            for name, value in zip(names, _listed(outs[slot]), strict=True):
                value = _data(value)
                if name != EMPTY_VAR:
                    grads[name] = grads[name] + value if name in grads else value
                    scope[name] = grads[name]
    return grads


GRAD_CASES = [c.id for c in CASES if c.grad]


@pytest.mark.parametrize("cid", GRAD_CASES)
def test_grad(cid):
    case = by_id()[cid]
    opdef = get_op_def(case.op)
    attrs = _attrs(case)
    rng = np.random.default_rng(1)
    ins = _sample(case, 1, np.float64)
    outs = run_kernel(case.op, ins, attrs)
    in_names = {s: _names(s, v) for s, v in ins.items()}
    out_names = {s: _names(s, v) for s, v in outs.items()}
    assert not {n for v in in_names.values() for n in v} & {n for v in out_names.values() for n in v}
    cot_slots = case.grad_outs or [s for s, v in outs.items() if _data(_listed(v)[0]).dtype.kind == "f"]
    scope, cot = {}, {}
    for slot, names in list(in_names.items()) + list(out_names.items()):
        scope.update(zip(names, _listed(ins[slot] if slot in ins else outs[slot])))
    for slot, names in out_names.items():
        for name, arr in zip(names, _listed(outs[slot])):
            shape = _data(arr).shape
            cot[name] = rng.standard_normal(shape) if slot in cot_slots else np.zeros(shape)
            scope[name + "@GRAD"] = cot[name]

    def objective(values: dict) -> float:
        out = run_kernel(case.op, values, attrs)
        return sum(float(np.vdot(_data(a), cot[n])) for s in cot_slots
                   for n, a in zip(out_names[s], _listed(out[s])))

    for slot in case.grad:
        need = frozenset(in_names[slot])
        view = GradOpView(case.op, in_names, out_names, attrs, need, lambda n: n + "@GRAD")
        grads = _run_grad_ops(opdef.grad(view), dict(scope))
        others = {n + "@GRAD" for s, names in in_names.items() if s != slot for n in names}
        assert not others & set(grads), f"{cid}: wrote gradients nobody asked for: {sorted(others & set(grads))}"
        u = [rng.standard_normal(_data(a).shape) for a in _listed(ins[slot])]
        analytic = sum(float(np.vdot(grads[n + "@GRAD"], d)) for n, d in zip(in_names[slot], u))
        h = 1e-6

        def moved(t):
            vals = _listed(ins[slot])
            new = [_like(v, _data(v) + t * d) for v, d in zip(vals, u)]
            return {**ins, slot: new if isinstance(ins[slot], list) else new[0]}

        numeric = (objective(moved(h)) - objective(moved(-h))) / (2 * h)
        assert abs(analytic - numeric) <= GRAD_RTOL * max(abs(analytic), abs(numeric)) + 1e-8, \
            f"{cid}: d/d{slot}: grad ops give {analytic!r}, finite differences {numeric!r}"


ERROR_CASES = [(c.id, k) for c in CASES for k in range(len(c.errors))]


@pytest.mark.parametrize("cid,k", ERROR_CASES)
def test_error(cid, k):
    case = by_id()[cid]
    ins, extra, exc, pattern = case.errors[k]
    attrs = {**get_op_def(case.op).attrs, **extra}  # an error case gives all its own attrs
    if exc is ProgramError:
        n_outs = {s.name: 2 if s.duplicable else 1 for s in get_op_def(case.op).outputs}
        with pytest.raises(ProgramError, match=pattern):
            _build(case.op, ins, attrs, n_outs)
    else:
        with pytest.raises(exc, match=pattern):
            run_kernel(case.op, ins, attrs)


# Forward or init ops that others own and test, each with where: optimizer and lr-schedule
# ops have roles of their own ("optimize", "lr_sched") and need no line here.
OWNED_ELSEWHERE: dict[str, str] = {
    "split_ids": "tests/test_sparse_ops.py",
    "shard_lookup": "tests/test_sparse_ops.py",
    "merge_selected_rows": "tests/test_sparse_ops.py",
    "split_selected_rows": "tests/test_sparse_ops.py",
    "ema_debias": "tests/test_optimizer_wrappers.py",
    "get_tensor_from_selected_rows": "tests/test_misc_layers.py",  # a SelectedRows input  # reads optimizer state: checked over steps there
    "save": "tests/test_fluid_tree_fleet.py",  # writes a file (ops/file_io.py)
    "load": "tests/test_fluid_tree_fleet.py",  # reads a save op's file
    # control flow runs sub-blocks and tensor arrays, checked as programs, against numpy and Fluid 1.8.5
    **{t: "tests/test_control_flow.py" for t in ("while", "conditional_block", "select_input", "create_array",
                                                  "write_to_array", "read_from_array", "lod_array_length",
                                                  "split_lod_tensor", "merge_lod_tensor")},
    "select_output": "tests/test_control_flow_grad.py",  # select_input's gradient, through cond
    "tensor_array_to_tensor": "tests/test_control_flow_grad.py",  # an array's value; and test_control_flow.py
    # DynamicRNN's time steps: rank tables and arrays, checked in programs, by central differences and Fluid 1.8.5
    **{t: "tests/test_dynamic_rnn.py" for t in ("lod_rank_table", "max_sequence_len", "lod_tensor_to_array",
                                                 "array_to_lod_tensor", "shrink_rnn_memory",
                                                 "reorder_lod_tensor_by_rank")},
    "warpctc": "tests/test_ctc.py",  # CTC loss: brute force over alignments, central differences, Fluid 1.8.5
    "ctc_align": "tests/test_ctc.py",  # a LoD output whose rows follow the ids (and Fluid's [[-1]] case)
    "linear_chain_crf": "tests/test_crf.py",  # brute force over tag paths, central differences, Fluid 1.8.5
    "crf_decoding": "tests/test_crf.py",  # Viterbi: brute force, Fluid's tie rule, the 0/1 output with a Label
    # LoD beam search: a numpy reference of Fluid's insertion, Fluid 1.8.5, and the book's decoder
    **{t: "tests/test_beam_search.py" for t in ("beam_search", "beam_search_decode")},
    "gather_tree": "tests/test_rnn_cells.py",  # a numpy backtrace, Fluid's example, beam-search decoding vs Fluid 1.8.5
    # tables keyed by raw ids: a table is no array; kernels against numpy, training against embedding and clusters
    **{t: "tests/test_sparse_embedding.py" for t in ("dynamic_table", "dynamic_lookup", "dynamic_split_ids",
                                                      "dynamic_shard_lookup")},
}


def test_every_forward_op_with_a_gradient_has_a_case():
    covered = {c.op for c in CASES} | set(OWNED_ELSEWHERE)
    missing = [t for t in registered_ops()
               if get_op_def(t).role == "forward" and get_op_def(t).grad is not None and t not in covered]
    assert not missing, f"forward ops with a grad maker but no OpCase in tests/op_cases.py: {missing}"


def test_every_init_and_metric_op_has_a_case():
    covered = {c.op for c in CASES} | set(OWNED_ELSEWHERE)
    missing = [t for t in registered_ops() if get_op_def(t).role in ("forward", "init") and t not in covered]
    assert not missing, f"forward/init ops without an OpCase: {missing}"


# -- the same kernels on a CUDA device ------------------------------------------------------


@pytest.fixture(scope="module")
def cupy():
    cp = pytest.importorskip("cupy", reason="cupy is not installed (pip install 'placegroup[gpu]')")
    try:
        count = cp.cuda.runtime.getDeviceCount()
    except Exception as e:  # noqa: BLE001 - a driver error means no usable device
        pytest.skip(f"no CUDA device: {e}")
    if count == 0:
        pytest.skip("no CUDA device")
    return cp


@pytest.mark.gpu
@pytest.mark.parametrize("cid", IDS)
def test_output_gpu(cid, cupy):
    case = by_id()[cid]
    attrs = _attrs(case)

    def on_gpu(ins, a):
        dev = {k: [to_device(cupy, x) for x in v] if isinstance(v, list) else to_device(cupy, v)
               for k, v in ins.items()}
        out = run_kernel(case.op, dev, a, xp=cupy, device="gpu")
        return {k: [as_host(x) for x in v] if isinstance(v, list) else as_host(v) for k, v in out.items()}

    if case.ref is None and get_op_def(case.op).role != "init":  # a property case (dropout): on the gpu
        case.check(on_gpu, attrs)
        return
    if case.ref is None:  # the counter-based generators must give the cpu's values
        for a in ({"shape": [6, 5], "seed": 7}, {"shape": [2, 3], "whole_shape": [6, 5], "offsets": [3, 1]}):
            np.testing.assert_allclose(on_gpu({}, _attrs(case, a))["Out"],
                                       run_kernel(case.op, {}, _attrs(case, a))["Out"], rtol=RTOL, atol=ATOL)
        return
    ins = _sample(case, 0, np.float32)
    got, want = on_gpu(ins, attrs), case.ref(ins, attrs)
    for slot, ref in want.items():
        for g, r in zip(_listed(got[slot]), _listed(ref), strict=True):
            np.testing.assert_allclose(_data(g), _data(r), rtol=RTOL, atol=ATOL, err_msg=f"{cid}: output {slot} on gpu")
            assert _data(g).dtype == _data(_listed(run_kernel(case.op, ins, attrs)[slot])[0]).dtype
