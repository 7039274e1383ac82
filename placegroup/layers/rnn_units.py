"""One time step of a GRU and of an LSTM: Fluid 1.8's ``BasicGRUUnit`` and ``BasicLSTMUnit``.

Fluid defines them in ``fluid.contrib.layers.rnn_impl`` and its ``fluid.layers.GRUCell`` and
``LSTMCell`` wrap them. The layers row lies below contrib (README, "Where things are"), so
the units live here, where both reach them: placegroup/layers/rnn_cells.py wraps them and
placegroup/contrib/layers/rnn_impl.py binds them under Fluid's path and builds ``basic_gru`` and
``basic_lstm`` on them. Their math, defaults, parameter names, shapes and initializers are
Fluid 1.8.5's.

Building is single-threaded, as in Fluid.
"""
from __future__ import annotations

import copy

from placegroup.ir import unique_name
from placegroup.ir.framework import Variable
from placegroup.layers import nn, tensor
from placegroup.model.layer_helper import LayerHelper
from placegroup.model.param_attr import ParamAttr

__all__ = ["BasicGRUUnit", "BasicLSTMUnit"]


def _renamed(attr, suffix: str):
    """``attr`` with ``suffix`` added to its name when it names the parameter, else ``attr``
    itself (Fluid's rule: only a named ParamAttr is copied and renamed)."""
    attr = ParamAttr.to_attr(attr) if isinstance(attr, str) else attr
    if isinstance(attr, ParamAttr) and attr.name is not None:
        attr = copy.deepcopy(attr)
        attr.name += suffix
    return attr


class _StaticLayer:
    """What the units keep of Fluid's dygraph ``Layer``: a unique full name
    (``<name_scope>/<Class>_<n>``) whose parameters are ``<full name>.w_<k>``/``.b_<k>``, made
    on the first call from the input's shape, then ``forward`` on every call."""

    def __init__(self, name_scope: str, dtype: str) -> None:
        if not isinstance(name_scope, str):
            raise TypeError(f"{type(self).__name__}: name_scope must be a str, got {type(name_scope).__name__}")
        self._full_name = unique_name.generate(f"{name_scope}/{type(self).__name__}")
        self._helper = LayerHelper(type(self).__name__, name=self._full_name)
        self._name, self._dtype = name_scope, dtype
        self._parameters: list = []
        self._built = False

    def full_name(self) -> str:
        """The unit's unique name, the prefix of its parameters' names."""
        return self._full_name

    def parameters(self) -> list:
        """The unit's parameters, in the order they were made (empty before the first call)."""
        return list(self._parameters)

    def create_parameter(self, attr, shape, is_bias: bool = False):
        param = self._helper.create_parameter(attr, shape, self._dtype, is_bias=is_bias)
        if param is not None:
            self._parameters.append(param)
        return param

    def __call__(self, *inputs):
        if not self._built:
            self._build_once(*inputs)
            self._built = True
        return self.forward(*inputs)

    def _input_size(self, input) -> int:
        size = input.shape[-1] if isinstance(input, Variable) and input.shape else None
        if size is None or size <= 0:  # Fluid: a bare assert
            raise ValueError(f"{self._full_name}: the last dim of input (its size) must be known (> 0) to make "
                             f"the weights; input {getattr(input, 'name', input)!r} has shape "
                             f"{list(getattr(input, 'shape', None) or [])}")
        return int(size)


class BasicGRUUnit(_StaticLayer):
    """One step of a GRU, Fluid 1.8's ``fluid.contrib.layers.BasicGRUUnit``:

    .. math::

        r_t, u_t = actGate([x_t, h_{t-1}] W_g + b_g)     (W_g [input_size + H, 2H])
        m_t = actNode([x_t, r_t * h_{t-1}] W_c + b_c)    (W_c [input_size + H, H])
        h_t = u_t * h_{t-1} + (1 - u_t) * m_t

    In Fluid it is a dygraph ``Layer`` whose ``forward`` also builds static programs; placegroup
    runs static programs only (``fluid.dygraph`` is out of scope), so this is that static use: a
    callable that adds the step's ops to the current program. The first call makes the
    parameters, with Fluid's names: ``<name_scope>/BasicGRUUnit_<n>.w_0`` (W_g), ``.w_1``
    (W_c), ``.b_0`` (b_g) and ``.b_1`` (b_c); a named ``param_attr``/``bias_attr`` names them
    ``<name>_gate`` and ``<name>_candidate`` instead.

    Args:
        name_scope: the prefix of the parameters' names.
        hidden_size: H.
        param_attr: the weights' attr (default: Xavier initializer).
        bias_attr: the biases' attr (default: zeros); False: no biases.
        gate_activation: actGate, a layer function (default ``fluid.layers.sigmoid``).
        activation: actNode, a layer function (default ``fluid.layers.tanh``).
        dtype: the parameters' dtype.

    Call: ``unit(input, pre_hidden)`` with input [batch, input_size] (input_size known) and
    pre_hidden [batch, H] returns the new hidden [batch, H].

    Raises:
        ValueError: (on the first call) input's last dim is unknown.

    Thread-safety: build programs from one thread.

    Example::

        x = fluid.data("x", [None, 128], "float32")
        h = fluid.data("h", [None, 256], "float32")
        gru_unit = fluid.contrib.layers.BasicGRUUnit("gru_unit", 256)
        new_hidden = gru_unit(x, h)
    """

    def __init__(self, name_scope, hidden_size, param_attr=None, bias_attr=None, gate_activation=None,
                 activation=None, dtype="float32") -> None:
        super().__init__(name_scope, dtype)
        self._hiden_size = hidden_size  # Fluid's spelling, which scripts that subclass may read
        self._param_attr, self._bias_attr = param_attr, bias_attr
        self._gate_activation = gate_activation or nn.sigmoid
        self._activation = activation or nn.tanh

    def _build_once(self, input, pre_hidden) -> None:
        self._input_size = self._input_size(input)
        rows, h = self._input_size + self._hiden_size, self._hiden_size
        self._gate_weight = self.create_parameter(_renamed(self._param_attr, "_gate"), [rows, 2 * h])
        self._candidate_weight = self.create_parameter(_renamed(self._param_attr, "_candidate"), [rows, h])
        self._gate_bias = self.create_parameter(_renamed(self._bias_attr, "_gate"), [2 * h], is_bias=True)
        self._candidate_bias = self.create_parameter(_renamed(self._bias_attr, "_candidate"), [h], is_bias=True)

    def forward(self, input, pre_hidden):
        """The new hidden state [batch, H] from ``input`` [batch, input_size] and ``pre_hidden``."""
        gates = _affine(tensor.concat([input, pre_hidden], 1), self._gate_weight, self._gate_bias)
        r, u = nn.split(self._gate_activation(gates), num_or_sections=2, dim=1)
        candidate = _affine(tensor.concat([input, r * pre_hidden], 1), self._candidate_weight,
                            self._candidate_bias)
        return u * pre_hidden + (1 - u) * self._activation(candidate)


