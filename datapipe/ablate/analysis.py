"""Results table, ranking, loss-vs-weight plot, and the report of the RegMix-style regression.

The ranking is by the objective of the seed-mean losses, ties by ``mixture_id``, over records put
in ``mixture_id`` order first, so nothing depends on the order of the candidates. The text of the
ranking, the reproducibility figures and the decision is built in ``datapipe.ablate.report``.
The regression itself (RegMix: Liu et al. 2024, arXiv:2407.01492; per-held-out-set loss models on
log-share features, leave-one-out check, search inside the convex hull of the tried mixtures, and
the fallback to the best tried mixture when the fit is poor) lives in ``datapipe.ablate.regmix``.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from datapipe.ablate.checks import check_losses
from datapipe.ablate.noise import margin, seed_statistics
from datapipe.ablate.regmix import fit_and_recommend, holdout_mask
from datapipe.ablate.report import decide, write_outputs


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
    ``loss_<set>`` / ``ppl_<set>`` (mean over seeds), ``objective`` (of the mean losses),
    ``objective_seed<s>`` per seed, ``seeds``, ``flags`` (domains too small for their weight),
    ``duplicates`` (candidates with the same training set), ``tokens_trained``, ``steps``,
    ``params``, ``train_loss``, ``device``, ``wall_s`` (all seeds), ``resumed``."""
    cols: dict[str, list] = {"mixture_id": [r["mixture_id"] for r in records]}
    for d in domains:
        cols[f"w_{d}"] = [float(r["weights"].get(d, 0.0)) for r in records]
        cols[f"share_{d}"] = [float(r["achieved"].get(d, 0.0)) for r in records]
        cols[f"epochs_{d}"] = [float(r["epochs"].get(d, 0.0)) for r in records]
    for n in eval_names:
        cols[f"loss_{n}"] = [float(r["eval"][n]["loss"]) for r in records]
        cols[f"ppl_{n}"] = [float(r["eval"][n]["ppl"]) for r in records]
    cols["objective"] = [objective(r, eval_names, obj) for r in records]
    seeds = sorted({run["seed"] for r in records for run in r.get("runs", [])})
    for s in seeds:
        cols[f"objective_seed{s}"] = [next((objective(run, eval_names, obj) for run in r["runs"] if run["seed"] == s),
                                           None) for r in records]
    cols["seeds"] = [len(r.get("runs", [])) or 1 for r in records]
    cols["flags"] = ["; ".join(r.get("flags") or []) for r in records]
    cols["duplicates"] = [" ".join(r.get("duplicates") or []) for r in records]
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


def analyse(records: list[dict], domains: list[str], eval_names: list[str], m, run_index: dict, out: Path,
            inputs: dict | None = None) -> dict:
    """Write results.parquet/.csv, ranking.md, loss_vs_weight.png, recommended_mix.yaml, report.html
    and summary.json under ``out``; return ``{"best", "recommended", "reproducibility", "decision",
    "ranking_md", "mix_block", "files"}``.

    ``records``: one per mixture with per-seed ``runs``; ``inputs``: ``duplicates``, ``flags``,
    ``failed`` (reported). Raises ValueError naming mixture, seed and set for a non-finite loss.
    """

    a = m.analysis
    for r in records:
        r.setdefault("runs", [{"seed": m.seed, "eval": r["eval"]}])
    check_losses(records, eval_names)
    records = sorted(records, key=lambda r: r["mixture_id"])  # canonical: input order must not matter
    table = results_table(records, domains, eval_names, a.objective)
    pq.write_table(table, out / "results.parquet")
    pacsv.write_csv(table, out / "results.csv")
    png = out / "loss_vs_weight.png"
    plot_loss_vs_weight(table, domains, eval_names, png)
    rows = table.to_pylist()
    ids = [r["mixture_id"] for r in rows]
    x = np.array([[r[f"share_{d}"] for d in domains] for r in rows])
    losses = np.array([[r[f"loss_{n}"] for n in eval_names] for r in rows])
    obj_w = np.array([(a.objective or {n: 1.0 for n in eval_names}).get(n, 0.0) for n in eval_names])
    seeds = sorted({run["seed"] for r in records for run in r["runs"]})
    per_seed = np.array([[[next(run for run in r["runs"] if run["seed"] == s)["eval"][n]["loss"] for n in eval_names]
                          for s in seeds] for r in records]) if all(len(r["runs"]) == len(seeds) for r in records) \
        else losses[:, None, :]
    stats = seed_statistics(per_seed, obj_w, eval_names)
    stats["margin"] = margin(stats["floor_objective"], stats["seeds"], a.noise_z)
    stats["noise_z"] = a.noise_z
    hold = holdout_mask(ids, a.holdout_mixtures, m.seed)
    reg = fit_and_recommend(x, losses, obj_w, a.model, a.samples, a.top_k, m.seed, a.min_loo_spearman, hold)
    reg["named"] = {dom: float(w) for dom, w in zip(domains, reg["weights"])}
    dec = decide(rows, reg, stats, domains)
    return write_outputs(out, m, rows, domains, eval_names, reg, stats, dec, inputs or {}, run_index, png)
