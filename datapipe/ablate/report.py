"""The ablation's decision and its written outputs (ranking.md, recommended_mix.yaml, report.html,
summary.json).

Decision rule (``decide``), in order:

1. one seed: no noise floor, so **no recommendation** (the ranking is still written);
2. the spread of the seed-mean objective over all mixtures is within the noise margin
   (``noise.margin``): the mixtures are indistinguishable, **no recommendation**;
3. the regression passed its out-of-sample checks (``regmix.fit_and_recommend``): its optimum
   inside the tried mixtures' hull is recommended;
4. otherwise the best tried mixture, but only when it beats the runner-up by more than the
   margin; else **no recommendation**, and the mixtures tied with the best are named.

Every decision also carries ``headline``: one sentence in plain words saying what to do, the first
line of ``report.html``, ``ranking.md`` and ``recommended_mix.yaml``. When several mixtures are
tied within the margin it names them and the cheapest of them: the one whose most repeated domain
is repeated least (lowest ``max_d epochs_d``). ``epochs_d = w_d * budget / T_d`` for a domain of
``T_d`` tokens, so that mixture needs the least crawled data per training token.
"""
from __future__ import annotations

import json
from pathlib import Path

import yaml

from datapipe.ablate.overlap import report_lines as overlap_lines
from datapipe.ablate.regmix import EPS
from datapipe.ablate.report_html import render_html


def _fmt(v, nd=4) -> str:
    return "n/a" if v is None else f"{v:.{nd}f}"


def decide(rows: list[dict], reg: dict, stats: dict, domains: list[str]) -> dict:
    """``{"status": "regression" | "best_tried" | "none", "weights" | None, "reason", "tied": [ids]}``.

    ``rows``: results-table rows (canonical order); ``reg``: ``fit_and_recommend``'s result;
    ``stats``: ``noise.seed_statistics`` plus ``margin``.
    """
    obj = [r["objective"] for r in rows]
    order = sorted(range(len(rows)), key=lambda i: (obj[i], rows[i]["mixture_id"]))
    best = rows[order[0]]
    mg = stats["margin"]
    tied = [rows[i]["mixture_id"] for i in order if mg is not None and obj[i] - obj[order[0]] <= mg]
    base = {"best": best["mixture_id"], "tied": tied, "margin": mg}
    dec = _decide(rows, reg, stats, domains, obj, order, best, mg, tied, base)
    dec["cheapest"] = cheapest(rows, tied) if len(tied) > 1 else None
    dec["headline"] = headline(dec, rows, domains)
    return dec


def max_epochs(row: dict) -> float:
    """The largest ``epochs_<d>`` of a results row (0.0 when the row has none)."""
    return max([v for k, v in row.items() if k.startswith("epochs_") and v is not None] or [0.0])


def cheapest(rows: list[dict], ids: list[str]) -> str:
    """Of the mixtures ``ids``, the one needing the least crawled data per training token: lowest
    ``max_epochs``, then lowest objective, then ``mixture_id``."""
    by_id = {r["mixture_id"]: r for r in rows}
    return min(ids, key=lambda i: (max_epochs(by_id[i]), by_id[i]["objective"], i))


def _names(ids: list[str]) -> str:
    return ids[0] if len(ids) == 1 else ", ".join(ids[:-1]) + " and " + ids[-1]


def _shares(weights: dict) -> str:
    return ", ".join(f"{d} {w:.2f}" for d, w in weights.items())


