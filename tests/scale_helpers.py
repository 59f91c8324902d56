"""Helpers for the scale-out, remote-input and fault tests: a real Dask cluster as subprocesses,
a local HTTP server with range requests (and injectable failures), output digests.

Every server binds to 127.0.0.1 on a free port; every subprocess is started in its own process
group and killed on exit.
"""
from __future__ import annotations

import contextlib
import hashlib
import http.server
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq

from datapipe.engine import runner
from datapipe.manifest.load import load_manifest

REPO = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
MANIFEST = REPO / "manifests" / "cc-2026.yaml"
KINDS = ("documents", "rejected", "errors")
#: The chain of conftest's small_stages_run: gopher_quality adds rejections after langid (what-if
#: sees later-stage rows); that run keeps the dedup phase (near-dup clusters), mix/tokenize are off.
SMALL_RUN_STAGES = [{"extract": {"main_content": True}}, {"langid": {"min_score": 0.65}}, {"gopher_quality": {}}]
#: Small real WARC files of the sample (realpages-1171, 34 MB, is left to the slow tests).
SMALL = ["dolma_wget_sample-0000.warc.gz", "dolma_wget_sample-0001.warc.gz",
         "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz", "resiliparse_clipped.warc.gz",
         "resiliparse_clueweb09-quirk.warc.gz", "whirlwind_CC-MAIN-2024-22.warc.gz"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def manifest_for(inputs, out, **overrides):
    ov = {"inputs.paths": [str(p) for p in inputs], "inputs.crawl": None, "output": str(out),
          "cluster.dashboard_address": "127.0.0.1:0"}
    ov.update({k.replace("__", "."): v for k, v in overrides.items()})
    return load_manifest(MANIFEST, ov)


def run_local(inputs, out, workers=2, client=None, **overrides):
    """The main job on a LocalCluster (in this process): its own, or ``client``'s (conftest's
    ``warm_client``, whose size then stands for ``workers``)."""
    return runner.run(manifest_for(inputs, out, **{"cluster.workers": workers, **overrides}), client=client)


# ------------------------------------------------------------------ output comparisons

def stage_counts(ledger: dict) -> dict:
    """in/kept/rejected/errored per stage (no timings, which differ run to run)."""
    return {name: {k: st[k] for k in ("in", "kept", "rejected", "errored")}
            for name, st in ledger["stages"].items()}


def file_bytes(out: Path, kind: str = "documents") -> dict[str, str]:
    """sha256 of every shard file's bytes, by file name."""
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted((Path(out) / kind).glob("*.parquet"))}


def rows(out: Path | str, kind: str, fs=None, drop=("source",)) -> list[dict]:
    """All rows of a shard directory, sorted by id, without columns that name the input location."""
    if fs is None:
        files = sorted(str(f) for f in (Path(out) / kind).glob("*.parquet"))
        tables = [pq.read_table(f) for f in files]
    else:
        files = sorted(fs.glob(f"{out}/{kind}/*.parquet"))
        tables = [pq.read_table(f, filesystem=fs) for f in files]
    result = []
    for t in tables:
        t = t.drop_columns([c for c in drop if c in t.column_names])
        result.extend(t.to_pylist())
    return sorted(result, key=lambda r: (r["id"], r.get("warc_offset") or 0))


def rows_digest(rs: list[dict]) -> str:
    return hashlib.sha256(json.dumps(rs, sort_keys=True, default=str).encode()).hexdigest()


def assert_same_output(a, b, fs_a=None, fs_b=None):
    """Same row sets (ids) and same row checksums in documents/rejected/errors."""
    for kind in KINDS:
        ra, rb = rows(a, kind, fs_a), rows(b, kind, fs_b)
        assert [r["id"] for r in ra] == [r["id"] for r in rb], kind
        assert rows_digest(ra) == rows_digest(rb), kind


def warcio_record_counts(path: Path) -> dict[str, int]:
    """Records by WARC-Type, counted independently of datapipe with warcio."""
    from warcio.archiveiterator import ArchiveIterator

    counts: dict[str, int] = {}
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            counts[rec.rec_type] = counts.get(rec.rec_type, 0) + 1
    return counts


# ------------------------------------------------------------------ a real Dask cluster

