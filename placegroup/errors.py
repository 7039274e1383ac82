"""The error classes every layer of placegroup raises.

Each names where it happened (executor, op, var, step) and, where one is known, a fix.
They are plain exceptions so a user can catch the family with
``except PlacegroupError``.

NOTE(user-errors): the classes that derive from ``UserError`` say what the user gave
placegroup (a program, a feed, a file, the environment) or what happened around the process
(a peer lost, a peer's own error); a process that dies of one, or of an error raised ``from``
one, ends with one line (placegroup/util/failures.py). Every other exception, a bug of the script
or of placegroup, keeps its traceback. A class joins by deriving from ``UserError``.
"""


class PlacegroupError(Exception):
    """Base class of every error placegroup raises on purpose."""


class UserError(PlacegroupError):
    """An error the user can fix, or that happened outside this process: NOTE(user-errors)."""


class ProgramError(UserError):
    """A Program is malformed: unknown op, bad slot, def-before-use, shape mismatch."""


class ConfigError(UserError, ValueError):
    """The environment or the arguments describe no job this process can be part of: a bad
    ``TRAINING_ROLE``, neither pservers nor trainer endpoints, an endpoint not in the cluster.
    The message names the variable or flag and what it expects."""


class BindError(ConfigError):
    """This process cannot listen on its endpoint: the port is taken, or the ip is not one of
    this host's. Its own class (a ConfigError still) so a launcher can tell it from the rest
    and pick another port; the message names the endpoint, the variables it came from and, where
    this user can see it, the process that holds the port."""


class PlacementError(UserError):
    """A var or op is read or written where the PlaceGroups do not allow it."""


class PassError(UserError):
    """A transpiler pass failed or left a program that does not verify."""


class SerializationError(UserError):
    """A prog.bin or checkpoint file is truncated, tampered with, or of another schema."""


class OpError(PlacegroupError):
    """An op's kernel failed while the executor ran it (wraps the original error)."""


class MissingInput(OpError, UserError):
    """An op read a var that has no value: a data var not fed, a parameter before the startup
    program ran."""


class OutOfRange(UserError, IndexError, ValueError):
    """A value fed to an op lies outside what it takes: an id past its table's rows. An
    IndexError and a ValueError, as the kernels raised before."""


class CommTimeout(UserError):
    """A remote value did not arrive in time."""


class PeerLost(CommTimeout):
    """A peer this executor waits for is gone (its connection dropped, or it fell silent)."""


class RemoteError(UserError):
    """A peer reported an error, carried to us as data."""


class CollectiveError(UserError):
    """The members of a collective disagree (dtype, shape, op) or it was called wrongly."""


class NotImplementedInPlacegroup(UserError, AttributeError, NotImplementedError):
    """A name PaddlePaddle Fluid 1.8 has and placegroup does not implement yet.

    An AttributeError, so ``hasattr(fluid.layers, "conv2d")`` is False and feature checks in
    user code keep working; a NotImplementedError, so the message reads as what it is. The
    names placegroup lacks are listed in docs/fluid_compat.md.
    """


class ModuleNotInPlacegroup(UserError, ModuleNotFoundError):
    """A Fluid 1.8 module placegroup does not implement (``paddle.fluid.contrib.slim``): a
    ModuleNotFoundError, so ``try: import ... except ImportError`` checks keep working."""
