"""The tools on top of everything: the ``placegroup`` command (cli.py: ``dump``, ``launch``,
``keys``, ``env``), what ``dump`` renders (dump.py), the local cluster launcher (launch.py) and the
launch contract a process reads from its environment (from_env.py)."""
