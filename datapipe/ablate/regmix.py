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


def fit_and_recommend(x: np.ndarray, losses: np.ndarray, obj_w: np.ndarray, model: str = "linear",
                      samples: int = 100_000, top_k: int = 100, seed: int = 0,
                      min_spearman: float = 0.5) -> dict:
    """Fit per-set regressors on shares ``x`` [n, K] -> ``losses`` [n, m], objective = losses @ w
    (``obj_w`` [m], normalised here), and recommend a mixture inside the hull of the rows of ``x``.

    Returns ``weights`` [K] (sums to 1), ``predicted`` objective at it, ``fallback`` (True: the
    weights are the best tried row ``best_index``), ``reason``, ``loo_spearman`` / ``loo_mae``
    (objective; None below MIN_LOO mixtures), ``loo_mae_sets`` [m], ``loo_objective`` [n] and
    ``r2_train`` (objective, in-sample)."""
    x = np.asarray(x, dtype=np.float64)
    losses = np.asarray(losses, dtype=np.float64).reshape(len(x), -1)
    w = np.asarray(obj_w, dtype=np.float64) / float(np.sum(obj_w))
    y = losses @ w
    best = int(np.nanargmin(np.where(np.isfinite(y), y, np.nan))) if np.isfinite(y).any() else 0
    if not np.isfinite(losses).all():  # a diverged proxy: no regression on inf/NaN targets
        return {"best_index": best, "r2_train": None, "loo_spearman": None, "loo_mae": None,
                "loo_mae_sets": None, "loo_objective": None, "weights": x[best] / x[best].sum(),
                "predicted": float(y[best]), "fallback": True, "reason": "some held-out losses are not finite"}
    models = fit_sets(x, losses, model, seed)
    fit_y = predict_sets(models, x) @ w
    r2 = 1 - np.sum((y - fit_y) ** 2) / np.sum((y - y.mean()) ** 2) if np.ptp(y) > 0 else None
    out = {"best_index": best, "r2_train": None if r2 is None else float(r2), "loo_spearman": None,
           "loo_mae": None, "loo_mae_sets": None, "loo_objective": None}
    if len(x) >= MIN_LOO:
        loo = loo_predictions(x, losses, model, seed)
        out |= {"loo_spearman": _spearman(loo @ w, y), "loo_mae": float(np.mean(np.abs(loo @ w - y))),
                "loo_mae_sets": np.mean(np.abs(loo - losses), axis=0).tolist(), "loo_objective": (loo @ w).tolist()}
    rho = out["loo_spearman"]
    if rho is None or rho < min_spearman:
        why = (f"{len(x)} mixtures are too few to validate the fit (need {MIN_LOO})" if len(x) < MIN_LOO
               else f"leave-one-out Spearman {'undefined' if rho is None else f'{rho:.3f}'} < {min_spearman}")
        return out | {"weights": x[best] / x[best].sum(), "predicted": float(fit_y[best]), "fallback": True,
                      "reason": why}
    pts = hull_samples(x, samples, seed)
    pred = predict_sets(models, pts) @ w
    top = np.argsort(pred, kind="stable")[:min(top_k, len(pts))]
    rec = pts[top].mean(axis=0)  # a mean of hull points stays in the hull
    rec = rec / rec.sum()
    return out | {"weights": rec, "predicted": float(predict_sets(models, rec[None])[0] @ w), "fallback": False,
                  "reason": f"leave-one-out Spearman {rho:.3f} >= {min_spearman}"}
