"""The tools: the ``placegroup`` command (cli.py: ``dump``, ``launch``,
``keys``, ``env``), what ``dump`` renders (dump.py), the local cluster launcher (launch.py) and the
launch contract a process reads from its environment (from_env.py); and running Fluid 1.x scripts
unchanged: the ``paddle`` aliases and the honest gaps (compat.py), over Fluid 1.8.5's module
tree as data (fluid_surface.py, compat_names.py), and the module paths that moved (moved.py).

``__version__`` is placegroup's version: the command prints it, and ``placegroup.__version__``
is this same string."""

__version__ = "0.1.0"
