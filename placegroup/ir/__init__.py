"""The IR: what a program is, independent of how it runs.

``framework`` (Program, Block, Variable, Operator and the default programs), ``place_group``
(PlaceGroup, ExecutorId), ``places`` (CPUPlace, CUDAPlace), ``cluster`` (the executors of a
transpiled program and the edge between an op and each input), ``verify`` (the lint run after
every pass), ``printer`` (the one-op-per-line text form), ``serialize`` (prog.bin's bytes) and
``unique_name``. These modules import nothing from the user API, the transpiler, persistence,
the tools or the executor; below them are only the op registry (``placegroup.ops``), the value
types (``placegroup.values``) and the error classes (docs/ir.md).
"""
