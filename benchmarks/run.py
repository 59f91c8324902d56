"""`make bench`: run every benchmark, write benchmarks/results/latest.json, print a Markdown table.

    .venv/bin/python benchmarks/run.py            # full (~10-15 min on 2 cores)
    BENCH_QUICK=1 .venv/bin/python benchmarks/run.py   # one repetition, datatrove's fast config only,
                                                       # no Dask, no helper scripts (~3 min)
    BENCH_REPS=5 ...                                   # more repetitions (default 3)

Steps, each a subprocess so that pinning and virtualenvs stay separate:
  1. make_input.py builds benchmarks/work/ from ../shared/data/warc/realpages-1171.warc.gz;
  2. bench_phase1.py --part stages, pinned to core 0 (taskset -c 0, OMP_NUM_THREADS=1), then
     peer_datatrove.py --stages in benchmarks/.venv-datatrove, pinned the same way, same file and texts;
  3. the whole phase 1: per round, ours (matched chain, full chain) then datatrove's three
     configurations, one run each, pinned; rounds = repetitions;
  3b. bench_phase1.py --part ratio: the main manifest's chain vs the fastwarc+resiliparse bound, CPU
     seconds of the process and its sandbox child, interleaved, on realpages-1171 and a synthetic
     CC-sized file (BENCH_CC_RECORDS records, default 40,000: about 15 min a repetition on one core);
  4. bench_phase1.py --part dask (1 worker on core 0, 2 workers on cores 0-1);
  5. the other engineers' scripts, if present: bench_dedup.py, bench_tokenize.py, bench_rules.py (rule
     families vs datatrove's filters: docs/s and keep/reject agreement), bench_extraction.py (extraction
     quality and docs/s vs trafilatura 2.3.1), bench_fixed_cost.py (the main manifest on a one-record
     WARC: cluster start vs everything else, wall and CPU, 3 fresh runs) (one JSON object each).
Every ratio compares two figures of this run; none uses a remembered number.
"""
from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from make_input import WORK, build
from timing import summarize

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PEER_PY = HERE / ".venv-datatrove" / "bin" / "python"
HELPERS = {"dedup": "bench_dedup.py", "tokenize": "bench_tokenize.py",
           "rules": "bench_rules.py",  # rules: pins itself to core 0; datatrove peer inside
           "extraction": "bench_extraction.py",  # quality + docs/s vs trafilatura; pins itself to one core
           "retune": "bench_retune.py",  # late-stage threshold change vs the full run, main manifest
           "pii": "bench_pii.py",  # PII test-split P/R, new stage vs the previous one, live
           "safety": "bench_safety.py",  # safety test set recall / false rejection, new vs whole-document scoring
           "fixed_cost": "bench_fixed_cost.py",  # main manifest on a 1-record WARC: cluster start vs the rest (issue 16)
           "decontam": "bench_decontam.py"}  # planted-item recall, benign pages changed (test half), ms/page, index RSS  # main manifest on a 1-record WARC: cluster start vs the rest (issue 16)
HELPER_TIMEOUT_S = 420
HELPER_TIMEOUTS = {"extraction": 2400, "fixed_cost": 1200, "decontam": 900}  # fixed_cost: 3 x (timeline + datapipe run), fresh processes  # trafilatura, two modes: 3 passes over ~1,700 test pages at ~20-40 docs/s
OUR_LIBS = ("pyarrow", "fastwarc", "resiliparse", "warcio", "fasttext-community", "dask", "distributed", "numpy",
            "datasketch", "rensa", "tokenizers", "tiktoken")

