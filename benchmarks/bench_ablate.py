"""Benchmark of ``datapipe ablate``: N mixtures x a ~20M-parameter proxy x ~5M tokens each.

Meant for a GPU machine (nvidia-h200 through the device tool); runs on CPU too with small
numbers. Samples GPU utilisation with ``nvidia-smi`` every 200 ms while the proxies train and
writes a JSON report: wall time per mixture, tokens/s, mean/median utilisation, peak memory.

    python benchmarks/bench_ablate.py --run RUN_DIR --out OUT [--mixtures 10] [--budget 5000000]

RUN_DIR is a finished run (its ``tokens/index.json``); smaller samples are repeated within
``--max-epochs`` to fill the budget.
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", required=True)
    ap.add_argument("--out", default=None)
    ap.add_argument("--mixtures", type=int, default=10)
    ap.add_argument("--budget", type=int, default=5_000_000)
    ap.add_argument("--max-epochs", type=float, default=32)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--d-model", type=int, default=256)
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--json", default=None, help="write the report here too")
    a = ap.parse_args(argv)

    from datapipe.ablate.manifest import load_ablation_manifest
    from datapipe.ablate.runner import run_ablation

    out = Path(a.out or tempfile.mkdtemp(prefix="bench-ablate-"))
    body = {"name": "bench", "run": a.run, "output": str(out), "seed": 0, "budget_tokens": a.budget,
            "max_epochs": a.max_epochs,
            "mixtures": {"dirichlet": {"n": a.mixtures, "concentration": 1.0, "min_weight": 0.05}},
            "heldout": {"fraction": 0.05, "max_tokens": 100_000},
            "proxy": {"layers": a.layers, "d_model": a.d_model, "heads": a.heads, "seq_len": a.seq_len,
                      "batch_size": a.batch_size, "lr": 1e-3, "eval_tokens": 100_000},
            "device": a.device, "threads": 4}
    out.mkdir(parents=True, exist_ok=True)
    (out / "bench.yaml").write_text(yaml.safe_dump(body))
    m = load_ablation_manifest(out / "bench.yaml")
    marks: list[tuple[str, float]] = []

    def log(line: str) -> None:
        marks.append((line, time.time()))
        print(line, flush=True)

    t0 = time.time()
    with GpuSampler() as gpu:
        res = run_ablation(m, log=log)
    t1 = time.time()
    # per-mixture windows: from the previous progress line to this one
    starts = [t for line, t in marks if "to train" in line][:1] or [t0]
    per = []
    prev = starts[0]
    for line, t in marks:
        if line.strip().startswith("["):
            mid = line.split()[1]
            rec = next(r for r in res["mixtures"] if r["mixture_id"] == mid)
            per.append({"mixture_id": mid, "wall_s": round(t - prev, 2), "train_s": rec.get("train_s"),
                        "tokens_trained": rec.get("tokens_trained"), "steps": rec.get("steps"),
                        "tokens_per_s": round(rec.get("tokens_trained", 0) / max(rec.get("train_s") or 1e-9, 1e-9)),
                        "gpu": gpu.window(prev, t),
                        "loss": {k: round(v["loss"], 4) for k, v in rec["eval"].items()}})
            prev = t
    first = res["mixtures"][0]
    report = {"mixtures": len(res["mixtures"]), "trained": res["trained"], "failed": len(res["failed"]),
              "params": first.get("params"), "device": first.get("device"), "budget_tokens": a.budget,
              "total_wall_s": round(t1 - t0, 2), "setup_s": round(starts[0] - t0, 2),
              "gpu_while_training": gpu.window(starts[0], t1), "per_mixture": per,
              "best": res["analysis"]["best"] if res["analysis"] else None,
              "recommended": res["analysis"]["recommended"] if res["analysis"] else None}
    text = json.dumps(report, indent=2)
    print(text)
    if a.json:
        Path(a.json).write_text(text)
    return 0 if not res["failed"] else 1


if __name__ == "__main__":
    sys.exit(main())