class BasicLSTMUnit(_StaticLayer):
    """One step of an LSTM, Fluid 1.8's ``fluid.contrib.layers.BasicLSTMUnit``:

    .. math::

        i, j, f, o = split([x_t, h_{t-1}] W + b, 4)      (W [input_size + H, 4H])
        c_t = c_{t-1} * sigmoid(f + forget_bias) + sigmoid(i) * tanh(j)
        h_t = tanh(c_t) * sigmoid(o)

    As ``BasicGRUUnit``, the static use of Fluid's dygraph ``Layer``: the first call makes
    ``<name_scope>/BasicLSTMUnit_<n>.w_0`` (W) and ``.b_0`` (b), or ``param_attr``'s and
    ``bias_attr``'s names as they are. As in Fluid 1.8.5, ``gate_activation`` and ``activation``
    are taken and kept but not used: the step always uses sigmoid and tanh. ``forget_bias`` is a
    [1] ``fill_constant`` made when the unit is made.

    Args:
        name_scope: the prefix of the parameters' names.
        hidden_size: H.
        param_attr: the weight's attr (default: Xavier initializer).
        bias_attr: the bias's attr (default: zeros); False: no bias.
        gate_activation, activation: kept, unused (above).
        forget_bias: added to the forget gate's input.
        dtype: the parameters' dtype.

    Call: ``unit(input, pre_hidden, pre_cell)`` with input [batch, input_size] (input_size
    known), pre_hidden and pre_cell [batch, H] returns ``(new_hidden, new_cell)``.

    Raises:
        ValueError: (on the first call) input's last dim is unknown.

    Thread-safety: build programs from one thread.

    Example::

        x = fluid.data("x", [None, 128], "float32")
        h = fluid.data("h", [None, 256], "float32")
        c = fluid.data("c", [None, 256], "float32")
        lstm_unit = fluid.contrib.layers.BasicLSTMUnit("lstm_unit", 256)
        new_hidden, new_cell = lstm_unit(x, h, c)
    """

    def __init__(self, name_scope, hidden_size, param_attr=None, bias_attr=None, gate_activation=None,
                 activation=None, forget_bias=1.0, dtype="float32") -> None:
        super().__init__(name_scope, dtype)
        self._hiden_size = hidden_size
        self._param_attr, self._bias_attr = param_attr, bias_attr
        self._gate_activation = gate_activation or nn.sigmoid
        self._activation = activation or nn.tanh
        # Fluid also sets stop_gradient=False on it (for dygraph); no parameter reads that gradient
        self._forget_bias = tensor.fill_constant([1], dtype=dtype, value=forget_bias)

    def _build_once(self, input, pre_hidden, pre_cell) -> None:
        self._input_size = self._input_size(input)
        h = self._hiden_size
        self._weight = self.create_parameter(self._param_attr, [self._input_size + h, 4 * h])
        self._bias = self.create_parameter(self._bias_attr, [4 * h], is_bias=True)

    def forward(self, input, pre_hidden, pre_cell):
        """``(new_hidden, new_cell)``, each [batch, H]."""
        gates = _affine(tensor.concat([input, pre_hidden], 1), self._weight, self._bias)
        i, j, f, o = nn.split(gates, num_or_sections=4, dim=-1)
        forget = nn.sigmoid(nn.elementwise_add(f, self._forget_bias))
        new_cell = nn.elementwise_add(nn.elementwise_mul(pre_cell, forget),
                                          nn.elementwise_mul(nn.sigmoid(i), nn.tanh(j)))
        return nn.tanh(new_cell) * nn.sigmoid(o), new_cell


def _affine(x, weight, bias):
    out = nn.matmul(x=x, y=weight)
    return out if bias is None else nn.elementwise_add(out, bias)