_NUMBERS = {2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight", 9: "nine", 10: "ten"}


def headline(dec: dict, rows: list[dict], domains: list[str]) -> str:
    """What to do, in one plain sentence (no status codes)."""
    tied, mg = dec["tied"], dec["margin"]
    if mg is None:
        return (f"Not decided yet: with one seed per mixture the noise cannot be measured, so rerun with "
                f"`seeds: [0, 1]` (best so far: {dec['best']}, which may be luck).")
    if dec["status"] == "regression" and dec["gain"] > mg:
        return (f"Use the regression's mixture ({_shares(dec['weights'])}): it is predicted to beat every "
                f"tried mixture by more than the noise; measure it once before relying on it.")
    if len(tied) > 1:
        by_id = {r["mixture_id"]: r for r in rows}
        c = dec["cheapest"]
        n = _NUMBERS.get(len(tied), str(len(tied)))
        eps = max_epochs(by_id[c])
        cost = f" (it needs the least crawled data: at most {eps:.2f} epochs of any domain)" if eps else ""
        lead = ("All mixtures are" if len(tied) == len(rows) else f"These {n} mixtures are")
        tail = ""
        if dec["status"] == "regression":
            tail = (f" The regression's mixture ({_shares(dec['weights'])}) is predicted to be as good, "
                    "not measurably better.")
        return (f"{lead} tied within noise: {_names(tied)}. Use any of them; the cheapest is {c}{cost}."
                + tail)
    if dec["status"] == "regression":
        return (f"Use the regression's mixture ({_shares(dec['weights'])}): it is as good as the best tried "
                f"mixture {dec['best']}, which beats every other by more than the noise.")
    if dec["status"] == "best_tried":
        return (f"Use {dec['best']} ({_shares(dec['weights'])}): it beats every other mixture by more "
                "than the noise.")
    return f"No mixture can be recommended: {dec['reason']}."


def _decide(rows, reg, stats, domains, obj, order, best, mg, tied, base) -> dict:
    if mg is None:
        return base | {"status": "none", "weights": None, "reason": (
            f"noise floor not measured ({stats['seeds']} seed): set `seeds: [0, 1]` or more; the ranking below "
            "may be seed noise")}
    spread = obj[order[-1]] - obj[order[0]]
    if spread <= mg:
        return base | {"status": "none", "weights": None, "reason": (
            f"all {len(rows)} mixtures lie within the noise margin (objective spread {spread:.4f} <= {mg:.4f} "
            "nats/token): they are indistinguishable at this proxy size and budget")}
    if not reg["fallback"]:
        gain = obj[order[0]] - reg["predicted"]
        return base | {"status": "regression", "weights": reg["named"], "gain": gain, "reason": (
            f"the regression passed its out-of-sample checks ({reg['reason']}); objective spread {spread:.4f} > "
            f"margin {mg:.4f}; predicted gain over the best tried mixture {gain:.4f} nats/token "
            + ("(within the margin: as good as the best tried, not measurably better)" if gain <= mg else
               "(beyond the margin: measure it before relying on it)"))}
    if len(tied) > 1:
        gap = obj[order[1]] - obj[order[0]]
        return base | {"status": "none", "weights": None, "reason": (
            f"regression not trusted ({reg['reason']}) and the best tried mixture {best['mixture_id']} is not "
            f"separable from {', '.join(tied[1:])} (runner-up gap {gap:.4f} <= margin {mg:.4f})")}
    return base | {"status": "best_tried", "weights": {d: best[f"w_{d}"] for d in domains}, "reason": (
        f"regression not trusted ({reg['reason']}); the best tried mixture {best['mixture_id']} beats every "
        f"other by more than the margin {mg:.4f} (its target weights reproduce it)")}


def _ranking(rows, domains, eval_names, reg, stats, dec) -> list[str]:
    head, body = ranking_cells(rows, domains, eval_names, reg, dec)
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)] + ["| " + " | ".join(c) + " |" for c in body]


