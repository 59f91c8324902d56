"""Which copy of a duplicate group survives (the *survivor rule*), and the streaming pick of it.

The survivor of a group (documents with one exact hash, or one near-duplicate component) is
the minimum under: reference documents first (incremental dedup: they always win), then the
configured criteria in order (``dedup.survivor``), then the smallest ``id`` (so the rule is
total and deterministic). Criteria:

* ``canonical_url``: a URL without query string or fragment (no ``?``, no ``#``) before one
  with them, before no URL (the ``?mirror=`` / ``?utm_source=`` copy loses to the plain page);
* ``shortest_url``: fewer characters first (``/a`` before ``/a/index.html``), no URL last;
* ``earliest_date`` / ``latest_date``: by ``warc_date`` (ISO 8601, string order), no date last;
* ``longest_text``: more UTF-8 bytes of text first (the most complete copy).

Default ``[canonical_url, shortest_url, earliest_date]``: the canonical URL, as a reader would
link it, then the first crawl of it.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

Criterion = Literal["canonical_url", "shortest_url", "earliest_date", "latest_date", "longest_text"]
DEFAULT: list[str] = ["canonical_url", "shortest_url", "earliest_date"]
_NO_URL_LEN = 2 ** 31 - 1


def columns_needed(criteria: Iterable[str]) -> list[str]:
    """Source columns the criteria read (besides ``id``)."""
    need = {"canonical_url": "url", "shortest_url": "url", "earliest_date": "warc_date",
            "latest_date": "warc_date", "longest_text": "text"}
    return sorted({need[c] for c in criteria})


def key_columns(t: pa.Table, rows: np.ndarray, criteria: list[str]) -> dict[str, pa.Array]:
    """Sort-key columns ``k0..`` (one per criterion, ascending order = preferred) of ``rows`` of
    source table ``t``."""
    take = pa.array(rows, pa.int64())
    out = {}
    for j, c in enumerate(criteria):
        if c in ("canonical_url", "shortest_url"):
            url = t.column("url").take(take)
            if c == "canonical_url":
                has = pc.match_substring_regex(url, r"[?#]")
                v = pc.if_else(pc.is_null(url), 2, pc.if_else(has, 1, 0)).cast(pa.int8())
            else:
                v = pc.fill_null(pc.utf8_length(url), _NO_URL_LEN).cast(pa.int32())
        elif c in ("earliest_date", "latest_date"):
            v = t.column("warc_date").take(take)
        elif c == "longest_text":
            v = pc.negate(pc.fill_null(pc.binary_length(t.column("text").take(take)), 0)).cast(pa.int64())
        else:
            raise ValueError(f"unknown survivor criterion {c!r}")
        out[f"k{j}"] = v.combine_chunks() if isinstance(v, pa.ChunkedArray) else v
    return out


def sort_spec(criteria: list[str]) -> list[tuple[str, str]]:
    """The pyarrow ``sort_by`` keys after the group columns: prio, k0.., id (nulls sort last)."""
    return [("prio", "ascending")] + [(f"k{j}", "descending" if c == "latest_date" else "ascending")
                                      for j, c in enumerate(criteria)] + [("id", "ascending")]


def key_schema(criteria: list[str]) -> list[pa.Field]:
    types = {"canonical_url": pa.int8(), "shortest_url": pa.int32(), "earliest_date": pa.string(),
             "latest_date": pa.string(), "longest_text": pa.int64()}
    return [pa.field(f"k{j}", types[c]) for j, c in enumerate(criteria)]


def _first_rows(t: pa.Table, group: list[str], spec: list[tuple[str, str]]) -> pa.Table:
    """One row per group (the preferred one), with ``n`` = rows of the group (summed if present)."""
    t = t.sort_by([(g, "ascending", "at_end") for g in group] + [(c, o, "at_end") for c, o in spec])
    n = len(t)
    first = np.zeros(n, dtype=bool)
    if n:
        first[0] = True
        for g in group:
            k = t.column(g).to_numpy()
            first[1:] |= k[1:] != k[:-1]
    start = np.flatnonzero(first)
    cnt = t.column("n").to_numpy() if "n" in t.column_names else np.ones(n, np.int64)
    sizes = np.add.reduceat(cnt, start) if n else np.zeros(0, np.int64)
    out = t.filter(pa.array(first))
    if "n" in out.column_names:
        out = out.drop_columns(["n"])
    return out.append_column("n", pa.array(sizes, pa.int64()))


def best_of_groups(segments: Callable[[], Iterable[pa.Table]], group: list[str],
                   spec: list[tuple[str, str]], chunk_rows: int) -> pa.Table:
    """The preferred row of every group over a stream of segments (pass 1 of a streaming pick).
    Memory: the distinct groups plus ``chunk_rows`` rows, whatever the size of one group."""
    acc, nacc, best = [], 0, None
    for seg in segments():
        if seg.num_rows:
            acc.append(_first_rows(seg, group, spec))
            nacc += acc[-1].num_rows
        if nacc >= chunk_rows + (best.num_rows if best is not None else 0):
            best = _first_rows(pa.concat_tables(([best] if best is not None else []) + acc), group, spec)
            acc, nacc = [], 0
    if acc or best is None:
        parts = ([best] if best is not None else []) + acc
        best = _first_rows(pa.concat_tables(parts), group, spec) if parts else None
    return best


def group_sizes(best: pa.Table | None) -> dict[str, int]:
    """{group size: number of groups} for groups of 2 or more (JSON keys)."""
    if best is None or best.num_rows == 0:
        return {}
    k, v = np.unique(best.column("n").to_numpy(), return_counts=True)
    return {str(int(a)): int(b) for a, b in zip(k, v) if a > 1}
