"""The ablation's answer as a reader meets it: ``report.html`` (a real page whose first line says
what to do, fitting an ordinary window), ``recommended_mix.yaml`` (marked tied when mixtures are
tied, no null settings) and the plain-words headline of each kind of decision. No torch, seconds."""
from __future__ import annotations

import os
import re
from html.parser import HTMLParser

import numpy as np
import pytest
import yaml
from test_ablate_checks import _analyse, _rows

from datapipe.ablate.mixtures import mixture_id
from datapipe.ablate.report import decide, mix_block

#: Domain sizes in tokens, and the proxy budget: epochs_d = w_d * BUDGET / SIZE_d.
SIZE, BUDGET = {"a": 1000.0, "b": 500.0, "c": 2000.0}, 1000.0
#: Five mixtures within 0.008 of each other and one far worse; seed noise +-0.02.
WEIGHTS = [(0.2, 0.3, 0.5), (0.3, 0.3, 0.4), (0.4, 0.2, 0.4), (0.5, 0.3, 0.2), (0.6, 0.2, 0.2), (0.1, 0.1, 0.8)]
BASE = [3.00, 3.004, 3.008, 3.002, 3.006, 3.6]


def _records():
    out = []
    for k, (w, b) in enumerate(zip(WEIGHTS, BASE)):
        wd = dict(zip("abc", w))
        runs = [{"seed": s, "eval": {d: {"loss": b + (0.02 if s else -0.02) * (1 if (k + j) % 2 else -1)}
                                     for j, d in enumerate("abc")}} for s in (0, 1)]
        ev = {d: {"loss": float(np.mean([r["eval"][d]["loss"] for r in runs]))} for d in "abc"}
        for v in ev.values():
            v["ppl"] = float(np.exp(v["loss"]))
        out.append({"mixture_id": mixture_id(wd), "weights": wd, "achieved": wd,
                    "epochs": {d: wd[d] * BUDGET / SIZE[d] for d in "abc"}, "runs": runs, "eval": ev,
                    "flags": [], "duplicates": [], "wall_s": 1.0})
    return out


class _Text(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.text = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)

    def handle_data(self, data):
        if data.strip() and self.tags[-1:] != ["style"] and self.tags[-1:] != ["title"]:
            self.text.append(data.strip())


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    recs = _records()
    res, out = _analyse(recs, tmp_path_factory.mktemp("ablate-report"), "out")
    objective = {r["mixture_id"]: np.mean([v["loss"] for v in r["eval"].values()]) for r in recs}
    margin = res["reproducibility"]["margin"]
    best = min(objective.values())
    want_tied = sorted((i for i, v in objective.items() if v - best <= margin), key=lambda i: (objective[i], i))
    epochs = {r["mixture_id"]: max(r["epochs"].values()) for r in recs}
    want_pick = min(want_tied, key=lambda i: (epochs[i], objective[i], i))
    return {"res": res, "out": out, "tied": want_tied, "pick": want_pick,
            "weights": next(r["weights"] for r in recs if r["mixture_id"] == want_pick)}


def test_report_html_says_first_what_to_do_in_plain_words(tied):
    assert len(tied["tied"]) == 5 and tied["res"]["decision"]["tied"] == tied["tied"]
    page = (tied["out"] / "report.html").read_text()
    p = _Text()
    p.feed(page)
    first = p.text[0]
    assert first == tied["res"]["decision"]["headline"]
    assert first.startswith("These five mixtures are tied within noise: ") and "Use any of them" in first
    assert f"the cheapest is {tied['pick']} " in first and all(i in first for i in tied["tied"])
    assert not re.search(r"REGRESSION|BEST_TRIED|NONE:", first)  # no status codes
    assert "<table id='ranking'>" in page and page.count("<tr class=") == len(WEIGHTS)
    assert not re.search(r"<pre[^>]*>[^<]*\| rank \|", page)  # the ranking is a table, not markdown in <pre>
    md = (tied["out"] / "ranking.md").read_text()
    assert md.splitlines()[0] == f"**{first}**"


