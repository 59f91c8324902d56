"""RegMix-style mixture regression: per-held-out-set loss models, leave-one-out check, hull search.

RegMix (Liu et al. 2024, "RegMix: Data Mixture as Regression for Language Model Pre-training",
arXiv:2407.01492) fits a regressor from mixture weights to validation loss on small proxy runs,
predicts many candidate mixtures and averages the top-k predicted ones. As in the paper, one
regressor is fitted per held-out set (its loss is the target) and the objective is the weighted
sum of the predicted losses. Two choices differ from a plain linear fit on the weights:

* features are ``[share_d, log(share_d + EPS)]`` per domain: a held-out set's loss blows up as
  its domain's share nears 0 (data-mixing laws, Ye et al. 2024, use the same log/exponential
  shape), which a model linear in the shares cannot follow;
* candidates are convex combinations of the mixtures actually tried, so the recommendation never
  leaves their convex hull (no extrapolation), and when the leave-one-out Spearman correlation of
  predicted vs measured objective is below a threshold the best tried mixture is returned instead.

The features are FIXED (frozen on 2026-12-01) and are not chosen per ablation: the
log/linear form comes from the data-mixing-law literature, not from a search over feature sets
on the mixtures being judged. They were first tried on one 10-mixture GPU run, so that run's
leave-one-out figure is in-sample for the choice; every later ablation checks them out of sample
twice: leave-one-out over the fitted mixtures and a set of held-out mixtures (``holdout_mask``,
``analysis.holdout_mixtures``) never used for fitting. Changing ``features`` needs new
held-out mixtures to be judged fairly.
"""
from __future__ import annotations

import numpy as np

EPS = 1e-3  # share floor inside the log: a domain at share 0 is "1e-3 worth" of it
MIN_LOO = 5  # fewer mixtures than this: no leave-one-out check, so no regression recommendation


def features(x: np.ndarray) -> np.ndarray:
    """[n, K] shares -> [n, 2K] features ``[x, log(x + EPS)]``."""
    x = np.clip(np.asarray(x, dtype=np.float64), 0.0, None)
    return np.hstack([x, np.log(x + EPS)])


def _make(model: str, seed: int):
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import Ridge

    if model == "gbm":
        return GradientBoostingRegressor(n_estimators=200, max_depth=2, learning_rate=0.05, random_state=seed)
    return Ridge(alpha=1e-4)  # tiny penalty: the shares sum to 1, so plain OLS is singular


def fit_sets(x: np.ndarray, losses: np.ndarray, model: str, seed: int) -> list:
    """One fitted regressor per held-out set (column of ``losses`` [n, m]) on ``features(x)``."""
    f = features(x)
    return [_make(model, seed).fit(f, losses[:, j]) for j in range(losses.shape[1])]


def predict_sets(models: list, x: np.ndarray) -> np.ndarray:
    """[n, K] shares -> [n, m] predicted loss per held-out set."""
    f = features(x)
    return np.column_stack([est.predict(f) for est in models])


def loo_predictions(x: np.ndarray, losses: np.ndarray, model: str, seed: int) -> np.ndarray:
    """[n, m] leave-one-out predictions: row i from models fitted without mixture i."""
    out = np.empty_like(losses, dtype=np.float64)
    for i in range(len(x)):
        keep = np.arange(len(x)) != i
        out[i] = predict_sets(fit_sets(x[keep], losses[keep], model, seed), x[i:i + 1])[0]
    return out


def hull_samples(x: np.ndarray, samples: int, seed: int) -> np.ndarray:
    """``samples`` random points of the convex hull of the rows of ``x`` [n, K], plus the rows.

    Each point mixes K rows drawn with replacement under flat Dirichlet weights (Caratheodory: K
    rows suffice to reach any point of a hull in a (K-1)-dimensional simplex)."""
    rng = np.random.default_rng([seed, 0x4E6])
    k = x.shape[1]
    idx = rng.integers(0, len(x), size=(samples, k))
    lam = rng.dirichlet(np.ones(k), size=samples)
    pts = np.einsum("sj,sjk->sk", lam, x[idx])
    return np.vstack([x, pts])


def _spearman(a: np.ndarray, b: np.ndarray) -> float | None:
    from scipy.stats import spearmanr

    if np.ptp(a) == 0 or np.ptp(b) == 0:
        return None  # undefined for a constant vector
    return float(spearmanr(a, b).statistic)


def holdout_mask(ids: list[str], fraction: float, seed: int) -> np.ndarray:
    """bool [n]: the mixtures set aside from fitting -- the ``floor(fraction * n)`` ids with the
    smallest sha256 of ``"<seed>:<id>"`` (so the choice does not depend on their order), none when
    fewer than ``MIN_LOO`` would be left to fit."""
    import hashlib

    n_hold = int(np.floor(fraction * len(ids)))
    if n_hold < 1 or len(ids) - n_hold < MIN_LOO:
        return np.zeros(len(ids), dtype=bool)
    h = [hashlib.sha256(f"{seed}:{i}".encode()).hexdigest() for i in ids]
    chosen = set(sorted(range(len(ids)), key=lambda i: (h[i], ids[i]))[:n_hold])
    return np.array([i in chosen for i in range(len(ids))])