class ExternalCluster:
    """``dask scheduler`` + N ``dask worker`` processes on 127.0.0.1, each its own process group.

    Workers run in their own empty working directory, so nothing rests on the client's cwd.
    """

    def __init__(self, tmp: Path, n_workers: int = 2, memory_limit: str = "4GiB", worker_env: dict | None = None):
        self.tmp = Path(tmp)
        self.n_workers = n_workers
        self.memory_limit = memory_limit
        self.worker_env = worker_env or {}
        self.procs: list[subprocess.Popen] = []
        self.address: str | None = None
        self.logs: list[Path] = []

    def _spawn(self, args, name, env=None, cwd=None):
        log = self.tmp / f"{name}.log"
        self.logs.append(log)
        fh = open(log, "wb")
        p = subprocess.Popen(args, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
                             env=dict(os.environ, **(env or {})), cwd=cwd or self.tmp)
        fh.close()
        self.procs.append(p)
        return p

    def start_worker(self, i: int):
        wdir = self.tmp / f"worker{i}"
        wdir.mkdir(exist_ok=True)
        return self._spawn([str(BIN / "dask"), "worker", self.address, "--host", "127.0.0.1",
                            "--nworkers", "1", "--nthreads", "1", "--memory-limit", self.memory_limit,
                            "--no-dashboard", "--name", f"w{i}", "--local-directory", str(wdir)],
                           f"worker{i}", self.worker_env, cwd=wdir)

    def __enter__(self):
        self.tmp.mkdir(parents=True, exist_ok=True)
        sched_file = self.tmp / "scheduler.json"
        self._spawn([str(BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(free_port()),
                     "--dashboard-address", f"127.0.0.1:{free_port()}", "--scheduler-file", str(sched_file)],
                    "scheduler")
        deadline = time.time() + 60
        while not sched_file.exists() and time.time() < deadline:
            time.sleep(0.1)
        assert sched_file.exists(), self.log_text()
        time.sleep(0.2)
        self.address = json.loads(sched_file.read_text())["address"]
        for i in range(self.n_workers):
            self.start_worker(i)
        from distributed import Client

        with Client(self.address, timeout=30) as c:
            c.wait_for_workers(self.n_workers, timeout=90)
        return self

    def log_text(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-3000:]}" for p in self.logs if p.exists())

    def __exit__(self, *exc):
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
        for p in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)


# ------------------------------------------------------------------ HTTP server with ranges

class RangeHandler(http.server.SimpleHTTPRequestHandler):
    """Static files with single-range ``Range: bytes=a-b`` support (206), and injected failures."""

    server_version = "datapipe-test"

    def log_message(self, *args):  # quiet
        pass

    def _fail_now(self) -> bool:
        srv = self.server
        rng = self.headers.get("Range")
        with srv.lock:
            srv.log.append((self.command, self.path, rng))
            srv.timed.append((time.monotonic(), self.command, self.path, rng))
            if srv.fail_first > 0:
                srv.fail_first -= 1
                srv.failed += 1
                return True
            if rng and self.command == "GET" and srv.fail_ranges > 0:
                srv.fail_ranges -= 1
                srv.failed += 1
                return True
        return False

    def do_HEAD(self):
        if self._fail_now():
            self.send_error(503, "try again")
            return
        super().do_HEAD()

    def do_GET(self):
        if self._fail_now():
            self.send_error(503, "try again")
            return
        rng = self.headers.get("Range")
        m = re.fullmatch(r"bytes=(\d+)-(\d*)", rng or "")
        if not m:
            return super().do_GET()
        path = Path(self.translate_path(self.path))
        if not path.is_file():
            self.send_error(404)
            return
        size = path.stat().st_size
        start = int(m.group(1))
        end = min(int(m.group(2)) if m.group(2) else size - 1, size - 1)
        if start >= size:
            self.send_response(416)
            self.send_header("Content-Range", f"bytes */{size}")
            self.end_headers()
            return
        with open(path, "rb") as fh:
            fh.seek(start)
            body = fh.read(end - start + 1)
        with self.server.lock:
            self.server.bytes_sent += len(body)
        self.send_response(206)
        self.send_header("Content-Type", "application/octet-stream")
        self.send_header("Accept-Ranges", "bytes")
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def end_headers(self):
        if self.command == "HEAD" or not self.headers.get("Range"):
            self.send_header("Accept-Ranges", "bytes")
        super().end_headers()


@contextlib.contextmanager
def http_server(root: Path, fail_first: int = 0, fail_ranges: int = 0):
    """Serve ``root`` on 127.0.0.1:<free port>; yields the server (``.url``, ``.log``, ``.failed``).

    The first ``fail_first`` requests, then the first ``fail_ranges`` ranged GETs, get a 503.
    """
    handler = lambda *a, **k: RangeHandler(*a, directory=str(root), **k)  # noqa: E731
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    srv.daemon_threads = True
    srv.lock = threading.Lock()
    srv.log = []
    srv.timed = []
    srv.fail_first = fail_first
    srv.fail_ranges = fail_ranges
    srv.failed = 0
    srv.bytes_sent = 0
    srv.url = f"http://127.0.0.1:{srv.server_address[1]}"
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()
