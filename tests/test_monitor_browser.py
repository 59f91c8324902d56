"""The ``/datapipe`` dashboard page as a user watches it: Debian's chromium (make test-deps), driven
by playwright, open on the page while a run goes on. The table's painted cells must follow the
counters; they used to keep their first values (a DataTable repaints on row-index changes only)
while the bars and ``counters.json`` moved on."""
from __future__ import annotations

import json
import os
import threading
import time
from urllib.parse import urlsplit

import pytest
from scale_helpers import SMALL_RUN_STAGES, manifest_for
from test_report import CHROMIUM, FLAGS

from datapipe.engine import runner
from datapipe.engine.task import PROGRESS_TOPIC


def _cells(page) -> dict[str, list[str]]:
    """The table as painted: stage -> [in, kept, rejected, errored] strings (SlickGrid's cells)."""
    rows = page.evaluate("""() => {
        const rows = [], walk = (root) => {  // bokeh draws inside (nested) shadow roots
            rows.push(...root.querySelectorAll('.slick-row'));
            for (const e of root.querySelectorAll('*')) if (e.shadowRoot) walk(e.shadowRoot);
        };
        walk(document);
        return rows.map(r => [...r.querySelectorAll('.slick-cell')].map(c => c.innerText.trim()));
    }""")
    return {r[0]: r[1:] for r in rows if r}


def test_dashboard_table_follows_a_running_run(data_dir, tmp_path, warm_client):
    if not os.access(CHROMIUM, os.X_OK):
        if os.environ.get("DATAPIPE_REQUIRE_CHROMIUM"):
            pytest.fail(f"{CHROMIUM} missing: make test-deps installs it")
        pytest.skip(f"{CHROMIUM} missing (make test-deps)")
    from playwright.sync_api import sync_playwright

    out = tmp_path / "run"
    inputs = sorted(p for p in (data_dir / "warc").glob("*.gz") if not p.name.startswith("realpages"))
    m = manifest_for(inputs, out, stages=SMALL_RUN_STAGES, mix=None, tokenize=None, dedup=None, batch_size=4)
    m.cluster.address = warm_client.scheduler.address  # the run registers the page on this cluster
    from datapipe import monitor

    monitor.register(warm_client)
    base = f"http://127.0.0.1:{urlsplit(warm_client.dashboard_link).port}"
    done: dict = {}
    seen: list[dict] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=CHROMIUM,
                                                        headless=True, args=FLAGS,
                                                        viewport={"width": 1100, "height": 900})
        try:
            page = browser.new_page()
            page.goto(base + "/datapipe", wait_until="load")
            page.wait_for_function("() => window.Bokeh && Bokeh.documents.length > 0", timeout=60_000)
            th = threading.Thread(target=lambda: done.setdefault("res", runner.run(m, client=warm_client)))
            th.start()
            while th.is_alive():
                cells = _cells(page)
                if cells and (not seen or cells != seen[-1]):
                    seen.append(cells)
                time.sleep(0.2)
            th.join()
            led = json.loads((out / "ledger.json").read_text())
            want = {n: [f"{s[k]:,}" for k in ("in", "kept")] + [f"{sum(s[k].values()):,}" for k in ("rejected", "errored")]
                    for n, s in led["stages"].items()}
            final = _wait_for(page, want)
            # Then the same rows with growing numbers, stepped by hand so that a fast machine (whose
            # run ends between two refreshes) tests the repaint as surely as a slow one.
            stepped = []
            for k in (1, 2):
                warm_client.log_event(PROGRESS_TOPIC, {"task": "probe", "run": m.output, "stages": {
                    n: [k, k, 0, 0] for n in led["stages"]}})
                bumped = {n: [f"{int(v[0].replace(',', '')) + k:,}", f"{int(v[1].replace(',', '')) + k:,}",
                              v[2], v[3]] for n, v in want.items()}
                stepped.append((_wait_for(page, bumped), bumped))
        finally:
            browser.close()
    assert "res" in done and final == want, (final, want)
    for painted, bumped in stepped:
        assert painted == bumped, (painted, bumped)
    # What the page showed while the run went on only ever grew.
    same_rows = [s for s in seen if list(s) == list(want)]
    reads = [int(s["read"][0].replace(",", "")) for s in same_rows]
    assert reads == sorted(reads), reads


def _wait_for(page, want: dict, timeout: float = 15) -> dict:
    """The painted table once it equals ``want``, or as it is after ``timeout`` s (the page
    refreshes every second)."""
    deadline = time.time() + timeout
    while _cells(page) != want and time.time() < deadline:
        time.sleep(0.25)
    return _cells(page)
