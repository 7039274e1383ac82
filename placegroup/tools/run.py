"""``placegroup run script.py ARGS``: an unmodified Fluid 1.x script, run on placegroup.

The script's ``import paddle`` and ``import paddle.fluid as fluid`` give placegroup's modules
(``placegroup.compat.alias_paddle``); it runs in this process as ``python script.py ARGS``
would. ``placegroup launch --paddle-compat`` starts every process of a cluster this way.

Example::

    placegroup run train.py --epochs 2
    placegroup launch --paddle-compat --trainers 2 --pservers 2 train.py --epochs 2
"""
from __future__ import annotations

import click


@click.command(short_help="Run an unmodified Fluid 1.x script (import paddle.fluid) on placegroup.",
               context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(script: str, args: tuple) -> None:
    """Run SCRIPT [ARGS] with `paddle` and `paddle.fluid` mapped to placegroup.

    As `python SCRIPT ARGS` would: sys.argv, __name__ == "__main__", the script's directory
    first on sys.path. A Fluid 1.8 name placegroup lacks raises an error naming it
    (docs/fluid_compat.md lists them).
    """
    from placegroup.tools.compat import run_script

    run_script(script, list(args))
