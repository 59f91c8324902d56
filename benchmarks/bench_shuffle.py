"""Shuffle choice for dedup (issue 17): our run-file shuffle (``shuffle_store``: one file per map
task, reducers read byte ranges) vs Dask's P2P shuffle (``dask.dataframe.shuffle(method="p2p")``)
on the LSH step's rows: ``bands x docs`` rows of (band hash uint64, node uint64), S map
partitions, P = S reduce partitions; each reducer counts its rows.

    PYTHONPATH=/path/to/pandas python benchmarks/bench_shuffle.py --docs 200000,1000000 --repeats 3

(pandas is not a dependency of the pipeline: install it apart, e.g. ``pip install --target``.)
Reports per method the median wall time [min, max] of ``--repeats`` interleaved runs, peak
worker RSS (psutil, sampled every 0.1 s) and files left on the shared store by the shuffle.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import threading
import time

import numpy as np
import pyarrow as pa

BANDS = 18


def _rows(k: int, per: int) -> pa.Table:
    rng = np.random.default_rng(k)
    n = per * BANDS
    return pa.table({"bh": rng.integers(0, 2**63, n, dtype=np.uint64),
                     "node": np.repeat(np.arange(per, dtype=np.uint64) | np.uint64(k << 32), BANDS)})


def _map_runs(work, k, per, nparts):
    from datapipe.engine.shuffle_store import partition_of

    t = _rows(k, per)
    work.scatter("bands", t, partition_of(t.column("bh").to_numpy(), nparts), f"s{k}")
    return t.num_rows


def _reduce_runs(work, k):
    schema = pa.schema([("bh", pa.uint64()), ("node", pa.uint64())])
    return sum(seg.num_rows for seg in work.segments("bands", k, schema))


def run_files(client, root, s, per):
    from datapipe.engine.shuffle_store import Store

    work = Store(root)
    client.gather(client.map(_map_runs, [work] * s, range(s), [per] * s, [s] * s, pure=False))
    out = client.gather(client.map(_reduce_runs, [work] * s, range(s), pure=False))
    files = len(work.glob("bands/*"))
    work.rm("bands")
    return sum(out), files


def _pandas_part(k, per):
    df = _rows(k, per).to_pandas()
    df["bh"] = df["bh"].astype("uint64")
    return df


def run_p2p(client, root, s, per):
    import dask
    import dask.dataframe as dd

    ddf = dd.from_map(_pandas_part, list(range(s)), per=per, enforce_metadata=False)
    with dask.config.set({"dataframe.shuffle.method": "p2p"}):
        sh = ddf.shuffle(on="bh", npartitions=s)
        counts = sh.map_partitions(len, meta=(None, "int64")).compute()
    return int(counts.sum()), 0


class _Rss(threading.Thread):
    def __init__(self, pids):
        import psutil

        super().__init__(daemon=True)
        self.procs, self.peak, self.stop = [psutil.Process(p) for p in pids], 0, threading.Event()

    def run(self):
        while not self.stop.is_set():
            for p in self.procs:
                try:
                    self.peak = max(self.peak, p.memory_info().rss)
                except Exception:  # noqa: BLE001
                    pass
            self.stop.wait(0.1)


def main() -> None:
    from distributed import Client, LocalCluster

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--docs", default="200000")
    ap.add_argument("--docs-per-part", type=int, default=25000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    a = ap.parse_args()
    out = []
    with LocalCluster(n_workers=a.workers, threads_per_worker=1, processes=True, dashboard_address="127.0.0.1:0",
                      memory_limit=0) as lc, Client(lc) as cl:
        pids = list(cl.run(os.getpid).values())
        for n in (int(x) for x in a.docs.split(",")):
            s = max(1, n // a.docs_per_part)
            res = {"runs": [], "p2p": []}
            peak = {"runs": 0, "p2p": 0}
            files = {}
            for _ in range(a.repeats):
                for name, fn in (("runs", run_files), ("p2p", run_p2p)):   # interleaved
                    root = tempfile.mkdtemp(prefix="bench_shuffle_")
                    cl.run(lambda: __import__("gc").collect())
                    rss = _Rss(pids)
                    rss.start()
                    t = time.perf_counter()
                    rows, files[name] = fn(cl, root, s, a.docs_per_part)
                    res[name].append(time.perf_counter() - t)
                    rss.stop.set()
                    rss.join()
                    peak[name] = max(peak[name], rss.peak)
                    shutil.rmtree(root, ignore_errors=True)
                    assert rows == s * a.docs_per_part * BANDS, (name, rows)
            r = {"docs": s * a.docs_per_part, "rows": s * a.docs_per_part * BANDS, "map_parts": s, "reduce_parts": s}
            for name in res:
                v = res[name]
                r[name] = {"wall_s_median": round(statistics.median(v), 2), "range": [round(min(v), 2), round(max(v), 2)],
                           "peak_worker_rss_mb": round(peak[name] / 2**20), "files_on_store": files[name]}
            ratios = [p / q for p, q in zip(res["p2p"], res["runs"])]
            r["p2p_over_runs_wall"] = {"median": round(statistics.median(ratios), 2),
                                       "range": [round(min(ratios), 2), round(max(ratios), 2)]}
            out.append(r)
            print(json.dumps(r), flush=True)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
