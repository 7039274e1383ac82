"""The ``placegroup`` command (console script ``placegroup = placegroup.tools.cli:main``).

Subcommands::

    placegroup dump prog.bin [--format text|json|dot] [--role R [--endpoint EP | --trainer-id N]]
    placegroup dump prog.bin --endpoints
    placegroup launch --trainers 2 --pservers 2 [--paddle-compat] script.py [args]
    placegroup run script.py [args]
    placegroup keys DIR [--clients N] [--force]
    placegroup --version

``dump`` shows who runs what (the rendering is in ``placegroup/tools/dump.py``, the formats in
``docs/ir.md``); ``launch`` starts a local cluster (``placegroup/tools/launch.py``); ``keys`` makes
the CURVE keys that ``PLACEGROUP_KEYS`` points to (``comm/security.py``, docs/security.md); ``run``
runs an unmodified Fluid 1.x script (``import paddle.fluid``) on placegroup (``tools/run.py``). A file that is
missing or not a valid prog.bin, a bad flag or a missing argument gives one line on stderr and exit
status 2, never a traceback nor a usage block.

Example::

    $ placegroup dump prog.bin --role pserver --endpoint 127.0.0.1:7164 --format dot | dot -Tsvg
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys

import click

from placegroup.tools import __version__
from placegroup.tools import dump_executors
from placegroup.tools.dump import FORMATS, render
from placegroup.tools.run import run
from placegroup.errors import ConfigError, PlacegroupError, SerializationError

USAGE_ERROR = 2  # what click uses for a bad command line, and we for a bad input file


class DumpError(click.ClickException):
    """One line on stderr, exit status 2."""

    exit_code = USAGE_ERROR

    def __init__(self, message: str) -> None:
        # One line, whatever the cause's message looks like.
        super().__init__("; ".join(s.strip() for s in str(message).splitlines() if s.strip()))

    def show(self, file=None) -> None:
        click.echo(f"placegroup: error: {self.format_message()}", err=True)


class UsageLine(DumpError):
    """click's usage error (a bad flag, a missing argument, a script that does not exist) as
    one line, naming the command and where its help is, exit status 2."""

    def __init__(self, e: click.UsageError) -> None:
        super().__init__(e.format_message())
        self.path = e.ctx.command_path if e.ctx is not None else "placegroup"

    def show(self, file=None) -> None:
        click.echo(f"{self.path}: error: {self.format_message()} (see '{self.path} --help')", err=True)


@contextlib.contextmanager
def _one_line():
    try:
        yield
    except click.UsageError as e:
        if isinstance(e, getattr(click.exceptions, "NoArgsIsHelpError", ())):
            raise  # bare `placegroup`: the help itself
        raise UsageLine(e) from None


class OneLineGroup(click.Group):
    """A click group whose own and subcommands' usage errors print one line (``UsageLine``)."""

    def make_context(self, *args, **kwargs):
        with _one_line():
            return super().make_context(*args, **kwargs)

    def invoke(self, ctx):
        with _one_line():
            return super().invoke(ctx)


def _reason(e: ValueError) -> str:
    """A ValueError's message; for pydantic's, the first error's own words."""
    errors = getattr(e, "errors", None)
    if callable(errors) and errors():
        first = errors()[0]
        return str(first.get("ctx", {}).get("error", first["msg"]))
    return str(e)


@click.group(cls=OneLineGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="placegroup",
                      message="%(prog)s %(version)s")
def main() -> None:
    """placegroup: one PlaceGroup-annotated program, run by every process."""


GET_DOT = "apt-get install graphviz, brew install graphviz or conda install graphviz"


@main.command(short_help="Show who runs what in a prog.bin.")
@click.argument("path", metavar="PROG_BIN")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default="text", show_default=True,
              help="text: the IR under per-placement counts; json: a stable document; dot: graphviz "
                   "source, which graphviz's `dot` program draws (`| dot -Tsvg > prog.svg`; get it "
                   f"with {GET_DOT}).")
@click.option("--role", default=None,
              help="Show only what one executor of this role (trainer or pserver) runs and holds.")
@click.option("--endpoint", default=None,
              help="Which pserver (its ip:port; a trainer's, when the job lists them): --endpoints lists them.")
@click.option("--trainer-id", type=click.IntRange(min=0), default=None,
              help="With --role trainer: which trainer (0..N-1).")
@click.option("--endpoints", "list_executors", is_flag=True,
              help="List the program's executors and the flags that show each one's view.")
