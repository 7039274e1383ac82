"""Fluid 1.x models run the way Fluid's own distributed unit tests ran parameter-server mode
(``test_dist_base``'s runner and its ``dist_*.py`` models), which users copied: one script,
started once per process with flags, as a pserver or a trainer, or alone.

Started as::

    placegroup run dist_runner.py --model mnist --role pserver --endpoints A,B \\
        --current_endpoint A --trainer_id 0 --trainers 2 --update_method pserver --sync_mode
    placegroup run dist_runner.py --model mnist --role trainer --endpoints A,B \\
        --current_endpoint A --trainer_id 0 --trainers 2 --update_method pserver --sync_mode \\
        --use_reader_alloc --lr 0.1 --batch_size 8
    placegroup run dist_runner.py --model mnist --role trainer --update_method local --lr 0.1 \\
        --batch_size 8

(under Fluid 1.8.5 itself: ``python dist_runner.py ...``). As in that runner, the endpoints are
the pservers', a trainer's ``--current_endpoint`` is a pserver's and it does not pass it to
``transpile``, and ``--use_reader_alloc`` gives trainer K the examples at offsets ``offset % 2
== K`` of each batch. A trainer (or the local run) prints one JSON line per step,
``{"step": i, "loss": x}``, on stdout. In the local run, ``--init FILE.npz`` sets parameters
from arrays of their names after the startup program, and ``--save_init FILE.npz`` writes the
values the parameters started from.

Models, small versions of the shapes those tests used, on data made here from a fixed
generator: ``mnist`` (conv + pool, a softmax fc, cross entropy, Momentum), ``ctr`` (a deep part
over a sparse embedding of an id slot, sum-pooled, and a wide part over another slot; Adam, with
accuracy and AUC beside the loss), ``simnet_bow`` (query and positive / negative titles through
one shared sparse embedding, sum-pooled; cosines and a hinge loss; SGD) and ``word2vec`` (an
N-gram model: four words through one shared sparse embedding, concatenated, a hidden fc and a
softmax over the vocabulary; SGD). Every loss is a mean over the batch's examples, so two
trainers fed half a batch each average to one process fed all of it.
"""
import argparse
import json
import sys

import numpy as np

import paddle.fluid as fluid
from paddle.fluid import compiler

RUN_STEP = 5
DEFAULT_BATCH_SIZE = 2

fluid.default_startup_program().random_seed = 1
fluid.default_main_program().random_seed = 1


def _normal(scale):
    return fluid.ParamAttr(initializer=fluid.initializer.Normal(scale=scale))


# -- models: each builds the network in the default programs and returns (avg_cost, reader) --

def mnist(args):
    img = fluid.layers.data(name='pixel', shape=[1, 12, 12], dtype='float32')
    label = fluid.layers.data(name='label', shape=[1], dtype='int64')
    conv_pool = fluid.nets.simple_img_conv_pool(
        input=img, filter_size=3, num_filters=4, pool_size=2, pool_stride=2, act='relu',
        param_attr=_normal(0.3))
    predict = fluid.layers.fc(input=conv_pool, size=10, act='softmax', param_attr=_normal(0.1))
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.mean(x=cost)
    fluid.layers.accuracy(input=predict, label=label)
    fluid.default_main_program().clone()  # the runner's inference program, taken before minimize
    fluid.optimizer.Momentum(learning_rate=args.lr, momentum=0.9).minimize(avg_cost)

    def sample(r):
        return r.random_sample((1, 12, 12)).astype('float32'), int(r.randint(0, 10))
    return avg_cost, sample


CTR_DNN_DIM, CTR_LR_DIM = 600, 300