def fit_and_recommend(x: np.ndarray, losses: np.ndarray, obj_w: np.ndarray, model: str = "linear",
                      samples: int = 100_000, top_k: int = 100, seed: int = 0,
                      min_spearman: float = 0.5, holdout: np.ndarray | None = None) -> dict:
    """Fit per-set regressors on shares ``x`` [n, K] -> ``losses`` [n, m], objective = losses @ w
    (``obj_w`` [m], normalised here), and recommend a mixture inside the hull of the rows of ``x``.

    ``holdout`` (bool [n]): mixtures never used for fitting; the model is fitted on the others
    and scored on them out of sample. The fit is trusted when the leave-one-out Spearman over the
    fitted mixtures is >= ``min_spearman`` and, with two or more held-out mixtures, the held-out
    MAE is below that of predicting the fitted mixtures' mean objective (out-of-sample R^2 > 0).

    Returns ``weights`` [K] (sums to 1), ``predicted`` objective at it, ``fallback`` (True: the
    weights are the best tried row ``best_index``), ``reason``, ``loo_spearman`` / ``loo_mae``
    (objective over the fitted rows; None below MIN_LOO), ``loo_mae_sets`` [m], ``loo_objective``
    [n] (None for held-out rows), ``holdout`` {``n``, ``mae``, ``baseline_mae``, ``spearman``,
    ``predicted`` [n] (None for fitted rows)} and ``r2_train`` (objective, in-sample).
    Raises ValueError for non-finite losses (``checks.check_losses`` names the mixture first).
    """
    x = np.asarray(x, dtype=np.float64)
    losses = np.asarray(losses, dtype=np.float64).reshape(len(x), -1)
    if not np.isfinite(losses).all():
        raise ValueError("regression on non-finite held-out losses")
    w = np.asarray(obj_w, dtype=np.float64) / float(np.sum(obj_w))
    y = losses @ w
    best = int(np.argmin(y))  # rows come in a canonical order (analysis sorts by mixture_id)
    hold = np.zeros(len(x), dtype=bool) if holdout is None else np.asarray(holdout, dtype=bool)
    fit = ~hold
    xf, lf, yf = x[fit], losses[fit], y[fit]
    models = fit_sets(xf, lf, model, seed)
    fit_y = predict_sets(models, xf) @ w
    r2 = 1 - np.sum((yf - fit_y) ** 2) / np.sum((yf - yf.mean()) ** 2) if np.ptp(yf) > 0 else None
    out = {"best_index": best, "r2_train": None if r2 is None else float(r2), "loo_spearman": None,
           "loo_mae": None, "loo_mae_sets": None, "loo_objective": None,
           "holdout": {"n": int(hold.sum()), "mae": None, "baseline_mae": None, "spearman": None,
                       "predicted": None}}
    if fit.sum() >= MIN_LOO:
        loo = loo_predictions(xf, lf, model, seed)
        full = np.full(len(x), np.nan)
        full[fit] = loo @ w
        out |= {"loo_spearman": _spearman(loo @ w, yf), "loo_mae": float(np.mean(np.abs(loo @ w - yf))),
                "loo_mae_sets": np.mean(np.abs(loo - lf), axis=0).tolist(),
                "loo_objective": [None if np.isnan(v) else float(v) for v in full]}
    ok_hold, why_hold = True, ""
    if hold.any():
        ph = predict_sets(models, x[hold]) @ w
        pred = np.full(len(x), np.nan)
        pred[hold] = ph
        mae, base = float(np.mean(np.abs(ph - y[hold]))), float(np.mean(np.abs(yf.mean() - y[hold])))
        out["holdout"] |= {"mae": mae, "baseline_mae": base, "spearman": _spearman(ph, y[hold]) if hold.sum() >= 3
                           else None, "predicted": [None if np.isnan(v) else float(v) for v in pred]}
        if hold.sum() >= 2 and mae >= base:
            ok_hold, why_hold = False, (f"on {int(hold.sum())} held-out mixtures the fit's MAE {mae:.4f} is not "
                                        f"below predicting the mean ({base:.4f})")
    rho = out["loo_spearman"]
    if rho is None or rho < min_spearman or not ok_hold:
        if fit.sum() < MIN_LOO:
            why = f"{int(fit.sum())} fitted mixtures are too few to validate the fit (need {MIN_LOO})"
        elif rho is None or rho < min_spearman:
            why = f"leave-one-out Spearman {'undefined' if rho is None else f'{rho:.3f}'} < {min_spearman}"
        else:
            why = why_hold
        at_best = float(predict_sets(models, x[best:best + 1])[0] @ w)
        return out | {"weights": x[best] / x[best].sum(), "predicted": at_best, "fallback": True, "reason": why}
    pts = hull_samples(x, samples, seed)
    pred = predict_sets(models, pts) @ w
    top = np.argsort(pred, kind="stable")[:min(top_k, len(pts))]
    rec = pts[top].mean(axis=0)  # a mean of hull points stays in the hull
    rec = rec / rec.sum()
    held = (f"; held-out MAE {out['holdout']['mae']:.4f} < mean-prediction {out['holdout']['baseline_mae']:.4f}"
            if hold.sum() >= 2 else "")
    return out | {"weights": rec, "predicted": float(predict_sets(models, rec[None])[0] @ w), "fallback": False,
                  "reason": f"leave-one-out Spearman {rho:.3f} >= {min_spearman}{held}"}
