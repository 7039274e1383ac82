"""Fleet's utilities (Fluid 1.8 ``fluid.incubate.fleet.utils``): programs as files and their
checks (``utils``), HDFS through ``hadoop fs`` (``hdfs``), a barrier of the trainers over HDFS
(``fleet_barrier_util``), and the file systems of collective fleet's checkpoints
(``fs_wrapper``, Fluid's ``paddle.distributed.fs_wrapper``)."""
