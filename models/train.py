"""The training command: ``python -m models.train {mlp,cnn,transformer,lstm} [options]``, and
``python -m models.train sample`` to print text from a trained transformer or LSTM.

It trains with AdamW (warm-up + cosine schedule, gradient clipping), shows a progress bar with the loss and
steps/s, evaluates at the end, and writes ``metrics.json`` and ``loss.png`` to ``--out``. With
``--checkpoint-dir`` it saves the model and optimiser state (safetensors, atomically) and ``--resume``
continues from there with the same data order.

No run is lost: SIGINT/SIGTERM end training after the current step with every output written (exit 130/143), a
non-finite loss ends it likewise (exit 1; or ``--skip-nonfinite``), and bad paths or a corrupt ``--resume``
checkpoint are usage errors (exit 2) found before training. Other ``error:`` lines exit 1.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from models.tasks import Task, make_task
from models.runlog import SIGNALS, StopFlag, folder_problem, plot_losses, write_json, write_profile

MODELS = ("mlp", "cnn", "transformer", "lstm")
CKPT_NAME = "checkpoint.safetensors"
# one BLAS thread by default: the LSTM's per-step matmuls ((32, 256) @ (256, 1024)) are small, and on a busy machine a
# second OpenBLAS thread spin-waits (measured at load 10 on 2 cores: 0.48 s per step with one thread, 9.1 s with two)
# Models whose GEMMs are too small for a second BLAS thread to pay: on the 2-core machine mlp ran 1,080 steps/s
# with 2 threads and 1,170 with 1 when quiet, 14.5 and 222 under load.
ONE_BLAS_THREAD = ("mlp", "lstm")


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
                        "transformer and lstm, none otherwise)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar (e.g. in logs)")
    p.add_argument("--skip-nonfinite", action="store_true", help="skip the update of a step whose loss or "
                   "gradient is not finite (counted in metrics.json) instead of stopping the run")
    p.add_argument("--cpu-threads", type=_positive(int), help="BLAS threads per process (default: the cores "
                   "divided among the processes of this machine, 1 for mlp and lstm; also FLFUN_CPU_THREADS)")
    p.add_argument("--devices", type=_positive(int), help="data parallel over N CPU devices (per process) with "
                   "pmap; under mpiexec every process joins (see models/data_parallel.py)")
    p.add_argument("--zero", action="store_true", help="data parallel with the optimizer state sharded (ZeRO-1)")
    p.add_argument("--precision", choices=("f32", "bf16", "f16"), default="f32", help="compute dtype; bf16/f16 "
                   "keep float32 master weights and optimizer state, f16 scales the loss (models/precision.py)")
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
    for flag, path in (("--out", args.out or os.path.join("runs", args.model)), ("--checkpoint-dir", args.checkpoint_dir)):
        problem = path and folder_problem(flag, path)
        if problem:
            parser.error(problem)
    if args.resume:
        from flfun.serialization import CheckpointError, load_metadata
        try:
            load_metadata(os.path.join(args.checkpoint_dir, CKPT_NAME))
        except CheckpointError as e:
            parser.error(f"--resume: {e}")
    if args.backend == "cupy":
        try:
            import cupy  # noqa: F401
        except ImportError:
            parser.error("--backend cupy: cupy is not installed (pip install cupy-cuda12x) or no GPU is present")
    return args


# ---------------------------------------------------------------------------------------------------- training
def make_step(loss_fn: Callable, opt, use_jit: bool, skip_nonfinite: bool = False, precision: str = "f32") -> Callable:
    """One training step ``(model, opt_state, x, y) -> (model, opt_state, loss)``, jitted if asked and possible.

    With ``skip_nonfinite`` it returns ``(model, opt_state, loss, ok)`` and, where the loss or a gradient is not
    finite (``ok`` false), the model and optimizer state it was given. ``precision`` 'bf16'/'f16' computes in
    that dtype (f16 with loss scaling, which skips overflowing steps itself; see ``models/precision.py``).
    """
    import flfun
    import flfun.numpy as fnp
    from flfun import optim
    from flfun.tree import tree_leaves, tree_map
    from models import precision as mixed
    loss_fn = mixed.in_compute_dtype(loss_fn, mixed.POLICIES[precision])

    def step(model, opt_state, x, y):
        loss, grads = flfun.value_and_grad(loss_fn)(model, x, y)
        updates, new_state = opt.update(grads, opt_state, model)
        new_model = optim.apply_updates(model, updates)
        if not skip_nonfinite:
            return new_model, new_state, loss
        ok = fnp.isfinite(loss)
        for g in tree_leaves(grads):
            ok = ok & fnp.all(fnp.isfinite(g))
        keep = lambda new, old: fnp.where(ok, new, old)   # noqa: E731
        return tree_map(keep, new_model, model), tree_map(keep, new_state, opt_state), loss, ok

    if precision == "f16":
        step = mixed.loss_scaled_step(loss_fn, opt)
    if use_jit and hasattr(flfun, "jit"):
        return flfun.jit(step)
    return step


def make_optimizer(steps: int, lr: float, weight_decay: float, warmup: int):
    from flfun import optim
    warmup = min(warmup, max(steps // 10, 1))
    sched = optim.warmup_cosine_schedule(lr, warmup, max(steps, warmup + 1), end_value=lr * 0.05)
    return optim.chain(optim.clip_by_global_norm(1.0), optim.adamw(sched, weight_decay=weight_decay))


def _save(args, model, opt_state, step: int, losses: list, task: Task, total_steps: int) -> None:
    from flfun import serialization as checkpoint
    os.makedirs(args.checkpoint_dir, exist_ok=True)
    meta = {"model": args.model, "step": str(step), "seed": str(args.seed), "config": json.dumps(task.config),
            "total_steps": str(total_steps)}
    checkpoint.save(os.path.join(args.checkpoint_dir, CKPT_NAME), {"model": model, "opt_state": opt_state}, meta)
    tmp = os.path.join(args.checkpoint_dir, "losses.json.tmp")
    with open(tmp, "w") as f:
        json.dump(losses[:step], f)
    os.replace(tmp, os.path.join(args.checkpoint_dir, "losses.json"))


def _resume(args, model, opt_state):
    from flfun import serialization as checkpoint
    path = os.path.join(args.checkpoint_dir, CKPT_NAME)
    meta = checkpoint.load_metadata(path)
    if meta.get("model") != args.model:
        raise SystemExit(f"error: --resume: {path} holds a {meta.get('model')!r} checkpoint, not {args.model!r}")
    if meta.get("seed", str(args.seed)) != str(args.seed):
        raise SystemExit(f"error: --resume: {path} was trained with --seed {meta['seed']}, not {args.seed}; resume "
                         f"with the same seed to keep the data order")
    try:
        tree = checkpoint.load(path, like={"model": model, "opt_state": opt_state})
        step = int(meta["step"])
    except (checkpoint.CheckpointError, KeyError, ValueError) as e:
        raise SystemExit(f"error: --resume: {path} does not fit this model: {e}") from None
    losses: list = [None] * step         # unknown when losses.json is missing or unreadable: null in metrics
    try:
        with open(os.path.join(args.checkpoint_dir, "losses.json")) as f:
            saved = json.load(f)
        if isinstance(saved, list) and len(saved) >= step:
            losses = saved
    except (OSError, ValueError):
        pass
    return tree["model"], tree["opt_state"], step, losses[:step]


_CALIBRATION_STEPS = 20   # steps between speed estimates under a time budget


def _steps_within(seconds_left: float, steps_per_s: float, done: int) -> int:
    """How many steps in total fit when ``seconds_left`` remain at ``steps_per_s`` (with a 5% margin)."""
    return done + max(int(0.95 * seconds_left * steps_per_s), 1)


@dataclass
class Run:
    """The state of one training job: what it trains, where it stands, and how it ended."""
    args: argparse.Namespace
    task: Task
    steps: int
    bs: int
    lr: float
    wd: float
    out: str
    use_jit: bool
    model: Any
    opt_state: Any
    start: int
    losses: list
    step_fn: Callable
    main_rank: bool = True
    parallel: bool = False
    stopped_early: bool = False
    skipped: int = 0
    diverged: dict | None = None
    signal: str | None = None
    stop_signal: int = 0          # the signal that ends training after this step (agreed by all processes)
    steps_planned: int = 0
    time_limit: float | None = None
    train_time: float = 0.0


def _setup(args: argparse.Namespace) -> Run:
    """Build the task, optimizer and step function, restore a checkpoint if asked, and join data parallelism."""
    import flfun
    import flfun.random as fr
    from models import data_parallel
    from models import precision as mixed
    task = make_task(args.model, args.seed)
    d = task.defaults
    steps, bs, lr = args.steps or d["steps"], args.batch_size or d["batch_size"], args.lr or d["lr"]
    wd = d["weight_decay"] if args.weight_decay is None else args.weight_decay
    use_jit = args.jit and hasattr(flfun, "jit")
    if args.jit and not use_jit:
        print("note: flfun.jit is not available in this build; training eagerly (--no-jit)", file=sys.stderr)
    if args.resume and args.steps is None:    # keep the schedule of the run being resumed
        from flfun.serialization import load_metadata
        steps = int(load_metadata(os.path.join(args.checkpoint_dir, CKPT_NAME)).get("total_steps", steps))
    model = task.init(fr.key(args.seed))
    opt = make_optimizer(steps, lr, wd, d["warmup"])
    opt_state = mixed.init_state(opt, model, args.precision)
    start, losses = 0, []
    if args.resume:
        model, opt_state, start, losses = _resume(args, model, opt_state)
        if start >= steps:
            print(f"checkpoint is already at step {start} >= --steps {steps}; evaluating only")
    run = Run(args, task, steps, bs, lr, wd, args.out or os.path.join("runs", args.model), use_jit, model,
              opt_state, start, losses, make_step(task.loss_fn, opt, use_jit, args.skip_nonfinite, args.precision))
    if args.devices or args.zero or data_parallel.launched_by_mpiexec():
        if args.skip_nonfinite or args.precision != "f32":
            raise SystemExit("error: --skip-nonfinite and --precision are not supported with data parallelism yet")
        run.parallel = True
        run.step_fn, run.opt_state, run.main_rank = data_parallel.attach(
            args, task.loss_fn, opt, model, opt_state, (steps, lr, wd, d["warmup"]), bs)
    if run.main_rank:
        os.makedirs(run.out, exist_ok=True)
    return run


def _one_step(run: Run, step: int, stop: StopFlag) -> bool:
    """Train step ``step``; False (leaving the model as it was) when its loss is not finite and not skipped.

    Data-parallel processes agree in the step itself on whether any of them was signalled, so that all stop
    after the same step."""
    import flfun.numpy as fnp
    x, y = run.task.batch(step, run.bs)
    if run.parallel:
        model, opt_state, loss, agreed = run.step_fn(run.model, run.opt_state, x, y, stop.signum)
        run.stop_signal, ok = int(agreed), []
    else:
        model, opt_state, loss, *ok = run.step_fn(run.model, run.opt_state, fnp.asarray(x), fnp.asarray(y))
        run.stop_signal = stop.signum
    loss = float(loss)
    if ok and not bool(ok[0]):          # --skip-nonfinite: the step kept the old model and state
        run.skipped += 1
        run.losses.append(loss if math.isfinite(loss) else None)
        return True
    if not math.isfinite(loss):
        run.diverged = {"step": step + 1, "loss": str(loss)}
        return False
    run.model, run.opt_state = model, opt_state
    run.losses.append(loss)
    return True


def _progress_bar(run: Run):
    if run.args.no_progress or not run.main_rank:
        return None
    from tqdm import tqdm
    return tqdm(total=run.steps, initial=run.start, desc=run.args.model, unit="step", dynamic_ncols=True,
                file=sys.stdout)


def _loop(run: Run, stop: StopFlag) -> int:
    """Train until ``run.steps``, the time limit, a stop signal or divergence; returns the steps done."""
    args, d = run.args, run.task.defaults
    time_limit = d.get("time_limit") if args.time_limit is None else args.time_limit
    bar = _progress_bar(run)
    prof = prof_ctx = None
    t_train = t_window = time.perf_counter()
    n_window, rate, t_first, steps_planned = 0, 0.0, None, run.steps
    step = run.start
    profile_from = min(run.start + 1, run.steps - 1)    # skip the first (compiling) step unless it is the only one
    while step < run.steps and not run.stop_signal:
        if args.profile and step == profile_from:
            from flfun.profiler import profile
            prof_ctx = profile(trace=True)
            prof = prof_ctx.__enter__()
        if not _one_step(run, step, stop):
            break
        if prof is not None and step == run.start + 10:
            prof_ctx.__exit__(None, None, None)
            write_profile(prof, run.out)
            prof = None
        n_window += 1
        now = time.perf_counter()
        if t_first is None:
            t_first = t_mark = now             # the first step includes tracing and compiling
            n_mark = step + 1
        elif time_limit and not run.parallel and (step + 1 - run.start) % _CALIBRATION_STEPS == 0:
            # re-estimate the speed over the recent steps and re-plan the schedule (by more than 10%, never
            # beyond --steps, not in the last fifth) so that the learning rate still decays within the budget
            fit = min(_steps_within(time_limit - (now - t_train), (step + 1 - n_mark) / (now - t_mark), step + 1),
                      steps_planned)
            if abs(fit - run.steps) > 0.1 * run.steps and step + 1 < 0.8 * run.steps:
                run.steps = fit
                opt = make_optimizer(run.steps, run.lr, run.wd, d["warmup"])
                run.step_fn = make_step(run.task.loss_fn, opt, run.use_jit, args.skip_nonfinite, args.precision)
                if bar is not None:
                    bar.total = run.steps
            if (step + 1 - run.start) % (5 * _CALIBRATION_STEPS) == 0:
                t_mark, n_mark = now, step + 1
        if now - t_window >= 0.5:
            rate, t_window, n_window = n_window / (now - t_window), now, 0
        if bar is not None:
            bar.update(1)
            last = run.losses[-1]
            post = {"loss": "skipped" if last is None else f"{last:.4f}", **({"steps/s": f"{rate:.1f}"} if rate else {})}
            bar.set_postfix(post, refresh=False)
        step += 1
        if args.checkpoint_dir and args.checkpoint_every and step % args.checkpoint_every == 0 and run.main_rank:
            _save(args, run.model, run.opt_state, step, run.losses, run.task, run.steps)
        if time_limit and now - t_train > time_limit and step < run.steps:
            run.stopped_early = True
            break
    if prof is not None:
        prof_ctx.__exit__(None, None, None)
        write_profile(prof, run.out)
    if bar is not None:
        bar.close()
    run.steps_planned, run.time_limit, run.train_time = steps_planned, time_limit, time.perf_counter() - t_train
    return max(step, run.start)


def train(args: argparse.Namespace) -> dict:
    """Run one training job described by parsed ``args``; returns the metrics (also written to --out).

    A SIGINT or SIGTERM ends training after the current step, and a non-finite loss ends it before its update;
    either way the checkpoint (not of a diverged model), ``metrics.json`` and the plot are written, and the
    metrics say why the run ended (``interrupted``, ``signal``, ``diverged``).
    """
    from flfun.nn import count_params
    from models import precision as mixed
    t_start = time.perf_counter()
    run = _setup(args)
    with StopFlag() as stop:
        steps_done = _loop(run, stop)
        if run.stop_signal:
            run.signal = SIGNALS[run.stop_signal]
        if args.checkpoint_dir and run.main_rank and not run.diverged:
            _save(args, run.model, run.opt_state, steps_done, run.losses, run.task, run.steps)
        t_eval = time.perf_counter()
        metrics = {} if run.signal or run.diverged else run.task.evaluate(run.model)
        eval_time = time.perf_counter() - t_eval
        ran = steps_done - run.start
        tail = [v for v in run.losses[-max(len(run.losses) // 20, 1):] if v is not None]
        result = {
            "model": args.model, "steps": steps_done, "batch_size": run.bs, "lr": run.lr, "weight_decay": run.wd,
            "seed": args.seed, "backend": args.backend, "jit": run.use_jit,
            "resumed_from": run.start if args.resume else None, "stopped_early": run.stopped_early,
            "interrupted": run.signal is not None, "signal": run.signal, "diverged": run.diverged,
            "skipped_nonfinite_steps": run.skipped, "steps_planned": run.steps_planned,
            "time_limit_s": run.time_limit, "params": count_params(run.model), "config": run.task.config,
            **mixed.report(run.opt_state, args.precision),
            "final_train_loss": float(np.mean(tail)) if tail else None,
            **metrics,
            "train_time_s": round(run.train_time, 3), "eval_time_s": round(eval_time, 3),
            "wall_time_s": round(time.perf_counter() - t_start, 3),
            "steps_per_s": round(ran / run.train_time, 3) if ran and run.train_time > 0 else None,
        }
        if run.main_rank:
            write_json(os.path.join(run.out, "metrics.json"), result)
            if run.losses:
                plot_losses(run.losses, os.path.join(run.out, "loss.png"), f"{args.model}: training loss")
        if stop.signum and not run.signal:   # arrived while writing: the outputs are complete, say so anyway
            run.signal = SIGNALS[stop.signum]
    return result


def sample(args: argparse.Namespace) -> str:
    """Load the transformer or LSTM from ``--checkpoint-dir``; return ``--chars`` characters after ``--prompt``."""
    import flfun.random as fr
    from flfun import serialization as checkpoint
    from models import data as D
    from models import lstm as L
    from models import transformer as T
    path = os.path.join(args.checkpoint_dir, CKPT_NAME)
    if not os.path.exists(path):
        raise SystemExit(f"error: sample: no checkpoint at {path}; train first with "
                         f"python -m models.train transformer --checkpoint-dir {args.checkpoint_dir}")
    meta = checkpoint.load_metadata(path)
    if meta.get("model") not in ("transformer", "lstm"):
        raise SystemExit(f"error: sample: {path} holds a {meta.get('model')!r} model, not a transformer or lstm")
    mod, config = (L, L.LSTMConfig) if meta["model"] == "lstm" else (T, T.GPTConfig)
    cfg = config(**json.loads(meta.get("config", "{}")))
    tree = checkpoint.load(path)
    params = {k[len("model."):]: v for k, v in tree.items() if k.startswith("model.")}
    model = _restore(mod.init(fr.key(0), cfg), params)
    ids = mod.generate(model, D.encode(args.prompt), args.chars, fr.key(args.seed), args.temperature)
    return args.prompt + D.decode(ids)


def _restore(like, params: dict):
    from flfun.serialization import CheckpointError, tree_paths
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
    from flfun.distributed import threads
    n = args.cpu_threads or threads.default_cpu_threads(threads.local_processes())
    if n is not None and args.model in ONE_BLAS_THREAD and not (args.cpu_threads or "FLFUN_CPU_THREADS" in os.environ):
        n = 1
    if n is not None:       # None: the user sized the BLAS pools with OPENBLAS_NUM_THREADS and friends
        threads.set_cpu_threads(n)
    try:
        result = train(args)
    except OSError as e:     # e.g. the disk filled up or a folder vanished while writing the outputs
        raise SystemExit(f"error: {e}") from None
    from flfun.distributed.devices import process_index
    if process_index() != 0:
        return _status(result)
    out = args.out or os.path.join("runs", args.model)
    wrote = f"wrote {os.path.join(out, 'metrics.json')}" + (" and loss.png" if result["steps"] else "")
    if args.checkpoint_dir and not result["diverged"]:
        wrote += f" and {os.path.join(args.checkpoint_dir, CKPT_NAME)}"
    if result["diverged"]:
        d = result["diverged"]
        print(f"error: training diverged at step {d['step']}: loss is {d['loss']}; try a smaller --lr or "
              f"--skip-nonfinite; {wrote} (no checkpoint of the diverged model)", file=sys.stderr)
    elif result["signal"]:
        print(f"interrupted by {result['signal']} after step {result['steps']} of {result['steps_planned']}; "
              f"{wrote}", file=sys.stderr)
    else:
        keys = [k for k in ("test_accuracy", "val_bits_per_char", "unigram_entropy_bits", "final_train_loss",
                            "skipped_nonfinite_steps", "steps_per_s", "wall_time_s") if result.get(k)]
        print("  ".join(f"{k}={result[k]:.4g}" if isinstance(result[k], float) else f"{k}={result[k]}"
                        for k in keys))
        print(wrote)
    return _status(result)


def _status(result: dict) -> int:
    """The exit status: 0, 1 for a diverged run, 128 + signal number for an interrupted one (130, 143)."""
    if result["signal"]:
        return 128 + {v: k for k, v in SIGNALS.items()}[result["signal"]]
    return 1 if result["diverged"] else 0


if __name__ == "__main__":
    sys.exit(main())
