"""Configuration of global dedup (the manifest's ``dedup:`` section) and LSH parameter choice."""
from __future__ import annotations

from functools import lru_cache
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from datapipe.manifest.path_settings import ReadDir
from datapipe.manifest.ranges import Seed
from datapipe.stages.phases.dedup.survivor import DEFAULT as SURVIVOR_DEFAULT
from datapipe.stages.phases.dedup.survivor import Criterion


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class LinesConfig(_Strict):
    """Line-level dedup (CS336 assignment 4 semantics).

    A non-blank normalized line occurring more than ``max_count`` times across the run (counting
    every occurrence, also repeats inside one document) is removed from every document; blank
    lines are never counted nor removed. ``max_count=1`` is the CS336 setting. Off by default:
    it rewrites texts, which most runs do not want without a look at the data.
    """

    enabled: bool = False
    max_count: int = Field(1, ge=1)


class MinHashConfig(_Strict):
    """MinHash LSH near-dedup. Defaults: 128 permutations, word 5-grams, Jaccard 0.8 (CS336 A4
    and datasketch's ``MinHashLSH`` use the same threshold), seed 1 (datasketch default).

    ``bands``/``rows``: both None -> chosen like datasketch ``MinHashLSH`` (minimise
    ``fp_weight * FP + fn_weight * FN`` integrated over the S-curve) for ``band_threshold``;
    only ``bands`` -> ``rows = num_perm // bands`` (CS336: 100 hashes/10 bands, 500/50); both ->
    taken as given (``bands * rows <= num_perm``).

    ``band_threshold`` (default ``threshold - 0.2``, i.e. 0.6 -> 18 bands x 7 rows for 128
    permutations): the banding is tuned *below* the target so that a pair at the target Jaccard
    collides in some band with probability 0.986 (0.40 with the 9x13 banding tuned at 0.8, whose
    missing pairs were most of the recall lost); the extra candidates cost only verification.

    ``verify``: ``"exact"`` (default) keeps a candidate edge only if the exact Jaccard of the two
    documents' shingle sets (64-bit hashes, recomputed from the texts) is >= ``threshold``, so no
    edge is a false positive; ``"estimate"`` uses the signatures' agreement instead (no text
    shuffle, but its sd at 0.8 is ~0.035 with 128 permutations, so pairs near the threshold fall
    on either side: on the evaluation set, pair P/R 0.885/0.917 vs 1.000/0.990 exact, same
    banding); ``"none"`` keeps every candidate.

    ``all_pairs_max_bucket``: buckets with at most this many documents emit all their pairs for
    verification (quadratic, but bounded: at most n*(n-1)/2 pairs for n <= this size); larger
    buckets emit star edges (bucket minimum -> member), linear in the bucket size. Measured on the
    evaluation set (18x7, exact): star only gives edge recall 0.731 but component recall 0.997
    (the pairs are joined through other edges); all pairs up to 16 give 0.990 / 0.997.

    Ranges (ValueError at load): ``num_perm`` [2, 1024]; ``ngram`` [1, 64] words; ``seed``
    [0, 2**32 - 1] (numpy ``RandomState``); ``threshold``, ``band_threshold`` in (0, 1) (Jaccard);
    ``bands``, ``rows`` >= 1 with ``bands * rows <= num_perm``; ``fp_weight``, ``fn_weight`` >= 0
    with a sum > 0; ``all_pairs_max_bucket`` [0, 256] documents.
    """

    enabled: bool = True
    num_perm: int = Field(128, ge=2, le=1024)
    ngram: int = Field(5, ge=1, le=64)
    seed: Seed = 1
    shingle_hash: Literal["poly64", "xxh32"] = "poly64"
    threshold: float = Field(0.8, gt=0.0, lt=1.0)
    bands: int | None = Field(None, ge=1)
    rows: int | None = Field(None, ge=1)
    fp_weight: float = Field(0.5, ge=0.0)
    fn_weight: float = Field(0.5, ge=0.0)
    band_threshold: float | None = Field(None, gt=0.0, lt=1.0)
    verify: Literal["exact", "estimate", "none"] = "exact"
    all_pairs_max_bucket: int = Field(16, ge=0, le=256)

    @model_validator(mode="after")
    def _check_bands(self):
        if self.rows is not None and self.bands is None:
            raise ValueError("minhash.rows needs minhash.bands")
        if self.bands is not None and self.bands * (self.rows or 1) > self.num_perm:
            raise ValueError(f"bands*rows = {self.bands}*{self.rows} exceeds num_perm = {self.num_perm}")
        if self.fp_weight + self.fn_weight <= 0:  # the banding objective would be 0 for every choice
            raise ValueError("minhash.fp_weight + minhash.fn_weight must be > 0")
        return self

    def band_rows(self) -> tuple[int, int]:
        """The (bands, rows) used, per the rule in the class docstring."""
        if self.bands is not None:
            return self.bands, self.rows or self.num_perm // self.bands
        bt = self.band_threshold if self.band_threshold is not None else max(self.threshold - 0.2, 0.05)
        return optimal_bands_rows(round(bt, 6), self.num_perm, self.fp_weight, self.fn_weight)