# figure -> (reference figure, what the reference is). Ratio = figure rate / reference rate.
COMPARE = {
    "read.ours": ("read.fastwarc", "bound"),
    "read.warcio": ("read.fastwarc", "bound"),
    "read.datatrove": ("read.ours", "ours"),
    "extract.ours": ("extract.resiliparse", "bound"),
    "extract.ours_no_sandbox": ("extract.resiliparse", "bound"),
    "extract.resiliparse_detect": ("extract.resiliparse", "bound"),
    "extract.datatrove_trafilatura": ("extract.ours", "ours"),
    "extract.datatrove_trafilatura_fast": ("extract.ours", "ours"),
    "langid.ours": ("langid.fasttext", "bound"),
    "langid.datatrove": ("langid.ours", "ours"),
    "stage.datatrove_gopher_repetition": ("stage.gopher_repetition", "ours"),
    "stage.datatrove_gopher_quality": ("stage.gopher_quality", "ours"),
    "stage.datatrove_c4": ("stage.c4", "ours"),
    "stage.datatrove_fineweb": ("stage.fineweb", "ours"),
    "phase1.datatrove_default": ("phase1.ours_matched", "ours"),
    "phase1.datatrove_fast": ("phase1.ours_matched", "ours"),
    "phase1.datatrove_resiliparse": ("phase1.ours_matched", "ours"),
    "phase1.ours_full": ("phase1.ours_matched", "ours"),
    "phase1.dask_1w": ("phase1.ours_full", "in-process"),
    "phase1.dask_2w": ("phase1.dask_1w", "1 worker"),
}
PEER_FILTERS = {"LanguageFilter": "langid.datatrove", "GopherRepetitionFilter": "stage.datatrove_gopher_repetition",
                "GopherQualityFilter": "stage.datatrove_gopher_quality", "C4QualityFilter": "stage.datatrove_c4",
                "FineWebQualityFilter": "stage.datatrove_fineweb"}
PEER_EXTRACT = {"default": "extract.datatrove_trafilatura", "fast": "extract.datatrove_trafilatura_fast"}


def machine() -> dict:
    model = platform.processor() or ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu_model": model, "cores": os.cpu_count(), "cores_usable": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "platform": platform.platform(), "loadavg_start": os.getloadavg()}


def versions() -> dict:
    out = {}
    for p in OUR_LIBS:
        try:
            out[p] = version(p)
        except PackageNotFoundError:
            pass
    return out


def pinned(cmd: list[str]) -> list[str]:
    """One core: taskset -c 0 where it exists (the children inherit the mask)."""
    return (["taskset", "-c", "0"] if shutil.which("taskset") else []) + cmd


def run_json(name: str, cmd: list[str], timeout: float | None = None, env_extra: dict | None = None) -> dict | None:
    """Run a script that prints one JSON object last on stdout; None (and a note) when it fails."""
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(HERE), **(env_extra or {}))
    t0 = time.time()
    print(f"[bench] {name}: {' '.join(cmd)}", file=sys.stderr, flush=True)
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        NOTES.append(f"{name}: timed out after {timeout:.0f} s")
        return None
    print(f"[bench] {name}: {time.time() - t0:.0f} s, rc={p.returncode}", file=sys.stderr, flush=True)
    if p.returncode != 0:
        NOTES.append(f"{name}: exit {p.returncode}: {p.stderr.strip().splitlines()[-1:] }")
        return None
    text = p.stdout.strip()
    start = text.rfind("\n{") + 1 if not text.startswith("{") else 0
    try:
        return json.loads(text[start:])
    except json.JSONDecodeError:
        NOTES.append(f"{name}: output is not one JSON object")
        return None


NOTES: list[str] = []


def merge_runs(acc: dict, raw: dict) -> None:
    """Pool the repetitions of several one-repetition calls: seconds (and per-run steps) are appended."""
    for section in ("figures", "pipelines"):
        for name, f in raw.get(section, {}).items():
            have = acc.setdefault(section, {}).setdefault(name, dict(f, seconds=[], steps=[]) if "steps" in f
                                                          else dict(f, seconds=[]))
            have["seconds"] += f["seconds"]
            if "steps" in f:
                have["steps"] += f["steps"]
            for k, v in f.items():  # latest kept counts / stage seconds
                if k not in ("seconds", "steps"):
                    have[k] = v
    acc.setdefault("notes", []).extend(raw.get("notes", []))


# ---------------------------------------------------------------- collecting figures

def add(figs: dict, name: str, seconds: list[float], items: int, unit: str, input_: str, **extra) -> None:
    figs[name] = dict(summarize(seconds, items, unit), input=input_, **extra)


def collect_ours(figs: dict, raw: dict, input_: str) -> None:
    for name, f in raw["figures"].items():
        extra = {k: v for k, v in f.items() if k not in ("seconds", "items")}
        unit = "records/s" if name.startswith(("read.", "phase1.")) else "docs/s"
        add(figs, name, f["seconds"], f["items"], unit, input_, **extra)


