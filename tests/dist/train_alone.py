"""A script that ignores the role ``placegroup launch`` gives it: every process trains the same
small model alone, as a Fluid script that reads its role from flags does when started without
them. Prints ``{"step": i, "loss": x}`` per step.

    python train_alone.py [--pserver-hangs]

With ``--pserver-hangs`` a process whose ``TRAINING_ROLE`` is ``PSERVER`` waits instead, for an
hour: a pserver that nobody contacts and that never returns.
"""
import argparse
import json
import os
import time

import numpy as np

import placegroup as fluid

parser = argparse.ArgumentParser()
parser.add_argument("--pserver-hangs", action="store_true")
args = parser.parse_args()
if args.pserver_hangs and os.environ.get("TRAINING_ROLE") == "PSERVER":
    time.sleep(3600)

fluid.default_startup_program().random_seed = 7
x = fluid.layers.data(name="x", shape=[4])
y = fluid.layers.data(name="y", shape=[1])
cost = fluid.layers.mean(fluid.layers.square_error_cost(input=fluid.layers.fc(input=x, size=1), label=y))
fluid.optimizer.SGD(learning_rate=0.1).minimize(cost)
exe = fluid.Executor(fluid.CPUPlace())
exe.run(fluid.default_startup_program())
r = np.random.RandomState(0)
for step in range(3):
    feed = {"x": r.rand(8, 4).astype("float32"), "y": r.rand(8, 1).astype("float32")}
    loss, = exe.run(feed=feed, fetch_list=[cost])
    print(json.dumps({"step": step, "loss": float(np.asarray(loss).reshape(-1)[0])}), flush=True)
