"""A character-level LSTM language model: an embedding, one ``nn.LSTM`` (a ``lax.scan`` over time) and a linear
head, trained on the same corpus and windows as the transformer.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import flfun
import flfun.numpy as fnp
from flfun import nn, random
from flfun.lax import reshape
from models.transformer import bits_per_char  # noqa: F401  (the same evaluation windows as the transformer)

# trained within a 5-minute CPU budget: 270 s of steps (the schedule shrinks to what fits), then evaluation
DEFAULTS = {"steps": 3000, "batch_size": 32, "lr": 1e-2, "weight_decay": 0.0, "warmup": 50, "time_limit": 270.0}


@dataclass(frozen=True)
class LSTMConfig:
    """Model sizes: vocabulary 96, embedding 64, hidden 256, training windows of 64 characters."""
    vocab_size: int = 96
    embed_dim: int = 64
    hidden_size: int = 256
    seq_len: int = 64


class CharLSTM(nn.Module):
    """``CharLSTM(LSTMConfig(), key=key)(tokens (B, T), state=None) -> logits (B, T, vocab)``; with
    ``return_state=True`` also the final ``(h, c)``, to continue from.

    Example::

        >>> model = CharLSTM(LSTMConfig(hidden_size=32), key=flfun.random.key(0))
        >>> model(fnp.zeros((2, 16), dtype="int32")).shape
        (2, 16, 96)
    """
    embed: nn.Embedding
    lstm: nn.LSTM
    head: nn.Linear
    config: LSTMConfig = nn.static_field()

    def __init__(self, cfg: LSTMConfig = LSTMConfig(), *, key):
        k1, k2, k3 = nn.split_key(key, 3)
        self.embed = nn.Embedding(cfg.vocab_size, cfg.embed_dim, key=k1, weight_init=nn.initializers.normal(0.1))
        self.lstm = nn.LSTM(cfg.embed_dim, cfg.hidden_size, key=k2)
        self.head = nn.Linear(cfg.hidden_size, cfg.vocab_size, key=k3)
        self.config = cfg

    def __call__(self, tokens, state=None, return_state: bool = False):
        hs, state = self.lstm(self.embed(tokens), state)
        logits = self.head(hs)
        return (logits, state) if return_state else logits


def init(key, cfg: LSTMConfig = LSTMConfig()) -> CharLSTM:
    """A fresh model: ``init(flfun.random.key(0))``."""
    return CharLSTM(cfg, key=key)


def loss_fn(model: CharLSTM, x, y, key=None):
    """Mean next-character cross-entropy (nats) over all ``B*T`` positions."""
    return nn.softmax_cross_entropy(model(x), y)


def generate(model: CharLSTM, prompt: np.ndarray, num_chars: int, key, temperature: float = 0.8) -> np.ndarray:
    """Sample ``num_chars`` characters after ``prompt`` (ids): the prompt sets the state, then one character
    at a time carries it on.

    Example::

        >>> ids = generate(model, encode("def "), 200, flfun.random.key(0))
    """
    if temperature <= 0:
        raise ValueError(f"generate: temperature must be positive, got {temperature}")
    ids = np.asarray(prompt, dtype=np.int32).ravel()
    ids = ids if ids.size else np.zeros(1, np.int32)
    step = flfun.jit(lambda m, x, s: m(x, s, return_state=True))
    logits, state = model(fnp.asarray(ids[None]), return_state=True)
    last = logits[0, -1]
    out = []
    for i in range(num_chars):
        out.append(int(random.categorical(random.fold_in(key, i), last / temperature)))
        logits, state = step(model, fnp.asarray(np.array([[out[-1]]], np.int32)), state)
        last = reshape(logits, (logits.shape[-1],))
    return np.asarray(out, dtype=np.int32)