def collect_peer(figs: dict, raw: dict, input_: str, records: int) -> None:
    for cfg, p in raw.get("pipelines", {}).items():
        add(figs, f"phase1.datatrove_{cfg}", p["seconds"], records, "records/s", input_,
            steps=p["steps"][-1], config=PEER_CONFIGS[cfg])
        if cfg in PEER_EXTRACT:  # the extractor's own time inside the pipeline (its sandbox included)
            ext = [next(v for k, v in s.items() if k.startswith("Trafilatura")) for s in p["steps"]]
            add(figs, PEER_EXTRACT[cfg], [e["seconds"] for e in ext], ext[0]["docs"], "docs/s", input_,
                note="step time inside the pipeline run")
    st = raw.get("stages", {})
    if "read" in st:
        add(figs, "read.datatrove", st["read"]["seconds"], records, "records/s", input_,
            note=f"WarcReader (warcio), {st['read']['docs_out']} documents out")
    for cls, name in PEER_FILTERS.items():
        if cls in st:
            add(figs, name, st[cls]["seconds"], st[cls]["items"], "docs/s", "texts extracted by ours")


PEER_CONFIGS = {
    "default": "WarcReader > Trafilatura(favour_precision=True, timeout=1) > filters > JsonlWriter",
    "fast": "Trafilatura(favour_precision=False, deduplicate=False, no_fallback=True): its fastest own extractor",
    "resiliparse": "a custom BaseExtractor calling resiliparse main content: datatrove as fast as it gets",
}


def flatten(prefix: str, obj, out: dict) -> None:
    if isinstance(obj, dict):
        for k, v in obj.items():
            flatten(f"{prefix}.{k}", v, out)
    elif isinstance(obj, (int, float)) and not isinstance(obj, bool):
        out[prefix] = obj


def unit_of(key: str) -> str:
    k = key.rsplit(".", 1)[-1].lower()
    for suffix, unit in (("docs_s", "docs/s"), ("docs_per_s", "docs/s"), ("tokens_per_s", "tokens/s"),
                         ("tokens_s", "tokens/s"), ("mb_per_s", "MB/s"), ("mb_s", "MB/s"), ("seconds", "s"), ("_s", "s"),
                         ("ratio", "x"),
                         ("pct", "%")):
        if k.endswith(suffix):
            return unit
    return ""


# Figures whose i-th runs were taken side by side (interleaved in one process, or in the same round):
# their ratio is the median of per-run ratios, which cancels load that drifts between rounds.
PAIRED = ("read.fastwarc", "read.warcio", "read.ours", "extract.resiliparse", "extract.ours", "langid.fasttext",
          "langid.ours", "phase1.ours_", "phase1.datatrove_")


def compare(figs: dict) -> None:
    for name, (ref, kind) in COMPARE.items():
        if name not in figs or ref not in figs:
            continue
        f, r = figs[name], figs[ref]
        f["vs"] = f"{ref} ({kind})"
        f["ratio_of_medians"] = f["ratio"] = round(f["value"] / r["value"], 3)
        if name.startswith(PAIRED) and ref.startswith(PAIRED) and len(f["seconds"]) == len(r["seconds"]) > 1:
            per_run = [(f["items"] / a) / (r["items"] / b) for a, b in zip(f["seconds"], r["seconds"])]
            f["ratio"] = round(statistics.median(per_run), 3)
            f["ratio_runs"] = [round(x, 3) for x in per_run]


# ---------------------------------------------------------------- output

def table(figs: dict, helpers: dict) -> str:
    rows = ["| figure | value | unit | min–max (spread) | reps | compared with | ratio |",
            "|---|---:|---|---|---:|---|---:|"]
    for name, f in figs.items():
        spread = f"{f['min']:.1f}–{f['max']:.1f} ({f['spread_pct']:.0f}%)"
        ratio = f"{f['ratio']:.3g}" if "ratio" in f else ""
        rows.append(f"| {name} | {f['value']:.1f} | {f['unit']} | {spread} | {f['reps']} | {f.get('vs', '')} | {ratio} |")
    for name, flat in helpers.items():
        for k, v in flat.items():
            rows.append(f"| {k} | {v:g} | {unit_of(k)} | (script's own timing) | | | |")
    return "\n".join(rows)


def profile(figs: dict) -> str:
    """Where phase 1's time goes: seconds per stage from our ledger and datatrove's step stats."""
    out = []
    ours = figs.get("phase1.ours_full", {}).get("stage_seconds")
    if ours:
        tot = sum(ours.values())
        out.append("ours (full chain, ledger seconds): " + ", ".join(f"{k} {v:.2f}s ({100 * v / tot:.0f}%)" for k, v in ours.items()))
    peer = figs.get("phase1.datatrove_default", {}).get("steps")
    if peer:
        tot = sum(v["seconds"] for v in peer.values())
        out.append("datatrove default (step stats): " + ", ".join(f"{k} {v['seconds']:.2f}s ({100 * v['seconds'] / tot:.0f}%)" for k, v in peer.items()))
    return "\n".join(f"- {x}" for x in out)


