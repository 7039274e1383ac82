"""The model-parallel pass: an fc with too many classes, column-sliced over the trainers.

``fc(input, size, model_parallel=True)`` marks its weight and bias (``attrs["model_parallel"] =
"column"``). Over a group of K trainers, trainer k fed its own rows ``X_k`` [b, d]::

    X   = c_allgather(X_k, axis 0)        [K·b, d] on every member  (gradient: reduce-scatter)
    Y_k = X · W_k + b_k                   W_k [d, C/K]: this member's column shard only
    Y   = c_allgather(Y_k, axis 1)        [K·b, C]                 (gradient: reduce-scatter)
    out = c_split(Y, axis 0)              [b, C]: this member's own rows, for its loss

Fused (the default when ``out``'s only reader is a softmax_with_cross_entropy whose Softmax
nobody reads; ``DistributeTranspilerConfig(mp_fused=False)`` turns it off), Y is never made::

    L   = c_allgather(label_k, axis 0)
    loss_all = parallel_softmax_with_cross_entropy(Y_k, L)   [K·b, 1], max/sum-exp allreduced
    loss = c_split(loss_all, axis 0)      [b, 1]

so memory per member for the last layer is O(K·b · C/K) (ops/parallel_loss.py).

Each member holds only its shard, initialized to exactly its columns of what the whole weight
would have been, by its initializer's ``cut`` rule with a ``rank_axis`` (NOTE(init-cut)): a
random op generates just those columns, and a weight (or bias) with a ``NumpyArrayInitializer``,
pretrained say, keeps the whole array in its ``assign_value``, each member cutting its own
columns (entries) from it. The forward is
rewritten and the backward is built again by ``append_backward`` from the loss, so gradients
flow through the collectives' own gradient rules (ops/collective.py); the optimizer ops are
kept, their state sliced like the weight. Every member's shard gradient collects the rows of all K losses, each a mean over
b rows, so it is scaled by 1/K: the sum of the members' losses over K is the one-process loss
on the whole batch, and training matches one process training on the whole batch. Later
passes leave these parameters on the trainers: their gradients are neither merged on pservers
nor all-reduced.

Limits: the backward is regenerated, so gradient regularization added by an optimizer is not
(a PassError says so); the class count must divide by K.
"""
from __future__ import annotations

from placegroup.model.backward import append_backward
from placegroup.errors import PassError
from placegroup.ops.registry import Cut
from placegroup.transpiler.passes import Job, PassResult

MP = "model_parallel"


def is_model_parallel(var) -> bool:
    return var.attrs.get(MP) == "column"


def _strip_backward(main) -> str:
    """Remove the backward ops and the vars only they wrote; return the loss's name."""
    seeds = [op for op in main.ops if op.role == "backward" and "_loss" in op.attrs]
    if not seeds:
        raise PassError("model parallel: the program has no backward (call optimizer.minimize first)")
    back = [op for op in main.ops if op.role == "backward"]
    kept = [op for op in main.ops if op.role != "backward"]
    if any(op.attrs.get("_regularizer") for op in back):
        raise PassError("model parallel: gradient regularization is not supported with model-parallel layers")
    others = {n for op in kept for n in op.output_arg_names}
    main.ops = kept
    for n in {n for op in back for n in op.output_arg_names} - others:
        main.remove_var(n)
    return seeds[0].attrs["_loss"]


def _consumer(main, name: str, op_type: str):
    ops = [op for op in main.ops if op.type == op_type and name in op.input_arg_names and op.role == "forward"]
    return ops[0] if ops else None


def _shard_startup(startup, var, k: int) -> None:
    """``var``'s initializer makes only this member's columns of the whole value, by the op's
    own rule (NOTE(init-cut) in ops/registry.py), since one program serves every member."""
    ops = [op for op in startup.ops if var.name in op.output_arg_names]
    if not ops:
        return
    op = ops[0]
    part = list(var.shape)
    part[-1] //= k
    if not op.opdef.is_initializer or op.opdef.cut is None:
        raise PassError(f"model parallel: {var.name!r} is cut into column shards, but its startup op "
                        f"`{op.type}` is not an initializer that can make a part alone (its OpDef has no `cut`)")
    try:
        op.attrs = op.opdef.cut(dict(op.attrs), Cut.per_rank(part, len(part) - 1))
    except ValueError as e:
        raise PassError(f"model parallel: {var.name!r}, column shard {part}: its startup op `{op.type}`: {e}") from None
    startup.var(var.name).shape = tuple(part)


def _fusable_loss(main, out):
    """The softmax_with_cross_entropy that is ``out``'s only reader, if its Softmax is unused."""
    readers = [op for op in main.ops if out.name in op.input_arg_names]
    if len(readers) != 1 or readers[0].type != "softmax_with_cross_entropy" or readers[0].attrs.get("soft_label"):
        return None
    sce = readers[0]
    if any(n in op.input_arg_names for op in main.ops for n in sce.output("Softmax")):
        return None
    return sce


