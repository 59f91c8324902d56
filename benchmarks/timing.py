"""Repetition and summary of timings, shared by the benchmark scripts (stdlib only: the datatrove
peer imports it from its own virtualenv).

Each figure is ``reps`` timed runs after ``warmup`` untimed ones (models loaded, caches warm);
the rate reported is items / median(seconds), with the slowest and fastest run as the spread.
"""
from __future__ import annotations

import gc
import statistics
import time


def repeat(fn, reps: int = 3, warmup: int = 1) -> list[float]:
    """Seconds of each of ``reps`` calls of ``fn()`` after ``warmup`` untimed calls."""
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        gc.collect()  # a collection left over from the previous run must not land in this one
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def interleave(fns: dict, reps: int = 3, warmup: int = 1) -> dict[str, list[float]]:
    """Like ``repeat`` for several functions taken in turn (A B C A B C ...): on a shared, noisy
    machine the figures that are compared see the same load, so their ratio is steadier."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    out: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(reps):
        for k, fn in fns.items():
            out[k] += repeat(fn, 1, 0)
    return out


def summarize(seconds: list[float], items: int, unit: str = "records/s") -> dict:
    """Rate at the median run, the range of rates over runs, and the spread in % of the median."""
    med = statistics.median(seconds)
    rate = items / med
    lo, hi = items / max(seconds), items / min(seconds)
    return {"value": round(rate, 2), "unit": unit, "min": round(lo, 2), "max": round(hi, 2),
            "spread_pct": round(100 * (hi - lo) / rate, 1), "reps": len(seconds), "items": items,
            "seconds": [round(s, 4) for s in seconds]}