def ctr(args):
    dnn_data = fluid.layers.data(name='dnn_data', shape=[-1, 1], dtype='int64', lod_level=1,
                                 append_batch_size=False)
    lr_data = fluid.layers.data(name='lr_data', shape=[-1, 1], dtype='int64', lod_level=1,
                                append_batch_size=False)
    label = fluid.layers.data(name='click', shape=[-1, 1], dtype='int64', lod_level=0,
                              append_batch_size=False)
    dnn_emb = fluid.layers.embedding(
        input=dnn_data, size=[CTR_DNN_DIM, 16], is_sparse=True, is_distributed=False,
        param_attr=fluid.ParamAttr(name='deep_embedding', initializer=fluid.initializer.Uniform(-0.1, 0.1)))
    dnn_out = fluid.layers.sequence_pool(input=dnn_emb, pool_type='sum')
    for i, dim in enumerate([16, 8]):
        dnn_out = fluid.layers.fc(input=dnn_out, size=dim, act='relu', param_attr=_normal(0.3),
                                  name='dnn-fc-%d' % i)
    lr_emb = fluid.layers.embedding(
        input=lr_data, size=[CTR_LR_DIM, 1], is_sparse=True, is_distributed=False,
        param_attr=fluid.ParamAttr(name='wide_embedding', initializer=fluid.initializer.Constant(value=0.01)))
    lr_pool = fluid.layers.sequence_pool(input=lr_emb, pool_type='sum')
    merge = fluid.layers.concat(input=[dnn_out, lr_pool], axis=1)
    predict = fluid.layers.fc(input=merge, size=2, act='softmax', param_attr=_normal(0.3))
    fluid.layers.accuracy(input=predict, label=label)
    fluid.layers.auc(input=predict, label=label)
    cost = fluid.layers.cross_entropy(input=predict, label=label)
    avg_cost = fluid.layers.mean(x=cost)
    fluid.optimizer.Adam(learning_rate=args.lr).minimize(avg_cost)

    def sample(r):
        dnn = r.randint(0, CTR_DNN_DIM, (r.randint(1, 6), 1)).tolist()
        wide = r.randint(0, CTR_LR_DIM, (r.randint(1, 4), 1)).tolist()
        return dnn, wide, [int(dnn[0][0] % 2)]
    return avg_cost, sample


SIMNET_DICT, SIMNET_EMB, SIMNET_HID, MARGIN = 500, 16, 8, 0.1


def simnet_bow(args):
    emb_attr = fluid.ParamAttr(name='__emb__', initializer=fluid.initializer.Uniform(-0.1, 0.1))

    def tower(name, fc_attr, bias_attr=None):
        ids = fluid.layers.data(name=name, shape=[1], dtype='int64', lod_level=1)
        emb = fluid.layers.embedding(input=ids, size=[SIMNET_DICT, SIMNET_EMB], is_sparse=True,
                                     param_attr=emb_attr)
        summed = fluid.layers.softsign(fluid.layers.sequence_pool(input=emb, pool_type='sum'))
        return fluid.layers.fc(input=summed, size=SIMNET_HID, param_attr=fc_attr, bias_attr=bias_attr)

    q_fc = tower('query_ids', fluid.ParamAttr(name='__q_fc__', initializer=fluid.initializer.Normal(scale=0.3)))
    fluid.layers.data(name='label', shape=[1], dtype='int64')  # fed, and read by nothing, as there
    title_attr = fluid.ParamAttr(name='__fc__', initializer=fluid.initializer.Normal(scale=0.3))
    pt_fc = tower('pos_title_ids', title_attr, fluid.ParamAttr(name='__fc_b__'))
    nt_fc = tower('neg_title_ids', title_attr, fluid.ParamAttr(name='__fc_b__'))
    cos_q_pt = fluid.layers.cos_sim(q_fc, pt_fc)
    cos_q_nt = fluid.layers.cos_sim(q_fc, nt_fc)
    hinge = fluid.layers.elementwise_add(
        fluid.layers.elementwise_sub(
            fluid.layers.fill_constant_batch_size_like(input=cos_q_pt, shape=[-1, 1], value=MARGIN,
                                                       dtype='float32'), cos_q_pt), cos_q_nt)
    loss = fluid.layers.elementwise_max(
        fluid.layers.fill_constant_batch_size_like(input=hinge, shape=[-1, 1], value=0.0, dtype='float32'), hinge)
    avg_cost = fluid.layers.mean(loss)
    right = fluid.layers.cast(fluid.layers.less_than(cos_q_nt, cos_q_pt), dtype='float64')
    fluid.layers.elementwise_div(fluid.layers.reduce_sum(right),
                                 fluid.layers.fill_constant(shape=[1], value=args.batch_size * 1.0, dtype='float64'))
    fluid.optimizer.SGD(learning_rate=args.lr).minimize(avg_cost)

    def sample(r):
        return tuple(r.randint(0, SIMNET_DICT, (r.randint(1, 6), 1)).tolist() if k != 1 else [0]
                     for k in range(4))
    return avg_cost, sample


