"""The hand-run soak check (benchmarks/soak.py) in miniature: one small batch of random op-table programs through
eager/jit/grad/vmap from two threads agrees with the single-threaded results, and a wrong result is reported."""
from __future__ import annotations

import pytest

from benchmarks import soak


def test_a_small_soak_batch_passes(capsys):
    assert soak.main(["--cases", "12", "--threads", "2", "--seed", "3"]) == 0
    assert "12 programs" in capsys.readouterr().out


def test_a_wrong_result_is_a_failure(monkeypatch, capsys):
    real = soak.reference

    def skewed(ops):               # the single-threaded answer is off by one: every worker must disagree
        ref = real(ops)
        ref["eager"] = [o + 1 if o.dtype.kind in "fiu" else ~o for o in ref["eager"]]
        return ref
    monkeypatch.setattr(soak, "reference", skewed)
    assert soak.main(["--cases", "3", "--threads", "2", "--seed", "3"]) == 1
    assert "FAIL" in capsys.readouterr().out
