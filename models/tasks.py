"""The training command's tasks: for each model its data, initialiser, loss, batches (the same order on every
run with the same seed) and final evaluation."""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np


@dataclass
class Task:
    """What the loop needs to know about a model: data, init, loss, batches and the final evaluation."""
    name: str
    defaults: dict
    data: Any
    init: Callable          # key -> model
    loss_fn: Callable       # (model, x, y) -> scalar loss
    batch: Callable         # (step, batch_size) -> (x, y) numpy arrays
    evaluate: Callable      # model -> metrics dict
    config: dict


def make_task(name: str, seed: int) -> Task:
    import flfun.random as fr
    from models import data as D
    data_key, aug_key = fr.fold_in(fr.key(seed), 1), fr.fold_in(fr.key(seed), 2)
    if name in ("mlp", "cnn"):
        from models import cnn, mlp
        mod = mlp if name == "mlp" else cnn
        digits = D.load_digits(seed)
        n = len(digits.x_train)
        cache: dict[int, np.ndarray] = {}

        def batch(step: int, bs: int):
            per_epoch = max(n // bs, 1)
            epoch, j = divmod(step, per_epoch)
            if epoch not in cache:
                cache.clear()
                cache[epoch] = np.asarray(fr.permutation(fr.fold_in(data_key, epoch), n))
            idx = cache[epoch][j * bs:(j + 1) * bs]
            x = digits.x_train[idx]
            if name == "cnn":
                x = cnn.augment(x, np.asarray(fr.randint(fr.fold_in(aug_key, step), (len(idx), 2), 0, 3)))
            return x, digits.y_train[idx]

        def evaluate(model):
            import flfun.numpy as fnp
            from flfun import nn
            logits = (mod.logits(model, fnp.asarray(digits.x_test)) if name == "mlp"
                      else model(fnp.asarray(digits.x_test)))
            test_loss = float(nn.softmax_cross_entropy(logits, fnp.asarray(digits.y_test)))
            return {"test_accuracy": mod.accuracy(model, digits.x_test, digits.y_test),
                    "train_accuracy": mod.accuracy(model, digits.x_train, digits.y_train),
                    "test_loss": test_loss, "train_examples": n, "test_examples": len(digits.x_test)}

        return Task(name, mod.DEFAULTS, digits, mod.init, mod.loss_fn, batch, evaluate, {})
    from models import lstm
    from models import transformer as T
    mod, cfg = (lstm, lstm.LSTMConfig()) if name == "lstm" else (T, T.GPTConfig())
    corpus = D.load_text_corpus()

    def batch(step: int, bs: int):
        starts = np.asarray(fr.randint(fr.fold_in(data_key, step), (bs,), 0, len(corpus.train) - cfg.seq_len - 1))
        return T.sample_windows(corpus.train, starts, cfg.seq_len)

    def evaluate(model):
        bpc = mod.bits_per_char(model, corpus.val)
        return {"val_bits_per_char": bpc, "unigram_entropy_bits": corpus.unigram_entropy(),
                "train_chars": len(corpus.train), "val_chars": len(corpus.val),
                "train_files": corpus.train_files, "val_files": corpus.val_files}

    return Task(name, mod.DEFAULTS, corpus, lambda key: mod.init(key, cfg), mod.loss_fn, batch, evaluate, asdict(cfg))


__all__ = ["Task", "make_task"]
