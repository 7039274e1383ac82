"""Replays the feed cases of tests/cases/feed_shapes.py with a Fluid-1.x-style module, ``paddle.fluid``
or ``placegroup``, and says what happened to each feed.

Usage: ``python feed_runner.py SPEC.json`` (Fluid 1.8.5's python, cwd outside the repository), where
SPEC is ``{"cases": [...], "out": "result.json"}``; tests/test_feed_shapes.py writes it and reads
the result. The same functions run in the test process with ``placegroup`` (``run_case``), so both
sides take one program, one feed and one reading of the outcome. Cases are JSON: no pickle, no code.

A case (the fields, tests/cases/feed_shapes.py says them in words): ``declare`` (how ``x`` is
declared: ``api`` ``layers.data`` | ``fluid.data`` | ``py_reader``, ``shape``, ``dtype``,
``lod_level``, ``append_batch_size``), ``path`` (how it is fed: ``run``, ``feeder``,
``loader.sample``, ``loader.sample_list``, ``loader.batch``, each loader ``iterable`` or not,
``py_reader.batch``, ``py_reader.sample_list``), ``fed`` (the value, below), ``net`` (``scale``:
fetch ``scale(x, 1)``; ``fc``: one SGD step of ``mean(fc(x, 1, num_flatten_dims=rank-1))`` with
constant weights, fetching the loss of two steps).

A fed value: ``{"array": shape}`` (the numbers ``start, start+1, ...`` as a numpy array of the
var's dtype, or of ``"dtype"``), ``{"list": shape}`` (the same numbers as nested Python lists),
``{"scalar": number}``, ``{"nested": [...]}`` (these very lists), ``{"lod": shape, "lengths":
[[...]]}`` (a ``LoDTensor``; ``"make": "create_lod_tensor"`` builds it with
``fluid.create_lod_tensor`` from the nested lists ``"nested"`` or the array). For the feeder and the
sample readers ``fed`` is ``{"samples": [value, ...]}`` (one element per sample; sample ``i``'s
numbers start at ``1 + 100 * i``); for the batch readers ``{"batch": value}``.

The outcome: ``{"ok": true, "shape": [...], "lod": [[...]], "values": [...], "loss": [...]}`` (what
the op sees: its output's shape, recursive sequence lengths and numbers) or ``{"ok": false,
"error": "<type>: <message>"}``.
"""
from __future__ import annotations

import json
import sys
import threading

import numpy as np


def numbers(shape, dtype, start=1):
    """The numbers ``start, start + 1, ...`` in ``shape``, as ``dtype``."""
    n = int(np.prod(shape, dtype=np.int64)) if len(shape) else 1
    return (np.arange(n) + start).reshape(shape).astype(dtype)


def value(fluid, enc: dict, dtype: str, start: int = 1):
    """The Python value ``enc`` stands for (module docstring)."""
    dt = enc.get("dtype", dtype)
    if "array" in enc:
        return numbers(enc["array"], dt, start)
    if "list" in enc:
        return numbers(enc["list"], dt, start).tolist()
    if "scalar" in enc:
        return enc["scalar"]
    if "nested" in enc and "lengths" not in enc:
        return enc["nested"]
    if "lengths" in enc:
        if enc.get("make") == "create_lod_tensor":
            data = enc["nested"] if "nested" in enc else numbers(enc["lod"], dt, start)
            return fluid.create_lod_tensor(data, enc["lengths"], fluid.CPUPlace())
        data = np.asarray(enc["nested"], dt) if "nested" in enc else numbers(enc["lod"], dt, start)
        t = fluid.LoDTensor()
        t.set(data, fluid.CPUPlace())
        t.set_recursive_sequence_lengths(enc["lengths"])
        return t
    raise ValueError(f"unknown fed value {enc!r}")


def fed_numbers(enc: dict, dtype: str) -> list:
    """The numbers a fed value holds, in order (what ``scale(x, 1)`` must give back)."""
    if "samples" in enc:
        out = []
        for i, e in enumerate(enc["samples"]):
            out += fed_numbers(dict(e, start=1 + 100 * i), dtype)
        return out
    if "batch" in enc:
        return fed_numbers(enc["batch"], dtype)
    start = enc.get("start", 1)
    if "nested" in enc:
        return np.asarray(_flat(enc["nested"]), dtype=enc.get("dtype", dtype)).tolist()
    if "scalar" in enc:
        return np.asarray([enc["scalar"]], dtype=dtype).tolist()
    shape = enc.get("array", enc.get("list", enc.get("lod")))
    return numbers(shape, dtype, start).reshape(-1).tolist()


def _flat(x):
    if isinstance(x, (list, tuple)):
        return [v for e in x for v in _flat(e)]
    return [x]


def _declare(fluid, d: dict):
    api, dtype, lod = d["api"], d.get("dtype", "float32"), d.get("lod_level", 0)
    if api == "layers.data":
        return fluid.layers.data(name="x", shape=d["shape"], dtype=dtype, lod_level=lod,
                                 append_batch_size=d.get("append_batch_size", True)), None
    if api == "fluid.data":
        return fluid.data(name="x", shape=d["shape"], dtype=dtype, lod_level=lod), None
    if api == "py_reader":
        reader = fluid.layers.py_reader(capacity=4, shapes=[d["shape"]], dtypes=[dtype], lod_levels=[lod],
                                        use_double_buffer=False)
        x = fluid.layers.read_file(reader)
        return (x[0] if isinstance(x, (list, tuple)) else x), reader
    raise ValueError(f"unknown api {api!r}")


W0, B0 = 0.5, 0.25  # the fc net's first weights and bias: its first output is W0 * x + B0


