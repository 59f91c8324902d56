"""`make bench-ablate`: the shipped CPU ablation (manifests/ablation.yaml on runs/sample), timed.

Runs ``datapipe ablate manifests/ablation.yaml`` into a fresh output folder (nothing resumed),
then prints what a researcher needs to trust the ranking: the seed-to-seed Spearman of the
ranking, the noise floor per held-out set and the margin, the decision, and the cost -- wall
time, CPU time of the whole process tree and per proxy run, and the machine's 1-minute load
average sampled every 5 s during the run (min / mean / max; on a shared machine the wall time alone
says little) -- and the regression's out-of-sample figures on the held-out mixtures.

    .venv/bin/python benchmarks/bench_ablate_cpu.py [--manifest manifests/ablation.yaml] [--out DIR]

Writes benchmarks/results/ablate_cpu.json. Needs a finished ``make run`` (runs/sample).
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class LoadSampler:
    """``os.getloadavg()[0]`` every ``period`` seconds in a thread, while in the ``with`` block."""

    def __init__(self, period: float = 5.0):
        self.samples: list[float] = []
        self._stop, self._period = threading.Event(), period
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self):
        while True:
            self.samples.append(os.getloadavg()[0])
            if self._stop.wait(self._period):
                return

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def summary(self) -> dict:
        s = self.samples or [float("nan")]
        return {"samples": len(self.samples), "min": round(min(s), 2), "mean": round(sum(s) / len(s), 2),
                "max": round(max(s), 2)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--manifest", default=str(ROOT / "manifests" / "ablation.yaml"))
    ap.add_argument("--out", default=str(ROOT / "runs" / "sample" / "ablation" / "bench-cpu"))
    ap.add_argument("--json", default=str(ROOT / "benchmarks" / "results" / "ablate_cpu.json"))
    a = ap.parse_args(argv)
    out = Path(a.out)
    if out.exists():
        shutil.rmtree(out)  # a fresh run: resumed proxies would time nothing
    cmd = [sys.executable, "-m", "datapipe.cli.main", "ablate", a.manifest, "--output", str(out), "--no-progress", "--json"]
    load0, t0 = os.getloadavg(), time.time()
    with LoadSampler() as load:
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    wall, load1 = time.time() - t0, os.getloadavg()
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    sys.stderr.write(p.stderr[-4000:])
    if p.returncode not in (0, 1):
        print(f"datapipe ablate failed ({p.returncode})", file=sys.stderr)
        return p.returncode
    summary = json.loads((out / "summary.json").read_text())
    runs = [json.loads(f.read_text()) for f in sorted(out.glob("mixtures/*/seed-*/metrics.json"))]
    rep = summary["reproducibility"]
    report = {"command": " ".join(cmd[1:]), "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "cores": os.cpu_count(), "load_before": [round(x, 2) for x in load0],
              "load_after": [round(x, 2) for x in load1], "load_during": load.summary(), "wall_s": round(wall, 1),
              "cpu_s_user": round(ru.ru_utime, 1), "cpu_s_system": round(ru.ru_stime, 1),
              "cpu_s_process_tree": round(ru.ru_utime + ru.ru_stime, 1),
              "cpu_s_proxy_runs": round(sum(r.get("cpu_s") or 0 for r in runs), 1), "proxy_runs": len(runs),
              "mixtures": len(summary["ranking"]), "duplicates": summary["duplicates"],
              "seed_spearman": rep["spearman"], "seed_spearman_per_set": rep["spearman_sets"],
              "noise_floor": rep["floor"], "noise_floor_objective": rep["floor_objective"], "margin": rep["margin"],
              "decision": summary["recommended"]["status"], "reason": summary["recommended"]["reason"],
              "ranking": summary["ranking"], "loo_spearman": summary["recommended"]["loo_spearman"],
              "loo_mae": summary["recommended"]["loo_mae"], "holdout": summary["recommended"]["holdout"],
              "holdout_mixtures": summary.get("holdout_mixtures", [])}
    Path(a.json).parent.mkdir(parents=True, exist_ok=True)
    Path(a.json).write_text(json.dumps(report, indent=2))
    fl = ", ".join(f"{k} {v:.4f}" for k, v in (rep["floor"] or {}).items())
    print(f"shipped CPU ablation: {report['mixtures']} mixtures x {rep['seeds']} seeds ({len(runs)} proxy runs), "
          f"wall {wall:.0f} s, CPU {report['cpu_s_process_tree']:.0f} s (proxies {report['cpu_s_proxy_runs']:.0f} s) "
          f"on {os.cpu_count()} cores; 1-min load during the run {report['load_during']['min']:.1f} to "
          f"{report['load_during']['max']:.1f} (mean {report['load_during']['mean']:.1f})")
    print(f"seed-to-seed Spearman of the ranking: {rep['spearman']}")
    print(f"noise floor (nats/token): objective {rep['floor_objective']}; {fl}; margin {rep['margin']}")
    h = report["holdout"]
    print(f"regression: leave-one-out Spearman {report['loo_spearman']} (MAE {report['loo_mae']}) over the fitted "
          f"mixtures; {h['n']} held-out mixtures never fitted: MAE {h['mae']} vs {h['baseline_mae']} for the "
          f"mean, Spearman {h['spearman']}")
    print(f"decision: {report['decision']}: {report['reason']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