def test_recommended_mix_is_marked_tied_and_has_no_nulls(tied):
    text = (tied["out"] / "recommended_mix.yaml").read_text()
    assert text.splitlines()[0] == "# " + tied["res"]["decision"]["headline"]
    doc = yaml.safe_load(text)
    assert doc["decision"]["status"] == "tied" and doc["decision"]["tied"] == tied["tied"]
    assert doc["decision"]["pick"] == tied["pick"] and doc["mix"]["weights"] == tied["weights"]

    def nulls(v):
        return v is None or (isinstance(v, dict) and any(map(nulls, v.values()))) or \
            (isinstance(v, list) and any(map(nulls, v)))
    assert not nulls(doc)
    block = yaml.safe_load(mix_block({"a": 0.25, "b": 0.75}, {"config": {"mix": {
        "rules": [{"domain": "en", "lang": "en", "host": None}], "default_domain": None, "total_tokens": None,
        "max_epochs": 4.0, "seed": 3}}}))
    assert block == {"mix": {"rules": [{"domain": "en", "lang": "en"}], "weights": {"a": 0.25, "b": 0.75},
                             "max_epochs": 4.0, "seed": 3}}


def test_headline_of_each_decision():
    untrusted = {"fallback": True, "reason": "leave-one-out Spearman 0.2 < 0.5", "predicted": 3.0, "named": {}}
    stats = {"seeds": 2, "margin": 0.05}
    clear = decide(_rows({"mix-a": 3.00, "mix-b": 3.10, "mix-c": 3.20}), untrusted, stats, ["a", "b"])
    assert clear["headline"] == ("Use mix-a (a 0.50, b 0.50): it beats every other mixture by more than the noise.")
    one = decide(_rows({"mix-a": 3.00, "mix-b": 3.10}), untrusted, {"seeds": 1, "margin": None}, ["a", "b"])
    assert one["headline"].startswith("Not decided yet: with one seed") and "`seeds: [0, 1]`" in one["headline"]
    flat = decide(_rows({"mix-a": 3.00, "mix-b": 3.01, "mix-c": 3.02}), untrusted, stats, ["a", "b"])
    assert flat["headline"].startswith("All mixtures are tied within noise: mix-a, mix-b and mix-c.")
    trusted = {"fallback": False, "reason": "ok", "predicted": 2.80, "named": {"a": 0.6, "b": 0.4}}
    reg = decide(_rows({"mix-a": 3.00, "mix-b": 3.01, "mix-c": 3.20}), trusted, stats, ["a", "b"])
    assert reg["headline"].startswith("Use the regression's mixture (a 0.60, b 0.40)")


def test_report_fits_an_ordinary_window_in_chromium(tied, tmp_path):
    chromium = "/usr/bin/chromium"
    if not os.access(chromium, os.X_OK):
        if os.environ.get("DATAPIPE_REQUIRE_CHROMIUM"):
            pytest.fail(f"{chromium} missing: make test-deps installs it")
        pytest.skip(f"{chromium} missing (make test-deps)")
    from playwright.sync_api import sync_playwright
    from test_report import FLAGS

    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(str(tmp_path / "profile"), executable_path=chromium,
                                                        headless=True, args=FLAGS,
                                                        viewport={"width": 1280, "height": 800}, offline=True)
        try:
            page = browser.new_page()
            page.goto((tied["out"] / "report.html").as_uri(), wait_until="load")
            width = page.evaluate("() => document.documentElement.scrollWidth")
            box = page.locator("#decision").bounding_box()
            first_line = page.evaluate("() => document.body.innerText.split('\\n')[0]")
        finally:
            browser.close()
    assert width <= 1280  # no sideways scrolling of the page (the old one was 2,505 px wide)
    assert box["y"] < 100 and box["x"] + box["width"] <= 1280
    assert first_line == tied["res"]["decision"]["headline"]
