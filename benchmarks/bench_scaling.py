"""Phase-1 scaling: throughput of the main job's stage chain with 1, 2, 4, 8, 16 Dask workers.

    python benchmarks/bench_scaling.py [--files 32] [--records 400] [--workers 1,2,4,8,16]
                                       [--source realpages-1171.warc.gz] [--json out.json]
                                       [--split-bytes N]   # e.g. --files 4 --records 40000 --split-bytes 16000000

Input: ``--files`` WARC files built from the real ``realpages-1171.warc.gz`` (each file takes
``--records`` consecutive records, starting at a different offset, wrapping around), every record
given a distinct WARC-Record-ID (uuid5 of the original id and the file number), so documents ids
differ across files as in a real crawl. Each record is its own gzip member, as in Common Crawl.

For each worker count ``runner.local_cluster`` (one thread per worker process) is started and warmed (stage
chain built on every worker: models and lists loaded), then ``runner.run`` of phase 1 (the
manifest's stages; dedup/mix/tokenize off) is timed through ``cluster.address``. Reported:
records/s, speedup and parallel efficiency ``T(1) / (n * T(n))``, and whether the documents
shards are byte-identical across worker counts. Beside the stages' wall seconds, the CPU seconds of
the run per kind of process (workers, their sandbox children, the process of the client, the
scheduler and the nannies; psutil before and after): per-record CPU that stays flat while stage wall time grows
means the cores were shared, not the work heavier.

``1p`` in ``--workers`` is one worker whose threads and sandbox child are pinned to one core (the
last of this process's CPUs) after the warm-up: the single-core run that parallel efficiency is
defined against; ``16p`` pins worker i (and its child) to core i. Unpinned, a lone worker's sandbox child runs on an idle second core beside it
(its own cache, and the two overlap a little: ~1.03 cores in use on the device machine), which a
full host cannot give each of its workers. With a ``1p`` run in a repetition, the 16-worker rows
also get ``efficiency_vs_one_core`` = records/s(n) / (n * records/s(1p)).

Repeated (``--reps R``): the worker counts run in turn R times (1, 16, 1, 16, ...), after one
discarded 1-worker run on 2 files (a fresh machine's first run pays first-use costs in its timed
part: page cache, bytecode, numba's cache), and efficiency is rate-based per repetition,
``records/s(n) / (n * records/s(1))`` of the same repetition, printed as median [min, max].
``--baseline-files K`` gives the 1-worker runs the first K files only (same per-record work, a
16th of the time); shards are then compared between runs of the same files.
"""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
import types
import uuid
import zlib
from multiprocessing import Pool
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
_ID = re.compile(rb"(WARC-Record-ID:[ \t]*)<([^>\r\n]*)>", re.IGNORECASE)


def record_spans(path: Path) -> list[tuple[int, int]]:
    """(start, end) compressed byte span of every record (one gzip member each)."""
    from fastwarc.warc import ArchiveIterator

    with open(path, "rb") as fh:
        starts = [r.stream_pos for r in ArchiveIterator(fh, parse_http=False, auto_decode="none")]
    return list(zip(starts, starts[1:] + [path.stat().st_size]))


def _make_file(job) -> tuple[str, int]:
    src, spans, k, records, dest = job
    data = Path(src).read_bytes()
    n = len(spans)
    with open(dest, "wb") as out:
        for j in range(records):
            a, b = spans[(k * 97 + j) % n]
            raw = zlib.decompressobj(31).decompress(data[a:b])

            def new_id(m):
                rid = uuid.uuid5(uuid.NAMESPACE_URL, f"{m.group(2).decode('latin-1')}#{k}")
                return m.group(1) + f"<urn:uuid:{rid}>".encode()
            raw, count = _ID.subn(new_id, raw, count=1)
            assert count == 1, "record without WARC-Record-ID"
            out.write(gzip.compress(raw, compresslevel=1, mtime=0))
    return dest, records