W2V_DICT, W2V_EMB, W2V_HID, N = 400, 16, 32, 5


def word2vec(args):
    words = [fluid.layers.data(name=n, shape=[1], dtype='int64')
             for n in ('firstw', 'secondw', 'thirdw', 'forthw', 'nextw')]
    embs = [fluid.layers.embedding(input=w, size=[W2V_DICT, W2V_EMB], dtype='float32', is_sparse=True,
                                   param_attr=fluid.ParamAttr(name='shared_w',
                                                              initializer=fluid.initializer.Uniform(-0.5, 0.5)))
            for w in words[:N - 1]]
    concat = fluid.layers.concat(input=embs, axis=1)
    hidden = fluid.layers.fc(input=concat, size=W2V_HID, act='sigmoid', param_attr=_normal(0.2))
    predict = fluid.layers.fc(input=hidden, size=W2V_DICT, act='softmax', param_attr=_normal(0.2))
    cost = fluid.layers.cross_entropy(input=predict, label=words[N - 1])
    avg_cost = fluid.layers.mean(cost)
    fluid.optimizer.SGD(learning_rate=args.lr).minimize(avg_cost)

    def sample(r):
        return tuple([int(i)] for i in r.randint(0, W2V_DICT, N))
    return avg_cost, sample


MODELS = {'mnist': mnist, 'ctr': ctr, 'simnet_bow': simnet_bow, 'word2vec': word2vec}


def train_reader(sample, batch_size):
    """``RUN_STEP`` batches of ``batch_size`` examples, the same in every process."""
    def reader():
        r = np.random.RandomState(90)
        for _ in range(RUN_STEP):
            yield [sample(r) for _ in range(batch_size)]
    return reader


# -- the runner ---------------------------------------------------------------------------

def get_transpiler(trainer_id, main_program, pserver_endpoints, trainers, sync_mode, dc_asgd=False,
                   current_endpoint=None, hogwild_mode=False):
    config = fluid.DistributeTranspilerConfig()
    config.enable_dc_asgd = dc_asgd
    config.sync_mode = sync_mode
    config.runtime_split_send_recv = hogwild_mode
    t = fluid.DistributeTranspiler(config=config)
    t.transpile(trainer_id=trainer_id, program=main_program, pservers=pserver_endpoints, trainers=trainers,
                sync_mode=sync_mode, current_endpoint=current_endpoint)
    return t


def run_pserver(args):
    MODELS[args.model](args)
    t = get_transpiler(args.trainer_id, fluid.default_main_program(), args.endpoints, args.trainers,
                       args.sync_mode, args.dc_asgd, hogwild_mode=args.hogwild)
    pserver_prog = t.get_pserver_program(args.current_endpoint)
    startup_prog = t.get_startup_program(args.current_endpoint, pserver_prog)
    exe = fluid.Executor(fluid.CPUPlace())
    exe.run(startup_prog)
    exe.run(pserver_prog)


