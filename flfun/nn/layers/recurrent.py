"""Recurrent layers: ``LSTM`` and ``GRU``, one ``lax.scan`` over time.

Both follow ``torch.nn.LSTM`` / ``torch.nn.GRU`` (one layer, ``batch_first=True``): inputs are ``(..., T, input)``
with any number of leading batch dims (``(T, input)`` is one unbatched sequence), states are ``(..., hidden)``.
Weights keep flfun's dense layout ``(in, out)``: ``weight_ih`` is ``(input, G*hidden)`` and ``weight_hh``
``(hidden, G*hidden)``, the transposes of torch's ``weight_ih_l0`` and ``weight_hh_l0``, with the gates stacked
along the output axis in torch's order (LSTM: input, forget, cell, output; GRU: reset, update, new), and the two
biases are torch's ``bias_ih_l0`` and ``bias_hh_l0``: copy torch weights with ``weight_ih = weight_ih_l0.T``,
``weight_hh = weight_hh_l0.T``. Initialised like torch: every weight and bias uniform in ``±1/sqrt(hidden)``.
"""
from __future__ import annotations

import numpy as np

from flfun import lax
from flfun import numpy as fnp
from flfun.array import Array
from flfun.nn import functional as F
from flfun.nn.layers.dense import bias_init, split_key
from flfun.nn.module import Module, static_field

__all__ = ["GRU", "LSTM"]


class _Recurrent(Module):
    """The shared parts: parameters, input checks and the scan over time (``_cell`` is the gate arithmetic)."""
    weight_ih: Array
    weight_hh: Array
    bias_ih: Array | None
    bias_hh: Array | None
    hidden_size: int = static_field()

    gates = 1        # gate blocks stacked in the weights' output axis

    def __init__(self, input_size: int, hidden_size: int, *, key, use_bias: bool = True, dtype=np.float32):
        k1, k2, k3, k4 = split_key(key, 4)
        g = self.gates * hidden_size
        self.weight_ih = bias_init(k1, hidden_size, (input_size, g), dtype)
        self.weight_hh = bias_init(k2, hidden_size, (hidden_size, g), dtype)
        self.bias_ih = bias_init(k3, hidden_size, (g,), dtype) if use_bias else None
        self.bias_hh = bias_init(k4, hidden_size, (g,), dtype) if use_bias else None
        self.hidden_size = int(hidden_size)

    def _states(self, x, **states) -> tuple:
        """The initial ``states`` (zeros where None), checked against the input ``x``."""
        layer, want = type(self).__name__, self.weight_ih.shape[0]
        if x.ndim < 2 or x.shape[-1] != want:
            raise ValueError(f"{layer}: expected input of shape (..., T, {want}) (batch first), got shape "
                             f"{tuple(x.shape)}")
        shape = (*x.shape[:-2], self.hidden_size)
        for label, s in states.items():
            if s is not None and tuple(s.shape) != shape:
                raise ValueError(f"{layer}: {label} must have shape {shape} for input of shape "
                                 f"{tuple(x.shape)}, got {tuple(s.shape)}")
        return tuple(fnp.zeros(shape, dtype=self.weight_hh.dtype) if s is None else s for s in states.values())

    def _run(self, x, carry):
        """``scan`` the cell over the time axis (-2) of ``x``; the input projection is one matmul up front."""
        xw = x @ self.weight_ih
        if self.bias_ih is not None:
            xw = xw + self.bias_ih
        carry, hs = lax.scan(self._cell, carry, fnp.moveaxis(xw, -2, 0))
        return fnp.moveaxis(hs, 0, -2), carry

    def _hidden(self, h) -> Array:
        hw = h @ self.weight_hh
        return hw if self.bias_hh is None else hw + self.bias_hh


class LSTM(_Recurrent):
    """A one-layer LSTM, torch's equations and gate order (i, f, g, o):
    ``c' = sigmoid(f) * c + sigmoid(i) * tanh(g)``, ``h' = sigmoid(o) * tanh(c')``.

    ``lstm(x, state=None) -> (outputs (..., T, hidden), (h_T, c_T))``; ``state`` is an optional ``(h0, c0)``
    (zeros by default), each ``(..., hidden)``.

    Example::

        >>> lstm = LSTM(8, 16, key=flfun.random.key(0))
        >>> ys, (h, c) = lstm(fnp.ones((4, 10, 8)))
        >>> ys.shape, h.shape
        ((4, 10, 16), (4, 16))
    """
    gates = 4

    def __call__(self, x, state=None):
        h0, c0 = (None, None) if state is None else state
        return self._run(x, self._states(x, h0=h0, c0=c0))

    def _cell(self, carry, xw):
        h, c = carry
        i, f, g, o = fnp.split(xw + self._hidden(h), 4, axis=-1)
        c = F.sigmoid(f) * c + F.sigmoid(i) * F.tanh(g)
        h = F.sigmoid(o) * F.tanh(c)
        return (h, c), h


class GRU(_Recurrent):
    """A one-layer GRU, torch's equations and gate order (r, z, n): ``r = sigmoid(x_r + h_r)``,
    ``z = sigmoid(x_z + h_z)``, ``n = tanh(x_n + r * h_n)`` (``h_n`` includes ``bias_hh``), ``h' = (1 - z) * n +
    z * h``.

    ``gru(x, h0=None) -> (outputs (..., T, hidden), h_T)``; ``h0`` is ``(..., hidden)``, zeros by default.

    Example::

        >>> ys, h = GRU(8, 16, key=flfun.random.key(0))(fnp.ones((10, 8)))
        >>> ys.shape, h.shape
        ((10, 16), (16,))
    """
    gates = 3

    def __call__(self, x, h0=None):
        return self._run(x, self._states(x, h0=h0)[0])

    def _cell(self, h, xw):
        xr, xz, xn = fnp.split(xw, 3, axis=-1)
        hr, hz, hn = fnp.split(self._hidden(h), 3, axis=-1)
        r, z = F.sigmoid(xr + hr), F.sigmoid(xz + hz)
        n = F.tanh(xn + r * hn)
        h = (1.0 - z) * n + z * h
        return h, h
