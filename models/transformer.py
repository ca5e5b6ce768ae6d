"""A character-level GPT: token + learned position embeddings, pre-LN blocks (causal multi-head attention and a
GELU-tanh MLP), a final LayerNorm and an untied LM head without bias (benchmark W6's network).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

import flfun
import flfun.numpy as fnp
from flfun import nn, random
from flfun.lax import reshape
from flfun.lax import slice as lax_slice

# trained within a 5-minute CPU budget: 270 s of steps (the schedule shrinks to what fits), then evaluation
DEFAULTS = {"steps": 2000, "batch_size": 16, "lr": 5e-3, "weight_decay": 0.01, "warmup": 100, "time_limit": 270.0}


@dataclass(frozen=True)
class GPTConfig:
    """Model sizes; the defaults are W6's: vocab 96, d_model 128, 4 heads, 2 layers, MLP 512, context 128."""
    vocab_size: int = 96
    d_model: int = 128
    num_heads: int = 4
    num_layers: int = 2
    mlp_ratio: int = 4
    seq_len: int = 128
    init_std: float = 0.02


class Block(nn.Module):
    """``x + attn(LN1(x))``, then ``x + proj(gelu(fc(LN2(x))))``."""
    ln1: nn.LayerNorm
    attn: nn.MultiHeadAttention
    ln2: nn.LayerNorm
    fc: nn.Linear
    proj: nn.Linear

    def __init__(self, cfg: GPTConfig, *, key):
        k1, k2, k3, k4 = nn.split_key(key, 4)
        d, normal = cfg.d_model, nn.initializers.normal(cfg.init_std)
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        attn = nn.MultiHeadAttention(d, cfg.num_heads, key=k1)
        self.attn = attn.replace(qkv=_gpt_linear(d, 3 * d, k1, normal), out=_gpt_linear(d, d, k2, normal))
        self.fc = _gpt_linear(d, cfg.mlp_ratio * d, k3, normal)
        self.proj = _gpt_linear(cfg.mlp_ratio * d, d, k4, normal)

    def __call__(self, x):
        x = x + self.attn(self.ln1(x), causal=True)
        return x + self.proj(nn.gelu(self.fc(self.ln2(x)), approximate=True))


def _gpt_linear(n_in: int, n_out: int, key, weight_init, bias: bool = True) -> nn.Linear:
    lin = nn.Linear(n_in, n_out, key=key, use_bias=bias, weight_init=weight_init)
    return lin.replace(bias=fnp.zeros((n_out,))) if bias else lin


class GPT(nn.Module):
    """The language model: ``GPT(GPTConfig(), key=key)(tokens (B, T)) -> logits (B, T, vocab)``.

    Example::

        >>> model = GPT(GPTConfig(num_layers=1), key=flfun.random.key(0))
        >>> model(fnp.zeros((2, 16), dtype="int32")).shape
        (2, 16, 96)
    """
    wte: nn.Embedding
    wpe: fnp.Array
    blocks: tuple
    ln_f: nn.LayerNorm
    head: nn.Linear
    config: GPTConfig = nn.static_field()

    def __init__(self, cfg: GPTConfig = GPTConfig(), *, key):
        keys = nn.split_key(key, cfg.num_layers + 3)
        normal = nn.initializers.normal(cfg.init_std)
        self.wte = nn.Embedding(cfg.vocab_size, cfg.d_model, key=keys[0], weight_init=normal)
        self.wpe = normal(keys[1], (cfg.seq_len, cfg.d_model))
        self.blocks = tuple(Block(cfg, key=k) for k in keys[2:-1])
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.head = _gpt_linear(cfg.d_model, cfg.vocab_size, keys[-1], normal, bias=False)
        self.config = cfg

    def __call__(self, tokens):
        t = tokens.shape[-1]
        if t > self.config.seq_len:
            raise ValueError(f"GPT: sequence length {t} exceeds the context of {self.config.seq_len}")
        x = self.wte(tokens) + lax_slice(self.wpe, (0, 0), (t, self.config.d_model))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def init(key, cfg: GPTConfig = GPTConfig()) -> GPT:
    """A fresh GPT: ``init(flfun.random.key(0))``."""
    return GPT(cfg, key=key)


def loss_fn(model: GPT, x, y, key=None):
    """Mean next-character cross-entropy (nats) over all ``B*T`` positions (in float32 whatever the compute
    dtype)."""
    return nn.softmax_cross_entropy(model(x).astype(fnp.float32), y)


def sample_windows(text: np.ndarray, starts: np.ndarray, seq_len: int) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ``text[s:s+T]`` and targets ``text[s+1:s+T+1]`` (int32) for each start ``s``."""
    idx = starts[:, None] + np.arange(seq_len + 1)[None, :]
    w = text[idx].astype(np.int32)
    return w[:, :-1], w[:, 1:]


def bits_per_char(model: GPT, text: np.ndarray, batch_size: int = 32, max_windows: int = 256) -> float:
    """Validation bits per character on up to ``max_windows`` non-overlapping windows of ``text``."""
    t = model.config.seq_len
    n = min((len(text) - 1) // t, max_windows)
    if n < 1:
        raise ValueError(f"bits_per_char: text of {len(text)} characters is shorter than one window of {t + 1}")
    starts = np.arange(n) * t
    total, count = 0.0, 0
    for i in range(0, n, batch_size):
        x, y = sample_windows(text, starts[i:i + batch_size], t)
        loss = nn.softmax_cross_entropy(model(fnp.asarray(x)), fnp.asarray(y), reduction="sum")
        total += float(loss)
        count += y.size
    return total / count / math.log(2)


def generate(model: GPT, prompt: np.ndarray, num_chars: int, key, temperature: float = 0.8) -> np.ndarray:
    """Sample ``num_chars`` characters after ``prompt`` (ids), one at a time, at ``temperature``.

    Example::

        >>> ids = generate(model, encode("def "), 200, flfun.random.key(0))
    """
    if temperature <= 0:
        raise ValueError(f"generate: temperature must be positive, got {temperature}")
    ids = [int(i) for i in np.asarray(prompt).ravel()] or [0]
    t = model.config.seq_len
    # a fixed (1, T) window, zero-padded on the right: causal attention keeps the padding from reaching
    # position n-1, and one shape means one compilation
    forward = flfun.jit(lambda m, x: m(x)) if hasattr(flfun, "jit") else (lambda m, x: m(x))
    for i in range(num_chars):
        ctx = ids[-t:]
        n = len(ctx)
        window = np.zeros((1, t), dtype=np.int32)
        window[0, :n] = ctx
        logits = forward(model, fnp.asarray(window))
        last = reshape(lax_slice(logits, (0, n - 1, 0), (1, n, logits.shape[-1])), (logits.shape[-1],))
        ids.append(int(random.categorical(random.fold_in(key, i), last / temperature)))
    return np.asarray(ids[len(ids) - num_chars:], dtype=np.int32)
