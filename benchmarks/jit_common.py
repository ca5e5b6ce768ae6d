"""Helpers for the jit benchmarks (W3, W4, W7): run peers like ``harness.run_workload`` but keep the extra
figures a peer reports (first-call time, plan totals, memory analyses) beside its timings."""
from __future__ import annotations

from benchmarks.harness import available, run_peer


def run_rows(module: str, peers: list[tuple[str, str | None]], baseline: str) -> tuple[list[dict], dict]:
    """Rows for ``harness.markdown_table`` (ratios to ``baseline``) and ``{peer: extra fields}``."""
    rows, extras = [], {}
    for peer, needs in peers:
        if needs and not available(needs):
            rows.append({"peer": peer, "note": f"skipped: {needs} not installed"})
            continue
        res = run_peer(module, peer)
        if res is None:
            rows.append({"peer": peer, "note": "failed (see stderr)"})
            continue
        extras[peer] = {k: v for k, v in res.items() if k != "variants"}
        for variant, t in res.get("variants", {}).items():
            rows.append({"peer": peer, "variant": variant, **t, "check": res.get("check")})
    base = next((r for r in rows if f"{r.get('peer')}/{r.get('variant')}" == baseline), None)
    for r in rows:
        if base and "median" in r:
            r["ratio"] = r["median"] / base["median"]
    return rows, extras
