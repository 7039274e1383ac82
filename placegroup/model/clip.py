"""Gradient clipping (``fluid.clip``): bound each update's gradient before the optimizer
applies it, as Fluid 1.8 does; and error clipping (``ErrorClipByValue`` with
``error_clip_callback``), which bounds an activation's gradient inside backward.

* ``GradientClipByValue(max, min=None)``: every element into ``[min, max]`` (``min`` defaults
  to ``-max``);
* ``GradientClipByNorm(clip_norm)``: each gradient ``g`` becomes ``g * c / max(||g||, c)``;
* ``GradientClipByGlobalNorm(clip_norm, group_name)``: every gradient of the group is scaled by
  ``c / max(global_norm, c)``, ``global_norm = sqrt(sum over the group of ||g||²)``.

Give one to the optimizer (``fluid.optimizer.SGD(0.1, grad_clip=...)``, which clips every
parameter it updates) or attach it to parameters with ``set_gradient_clip(clip, param_list)``
(or ``ParamAttr(gradient_clip=...)``); an optimizer's ``grad_clip`` wins. Clipping runs first,
then regularization, then the update, as in Fluid 1.8. SelectedRows gradients
(``embedding(is_sparse=True)``) are merged before their values are clipped or measured.

NOTE(clip-placement): clipping is not linear, so it must act on the gradient the update
applies: the merged one when several trainers train in sync. Its ops are therefore part of
each parameter's update (role ``optimize``, ``op.param`` set), and so are the regularization
ops behind them. The transpiler merges the raw gradient and runs the clip on the pserver that
holds the parameter. A norm over several parameters takes one squared norm per parameter
(``squared_l2_norm``, with the update), then one ``clip_norm_scale`` over all of them; that op
is marked ``_cross_param`` (one parameter's norm too: a sliced parameter's blocks live on
several pservers) and runs on the pservers that hold the updates it scales, reading the
squared norms held by the others over edges ``placegroup dump`` lists. In async mode each trainer's gradient is
applied alone, so the trainer clips its own gradient, as one process would.

Example::

    clip = fluid.clip.GradientClipByGlobalNorm(clip_norm=5.0)
    fluid.optimizer.Adam(1e-3, grad_clip=clip).minimize(loss)

Thread-safety: appends to programs; build programs from one thread.
"""
from __future__ import annotations

import copy
import warnings
from typing import Callable

from placegroup.ir import unique_name
from placegroup.ir.framework import LOD_TENSOR, default_main_program
from placegroup.ops.registry import CROSS_PARAM

__all__ = ["ErrorClipByValue", "GradientClipByGlobalNorm", "GradientClipByNorm", "GradientClipByValue",
           "error_clip_callback", "set_gradient_clip"]


# -- error clipping: a forward var's gradient, clipped as soon as backward completes it ----------


class BaseErrorClipAttr:
    """Base class of the error clips: what ``error_clip_callback`` asks a var's ``error_clip``."""

    def _append_clip_op(self, block, grad_name: str) -> None:  # pragma: no cover - abstract
        raise NotImplementedError


class ErrorClipByValue(BaseErrorClipAttr):
    """Clip the gradient of a forward var elementwise into ``[min, max]`` (``min`` defaults to
    ``-max``), right after backward computes it and before any op reads it, as Fluid 1.8 does.

    Set it on the var (``var.error_clip = ErrorClipByValue(...)``) and pass
    ``error_clip_callback`` to ``append_backward`` (or an optimizer's ``minimize`` that takes
    callbacks): the callback appends a ``clip`` op that rewrites ``<var>@GRAD`` in place, so the
    clipped value is what flows on to earlier layers. Unlike ``GradientClipByValue`` it acts on
    an activation's gradient (the "error"), not on a parameter's update.

    Example::

        hidden = fluid.layers.fc(x, 8, act="relu")
        hidden.error_clip = fluid.clip.ErrorClipByValue(max=1e-3, min=-1e-3)
        fluid.append_backward(loss, callbacks=[fluid.clip.error_clip_callback])
    """

    def __init__(self, max: float, min: float | None = None) -> None:
        hi = _number("ErrorClipByValue", "max", max)
        lo = -hi if min is None else _number("ErrorClipByValue", "min", min)
        if lo > hi:
            raise ValueError(f"ErrorClipByValue: min {lo} is greater than max {hi}")
        self.max, self.min = hi, lo

    def __str__(self) -> str:
        return "ByValue, min=%f, max=%f" % (self.min, self.max)

    def _append_clip_op(self, block, grad_name: str) -> None:
        block.append_op("clip", {"X": [grad_name]}, {"Out": [grad_name]}, {"min": self.min, "max": self.max},
                        role="backward")


