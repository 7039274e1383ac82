"""Fluid 1.8's ``fluid.op``: make one op from keyword arguments and run it on a scope, as Fluid's
older unit tests do::

    scope = fluid.core.Scope()
    scope.var("X").get_tensor().set(np.ones((2, 3), "float32"), place)
    op = Operator("scale", X="X", Out="Out", scale=2.0)
    op.run(scope, place)
    np.array(scope.find_var("Out").get_tensor())          # all 2.0

``Operator`` (an ``OperatorFactory``) knows every registered op type through its proto
(placegroup/ir/op_proto.py): keyword arguments named as the op's slots take var names (a str or
a list of them), and those named as its attrs take the attr values. The op it makes is an
``OpSpec`` (ops/registry.py) in a ``ScopeOperator``, whose ``run(scope, place)`` runs it through an
``Executor`` over that scope, so its kernel, shape inference and LoD rule are those a program's op
gets: a one-op program whose vars take their shapes and dtypes from the scope's values (the
outputs from the op's shape inference) and are persistable, so what the op writes stays in the
scope. An input var must hold a value before ``run``.

Thread-safety: a ScopeOperator is immutable; run it on a scope no other thread is using.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from placegroup.errors import ProgramError
from placegroup.executor import Executor
from placegroup.ir import op_proto
from placegroup.ir.framework import Program
from placegroup.ir.op_proto import OpProto
from placegroup.ir.places import CPUPlace
from placegroup.ir.variable import SELECTED_ROWS
from placegroup.ops.registry import OpSpec
from placegroup.values import LoDTensor, is_selected_rows

__all__ = ["OpDescCreationMethod", "OpInfo", "Operator", "OperatorFactory", "ScopeOperator",
           "create_op_creation_method", "get_all_op_protos", "is_str"]


def get_all_op_protos() -> list[OpProto]:
    """The proto of every registered op type (``fluid.framework.get_all_op_protos``)."""
    return op_proto.get_all_op_protos()


def is_str(s: Any) -> bool:
    return isinstance(s, str)


class OpDescCreationMethod:
    """Turns keyword arguments into an op description (an ``OpSpec``) by an op type's proto.

    Args:
        op_proto: the op type's ``OpProto``.

    Raises:
        TypeError: ``op_proto`` is not an ``OpProto``.
    """

    def __init__(self, op_proto: OpProto) -> None:
        if not isinstance(op_proto, OpProto):
            raise TypeError("Type of op_proto should be OpProto in PaddlePaddle.")
        self.__op_proto__ = op_proto

    def __call__(self, *args: Any, **kwargs: Any) -> OpSpec:
        """The op of these slots (var names) and attrs; an attr given as a numpy array is
        taken as a list; unset attrs keep their defaults.

        Raises:
            ValueError: a positional argument, or several vars for a slot that takes one.
        """
        if args:
            raise ValueError("Only keyword arguments are supported.")
        proto = self.__op_proto__
        slots = {}
        for kind, protos in (("Input", proto.inputs), ("Output", proto.outputs)):
            given = {}
            for slot in protos:
                names = kwargs.get(slot.name, [])
                names = [names] if is_str(names) else list(names)
                if not slot.duplicable and len(names) > 1:
                    raise ValueError(f"{kind} {slot.name} expects only one {kind.lower()}, but {len(names)} are "
                                     f"given.")
                if names:
                    given[slot.name] = names
            slots[kind] = given
        attrs = {}
        for attr in proto.attrs:
            value = kwargs.get(attr.name)
            if value is not None and not attr.generated:
                attrs[attr.name] = value.tolist() if isinstance(value, np.ndarray) else value
        return OpSpec(proto.type, slots["Input"], slots["Output"], attrs)

    @staticmethod
    def any_is_true(generator) -> bool:
        """Whether any element of ``generator`` is true."""
        return any(generator)


class OpInfo:
    """An op type's creation method and the names (and duplicability) of its slots and attrs."""

    def __init__(self, name: str, method, inputs: list, outputs: list, attrs: list) -> None:
        self.name = name
        self.method = method
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs


