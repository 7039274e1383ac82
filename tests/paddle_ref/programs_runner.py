"""The models of tests/compat_scripts/ built with Paddle 2.6's static graph, for
tests/test_paddle_programs.py: ``python programs_runner.py SPEC.json``.

SPEC names the model, the data (.npz, as the script reads it), the initial values (the
script's output: ``init/<name>``, set here by name after the startup program, so a name Fluid's
scheme and placegroup disagree on fails loudly) and where to write ``loss`` (and ``predict``).
Paddle runs in its own process so its import never touches the test process.
"""
from __future__ import annotations

import json
import sys

import numpy as np


def _cnn(paddle, F):
    img = paddle.static.data('img', [-1, 1, 16, 16], 'float32')
    label = paddle.static.data('label', [-1, 1], 'int64')
    h = F.max_pool2d(paddle.static.nn.conv2d(img, 8, 5, act='relu'), 2, 2)
    h = paddle.static.nn.batch_norm(h)
    h = F.max_pool2d(paddle.static.nn.conv2d(h, 16, 3, act='relu'), 2, 2)
    pred = paddle.static.nn.fc(h, 10, activation='softmax')
    loss = paddle.mean(F.cross_entropy(pred, label, use_softmax=False, reduction='none'))
    return ['img', 'label'], loss, None, paddle.optimizer.Adam(learning_rate=0.001)


def _mlp(paddle, F):
    x = paddle.static.data('x', [-1, 20], 'float32')
    label = paddle.static.data('label', [-1, 1], 'int64')
    h = paddle.static.nn.fc(x, 32, activation='relu')
    h = paddle.static.nn.fc(h, 32, activation='tanh')
    pred = paddle.static.nn.fc(h, 4, activation='softmax')
    loss = paddle.mean(F.cross_entropy(pred, label, use_softmax=False, reduction='none'))
    opt = paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9,
                                    weight_decay=paddle.regularizer.L2Decay(1e-3),
                                    grad_clip=paddle.nn.ClipGradByGlobalNorm(clip_norm=0.5))
    return ['x', 'label'], loss, pred, opt


def _word2vec(paddle, F):
    names = ['firstw', 'secondw', 'thirdw', 'fourthw']
    words = [paddle.static.data(n, [-1, 1], 'int64') for n in names]
    next_word = paddle.static.data('nextw', [-1, 1], 'int64')
    embeds = [paddle.static.nn.embedding(w, size=[200, 16], is_sparse=True, param_attr='shared_w') for w in words]
    concat = paddle.concat([paddle.reshape(e, [-1, 16]) for e in embeds], axis=1)
    hidden = paddle.static.nn.fc(concat, 64, activation='sigmoid')
    pred = paddle.static.nn.fc(hidden, 200, activation='softmax')
    loss = paddle.mean(F.cross_entropy(pred, next_word, use_softmax=False, reduction='none'))
    opt = paddle.optimizer.SGD(learning_rate=0.5, weight_decay=paddle.regularizer.L2Decay(1e-3))
    return names + ['nextw'], loss, None, opt


MODELS = {'cnn_classifier': _cnn, 'mlp_export': _mlp, 'word2vec': _word2vec}


def main(spec_path: str) -> None:
    spec = json.loads(open(spec_path).read())
    import paddle
    import paddle.nn.functional as F

    paddle.enable_static()
    data, init = np.load(spec['data']), np.load(spec['init'])
    main_p, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main_p, startup), paddle.utils.unique_name.guard():
        feeds, loss, pred, opt = MODELS[spec['model']](paddle, F)
        test_p = main_p.clone(for_test=True)
        opt.minimize(loss)
    place = paddle.CPUPlace()
    exe = paddle.static.Executor(place)
    scope = paddle.static.Scope()
    with paddle.static.scope_guard(scope):
        exe.run(startup)
        params = {p.name for p in main_p.all_parameters()}
        given = {k[len('init/'):] for k in init.files if k.startswith('init/')}
        if params != given:
            raise SystemExit(f'parameter names differ: only Paddle has {sorted(params - given)}, '
                             f'only placegroup has {sorted(given - params)}')
        for name in given:
            scope.find_var(name).get_tensor().set(init['init/' + name], place)
        losses = []
        for step in range(int(data['steps'])):
            out, = exe.run(main_p, feed={n: data[n][step] for n in feeds}, fetch_list=[loss])
            losses.append(float(np.asarray(out).reshape(-1)[0]))
        result = {'loss': np.array(losses)}
        if pred is not None and 'test_x' in data.files:
            dummy = np.zeros((len(data['test_x']), 1), 'int64')  # the clone still has the loss ops
            result['predict'], = exe.run(test_p, feed={'x': data['test_x'], 'label': dummy}, fetch_list=[pred.name])
    np.savez(spec['out'], **result)


if __name__ == '__main__':
    main(sys.argv[1])
