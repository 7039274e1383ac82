"""``fluid.CompiledProgram`` / ``with_data_parallel``, ``fluid.ParallelExecutor`` and the two
strategies: the numbers of the plain program, Fluid's fields checked as pybind checks them, a
notice for the ones that change nothing, an error for the ones placegroup cannot honour."""
import warnings

import numpy as np
import pytest

import placegroup as fluid
from placegroup.util import fields
from placegroup.compiler import StrategyNotice
from placegroup.errors import ProgramError

STEPS = 4


@pytest.fixture(autouse=True)
def fresh_notices(monkeypatch):
    """Each test sees the notices as a fresh process would."""
    monkeypatch.setattr(fields, "_noticed", set())


def _batches(batch=8, seed=1):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(batch, 13)).astype(np.float32), rng.normal(size=(batch, 1)).astype(np.float32))
            for _ in range(STEPS)]


def _build():
    main, startup = fluid.Program(), fluid.Program()
    with fluid.program_guard(main, startup), fluid.unique_name.guard():
        startup.random_seed = 7
        x, y = fluid.layers.data("x", [13]), fluid.layers.data("y", [1])
        h = fluid.layers.fc(input=x, size=4, act="tanh")
        cost = fluid.layers.mean(fluid.layers.square_error_cost(input=fluid.layers.fc(input=h, size=1), label=y))
        test_prog = main.clone(for_test=True)
        fluid.optimizer.Momentum(learning_rate=0.05, momentum=0.9).minimize(cost)
    return main, startup, test_prog, cost


def _train(run, batches):
    return [float(run({"x": x, "y": y})[0][0]) for x, y in batches]


def _plain(batches):
    main, startup, _, cost = _build()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    return _train(lambda feed: exe.run(main, feed=feed, fetch_list=[cost], scope=scope), batches)


@pytest.mark.parametrize("how", ["compiled", "data_parallel", "data_parallel_strategies", "parallel_executor",
                                 "parallel_executor_feed_dict"])
def test_same_losses_as_the_plain_program(how):
    batches = _batches()
    main, startup, _, cost = _build()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    if how.startswith("parallel_executor"):
        pe = fluid.ParallelExecutor(use_cuda=False, loss_name=cost.name, main_program=main, scope=scope)
        assert pe.device_count == 1
        if how.endswith("feed_dict"):
            run = lambda feed: pe.run([cost.name], feed_dict=feed)  # noqa: E731
        else:
            run = lambda feed: pe.run([cost], feed)  # noqa: E731 - fetch_list first, as in Fluid
    else:
        prog = fluid.CompiledProgram(main)
        if how == "data_parallel":
            prog = prog.with_data_parallel(loss_name=cost.name)
        elif how == "data_parallel_strategies":
            bs, es = fluid.BuildStrategy(), fluid.ExecutionStrategy()
            bs.gradient_scale_strategy = fluid.BuildStrategy.GradientScaleStrategy.One  # one place: the same
            bs.reduce_strategy = fluid.BuildStrategy.ReduceStrategy.Reduce  # honoured: one place, the same
            with pytest.warns(StrategyNotice):
                es.num_threads = 4
                bs.enable_inplace, bs.memory_optimize = False, True
            prog = prog.with_data_parallel(loss_name=cost, build_strategy=bs, exec_strategy=es,
                                           places=fluid.cpu_places(1))
        run = lambda feed: exe.run(prog, feed=feed, fetch_list=[cost], scope=scope)  # noqa: E731
    np.testing.assert_allclose(_train(run, batches), _plain(batches), rtol=1e-6, atol=1e-7)


def test_a_plain_program_takes_a_list_of_one_feed():
    """A list of one feed dict is one place's feed, as in Fluid; several places need
    with_data_parallel (tests/test_data_parallel.py has its numbers)."""
    batches = _batches(batch=8)
    main, startup, _, cost = _build()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    with pytest.raises(ProgramError, match=r"feed is a list of 2 feeds, one per place, but the program runs on "
                                           r"one place; pass one dict"):
        exe.run(main, feed=[{}, {}], scope=scope)
    loss, = exe.run(main, feed=[{"x": batches[0][0], "y": batches[0][1]}], fetch_list=[cost], scope=scope)
    assert loss.shape == (1,)


