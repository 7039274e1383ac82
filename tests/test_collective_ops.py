"""The collective ops (ops/collective.py) over a group of K ranks simulated in one process.

``FakeGroup`` runs K ranks as threads, each with a ``FakeComm`` that has the communicator's
API and exchanges numpy arrays through a shared table and barrier. For K = 1, 2, 3:

* every op's forward kernel against numpy, on every rank;
* ``infer`` (and ``Block.append_op``) shapes, with -1 and negative axes, and its errors;
* the grad makers: the grad ops they emit (collectives, with their own ``nranks``) run on
  every rank and are compared with central differences of the *global* function
  ``F(x_1..x_K) = sum_k <y_k, v_k>`` along random directions in each rank's ``x_k``;
* allgather's gradient with unequal parts (NOTE(allgather-parts)) and allreduce_max's
  gradient at ties (NOTE(allreduce-max-ties));
* a program with the layers, ``append_backward`` and the Executor, on one rank
  (``LocalComm``) and on two.
"""
from __future__ import annotations

import threading

import numpy as np
import pytest

import placegroup as fluid
from placegroup.errors import ProgramError
from placegroup.ir.framework import Program
from placegroup.layers import collective as clayers
from placegroup.ops.registry import GradOpView, KernelContext, get_op_def, registered_ops

KS = (1, 2, 3)


class FakeComm:
    """One rank's communicator: the real one's API over numpy, rank-order sums."""

    def __init__(self, group: "FakeGroup", rank: int) -> None:
        self.group, self.rank, self.size = group, rank, group.size

    def _parts(self, kind: str, x, tag, step) -> list:
        assert type(x) is np.ndarray, f"{kind} got a {type(x).__name__}; the kernel must hand numpy"
        return self.group.exchange(self.rank, kind, (tag, step), x)

    def allreduce(self, x, op, tag, step):
        parts = self._parts(f"allreduce_{op}", x, tag, step)
        out = parts[0].copy()
        for p in parts[1:]:
            out = out + p if op == "sum" else np.maximum(out, p)
        return out

    def allgather(self, x, axis, tag, step):
        return np.concatenate(self._parts("allgather", x, tag, step), axis=axis)

    def reducescatter(self, x, axis, tag, step):
        parts = self._parts("reducescatter", x, tag, step)
        total = parts[0].copy()
        for p in parts[1:]:
            total = total + p
        return np.array_split(total, self.size, axis=axis)[self.rank].copy()


