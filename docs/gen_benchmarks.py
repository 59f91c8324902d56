"""The benchmark results page, generated from the result files under ``benchmarks/results/``.

    python docs/gen_benchmarks.py [OUT_FILE]     # default docs/reference/benchmark-results.md

One table per benchmark, one row per result file (newest last), each figure read from the JSON
as the benchmark wrote it, with the command that produces it. A result file that lacks a figure
shows "–"; a folder of results this page does not know is listed by name, so nothing is hidden.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE.parent / "benchmarks" / "results"


def _get(d, *path):
    for p in path:
        if not isinstance(d, dict) or p not in d:
            return None
        d = d[p]
    return d


def _spread(s, fmt="{:.1f}") -> str:
    """``median (min–max)`` of a ``{median, min, max}`` summary; '–' when absent."""
    if not isinstance(s, dict) or "median" not in s:
        return "–" if s is None else fmt.format(s)
    return f"{fmt.format(s['median'])} ({fmt.format(s['min'])}–{fmt.format(s['max'])})"


def _table(head, rows) -> list[str]:
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *("| " + " | ".join(r) + " |" for r in rows), ""]


def _load(f: Path) -> list:
    """The JSON values of a result file: one object, a list, or one object a line (JSON Lines)."""
    text, dec, out, i = f.read_text(), json.JSONDecoder(), [], 0
    while i < len(text):
        if text[i].isspace():
            i += 1
            continue
        v, i = dec.raw_decode(text, i)
        if isinstance(v, dict) and "result" in v and "command" in v:  # a device result wrapped with its command
            v = v["result"]
        out += v if isinstance(v, list) else [v]
    return out


def _files(folder: str, pattern: str = "*.json") -> list[Path]:
    return sorted((RESULTS / folder).glob(pattern))


def fixed_cost() -> list[str]:
    rows = []
    for f in _files("fixed-cost"):
        d = _load(f)[0]
        rows.append((f"`{f.name}`", str(d.get("workers", "–")), _spread(d.get("fixed_s")),
                     _spread(d.get("cluster_start_s")), _spread(d.get("datapipe_run_s")),
                     _spread(d.get("cpu_s_process_tree"), "{:.0f}"), str(d.get("goal_s", "–"))))
    return ["## Fixed cost of a run", "",
            ("The main manifest on a one-record WARC: seconds beyond cluster start, median (min–max) over the "
            "repetitions. Command: `python benchmarks/bench_fixed_cost.py --reps 5 --workers 16` "
            "(on the device machine: `bash benchmarks/device/run.sh fixed-cost`)."), "",
            *_table(("file", "workers", "fixed cost (s)", "cluster start (s)", "`datapipe run` (s)",
                     "CPU s, process tree", "goal (s)"), rows)]


def phase1_ratio() -> list[str]:
    rows = []
    for f in _files("phase1-ratio"):
        for name, v in _load(f)[0].get("inputs", {}).items():
            ratio = v.get("ratio")
            rng = f"{ratio} ({v.get('ratio_min')}–{v.get('ratio_max')})" if ratio is not None else "–"
            rows.append((f"`{f.name}`", name, str(v.get("records", "–")), rng,
                         _spread(v.get("floor_ratio"), "{:.3f}"), _spread(v.get("floor_ratio_with_our_extraction"), "{:.3f}")))
    return ["## Phase 1 per core against its bound", "",
            ("CPU seconds of FastWARC + resiliparse extraction (the bound) over those of the main chain, on one core; "
            "the floor adds the chain's model calls to the bound. Command: "
            "`taskset -c 0 python benchmarks/bench_phase1.py --part ratio --reps 3 --cc-records 0` "
            "(device: `bash benchmarks/device/run.sh ratio`)."), "",
            *_table(("file", "input", "records", "ratio", "floor ratio", "floor with our extraction"), rows)]


def scaling() -> list[str]:
    rows = []
    for f in _files("scaling"):
        d = _load(f)[0]
        summ = d.get("summary")
        if summ:
            for w, s in summ.items():
                rows.append((f"`{f.name}`", w, f"{d.get('files')} × {d.get('records_per_file')}",
                             str(d.get("split_bytes") or "–"), _spread(s.get("records_per_s")),
                             _spread(s.get("efficiency"), "{:.1%}")))
        else:
            for r in d.get("runs", []):
                rows.append((f"`{f.name}`", str(r.get("workers")), f"{d.get('files')} × {d.get('records_per_file')}",
                             str(d.get("split_bytes") or "–"), f"{r.get('records_per_s', '–')}", "–"))
    return ["## Scaling of phase 1", "",
            ("Records/s of phase 1 of the main chain at each worker count; efficiency = rate / (workers × the "
            "1-worker rate), per repetition, worker counts taken in turn. Command: "
            "`python benchmarks/bench_scaling.py --workers 1,16 --files 64 --records 600 --reps 3 --baseline-files 4` "
            "(device: `bash benchmarks/device/run.sh scaling`, `scaling-split`, ...). `1p`: one worker pinned to one core."), "",
            *_table(("file", "workers", "files × records", "split bytes", "records/s", "efficiency"), rows)]


def dedup_scale() -> list[str]:
    rows = []
    for f in _files("dedup-scale"):
        for r in _load(f):
            if "docs" not in r or "phase2_wall_s" not in r:
                continue
            q = r.get("quality") or {}
            rows.append((f"`{f.name}`", f"{int(r['docs']):,}", str(r.get("shards", "–")), str(r.get("workers", "–")),
                         str(r.get("phase2_wall_s", "–")), f"{r.get('phase2_docs_per_s', 0):,.0f}",
                         f"{max((r.get('peak_rss_mb') or {'-': 0}).values()):,.0f}",
                         str(q.get("planted_recall", "–")), str(q.get("pair_precision", "–"))))
    return ["## Dedup at scale", "",
            ("The dedup phase on the synthetic corpus of `benchmarks/scale_corpus.py`. Command: "
            "`python benchmarks/bench_dedup_scale.py --docs 1000000 --workers 16` (`make bench-scale` runs 200,000)."), "",
            *_table(("file", "documents", "shards", "workers", "phase 2 wall (s)", "docs/s", "peak RSS, MiB",
                     "planted recall", "pair precision"), rows)]


def ablation() -> list[str]:
    rows = []
    for f in _files("ablation"):
        d = _load(f)[0]
        if "seed_spearman" not in d and "wall_s" not in d:
            continue
        rows.append((f"`{f.name}`", str(d.get("date", "–")), str(d.get("mixtures", "–")), str(d.get("proxy_runs", "–")),
                     str(d.get("wall_s", "–")), str(d.get("cpu_s_process_tree", "–")),
                     f"{d['seed_spearman']:.3f}" if isinstance(d.get("seed_spearman"), float) else "–",
                     f"{d['margin']:.3f}" if isinstance(d.get("margin"), float) else "–", str(d.get("decision", "–"))))
    return ["## Mixture ablation (CPU)", "",
            ("`make bench-ablate` (`benchmarks/bench_ablate_cpu.py`): a fresh `datapipe ablate manifests/ablation.yaml` "
            "over `runs/sample`; wall and CPU seconds, the seed-to-seed Spearman of the ranking and the margin a "
            "difference must exceed."), "",
            *_table(("file", "date", "mixtures", "proxy runs", "wall (s)", "CPU s", "seed Spearman", "margin",
                     "decision"), rows)]


KNOWN = {"fixed-cost", "phase1-ratio", "scaling", "dedup-scale", "ablation"}


def page() -> str:
    lines = ["# Benchmark results", "",
             ("Generated from the result files under `benchmarks/results/` (`docs/gen_benchmarks.py`): what "
             "each file says, newest round last. Device files (`h200-...`) were taken on a 16-core host, "
             "`local-2core-...` and `cpu-...` on a shared 2-core machine. How to read them: "
             "[Performance](../benchmarks/performance.md)."), ""]
    for part in (fixed_cost, phase1_ratio, scaling, dedup_scale, ablation):
        lines += part()
    others = sorted(p.name for p in RESULTS.iterdir() if p.is_dir() and p.name not in KNOWN)
    if others:
        lines += ["## Other result folders", ""]
        for o in others:
            lines.append(f"- `benchmarks/results/{o}/`: " + ", ".join(f"`{f.name}`" for f in sorted((RESULTS / o).iterdir())))
        lines.append("")
    return "\n".join(lines)


def write(out: Path = HERE / "reference" / "benchmark-results.md") -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page(), encoding="utf-8")
    return out


if __name__ == "__main__":
    print(write(Path(sys.argv[1])) if len(sys.argv) > 1 else write())
