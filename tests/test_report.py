"""The run report: written by every run, self-contained, plots embedded, numbers equal ledger.json."""
import base64
import json
import re
from pathlib import Path

import pytest
from scale_helpers import SMALL_RUN_STAGES, manifest_for

from datapipe.cli import main as cli
from datapipe.engine import runner
from datapipe.manifest.load import load_manifest
from datapipe.stages.phases.report import html as report

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def run_dir(small_stages_run):
    """conftest's run of the main manifest with SMALL_RUN_STAGES over the sample without realpages
    (shared with test_inspect.py)."""
    res, out = small_stages_run
    assert res.report == str(out) + "/report.html" or Path(res.report) == out / "report.html"
    # The histograms are drawn on demand (issue 16: they were most of a small run's fixed cost).
    assert cli.main(["report", str(out), "--out", str(out / "full.html")]) == 0
    return out


def _images(page: str) -> dict:
    return dict(re.findall(r'<img alt="([^"]+)" src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page))


def test_report_is_written_by_the_run_with_embedded_plots(run_dir):
    page = (run_dir / "report.html").read_text()
    imgs = _images(page)
    for title in ("Funnel", "Rejections by reason", "Languages", "Per-stage time and throughput"):
        assert title in imgs, title
        assert base64.b64decode(imgs[title])[:8] == b"\x89PNG\r\n\x1a\n"
    # The run lists the signal columns and the command that draws them, and draws none itself.
    assert not [t for t in imgs if t.startswith("Histogram:")]
    note = re.search(r'<section id="histograms">(.*?)</section>', page, re.S).group(1)
    assert f"datapipe report {run_dir}" in note
    for col in ("lang_score", "gopher_word_count", "gopher_mean_word_length"):
        assert f"<code>{col}</code>" in note
    assert not re.search(r"""(?:src|href)\s*=\s*["']?(?:https?:)?//""", page)  # nothing fetched to view it
    assert "<script" not in page and "<link" not in page


def test_report_command_draws_every_signal_histogram(run_dir):
    page = (run_dir / "full.html").read_text()
    imgs = _images(page)
    summary = _images((run_dir / "report.html").read_text())
    hist = [t for t in imgs if t.startswith("Histogram: ")]
    note = re.search(r'<section id="histograms">(.*?)</section>', (run_dir / "report.html").read_text(), re.S).group(1)
    listed = re.findall(r"<code>(\w+)</code>", note)
    assert sorted(t.removeprefix("Histogram: ") for t in hist) == sorted(listed)  # one per listed column
    for title in ("Histogram: lang_score", "Histogram: gopher_word_count"):
        assert base64.b64decode(imgs[title])[:8] == b"\x89PNG\r\n\x1a\n"
    assert set(summary) <= set(imgs) and 'id="histograms"' not in page


def test_run_draws_histograms_when_the_manifest_asks(monkeypatch):
    from datapipe.stages.phases import report as phase

    seen = {}
    monkeypatch.setattr(report, "write_report", lambda out, **kw: seen.update(kw) or f"{out}/report.html")
    for section, want in ((None, False), ({"histograms": True}, True)):
        m = load_manifest(REPO / "manifests" / "cc-2026.yaml", {"inputs.crawl": None, "inputs.paths": ["x.warc.gz"],
                                                                "report": section})
        phase.ReportPhase(m).run(type("Ctx", (), {"output": "o", "storage_options": {},
                                                  "progress": staticmethod(lambda step: None)})())
        assert seen["histograms"] is want


def test_report_numbers_equal_ledger(run_dir):
    page = (run_dir / "report.html").read_text()
    led = json.loads((run_dir / "ledger.json").read_text())
    for name, s in led["stages"].items():
        row = re.search(rf'<tr class="stage" data-stage="{re.escape(name)}">(.*?)</tr>', page).group(1)
        nums = dict(re.findall(r'<td data-key="(\w+)">([\d,]+)</td>', row))  # thousands separated
        assert nums == {"in": f"{s['in']:,}", "kept": f"{s['kept']:,}", "rejected": f"{sum(s['rejected'].values()):,}",
                        "errored": f"{sum(s['errored'].values()):,}"}
        reasons = {k: int(v.replace(",", "")) for k, v in re.findall(r'<span data-reason="([^"]+)">([\d,]+)</span>', row)}
        assert reasons == {**s["rejected"], **s["errored"]}
    totals = re.search(r'<p id="totals">(.*?)</p>', page, re.S).group(1)
    assert dict(re.findall(r'<b data-key="(\w+)">([\d,]+)</b>', totals)) == {k: f"{v:,}" for k, v in led["totals"].items()}


def test_report_cli(run_dir, tmp_path, capsys):
    out = tmp_path / "r.html"
    assert cli.main(["report", str(run_dir), "--out", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert cli.main(["report", str(tmp_path)]) == 2
    assert "is not a datapipe run" in capsys.readouterr().err
    # --out in a folder that does not exist: one line, exit 2 (was a FileNotFoundError traceback)
    gone = tmp_path / "no" / "r.html"
    assert cli.main(["report", str(run_dir), "--out", str(gone)]) == 2
    assert capsys.readouterr().err.strip() == f"error: cannot write the report: {gone}: No such file or directory"


def test_report_failure_does_not_fail_the_run(data_dir, tmp_path, monkeypatch, caplog, warm_client):
    def boom(*a, **k):
        raise RuntimeError("no plots today")

    monkeypatch.setattr(report, "write_report", boom)
    m = manifest_for([data_dir / "warc" / "whirlwind_CC-MAIN-2024-22.warc.gz"], tmp_path, stages=SMALL_RUN_STAGES,
                     mix=None, tokenize=None)
    res = runner.run(m, client=warm_client)
    assert res.report is None and (tmp_path / "ledger.json").exists()
    assert "phase report failed (the run goes on): RuntimeError: no plots today" in caplog.text


# --- the report as a user sees it: Debian's chromium (make test-deps), driven by playwright ---
CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


@pytest.fixture
def page_in_chromium(run_dir, tmp_path):
    import os

    if not os.access(CHROMIUM, os.X_OK):
        if os.environ.get("DATAPIPE_REQUIRE_CHROMIUM"):  # set by make test, which installs it
            pytest.fail(f"{CHROMIUM} missing: make test-deps installs it")
        pytest.skip(f"{CHROMIUM} missing (make test-deps)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        # A fresh profile dir; the page's own files are read offline (no network route is allowed).
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "profile"), executable_path=CHROMIUM, headless=True, args=FLAGS,
            viewport={"width": 1100, "height": 900}, offline=True)
        try:
            page = browser.new_page()
            page.goto((run_dir / "full.html").as_uri(), wait_until="load")  # every plot, histograms too
            yield page
        finally:
            browser.close()


def test_report_renders_in_chromium(page_in_chromium, run_dir, tmp_path):
    from PIL import Image

    page = page_in_chromium
    src = (run_dir / "full.html").read_text()
    n_imgs = src.count("<img ")
    assert n_imgs >= 6
    # Every plot decoded by the browser (naturalWidth) and laid out with a visible size.
    state = page.evaluate("() => [...document.images].map(i => ({alt: i.alt, ok: i.complete,"
                          " w: i.naturalWidth, h: i.naturalHeight, shown: i.getBoundingClientRect().width}))")
    assert len(state) == n_imgs
    for im in state:
        assert im["ok"] and im["w"] > 100 and im["h"] > 50 and im["shown"] > 100, im
    # What is painted where each plot sits is a drawing, not an empty box: many colours, mostly not white.
    for k, el in enumerate(page.query_selector_all("img")):
        shot = tmp_path / f"img{k}.png"
        el.screenshot(path=str(shot))
        px = Image.open(shot).convert("RGB")
        colours = px.getcolors(maxcolors=1 << 20)
        non_white = sum(n for n, c in colours if min(c) < 240) / (px.width * px.height)
        assert len(colours) > 20 and non_white > 0.01, (state[k]["alt"], len(colours), non_white)
    page.screenshot(path=str(run_dir / "report-screenshot.png"), full_page=True)  # kept for a look by eye


def test_report_numbers_in_chromium_equal_ledger(page_in_chromium, run_dir):
    led = json.loads((run_dir / "ledger.json").read_text())
    # The text the browser renders, read cell by cell (innerText: what a reader sees).
    rows = page_in_chromium.evaluate(
        "() => [...document.querySelectorAll('#funnel tr.stage')].map(r => ({stage: r.cells[0].innerText,"
        " nums: [...r.querySelectorAll('td[data-key]')].map(c => [c.dataset.key, c.innerText]),"
        " reasons: [...r.querySelectorAll('span[data-reason]')].map(s => [s.dataset.reason, s.innerText])}))")
    assert [r["stage"] for r in rows] == list(led["stages"])
    for r in rows:
        s = led["stages"][r["stage"]]
        assert dict(r["nums"]) == {"in": f"{s['in']:,}", "kept": f"{s['kept']:,}",
                                   "rejected": f"{sum(s['rejected'].values()):,}",
                                   "errored": f"{sum(s['errored'].values()):,}"}
        assert {k: int(v.replace(",", "")) for k, v in r["reasons"]} == {**s["rejected"], **s["errored"]}
    totals = page_in_chromium.inner_text("#totals")
    t = led["totals"]
    assert totals.split() == f"records in {t['in']:,}, kept {t['kept']:,}, rejected {t['rejected']:,}, errored {t['errored']:,}".split()


def test_tokens_chart_keeps_a_small_domain_visible(monkeypatch):
    """The sample's tokens per domain (runs/sample: code 382 next to de 1,054,691): on a linear axis
    the code bar was a fraction of a pixel wide."""
    figs = []
    monkeypatch.setattr(report, "_png", lambda fig: figs.append(fig) or "")
    tk = {"tokens_per_domain": {"code": 382, "de": 1_054_691, "en": 246_842},
          "target_tokens": {"code": 382, "de": 1_054_691, "en": 246_842}}
    report._tokens_chart(tk)
    ax = figs[0].axes[0]
    figs[0].canvas.draw()
    assert ax.get_xscale() == "log"
    widths = {}
    for bar in ax.patches:
        (x0, _), (x1, _) = ax.transData.transform([(max(bar.get_x(), ax.get_xlim()[0]), 0),
                                                    (bar.get_x() + bar.get_width(), 0)])
        widths.setdefault(round(bar.get_width()), []).append(x1 - x0)
    assert min(widths[382]) > 20  # pixels: a visible bar, not a hairline
    assert {" 382", " 1,054,691", " 246,842"} <= {t.get_text() for t in ax.texts}  # every bar labelled
    figs.clear()
    report._tokens_chart({"tokens_per_domain": {"a": 100, "b": 200}, "target_tokens": {"a": 100, "b": 200}})
    assert figs[0].axes[0].get_xscale() == "linear"  # similar sizes: a plain axis