class NgramConfig(_Strict):
    """Paragraph- / n-gram-level dedup (DCLM BFF, Dolma; see :mod:`datapipe.stages.phases.dedup.ngram`).

    ``unit``: ``paragraph`` (a normalized line is the gram) or ``ngram`` (its word ``ngram``-grams,
    13 as BFF's default). ``mode``: ``paragraph`` (remove paragraphs whose duplicated gram fraction
    is >= ``threshold``), ``document`` (drop documents whose duplicated gram fraction is >=
    ``doc_threshold``), or both. Defaults follow BFF's ``--filtering-threshold 0.8`` for paragraphs;
    ``doc_threshold`` 0.8 likewise. Off by default: it rewrites texts. Ranges: ``ngram`` [1, 64]
    words, thresholds in (0, 1].
    """

    enabled: bool = False
    unit: Literal["paragraph", "ngram"] = "ngram"
    ngram: int = Field(13, ge=1, le=64)
    mode: list[Literal["paragraph", "document"]] = Field(default_factory=lambda: ["paragraph"], min_length=1)
    threshold: float = Field(0.8, gt=0.0, le=1.0)
    doc_threshold: float = Field(0.8, gt=0.0, le=1.0)


class DedupConfig(_Strict):
    """Global dedup after phase 1. Steps run in this order on the survivors of the previous one:
    exact -> lines -> minhash -> ngram (exact first so that a page crawled twice does not get all its
    lines counted twice and removed from both copies).

    ``partitions``: shuffle partitions (None -> number of document shards). ``reference_dirs``:
    ``documents/`` folders of earlier runs whose documents are matched against but never
    rejected, and win every tie (incremental dedup). ``keep_work``: keep ``run_dir/_dedup_work``.

    ``survivor``: which copy of a duplicate group is kept, criteria in order, ties broken by the
    smallest ``id`` (see :mod:`datapipe.stages.phases.dedup.survivor`): ``canonical_url`` (no
    query string or fragment first), ``shortest_url``, ``earliest_date``, ``latest_date``,
    ``longest_text``. Default: canonical URL, then shortest URL, then earliest ``warc_date``.
    """

    exact: bool = True
    lines: LinesConfig = LinesConfig()
    minhash: MinHashConfig = MinHashConfig()
    ngram: NgramConfig = NgramConfig()
    partitions: int | None = Field(None, ge=1)
    reference_dirs: list[ReadDir] = []
    keep_work: bool = False
    survivor: list[Criterion] = Field(default_factory=lambda: list(SURVIVOR_DEFAULT))

    @model_validator(mode="after")
    def _check_survivor(self):
        if len(set(self.survivor)) != len(self.survivor):
            raise ValueError(f"dedup.survivor names a criterion twice: {self.survivor}")
        return self


