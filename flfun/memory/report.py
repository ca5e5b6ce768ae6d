"""How the memory modules show numbers: byte sizes as text, figures saved as PNG files."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def figure(path: str, dpi: int, **subplots):
    """``(pyplot, axes)`` of a new matplotlib figure (Agg), saved to ``path`` as a PNG when the block ends.

    Example::

        with figure("out.png", 100, figsize=(6, 3)) as (plt, ax):
            ax.plot([1, 2, 3])
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(**subplots)
    yield plt, axes
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)


def format_bytes(n: float) -> str:
    """``n`` bytes in B, KiB, MiB or GiB: ``format_bytes(3 << 20) == '3.00 MiB'``."""
    for unit in ("B", "KiB", "MiB"):
        if abs(n) < 1024:
            return f"{n:.0f} B" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024
    return f"{n:.2f} GiB"
