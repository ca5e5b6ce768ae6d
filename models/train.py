"""The training command: ``python -m models.train {mlp,cnn,transformer} [options]``, and
``python -m models.train sample`` to print text from a trained transformer.

It trains with AdamW (warm-up + cosine schedule, gradient clipping), shows a progress bar with the loss and
steps/s, evaluates at the end, and writes ``metrics.json`` and ``loss.png`` to ``--out``. With
``--checkpoint-dir`` it saves the model and optimiser state (safetensors, atomically) and ``--resume``
continues from there with the same data order.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

MODELS = ("mlp", "cnn", "transformer")
CKPT_NAME = "checkpoint.safetensors"


# -------------------------------------------------------------------------------------------------- arguments
def _positive(kind):
    def parse(text: str):
        try:
            v = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}") from None
        if not v > 0 or (kind is float and not math.isfinite(v)):
            raise argparse.ArgumentTypeError(f"expected a positive {kind.__name__}, got {text!r}")
        return v
    return parse


def _non_negative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}") from None
    if not (v >= 0 and math.isfinite(v)):
        raise argparse.ArgumentTypeError(f"expected a non-negative number, got {text!r}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m models.train",
        description="Train a reference model with flfun (or, with 'sample', generate text from a trained "
                    "transformer checkpoint).")
    p.add_argument("model", choices=MODELS + ("sample",), help="what to train, or 'sample'")
    p.add_argument("--steps", type=_positive(int), help="training steps (default: per model)")
    p.add_argument("--batch-size", type=_positive(int), help="examples per step (default: per model)")
    p.add_argument("--lr", type=_positive(float), help="peak learning rate (default: per model)")
    p.add_argument("--weight-decay", type=_non_negative_float, help="AdamW weight decay (default: per model)")
    p.add_argument("--seed", type=int, default=0, help="PRNG seed for init and data order (default 0)")
    p.add_argument("--backend", choices=("numpy", "cupy"), default="numpy", help="array backend (default numpy)")
    p.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True,
                   help="compile the training step with flfun.jit (default on when available)")
    p.add_argument("--profile", action="store_true",
                   help="profile 10 steps op by op; writes profile.txt and trace.json to --out")
    p.add_argument("--checkpoint-dir", help="save checkpoints here (at the end and every --checkpoint-every)")
    p.add_argument("--checkpoint-every", type=_positive(int), help="steps between checkpoints")
    p.add_argument("--resume", action="store_true", help="continue from the checkpoint in --checkpoint-dir")
    p.add_argument("--out", help="output folder for metrics.json and loss.png (default runs/<model>)")
    p.add_argument("--time-limit", type=_positive(float),
                   help="training time budget in seconds: the schedule is shortened to the steps that fit (speed "
                        "re-estimated every 20 steps), and training stops at the limit (default: 270 for "
                        "transformer, none otherwise)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")
    p.add_argument("--devices", type=_positive(int), help="data parallel over N CPU devices (per process) with "
                   "pmap; under mpiexec every process joins (see models/data_parallel.py)")
    p.add_argument("--zero", action="store_true", help="data parallel with the optimizer state sharded (ZeRO-1)")
    p.add_argument("--prompt", default="def ", help="sample: text to continue (default 'def ')")
    p.add_argument("--chars", type=_positive(int), default=300, help="sample: characters to generate")
    p.add_argument("--temperature", type=_positive(float), default=0.8, help="sample: softmax temperature")
    return p


def parse_args(argv=None) -> argparse.Namespace:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.model == "sample":
        if not args.checkpoint_dir:
            parser.error("sample needs --checkpoint-dir (a folder written by training the transformer)")
        return args
    if args.resume and not args.checkpoint_dir:
        parser.error("--resume needs --checkpoint-dir")
    if args.checkpoint_every and not args.checkpoint_dir:
        parser.error("--checkpoint-every needs --checkpoint-dir")
    if args.resume and not os.path.exists(os.path.join(args.checkpoint_dir, CKPT_NAME)):
        parser.error(f"--resume: no checkpoint found at {os.path.join(args.checkpoint_dir, CKPT_NAME)}")
    if args.backend == "cupy":
        try:
            import cupy  # noqa: F401
        except ImportError:
            parser.error("--backend cupy: cupy is not installed (pip install cupy-cuda12x) or no GPU is present")
    return args


# -------------------------------------------------------------------------------------------------------- tasks
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
    from models import transformer as T
    cfg = T.GPTConfig()
    corpus = D.load_text_corpus()

    def batch(step: int, bs: int):
        starts = np.asarray(fr.randint(fr.fold_in(data_key, step), (bs,), 0, len(corpus.train) - cfg.seq_len - 1))
        return T.sample_windows(corpus.train, starts, cfg.seq_len)

    def evaluate(model):
        bpc = T.bits_per_char(model, corpus.val)
        return {"val_bits_per_char": bpc, "unigram_entropy_bits": corpus.unigram_entropy(),
                "train_chars": len(corpus.train), "val_chars": len(corpus.val),
                "train_files": corpus.train_files, "val_files": corpus.val_files}

    return Task(name, T.DEFAULTS, corpus, lambda key: T.init(key, cfg), T.loss_fn, batch, evaluate, asdict(cfg))


# ---------------------------------------------------------------------------------------------------- training
def make_step(loss_fn: Callable, opt, use_jit: bool) -> Callable:
    """One training step ``(model, opt_state, x, y) -> (model, opt_state, loss)``, jitted if asked and possible."""
    import flfun
    from flfun import optim

    def step(model, opt_state, x, y):
        loss, grads = flfun.value_and_grad(loss_fn)(model, x, y)
        updates, opt_state = opt.update(grads, opt_state, model)
        return optim.apply_updates(model, updates), opt_state, loss

    if use_jit and hasattr(flfun, "jit"):
        return flfun.jit(step)
    return step


def make_optimizer(steps: int, lr: float, weight_decay: float, warmup: int):
    from flfun import optim
    warmup = min(warmup, max(steps // 10, 1))
    sched = optim.warmup_cosine_schedule(lr, warmup, max(steps, warmup + 1), end_value=lr * 0.05)
    return optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(sched, weight_decay=weight_decay))


def _save(args, model, opt_state, step: int, losses: list, task: Task, total_steps: int) -> None:
    from flfun import checkpoint
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    meta = {"model": args.model, "step": str(step), "seed": str(args.seed), "config": json.dumps(task.config),
            "total_steps": str(total_steps)}
    checkpoint.save(os.path.join(args.checkpoint_dir, CKPT_NAME), {"model": model, "opt_state": opt_state}, meta)
    tmp = os.path.join(args.checkpoint_dir, "losses.json.tmp")
    with open(tmp, "w") as f:
        json.dump(losses[:step], f)
    os.replace(tmp, os.path.join(args.checkpoint_dir, "losses.json"))


def _resume(args, model, opt_state):
    from flfun import checkpoint
    path = os.path.join(args.checkpoint_dir, CKPT_NAME)
    meta = checkpoint.load_metadata(path)
    if meta.get("model") != args.model:
        raise SystemExit(f"error: --resume: {path} holds a {meta.get('model')!r} checkpoint, not {args.model!r}")
    if meta.get("seed", str(args.seed)) != str(args.seed):
        raise SystemExit(f"error: --resume: {path} was trained with --seed {meta['seed']}, not {args.seed}; resume "
                         f"with the same seed to keep the data order")
    tree = checkpoint.load(path, like={"model": model, "opt_state": opt_state})
    step = int(meta["step"])
    losses_path = os.path.join(args.checkpoint_dir, "losses.json")
    losses = [float("nan")] * step
    if os.path.exists(losses_path):
        with open(losses_path) as f:
            losses = json.load(f)
    return tree["model"], tree["opt_state"], step, losses[:step]


_CALIBRATION_STEPS = 20   # steps between speed estimates under a time budget


def _steps_within(seconds_left: float, steps_per_s: float, done: int) -> int:
    """How many steps in total fit when ``seconds_left`` remain at ``steps_per_s`` (with a 5% margin)."""
    return done + max(int(0.95 * seconds_left * steps_per_s), 1)


def plot_losses(losses: list, path: str, title: str) -> None:
    """Training loss per step (and a moving average) as a PNG."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    y = np.asarray(losses, dtype=np.float64)
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot(np.arange(1, len(y) + 1), y, lw=0.6, alpha=0.5, label="loss per step")
    k = max(len(y) // 50, 1)
    if len(y) >= 2 * k and k > 1:
        smooth = np.convolve(y, np.ones(k) / k, mode="valid")
        ax.plot(np.arange(k, len(y) + 1), smooth, lw=1.5, label=f"moving average ({k} steps)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def train(args: argparse.Namespace) -> dict:
    """Run one training job described by parsed ``args``; returns the metrics (also written to --out)."""
    import flfun
    import flfun.numpy as fnp
    import flfun.random as fr
    from flfun.nn import count_params

    t_start = time.perf_counter()
    task = make_task(args.model, args.seed)
    d = task.defaults
    steps = args.steps or d["steps"]
    bs = args.batch_size or d["batch_size"]
    lr = args.lr or d["lr"]
    wd = d["weight_decay"] if args.weight_decay is None else args.weight_decay
    out = args.out or os.path.join("runs", args.model)
    os.makedirs(out, exist_ok=True)
    use_jit = args.jit and hasattr(flfun, "jit")
    if args.jit and not use_jit:
        print("note: flfun.jit is not available in this build; training eagerly (--no-jit)", file=sys.stderr)

    if args.resume and args.steps is None:    # keep the schedule of the run being resumed
        from flfun.checkpoint import load_metadata
        steps = int(load_metadata(os.path.join(args.checkpoint_dir, CKPT_NAME)).get("total_steps", steps))
    model = task.init(fr.key(args.seed))
    opt = make_optimizer(steps, lr, wd, d["warmup"])
    opt_state = opt.init(model)
    start, losses = 0, []
    if args.resume:
        model, opt_state, start, losses = _resume(args, model, opt_state)
        if start >= steps:
            print(f"checkpoint is already at step {start} >= --steps {steps}; evaluating only")
    step_fn = make_step(task.loss_fn, opt, use_jit)
    from models import data_parallel
    main_rank, parallel = True, False
    if args.devices or args.zero or data_parallel.launched_by_mpiexec():
        parallel = True
        step_fn, opt_state, main_rank = data_parallel.attach(args, task.loss_fn, opt, model, opt_state,
                                                             (steps, lr, wd, d["warmup"]), bs)
    time_limit = d.get("time_limit") if args.time_limit is None else args.time_limit
    steps_planned = steps

    bar = None
    if not args.no_progress and main_rank:
        from tqdm import tqdm
        bar = tqdm(total=steps, initial=start, desc=f"{args.model}", unit="step", dynamic_ncols=True,
                   file=sys.stdout)
    prof = None
    t_train = time.perf_counter()
    t_window, n_window, rate = t_train, 0, 0.0
    t_first = None
    stopped_early = False
    step = start
    profile_from = min(start + 1, steps - 1)    # skip the first (compiling) step unless it is the only one
    while step < steps:
        if args.profile and step == profile_from:
            from flfun.profiler import profile
            prof_ctx = profile(trace=True)
            prof = prof_ctx.__enter__()
        x, y = task.batch(step, bs)
        model, opt_state, loss = step_fn(model, opt_state, fnp.asarray(x), fnp.asarray(y))
        loss = float(loss)
        if not math.isfinite(loss):
            raise FloatingPointError(f"training diverged at step {step + 1}: loss is {loss}; try a smaller --lr")
        losses.append(loss)
        if prof is not None and step == start + 10:
            prof_ctx.__exit__(None, None, None)
            _write_profile(prof, out)
            prof = None
        n_window += 1
        now = time.perf_counter()
        if t_first is None:
            t_first = t_mark = now             # the first step includes tracing and compiling
            n_mark = step + 1
        elif time_limit and not parallel and (step + 1 - start) % _CALIBRATION_STEPS == 0:
            # re-estimate the speed over the recent steps and re-plan the schedule (by more than 10%, never
            # beyond --steps, not in the last fifth) so that the learning rate still decays within the budget
            fit = min(_steps_within(time_limit - (now - t_train), (step + 1 - n_mark) / (now - t_mark), step + 1),
                      steps_planned)
            if abs(fit - steps) > 0.1 * steps and step + 1 < 0.8 * steps:
                steps = fit
                opt = make_optimizer(steps, lr, wd, d["warmup"])
                step_fn = make_step(task.loss_fn, opt, use_jit)
                if bar is not None:
                    bar.total = steps
            if (step + 1 - start) % (5 * _CALIBRATION_STEPS) == 0:
                t_mark, n_mark = now, step + 1
        if now - t_window >= 0.5:
            rate, t_window, n_window = n_window / (now - t_window), now, 0
        if bar is not None:
            bar.update(1)
            post = {"loss": f"{loss:.4f}"}
            if rate:
                post["steps/s"] = f"{rate:.1f}"
            bar.set_postfix(post, refresh=False)
        if args.checkpoint_dir and args.checkpoint_every and (step + 1) % args.checkpoint_every == 0 and main_rank:
            _save(args, model, opt_state, step + 1, losses, task, steps)
        step += 1
        if time_limit and now - t_train > time_limit and step < steps:
            stopped_early = True
            break
    steps_done = max(step, start)
    if prof is not None:
        prof_ctx.__exit__(None, None, None)
        _write_profile(prof, out)
    if bar is not None:
        bar.close()
    train_time = time.perf_counter() - t_train
    if args.checkpoint_dir and main_rank:
        _save(args, model, opt_state, steps_done, losses, task, steps)

    t_eval = time.perf_counter()
    metrics = task.evaluate(model)
    eval_time = time.perf_counter() - t_eval
    ran = steps_done - start
    tail = losses[-max(len(losses) // 20, 1):]
    result = {
        "model": args.model, "steps": steps_done, "batch_size": bs, "lr": lr, "weight_decay": wd,
        "seed": args.seed, "backend": args.backend, "jit": use_jit, "resumed_from": start if args.resume else None,
        "stopped_early": stopped_early, "steps_planned": steps_planned, "time_limit_s": time_limit,
        "params": count_params(model), "config": task.config,
        "final_train_loss": float(np.mean(tail)) if tail else None,
        **metrics,
        "train_time_s": round(train_time, 3), "eval_time_s": round(eval_time, 3),
        "wall_time_s": round(time.perf_counter() - t_start, 3),
        "steps_per_s": round(ran / train_time, 3) if ran and train_time > 0 else None,
    }
    if main_rank:
        with open(os.path.join(out, "metrics.json"), "w") as f:
            json.dump(result, f, indent=2)
    if losses and main_rank:
        plot_losses(losses, os.path.join(out, "loss.png"), f"{args.model}: training loss")
    return result


def _write_profile(prof, out: str) -> None:
    with open(os.path.join(out, "profile.txt"), "w") as f:
        f.write(prof.table())
    prof.export_chrome_trace(os.path.join(out, "trace.json"))
    try:
        from tqdm import tqdm
        tqdm.write(prof.table(limit=15))
    except ImportError:
        print(prof.table(limit=15))


def sample(args: argparse.Namespace) -> str:
    """Load the transformer from ``--checkpoint-dir`` and return ``--chars`` characters after ``--prompt``."""
    import flfun.random as fr
    from flfun import checkpoint
    from models import data as D
    from models import transformer as T
    path = os.path.join(args.checkpoint_dir, CKPT_NAME)
    if not os.path.exists(path):
        raise SystemExit(f"error: sample: no checkpoint at {path}; train first with "
                         f"python -m models.train transformer --checkpoint-dir {args.checkpoint_dir}")
    meta = checkpoint.load_metadata(path)
    if meta.get("model") != "transformer":
        raise SystemExit(f"error: sample: {path} holds a {meta.get('model')!r} model, not a transformer")
    cfg = T.GPTConfig(**json.loads(meta.get("config", "{}")))
    tree = checkpoint.load(path)
    params = {k[len("model."):]: v for k, v in tree.items() if k.startswith("model.")}
    model = _restore(T.init(fr.key(0), cfg), params)
    ids = T.generate(model, D.encode(args.prompt), args.chars, fr.key(args.seed), args.temperature)
    return args.prompt + D.decode(ids)


def _restore(like, params: dict):
    from flfun.checkpoint import CheckpointError, tree_paths
    from flfun.tree import tree_unflatten
    names, leaves, treedef = tree_paths(like)
    for n, leaf in zip(names, leaves):
        if n not in params:
            raise CheckpointError(f"sample: the checkpoint lacks key 'model.{n}'")
        if tuple(params[n].shape) != tuple(leaf.shape):
            raise CheckpointError(f"sample: key 'model.{n}' has shape {tuple(params[n].shape)}, the config "
                                  f"expects {tuple(leaf.shape)}")
    return tree_unflatten(treedef, [params[n] for n in names])


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.backend != "numpy":
        os.environ["FLFUN_BACKEND"] = args.backend
        import flfun
        flfun.config.default_backend = args.backend
    if args.model == "sample":
        print(sample(args))
        return 0
    result = train(args)
    keys = [k for k in ("test_accuracy", "val_bits_per_char", "unigram_entropy_bits", "final_train_loss",
                        "steps_per_s", "wall_time_s") if result.get(k) is not None]
    print("  ".join(f"{k}={result[k]:.4g}" if isinstance(result[k], float) else f"{k}={result[k]}" for k in keys))
    print(f"wrote {os.path.join(args.out or os.path.join('runs', args.model), 'metrics.json')} and loss.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
