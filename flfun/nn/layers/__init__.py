"""Layers as pytrees, one file per kind: ``dense.py`` (Linear, Embedding, Dropout), ``conv.py`` (Conv1d/Conv2d,
pooling, Flatten), ``norm.py`` (LayerNorm, RMSNorm), ``attention.py`` (MultiHeadAttention), ``containers.py``
(Lambda, Sequential, MLP), ``recurrent.py`` (LSTM, GRU: batch first, ``(..., T, input)``).

Each layer is a ``Module`` (an immutable dataclass whose leaves are its arrays), built with an explicit PRNG
``key`` and applied by calling it. Layers accept any number of leading batch dims (convolutions: ``(N, C, ...)``
or one unbatched ``(C, ...)`` example); dense weights are ``(in, out)`` and conv weights ``(O, I, *k)``
(``(*k, I, O)`` for channels-last convolutions).
"""
from flfun.nn.layers.attention import MultiHeadAttention, causal_mask, dot_product_attention
from flfun.nn.layers.containers import MLP, Lambda, Sequential
from flfun.nn.layers.conv import AvgPool2d, Conv1d, Conv2d, Flatten, MaxPool2d, avg_pool, max_pool
from flfun.nn.layers.dense import Dropout, Embedding, Linear, split_key
from flfun.nn.layers.norm import LayerNorm, RMSNorm
from flfun.nn.layers.recurrent import GRU, LSTM

__all__ = ["GRU", "LSTM", "MLP", "AvgPool2d", "Conv1d", "Conv2d", "Dropout", "Embedding", "Flatten", "Lambda",
           "LayerNorm", "Linear", "MaxPool2d", "MultiHeadAttention", "RMSNorm", "Sequential", "avg_pool",
           "causal_mask", "dot_product_attention", "max_pool", "split_key"]
