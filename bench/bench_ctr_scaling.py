"""How the CTR job's cost grows with trainers (T) and pservers (P), on placegroup, and a short
model of it built from measured per-op and per-message costs.

The job is bench/peers/ctr_fluid1.py (the Fluid 1.x CTR DNN of bench_ctr.py, sync mode, a 1M x
10 ``is_sparse`` table, Adam), run by ``placegroup run`` for each T in ``--trainers`` and P in
``--pservers`` (default 1, 2, 4, 8 x 1, 2, 4), every process started plainly on one thread
(bench/peers/launch_peer.py), all with ``PLACEGROUP_PROFILE=1``. On a 2-core machine these runs
are oversubscribed (up to 12 processes), so wall time says little: the measure is **CPU seconds
per trainer step** (process CPU, all threads, ZeroMQ's IO thread included):

* a trainer: its own ``cpu_ms_per_step`` (``time.process_time`` over its timed steps);
* a pserver: its ``cpu_s`` (process CPU inside ``exe.run(pserver_prog)``, every step, warm-up
  included) / (steps x T): its share of one trainer step;
* the job: the mean trainer's + the pservers' summed = the CPU the whole job spends for one
  trainer step (each sync round is T trainer steps).

The model. Every coefficient comes from the profile tables the runs print
(``PLACEGROUP_PROFILE=1``: per-op CPU per call, message counts and CPU per message), pooled
over the runs by least squares; none is fitted to the measured process CPU, which is what the
model is then checked against:

    trainer(T, P)  = W(P) + n_t(P) * u_t      W(P) = W0 + W1 * P,  n_t(P) = n0 + n1 * P
    pserver round  = A / P + G * T / P + n_p * T * u_p                (one pserver, one sync round)
    job per trainer step = trainer(T, P) + P * round / T
                         = W0 + W1 P + (n0 + n1 P) u_t + A / T + G + P n_p u_p

* ``W(P)``: a trainer's op CPU per step less the CPU its messages cost (their receive is paid
  inside the first op that reads a parameter), fitted on P: the forward, backward and lookups
  (W0), and the plumbing of the prefetch and gradient per pserver (split_ids, merge and
  split_selected_rows, the split of each dense gradient: W1);
* ``n_t(P)``, ``u_t``: messages (sent + received) per trainer step, fitted on P, and the CPU per
  message (send and receive pooled, weighted by counts);
* ``A``, ``G``: a pserver's op CPU a round less its message CPU, fitted on (1 / P, T / P) at
  once. ``A``: the Adam update of the whole table (Fluid's non-lazy sparse Adam moves every row,
  so a pserver's share is A / P whatever T); ``G``: what grows with the rows it gets,
  T x (rows per trainer) / P: merging the trainers' gradient rows, serving their prefetches,
  the touched rows of Adam;
* ``n_p``, ``u_p``: a pserver's messages per trainer per round, and CPU per message.

One pserver was another regime when this was written, left out of the fit (``--fit-min-p 2``) and
shown against it: with P = 1 the table was not sliced into blocks, so the trainer did not prefetch
its rows but pulled the whole 40 MB table back after every step, as Fluid does; a table left whole
is now prefetched as one block (NOTE(block-prefetch)), so measure P = 1 again before fitting it
(then, the pserver's profile showed ~5 MB messages and no ``shard_lookup``).

What it leaves out, so where it misses: the process CPU outside the profiled thread (ZeroMQ's IO
thread, the garbage collector, the loop around ``exe.run``) and the startup of the first,
warm-up steps, which the pserver figure includes. The merge is taken linear in T, but zipf ids
of T trainers overlap more as T grows, so the unique rows a pserver merges grow slower than T:
for large T the ``G`` term is an upper bound. The 64 x 16 prediction assumes one core per
process (no oversubscription: the per-op costs measured here on 2 shared cores include cache
and scheduler effects of the crowding, which make them somewhat high).

    python bench/bench_ctr_scaling.py [--trainers 1,2,4,8] [--pservers 1,2,4] [--steps 12]
        [--warmup 4] [--batch 1000] [--predict 64x16] [--plot docs/img/ctr_scaling.png]
        [--json out.json] [--load out.json] [--fit-min-p 2]

``--plot`` needs matplotlib, which is not a dependency of placegroup: ``pip install -e ".[bench]"``.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))

from launch_peer import PeerError, run_cluster_all  # noqa: E402

SCRIPT = os.path.join(HERE, "peers", "ctr_fluid1.py")
PLACEGROUP = [sys.executable, "-m", "placegroup", "run"]
# ops of a pserver's startup program (initializers), left out of its per-round cost
STARTUP_OPS = {"uniform_random", "gaussian_random", "truncated_gaussian_random", "fill_constant"}
ROW = re.compile(r"^\s{2}(\S+)\s+([\d,]+)\s+([\d.]+)\s+(?:([\d.]+)\s+)?([\d.]+)\s+[\d.]+%$")
MSG = re.compile(r"messages: ([\d,]+) sent \(([\d.]+) kB, ([\d.]+) us of CPU each to pack and send\); ([\d,]+) "
                 r"received \(([\d.]+) kB, ([\d.]+) us of CPU each")


def parse_profile(path: str) -> dict:
    """The ``PLACEGROUP_PROFILE`` table in ``path``: {"ops": {name: (calls, cpu_us_per_call)},
    "sent", "sent_us", "received", "received_us"} (per message: CPU µs)."""
    ops, msg = {}, None
    with open(path, errors="replace") as f:
        for line in f:
            m = MSG.search(line)
            if m:
                msg = m
                continue
            r = ROW.match(line.rstrip("\n"))
            if r and not line.lstrip().startswith("op "):
                ops[r.group(1)] = (int(r.group(2).replace(",", "")), float(r.group(5)))
    if msg is None:
        raise ValueError(f"no messages line in {path}")
    return {"ops": ops, "sent": int(msg.group(1).replace(",", "")), "sent_us": float(msg.group(3)),
            "received": int(msg.group(4).replace(",", "")), "received_us": float(msg.group(6))}


def profile_costs(prof: dict, steps: int, skip=()) -> dict:
    """Per step (``steps`` training steps): op CPU (s), messages, message CPU (s); and each
    op's CPU per step."""
    per_op = {k: c * us / 1e6 / steps for k, (c, us) in prof["ops"].items() if k not in skip}
    msg_cpu = (prof["sent"] * prof["sent_us"] + prof["received"] * prof["received_us"]) / 1e6
    return {"ops_s": sum(per_op.values()), "per_op": per_op, "msgs": (prof["sent"] + prof["received"]) / steps,
            "msg_s": msg_cpu / steps, "msg_total": prof["sent"] + prof["received"], "msg_cpu_total": msg_cpu}


