"""Results table, ranking, loss-vs-weight plot, and the report of the RegMix-style regression.

The regression itself (RegMix: Liu et al. 2024, arXiv:2407.01492; per-held-out-set loss models on
log-share features, leave-one-out check, search inside the convex hull of the tried mixtures, and
the fallback to the best tried mixture when the fit is poor) lives in ``datapipe.ablate.regmix``.
"""
from __future__ import annotations

import base64
import html
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


def _markdown(table: pa.Table, domains: list[str], eval_names: list[str], loo: list[float] | None) -> str:
    """Ranking by measured objective; ``loo``: leave-one-out predicted objective per table row."""
    rows = table.to_pylist()
    order = sorted(range(len(rows)), key=lambda i: rows[i]["objective"])
    head = ["rank", "mixture", *[f"w {d}" for d in domains], "objective", *(["LOO pred"] if loo else []),
            *[f"loss {n}" for n in eval_names], "s"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for rank, i in enumerate(order, 1):
        r = rows[i]
        cells = [str(rank), r["mixture_id"], *[f"{r[f'share_{d}']:.3f}" for d in domains], f"{r['objective']:.4f}",
                 *([f"{loo[i]:.4f}"] if loo else []), *[f"{r[f'loss_{n}']:.4f}" for n in eval_names],
                 f"{r['wall_s'] or 0:.1f}"]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out) + "\n"


def _fit_lines(reg: dict, n: int, model: str, eval_names: list[str]) -> list[str]:
    """Plain-text lines describing the fit and its leave-one-out error (for the report and the yaml)."""
    from datapipe.ablate.regmix import EPS

    kind = "gradient boosting" if model == "gbm" else "ridge"
    lines = [f"Fit: {kind} on [share, log(share + {EPS:g})] per domain, one model per held-out set; "
             f"objective = weighted sum of the predicted losses (RegMix, Liu et al. 2024)."]
    if reg["loo_spearman"] is None and reg["loo_mae"] is None:
        lines.append(f"Leave-one-out error: not computed ({n} mixtures).")
    else:
        rho = "undefined" if reg["loo_spearman"] is None else f"{reg['loo_spearman']:.3f}"
        per = ", ".join(f"{s} {e:.3f}" for s, e in zip(eval_names, reg["loo_mae_sets"]))
        lines.append(f"Leave-one-out over {n} mixtures: Spearman {rho}, MAE {reg['loo_mae']:.4f} nats/token "
                     f"(objective); MAE per held-out set: {per}.")
    return lines


def _decision_lines(reg: dict, rows: list[dict], samples: int) -> list[str]:
    """What was recommended and why: the hull optimum, or the fallback to the best tried mixture."""
    best = rows[reg["best_index"]]
    if reg["fallback"]:
        return [f"FALLBACK: {reg['reason']}, so the regression is not trusted. These are the weights of the best "
                f"tried mixture {best['mixture_id']} (measured objective {best['objective']:.4f}), not a "
                "regression optimum; run more mixtures before trusting a fit."]
    near = min(rows, key=lambda r: sum(abs(r[f"share_{d}"] - w) for d, w in reg["named"].items()))
    dist = sum(abs(near[f"share_{d}"] - w) for d, w in reg["named"].items())
    return [f"Searched {samples} convex combinations of the tried mixtures (no extrapolation beyond their hull); "
            f"{reg['reason']}.",
            f"Predicted objective {reg['predicted']:.4f}; best measured {best['objective']:.4f} "
            f"({best['mixture_id']}); nearest tried mixture {near['mixture_id']} (L1 distance {dist:.3f})."]


def analyse(records: list[dict], domains: list[str], eval_names: list[str], m, run_index: dict, out: Path) -> dict:
    """Write results.parquet/.csv, ranking.md, loss_vs_weight.png, recommended_mix.yaml and report.html
    under ``out``; return ``{"best": {...}, "recommended": {...}, "ranking_md", paths}``."""
    from datapipe.ablate.regmix import fit_and_recommend

    a = m.analysis
    table = results_table(records, domains, eval_names, a.objective)
    pq.write_table(table, out / "results.parquet")
    pacsv.write_csv(table, out / "results.csv")
    png = out / "loss_vs_weight.png"
    plot_loss_vs_weight(table, domains, eval_names, png)
    rows = table.to_pylist()
    x = np.array([[r[f"share_{d}"] for d in domains] for r in rows])
    losses = np.array([[r[f"loss_{n}"] for n in eval_names] for r in rows])
    obj_w = np.array([(a.objective or {n: 1.0 for n in eval_names}).get(n, 0.0) for n in eval_names])
    reg = fit_and_recommend(x, losses, obj_w, a.model, a.samples, a.top_k, m.seed, a.min_loo_spearman)
    best_row = rows[reg["best_index"]]
    reg["named"] = {dom: float(w) for dom, w in zip(domains, reg["weights"])}
    # fallback: the best run's own target weights, which reproduce it (its shares are what it achieved)
    rec_w = {dom: best_row[f"w_{dom}"] for dom in domains} if reg["fallback"] else reg["named"]
    info = _fit_lines(reg, len(rows), a.model, eval_names) + _decision_lines(reg, rows, a.samples)
    md = (_markdown(table, domains, eval_names, reg["loo_objective"])
          + "\n## Regression (RegMix-style, Liu et al. 2024)\n\n" + "\n".join(f"- {s}" for s in info) + "\n")
    (out / "ranking.md").write_text(md)
    note = f"# Recommended by `datapipe ablate` from {len(records)} proxy runs.\n"
    note += "".join(f"# {s}\n" for s in info)
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
            "recommended": {"weights": rec_w, "predicted_objective": reg["predicted"], "fallback": reg["fallback"],
                            "reason": reg["reason"], "r2_train": reg["r2_train"],
                            "loo_spearman": reg["loo_spearman"], "loo_mae": reg["loo_mae"],
                            "loo_mae_sets": dict(zip(eval_names, reg["loo_mae_sets"] or []))},
            "ranking_md": md, "mix_block": block, "files": [str(out / f) for f in (
                "results.parquet", "results.csv", "ranking.md", "loss_vs_weight.png", "recommended_mix.yaml",
                "report.html")], "finite": bool(np.isfinite(losses).all())}
