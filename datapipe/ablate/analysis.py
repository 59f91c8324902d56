"""Results table, ranking, loss-vs-weight plot, and the RegMix-style regression.

RegMix (Liu et al. 2024, "RegMix: Data Mixture as Regression for Language Model Pre-training",
arXiv:2407.01492): fit a regressor from mixture weights to the proxies' validation loss, predict
the loss of many mixtures sampled from the same simplex region, and take the mean of the top-k
predicted mixtures as the recommendation. Here the features are the *achieved* token shares of each
training set and the target is the ranking objective.
"""
from __future__ import annotations

import base64
import html
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import yaml


def objective(rec: dict, eval_names: list[str], weights: dict[str, float]) -> float:
    """Weighted mean of held-out losses (nats/token); empty ``weights`` = plain mean over ``eval_names``.

    Raises ValueError when ``weights`` names an eval set that does not exist.
    """
    unknown = sorted(set(weights) - set(eval_names))
    if unknown:
        raise ValueError(f"analysis.objective names unknown eval set(s) {unknown}; known: {eval_names}")
    w = weights or {n: 1.0 for n in eval_names}
    total = sum(w.values())
    return sum(rec["eval"][n]["loss"] * v for n, v in w.items()) / total


def results_table(records: list[dict], domains: list[str], eval_names: list[str], obj: dict) -> pa.Table:
    """One row per mixture: ``mixture_id``, ``w_<d>`` (target), ``share_<d>`` (achieved), ``epochs_<d>``,
    ``loss_<set>``, ``ppl_<set>``, ``objective``, ``tokens_trained``, ``steps``, ``params``, ``train_loss``,
    ``device``, ``wall_s``, ``resumed``."""
    cols: dict[str, list] = {"mixture_id": [r["mixture_id"] for r in records]}
    for d in domains:
        cols[f"w_{d}"] = [float(r["weights"].get(d, 0.0)) for r in records]
        cols[f"share_{d}"] = [float(r["achieved"].get(d, 0.0)) for r in records]
        cols[f"epochs_{d}"] = [float(r["epochs"].get(d, 0.0)) for r in records]
    for n in eval_names:
        cols[f"loss_{n}"] = [float(r["eval"][n]["loss"]) for r in records]
        cols[f"ppl_{n}"] = [float(r["eval"][n]["ppl"]) for r in records]
    cols["objective"] = [objective(r, eval_names, obj) for r in records]
    for k, typ in (("tokens_trained", pa.int64()), ("steps", pa.int64()), ("params", pa.int64()),
                   ("train_loss", pa.float64()), ("wall_s", pa.float64())):
        cols[k] = pa.array([r.get(k) for r in records], typ)
    cols["device"] = [str(r.get("device")) for r in records]
    cols["resumed"] = [bool(r.get("resumed")) for r in records]
    return pa.table(cols)


def fit_and_recommend(x: np.ndarray, y: np.ndarray, alpha: np.ndarray, model: str, samples: int, top_k: int,
                      seed: int) -> dict:
    """Fit ``model`` (``linear``: sklearn Ridge; ``gbm``: GradientBoostingRegressor) on shares
    ``x`` [n, K] -> objective ``y`` [n]; predict ``samples`` Dirichlet(``alpha``) points; return
    ``{"weights" [K], "predicted", "r2_train", "loo_spearman" (n >= 5, else None)}``."""
    from scipy.stats import spearmanr
    from sklearn.ensemble import GradientBoostingRegressor
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import LeaveOneOut, cross_val_predict

    def make():
        if model == "gbm":
            return GradientBoostingRegressor(n_estimators=200, max_depth=2, learning_rate=0.05, random_state=seed)
        return Ridge(alpha=1e-4)  # tiny penalty: the shares sum to 1, so plain OLS is singular

    est = make().fit(x, y)
    pts = np.random.default_rng([seed, 0x4E6]).dirichlet(alpha, size=samples)
    pred = est.predict(pts)
    top = np.argsort(pred, kind="stable")[:min(top_k, samples)]
    best = pts[top].mean(axis=0)
    loo = None
    if len(y) >= 5:
        cv = cross_val_predict(make(), x, y, cv=LeaveOneOut())
        loo = float(spearmanr(cv, y).statistic)
    return {"weights": best / best.sum(), "predicted": float(est.predict(best[None])[0]),
            "r2_train": float(est.score(x, y)) if len(y) > 1 else None, "loo_spearman": loo}