class FakeGroup:
    """K ranks in one process: ``run(fn)`` calls ``fn(rank, comm)`` on K threads."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.barrier = threading.Barrier(size, timeout=10)
        self.lock = threading.Lock()
        self.table: dict = {}  # (tag, step) -> [(kind, array) per rank]

    def exchange(self, rank: int, kind: str, key, x) -> list:
        with self.lock:
            slots = self.table.setdefault(key, [None] * self.size)
            assert slots[rank] is None, f"rank {rank} used tag {key} twice"
            slots[rank] = (kind, x.copy())
        self.barrier.wait()
        kinds = {k for k, _ in self.table[key]}
        assert len(kinds) == 1, f"ranks ran different collectives under tag {key}: {kinds}"
        return [a for _, a in self.table[key]]

    def run(self, fn) -> list:
        results, errors = [None] * self.size, [None] * self.size

        def body(rank):
            try:
                results[rank] = fn(rank, FakeComm(self, rank))
            except BaseException as e:  # noqa: BLE001 - re-raised below, after every thread ends
                errors[rank] = e
                self.barrier.abort()

        threads = [threading.Thread(target=body, args=(r,)) for r in range(self.size)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        real = [e for e in errors if e is not None and not isinstance(e, threading.BrokenBarrierError)]
        if real or any(errors):
            raise (real or [e for e in errors if e is not None])[0]
        return results


def run_ranks(k: int, fn) -> list:
    return FakeGroup(k).run(fn)


def run_op(op: str, ins: dict, attrs: dict, comm, tag: str = "fwd", xp=np, device: str = "cpu") -> dict:
    """Run ``op``'s kernel on one rank as the executor does (defaults; ``comm``, ``tag`` and
    ``step`` in its ``KernelContext``)."""
    opdef = get_op_def(op)
    assert opdef.wants_comm, f"{op} is not a collective"
    ctx = KernelContext(outputs=(s.name for s in opdef.outputs), rank=comm.rank, step=0, comm=comm, tag=tag)
    return opdef.kernels[device](xp, ins, {**opdef.attrs, **attrs}, ctx)


def reference(op: str, attrs: dict, xs: list) -> list:
    k, axis = len(xs), attrs.get("axis", 0)
    if op == "c_allgather":
        return [np.concatenate(xs, axis=axis)] * k
    total = xs[0]
    for x in xs[1:]:
        total = np.maximum(total, x) if op == "c_allreduce_max" else total + x
    return [total] * k if op != "c_reducescatter" else list(np.array_split(total, k, axis=axis))


# (id, op, attrs without nranks, shape of rank r's X in a group of K)
CASES = [
    ("sum", "c_allreduce_sum", {}, lambda r, k: (3, 4)),
    ("max", "c_allreduce_max", {}, lambda r, k: (3, 4)),
    ("gather-1", "c_allgather", {"axis": 1}, lambda r, k: (3, 2)),
    ("gather-neg", "c_allgather", {"axis": -2}, lambda r, k: (2, 3)),
    ("scatter-0", "c_reducescatter", {"axis": 0}, lambda r, k: (6, 2)),
    ("scatter-uneven", "c_reducescatter", {"axis": -1}, lambda r, k: (2, 7)),  # array_split: 4+3, 3+2+2
]
FORWARD_ONLY = [("gather-uneven", "c_allgather", {"axis": 0}, lambda r, k: (1 + r, 3))]


def _attrs(op: str, attrs: dict, k: int) -> dict:
    return {**attrs, "nranks": k} if "nranks" in get_op_def(op).attrs else dict(attrs)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("case", CASES + FORWARD_ONLY, ids=lambda c: c[0])
def test_forward(case, k):
    _, op, attrs, shape = case
    attrs = _attrs(op, attrs, k)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(shape(r, k)).astype(np.float32) for r in range(k)]
    got = run_ranks(k, lambda r, comm: run_op(op, {"X": xs[r]}, attrs, comm)["Out"])
    for r, (g, want) in enumerate(zip(got, reference(op, attrs, xs), strict=True)):
        assert g.dtype == np.float32, f"{op} rank {r}: {g.dtype}"
        np.testing.assert_allclose(g, want, rtol=1e-6, atol=1e-6, err_msg=f"{op} rank {r} of {k}")


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_infer_matches_kernel(case, k):
    _, op, attrs, shape = case
    attrs = _attrs(op, attrs, k)
    x = np.zeros(shape(0, k), np.float32)
    out = run_ranks(k, lambda r, comm: run_op(op, {"X": x}, attrs, comm)["Out"])[0]
    for batch in (False, True):
        block = Program().global_block()
        block.create_var("x", shape=[-1, *x.shape[1:]] if batch else list(x.shape), dtype="float32")
        if op == "c_reducescatter" and x.shape[attrs["axis"]] % k:  # array_split runs; infer refuses
            with pytest.raises(ProgramError, match="does not divide into nranks"):
                block.append_op(op, {"X": ["x"]}, {"Out": ["y"]}, attrs)
            continue
        block.append_op(op, {"X": ["x"]}, {"Out": ["y"]}, attrs)
        want = [-1, *out.shape[1:]] if batch else list(out.shape)
        meta = block.var("y").meta
        assert list(meta.shape) == want and meta.dtype == "float32", f"{op}: infer {meta}, kernel {out.shape}"


@pytest.mark.parametrize("op,attrs,shape,want", [
    ("c_allgather", {"axis": 0, "nranks": 4}, [-1, 5], [-1, 5]),
    ("c_allgather", {"axis": 1, "nranks": 4}, [-1, 5], [-1, 20]),
    ("c_allgather", {"axis": -1, "nranks": 2}, [3, 2, 5], [3, 2, 10]),
    ("c_reducescatter", {"axis": 0, "nranks": 3}, [-1, 6], [-1, 6]),
    ("c_reducescatter", {"axis": 1, "nranks": 3}, [-1, 6], [-1, 2]),
    ("c_reducescatter", {"axis": -2, "nranks": 2}, [8, 3], [4, 3]),
    ("c_allreduce_sum", {}, [-1, 7], [-1, 7]),
    ("c_allreduce_max", {}, [2, 7], [2, 7]),
])
def test_infer(op, attrs, shape, want):
    block = Program().global_block()
    block.create_var("x", shape=shape, dtype="float64")
    block.append_op(op, {"X": ["x"]}, {"Out": ["y"]}, attrs)
    assert list(block.var("y").shape) == want and block.var("y").dtype == "float64"


@pytest.mark.parametrize("op,attrs,shape,pattern", [
    ("c_reducescatter", {"axis": 1, "nranks": 4}, [-1, 6],
     r"c_reducescatter: dim 1 of X\[-1, 6\] \(6\) does not divide into nranks=4"),
    ("c_allgather", {"axis": 2, "nranks": 2}, [-1, 6], r"c_allgather: axis 2 is out of range for X\[-1, 6\]"),
    ("c_reducescatter", {"axis": -3}, [4, 6], r"axis -3 is out of range"),
    ("c_allgather", {"nranks": 0}, [4, 6], r"c_allgather: attr nranks must be an int >= 1, got 0"),
])
def test_infer_errors(op, attrs, shape, pattern):
    block = Program().global_block()
    block.create_var("x", shape=shape, dtype="float32")
    with pytest.raises(ProgramError, match=pattern):
        block.append_op(op, {"X": ["x"]}, {"Out": ["y"]}, attrs)


@pytest.mark.parametrize("op", ["c_allgather", "c_reducescatter"])
def test_nranks_must_match_the_group(op):
    x = np.ones((4, 2), np.float32)
    with pytest.raises(ValueError, match=rf"{op}: built for nranks=3 but runs in a group of 2"):
        run_ranks(2, lambda r, comm: run_op(op, {"X": x}, {"nranks": 3}, comm))


# -- gradients ------------------------------------------------------------------------------


def _grad_specs(op: str, attrs: dict):
    view = GradOpView(op, {"X": ["x"]}, {"Out": ["out"]}, {**get_op_def(op).attrs, **attrs},
                      frozenset({"x"}), lambda n: n + "@GRAD")
    specs = get_op_def(op).grad(view)
    block = Program().global_block()  # the specs must validate against their OpDefs
    for spec in specs:
        block.append_op(spec.type, spec.inputs, spec.outputs, spec.attrs, role="backward", infer=False)
    return specs


def _run_grads(specs, k: int, xs, ys, vs) -> list:
    """Each rank runs the grad ops on its own scope; returns every rank's x@GRAD."""

    def rank(r, comm):
        scope = {"x": xs[r], "out": ys[r], "out@GRAD": vs[r]}
        for i, spec in enumerate(specs):
            ins = {slot: scope[names[0]] for slot, names in spec.inputs.items()}
            outs = run_op(spec.type, ins, spec.attrs, comm, tag=f"grad{i}")
            scope.update((names[0], outs[slot]) for slot, names in spec.outputs.items())
        return scope["x@GRAD"]

    return run_ranks(k, rank)


