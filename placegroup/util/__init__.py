"""Helpers that know nothing of programs, low in the package so that every layer may use them:
files written atomically (atomic_files.py) and the var file format (var_format.py), which the
save and load ops use too; protobuf's text format (text_format.py); the reader processes' sample
codec (sample_codec.py); fields set by assignment (fields.py), the base of every strategy and
config; the one-line end of a user error (failures.py) and why a port cannot be bound (ports.py);
the key -> row index of tables keyed by raw 64-bit ids, and ``mix64`` (key_index.py); the growing table
of such rows, with admission, per-row optimizers and eviction (dynamic_table.py);
Graphviz text (graphviz.py, net_drawer.py); ``ProgramStats`` (program_stats.py); and Fluid's
small helper modules (log_helper, wrapped_decorator, annotations, multiprocess_utils).

They import only values, errors and config. Fluid's names for them (``fluid.graphviz``, ...)
are the façade's modules at placegroup/'s top level."""