def _net(fluid, x, net: str):
    if net == "scale":
        return fluid.layers.scale(x, scale=1.0), None
    rank = len(x.shape)
    const = fluid.initializer.Constant
    out = fluid.layers.fc(x, size=1, num_flatten_dims=rank - 1,
                          param_attr=fluid.ParamAttr(name="w", initializer=const(W0)),
                          bias_attr=fluid.ParamAttr(name="b", initializer=const(B0)))
    loss = fluid.layers.mean(out)
    fluid.optimizer.SGD(learning_rate=0.01).minimize(loss)
    return out, loss


def _source(fluid, case, x, reader, place):
    """Set up how ``x`` is fed, before the startup program runs (a non-iterable loader adds its
    reader to it); returns a callable that gives the feed of one step (None: a reader fills x),
    and one that ends the reader's pass (or None)."""
    path, fed, dtype = case["path"], case["fed"], case["declare"].get("dtype", "float32")
    samples = [(value(fluid, e, dtype, 1 + 100 * i),) for i, e in enumerate(fed.get("samples", []))]
    batch = [value(fluid, fed["batch"], dtype)] if "batch" in fed else None
    if path == "run":
        return (lambda: {"x": value(fluid, fed, dtype)}), None
    if path == "feeder":
        return (lambda: fluid.DataFeeder(feed_list=[x], place=place).feed(samples)), None
    if path.startswith("py_reader."):
        if path == "py_reader.batch":
            reader.decorate_batch_generator(lambda: iter([batch]))
        else:
            reader.decorate_sample_list_generator(lambda: iter([samples]))
        return reader.start, reader.reset
    iterable = case.get("iterable", True)
    loader = fluid.io.DataLoader.from_generator(feed_list=[x], capacity=4, iterable=iterable,
                                                use_double_buffer=False)
    places = fluid.cpu_places(1) if iterable else None
    if path == "loader.sample":
        loader.set_sample_generator(lambda: iter(samples), batch_size=len(samples), drop_last=False,
                                    places=places)
    elif path == "loader.sample_list":
        loader.set_sample_list_generator(lambda: iter([samples]), places=places)
    elif path == "loader.batch":
        loader.set_batch_generator(lambda: iter([batch]), places=places)
    else:
        raise ValueError(f"unknown path {path!r}")
    if not iterable:
        return loader.start, loader.reset

    def first():
        got = list(loader())
        if not got:
            raise RuntimeError("the loader gave no batch")
        return got[0]
    return first, None


def run_case(fluid, case: dict) -> dict:
    """One case with ``fluid`` (``paddle.fluid`` or ``placegroup``): its outcome (module docstring)."""
    thread_errors: list = []
    hook = threading.excepthook
    threading.excepthook = lambda a: thread_errors.append(f"{a.exc_type.__name__}: {a.exc_value}")
    try:
        main, startup = fluid.Program(), fluid.Program()
        scope = fluid.Scope()
        with fluid.scope_guard(scope), fluid.unique_name.guard(), fluid.program_guard(main, startup):
            place = fluid.CPUPlace()
            x, reader = _declare(fluid, case["declare"])
            exe, stop = fluid.Executor(place), None
            try:
                # a non-iterable loader's read op comes before the ops that read x, as in a script
                step_feed, stop = _source(fluid, case, x, reader, place)
                out, loss = _net(fluid, x, case.get("net", "scale"))
                exe.run(startup)
                feed = step_feed()
                fetch = [out] + ([loss] if loss is not None else [])
                got = exe.run(main, feed=feed, fetch_list=fetch, return_numpy=False)
                losses = []
                if loss is not None:
                    losses.append(float(np.array(got[1]).reshape(-1)[0]))
                    if feed is not None:  # a second step: the trained weights meet the same feed
                        losses.append(float(np.array(exe.run(main, feed=feed, fetch_list=[loss])[0])
                                            .reshape(-1)[0]))
            except Exception as e:  # noqa: BLE001 - the outcome
                msg = f"{type(e).__name__}: {e}"
                if thread_errors:
                    msg += " | reader thread: " + "; ".join(thread_errors)
                return {"ok": False, "error": msg}
            finally:
                if stop is not None:
                    stop()
        t = got[0]
        arr = np.array(t)
        lod = t.recursive_sequence_lengths() if hasattr(t, "recursive_sequence_lengths") else []
        res = {"ok": True, "shape": list(arr.shape), "lod": [list(map(int, l)) for l in lod],
               "values": arr.reshape(-1).tolist()}
        if loss is not None:
            res["loss"] = losses
        return res
    finally:
        threading.excepthook = hook


def _isolated(fluid, case: dict) -> dict:
    """``run_case`` in a forked child: a case that aborts Fluid's process (a reader thread torn
    down mid-batch) costs that case, not the run."""
    import os

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        os.close(r)
        try:
            res = run_case(fluid, case)
        except BaseException as e:  # noqa: BLE001 - a case the runner could not even set up
            res = {"ok": False, "error": f"{type(e).__name__}: {e}", "setup": True}
        with os.fdopen(w, "w") as f:
            json.dump(res, f)
        os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        text = f.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        return {"ok": False, "error": f"Aborted: the process died (wait status {status})"}
    return json.loads(text)


def main(spec_path: str) -> None:
    with open(spec_path) as f:
        spec = json.load(f)
    from paddle import fluid

    out = {case["id"]: _isolated(fluid, case) for case in spec["cases"]}
    with open(spec["out"], "w") as f:
        json.dump(out, f)


if __name__ == "__main__":
    main(sys.argv[1])