def run_case(t: int, p: int, args, logroot: str) -> dict:
    """One T x P run: the measured CPU per trainer step and the profile's unit costs."""
    logdir = os.path.join(logroot, f"t{t}p{p}")
    env = {"CTR_STEPS": args.steps, "CTR_WARMUP": args.warmup, "CTR_BATCH": args.batch, "PLACEGROUP_PROFILE": "1"}
    t0 = time.monotonic()
    trs, pss = run_cluster_all(PLACEGROUP, SCRIPT, env, trainers=t, pservers=p, timeout=args.timeout,
                               grace=args.grace, logdir=logdir)
    wall = time.monotonic() - t0
    if any(r is None for r in pss):
        raise PeerError(f"T={t} P={p}: a pserver printed no cpu_s line (see {logdir})")
    tr_cpu = [r["cpu_ms_per_step"] / 1e3 for r in trs]
    ps_cpu = [r["cpu_s"] / (r["steps"] * t) for r in pss]
    tr_prof = [profile_costs(parse_profile(os.path.join(logdir, f"trainer{i}.err")), args.steps) for i in range(t)]
    ps_prof = [profile_costs(parse_profile(os.path.join(logdir, f"pserver{i}.err")), args.steps, STARTUP_OPS)
               for i in range(p)]
    return {
        "T": t, "P": p, "wall_s": wall,
        "trainer_s": statistics.mean(tr_cpu), "trainer_min_s": min(tr_cpu), "trainer_max_s": max(tr_cpu),
        "pserver_s": statistics.mean(ps_cpu), "pservers_sum_s": sum(ps_cpu),
        "job_s": statistics.mean(tr_cpu) + sum(ps_cpu),
        "last_loss": statistics.mean(r["last_loss"] for r in trs),
        # per trainer step, mean over the trainers
        "tr_ops_s": statistics.mean(x["ops_s"] for x in tr_prof),
        "tr_msgs": statistics.mean(x["msgs"] for x in tr_prof),
        "tr_msg_s": statistics.mean(x["msg_s"] for x in tr_prof),
        "tr_msg_total": sum(x["msg_total"] for x in tr_prof), "tr_msg_cpu_total": sum(x["msg_cpu_total"] for x in tr_prof),
        # per sync round, mean over the pservers
        "ps_adam_s": statistics.mean(x["per_op"].get("adam", 0.0) for x in ps_prof),
        "ps_ops_s": statistics.mean(x["ops_s"] for x in ps_prof),
        "ps_msgs": statistics.mean(x["msgs"] for x in ps_prof),
        "ps_msg_s": statistics.mean(x["msg_s"] for x in ps_prof),
        "ps_msg_total": sum(x["msg_total"] for x in ps_prof), "ps_msg_cpu_total": sum(x["msg_cpu_total"] for x in ps_prof),
    }