def test_share_vars_from_runs_in_the_shared_programs_scope():
    batches = _batches()
    main, startup, test_prog, cost = _build()
    exe, scope = fluid.Executor(), fluid.Scope()
    exe.run(startup, scope=scope)
    train = fluid.CompiledProgram(main).with_data_parallel(loss_name=cost.name)
    test = fluid.CompiledProgram(test_prog).with_data_parallel(share_vars_from=train)
    feed = {"x": batches[0][0], "y": batches[0][1]}
    with pytest.raises(ValueError, match="share_vars_from names a CompiledProgram that has not run yet"):
        exe.run(test, feed=feed, fetch_list=[cost.name])
    exe.run(train, feed=feed, fetch_list=[cost], scope=scope)
    got, = exe.run(test, feed=feed, fetch_list=[cost.name], scope=fluid.Scope())  # that scope is not used
    want, = exe.run(test_prog, feed=feed, fetch_list=[cost.name], scope=scope)
    np.testing.assert_array_equal(got, want)
    pe = fluid.ParallelExecutor(use_cuda=False, loss_name=cost.name, main_program=main, scope=scope)
    pe.run([cost], feed=feed)
    pe_test = fluid.ParallelExecutor(use_cuda=False, main_program=test_prog, share_vars_from=pe)
    np.testing.assert_array_equal(pe_test.run([cost.name], feed=feed)[0],
                                  exe.run(test_prog, feed=feed, fetch_list=[cost.name], scope=scope)[0])


def test_fields_are_checked_as_fluids_pybind_objects_check_them():
    bs, es = fluid.BuildStrategy(), fluid.ExecutionStrategy()
    assert bs.reduce_strategy == fluid.BuildStrategy.ReduceStrategy.AllReduce
    assert bs.gradient_scale_strategy == fluid.BuildStrategy.GradientScaleStrategy.CoeffNumDevice
    assert (bs.memory_optimize, bs.num_trainers, es.num_iteration_per_run) == (None, 1, 1)
    with pytest.raises(AttributeError, match="'BuildStrategy' object has no attribute 'fuse_all_reduce'; did you "
                                             "mean 'fuse_all_reduce_ops'"):
        bs.fuse_all_reduce = True
    with pytest.raises(AttributeError, match="'ExecutionStrategy' object has no attribute 'nonsense'"):
        es.nonsense
    with pytest.raises(TypeError, match=r"BuildStrategy.reduce_strategy must be BuildStrategy.ReduceStrategy.AllReduce "
                                        r"or BuildStrategy.ReduceStrategy.Reduce, got 1 \(int\)"):
        bs.reduce_strategy = 1
    with pytest.raises(TypeError, match=r"BuildStrategy.enable_inplace must be True or False, got 'yes'"):
        bs.enable_inplace = "yes"
    with pytest.raises(TypeError, match=r"BuildStrategy.memory_optimize must be None, False or True, got 1"):
        bs.memory_optimize = 1
    with pytest.raises(TypeError, match=r"ExecutionStrategy.num_threads must be an int, got 1.5"):
        es.num_threads = 1.5
    with pytest.raises(TypeError, match=r"BuildStrategy.trainers_endpoints must be a list of str"):
        bs.trainers_endpoints = "127.0.0.1:6170"
    bs.num_trainers = np.int64(1)  # numpy ints are ints
    with pytest.warns(StrategyNotice):
        es.num_threads = 2
    assert type(bs.num_trainers) is int and "num_threads=2" in repr(es)
    with pytest.raises(TypeError, match="CompiledProgram: expected a Program"):
        fluid.CompiledProgram(fluid.CompiledProgram(fluid.Program()))
    with pytest.raises(TypeError, match="exec_strategy must be a fluid.ExecutionStrategy"):
        fluid.CompiledProgram(fluid.Program()).with_data_parallel(exec_strategy=bs)