def _fp(threshold: float, b: int, r: int) -> float:
    from scipy.integrate import (
        quad,  # ~1 s to import (scipy.special, optimize): only on a near tie
    )

    return quad(lambda s: 1 - (1 - s ** r) ** b, 0.0, threshold)[0]


def _fn(threshold: float, b: int, r: int) -> float:
    from scipy.integrate import quad

    return quad(lambda s: (1 - s ** r) ** b, threshold, 1.0)[0]


def _quad_search(threshold: float, num_perm: int, fp_weight: float, fn_weight: float) -> tuple[int, int]:
    """datasketch 2.0.0 ``MinHashLSH._optimal_param``: each area by scipy ``quad``, first minimum."""
    best, opt = float("inf"), (0, 0)
    for b in range(1, num_perm + 1):
        for r in range(1, num_perm // b + 1):
            err = _fp(threshold, b, r) * fp_weight + _fn(threshold, b, r) * fn_weight
            if err < best:
                best, opt = err, (b, r)
    return opt


#: quad's requested accuracy (scipy's default epsabs, 1.49e-8 per area) with a margin: a best
#: candidate ahead of the second by more than this times the weights' sum is quad's choice too.
_QUAD_TOL = 1e-7


def _exact_areas(threshold: float, num_perm: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(b, r, fp, fn)`` for every ``b * r <= num_perm`` in datasketch's search order (b outer, r
    inner), the areas by Gauss-Legendre quadrature: the integrands are polynomials in ``s`` of
    degree ``b * r <= num_perm``, which ``num_perm // 2 + 1`` nodes integrate exactly (float64
    rounding aside, ~1e-15)."""
    b = np.concatenate([np.full(num_perm // k, k) for k in range(1, num_perm + 1)])
    r = np.concatenate([np.arange(1, num_perm // k + 1) for k in range(1, num_perm + 1)])
    x, w = np.polynomial.legendre.leggauss(num_perm // 2 + 1)
    lo, w_lo = threshold / 2 * (x + 1), w * threshold / 2                       # [0, threshold]
    hi, w_hi = threshold + (1 - threshold) / 2 * (x + 1), w * (1 - threshold) / 2  # [threshold, 1]
    fp = (1 - (1 - lo[None, :] ** r[:, None]) ** b[:, None]) @ w_lo
    fn = ((1 - hi[None, :] ** r[:, None]) ** b[:, None]) @ w_hi
    return b, r, fp, fn


@lru_cache(maxsize=64)
def optimal_bands_rows(threshold: float, num_perm: int, fp_weight: float = 0.5,
                       fn_weight: float = 0.5) -> tuple[int, int]:
    """(bands, rows) with ``bands*rows <= num_perm`` minimising the weighted false positive and
    false negative areas of the LSH S-curve ``1-(1-s**r)**b`` below/above ``threshold``.

    The choice is datasketch 2.0.0 ``MinHashLSH``'s (same objective, search order; e.g. 0.8/128
    -> (9, 13)). The areas are computed exactly (:func:`_exact_areas`); only when the two best
    candidates are within quad's accuracy of each other (ties, a zero weight) does the search
    run again with datasketch's integrator (scipy ``quad``), whose rounding then decides.
    """
    b, r, fp, fn = _exact_areas(threshold, num_perm)
    err = fp * fp_weight + fn * fn_weight
    first, second = np.argsort(err, kind="stable")[:2] if len(err) > 1 else (0, None)
    if second is not None and err[second] - err[first] <= _QUAD_TOL * (fp_weight + fn_weight):
        return _quad_search(threshold, num_perm, fp_weight, fn_weight)
    return int(b[first]), int(r[first])


def collision_probability(s, bands: int, rows: int):
    """P(a pair with Jaccard ``s`` shares at least one band) = ``1 - (1 - s**rows)**bands``."""
    return 1 - (1 - s ** rows) ** bands
