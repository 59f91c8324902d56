"""End to end on the real WARC samples through a Dask LocalCluster: schema, ledger, resume, errors.

The reference run uses conftest's warm LocalCluster; its rerun makes its own (as ``datapipe run`` does)."""
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from datapipe.engine import runner
from datapipe.engine.ledger import Ledger
from datapipe.manifest.load import load_manifest

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "datapipe.cli.main"]


def run_job(inputs, out, workers=2, client=None):
    m = load_manifest(REPO / "manifests" / "cc-2026.yaml",
                      {"inputs.paths": [str(p) for p in inputs], "inputs.crawl": None, "output": str(out),
                       "cluster.workers": workers, "cluster.dashboard_address": "127.0.0.1:0"})
    return runner.run(m, client=client)


@pytest.fixture(scope="module")
def sample_run(data_dir, tmp_path_factory, warm_client):
    out = tmp_path_factory.mktemp("run")
    return run_job(sorted((data_dir / "warc").glob("*.gz")), out, client=warm_client), out


def test_every_shard_has_one_schema(sample_run):
    _, out = sample_run
    files = sorted(f for d in ("documents", "rejected", "errors", "_filtered") for f in (out / d).glob("*.parquet"))
    assert {f.parent.name for f in files} == {"documents", "rejected", "errors", "_filtered"}
    assert any(f.name.startswith("dedup-") for f in files)  # phase 2 wrote its rejections in the same schema
    published = [f for f in files if f.parent.name == "documents"]
    phase1 = [f for f in files if f not in published]  # rejected/ (dedup's too), errors/, _filtered/
    schemas = {pq.read_schema(f) for f in phase1}
    assert len(schemas) == 1  # one schema per folder: dedup's rejections carry the snapshot columns
    full = next(iter(schemas))
    snaps = [n for n in full.names if n.startswith("text_before_")]
    assert snaps == ["text_before_c4", "text_before_decontam", "text_before_pii"]  # the stages that edit the text
    for f in files:  # dedup's rejections: the snapshot columns all null (pre-masking text stays in phase 1)
        if f.name.startswith("dedup-"):
            t = pq.read_table(f, columns=snaps)
            assert all(t.column(n).null_count == t.num_rows for n in snaps)
    # published rows: the same schema without the snapshots (they may hold text before PII masking)
    assert {pq.read_schema(f) for f in published} == {pa.schema([fl for fl in full if fl.name not in snaps])}
    names = set(full.names)
    assert {"id", "url", "host", "warc_file", "warc_record_id", "warc_date", "content_type", "charset",
            "text", "lang", "lang_score", "reject_reason", "reject_stage", "error_reason"} <= names


def test_ledger_conserves_and_matches_shards(sample_run):
    result, out = sample_run
    led = Ledger.from_dict(json.loads((out / "ledger.json").read_text()))
    led.check()
    rows = {d: sum(pq.read_metadata(f).num_rows for f in (out / d).glob("*.parquet"))
            for d in ("documents", "rejected", "errors")}
    read = led.stages["read"]
    non_docs = sum(v for k, v in read.rejected.items() if k.startswith("non_document:"))
    assert rows["documents"] == led.kept
    assert rows["errors"] == sum(s.n_errored for s in led.stages.values())
    assert rows["rejected"] == sum(s.n_rejected for s in led.stages.values()) - non_docs
    # CC-MAIN-2020-34 excerpt (SOURCES.md): 1 warcinfo, 17 request, 16 response, 16 metadata.
    task = next(json.loads(p.read_text()) for p in (out / "_tasks").glob("resiliparse_CC-MAIN*.json"))
    assert task["ledger"]["records_by_type"] == {"metadata": 16, "request": 17, "response": 16, "warcinfo": 1}
    st = task["ledger"]["stages"]["read"]
    assert st["in"] == 50 and st["kept"] + sum(st["rejected"].values()) + sum(st["errored"].values()) == 50
    # realpages: 1,171 response records, all accounted for.
    rp = next(json.loads(p.read_text()) for p in (out / "_tasks").glob("realpages*.json"))
    assert rp["ledger"]["records_by_type"] == {"response": 1171}


def test_dedup_stats_in_ledger_match_rejections(sample_run):
    _, out = sample_run
    led = json.loads((out / "ledger.json").read_text())
    hist = led["phases"]["dedup"]["stats"]["exact_cluster_sizes"]
    # A cluster of size k keeps 1 and rejects k-1: the histogram must explain every dedup:exact row.
    removed = sum((int(size) - 1) * n for size, n in hist.items())
    rows = pq.read_table(out / "rejected", columns=["reject_reason"]).column("reject_reason").to_pylist()
    assert removed == rows.count("dedup:exact") == led["stages"]["dedup_exact"]["rejected"].get("dedup:exact", 0)