def dump(path: str, fmt: str, role: str | None, endpoint: str | None, trainer_id: int | None,
         list_executors: bool) -> None:
    """Print the program in PROG_BIN (written by placegroup.io.save_program).

    A transpiled program names its job's trainers and pservers: --endpoints lists them, and a
    view of a role with several executors must name one (--endpoint, --trainer-id).
    """
    from placegroup.io import load_program
    from placegroup.ir.place_group import ExecutorId, Node

    if role is None and (endpoint is not None or trainer_id is not None):
        flag = "--endpoint" if endpoint is not None else "--trainer-id"
        raise DumpError(f"{flag} needs --role (e.g. --role pserver --endpoint 127.0.0.1:7164, "
                        f"--role trainer --trainer-id 0)")
    given = f"--role {role!r}" + (f" --endpoint {endpoint!r}" if endpoint else "")
    if role is not None:
        try:
            if endpoint is not None:
                Node.parse(endpoint)  # its ValueError says what is wrong in one line
            ExecutorId.parse(role, endpoint)
        except ValueError as e:
            raise DumpError(f"bad executor {given}: {_reason(e)}") from None
    try:
        program = load_program(path)
    except OSError as e:
        raise DumpError(f"cannot read {path!r}: {e.strerror or e}") from None
    except SerializationError as e:
        raise DumpError(str(e)) from None
    except (PlacegroupError, ValueError) as e:  # a payload that fits the schema, not the IR
        raise DumpError(f"{path}: not a valid prog.bin: {e}") from None
    if list_executors:
        click.echo(dump_executors.listing(program, path), nl=False)
        return
    executor = None
    if role is not None:
        try:
            executor = dump_executors.pick(program, role, endpoint, trainer_id)
        except ConfigError as e:
            raise DumpError(f"{path}: {e}") from None
    text = render(program, fmt, executor)
    if fmt == "dot" and _stdout_is_terminal():  # a pipe gets the plain graph
        text = dot_hint(path) + text
    try:
        click.echo(text, nl=False)
        sys.stdout.flush()
    except BrokenPipeError:  # `placegroup dump p.bin | head`: the reader left, that is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit


def _stdout_is_terminal() -> bool:
    return sys.stdout.isatty()


def dot_hint(path: str) -> str:
    """The comment line a dot dump starts with on a terminal: how to draw it."""
    where = "" if shutil.which("dot") else f" (this machine has no `dot`: {GET_DOT})"
    return f"// graphviz source: draw it with `placegroup dump {path} --format dot | dot -Tsvg > prog.svg`{where}\n"


@main.command(short_help="Run a script as a local cluster of trainers and pservers.",
              context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--trainers", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--pservers", type=click.IntRange(min=0), default=2, show_default=True)
@click.option("--grace", type=float, default=30.0, show_default=True,
              help="Seconds pservers get to finish after the last trainer.")
@click.option("--keys", type=click.Path(exists=True), default=None,
              help="CURVE keys (`placegroup keys DIR`): encrypt and authenticate every socket.")
@click.option("--resume", is_flag=True, help="Resume from the newest complete checkpoint "
              "(PLACEGROUP_RESUME=1; docs/checkpoint.md).")
@click.option("--max-restarts", type=click.IntRange(min=0), default=0, show_default=True,
              help="After a failure, stop every process and start the job again, resuming from the "
                   "newest complete checkpoint, at most this many times.")
@click.option("--checkpoint-dir", type=click.Path(file_okay=False), default=None,
              help="Where the job's checkpoints go (PLACEGROUP_CHECKPOINT_DIR).")
@click.option("--checkpoint-every", type=click.IntRange(min=1), default=None,
              help="Save a checkpoint every this many steps (PLACEGROUP_CHECKPOINT_EVERY).")
@click.option("--sched", type=click.Choice(["batch", "normal"]), default="batch", show_default=True,
              help="Scheduling policy the launcher puts the processes under: batch (SCHED_BATCH: "
                   "woken peers take an idle core instead of preempting the sender) or normal (leave "
                   "it; an executor joining a cluster still takes SCHED_BATCH itself unless "
                   "PLACEGROUP_SCHED=normal).")
@click.option("--cpu-bind", type=click.Choice(["auto", "spread", "none"]), default="auto", show_default=True,
              help="spread: bind each process to its share of the cores (trainer i and pserver i "
                   "share one when there are more processes than cores); none: run anywhere; auto: "
                   "spread when no core would hold two trainers or two pservers.")
@click.option("--paddle-compat", is_flag=True, help="Run an unmodified Fluid 1.x script: `import "
              "paddle.fluid` gives placegroup, as with `placegroup run`.")
@click.option("--trainer-args", metavar="ARGS", default=None,
              help="More arguments for each trainer, after ARGS, with placeholders {endpoint}, "
                   "{trainer_id}, {pservers}, {trainers}, {trainer_endpoints}, {role}.")
