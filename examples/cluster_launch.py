"""Run a job on a Dask cluster you started yourself, the way a multi-node launch works.

    python examples/cluster_launch.py [--workers 2] [--output runs/cluster] [--limit 40]

Starts a scheduler and worker processes with the ``dask`` command line (on a real cluster:
``dask scheduler`` on one node and ``dask worker tcp://SCHEDULER:8786 --nworkers $(nproc)
--nthreads 1`` on every worker node, or dask-jobqueue / dask-kubernetes), then sends the main
manifest there with ``datapipe run --scheduler``. Every node must see the output location and
have this package, ``models/`` and the shared lists installed. The workers start with datapipe's
environment (``procenv.worker_environ``: malloc thresholds, capped thread pools).
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

from datapipe.engine import procenv

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("DATAPIPE_SHARED_DATA", HERE.parents[1] / "shared" / "data"))
BIN = Path(sys.executable).parent


def wait_for(path: Path, timeout_s: float = 60) -> None:
    t0 = time.time()
    while not path.exists():
        if time.time() - t0 > timeout_s:
            raise TimeoutError(f"no scheduler file at {path} after {timeout_s} s")
        time.sleep(0.2)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--input", default=str(SHARED / "warc" / "dolma_wget_sample-0000.warc.gz"))
    ap.add_argument("--output", default="runs/cluster")
    ap.add_argument("--limit", type=int, default=40)
    a = ap.parse_args(argv)
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    sched_file = Path(a.output + ".scheduler.json").resolve()
    sched_file.unlink(missing_ok=True)
    env = {**os.environ, **procenv.worker_environ(1)}
    procs = [subprocess.Popen([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                               "--dashboard-address", "127.0.0.1:0", "--scheduler-file", str(sched_file)], env=env)]
    try:
        wait_for(sched_file)
        procs.append(subprocess.Popen([str(BIN / "dask"), "worker", "--scheduler-file", str(sched_file),
                                       "--nworkers", str(a.workers), "--nthreads", "1", "--memory-limit", "2GiB"], env=env))
        import json

        address = json.loads(sched_file.read_text())["address"]
        from distributed import Client

        with Client(address, timeout=60) as c:
            c.wait_for_workers(a.workers, timeout=120)
        cmd = [str(BIN / "datapipe"), "run", str(HERE.parent / "manifests" / "cc-2026.yaml"), "--input", a.input,
               "--output", a.output, "--limit", str(a.limit), "--scheduler", address, "--no-progress"]
        print("$", " ".join(cmd), flush=True)
        return subprocess.run(cmd, check=False).returncode
    finally:
        for p in reversed(procs):
            p.terminate()
        for p in procs:
            p.wait(timeout=30)
        sched_file.unlink(missing_ok=True)


if __name__ == "__main__":
    sys.exit(main())