def plot_loss_vs_weight(table: pa.Table, domains: list[str], eval_names: list[str], path: Path) -> None:
    """One panel per domain: x = its achieved share, y = loss on its own held-out set (when it has
    one) and the objective. Saved as PNG (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(domains), figsize=(4 * len(domains), 3.4), squeeze=False)
    for ax, d in zip(axes[0], domains):
        x = table.column(f"share_{d}").to_numpy()
        if d in eval_names:
            ax.scatter(x, table.column(f"loss_{d}").to_numpy(), label=f"loss on {d} held-out", marker="o")
        ax.scatter(x, table.column("objective").to_numpy(), label="objective", marker="x")
        ax.set_xlabel(f"share of {d} in training tokens")
        ax.set_ylabel("loss (nats/token)")
        ax.set_title(d)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def mix_block(weights: dict[str, float], run_index: dict) -> str:
    """A ``mix:`` section for the main manifest: the run's own rules/settings with these weights."""
    base = dict((run_index.get("config") or {}).get("mix") or {})
    base["weights"] = {d: round(float(w), 4) for d, w in weights.items() if round(float(w), 4) > 0}
    keep = ["rules", "default_domain", "weights", "total_tokens", "max_epochs", "fill_budget", "seed"]
    return yaml.safe_dump({"mix": {k: base[k] for k in keep if k in base}}, sort_keys=False)


def _markdown(table: pa.Table, domains: list[str], eval_names: list[str]) -> str:
    rows = sorted(table.to_pylist(), key=lambda r: r["objective"])
    head = ["rank", "mixture", *[f"w {d}" for d in domains], "objective", *[f"loss {n}" for n in eval_names], "s"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for i, r in enumerate(rows, 1):
        cells = [str(i), r["mixture_id"], *[f"{r[f'share_{d}']:.3f}" for d in domains], f"{r['objective']:.4f}",
                 *[f"{r[f'loss_{n}']:.4f}" for n in eval_names], f"{r['wall_s'] or 0:.1f}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def analyse(records: list[dict], domains: list[str], eval_names: list[str], m, run_index: dict, out: Path) -> dict:
    """Write results.parquet/.csv, ranking.md, loss_vs_weight.png, recommended_mix.yaml and report.html
    under ``out``; return ``{"best": {...}, "recommended": {...}, "ranking_md", paths}``."""
    from datapipe.ablate.mixtures import dirichlet_alpha

    table = results_table(records, domains, eval_names, m.analysis.objective)
    pq.write_table(table, out / "results.parquet")
    pacsv.write_csv(table, out / "results.csv")
    md = _markdown(table, domains, eval_names)
    (out / "ranking.md").write_text(md)
    png = out / "loss_vs_weight.png"
    plot_loss_vs_weight(table, domains, eval_names, png)
    best_row = min(table.to_pylist(), key=lambda r: r["objective"])
    x = np.array([[r[f"share_{d}"] for d in domains] for r in table.to_pylist()])
    y = table.column("objective").to_numpy()
    d = m.mixtures.dirichlet
    if d is not None:  # RegMix: search the region the mixtures were sampled from
        prior = d.prior or {k: float(v) for k, v in zip(domains, x.mean(axis=0))}
        alpha = dirichlet_alpha(prior, domains, d.concentration, d.min_weight)
    else:
        alpha = dirichlet_alpha(dict(zip(domains, x.mean(axis=0))), domains, 1.0, 0.02)
    reg = fit_and_recommend(x, y, alpha, m.analysis.model, m.analysis.samples, m.analysis.top_k, m.seed)
    rec_w = {dom: float(w) for dom, w in zip(domains, reg["weights"])}
    note = ("# Recommended by `datapipe ablate` (RegMix-style regression, Liu et al. 2024) from "
            f"{len(records)} proxy runs; predicted objective {reg['predicted']:.4f} "
            f"(best measured {best_row['objective']:.4f}, {best_row['mixture_id']}).\n")
    if len(records) <= len(domains):
        note += f"# Caution: {len(records)} mixtures for {len(domains)} domains underdetermine the regression.\n"
    block = note + mix_block(rec_w, run_index)
    (out / "recommended_mix.yaml").write_text(block)
    img = base64.b64encode(png.read_bytes()).decode()
    (out / "report.html").write_text(
        f"<html><head><meta charset='utf-8'><title>ablation {html.escape(m.name)}</title></head><body>"
        f"<h1>Ablation {html.escape(m.name)}</h1><pre>{html.escape(md)}</pre>"
        f"<img src='data:image/png;base64,{img}' alt='loss vs domain weight'>"
        f"<h2>Recommended mix</h2><pre>{html.escape(block)}</pre></body></html>")
    return {"best": {"mixture_id": best_row["mixture_id"], "objective": best_row["objective"],
                     "shares": {dom: best_row[f"share_{dom}"] for dom in domains}},
            "recommended": {"weights": rec_w, "predicted_objective": reg["predicted"],
                            "r2_train": reg["r2_train"], "loo_spearman": reg["loo_spearman"]},
            "ranking_md": md, "mix_block": block, "files": [str(out / f) for f in (
                "results.parquet", "results.csv", "ranking.md", "loss_vs_weight.png", "recommended_mix.yaml",
                "report.html")], "finite": all(math.isfinite(v) for v in y)}
