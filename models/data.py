"""Offline data sets: scikit-learn's bundled 8x8 digits, and a character corpus gathered at run time from the
Python standard library's own source files (train/validation split by file)."""
from __future__ import annotations

import glob
import math
import os
import sysconfig
from dataclasses import dataclass

import numpy as np

# '\n' and the 95 printable ASCII characters: 96 symbols (W6's vocabulary size)
VOCAB = "\n" + "".join(chr(c) for c in range(32, 127))
_UNKNOWN = VOCAB.index("?")


@dataclass
class Digits:
    """The 8x8 digits as float32 images in [0, 1] (N, 1, 8, 8) and int32 labels, split 80/20 (stratified)."""
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits(seed: int = 0) -> Digits:
    """The 1797 handwritten digits that ship with scikit-learn (no download).

    Example::

        >>> d = load_digits()
        >>> d.x_train.shape, d.x_test.shape
        ((1437, 1, 8, 8), (360, 1, 8, 8))
    """
    from sklearn.datasets import load_digits as sk_load
    from sklearn.model_selection import train_test_split
    bunch = sk_load()
    x = (bunch.images / 16.0).astype(np.float32)[:, None]
    y = bunch.target.astype(np.int32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    return Digits(xtr, ytr, xte, yte)


@dataclass
class TextCorpus:
    """Character ids (uint8 indices into ``VOCAB``) for training and validation, and the files they came from."""
    train: np.ndarray
    val: np.ndarray
    train_files: int
    val_files: int

    @property
    def vocab_size(self) -> int:
        return len(VOCAB)

    def unigram_entropy(self) -> float:
        """Bits per character of the validation text under the training text's unigram distribution
        (add-one smoothed): the cross-entropy a model ignoring context can reach."""
        counts = np.bincount(self.train, minlength=len(VOCAB)).astype(np.float64) + 1
        logp = np.log2(counts / counts.sum())
        return float(-logp[self.val].mean())


def encode(text: str) -> np.ndarray:
    """Characters to ids; tabs become four spaces, carriage returns vanish, anything else unknown is '?'."""
    text = text.replace("\r", "").replace("\t", "    ")
    table = np.full(128, _UNKNOWN, dtype=np.uint8)
    for i, ch in enumerate(VOCAB):
        table[ord(ch)] = i
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    return np.where(codes < 128, table[np.minimum(codes, 127)], _UNKNOWN).astype(np.uint8)


def decode(ids) -> str:
    """Ids back to text: ``decode(encode("x = 1")) == "x = 1"``."""
    return "".join(VOCAB[int(i)] for i in np.asarray(ids).ravel())


def stdlib_files() -> list[str]:
    """The top-level ``*.py`` modules of this interpreter's standard library, sorted by name."""
    root = sysconfig.get_paths()["stdlib"]
    return sorted(glob.glob(os.path.join(root, "*.py")))


def load_text_corpus(max_chars: int | None = None, val_every: int = 10) -> TextCorpus:
    """The standard library's source as a corpus: every ``val_every``-th file (by name) is validation.

    Example::

        >>> c = load_text_corpus()
        >>> c.vocab_size
        96
    """
    files = stdlib_files()
    if not files:
        raise RuntimeError("load_text_corpus: found no standard-library *.py files "
                           f"under {sysconfig.get_paths()['stdlib']!r}")
    train, val = [], []
    for i, path in enumerate(files):
        with open(path, encoding="utf-8", errors="replace") as f:
            (val if i % val_every == val_every - 1 else train).append(encode(f.read()))
    tr, va = np.concatenate(train), np.concatenate(val)
    if max_chars is not None:
        tr, va = tr[:max_chars], va[:max(math.ceil(max_chars / val_every), 1)]
    return TextCorpus(tr, va, len(train), len(val))