def run_trainer(args):
    avg_cost, sample = MODELS[args.model](args)
    if args.update_method == 'pserver':
        t = get_transpiler(args.trainer_id, fluid.default_main_program(), args.endpoints, args.trainers,
                           args.sync_mode, args.dc_asgd, hogwild_mode=args.hogwild)
        trainer_prog = t.get_trainer_program()
    else:
        trainer_prog = fluid.default_main_program()

    place = fluid.CPUPlace()
    exe = fluid.Executor(place)
    exe.run(fluid.default_startup_program())
    if args.update_method == 'local':
        set_or_save_init(args, trainer_prog, place)

    exec_strategy = fluid.ExecutionStrategy()
    exec_strategy.num_threads = 1
    build_stra = fluid.BuildStrategy()
    build_stra.enable_inplace = False
    build_stra.memory_optimize = False
    if args.hogwild:
        build_stra.async_mode = True
    if args.use_reduce:
        build_stra.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce
    else:
        build_stra.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.AllReduce
    build_stra.num_trainers = 1
    build_stra.trainer_id = 0
    binary = compiler.CompiledProgram(trainer_prog).with_data_parallel(
        loss_name=avg_cost.name, build_strategy=build_stra, exec_strategy=exec_strategy)

    feed_var_list = [var for var in trainer_prog.global_block().vars.values() if var.is_data]
    feeder = fluid.DataFeeder(feed_var_list, place)
    reader_generator = train_reader(sample, args.batch_size)()

    def get_data():
        origin_batch = next(reader_generator)
        if args.update_method != 'local' and args.use_reader_alloc:
            return [item for offset, item in enumerate(origin_batch) if offset % 2 == args.trainer_id]
        return origin_batch

    for i in range(RUN_STEP):
        loss, = exe.run(binary, fetch_list=[avg_cost.name], feed=feeder.feed(get_data()))
        print(json.dumps({'step': i, 'loss': float(np.array(loss).reshape(-1)[0])}))
        sys.stdout.flush()


def set_or_save_init(args, program, place):
    """The local run's parameters from ``--init``'s arrays; their values to ``--save_init``."""
    scope = fluid.global_scope()
    params = sorted(p.name for p in program.global_block().all_parameters())
    if args.init:
        with np.load(args.init) as arrays:
            if sorted(arrays.files) != params:
                raise ValueError('--init has %s; the parameters are %s' % (sorted(arrays.files), params))
            for name in params:
                scope.find_var(name).get_tensor().set(arrays[name], place)
    if args.save_init:
        np.savez(args.save_init, **{name: np.array(scope.find_var(name).get_tensor()) for name in params})


def main():
    parser = argparse.ArgumentParser(description='Run a dist test model.')
    parser.add_argument('--role', type=str, required=True, choices=['pserver', 'trainer'])
    parser.add_argument('--endpoints', type=str, required=False, default='')
    parser.add_argument('--update_method', type=str, default='local', choices=['pserver', 'local'])
    parser.add_argument('--trainer_id', type=int, required=False, default=0)
    parser.add_argument('--trainers', type=int, required=False, default=1)
    parser.add_argument('--current_endpoint', type=str, required=False, default='')
    parser.add_argument('--sync_mode', action='store_true')
    parser.add_argument('--use_reduce', action='store_true')
    parser.add_argument('--dc_asgd', action='store_true')
    parser.add_argument('--hogwild', action='store_true')
    parser.add_argument('--use_reader_alloc', action='store_true', required=False)
    parser.add_argument('--batch_size', required=False, type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument('--lr', required=False, type=float, default=0.001)
    parser.add_argument('--model', type=str, default='mnist', choices=sorted(MODELS))
    parser.add_argument('--init', type=str, default='', help='local run: set parameters from this .npz')
    parser.add_argument('--save_init', type=str, default='', help='local run: save initial parameters here')
    args = parser.parse_args()
    if args.role == 'pserver' and args.update_method == 'pserver':
        run_pserver(args)
    else:
        run_trainer(args)


if __name__ == '__main__':
    main()