def _check_grad(op: str, attrs: dict, shapes: list, rng) -> None:
    k = len(shapes)
    xs = [rng.standard_normal(s) for s in shapes]

    def forward(values):
        return run_ranks(k, lambda r, comm: run_op(op, {"X": values[r]}, attrs, comm)["Out"])

    ys = forward(xs)
    vs = [rng.standard_normal(y.shape) for y in ys]
    grads = _run_grads(_grad_specs(op, attrs), k, xs, ys, vs)

    def objective(values) -> float:  # the global function: every rank's <y_k, v_k>
        return sum(float(np.vdot(y, v)) for y, v in zip(forward(values), vs))

    h = 1e-6
    for j in range(k):
        assert grads[j].shape == xs[j].shape and grads[j].dtype == np.float64
        for _ in range(2):
            u = rng.standard_normal(shapes[j])
            moved = [[x + t * u if i == j else x for i, x in enumerate(xs)] for t in (h, -h)]
            numeric = (objective(moved[0]) - objective(moved[1])) / (2 * h)
            analytic = float(np.vdot(grads[j], u))
            assert abs(analytic - numeric) <= 1e-6 * max(abs(analytic), abs(numeric)) + 1e-8, \
                f"{op} d/dx_{j} of {k}: grad ops give {analytic!r}, finite differences {numeric!r}"


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c[0])
def test_grad(case, k):
    _, op, attrs, shape = case
    _check_grad(op, _attrs(op, attrs, k), [shape(r, k) for r in range(k)], np.random.default_rng(1))