def main() -> None:
    if sys.argv[1:2] == ["--render"]:
        print(render(json.loads(Path(sys.argv[2]).read_text())))
        return
    quick = os.environ.get("BENCH_QUICK") == "1"
    reps = 1 if quick else int(os.environ.get("BENCH_REPS", "3"))
    t0 = time.time()
    meta = build()
    single = meta["single"]
    input_ = f"{Path(meta['source']).name} ({single['records']} records, {single['bytes'] / 1e6:.1f} MB, sha256 {single['sha256'][:12]})"
    result = {"quick": quick, "reps": reps, "machine": machine(), "versions": {"ours": versions()},
              "input": meta, "figures": {}, "helpers": {}, "notes": NOTES}
    figs = result["figures"]
    py = sys.executable

    peer_base = [str(PEER_PY), str(HERE / "peer_datatrove.py"), "--warc", single["path"],
                 "--texts", str(WORK / "texts.jsonl"), "--lid", str(ROOT / "models" / "lid.176.ftz"),
                 "--work", str(WORK / "datatrove")]
    have_peer = PEER_PY.exists()
    if not have_peer:
        NOTES.append("datatrove peer skipped: benchmarks/.venv-datatrove missing (make bench creates it)")

    # Stages alone: ours (interleaved inside), then datatrove's on the same file and texts.
    ours = run_json("ours: stages, one core", pinned([py, str(HERE / "bench_phase1.py"), "--part", "stages", "--reps", str(reps)]))
    if ours:
        collect_ours(figs, ours, input_)
        NOTES.extend(ours.get("notes", []))
        result["texts"] = ours.get("texts")
    if have_peer and ours and not quick:
        peer = run_json("datatrove: stages, one core", pinned(peer_base + ["--configs", "", "--stages", "--reps", str(reps)]))
        if peer:
            collect_peer(figs, peer, input_, single["records"])
            result["versions"]["datatrove_venv"] = peer["versions"]

    # The whole phase 1, ours and datatrove's taken in turn, one run each per round, so the
    # ratios compare runs made under the same load.
    runs: dict = {}
    for _ in range(reps):
        for chain in ("matched", "full"):
            r = run_json(f"ours: phase 1 ({chain}), one core",
                         pinned([py, str(HERE / "bench_phase1.py"), "--part", "phase1", "--chain", chain, "--reps", "1"]))
            if r:
                merge_runs(runs.setdefault("ours", {}), r)
        if have_peer:
            cmd = peer_base + ["--reps", "1"] + (["--configs", "fast"] if quick else [])
            r = run_json("datatrove: phase 1, one core", pinned(cmd))
            if r:
                merge_runs(runs.setdefault("peer", {}), r)
                result["versions"]["datatrove_venv"] = r["versions"]
    # The whole main chain against the fastwarc+resiliparse bound, CPU seconds per process (issue 16),
    # on the real pages and a synthetic Common-Crawl-sized file (BENCH_CC_RECORDS, 0 = none).
    cc = "0" if quick else os.environ.get("BENCH_CC_RECORDS", "40000")
    r = run_json("ours: phase 1 vs bound, CPU seconds, one core",
                 pinned([py, str(HERE / "bench_phase1.py"), "--part", "ratio", "--reps", str(reps), "--cc-records", cc]))
    if r:
        result["helpers"]["phase1_vs_bound"] = {name: {"ratio": v["ratio"], "ratio_min": v["ratio_min"],
                                                       "ratio_max": v["ratio_max"], "reps": len(v["ratio_runs"]),
                                                       "records": v["records"]}
                                                for name, v in r["inputs"].items()}
    if "ours" in runs:
        collect_ours(figs, runs["ours"], input_)
        NOTES.extend(n for n in runs["ours"].get("notes", []) if n not in NOTES)
    if "peer" in runs:
        collect_peer(figs, runs["peer"], input_, single["records"])
    if not quick:
        dask = run_json("ours, Dask", [py, str(HERE / "bench_phase1.py"), "--part", "dask", "--reps", str(reps)])
        if dask:
            split = f"{len(meta['shards'])} files split from {Path(meta['source']).name} ({dask['input']['records']} records)"
            collect_ours(figs, dask, split)
        for key, script in HELPERS.items():
            if (HERE / script).exists():
                raw = run_json(script, [py, str(HERE / script)], timeout=HELPER_TIMEOUTS.get(key, HELPER_TIMEOUT_S))
                if raw is not None:
                    result["helpers"][key] = raw
            else:
                NOTES.append(f"{script} not present: its figures are missing")
    result["machine"]["loadavg_end"] = os.getloadavg()
    result["seconds"] = round(time.time() - t0, 1)
    compare(figs)
    (HERE / "results").mkdir(exist_ok=True)
    (HERE / "results" / "latest.json").write_text(json.dumps(result, indent=2, default=str))
    print(render(result))