def test_clipped_file_is_an_errored_row(sample_run):
    _, out = sample_run
    errs = pq.read_table(out / "errors").to_pylist()
    clipped = [e for e in errs if e["warc_file"] == "resiliparse_clipped.warc.gz"]
    assert len(clipped) == 1 and clipped[0]["error_stage"] == "read" and "truncated" in clipped[0]["error_reason"]


def _digest(out: Path) -> dict:
    res = {}
    for f in sorted(out.glob("*/*.parquet")):  # documents, rejected, errors and tokens
        t = pq.read_table(f)
        if "id" in t.column_names:  # document shards: the row set
            blob = json.dumps(t.sort_by("id").to_pylist(), sort_keys=True, default=str).encode()
        else:  # token shards promise byte-identical files
            blob = f.read_bytes()
        res[f"{f.parent.name}/{f.name}"] = hashlib.sha256(blob).hexdigest()
    return res


def test_rerun_skips_finished_tasks(sample_run, data_dir):
    result, out = sample_run
    before = _digest(out)
    again = run_job(sorted((data_dir / "warc").glob("*.gz")), out)
    assert all(r.get("skipped") for r in again.tasks)
    assert _digest(out) == before
    assert again.ledger.to_dict()["stages"] == result.ledger.to_dict()["stages"]


def test_killed_run_resumes_to_same_shards(sample_run, data_dir, tmp_path, warm_client):
    """``datapipe run`` SIGKILLed between tasks; the same job run again (in this process, on
    conftest's warm cluster: the resume reads what the killed process left, not how it started)
    ends with the shards of an uninterrupted run."""
    _, ref_out = sample_run
    out = tmp_path / "killed"
    cmd = CLI + ["run", str(REPO / "manifests" / "cc-2026.yaml"), "--input", str(data_dir / "warc"),
                 "--output", str(out), "--workers", "1", "--dashboard", "127.0.0.1:0", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and len(list((out / "_tasks").glob("*.json"))) < 2:
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    done_before = len(list((out / "_tasks").glob("*.json")))
    assert 2 <= done_before < 9, "the kill must land between tasks"
    m = load_manifest(REPO / "manifests" / "cc-2026.yaml",
                      {"inputs.paths": [str(data_dir / "warc")], "inputs.crawl": None, "output": str(out),
                       "cluster.workers": 1, "cluster.dashboard_address": "127.0.0.1:0"})  # as the CLI's options
    again = runner.run(m, runner.check_before_work(m), client=warm_client)
    assert sum(1 for r in again.tasks if r.get("skipped")) == done_before  # the finished tasks were kept
    assert _digest(out) == _digest(ref_out)
    assert not list(out.rglob("*.tmp-*"))


def _cli(args, env=None, **kw):
    return subprocess.run(CLI + args, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, **(env or {})), **kw)


def test_missing_model_stops_before_work(tmp_path, data_dir):
    out = tmp_path / "o"
    r = _cli(["run", "manifests/cc-2026.yaml", "--input", str(data_dir / "warc"), "--output", str(out)],
             env={"DATAPIPE_MODELS": str(tmp_path / "nomodels")}, cwd=REPO)
    assert r.returncode == 2 and "lid.176.ftz" in r.stderr and "make models" in r.stderr
    assert not (out / "documents").exists()


def test_corrupt_model_stops_before_work(tmp_path, data_dir):
    models = tmp_path / "m"
    models.mkdir()
    (models / "lid.176.ftz").write_bytes(b"not a model")
    r = _cli(["run", "manifests/cc-2026.yaml", "--input", str(data_dir / "warc"), "--output", str(tmp_path / "o")],
             env={"DATAPIPE_MODELS": str(models)}, cwd=REPO)
    assert r.returncode == 2 and "corrupt" in r.stderr


def test_unreadable_input_is_a_clear_error(tmp_path):
    out = tmp_path / "o"
    r = _cli(["run", "manifests/cc-2026.yaml", "--input", str(tmp_path / "nope.warc.gz"), "--output", str(out)], cwd=REPO)
    assert r.returncode == 2 and "input file not found" in r.stderr and "nope.warc.gz" in r.stderr
    assert not (out / "documents").exists()


def test_bad_manifest_cli(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_text("inputs: {paths: [x]}\noutput: o\nstages:\n  - langid: {min_score: x}\n")
    r = _cli(["run", str(p)], cwd=REPO)
    assert r.returncode == 2 and f"{p}:4:" in r.stderr and "min_score" in r.stderr


def test_main_job_draws_its_report(sample_run):
    """Regression: the report phase failed on the main manifest (a reason without ':' such as
    c4_curly_bracket, and the tokenize phase's tokenizer_sha256 beside its sections), and the run
    only warned. The main job must end with its report, recorded as a phase."""
    result, out = sample_run
    assert result.report and (out / "report.html").is_file()
    html = (out / "report.html").read_text()
    assert "Settings in force" in html and "tokenizer_sha256" in html
    marker = json.loads((out / "_phases" / "report.json").read_text())
    assert marker["stats"]["path"].endswith("report.html")
