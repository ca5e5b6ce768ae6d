"""Mixed precision: each reference model trained for the same steps at ``--precision`` f32, bf16 and f16 (final
loss and test accuracy / validation bits per char), and the planned arena of its jitted training step at each
precision. ``python -m benchmarks.mixed_precision [--steps mlp=300,cnn=100,transformer=40]`` writes
``benchmarks/mixed_precision.json`` and prints a markdown table (also written to ``mixed_precision.md``).

Every run is one ``python -m models.train`` process with the same seed, data order and schedule; on numpy the
bf16/f16 step is not faster (ml_dtypes' loops and float32 casts), so the steps/s column is only informative.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

PRECISIONS = ("f32", "bf16", "f16")
DEFAULT_STEPS = {"mlp": 300, "cnn": 100, "transformer": 40}
BATCH = {"transformer": 8}          # keeps the transformer runs short on a shared machine


def arena_bytes(name: str, batch_size: int | None = None) -> dict:
    """Planned arena bytes of the jitted training step of model ``name`` at each precision."""
    import flfun.numpy as fnp
    import flfun.random as fr
    from models import precision as mixed
    from models import train
    from models.tasks import make_task
    task = make_task(name, 0)
    d = task.defaults
    model = task.init(fr.key(0))
    opt = train.make_optimizer(100, d["lr"], d["weight_decay"], d["warmup"])
    x, y = task.batch(0, batch_size or d["batch_size"])
    out = {}
    for p in PRECISIONS:
        step = train.make_step(task.loss_fn, opt, True, False, p)
        out[p] = step.lower(model, mixed.init_state(opt, model, p), fnp.asarray(x), fnp.asarray(y)).plan.arena_bytes
    return out


def train_run(name: str, precision: str, steps: int) -> dict:
    """The metrics of one training run (a subprocess)."""
    with tempfile.TemporaryDirectory() as out:
        cmd = [sys.executable, "-m", "models.train", name, "--precision", precision, "--steps", str(steps),
               "--no-progress", "--time-limit", "36000", "--out", out]
        if name in BATCH:
            cmd += ["--batch-size", str(BATCH[name])]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(os.path.join(out, "metrics.json")) as f:
            return json.load(f)


def table(results: dict) -> str:
    rows = ["| model | precision | steps | final train loss | test accuracy / val bits per char | arena (MiB) | "
            "arena vs f32 | steps/s | f16 loss scale (skipped steps) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, r in results.items():
        for p in PRECISIONS:
            m, arena = r["runs"][p], r["arena"][p]
            quality = m.get("val_bits_per_char") or m.get("test_accuracy")
            scale = f"{m['loss_scale']:.0f} ({m['loss_scale_skipped_steps']})" if p == "f16" else ""
            rows.append(f"| {name} | {p} | {m['steps']} | {m['final_train_loss']:.4f} | {quality:.4f} | "
                        f"{arena / 2**20:.2f} | {arena / r['arena']['f32']:.2f}x | {m['steps_per_s']} | {scale} |")
    return "\n".join(rows)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(prog="python -m benchmarks.mixed_precision")
    p.add_argument("--steps", default=",".join(f"{k}={v}" for k, v in DEFAULT_STEPS.items()),
                   help="model=steps pairs, comma separated (default %(default)s)")
    args = p.parse_args(argv)
    steps = {k: int(v) for k, v in (kv.split("=") for kv in args.steps.split(","))}
    here = os.path.dirname(os.path.abspath(__file__))
    saved = os.path.join(here, "mixed_precision.json")
    results = {}
    if os.path.exists(saved):          # models not rerun keep their rows
        with open(saved) as f:
            results = json.load(f)
    for name, n in steps.items():
        results[name] = {"arena": arena_bytes(name, BATCH.get(name)),
                         "runs": {prec: train_run(name, prec, n) for prec in PRECISIONS}}
        print(f"{name}: done", file=sys.stderr)
    with open(saved, "w") as f:
        json.dump(results, f, indent=1)
    md = table(results)
    with open(os.path.join(here, "mixed_precision.md"), "w") as f:
        f.write(f"# Mixed precision (python -m benchmarks.mixed_precision; steps per model in the table)\n\n{md}\n")
    print(md)


if __name__ == "__main__":
    main()