def quality_sets(helpers: dict) -> list[str]:
    """Safety test-set recall / false rejection and PII test-split P/R, new next to previous."""
    out = []
    saf = (helpers.get("safety") or {}).get("safety", {}).get("test")
    if saf:
        out += ["", "Safety test set, test half (benchmarks/bench_safety.py; targets: recall >= 0.90, false "
                "rejection <= 0.02):", "", "| chain | recall | false rejection, clean + benign |", "|---|---:|---:|"]
        for who, label in (("new", "new (span-level, this checkout)"), ("prev", "previous span-level (5898349)"),
                           ("old", "old whole-document (e512905)")):
            r = saf.get(who, {}).get("chain")
            if r:
                out.append(f"| {label} | {r['recall']['rate']:.3f} ({r['recall']['rejected']}/{r['recall']['n']}) | "
                           f"{r['false_rejection']['rate']:.3f} ({r['false_rejection']['rejected']}/"
                           f"{r['false_rejection']['n']}) |")
    pii = (helpers.get("pii") or {}).get("pii", {}).get("test")
    if pii:
        out += ["", "PII spans, test split (benchmarks/bench_pii.py; previous = stages/pii.py at "
                f"{helpers['pii'].get('old_commit', '')[:10]}):", "",
                "| kind | precision | recall | previous precision | previous recall |", "|---|---:|---:|---:|---:|"]
        for kind, v in pii.items():
            out.append(f"| {kind} | {v['new']['precision']:.3f} | {v['new']['recall']:.3f} | "
                       f"{v['old']['precision']:.3f} | {v['old']['recall']:.3f} |")
    return out


def extraction_section(helpers: dict) -> list[str]:
    """Extraction test-split F1 per page type vs resiliparse and trafilatura, and the speed ratios."""
    if not helpers.get("extraction"):
        return []
    from bench_extraction import markdown

    return markdown(helpers["extraction"])


def render(result: dict) -> str:
    """The Markdown report of a result (also: ``run.py --render results/latest.json``)."""
    figs = result["figures"]
    compare(figs)
    flat: dict = {}
    for key, raw in result["helpers"].items():
        flat[key] = {}
        flatten(key, raw, flat[key])
    m = result["machine"]
    s = result["input"]["single"]
    input_ = f"{Path(result['input']['source']).name} ({s['records']} records, {s['bytes'] / 1e6:.1f} MB, sha256 {s['sha256'][:12]})"
    lines = [f"## datapipe benchmarks ({'quick, ' if result['quick'] else ''}{result['reps']} repetition(s) per figure, "
             f"median; {result['seconds']:.0f} s)", "",
             f"- machine: {m['cpu_model']}, {m['cores']} cores; load average {m['loadavg_start'][0]:.1f} at start, "
             f"{m['loadavg_end'][0]:.1f} at end (shared machine: the spread shows the noise)",
             f"- input: {input_}; one core = taskset -c 0, OMP_NUM_THREADS=1",
             "- ours: " + ", ".join(f"{k} {v}" for k, v in result["versions"]["ours"].items()),
             "- peer: " + ", ".join(f"{k} {v}" for k, v in result["versions"].get("datatrove_venv", {}).items()),
             "- ratio = this figure's rate / the compared figure's rate, both from this run (vs a bound: the share "
             "of the bound's speed we keep; vs ours: the peer's speed relative to ours). Where the runs were taken "
             "side by side (A B A B, or the same round) it is the median of the per-run ratios.",
             "", table(figs, flat), *quality_sets(result["helpers"]), *extraction_section(result["helpers"]), "",
             "Where phase 1's time goes (last run):", profile(figs)]
    if result["notes"]:
        lines += ["", "Notes:"] + [f"- {n}" for n in result["notes"]]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