class ScopeOperator:
    """One op made by ``Operator(...)`` (Fluid's ``core.Operator``), run on a scope with ``run``.

    Args:
        spec: the op (``OpSpec``).
    """

    def __init__(self, spec: OpSpec) -> None:
        self.spec = spec

    def type(self) -> str:
        return self.spec.type

    def inputs(self) -> dict:
        return {k: list(v) for k, v in self.spec.inputs.items()}

    def outputs(self) -> dict:
        return {k: list(v) for k, v in self.spec.outputs.items()}

    def input(self, name: str) -> str:
        """The var of input slot ``name`` (its first, for a duplicable slot)."""
        return self.spec.inputs[name][0]

    def output(self, name: str) -> str:
        return self.spec.outputs[name][0]

    def input_vars(self) -> list[str]:
        return [n for names in self.spec.inputs.values() for n in names]

    def output_vars(self) -> list[str]:
        return [n for names in self.spec.outputs.values() for n in names]

    def no_intermediate_outputs(self) -> list[str]:
        """The output vars of slots that are not intermediate (NOTE(intermediate))."""
        proto = op_proto.OpProtoHolder.instance().get_op_proto(self.spec.type)
        keep = {o.name for o in proto.outputs if not o.intermediate}
        return [n for slot, names in self.spec.outputs.items() if slot in keep for n in names]

    def support_gpu(self) -> bool:
        """True: every op has a kernel for CUDA places (the numpy one runs on cupy arrays)."""
        return True

    def __str__(self) -> str:
        return op_proto.op_desc_text(self.spec)

    def run(self, scope: Any, place: Any = None) -> None:
        """Run the op once over ``scope`` on ``place`` (default: the CPU): it reads its inputs
        from the scope and writes its outputs there.

        Raises:
            ProgramError: an input var with no value in the scope (naming it), or what the op's
                checks and shape inference refuse.
            OpError: the kernel failed (``While executing op #0 ...``).
        """
        program = Program()
        block = program.global_block()
        for name in self.input_vars():
            if name not in scope.vars:
                raise ProgramError(f"op {self.spec.type!r}: input var {name!r} has no value in the scope; set it "
                                   f"with scope.var({name!r}).get_tensor().set(array, place)")
            block.create_var(name, persistable=True, **_meta(scope.vars[name]))
        for name in self.output_vars():
            if name in scope.vars and not block.has_var(name):
                block.create_var(name, persistable=True, **_meta(scope.vars[name]))
            elif not block.has_var(name):
                block.create_var(name, persistable=True, shape=None)
        block.append_op(self.spec.type, self.spec.inputs, self.spec.outputs, self.spec.attrs)
        Executor(place if place is not None else CPUPlace()).run(program, scope=scope)


def _meta(value: Any) -> dict:
    """The var fields of a scope value: shape, dtype, type, lod_level."""
    if is_selected_rows(value):
        return dict(shape=value.shape, dtype=value.values.dtype, type=SELECTED_ROWS)
    if isinstance(value, LoDTensor):
        return dict(shape=value.data.shape, dtype=value.data.dtype, lod_level=value.lod_level)
    return dict(shape=np.shape(value), dtype=value.dtype)


def create_op_creation_method(op_proto: OpProto) -> OpInfo:
    """The ``OpInfo`` of an op type: its method makes a ``ScopeOperator`` from keyword arguments."""
    method = OpDescCreationMethod(op_proto)

    def __impl__(*args: Any, **kwargs: Any) -> ScopeOperator:
        return ScopeOperator(method(*args, **kwargs))

    return OpInfo(name=op_proto.type, method=__impl__,
                  inputs=[(v.name, v.duplicable) for v in op_proto.inputs],
                  outputs=[(v.name, v.duplicable) for v in op_proto.outputs],
                  attrs=[a.name for a in op_proto.attrs])


class OperatorFactory:
    """Makes an op of any registered type: ``factory("sgd", Param="w", ...)`` or
    ``factory(type="sgd", ...)`` (module docstring).

    Raises:
        ValueError: (when called) positional arguments besides the type, or an unknown type.
    """

    def __init__(self) -> None:
        self.op_methods = {p.type: create_op_creation_method(p) for p in get_all_op_protos()}

    def __call__(self, *args: Any, **kwargs: Any) -> ScopeOperator:
        if "type" in kwargs:
            if args:
                raise ValueError('Except the argument "type", all of the other arguments should be keyword '
                                 'arguments.')
            t = kwargs.pop("type")
        elif len(args) == 1:
            t = args[0]
        else:
            raise ValueError('Except the argument "type", all of the other arguments should be keyword arguments.')
        return self.get_op_info(t).method(**kwargs)

    def types(self) -> list[str]:
        return list(self.op_methods)

    def get_op_info(self, t: str) -> OpInfo:
        if t not in self.op_methods:
            holder = op_proto.OpProtoHolder.instance()
            if not holder.has_op_proto(t):
                raise ValueError(f"The operator: {t} is not registered.")
            self.op_methods[t] = create_op_creation_method(holder.get_op_proto(t))
        return self.op_methods[t]

    def get_op_input_names(self, type: str) -> list[str]:
        return [x[0] for x in self.get_op_info(type).inputs]

    def get_op_inputs(self, type: str) -> list:
        return self.get_op_info(type).inputs

    def get_op_output_names(self, type: str) -> list[str]:
        return [x[0] for x in self.get_op_info(type).outputs]

    def get_op_outputs(self, type: str) -> list:
        return self.get_op_info(type).outputs

    def get_op_attr_names(self, type: str) -> list[str]:
        return self.get_op_info(type).attrs


Operator = OperatorFactory()  # the default factory, as Fluid's
