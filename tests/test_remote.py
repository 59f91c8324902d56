"""Remote inputs through fsspec: https:// (local range-capable HTTP server), s3:// (moto's S3
server + s3fs, inputs and outputs), retries with backoff, crawl ids through warc.paths.gz."""
from __future__ import annotations

import gzip
import json
import shutil
import time

import pytest
from scale_helpers import (
    SMALL,
    assert_same_output,
    free_port,
    http_server,
    manifest_for,
    stage_counts,
    warcio_record_counts,
)
from scale_helpers import run_local as _run_local

from datapipe.engine import runner
from datapipe.engine.ledger import Ledger
from datapipe.io.paths import open_input, resolve_inputs

BLOCK = 64 * 1024  # small fsspec blocks so that every sample file needs several ranged reads
#: These tests are about reading and writing remote data: phase 1 only (the global phases read
#: the output location the same way and are covered by the cluster and end-to-end tests).
#: They run on conftest's warm_client: the workers read and write the remote data as a run's own do.
PHASE1 = {"dedup": None, "mix": None, "tokenize": None}


def run_local(inputs, out, client, **overrides):
    return _run_local(inputs, out, client=client, **{**PHASE1, **overrides})


@pytest.fixture(scope="module")
def small_inputs(data_dir, tmp_path_factory):
    d = tmp_path_factory.mktemp("www")
    for name in SMALL:
        shutil.copy(data_dir / "warc" / name, d / name)
    return d


@pytest.fixture(scope="module")
def local_ref(small_inputs, tmp_path_factory, warm_client):
    out = tmp_path_factory.mktemp("ref")
    res = run_local([small_inputs / n for n in SMALL], out, warm_client)
    return res, out


def _warc_gets(srv):
    return [(m, p, r) for m, p, r in srv.log if m == "GET" and p.endswith(".warc.gz")]


def test_https_inputs_are_streamed_in_ranges(small_inputs, local_ref, warm_client):
    ref, ref_out = local_ref
    with http_server(small_inputs) as srv:
        urls = [f"{srv.url}/{n}" for n in SMALL]
        out = small_inputs.parent / "https_out"
        res = run_local(urls, out, warm_client, **{"inputs.storage_options": {"block_size": BLOCK}})
        gets = _warc_gets(srv)
    assert_same_output(out, ref_out)
    assert stage_counts(res.ledger.to_dict()) == stage_counts(ref.ledger.to_dict())
    assert sorted(t["input"] for t in res.tasks) == sorted(urls)
    # Every GET of a WARC was a ranged read (no plain whole-file GET).
    assert len(gets) >= len(SMALL) and all(r is not None for _, _, r in gets)


def test_large_file_is_streamed_not_downloaded(data_dir):
    """realpages-1171 (34 MB) over HTTP: read in bounded ranged GETs, every record comes out."""
    from datapipe.io.warc import iter_records

    path = data_dir / "warc" / "realpages-1171.warc.gz"
    size = path.stat().st_size
    with http_server(path.parent) as srv:
        url = f"{srv.url}/{path.name}"
        recs = [r for r in iter_records(lambda: open_input(url))]
        gets = _warc_gets(srv)
    assert len(recs) == sum(warcio_record_counts(path).values()) == 1171
    assert all(r is not None for _, _, r in gets)
    spans = [int(b) - int(a) + 1 for a, b in (r[len("bytes="):].split("-") for _, _, r in gets)]
    assert max(spans) <= 8 << 20 < size // 4          # no request fetched more than 8 MiB
    assert sum(spans) >= size and len(gets) >= size // (8 << 20)


def test_https_transient_errors_are_retried_mid_file(small_inputs, local_ref, warm_client):
    """The server answers 503 to the first ranged GETs; Dask task retries are off, so only the
    reader's own retry (re-open, seek, read again, with backoff) can save the run."""
    _, ref_out = local_ref
    with http_server(small_inputs, fail_ranges=4) as srv:
        urls = [f"{srv.url}/{n}" for n in SMALL]
        out = small_inputs.parent / "retry_out"
        res = run_local(urls, out, warm_client, **{"inputs.storage_options": {"block_size": BLOCK}, "cluster.retries": 0})
        assert srv.failed == 4
    assert_same_output(out, ref_out)
    Ledger.from_dict(json.loads((out / "ledger.json").read_text())).check()
    assert res.ledger.totals()["errored"] == 1  # only the clipped record of resiliparse_clipped


def test_backoff_delays_grow(small_inputs):
    """Open + read through a server failing the first 5 requests: the gaps between attempts double."""
    name = "resiliparse_CC-MAIN-2020-34_excerpt.warc.gz"
    with http_server(small_inputs, fail_first=5) as srv:
        with open_input(f"{srv.url}/{name}", {"block_size": BLOCK}) as fh:
            data = b""
            while chunk := fh.read(1 << 20):
                data += chunk
        stamps = [t for t, m, *_ in srv.timed if m == "HEAD"]
        failed = srv.failed
    assert data == (small_inputs / name).read_bytes()
    assert failed == 5
    # Each open tries HEAD, then GET: attempts 1 and 2 fail (4 requests), attempt 3 (after 0.5 s, then
    # 1 s) fails its HEAD and succeeds by GET.
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert len(gaps) >= 2 and gaps[0] >= 0.45 and gaps[1] >= 0.9, gaps


def test_not_found_is_not_retried(small_inputs):
    with http_server(small_inputs) as srv:
        t0 = time.time()
        with pytest.raises(FileNotFoundError):
            with open_input(f"{srv.url}/missing.warc.gz"):
                pass
        assert time.time() - t0 < 2  # no backoff sleeps on a final error


