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
            deadline = time.time() + 15  # the page refreshes every second
            while _cells(page) != want and time.time() < deadline:
                time.sleep(0.25)
            final = _cells(page)
        finally:
            browser.close()
    assert "res" in done and final == want, (final, want)
    # While the run went on, the same rows were painted with growing numbers (not only when rows came).
    same_rows = [s for s in seen if list(s) == list(want)]
    reads = [int(s["read"][0].replace(",", "")) for s in same_rows]
    assert len(set(reads)) >= 2 and reads == sorted(reads), reads