@pytest.mark.parametrize("op,emits", [
    ("c_allreduce_sum", "c_allreduce_sum"), ("c_allgather", "c_reducescatter"),
    ("c_reducescatter", "c_allgather"), ("c_allreduce_max", "c_allreduce_max_grad"),
])
def test_grad_makers_emit_collectives(op, emits):
    attrs = _attrs(op, {"axis": 1} if "axis" in get_op_def(op).attrs else {}, 4)
    specs = _grad_specs(op, attrs)
    assert [s.type for s in specs] == [emits]
    assert get_op_def(emits).wants_comm
    if "nranks" in get_op_def(emits).attrs:
        assert specs[0].attrs["nranks"] == 4 and specs[0].attrs["axis"] == 1
    view = GradOpView(op, {"X": ["x"]}, {"Out": ["out"]}, attrs, frozenset(), lambda n: n + "@GRAD")
    assert get_op_def(op).grad(view) == [], "no gradient asked for, none made"


def test_allgather_grad_with_parts_array_split_cuts_the_same_way():
    # 4 + 3 along axis 0 is how array_split cuts 7 in 2: the gradient is right
    _check_grad("c_allgather", {"axis": 0, "nranks": 2}, [(4, 2), (3, 2)], np.random.default_rng(2))


def test_allgather_grad_with_unequal_parts_raises():
    xs = [np.ones((3, 2)), np.ones((4, 2))]  # array_split would give 4 + 3: wrong on both ranks
    ys = [np.ones((7, 2))] * 2
    with pytest.raises(ValueError, match=r"rank \d's part of the summed gradient has shape \[\d, 2\] but its "
                                         r"c_allgather input had shape \[\d, 2\]"):
        _run_grads(_grad_specs("c_allgather", {"axis": 0, "nranks": 2}), 2, xs, ys, ys)


def test_allreduce_max_grad_at_ties():
    # element 0: ranks 0 and 2 tie at the max; element 1: rank 1 alone; element 2: all three
    xs = [np.array([5.0, 1.0, 2.0]), np.array([3.0, 4.0, 2.0]), np.array([5.0, 0.0, 2.0])]
    ys = [np.array([5.0, 4.0, 2.0])] * 3
    vs = [np.array([1.0, 10.0, 100.0]), np.array([2.0, 20.0, 200.0]), np.array([4.0, 40.0, 400.0])]
    grads = _run_grads(_grad_specs("c_allreduce_max", {}), 3, xs, ys, vs)
    # every rank holding the max gets the whole summed gradient (NOTE(allreduce-max-ties))
    np.testing.assert_array_equal(grads[0], [7.0, 0.0, 700.0])
    np.testing.assert_array_equal(grads[1], [0.0, 70.0, 700.0])
    np.testing.assert_array_equal(grads[2], [7.0, 0.0, 700.0])