def ranking_cells(rows, domains, eval_names, reg, dec) -> tuple[list[str], list[list[str]]]:
    """The ranking as a header and one list of cell strings per mixture, best first."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["objective"], rows[i]["mixture_id"]))
    seeds = sorted(int(k[len("objective_seed"):]) for k in rows[0] if k.startswith("objective_seed"))
    loo, ho = reg.get("loo_objective"), reg.get("holdout", {}).get("predicted")
    head = ["rank", "mixture", *[f"share {d}" for d in domains], "objective", *[f"seed {s}" for s in seeds],
            "predicted (out of sample)", *[f"loss {n}" for n in eval_names], "notes"]
    out = []
    for rank, i in enumerate(order, 1):
        r = rows[i]
        pred = (f"{ho[i]:.4f} (held out)" if ho and ho[i] is not None else
                f"{loo[i]:.4f} (LOO)" if loo and loo[i] is not None else "")
        notes = [*(["tied with best"] if r["mixture_id"] in dec["tied"] and rank > 1 else []),
                 *(["cheapest of the tied"] if r["mixture_id"] == dec.get("cheapest") else []),
                 *([f"capped: {r['flags']}"] if r["flags"] else []),
                 *([f"same training set as {r['duplicates']}"] if r["duplicates"] else [])]
        cells = [str(rank), r["mixture_id"], *[f"{r[f'share_{d}']:.3f}" for d in domains], f"{r['objective']:.4f}",
                 *[_fmt(r.get(f"objective_seed{s}")) for s in seeds], pred,
                 *[f"{r[f'loss_{n}']:.4f}" for n in eval_names], "; ".join(notes)]
        out.append(cells)
    return head, out


def _repro_lines(stats: dict, eval_names: list[str]) -> list[str]:
    if stats["floor"] is None:
        return [f"{stats['seeds']} seed per mixture: noise floor and seed-to-seed Spearman not measured."]
    floors = ", ".join(f"{n} {stats['floor'][n]:.4f}" for n in eval_names)
    per = ", ".join(f"{n} {_fmt(stats['spearman_sets'].get(n), 3)}" for n in eval_names)
    return [f"{stats['seeds']} seeds per mixture. Seed-to-seed Spearman of the ranking (objective): "
            f"{_fmt(stats['spearman'], 3)}; per held-out set: {per}.",
            f"Noise floor (pooled SD across seeds of one mixture, nats/token): objective "
            f"{stats['floor_objective']:.4f}; {floors}.",
            f"Margin for a real difference between two mixtures: {stats['noise_z']:g} x floor x sqrt(2/"
            f"{stats['seeds']}) = {stats['margin']:.4f} nats/token."]


def _fit_lines(reg: dict, n: int, model: str, eval_names: list[str]) -> list[str]:
    kind = "gradient boosting" if model == "gbm" else "ridge"
    h = reg["holdout"]
    lines = [f"Fit: {kind} on the fixed features [share, log(share + {EPS:g})] per domain, one model per held-out "
             f"set, fitted on {n - h['n']} of {n} mixtures ({h['n']} held out by id hash, never fitted)."]
    if reg["loo_spearman"] is None and reg["loo_mae"] is None:
        lines.append("Leave-one-out: not computed (too few fitted mixtures).")
    else:
        per = ", ".join(f"{s} {e:.3f}" for s, e in zip(eval_names, reg["loo_mae_sets"]))
        lines.append(f"Leave-one-out over the fitted mixtures: Spearman {_fmt(reg['loo_spearman'], 3)}, MAE "
                     f"{reg['loo_mae']:.4f} nats/token (objective); MAE per held-out set: {per}.")
    if h["n"]:
        lines.append(f"Held-out mixtures ({h['n']}): MAE {_fmt(h['mae'])} vs {_fmt(h['baseline_mae'])} for predicting "
                     f"the fitted mixtures' mean; Spearman {_fmt(h['spearman'], 3)}.")
    if h["n"] < 3:
        lines.append(f"Only {h['n']} held-out mixture(s): no held-out rank correlation. Try more mixtures "
                     "(analysis.holdout_mixtures x distinct mixtures >= 3, with >= 5 left to fit).")
    return lines


def _input_lines(inputs: dict) -> list[str]:
    out = [f"Duplicate training sets (trained once): {kept} = {', '.join(d)}"
           for kept, d in sorted((inputs.get("duplicates") or {}).items())]
    out += [f"Domain too small for its weight in {mid}: {'; '.join(n)}"
            for mid, n in sorted((inputs.get("flags") or {}).items())]
    out += [f"FAILED, not ranked: {f['error']}" for f in inputs.get("failed") or []]
    return out or ["none: every candidate is a distinct training set, every share met, every run finished."]


def mix_block(weights: dict[str, float], run_index: dict) -> str:
    """A ``mix:`` section for the main manifest: the run's own rules/settings with these weights
    (settings left at null are left out: the manifest's defaults give them)."""
    base = dict((run_index.get("config") or {}).get("mix") or {})
    base["weights"] = {d: round(float(w), 4) for d, w in weights.items() if round(float(w), 4) > 0}
    keep = ["rules", "default_domain", "weights", "total_tokens", "max_epochs", "fill_budget", "seed"]
    return yaml.safe_dump({"mix": _no_nulls({k: base[k] for k in keep if k in base})}, sort_keys=False)


def _no_nulls(v):
    """``v`` without the null entries of its mappings, at any depth."""
    if isinstance(v, dict):
        return {k: _no_nulls(x) for k, x in v.items() if x is not None}
    return [_no_nulls(x) for x in v] if isinstance(v, list) else v


def _overlap_summary(rep: dict | None) -> dict | None:
    """summary.json's ``eval_overlap``: the overlap report without its cache key and timing."""
    return None if rep is None else {k: v for k, v in rep.items() if k not in ("key", "seconds")}


def recommended_yaml(dec: dict, rows: list[dict], domains: list[str], stats: dict, run_index: dict,
                     n: int) -> str:
    """``recommended_mix.yaml``: the headline and the decision as comments, ``decision:`` (``status``
    ``recommended`` | ``tied`` | ``none``, the tied ids and the pick) and the ``mix:`` block to paste
    (none when nothing can be picked). Tied mixtures give the cheapest of them, marked as such."""

    note = f"# {dec['headline']}\n# `datapipe ablate` over {n} distinct mixtures x {stats['seeds']} seed(s).\n"
    note += f"# Why: {dec['reason']}.\n"
    regression_wins = dec["status"] == "regression" and dec["gain"] > dec["margin"]
    if len(dec["tied"]) > 1 and not regression_wins:
        pick = next(r for r in rows if r["mixture_id"] == dec["cheapest"])
        weights = {d: pick[f"w_{d}"] for d in domains}
        decision = {"status": "tied", "tied": dec["tied"], "pick": dec["cheapest"],
                    "why": "tied within noise: any of them will do; this one is the cheapest"}
    elif dec["weights"] is not None:
        weights = dec["weights"]
        decision = {"status": "recommended", "pick": dec["best"] if dec["status"] == "best_tried" else "regression"}
    else:
        return note + "# NO RECOMMENDATION: no mix: block is proposed.\n"
    return note + yaml.safe_dump({"decision": decision}, sort_keys=False) + mix_block(weights, run_index)


def write_outputs(out: Path, m, rows, domains, eval_names, reg, stats, dec, inputs, run_index, png: Path) -> dict:
    """Write ranking.md, recommended_mix.yaml, report.html and summary.json; return the analysis dict."""
    md = f"**{dec['headline']}**\n\n" + "\n".join(_ranking(rows, domains, eval_names, reg, stats, dec)) + "\n"
    sections = {"Reproducibility": _repro_lines(stats, eval_names),
                "Degenerate inputs": _input_lines(inputs),
                "Held-out overlap with the training pool": overlap_lines(inputs.get("overlap")),
                "Regression (RegMix-style, Liu et al. 2024)": _fit_lines(reg, len(rows), m.analysis.model, eval_names),
                "Decision": [dec["headline"], f"Why: {dec['reason']}."]}
    for title, lines in sections.items():
        md += f"\n## {title}\n\n" + "\n".join(f"- {s}" for s in lines) + "\n"
    (out / "ranking.md").write_text(md)
    block = recommended_yaml(dec, rows, domains, stats, run_index, len(rows))
    (out / "recommended_mix.yaml").write_text(block)

    (out / "report.html").write_text(render_html(m.name, dec["headline"],
                                                 ranking_cells(rows, domains, eval_names, reg, dec),
                                                 sections, png, block))
    best = next(r for r in rows if r["mixture_id"] == dec["best"])
    recommended = {"status": dec["status"], "weights": dec["weights"], "reason": dec["reason"],
                   "headline": dec["headline"], "cheapest_tied": dec["cheapest"],
                   "fallback": reg["fallback"], "regression_weights": reg["named"],
                   "predicted_objective": reg["predicted"], "regression_reason": reg["reason"],
                   "r2_train": reg["r2_train"], "loo_spearman": reg["loo_spearman"], "loo_mae": reg["loo_mae"],
                   "loo_mae_sets": dict(zip(eval_names, reg["loo_mae_sets"] or [])),
                   "holdout": {k: v for k, v in reg["holdout"].items() if k != "predicted"}}
    held = [{"mixture_id": r["mixture_id"], "objective": r["objective"], "predicted": p}
            for r, p in zip(rows, reg["holdout"].get("predicted") or []) if p is not None]
    repro = {k: stats[k] for k in ("seeds", "spearman", "spearman_pairs", "spearman_sets", "floor",
                                   "floor_objective", "margin", "noise_z")}
    summary = {"best": {"mixture_id": best["mixture_id"], "objective": best["objective"],
                        "shares": {d: best[f"share_{d}"] for d in domains}},
               "ranking": [r["mixture_id"] for r in sorted(rows, key=lambda r: (r["objective"], r["mixture_id"]))],
               "recommended": recommended, "reproducibility": repro, "tied_with_best": dec["tied"],
               "holdout_mixtures": held,
               "duplicates": inputs.get("duplicates") or {}, "flags": inputs.get("flags") or {},
               "failed": inputs.get("failed") or [],
               "eval_overlap": _overlap_summary(inputs.get("overlap"))}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, sort_keys=True))
    files = [str(out / f) for f in ("results.parquet", "results.csv", "ranking.md", "loss_vs_weight.png",
                                    "recommended_mix.yaml", "report.html", "summary.json")]
    return summary | {"ranking_md": md, "mix_block": block, "files": files,
                      "decision": dec, "finite": True}