def build_inputs(src: Path, files: int, records: int, dest: Path, procs: int) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    spans = record_spans(src)
    jobs = [(str(src), spans, k, records, str(dest / f"rp-{k:03d}.warc.gz")) for k in range(files)]
    with Pool(procs) as pool:
        done = pool.map(_make_file, jobs)
    return [d for d, _ in done]


def _warm(stages):
    from datapipe.engine.task import build_chain

    build_chain(stages)
    return os.getpid()


def _cpu() -> dict:
    """CPU seconds (user + system) so far of this worker process and its live children (the
    extraction sandbox). A LocalCluster's nannies live in the client's process, counted there."""
    import psutil

    p = psutil.Process()
    t = p.cpu_times()
    kids = sum(c.cpu_times().user + c.cpu_times().system for c in p.children(recursive=True))
    return {"worker": t.user + t.system, "sandbox": kids}


def _pin(core: int) -> int:
    """Restrict this worker process (every thread of it, so the executor thread and the event loop
    too) and its live children (the extraction sandbox) to ``core``; a child started later
    inherits the starting thread's set. Returns how many threads and children were pinned."""
    import psutil

    tids = [int(t) for t in os.listdir("/proc/self/task")]
    for tid in tids:
        os.sched_setaffinity(tid, {core})
    kids = psutil.Process().children(recursive=True)
    for k in kids:
        for tid in os.listdir(f"/proc/{k.pid}/task"):
            os.sched_setaffinity(int(tid), {core})
    return len(tids) + len(kids)


