"""The op table: one record per primitive (or per way of calling it) drives every generic test in
``test_op_table.py`` — forward vs numpy in float64, jvp vs finite differences, the vjp/jvp dot-product identity,
vmap vs a Python loop and jit vs eager. Families add their records in ``records_<family>.py``."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
from hypothesis import strategies as st

from flfun.testing import arrays, broadcastable_shapes, shapes

FLOATS = ("float32", "float64")
INTS = ("int32", "int64")
COMPLEX = ("complex64", "complex128")
ALL = FLOATS + INTS + ("uint8", "bool")


@dataclass
class OpRecord:
    """``fn(*arrays, **params)`` under test, ``ref(*numpy_arrays, **params)`` its numpy reference (float inputs
    are upcast to float64 for it), ``args(dtype)`` a strategy drawing ``(arrays, params)``."""
    prim: str
    fn: Callable
    ref: Callable
    args: Callable[[str], st.SearchStrategy]
    dtypes: tuple = FLOATS
    diff: bool = True              # differentiable in its float arguments
    atol: float = 1e-5             # forward tolerance at float32 (float64 uses 1e-10-ish automatically)
    rtol: float = 1e-5
    grad_atol: float = 1e-5        # jvp / vjp tolerance (checked in float64)
    name: str = ""
    vmap: bool = True
    keeps_dtype: bool = True       # float32 inputs give float32 outputs
    smooth_args: Callable | None = None   # args for derivative tests, away from kinks (default: args)

    def diff_args(self, dtype):
        return (self.smooth_args or self.args)(dtype)

    def __post_init__(self):
        self.name = self.name or self.prim

    def __repr__(self):
        return self.name


# ---------------------------------------------------------------------------------------------- arg strategies
def unary(low=-3.0, high=3.0, max_dims=3):
    def strat(dtype):
        return arrays(dtype, shapes(max_dims=max_dims), low=low, high=high).map(lambda a: ((a,), {}))
    return strat


def binary(low=-3.0, high=3.0, low2=None, high2=None):
    def strat(dtype):
        @st.composite
        def draw(draw):
            s1, s2, _ = draw(broadcastable_shapes(2))
            a = draw(arrays(dtype, s1, low=low, high=high))
            b = draw(arrays(dtype, s2, low=low if low2 is None else low2, high=high if high2 is None else high2))
            return (a, b), {}
        return draw()
    return strat


def nary(n, low=-3.0, high=3.0, first_dtype=None):
    """``n`` mutually broadcastable arrays (the first of ``first_dtype`` if given)."""
    def strat(dtype):
        @st.composite
        def draw(draw):
            *ss, _ = draw(broadcastable_shapes(n))
            arrs = [draw(arrays(first_dtype if (i == 0 and first_dtype) else dtype, s, low=low, high=high))
                    for i, s in enumerate(ss)]
            return tuple(arrs), {}
        return draw()
    return strat


def away_from_kinks(strategy_fn, min_gap=1e-2):
    """Filter drawn args so that no two broadcast operands (or an operand and zero, for one operand) are
    within ``min_gap``: finite differences are meaningless at kinks such as ``abs(0)`` or ``max(x, x)``."""
    def strat(dtype):
        def ok(drawn):
            arrs = drawn[0]
            if len(arrs) == 1:
                return bool(np.all(np.abs(arrs[0]) > min_gap))
            return bool(np.all(np.abs(arrs[0] - arrs[1]) > min_gap))
        return strategy_fn(dtype).filter(ok)
    return strat


def gather_records() -> list[OpRecord]:
    import importlib
    out = []
    for fam in ("elementwise", "reduce", "shape", "indexing", "linalg", "decomp", "collective", "random", "fft"):
        try:
            mod = importlib.import_module(f"records_{fam}")
        except ModuleNotFoundError as e:
            if e.name != f"records_{fam}":
                raise
            continue
        out.extend(mod.RECORDS)
    return out


RECORDS: list[OpRecord] = gather_records()
field = field