def error_clip_callback(block, context) -> None:
    """The ``append_backward`` callback that applies error clips: for each gradient backward
    just completed (``context`` maps its name to the forward var's name), append the forward
    var's ``error_clip`` op, if it has one.

    Raises:
        TypeError: a var's ``error_clip`` is not an error clip (``ErrorClipByValue``).
    """
    for grad_n, fwd_n in context.items():
        if not isinstance(fwd_n, str) or not block.has_var(fwd_n):
            continue
        error_clip = getattr(block.var(fwd_n), "error_clip", None)
        if error_clip is None:
            continue
        if not isinstance(error_clip, BaseErrorClipAttr):
            raise TypeError(f"var {fwd_n!r}: error_clip must be an ErrorClipByValue (a BaseErrorClipAttr) or None, "
                            f"got {error_clip!r}")
        error_clip._append_clip_op(block, grad_n)



class GradientClipBase:
    """Base class: ``__call__(params_grads) -> params_grads`` appends the clip ops."""

    def __init__(self, need_clip: Callable | None = None) -> None:
        if need_clip is not None and not callable(need_clip):
            raise TypeError(f"{type(self).__name__}: need_clip must be a function of a parameter, got {need_clip!r}")
        self._need_clip = need_clip

    def _wants(self, p, g) -> bool:
        return g is not None and (self._need_clip is None or bool(self._need_clip(p)))

    def __call__(self, params_grads: list) -> list:
        todo = [(p, g) for p, g in params_grads if self._wants(p, g)]
        if not todo:
            return list(params_grads)
        done = dict(self._clip(todo))
        return [(p, done.get(p.name, g)) for p, g in params_grads]

    def _clip(self, params_grads: list) -> list:  # pragma: no cover - abstract
        raise NotImplementedError


def _number(owner: str, what: str, v) -> float:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise TypeError(f"{owner}: {what} must be a number, got {v!r}")
    return float(v)


def _append(block, param, op_type: str, inputs: dict, attrs: dict | None = None, shape=None, like=None):
    """Append one op of ``param``'s update writing a new var; return the var's name."""
    like = like or block.var(inputs["X"][0])
    out = block.create_var(unique_name.generate(f"{param.name}.clip"), shape=shape or like.shape,
                           dtype=like.dtype, type=like.type if shape is None else LOD_TENSOR, stop_gradient=True)
    op = block.append_op(op_type, inputs, {"Out": [out.name]}, attrs or {}, role="optimize")
    op.param = param.name
    return out


class GradientClipByValue(GradientClipBase):
    """Clip every gradient element into ``[min, max]``; ``min`` defaults to ``-max``.

    Example::

        fluid.optimizer.SGD(0.1, grad_clip=fluid.clip.GradientClipByValue(max=1.0))
    """

    def __init__(self, max: float, min: float | None = None, need_clip: Callable | None = None) -> None:
        super().__init__(need_clip)
        hi = _number("GradientClipByValue", "max", max)
        lo = -hi if min is None else _number("GradientClipByValue", "min", min)
        if lo > hi:
            raise ValueError(f"GradientClipByValue: min {lo} is greater than max {hi}")
        self.max, self.min = hi, lo

    def _clip(self, params_grads):
        return [(p.name, _append(g.block, p, "clip", {"X": [g.name]}, {"min": self.min, "max": self.max}))
                for p, g in params_grads]

    def __str__(self) -> str:
        return f"Gradient Clip By Value, min = {self.min:f}, max={self.max:f}"


class _NormClip(GradientClipBase):
    def __init__(self, owner: str, clip_norm: float, need_clip) -> None:
        super().__init__(need_clip)
        self.clip_norm = _number(owner, "clip_norm", clip_norm)
        if self.clip_norm <= 0:
            raise ValueError(f"{owner}: clip_norm must be > 0, got {self.clip_norm}")

    def _scale_group(self, params_grads) -> list:
        """Scale every gradient of ``params_grads`` by ``c / max(norm of them all, c)``."""
        block = params_grads[0][1].block
        squares = [_append(block, p, "squared_l2_norm", {"X": [g.name]}, shape=[1]) for p, g in params_grads]
        factor = block.create_var(unique_name.generate("clip_norm_scale"), shape=[1], dtype=squares[0].dtype,
                                  stop_gradient=True)
        block.append_op("clip_norm_scale", {"X": [s.name for s in squares]}, {"Out": [factor.name]},
                        {"clip_norm": self.clip_norm, CROSS_PARAM: True}, role="optimize")
        return [(p.name, _append(block, p, "scale", {"X": [g.name], "ScaleTensor": [factor.name]}))
                for p, g in params_grads]