def _fit(xs, ys, intercept=True) -> np.ndarray:
    """Least squares ``y = c0 + c1 x`` (or ``y = c1 x``): the coefficients."""
    x = np.asarray(xs, float)
    a = np.stack([np.ones_like(x), x], 1) if intercept else x[:, None]
    return np.linalg.lstsq(a, np.asarray(ys, float), rcond=None)[0]


def fit_model(cases: list[dict]) -> dict:
    """The coefficients of the docstring's model, from the profile figures of ``cases``."""
    w0, w1 = _fit([c["P"] for c in cases], [c["tr_ops_s"] - c["tr_msg_s"] for c in cases])
    n0, n1 = _fit([c["P"] for c in cases], [c["tr_msgs"] for c in cases])
    u_t = sum(c["tr_msg_cpu_total"] for c in cases) / sum(c["tr_msg_total"] for c in cases)
    # one fit of a pserver's op CPU less its message CPU on (1/P, T/P): the ops that receive
    # (adam itself where T = 1 and nothing merges first) pay for the messages
    x = np.array([[1 / c["P"], c["T"] / c["P"]] for c in cases])
    y = np.array([c["ps_ops_s"] - c["ps_msg_s"] for c in cases])
    a, g = np.linalg.lstsq(x, y, rcond=None)[0]
    (n_p,) = _fit([c["T"] for c in cases], [c["ps_msgs"] for c in cases], intercept=False)
    u_p = sum(c["ps_msg_cpu_total"] for c in cases) / sum(c["ps_msg_total"] for c in cases)
    return {"W": w0, "W1": w1, "n0": n0, "n1": n1, "u_t": u_t, "A": a, "G": g, "n_p": n_p, "u_p": u_p}


def predict(m: dict, t: int, p: int) -> dict:
    """CPU seconds per trainer step: a trainer, one pserver's share, and the job."""
    trainer = m["W"] + m.get("W1", 0.0) * p + (m["n0"] + m["n1"] * p) * m["u_t"]
    round_s = m["A"] / p + m["G"] * t / p + m["n_p"] * t * m["u_p"]
    return {"trainer_s": trainer, "pserver_s": round_s / t, "pservers_sum_s": p * round_s / t,
            "job_s": trainer + p * round_s / t, "pserver_round_s": round_s}


def ms(x: float) -> str:
    return f"{x * 1e3:.1f}"


def table(cases: list[dict], model: dict) -> str:
    lines = ["| T | P | trainer (min-max) | pserver, each | job | model: trainer | model: job | job error |",
             "|---|---|---|---|---|---|---|---|"]
    for c in cases:
        pr = predict(model, c["T"], c["P"])
        err = (pr["job_s"] - c["job_s"]) / c["job_s"]
        lines.append(f"| {c['T']} | {c['P']} | {ms(c['trainer_s'])} ({ms(c['trainer_min_s'])}-{ms(c['trainer_max_s'])}) "
                     f"| {ms(c['pserver_s'])} | {ms(c['job_s'])} | {ms(pr['trainer_s'])} | {ms(pr['job_s'])} "
                     f"| {err:+.0%} |")
    return "\n".join(lines)


def describe(m: dict) -> str:
    return (f"W(P) = {ms(m['W'])} + {ms(m.get('W1', 0.0))} P ms (trainer op work a step); messages a trainer step n_t(P) = {m['n0']:.1f} + "
            f"{m['n1']:.1f} P at u_t = {m['u_t'] * 1e6:.0f} us each;\n"
            f"A = {ms(m['A'])} ms (Adam over the whole table, a round); G = {ms(m['G'])} ms per trainer's "
            f"rows (merge, prefetch serving); n_p = {m['n_p']:.1f} messages per trainer a round at "
            f"u_p = {m['u_p'] * 1e6:.0f} us each")


