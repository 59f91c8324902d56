"""The run report's plots read alike: one meaning per colour across plots, a log x axis where a
linear one hides a threshold's region, whole-number ticks on counts and cluster sizes, thousands
separators, records that are not documents apart from filter rejections, and a table of contents."""
from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.colors import to_hex

from datapipe.inspect import reader as I
from datapipe.stages.phases.report import html as report
from datapipe.stages.phases.report import style as S


@pytest.fixture
def figs(monkeypatch):
    got = []
    monkeypatch.setattr(report, "_png", lambda fig: got.append(fig) or "")
    return got


def _ticks(fig, axis="x"):
    fig.canvas.draw()
    ax = fig.axes[0]
    lo, hi = ax.get_xlim() if axis == "x" else ax.get_ylim()
    ticks = ax.get_xticks() if axis == "x" else ax.get_yticks()
    labels = [t.get_text() for t in (ax.get_xticklabels() if axis == "x" else ax.get_yticklabels())]
    return [t for t in ticks if min(lo, hi) <= t <= max(lo, hi)], labels


def test_word_count_histogram_shows_the_threshold_region_on_a_log_axis(figs):
    rng = np.random.default_rng(0)
    words = np.round(rng.lognormal(mean=6.0, sigma=1.2, size=5000)) + 1  # median ~400, tail to ~10^4
    report._hist({"kept": words[words >= 50], "rejected: gopher_quality:min_words": words[words < 50]},
                 "gopher_word_count", thresholds=[50])
    ax = figs[0].axes[0]
    assert ax.get_xscale() == "log"
    # Linear 40 bins over the range put everything under 50 in one bar; log bins give it several.
    linear_width = (words.max() - words.min()) / 40
    assert words.min() + linear_width > 50
    edges = np.geomspace(words.min(), words.max(), 41)
    assert (edges < 50).sum() >= 8
    assert "(log x)" in ax.get_title()
    flat = np.random.default_rng(1).uniform(0, 1, 500)  # a bounded score stays linear
    report._hist({"kept": flat}, "score")
    assert figs[1].axes[0].get_xscale() == "linear"


def test_counts_and_cluster_sizes_have_whole_ticks_and_thousands_separators(figs):
    report._barh(["near: size 2", "near: size 3", "exact: size 2"], [1, 2, 1], "clusters", "clusters")
    ticks, _ = _ticks(figs[0])
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    report._hist({"clusters": np.array([2, 2, 3, 2, 5, 2, 4])}, "cluster sizes", integer_x=True)
    ticks, _ = _ticks(figs[1])
    assert all(float(t).is_integer() for t in ticks), ticks
    report._barh(["de", "en"], [1_054_691, 246_842], "tokens", "tokens")
    _, labels = _ticks(figs[2])
    assert any(re.fullmatch(r"\d{1,3}(,\d{3})+", x) for x in labels), labels


def test_one_meaning_per_colour(figs):
    report._hist({"kept": np.arange(10.0), "rejected: x:y": np.arange(3.0), "rejected by other rules": np.arange(2.0)},
                 "signal")
    colours = {p.get_label().split(" (")[0]: to_hex(p.get_facecolor()[:3]) for p in figs[0].axes[0].patches}
    assert colours == {"kept": S.KEPT, "rejected: x:y": S.REJECTED, "rejected by other rules": S.OTHER}
    assert S.reason_color("gopher_quality:min_words", False) == S.REJECTED
    assert S.reason_color("extract:timeout", True) == S.ERRORED
    assert S.reason_color("non_document:request", False) == S.NOT_DOCUMENT


def test_run_report_plots_and_navigation(small_stages_run, figs):
    _, out = small_stages_run
    run = I.Run.open(str(out))
    page = report.render(run, histograms=True)
    titles = [t for t, _ in report.figures(run, I.funnel(run), histograms=True)]
    by_title = dict(zip(titles, figs[-len(titles):]))
    led = run.ledger_dict["stages"]
    nondoc = {r for s in led.values() for r in s["rejected"] if r.startswith("non_document:")}
    assert nondoc, "the sample has WARC records that are not documents"

    def bars(fig):
        ax = fig.axes[0]
        return {lab.get_text(): to_hex(p.get_facecolor()[:3]) for lab, p in zip(ax.get_yticklabels(), ax.patches)}
    rej = bars(by_title["Rejections by reason"])
    assert not any(r.startswith("non_document:") for r in rej)
    errored = {r for s in led.values() for r in s["errored"]}
    assert all(c == (S.ERRORED if r in errored else S.REJECTED) for r, c in rej.items()), rej
    assert set(bars(by_title["Records that are not documents"])) == nondoc
    assert set(bars(by_title["Funnel"]).values()) == {S.KEPT} and set(bars(by_title["Languages"]).values()) == {S.KEPT}
    for t, fig in by_title.items():
        if t.startswith("Histogram: "):
            for p in fig.axes[0].patches:
                assert to_hex(p.get_facecolor()[:3]) == S.group_color(p.get_label()), (t, p.get_label())
    # Navigation: one link per section, each to an id on the page.
    nav = re.search(r'<nav id="toc">(.*?)</nav>', page, re.DOTALL).group(1)
    links = re.findall(r'<a href="#([^"]+)">', nav)
    ids = set(re.findall(r'<section id="([^"]+)"', page))
    assert len(links) == len(titles) + 2 and set(links) <= ids and len(set(links)) == len(links)