class GradientClipByNorm(_NormClip):
    """Scale each gradient to an L2 norm of at most ``clip_norm``.

    Example::

        fluid.optimizer.SGD(0.1, grad_clip=fluid.clip.GradientClipByNorm(clip_norm=1.0))
    """

    def __init__(self, clip_norm: float, need_clip: Callable | None = None) -> None:
        super().__init__("GradientClipByNorm", clip_norm, need_clip)

    def _clip(self, params_grads):
        return [pair for pg in params_grads for pair in self._scale_group([pg])]

    def __str__(self) -> str:
        return f"Gradient Clip By Norm, clip_norm={self.clip_norm:f}"


class GradientClipByGlobalNorm(_NormClip):
    """Scale every gradient of the group by ``clip_norm / max(global_norm, clip_norm)``.

    Example::

        fluid.optimizer.Adam(1e-3, grad_clip=fluid.clip.GradientClipByGlobalNorm(5.0))
    """

    def __init__(self, clip_norm: float, group_name: str = "default_group", need_clip: Callable | None = None) -> None:
        super().__init__("GradientClipByGlobalNorm", clip_norm, need_clip)
        if not isinstance(group_name, str):
            raise TypeError(f"GradientClipByGlobalNorm: group_name must be a str, got {group_name!r}")
        self.group_name = group_name

    def _clip(self, params_grads):
        return self._scale_group(params_grads)

    def __str__(self) -> str:
        return f"Gradient Clip By GlobalNorm, global_norm={self.clip_norm:f}"


def set_gradient_clip(clip: GradientClipBase, param_list=None, program=None) -> None:
    """Attach ``clip`` to the parameters ``param_list`` (names or Parameters; default every
    parameter of ``program``, default the default main program). An optimizer built with
    ``grad_clip`` ignores it, as in Fluid 1.8.

    Raises:
        TypeError: ``clip`` is not a gradient clip.
    """
    if not isinstance(clip, GradientClipBase):
        raise TypeError(f"set_gradient_clip: clip must be a GradientClipByValue, ByNorm or ByGlobalNorm, got {clip!r}")
    program = program or default_main_program()
    block = program.global_block()
    if param_list is None:
        params = block.all_parameters()
    else:
        params = [block.var(getattr(p, "name", p)) for p in param_list]
    for p in params:
        p.gradient_clip_attr = copy.deepcopy(clip)


def append_gradient_clip_ops(params_grads: list) -> list:
    """Clip each gradient by its parameter's ``gradient_clip_attr`` (``set_gradient_clip``).
    Parameters sharing one ``GradientClipByGlobalNorm`` group name share one global norm.

    Raises:
        ValueError: two global-norm clips of one group with different ``clip_norm``.
    """
    groups: dict = {}
    for p, g in params_grads:
        clip = getattr(p, "gradient_clip_attr", None)
        if clip is None or g is None:
            continue
        key = ("global", clip.group_name) if isinstance(clip, GradientClipByGlobalNorm) else ("one", p.name)
        if key in groups and groups[key][0].clip_norm != clip.clip_norm:
            raise ValueError(f"gradient clip group {clip.group_name!r} has two clip_norm values: "
                             f"{groups[key][0].clip_norm} and {clip.clip_norm}")
        groups.setdefault(key, (clip, []))[1].append((p, g))
    done = {}
    for clip, members in groups.values():
        done.update(dict(clip._clip(members)))
    return [(p, done.get(p.name, g)) for p, g in params_grads]


def clip_gradients(params_grads: list, grad_clip: GradientClipBase | None) -> list:
    """What ``Optimizer.apply_gradients`` calls: the optimizer's ``grad_clip`` if given (with a
    warning when parameters also carry one), else each parameter's own."""
    if grad_clip is None:
        return append_gradient_clip_ops(params_grads)
    if not isinstance(grad_clip, GradientClipBase):
        raise TypeError(f"grad_clip must be a GradientClipByValue, ByNorm or ByGlobalNorm, got {grad_clip!r}")
    if any(getattr(p, "gradient_clip_attr", None) is not None for p, _ in params_grads):
        warnings.warn("the optimizer's grad_clip is used; the clips set by set_gradient_clip or "
                      "ParamAttr(gradient_clip=...) are ignored", stacklevel=3)
    return grad_clip(params_grads)
