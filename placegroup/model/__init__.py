"""What layers are made with and what trains them: initializers, regularizers, ``ParamAttr``,
``LayerHelper`` and its base, ``append_backward`` (backward.py), gradient clipping (clip.py), the
optimizers (optimizer.py, optimizer_base.py, optimizer_wrappers.py), Fluid's process-wide
switches (switches.py), host-side metrics (metrics.py, average.py), ``CompiledProgram`` and its
strategies (compiler.py, which the executor reads) and the distributed lookup table's finder.

They build IR and sit below ``placegroup/layers/``. Fluid's names for them are the façade's
modules (``fluid.optimizer``, ``fluid.clip``, ...); the optimizer averages, which read an
executor's scope, are in placegroup/runtime/."""