def plot(cases: list[dict], model: dict, path: str, big: tuple[int, int]) -> None:
    try:
        import matplotlib
    except ImportError:
        sys.exit('--plot needs matplotlib, which placegroup does not depend on: pip install -e ".[bench]"')
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    ps = sorted({c["P"] for c in cases})
    ts = sorted({c["T"] for c in cases})
    tt = np.array(sorted(set(ts) | {big[0]}), float)
    grid = np.geomspace(min(ts), big[0], 50)
    for ax, key, title in ((axes[0], "trainer_s", "a trainer"), (axes[1], "job_s", "whole job (trainer + all pservers)")):
        for i, p in enumerate(sorted(set(ps) | {big[1]})):
            color = f"C{i}"
            mine = [c for c in cases if c["P"] == p]
            if mine:
                ax.plot([c["T"] for c in mine], [c[key] * 1e3 for c in mine], "o", color=color, label=f"P={p} measured")
            ax.plot(grid, [predict(model, t, p)[key] * 1e3 for t in grid], "-", color=color, alpha=0.7,
                    label=f"P={p} model")
        pr = predict(model, *big)[key] * 1e3
        ax.plot([big[0]], [pr], "*", ms=12, color="k", label=f"{big[0]} x {big[1]} model: {pr:.0f} ms")
        ax.set_xscale("log", base=2)
        ax.set_xticks(list(tt))
        ax.set_xticklabels([str(int(t)) for t in tt])
        ax.set_xlabel("trainers T")
        ax.set_ylabel("CPU ms per trainer step")
        ax.set_title(title)
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("CTR job on placegroup (sync, batch 1000): CPU per trainer step", fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")


def ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--trainers", type=ints, default=[1, 2, 4, 8], help="T values (default 1,2,4,8)")
    ap.add_argument("--pservers", type=ints, default=[1, 2, 4], help="P values (default 1,2,4)")
    ap.add_argument("--steps", type=int, default=12, help="steps per trainer, warm-up included")
    ap.add_argument("--warmup", type=int, default=4, help="steps before the trainers' timing starts")
    ap.add_argument("--batch", type=int, default=1000, help="examples per trainer step")
    ap.add_argument("--predict", default="64x16", help="the T x P to predict (default 64x16)")
    ap.add_argument("--plot", metavar="PATH", help="write a PNG there (needs matplotlib)")
    ap.add_argument("--fit-min-p", type=int, default=2,
                    help="fit the model on the runs with at least this many pservers (default 2: with one "
                         "pserver the trainer pulls the whole table each step, another regime)")
    ap.add_argument("--json", metavar="PATH", help="write the cases and the model there")
    ap.add_argument("--load", metavar="PATH", help="run nothing: take the cases from an earlier --json")
    ap.add_argument("--logdir", help="keep each run's outputs there (default: a temporary directory)")
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds one run may take")
    ap.add_argument("--grace", type=float, default=20.0,
                    help="seconds the pservers get to return by themselves after the trainers")
    args = ap.parse_args()
    if args.steps <= args.warmup:
        ap.error("--steps must exceed --warmup")
    big = tuple(int(x) for x in args.predict.lower().split("x"))
    if args.plot:  # fail now, not after the sweep
        try:
            import matplotlib  # noqa: F401
        except ImportError:
            sys.exit('--plot needs matplotlib, which placegroup does not depend on: pip install -e ".[bench]"')

    cases = []
    if args.load:  # the cases of an earlier --json: the model, table and plot again, no runs
        with open(args.load) as f:
            cases = json.load(f)["cases"]
    with tempfile.TemporaryDirectory(prefix="ctr_scaling_") as tmp:
        logroot = args.logdir or tmp
        for t in [] if args.load else args.trainers:
            for p in args.pservers:
                c = run_case(t, p, args, logroot)
                cases.append(c)
                print(f"T={t} P={p}: trainer {ms(c['trainer_s'])} ms, pserver {ms(c['pserver_s'])} ms each, "
                      f"job {ms(c['job_s'])} ms CPU per trainer step ({c['wall_s']:.0f} s wall)", flush=True)

    fitted = [c for c in cases if c["P"] >= args.fit_min_p] or cases
    model = fit_model(fitted)
    if len(fitted) < len(cases):
        print(f"\nthe model is fitted on the runs with P >= {args.fit_min_p} only; the others are shown "
              "against it (a one-pserver job pulls the whole table: see the docstring)")
    print("\nCPU ms per trainer step (process CPU, all threads); model beside it:\n")
    print(table(cases, model))
    print("\nmodel: " + describe(model))
    errs = [abs(predict(model, c["T"], c["P"])["job_s"] - c["job_s"]) / c["job_s"] for c in fitted]
    print(f"job error over the {len(fitted)} fitted cases: median {statistics.median(errs):.0%}, worst {max(errs):.0%}")
    pr = predict(model, *big)
    print(f"\n{big[0]} x {big[1]}: a trainer {ms(pr['trainer_s'])} ms, a pserver {ms(pr['pserver_round_s'])} ms a "
          f"round ({ms(pr['pserver_s'])} ms per trainer step), the job {ms(pr['job_s'])} ms CPU per trainer step "
          f"({pr['job_s'] * big[0]:.1f} CPU s per sync round)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": {k: v for k, v in vars(args).items()}, "cases": cases, "model": model,
                       "predict": {"T": big[0], "P": big[1], **pr}}, f, indent=1)
    if args.plot:
        plot(cases, model, args.plot, big)


if __name__ == "__main__":
    main()
