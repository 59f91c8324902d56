"""Seed-to-seed reproducibility of an ablation: noise floor per held-out set, rank agreement.

Every mixture is trained once per proxy seed on the same training set. The **noise floor** of a
held-out set is the pooled within-mixture standard deviation of its loss across seeds,
``sqrt(mean_i var_i)`` with ``var_i`` the unbiased variance over the seeds of mixture ``i`` (the
usual pooled estimate of a one-way layout; nats/token). Two mixtures' seed means differ
significantly when the gap exceeds ``z * floor * sqrt(2 / k)`` (``k`` seeds: the standard error of
a difference of two means of ``k`` runs). The **seed-to-seed Spearman** is the rank correlation of
the objective across mixtures between two seeds (mean over seed pairs when there are more).
"""
from __future__ import annotations

import itertools

import numpy as np


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    from scipy.stats import spearmanr

    if len(a) < 3 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return None  # undefined for fewer than 3 points or a constant vector
    return float(spearmanr(a, b).statistic)


def seed_statistics(losses: np.ndarray, obj_w: np.ndarray, set_names: list[str]) -> dict:
    """``losses`` [mixtures, seeds, sets] float64 (finite), ``obj_w`` [sets] (normalised here).

    Returns ``{"seeds": k, "floor": {set: sd} | None, "floor_objective": sd | None,
    "spearman": mean rho | None, "spearman_pairs": [rho, ...], "spearman_sets": {set: rho}}``;
    floors are None with one seed.
    """
    losses = np.asarray(losses, dtype=np.float64)
    n, k, m = losses.shape
    w = np.asarray(obj_w, dtype=np.float64) / float(np.sum(obj_w))
    obj = losses @ w  # [n, k]
    out = {"seeds": k, "floor": None, "floor_objective": None, "spearman": None, "spearman_pairs": [],
           "spearman_sets": {}}
    if k < 2:
        return out
    out["floor"] = {s: float(np.sqrt(np.mean(np.var(losses[:, :, j], axis=1, ddof=1))))
                    for j, s in enumerate(set_names)}
    out["floor_objective"] = float(np.sqrt(np.mean(np.var(obj, axis=1, ddof=1))))
    pairs = [_spearman(obj[:, a], obj[:, b]) for a, b in itertools.combinations(range(k), 2)]
    out["spearman_pairs"] = pairs
    good = [p for p in pairs if p is not None]
    out["spearman"] = float(np.mean(good)) if good else None
    for j, s in enumerate(set_names):
        per = [_spearman(losses[:, a, j], losses[:, b, j]) for a, b in itertools.combinations(range(k), 2)]
        per = [p for p in per if p is not None]
        out["spearman_sets"][s] = float(np.mean(per)) if per else None
    return out


def margin(floor: float | None, seeds: int, z: float) -> float | None:
    """Smallest significant gap between two mixtures' seed means: ``z * floor * sqrt(2 / seeds)``."""
    if floor is None or seeds < 2:
        return None
    return float(z * floor * np.sqrt(2.0 / seeds))
