"""Where a one-page run's later phases spend their time: every Dask task's worker, start and
compute seconds, and the phase steps' start times (a diagnostic; no figure of merit).

    python3 benchmarks/device/task_stream.py [--workers 16]

Runs the main manifest on record 1 of realpages-1171 (as bench_fixed_cost.py) with its own
LocalCluster and prints one line per task: seconds since the run started, compute seconds,
the worker's port and the task key. A dedup step whose task lands on a worker that ran no
phase-1 task shows as a gap before it.
"""
import argparse
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workers", type=int, default=16)
    a = ap.parse_args()
    from bench_fixed_cost import MANIFEST, one_record
    from distributed import get_task_stream

    from datapipe.engine import runner
    from datapipe.manifest.load import load_manifest

    with tempfile.TemporaryDirectory() as tmp:
        inp = one_record(1, Path(tmp) / "one.warc.gz")
        m = load_manifest(MANIFEST, {"inputs.paths": [str(inp)], "inputs.crawl": None, "output": f"{tmp}/out",
                                     "cluster.dashboard_address": "127.0.0.1:0", "cluster.workers": a.workers})
        inputs = runner.check_before_work(m)
        marks = []
        with runner.dask_client(m, quiet=True) as client:
            client.wait_for_workers(a.workers)
            t0 = time.time()
            with get_task_stream(client) as ts:
                runner.run(m, inputs, client=client, on_phase=lambda p, s: marks.append((time.time() - t0, p, s)))
            marks.append((time.time() - t0, "end", ""))
    for t, p, s in marks:
        print(f"{t:7.3f} step {p}: {s}")
    for task in sorted(ts.data, key=lambda d: d["startstops"][0]["start"]):
        for ss in task["startstops"]:
            key = task["key"] if isinstance(task["key"], str) else task["key"][0]
            print(f'{ss["start"] - t0:7.3f} {ss["stop"] - ss["start"]:6.3f} {ss["action"]:8s} '
                  f'{task["worker"].rsplit(":", 1)[-1]} {key[:90]}')


if __name__ == "__main__":
    main()