def run_once(manifest_path: Path, inputs: list[str], out: Path, n: int, split_bytes: int | None = None,
             pin: int | None = None) -> dict:
    from distributed import Client

    from datapipe.engine import runner
    from datapipe.manifest.load import load_manifest

    # No HTML report (~10 s after phase 1, not what is measured; and it needs duckdb/matplotlib).
    report = types.ModuleType("datapipe.stages.phases.report.html")
    report.write_report = lambda *a, **k: None
    sys.modules["datapipe.stages.phases.report.html"] = report
    # The LocalCluster ``datapipe run`` starts (worker environment: datapipe/engine/procenv.py).
    cluster = runner.local_cluster(n, threads_per_worker=1, memory_limit="auto", dashboard_address="127.0.0.1:0")
    try:
        with Client(cluster) as c:
            m = load_manifest(manifest_path, {"inputs.paths": inputs, "inputs.crawl": None, "output": str(out),
                                              "cluster.address": cluster.scheduler_address,
                                              "dedup": None, "mix": None, "tokenize": None,
                                              **({"inputs.split_bytes": split_bytes} if split_bytes is not None else {})})
            t0 = time.perf_counter()
            c.run(_warm, m.effective_stages() if hasattr(m, "effective_stages") else m.stages)
            warm_s = time.perf_counter() - t0
            if pin is not None:  # after the warm-up: its sandbox child exists by then
                cores = sorted(os.sched_getaffinity(0))
                for i, addr in enumerate(sorted(c.scheduler_info()["workers"])):  # worker i on core i
                    c.run(_pin, cores[(pin + i) % len(cores)], workers=[addr])
            done_at = []
            cpu0, main0 = c.run(_cpu), time.process_time()
            t0 = time.perf_counter()
            res = runner.run(m, inputs, progress=lambda *a: done_at.append(time.perf_counter()))
            total_s = time.perf_counter() - t0
            secs = max(done_at) - t0  # phase 1: until the last file's task is done
            cpu1, main_s = c.run(_cpu), time.process_time() - main0
            # Where the CPU went (the whole run: phase 1 + verify): summed over workers, per kind
            # of process, and this process (client, scheduler, nannies); a sandbox child that restarted
            # loses its time (reported as missing workers in "cpu_workers").
            cpu = {k: round(sum(cpu1[w][k] - cpu0[w][k] for w in cpu1 if w in cpu0), 2)
                   for k in ("worker", "sandbox")}
            cpu["client_scheduler"] = round(main_s, 2)
            cpu["cpu_workers"] = len(set(cpu0) & set(cpu1))
    finally:
        cluster.close()
    led = res.ledger.to_dict()["stages"]
    docs = hashlib.sha256()
    for f in sorted((out / "documents").glob("*.parquet")):
        docs.update(f.name.encode() + f.read_bytes())
    stage_s = {k: round(v.get("seconds", 0), 2) for k, v in led.items()}
    return {"workers": n, "pinned_core": pin, "seconds": round(secs, 3), "run_total_s": round(total_s, 3), "warmup_s": round(warm_s, 3),
            "stage_seconds": stage_s, "cpu_seconds": cpu,
            "records": led["read"]["in"], "kept": res.ledger.kept,
            "records_per_s": round(led["read"]["in"] / secs, 2), "documents_sha256": docs.hexdigest()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    shared = Path(os.environ.get("DATAPIPE_SHARED_DATA", REPO.parent / "shared" / "data"))
    ap.add_argument("--source", type=Path, default=shared / "warc" / "realpages-1171.warc.gz")
    ap.add_argument("--manifest", type=Path, default=REPO / "manifests" / "cc-2026.yaml")
    ap.add_argument("--files", type=int, default=32)
    ap.add_argument("--records", type=int, default=400)
    ap.add_argument("--workers", default="1,2,4,8,16",
                    help="worker counts; 1p = one worker with its threads and sandbox child on one core")
    ap.add_argument("--work", type=Path, default=None, help="scratch directory (default: a temp dir)")
    ap.add_argument("--split-bytes", type=int, default=None,
                    help="inputs.split_bytes (gzip WARC files cut into byte-range tasks at member starts); "
                         "default: the manifest's")
    ap.add_argument("--reps", type=int, default=1, help="worker counts run in turn this many times (see above)")
    ap.add_argument("--baseline-files", type=int, default=0,
                    help="1-worker runs read only the first K files (0 = all)")
    ap.add_argument("--json", type=Path, default=HERE / "results" / "scaling.json")
    a = ap.parse_args()
    runs_spec = [(int(x.rstrip("p")), x.endswith("p")) for x in a.workers.split(",")]
    counts = sorted({n for n, _ in runs_spec})
    last_core = max(os.sched_getaffinity(0))
    work = a.work or Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    t0 = time.perf_counter()
    inputs = build_inputs(a.source, a.files, a.records, work / "input", max(counts))
    print(f"built {len(inputs)} files x {a.records} records in {time.perf_counter() - t0:.1f} s "
          f"({sum(os.path.getsize(p) for p in inputs) / 1e6:.0f} MB)", flush=True)
    if a.reps > 1:  # discarded: first-use costs of a fresh machine land in it
        discard = run_once(a.manifest, inputs[:2], work / "out-discard", 1, a.split_bytes)
        print(f"discarded first run: {discard['records_per_s']} records/s", flush=True)
    rows = []
    for rep in range(a.reps):
        for n, pinned in runs_spec:
            out = work / f"out-{n}"
            shutil.rmtree(out, ignore_errors=True)
            files = inputs[:a.baseline_files] if n == 1 and a.baseline_files else inputs
            r = run_once(a.manifest, files, out, n, a.split_bytes, pin=(last_core if n == 1 else 0) if pinned else None)
            r.update(rep=rep, files=len(files))
            rows.append(r)
            print(json.dumps(r), flush=True)
            a.json.parent.mkdir(parents=True, exist_ok=True)
            a.json.write_text(json.dumps({"partial": True, "runs": rows}, indent=2))  # survives a timeout
    for r in rows:  # rate-based, against the 1-worker (or smallest) run of the same repetition
        same = [x for x in rows if x["rep"] == r["rep"] and x["pinned_core"] is None]
        base = min(same or [x for x in rows if x["rep"] == r["rep"]], key=lambda x: x["workers"])
        r["speedup"] = round(r["records_per_s"] / base["records_per_s"] * base["workers"], 2)
        r["efficiency"] = round(r["speedup"] / r["workers"], 3)
        one_core = [x for x in rows if x["rep"] == r["rep"] and x["pinned_core"] is not None and x["workers"] == 1]
        if one_core:  # against one worker on one core: the per-core figure
            r["efficiency_vs_one_core"] = round(r["records_per_s"] / (r["workers"] * one_core[0]["records_per_s"]), 3)
    identical = all(len({r["documents_sha256"] for r in rows if r["files"] == k}) == 1 for k in {r["files"] for r in rows})
    print(f"\n{'rep':>3} {'workers':>7} {'files':>5} {'seconds':>8} {'records/s':>10} {'speedup':>8} {'efficiency':>10}"
          f" {'vs 1 core':>9}")
    for r in rows:
        one = r.get("efficiency_vs_one_core")
        print(f"{r['rep']:>3} {str(r['workers']) + ('p' if r['pinned_core'] is not None else ''):>7} {r['files']:>5} "
              f"{r['seconds']:>8.2f} {r['records_per_s']:>10.1f} {r['speedup']:>8.2f} {r['efficiency'] * 100:>9.1f}%"
              f" {'' if one is None else f'{one * 100:8.1f}%'}")
    print("\nCPU seconds per 1,000 records (worker processes, sandbox children, client + scheduler + nannies),"
          " and the stages' wall seconds per 1,000 records:")
    for r in rows:
        k, c = 1000 / r["records"], r["cpu_seconds"]
        print(f"{r['rep']:>3} {str(r['workers']) + ('p' if r['pinned_core'] is not None else ''):>3} workers: worker {c['worker'] * k:6.2f}  sandbox {c['sandbox'] * k:5.2f}  "
              f"client {c['client_scheduler'] * k:5.3f}  "
              f"stages (wall) {sum(r['stage_seconds'].values()) * k:6.2f}")
    summary = {}
    for n, pinned in dict.fromkeys(runs_spec):
        free = [r for r in rows if r["workers"] == n and (r["pinned_core"] is not None) == pinned]
        if not free:
            continue
        eff = sorted(r["efficiency"] for r in free)
        rate = sorted(r["records_per_s"] for r in free)
        key = f"{n}p" if pinned else n
        summary[key] = {"efficiency": {"median": round(statistics.median(eff), 3), "min": eff[0], "max": eff[-1]},
                        "records_per_s": {"median": round(statistics.median(rate), 2), "min": rate[0], "max": rate[-1]}}
        line = (f"{str(key):>3} workers: efficiency {statistics.median(eff) * 100:.1f}% [{eff[0] * 100:.1f}, {eff[-1] * 100:.1f}] "
                f"over {len(eff)} repetition(s)")
        one = sorted(r["efficiency_vs_one_core"] for r in free if "efficiency_vs_one_core" in r)
        if one:
            summary[key]["efficiency_vs_one_core"] = {"median": round(statistics.median(one), 3), "min": one[0], "max": one[-1]}
            line += f"; against one worker on one core {statistics.median(one) * 100:.1f}% [{one[0] * 100:.1f}, {one[-1] * 100:.1f}]"
        print(line)
    print(f"documents shards byte-identical across worker counts (same files): {identical}")
    result = {"files": a.files, "records_per_file": a.records, "cpus": os.cpu_count(), "runs": rows,
              "summary": summary, "reps": a.reps, "baseline_files": a.baseline_files,
              "documents_identical": identical, "split_bytes": a.split_bytes, "python": sys.version.split()[0]}
    a.json.parent.mkdir(parents=True, exist_ok=True)
    a.json.write_text(json.dumps(result, indent=2))
    if a.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
