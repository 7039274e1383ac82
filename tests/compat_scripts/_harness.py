"""What the Fluid 1.x scripts next to this file share with the tests that run them: the data
and initial values come from an .npz the test writes, the per-step losses go to one.

A script is run as ``placegroup run SCRIPT DATA.npz OUT.npz`` (or under ``placegroup launch
--paddle-compat``). It reads its batches from DATA (``<feed>`` arrays, batch after batch; a
feed of sequences, declared with ``lod_level=1``, as ``<feed>``, the rows of all batches'
sequences stacked, and ``<feed>@lengths``, each batch's sequence lengths), and
after the startup program sets each parameter from DATA's ``init/<name>`` if it is there,
through ``global_scope().find_var(name).get_tensor().set(...)`` as a checker would; it writes
the values it started from (``init/<name>``) and its losses (``loss``) to OUT. A trainer of a
distributed run (whose parameters start on the pservers) writes its losses to
``OUT.trainer<ID>.npz``; trainer t of n is fed the t-th of n contiguous parts of each
batch's examples (rows, or sequences with their rows). Only numpy and the Fluid API are used.
"""
import os

import numpy as np


def role():
    """(role, trainer_id, trainers, endpoint) from a launcher's environment, or (None, 0, 1, None)."""
    r = os.getenv('TRAINING_ROLE')
    if r is None:
        return None, 0, 1, None
    return (r, int(os.getenv('PADDLE_TRAINER_ID', '0')), int(os.getenv('PADDLE_INIT_TRAINERS')),
            os.getenv('POD_IP') + ':' + os.getenv('PADDLE_INIT_PORT'))


def batches(fluid, data, names, place, tid=0, n=1):
    """Each step's feed dict, trainer ``tid`` of ``n``'s part: ``<name>[step]`` cut by rows, or a
    LoD tensor of ``<name>``'s rows with ``<name>@lengths[step]``, cut by sequences."""
    arrays = {name: data[name] for name in names}
    lengths = {name: data[name + '@lengths'] for name in names if name + '@lengths' in data.files}
    starts = {name: np.concatenate([[0], np.cumsum(lens.reshape(-1))]) for name, lens in lengths.items()}
    for step in range(int(data['steps'])):
        feed = {}
        for name in names:
            if name in lengths:
                lens = lengths[name][step]
                lo, hi = step * len(lens) + tid * len(lens) // n, step * len(lens) + (tid + 1) * len(lens) // n
                rows = arrays[name][starts[name][lo]:starts[name][hi]]
                seq_lens = [int(k) for k in lengths[name].reshape(-1)[lo:hi]]
                feed[name] = fluid.create_lod_tensor(rows, [seq_lens], place)
            else:
                batch = arrays[name][step]
                feed[name] = batch[tid * len(batch) // n:(tid + 1) * len(batch) // n]
        yield feed


def train(fluid, loss, feeds, data_path, out_path, optimize, extra=None):
    """Minimize ``loss`` with ``optimize()``, transpiled when launched; train on DATA's batches."""
    data = np.load(data_path)
    optimize().minimize(loss)
    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    r, tid, n, endpoint = role()
    prog = fluid.default_main_program()
    if r is None:
        exe.run(fluid.default_startup_program())
    else:
        t = fluid.DistributeTranspiler()
        t.transpile(tid, pservers=os.getenv('PADDLE_INIT_PSERVERS'), trainers=n)
        prog = t.get_program(endpoint, r)
        exe.run(t.get_startup_program(endpoint, r))
        if r == 'PSERVER':
            exe.run(prog)
            return None
    scope = fluid.global_scope()
    init = {}
    for p in (fluid.default_main_program().all_parameters() if r is None else ()):  # trainers: pservers hold them
        key = 'init/' + p.name
        if key in data.files:
            scope.find_var(p.name).get_tensor().set(data[key], place)
        init[key] = np.array(scope.find_var(p.name).get_tensor())
    losses = []
    for step, feed in enumerate(batches(fluid, data, feeds, place, tid, n)):
        loss_v, = exe.run(prog, feed=feed, fetch_list=[loss])
        losses.append(float(np.asarray(loss_v).reshape(-1)[0]))
        print('step %d loss %.6f' % (step, losses[-1]))
    result = dict(init, loss=np.array(losses))
    if extra is not None:
        result.update(extra(exe, data))
    np.savez(out_path if r is None else '%s.trainer%d.npz' % (out_path, tid), **result)
    if r is not None:
        exe.close()
    return result
