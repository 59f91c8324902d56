"""Benchmark of ``datapipe ablate`` on a GPU: the shipped ablation with a ~20M-parameter proxy.

Loads ``manifests/ablation.yaml`` (what ships) and replaces only the proxy (8 layers, d_model
256, seq_len 512, the full GPT-2 vocabulary: ~19.5M parameters), the budget (``--budget``, 20M
tokens per mixture), ``max_epochs`` (the sample's smaller domains must repeat to fill it), the
number of mixtures and the seeds. Samples GPU utilisation with ``nvidia-smi`` every 200 ms and
writes a JSON report: wall time per mixture, tokens/s, utilisation, peak memory.

``--concurrency 1 4`` first runs a probe (``--probe-mixtures`` mixtures at ``--probe-budget``)
once per level: N proxies at a time on one GPU as N Dask worker processes, and reports the
aggregate training tokens/s of each level; the main run then uses the fastest level.

    python benchmarks/bench_ablate.py --run runs/sample --out OUT [--mixtures 10] [--budget 20000000]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


class GpuSampler:
    """``nvidia-smi`` utilisation.gpu / memory.used samples (every ``period_ms``) in a thread."""

    def __init__(self, period_ms: int = 200):
        self.samples: list[tuple[float, float, float]] = []  # (time, util %, MiB)
        self._stop = threading.Event()
        self._period = period_ms / 1000
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.available = shutil.which("nvidia-smi") is not None

    def _loop(self):
        while not self._stop.is_set():
            r = subprocess.run(["nvidia-smi", "--query-gpu=utilization.gpu,memory.used",
                                "--format=csv,noheader,nounits", "-i", "0"], capture_output=True, text=True)
            if r.returncode == 0 and r.stdout.strip():
                u, mem = (float(x) for x in r.stdout.strip().splitlines()[0].split(","))
                self.samples.append((time.time(), u, mem))
            self._stop.wait(self._period)

    def __enter__(self):
        if self.available:
            self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self.available:
            self._thread.join()

    def window(self, t0: float, t1: float) -> dict:
        u = [s[1] for s in self.samples if t0 <= s[0] <= t1]
        m = [s[2] for s in self.samples if t0 <= s[0] <= t1]
        if not u:
            return {"samples": 0}
        return {"samples": len(u), "util_mean": round(statistics.mean(u), 1), "util_median": statistics.median(u),
                "mem_peak_mib": max(m)}



def _manifest(a, out: Path, n_mix: int, budget: int, workers: int, seeds: list[int]):
    from datapipe.ablate.manifest import load_ablation_manifest

    body = yaml.safe_load((ROOT / "manifests" / "ablation.yaml").read_text())
    body.update({"run": a.run, "output": str(out), "budget_tokens": budget, "max_epochs": a.max_epochs,
                 "seeds": seeds, "device": a.device, "threads": 4})
    body["mixtures"]["dirichlet"]["n"] = n_mix - len(body["mixtures"].get("explicit") or [])
    body["proxy"] = {"layers": a.layers, "d_model": a.d_model, "heads": a.heads, "seq_len": a.seq_len,
                     "batch_size": a.batch_size, "lr": a.lr, "eval_tokens": a.eval_tokens}
    body["heldout"]["max_tokens"] = max(body["heldout"]["max_tokens"], a.eval_tokens)
    body["cluster"] = {"workers": workers}
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.yaml").write_text(yaml.safe_dump(body))
    return load_ablation_manifest(out / "bench.yaml")


def _timed(m, label: str) -> dict:
    """Run one ablation; per-run windows run from the previous progress line to this one."""
    from datapipe.ablate.runner import run_ablation

    marks: list[tuple[str, float]] = []

    def log(line: str) -> None:
        marks.append((line, time.time()))
        print(f"[{label}] {line}", flush=True)

    t0 = time.time()
    with GpuSampler() as gpu:
        res = run_ablation(m, log=log)
    t1 = time.time()
    start = next((t for line, t in marks if "to train" in line), t0)
    runs = {(r["mixture_id"], x["seed"]): x for r in res["mixtures"] for x in r["runs"]}
    per, prev = [], start
    for line, t in marks:
        parts = line.split()
        if parts and parts[0].startswith("[") and len(parts) > 3 and parts[2] == "seed":
            x = runs.get((parts[1], int(parts[3])), {})
            per.append({"mixture_id": parts[1], "seed": int(parts[3]), "wall_s": round(t - prev, 2),
                        "train_s": x.get("train_s"), "tokens_trained": x.get("tokens_trained"), "steps": x.get("steps"),
                        "tokens_per_s": round((x.get("tokens_trained") or 0) / max(x.get("train_s") or 1e-9, 1e-9)),
                        "gpu": gpu.window(prev, t),
                        "loss": {k: round(v["loss"], 4) for k, v in (x.get("eval") or {}).items()}})
            prev = t
    tokens = sum(x.get("tokens_trained") or 0 for x in runs.values())
    first = next(iter(runs.values()), {})
    an = res["analysis"] or {}
    return {"label": label, "workers": m.cluster.workers, "mixtures": len(res["mixtures"]), "runs": len(runs),
            "failed": res["failed"], "params": first.get("params"), "device": first.get("device"),
            "budget_tokens": m.budget_tokens, "total_wall_s": round(t1 - t0, 2), "setup_s": round(start - t0, 2),
            "train_wall_s": round(t1 - start, 2), "aggregate_tokens_per_s": round(tokens / max(t1 - start, 1e-9)),
            "gpu_while_training": gpu.window(start, t1), "per_run": per,
            "reproducibility": an.get("reproducibility"), "recommended": an.get("recommended"),
            "ranking": an.get("ranking"), "duplicates": res["duplicates"], "flags": res["flags"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--mixtures", type=int, default=10)
    ap.add_argument("--budget", type=int, default=20_000_000)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0])
    ap.add_argument("--max-epochs", type=float, default=200)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--eval-tokens", type=int, default=100_000, help="scored per held-out set")
    ap.add_argument("--concurrency", type=int, nargs="*", default=[], help="probe these proxies-at-a-time levels")
    ap.add_argument("--probe-mixtures", type=int, default=4)
    ap.add_argument("--probe-budget", type=int, default=2_000_000)
    ap.add_argument("--json", default=None, help="write the report here too")
    a = ap.parse_args(argv)

    out = Path(a.out or tempfile.mkdtemp(prefix="bench-ablate-"))
    report = {"command": " ".join(sys.argv), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "probe": []}
    for k in a.concurrency:
        m = _manifest(a, out / f"probe-{k}", a.probe_mixtures, a.probe_budget, k, [0])
        report["probe"].append(_timed(m, f"probe x{k}"))
        print(json.dumps({kk: v for kk, v in report["probe"][-1].items() if kk != "per_run"}), flush=True)
        if a.json:
            Path(a.json).write_text(json.dumps(report, indent=2))
    best = max(report["probe"], key=lambda r: r["aggregate_tokens_per_s"])["workers"] if report["probe"] else 1
    m = _manifest(a, out / "main", a.mixtures, a.budget, best, a.seeds)
    report["main"] = _timed(m, f"main x{best}")
    text = json.dumps(report, indent=2)
    print(text)
    if a.json:
        Path(a.json).write_text(text)
    return 0 if not report["main"]["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
