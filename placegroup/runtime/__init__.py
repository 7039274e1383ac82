"""What runs programs beside the ``Executor``, or reads its scope: ``ParallelExecutor``
(parallel_executor.py), ``fluid.core`` (core.py), the profiler, the parameter averages
(averaging.py: ``ModelAverage``, ``ExponentialMovingAverage``), ``Communicator``, ``fluid.op``,
``default_scope_funcs``, the trainer descriptions and device workers, ``fluid.debugger`` (which
saves vars through placegroup/io/) and ``install_check``.

Above the executor and persistence. Fluid's names for them are the façade's modules
(``fluid.core``, ``fluid.profiler``, ...)."""
