"""Candidate mixtures: explicit lists, simplex grids and Dirichlet samples (RegMix style).

A mixture is a dict ``{domain: weight}`` over the ablation's domains, normalised to sum 1 and
rounded to 6 decimals, so the same weights always give the same ``mixture_id`` (resume key).
"""
from __future__ import annotations

import hashlib
import itertools
import json

import numpy as np

from datapipe.ablate.manifest import Mixtures


def normalise(weights: dict[str, float], domains: list[str]) -> dict[str, float]:
    """Weights over ``domains`` (missing = 0) scaled to sum 1, rounded to 1e-6.

    Raises ValueError for a domain not in ``domains`` or all-zero weights.
    """
    unknown = sorted(set(weights) - set(domains))
    if unknown:
        raise ValueError(f"mixture names unknown domain(s) {unknown}; the run has {domains}")
    total = float(sum(weights.get(d, 0.0) for d in domains))
    if total <= 0:
        raise ValueError(f"mixture {weights} has no positive weight")
    return {d: round(weights.get(d, 0.0) / total, 6) for d in domains}


def mixture_id(weights: dict[str, float]) -> str:
    """``mix-`` + 10 hex digits of sha256 over the sorted, rounded weights (stable across runs)."""
    blob = json.dumps({d: round(w, 6) for d, w in sorted(weights.items())}, sort_keys=True)
    return "mix-" + hashlib.sha256(blob.encode()).hexdigest()[:10]


def grid(domains: list[str], step: float) -> list[dict[str, float]]:
    """Every simplex point whose weights are multiples of ``step`` (1/step must be an integer).

    K domains and n = 1/step give C(n+K-1, K-1) points. Raises ValueError for a bad step.
    """
    n = round(1 / step)
    if abs(n * step - 1) > 1e-9:
        raise ValueError(f"mixtures.grid.step {step} must divide 1 (0.5, 0.25, 0.2, 0.1, ...)")
    out = []
    for combo in itertools.product(range(n + 1), repeat=len(domains)):
        if sum(combo) == n:
            out.append({d: c / n for d, c in zip(domains, combo)})
    return out


def dirichlet_alpha(prior: dict[str, float], domains: list[str], concentration: float,
                    min_weight: float) -> np.ndarray:
    """alpha [K] float64 = concentration * K * p, with p the prior floored at ``min_weight`` and
    renormalised (so a uniform prior with concentration 1 is the flat Dirichlet)."""
    p = np.array([max(prior.get(d, 0.0), 0.0) for d in domains], dtype=np.float64)
    p = p / p.sum() if p.sum() > 0 else np.full(len(domains), 1 / len(domains))
    p = np.maximum(p, min_weight)
    return concentration * len(domains) * p / p.sum()


def dirichlet(domains: list[str], alpha: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` x K float64 samples of Dirichlet(alpha) from ``numpy.random.default_rng(seed)``."""
    return np.random.default_rng(seed).dirichlet(alpha, size=n)


def candidates(spec: Mixtures, domains: list[str], natural: dict[str, float], seed: int) -> list[dict[str, float]]:
    """The manifest's candidate mixtures, normalised, duplicates removed, in a stable order
    (explicit, then grid, then Dirichlet). ``natural``: the run's token share per domain, the
    Dirichlet prior when none is given. Raises ValueError for unknown domains."""
    raw: list[dict[str, float]] = list(spec.explicit)
    if spec.grid is not None:
        raw += grid(domains, spec.grid.step)
    if spec.dirichlet is not None:
        d = spec.dirichlet
        alpha = dirichlet_alpha(d.prior or natural, domains, d.concentration, d.min_weight)
        raw += [dict(zip(domains, row)) for row in dirichlet(domains, alpha, d.n, seed).tolist()]
    out, seen = [], set()
    for w in raw:
        m = normalise(w, domains)
        key = mixture_id(m)
        if key not in seen:
            seen.add(key)
            out.append(m)
    return out