def test_a_field_that_changes_nothing_is_named_once_per_process():
    with pytest.warns(StrategyNotice, match=r"BuildStrategy.fuse_bn_act_ops = True changes nothing in placegroup: "
                                            r"placegroup runs the program's ops as they are, unfused"):
        fluid.BuildStrategy().fuse_bn_act_ops = True
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        other = fluid.BuildStrategy()
        other.fuse_bn_act_ops = True         # the same field again, on another object: no notice
        other.fuse_bn_act_ops = False        # back to the default: nothing to say
        other.sync_batch_norm = True         # a new field: one notice
        fluid.ExecutionStrategy().num_iteration_per_drop_scope = 1  # and another
    fields = [str(w.message).split(" = ")[0] for w in caught if issubclass(w.category, StrategyNotice)]
    assert fields == ["BuildStrategy.sync_batch_norm", "ExecutionStrategy.num_iteration_per_drop_scope"]


def test_what_placegroup_cannot_honour_is_refused():
    main, startup, _, cost = _build()

    def compile_with(places=None, **fields):
        bs, es = fluid.BuildStrategy(), fluid.ExecutionStrategy()
        for name, value in fields.items():
            setattr(es if name.startswith("num_iteration") else bs, name, value)
        return fluid.CompiledProgram(main).with_data_parallel(loss_name=cost.name, build_strategy=bs,
                                                              exec_strategy=es, places=places)

    scale = fluid.BuildStrategy.GradientScaleStrategy
    with pytest.raises(NotImplementedError, match="gradient_scale_strategy = Customized"):
        compile_with(gradient_scale_strategy=scale.Customized)
    compile_with(fluid.cpu_places(2), gradient_scale_strategy=scale.One)  # honoured: the places' sum
    with pytest.raises(NotImplementedError, match=r"num_trainers = 2 \(NCCL2 collective training\).*"
                                                  r"DistributeTranspiler"):
        compile_with(num_trainers=2, trainer_id=1)
    with pytest.raises(ValueError, match=r"trainer_id = 3 is not in \[0, 1\)"):
        compile_with(trainer_id=3)
    with pytest.raises(NotImplementedError, match="num_iteration_per_run = 2"):
        compile_with(num_iteration_per_run=2)
    with pytest.raises(NotImplementedError, match="num_trainers = 2"):
        fluid.ParallelExecutor(use_cuda=False, loss_name=cost.name, main_program=main, num_trainers=2)
    # set after with_data_parallel: refused when it runs
    bs = fluid.BuildStrategy()
    prog = fluid.CompiledProgram(main, build_strategy=bs)
    bs.gradient_scale_strategy = scale.Customized
    exe = fluid.Executor()
    exe.run(startup)
    with pytest.raises(NotImplementedError, match="Customized"):
        exe.run(prog, feed={"x": np.ones((2, 13)), "y": np.ones((2, 1))})
    with pytest.raises(ValueError, match="the program has backward ops, so loss_name must name its loss"):
        fluid.CompiledProgram(main).with_data_parallel()
    with pytest.raises(ProgramError, match="loss_name 'nope' is not a var of the program"):
        fluid.CompiledProgram(main).with_data_parallel(loss_name="nope")
    twice = fluid.CompiledProgram(main).with_data_parallel(loss_name=cost.name)
    with pytest.raises(ValueError, match="already compiled with data parallel"):
        twice.with_data_parallel(loss_name=cost.name)
    with pytest.raises(TypeError, match="program must be a Program or CompiledProgram"):
        exe.run("main")


def test_places_helpers():
    assert fluid.cpu_places(3) == [fluid.CPUPlace()] * 3
    assert fluid.cpu_places() == [fluid.CPUPlace()]  # CPU_NUM unset: 1, as Fluid 1.8
    assert len(fluid.cuda_pinned_places(2)) == 2
    if not fluid.is_compiled_with_cuda():
        with pytest.raises(RuntimeError, match="cuda_places: placegroup sees no CUDA device"):
            fluid.cuda_places()
    assert fluid.cuda_places([1, 0]) == [fluid.CUDAPlace(1), fluid.CUDAPlace(0)]
