"""What a training run leaves behind, whatever ends it: a stop flag raised by SIGINT/SIGTERM (honoured at the
end of the current step), output folders checked before training, ``metrics.json`` that is always valid JSON,
the loss plot and the profile.
"""
from __future__ import annotations

import json
import math
import os
import signal
import threading

import numpy as np

SIGNALS = {signal.SIGINT: "SIGINT", signal.SIGTERM: "SIGTERM"}


class StopFlag:
    """While entered (in the main thread), SIGINT and SIGTERM set ``self.signum`` instead of interrupting; the
    training loop checks it after each step. A second signal exits at once with status 128 + signal number.

    Example::

        with StopFlag() as stop:
            while not stop.signum:
                train_one_step()
    """

    def __init__(self):
        self.signum = 0
        self._previous: dict = {}

    def _handle(self, signum, frame):
        if self.signum:
            raise SystemExit(128 + signum)
        self.signum = signum

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in SIGNALS}
        return self

    def __exit__(self, *exc):
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous = {}
        return False

    @property
    def exit_code(self) -> int:
        """The shell's status for death by this signal: 130 for SIGINT, 143 for SIGTERM."""
        return 128 + self.signum


def folder_problem(flag: str, path: str) -> str | None:
    """Why ``path`` cannot be (or become) a writable folder for ``flag``, or ``None`` if it can.

    Example::

        >>> folder_problem("--out", "/etc/passwd")
        "--out: '/etc/passwd' is a file, not a folder"
    """
    probe = os.path.abspath(path)
    if os.path.exists(probe) and not os.path.isdir(probe):
        return f"{flag}: {path!r} is a file, not a folder"
    while not os.path.exists(probe):
        probe = os.path.dirname(probe)
    if not os.path.isdir(probe):
        return f"{flag}: cannot create {path!r}: {probe!r} is a file, not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        return f"{flag}: cannot write to {path!r}: {probe!r} is not writable"
    return None


def json_safe(value):
    """``value`` with every non-finite float replaced by ``None``, so that ``json.dump`` writes valid JSON.

    Example::

        >>> json_safe({"loss": float("nan"), "xs": [1.0, float("inf")]})
        {'loss': None, 'xs': [1.0, None]}
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def write_json(path: str, value) -> None:
    """Write ``value`` (made JSON-safe) to ``path`` atomically: readers see the old file or the new one."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        json.dump(json_safe(value), f, indent=2, allow_nan=False)
    os.replace(tmp, path)


def plot_losses(losses: list, path: str, title: str) -> None:
    """Training loss per step (and a moving average) as a PNG; missing (``None``) losses are gaps."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    y = np.asarray([np.nan if v is None else v for v in losses], dtype=np.float64)
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


def write_profile(prof, out: str) -> None:
    """The profiler's table to ``profile.txt`` (and the console) and its Chrome trace to ``trace.json``."""
    with open(os.path.join(out, "profile.txt"), "w") as f:
        f.write(prof.table())
    prof.export_chrome_trace(os.path.join(out, "trace.json"))
    try:
        from tqdm import tqdm
        tqdm.write(prof.table(limit=15))
    except ImportError:
        print(prof.table(limit=15))


__all__ = ["StopFlag", "folder_problem", "json_safe", "write_json", "plot_losses", "write_profile"]