# -- layers, append_backward, executor ------------------------------------------------------


def test_collectives_are_comm_ops_that_need_no_op_case():
    ops = {t for t in registered_ops() if t.startswith("c_")}
    assert {"c_allreduce_sum", "c_allreduce_max", "c_allgather", "c_reducescatter"} <= ops
    assert all(get_op_def(t).role in ("comm", "backward") and get_op_def(t).wants_comm for t in ops)


def _model(k: int):
    x = fluid.layers.data("x", shape=[3])
    w = fluid.layers.create_parameter([3, 2], "float32", name="w")
    part = fluid.layers.matmul(x, w)
    whole = clayers.c_allgather(part, axis=1, nranks=k)
    loss = fluid.layers.mean(clayers.c_allreduce_sum(whole))
    fluid.append_backward(loss)
    return whole, loss


def test_layers_append_forward_ops():
    whole, _ = _model(3)
    assert list(whole.shape) == [-1, 6]
    ops = fluid.default_main_program().global_block().ops
    fwd = [op.type for op in ops if op.opdef.role == "comm" and op.role == "forward"]
    assert fwd == ["c_allgather", "c_allreduce_sum"]
    grads = [op.type for op in ops if op.role == "backward" and op.opdef.wants_comm]
    assert grads == ["c_allreduce_sum", "c_reducescatter"]
    assert [op.attrs["nranks"] for op in ops if op.type == "c_reducescatter"] == [3]


@pytest.mark.parametrize("k", [1, 2])
def test_executor_runs_collectives_and_their_gradients(k):
    whole, loss = _model(k)
    main = fluid.default_main_program()
    rng = np.random.default_rng(3)
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(k)]
    ws = [rng.standard_normal((3, 2)).astype(np.float32) for _ in range(k)]

    def rank(r, comm):
        exe = fluid.Executor(fluid.CPUPlace())
        if k > 1:  # a test-only group: the plan's one-member communicators swapped for ours
            for step in exe._plan(main, None).ops:
                step.ctx.comm = comm if step.ctx.comm is not None else None
        return exe.run(main, feed={"x": xs[r], "w": ws[r]}, fetch_list=[whole, loss, "w@GRAD"],
                       scope=fluid.Scope())

    got = run_ranks(k, rank)
    parts = np.concatenate([x @ w for x, w in zip(xs, ws)], axis=1)
    for r, (g_whole, g_loss, g_w) in enumerate(got):
        np.testing.assert_allclose(g_whole, parts, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(g_loss, [k * parts.mean()], rtol=1e-5)
        # every rank's loss is mean(k * whole): d(sum of the k losses)/dw_r = k·k·x_rᵀ·1/(4·2k)
        np.testing.assert_allclose(g_w, k * xs[r].T @ np.ones((4, 2)) / 8, rtol=1e-5, atol=1e-6)


# -- cupy -----------------------------------------------------------------------------------


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES + FORWARD_ONLY, ids=lambda c: c[0])
def test_forward_gpu(case):
    cp = pytest.importorskip("cupy", reason="cupy is not installed (pip install 'placegroup[gpu]')")
    try:
        if cp.cuda.runtime.getDeviceCount() == 0:
            pytest.skip("no CUDA device")
    except Exception as e:  # noqa: BLE001 - a driver error means no usable device
        pytest.skip(f"no CUDA device: {e}")
    _, op, attrs, shape = case
    attrs = _attrs(op, attrs, 2)
    xs = [np.random.default_rng(r).standard_normal(shape(r, 2)).astype(np.float32) for r in range(2)]
    got = run_ranks(2, lambda r, comm: run_op(op, {"X": cp.asarray(xs[r])}, attrs, comm, xp=cp, device="gpu")["Out"])
    for g, want in zip(got, reference(op, attrs, xs), strict=True):
        assert isinstance(g, cp.ndarray) and g.dtype == np.float32
        np.testing.assert_allclose(cp.asnumpy(g), want, rtol=1e-6, atol=1e-6)