@click.option("--pserver-args", metavar="ARGS", default=None,
              help="More arguments for each pserver, after ARGS, with placeholders {endpoint}, "
                   "{pserver_id}, {pservers}, {trainers}, {trainer_endpoints}, {role}.")
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def launch(trainers: int, pservers: int, grace: float, keys: str | None, resume: bool, max_restarts: int,
           checkpoint_dir: str | None, checkpoint_every: int | None, sched: str, cpu_bind: str,
           paddle_compat: bool, trainer_args: str | None, pserver_args: str | None, script: str,
           args: tuple) -> None:
    """Run SCRIPT [ARGS] in every process of a local cluster on 127.0.0.1.

    Each process gets Fluid's launch environment (TRAINING_ROLE, PADDLE_INIT_PSERVERS, ...);
    output lines are prefixed with the process's name ([trainer:0], [pserver@127.0.0.1:41237]);
    the first failure stops the rest and is the exit code, unless --max-restarts allows
    starting the job again from its newest complete checkpoint, as in

    \b
        placegroup launch --max-restarts 3 --checkpoint-dir ckpt \\
            --checkpoint-every 100 train.py

    A script that takes its role as arguments gets them per role, filled in for each process
    (--trainer-args and --pserver-args may also follow SCRIPT; docs/launch.md):

    \b
        placegroup launch --trainers 2 --pservers 2 --paddle-compat \\
            --pserver-args "--role pserver --current_endpoint {endpoint} \\
                --endpoints {pservers} --trainers {trainers}" \\
            --trainer-args "--role trainer --trainer_id {trainer_id} \\
                --endpoints {pservers} --trainers {trainers}" \\
            cluster_train.py --is_local 0
    """
    from placegroup.tools.launch import launch as run_cluster, take_role_args

    try:
        args, extra = take_role_args(args, {"TRAINER": trainer_args, "PSERVER": pserver_args})
    except ConfigError as e:
        raise click.UsageError(str(e)) from None

    env = {}
    if resume:
        env["PLACEGROUP_RESUME"] = "1"
    if checkpoint_dir is not None:
        env["PLACEGROUP_CHECKPOINT_DIR"] = os.path.abspath(checkpoint_dir)
    if checkpoint_every is not None:
        env["PLACEGROUP_CHECKPOINT_EVERY"] = str(checkpoint_every)
    sys.exit(run_cluster(script, args, trainers, pservers, grace=grace, keys=keys, sched=sched,
                         cpu_bind=cpu_bind, paddle_compat=paddle_compat, extra_env=env,
                         max_restarts=max_restarts, trainer_args=extra["TRAINER"], pserver_args=extra["PSERVER"]))


@main.command(short_help="Make CURVE keys: encrypted traffic, only listed clients in.")
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@click.option("--clients", type=click.IntRange(min=1), default=1, show_default=True,
              help="How many client keypairs (client-0 ... client-N-1), e.g. one per process.")
@click.option("--force", is_flag=True, help="Replace the keys DIR already holds.")
def keys(directory: str, clients: int, force: bool) -> None:
    """Write a server keypair, client keypairs and allowed/ into DIR (docs/security.md).

    Secret files get mode 0600. Every process then runs with PLACEGROUP_KEYS=DIR (and
    PLACEGROUP_CLIENT_KEY=client-<i> to use another client keypair than client-0).
    """
    from placegroup.comm.security import SecurityError, write_keys

    try:
        written = write_keys(directory, clients=clients, force=force)
    except SecurityError as e:
        raise DumpError(str(e)) from None
    except OSError as e:
        raise DumpError(f"cannot write keys into {directory!r}: {e.strerror or e}") from None
    for path in written:
        click.echo(f"{oct(path.stat().st_mode & 0o777)[2:]} {path}")
    click.echo(f"export PLACEGROUP_KEYS={os.path.abspath(directory)}")


@main.command(short_help="List the environment variables placegroup reads.")
def env() -> None:
    """Every environment variable placegroup reads (the launch contract and its own
    PLACEGROUP_* knobs): its value in this environment, or its default in parentheses, and
    what it does. Values that do not parse are marked INVALID in the table and named again on
    stderr, one line, and the exit status is 1."""
    from placegroup import config

    click.echo(config.describe())
    bad = config.invalid()
    if bad:
        click.echo(f"placegroup env: error: {len(bad)} invalid: {'; '.join(bad.values())}", err=True)
        sys.exit(1)


# NOTE(subcommands): each further subcommand (``placegroup launch``, placegroup/tools/launch.py)
# lives in its own module as a click command and joins the group here with
# ``main.add_command(...)``; it imports what it needs inside its function, so that
# ``placegroup --help`` and ``dump`` stay quick.
main.add_command(run)

if __name__ == "__main__":
    main()