def test_missing_url_errors_its_file_and_the_others_run(small_inputs, local_ref, warm_client):
    """A URL answering 404 stopped the whole run with a traceback (planning sized it for splitting);
    now it is one task that errors the file with the reason, and the other inputs run."""
    ref = local_ref[0]
    name = SMALL[-1]
    with http_server(small_inputs) as srv:
        gone = f"{srv.url}/missing.warc.gz"
        out = small_inputs.parent / "missing_out"
        res = run_local([f"{srv.url}/{name}", gone], out, warm_client)
    assert [(f["input"], f["reason"]) for f in res.failed] == [(gone, "task:exception:Exception")]
    assert "FileNotFoundError" in res.failed[0]["detail"]
    ref_task = next(t for t in ref.tasks if t["input"].endswith(name))
    got_task = next(t for t in res.tasks if t["input"].endswith(name))
    assert stage_counts(got_task["ledger"]) == stage_counts(ref_task["ledger"])
    read = res.ledger.stages["read"]
    assert read.n_in == ref_task["ledger"]["stages"]["read"]["in"] + 1 and read.errored.get("task:exception:Exception") == 1


def test_crawl_id_resolved_through_warc_paths(small_inputs, local_ref, tmp_path, warm_client):
    crawl = "CC-MAIN-2099-01"
    root = tmp_path / "cc"
    listed = []
    for i, name in enumerate(["resiliparse_CC-MAIN-2020-34_excerpt.warc.gz", "dolma_wget_sample-0001.warc.gz",
                              "whirlwind_CC-MAIN-2024-22.warc.gz"]):
        rel = f"crawl-data/{crawl}/segments/1700000000.{i}/warc/{name}"
        (root / rel).parent.mkdir(parents=True)
        shutil.copy(small_inputs / name, root / rel)
        listed.append(rel)
    (root / "crawl-data" / crawl / "warc.paths.gz").write_bytes(gzip.compress(("\n".join(listed) + "\n").encode()))
    out = tmp_path / "out"
    with http_server(root, fail_first=2) as srv:  # the listing itself needs a retry
        m = manifest_for([], out, **{"inputs.crawl": crawl, "inputs.crawl_files": 2, "inputs.base_url": srv.url + "/",
                                     "cluster.workers": 1, **PHASE1})
        inputs = runner.check_before_work(m)
        assert inputs == [f"{srv.url}/{rel}" for rel in listed[:2]]
        res = runner.run(m, inputs, client=warm_client)
    assert sorted(t["input"] for t in res.tasks) == sorted(inputs)
    want = sum(sum(warcio_record_counts(root / rel).values()) for rel in listed[:2])
    assert res.ledger.stages["read"].n_in == want


def test_missing_crawl_listing_is_a_clear_error(tmp_path):
    from datapipe.io.paths import InputError

    with http_server(tmp_path) as srv:
        with pytest.raises(InputError, match="CC-MAIN-1999-01.*warc.paths.gz") as ei:
            resolve_inputs([], "CC-MAIN-1999-01", 1, srv.url + "/")
    msg = str(ei.value)
    url = srv.url + "/crawl-data/CC-MAIN-1999-01/warc.paths.gz"
    assert msg.count(url) == 1 and "404" in msg, msg  # the URL once, and the HTTP status (issue 14)


@pytest.fixture(scope="module")
def s3():
    """moto's S3 server on 127.0.0.1 (a real HTTP endpoint the Dask workers reach), and an s3fs."""
    import s3fs
    from moto.server import ThreadedMotoServer

    port = free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    so = {"key": "testing", "secret": "testing",
          "client_kwargs": {"endpoint_url": f"http://127.0.0.1:{port}", "region_name": "eu-west-1"}}
    fs = s3fs.S3FileSystem(skip_instance_cache=True, **so)
    fs.mkdir("datapipe-test")
    try:
        yield fs, so
    finally:
        server.stop()


def test_s3_inputs_and_outputs(s3, small_inputs, local_ref, warm_client):
    fs, so = s3
    ref, ref_out = local_ref
    for n in SMALL:
        fs.put_file(str(small_inputs / n), f"datapipe-test/crawl/{n}")
    out = "s3://datapipe-test/runs/a"
    m = manifest_for(["s3://datapipe-test/crawl/*.warc.gz"], out,
                     **{"inputs.storage_options": so, "cluster.workers": 2, **PHASE1})
    inputs = runner.check_before_work(m)
    assert inputs == sorted(f"s3://datapipe-test/crawl/{n}" for n in SMALL)
    res = runner.run(m, inputs, client=warm_client)
    fs.invalidate_cache()
    assert_same_output("datapipe-test/runs/a", ref_out, fs_a=fs)
    led = json.loads(fs.cat_file("datapipe-test/runs/a/ledger.json"))
    Ledger.from_dict(led).check()
    assert stage_counts(led) == stage_counts(ref.ledger.to_dict())
    keys = fs.find("datapipe-test/runs/a")
    assert not [k for k in keys if ".tmp-" in k]
    assert len([k for k in keys if "/_tasks/" in k]) == len(SMALL)
    # The success records on S3 make a rerun skip every file.
    again = runner.run(m, inputs, client=warm_client)
    assert all(t.get("skipped") for t in again.tasks)
    assert stage_counts(again.ledger.to_dict()) == stage_counts(res.ledger.to_dict())
