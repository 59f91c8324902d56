"""One visual language for the run report's plots (``datapipe.inspect.report``).

Colours mean the same thing in every plot: green documents kept (or still in after a stage),
orange documents rejected by a filter (by the plotted signal's own rule in a histogram), grey
documents rejected by another rule, red records errored, purple records that are not documents
(``non_document:*``: counted, never filtered), blue plain quantities (clusters, tokens, time).
Count axes have integer ticks with thousands separators; a histogram of a skewed signal (word
counts: a long tail to 10^5 next to a threshold of 50) is drawn on a log x axis with log-spaced
bins, so the region around a low threshold is not one squashed bar.
"""
from __future__ import annotations

import re

import numpy as np
from matplotlib.ticker import FuncFormatter, MaxNLocator

KEPT, REJECTED, OTHER, ERRORED, NOT_DOCUMENT, NEUTRAL = ("#55a868", "#dd8452", "#9a9a9a", "#c44e52", "#8172b3",
                                                        "#4c72b0")
#: ``max / median`` of a non-negative signal above which its histogram gets a log x axis.
SKEW = 20.0


def group_color(label: str) -> str:
    """The colour of a histogram group by its label (``kept``, ``rejected: ...``, ...)."""
    if label.startswith("kept"):
        return KEPT
    if label.startswith("rejected by other"):
        return OTHER
    if label.startswith("rejected"):
        return REJECTED
    if label.startswith("errored"):
        return ERRORED
    return NEUTRAL


def reason_color(reason: str, errored: bool) -> str:
    """Colour of a reason's bar: errored red, ``non_document:*`` purple, a filter's rejection orange."""
    if errored:
        return ERRORED
    return NOT_DOCUMENT if reason.startswith("non_document:") else REJECTED


def _num(v, _pos=None) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.3g}"


def count_axis(ax, which: str = "x") -> None:
    """Integer ticks with thousands separators on ``ax``'s ``which`` axis (``x`` or ``y``)."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    if (ax.get_xscale() if which == "x" else ax.get_yscale()) == "linear":
        axis.set_major_locator(MaxNLocator(integer=True))
    axis.set_major_formatter(FuncFormatter(_num))


def number_axis(ax, which: str = "x") -> None:
    """Thousands separators on an axis of any numbers (fractions keep 3 significant digits)."""
    (ax.xaxis if which == "x" else ax.yaxis).set_major_formatter(FuncFormatter(_num))


def log_x_edges(values: np.ndarray, bins: int) -> np.ndarray | None:
    """Log-spaced bin edges for a skewed non-negative signal (``max / median >= SKEW``), with a
    first edge at 0 when it has zeros; None when a linear axis shows it well."""
    if not len(values) or values.min() < 0:
        return None
    pos = values[values > 0]
    if not len(pos) or pos.max() / max(float(np.median(pos)), 1e-12) < SKEW:
        return None
    edges = np.geomspace(pos.min(), pos.max(), bins + 1)
    return np.concatenate([[0.0], edges]) if (values == 0).any() else edges


def slug(title: str) -> str:
    """An HTML id for a section title (``Histogram: gopher_word_count`` -> ``histogram-gopher_word_count``)."""
    return re.sub(r"[^a-z0-9_]+", "-", title.lower()).strip("-") or "section"
