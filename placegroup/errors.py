"""The error classes every layer of placegroup raises.

Each names where it happened (executor, op, var, step) and, where one is known, a fix.
They are plain exceptions so a user can catch the family with
``except PlacegroupError``.
"""


class PlacegroupError(Exception):
    """Base class of every error placegroup raises on purpose."""


class ProgramError(PlacegroupError):
    """A Program is malformed: unknown op, bad slot, def-before-use, shape mismatch."""


class ConfigError(PlacegroupError, ValueError):
    """The environment or the arguments describe no job this process can be part of: a bad
    ``TRAINING_ROLE``, neither pservers nor trainer endpoints, an endpoint not in the cluster.
    The message names the variable or flag and what it expects."""


class PlacementError(PlacegroupError):
    """A var or op is read or written where the PlaceGroups do not allow it."""


class PassError(PlacegroupError):
    """A transpiler pass failed or left a program that does not verify."""


class SerializationError(PlacegroupError):
    """A prog.bin or checkpoint file is truncated, tampered with, or of another schema."""


class OpError(PlacegroupError):
    """An op's kernel failed while the executor ran it (wraps the original error)."""


class CommTimeout(PlacegroupError):
    """A remote value did not arrive in time."""


class PeerLost(CommTimeout):
    """A peer this executor waits for is gone (its connection dropped, or it fell silent)."""


class RemoteError(PlacegroupError):
    """A peer reported an error, carried to us as data."""


class CollectiveError(PlacegroupError):
    """The members of a collective disagree (dtype, shape, op) or it was called wrongly."""


class NotImplementedInPlacegroup(AttributeError, NotImplementedError):
    """A name PaddlePaddle Fluid 1.8 has and placegroup does not implement yet.

    An AttributeError, so ``hasattr(fluid.layers, "conv2d")`` is False and feature checks in
    user code keep working; a NotImplementedError, so the message reads as what it is. The
    names placegroup lacks are listed in docs/fluid_compat.md.
    """


# Failures a user's setup or a running cluster causes, not placegroup's bugs: a process that
# dies of one prints it as one line, without a traceback unless PLACEGROUP_DEBUG is set.
EXPECTED = (ConfigError, CommTimeout, RemoteError)