def _fuse_loss(main, sce, part, k: int) -> None:
    """Replace ``sce`` on the gathered logits by the fused loss on this member's columns."""
    label = main.var(sce.input("Label")[0])
    loss = main.var(sce.output("Loss")[0])
    label_all = main.create_var(f"{label.name}@MP_ALL", shape=[-1, 1], dtype=label.dtype, stop_gradient=True)
    softmax = main.create_var(f"{sce.output('Softmax')[0]}@MP_PART", shape=list(part.shape), dtype=part.dtype)
    loss_all = main.create_var(f"{loss.name}@MP_ALL", shape=[-1, 1], dtype=loss.dtype)
    at = main.ops.index(sce)
    main.ops.remove(sce)
    main.insert_op(at, "c_allgather", {"X": [label]}, {"Out": [label_all]}, {"axis": 0, "nranks": k},
                   role="forward", infer=False)
    main.insert_op(at + 1, "parallel_softmax_with_cross_entropy", {"Logits": [part], "Label": [label_all]},
                   {"Softmax": [softmax], "Loss": [loss_all]},
                   {"nranks": k, "ignore_index": sce.attrs.get("ignore_index", -100)}, role="forward", infer=False)
    main.insert_op(at + 2, "c_split", {"X": [loss_all]}, {"Out": [loss]}, {"axis": 0, "nranks": k},
                   role="forward", infer=False)
    main.remove_var(sce.output("Softmax")[0])


def _rewrite_fc(job: Job, mul, k: int, fused: bool) -> list:
    main, startup = job.main.global_block(), job.startup.global_block()
    x, w = main.var(mul.input("X")[0]), main.var(mul.input("Y")[0])
    if len(w.shape) != 2 or w.shape[1] % k:
        raise PassError(f"model parallel: {w.name!r} {list(w.shape)} has columns that do not divide by {k}")
    add = _consumer(main, mul.output("Out")[0], "elementwise_add")
    bias = main.var(add.input("Y")[0]) if add is not None and is_model_parallel(main.var(add.input("Y")[0])) else None
    last = add if bias is not None else mul
    out = main.var(last.output("Out")[0])
    params = [w] + ([bias] if bias is not None else [])
    for p in params:  # state of the parameter's shape is sliced with it
        state = [v for v in main.vars.values()
                 if v is p or (v.attrs.get("accumulator_of") == p.name and v.shape == p.shape)]
        for v in state:
            _shard_startup(startup, v, k)
            v.shape = tuple(list(v.shape[:-1]) + [v.shape[-1] // k])
    at = main.ops.index(mul)
    x_all = main.create_var(f"{x.name}@MP_ALL", shape=[-1] + list(x.shape[1:]), dtype=x.dtype,
                            stop_gradient=x.stop_gradient)
    main.insert_op(at, "c_allgather", {"X": [x]}, {"Out": [x_all]}, {"axis": 0, "nranks": k},
                   role="forward", infer=False)
    mul.inputs["X"] = [x_all.name]
    main.var(mul.output("Out")[0]).shape = (-1, w.shape[1])
    part = main.create_var(f"{out.name}@MP_PART", shape=[-1, w.shape[1]], dtype=out.dtype)
    whole = main.create_var(f"{out.name}@MP_ALL", shape=[-1, w.shape[1] * k], dtype=out.dtype)
    last.outputs["Out"] = [part.name]
    sce = _fusable_loss(main, out) if fused else None
    if sce is not None:  # the whole logits never exist (parallel_softmax_with_cross_entropy)
        _fuse_loss(main, sce, part, k)
        main.remove_var(whole.name)
        main.remove_var(out.name)
        return [p.name for p in params]
    at = main.ops.index(last)
    main.insert_op(at + 1, "c_allgather", {"X": [part]}, {"Out": [whole]}, {"axis": 1, "nranks": k},
                   role="forward", infer=False)
    main.insert_op(at + 2, "c_split", {"X": [whole]}, {"Out": [out]}, {"axis": 0, "nranks": k},
                   role="forward", infer=False)
    return [p.name for p in params]


def shard_model_parallel(job: Job, ctx) -> PassResult:
    job = job.copy()
    main = job.main.global_block()
    k = ctx.trainers
    muls = [op for op in main.ops if op.type == "mul" and op.role == "forward"
            and is_model_parallel(main.var(op.input("Y")[0]))]
    if not muls or k <= 1:
        return PassResult(job, False)
    if not ctx.trainer_endpoints:
        raise PassError("model parallel: the trainers exchange activations, so they need endpoints: "
                        "pass trainers='ip:port,ip:port,...'")
    loss = _strip_backward(main)
    sharded = [n for mul in muls for n in _rewrite_fc(job, mul, k, ctx.mp_fused)]
    optimize = [op for op in main.ops if op.role == "optimize"]
    main.ops = [op for op in main.ops if op.role != "optimize"]
    append_backward(main.var(loss))
    main.ops += optimize
    for name in sharded:  # NOTE in the docstring: every shard gradient counts K losses
        opt = next(op for op in main.ops if op.param == name and op.opdef.input_slots("Grad"))
        slot = opt.opdef.input_slots("Grad")[0]
        g = main.var(opt.input(slot)[0])
        scaled = main.create_var(f"{g.name}@MP_MEAN", shape=g.shape, dtype=g.dtype)
        op = main.insert_op(main.ops.index(opt), "scale", {"X": [g]}, {"Out": [scaled]}, {"scale": 1.0 / k},
                            role="optimize", infer=False)
        op.param = name
        opt.inputs[slot] = [scaled.name]
    job.main._bump()
    job.startup._bump()
    return PassResult(job, True)
