"""``placegroup run script.py ARGS``: an unmodified Fluid 1.x script, run on placegroup.

The script's ``import paddle`` and ``import paddle.fluid as fluid`` give placegroup's modules
(``placegroup.compat.alias_paddle``); it runs in this process as ``python script.py ARGS``
would. ``placegroup launch --paddle-compat`` starts every process of a cluster this way.

Example::

    placegroup run train.py --epochs 2
    placegroup run -m paddlerec.run -m models/rank/dnn/config.yaml
    placegroup launch --paddle-compat --trainers 2 --pservers 2 train.py --epochs 2
"""
from __future__ import annotations

import os

import click


@click.command(short_help="Run an unmodified Fluid 1.x script (import paddle.fluid) on placegroup.",
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("script")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(script: str, args: tuple) -> None:
    """Run SCRIPT [ARGS], or -m MODULE [ARGS], with `paddle` and `paddle.fluid` mapped to
    placegroup.

    As `python SCRIPT ARGS` (or `python -m MODULE ARGS`) would: sys.argv, __name__ ==
    "__main__", the script's directory (the current one for a module) first on sys.path. The
    Python processes it starts see the mapping too. A Fluid 1.8 name placegroup lacks raises
    an error naming it (docs/fluid_compat.md lists them).

    Example: placegroup run -m paddlerec.run -m models/rank/dnn/config.yaml
    """
    from placegroup.tools.compat import run_module, run_script

    if script == "-m":
        if not args:
            raise click.UsageError("-m needs the module to run, as in: placegroup run -m paddlerec.run ARGS")
        run_module(args[0], list(args[1:]))
    elif not os.path.isfile(script):
        raise click.BadParameter(f"no file {script!r} (to run a module: placegroup run -m MODULE ARGS)",
                                 param_hint="SCRIPT")
    else:
        run_script(script, list(args))
