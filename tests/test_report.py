"""The run report: written by every run, self-contained, plots embedded, numbers equal ledger.json."""
import base64
import json
import re
from pathlib import Path

import pytest

from datapipe import cli, report, runner
from datapipe.manifest import load_manifest

REPO = Path(__file__).resolve().parent.parent
STAGES = [{"extract": {"main_content": True}}, {"langid": {"min_score": 0.65}}, {"gopher_quality": {}}]


def _run(inputs, out):
    m = load_manifest(REPO / "manifests" / "cc-2026.yaml",
                      {"inputs.paths": [str(p) for p in inputs], "inputs.crawl": None, "output": str(out),
                       "cluster.workers": 1, "cluster.dashboard_address": "127.0.0.1:0", "stages": STAGES,
                       "mix": None, "tokenize": None})
    return runner.run(m)


@pytest.fixture(scope="module")
def run_dir(data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("report-run")
    inputs = sorted(p for p in (data_dir / "warc").glob("*.gz") if not p.name.startswith("realpages"))
    res = _run(inputs, out)
    assert res.report == str(out) + "/report.html" or Path(res.report) == out / "report.html"
    return out


def test_report_is_written_by_the_run_with_embedded_plots(run_dir):
    page = (run_dir / "report.html").read_text()
    imgs = dict(re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page))
    for title in ("Funnel", "Rejections by reason", "Languages", "Histogram: lang_score",
                  "Histogram: gopher_word_count", "Per-stage time and throughput"):
        assert title in imgs, title
        assert base64.b64decode(imgs[title])[:8] == b"\x89PNG\r\n\x1a\n"
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)  # nothing fetched to view it
    assert "<script" not in page and "<link" not in page


def test_report_numbers_equal_ledger(run_dir):
    page = (run_dir / "report.html").read_text()
    led = json.loads((run_dir / "ledger.json").read_text())
    for name, s in led["stages"].items():
        row = re.search(rf'<tr class="stage" data-stage="{re.escape(name)}">(.*?)</tr>', page).group(1)
        nums = dict(re.findall(r'<td data-key="(\w+)">(\d+)</td>', row))
        assert nums == {"in": str(s["in"]), "kept": str(s["kept"]), "rejected": str(sum(s["rejected"].values())),
                        "errored": str(sum(s["errored"].values()))}
        reasons = {k: int(v) for k, v in re.findall(r'<span data-reason="([^"]+)">(\d+)</span>', row)}
        assert reasons == {**s["rejected"], **s["errored"]}
    totals = re.search(r'<p id="totals">(.*?)</p>', page, re.S).group(1)
    assert dict(re.findall(r'<b data-key="(\w+)">(\d+)</b>', totals)) == {k: str(v) for k, v in led["totals"].items()}


def test_report_cli(run_dir, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli.main(["report", str(run_dir), "--out", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "is not a datapipe run" in capsys.readouterr().err


def test_report_failure_does_not_fail_the_run(data_dir, tmp_path, monkeypatch, caplog):
    def boom(*a, **k):
        raise RuntimeError("no plots today")

    monkeypatch.setattr(report, "write_report", boom)
    res = _run([data_dir / "warc" / "whirlwind_CC-MAIN-2024-22.warc.gz"], tmp_path)
    assert res.report is None and (tmp_path / "ledger.json").exists()
    assert "run report not written: RuntimeError: no plots today" in caplog.text
