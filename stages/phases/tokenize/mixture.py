"""Domain assignment, the mixture planner and deterministic sampling (phase 3).

* ``assign_domains``: first matching ``DomainRule`` wins, else ``MixConfig.default_domain``.
* ``plan_mixture``: from the tokens counted per domain, the target token shares, a budget and the
  repetition caps, compute each domain's sampling rate (``rate`` < 1 downsamples, > 1 repeats).
* ``copies``: how many times a document enters the mix, decided by a seeded 64-bit hash of its id
  alone (xxh3), so the selection does not depend on worker count, order or partitioning.
"""
from __future__ import annotations

import fnmatch
import re
from dataclasses import asdict, dataclass
from typing import Literal
from urllib.parse import urlsplit

import numpy as np
import pyarrow as pa
import xxhash
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from datapipe.manifest.ranges import NonNegFloat

_TWO64 = float(2**64)


class DomainRule(BaseModel):
    """One rule: every condition given must hold (AND); at least one condition.

    ``host``: glob on the lower-cased host; ``*.example.org`` also matches ``example.org`` itself.
    ``url_path``: glob on the URL path (``/wiki/*``). ``source``: glob on the input file/URL.
    ``lang``: language codes (``lang`` column). ``column`` + ``equals``: a signal column written by
    an earlier stage (a topic classifier's label, say) equals a value.
    """

    model_config = ConfigDict(extra="forbid")

    domain: str
    host: str | list[str] | None = None
    url_path: str | list[str] | None = None
    source: str | list[str] | None = None
    lang: str | list[str] | None = None
    column: str | None = None
    equals: str | list[str] | None = None

    @model_validator(mode="after")
    def _has_condition(self):
        if not any(v is not None for v in (self.host, self.url_path, self.source, self.lang, self.column)):
            raise ValueError(f"domain rule for {self.domain!r} has no condition (host, url_path, source, lang, column)")
        if (self.column is None) != (self.equals is None):
            raise ValueError("column and equals go together")
        return self


class MixConfig(BaseModel):
    """Manifest section ``mix:``. Unknown keys are an error.

    Ranges (ValueError at load): ``weights`` >= 0 each and summing > 0 (relative shares, any
    scale); ``total_tokens`` >= 1 or ``all``; ``max_epochs`` > 0 (repetitions; one number or each
    value of the per-domain map); ``seed`` [0, 2**48 - 1] (shifted left 16 bits into a 64-bit
    xxh3 seed, see ``doc_uniform``).
    """

    model_config = ConfigDict(extra="forbid")

    #: Domain rules, tried in order; the first match names the domain.
    rules: list[DomainRule] = []
    #: Domain of documents no rule matches.
    default_domain: str = "web"
    #: Target share of *tokens* per domain (normalised to sum 1). Empty: natural mixture, every
    #: document once. Domains present in the data but absent here get rate 0.
    weights: dict[str, NonNegFloat] = {}
    #: Total tokens in the mix, or ``all``: the largest budget that meets the targets using no
    #: domain more than once (the domain scarcest relative to its target is taken whole).
    total_tokens: int | Literal["all"] = "all"
    #: Maximum repetitions (epochs) per domain: one number for all, or per domain with ``"*"`` default.
    max_epochs: float | dict[str, float] = 4.0
    #: When a domain hits its cap, give its shortfall to the other domains in proportion to their
    #: weights so the budget is met (True), or leave the budget short (False).
    fill_budget: bool = True
    #: Seed of the sampling hash and of the shard shuffle.
    seed: int = Field(0, ge=0, le=2**48 - 1)

    @field_validator("weights")
    @classmethod
    def _weights_ok(cls, v):
        if v and sum(v.values()) <= 0:
            raise ValueError("mix.weights must not all be 0")
        return v

    @field_validator("total_tokens")
    @classmethod
    def _budget_ok(cls, v):
        if v != "all" and v < 1:
            raise ValueError(f"mix.total_tokens must be >= 1 (tokens) or 'all', not {v}")
        return v

    @field_validator("max_epochs")
    @classmethod
    def _epochs_ok(cls, v):
        for key, cap in (v.items() if isinstance(v, dict) else [(None, v)]):
            # NaN fails too: no comparison with it is true
            if not cap > 0:
                where = f"mix.max_epochs[{key!r}]" if key is not None else "mix.max_epochs"
                raise ValueError(f"{where} must be > 0 (repetitions of a domain), not {cap}")
        return v

    def check_in_manifest(self) -> None:
        """As a manifest's ``mix:`` section, ``weights`` (and per-domain ``max_epochs``) name domains
        the rules or ``default_domain`` make: an unknown name was accepted and gave 0 tokens, or
        every token to one domain. (The planner alone takes any domain names.) Raises ValueError."""
        known = sorted({r.domain for r in self.rules} | {self.default_domain})
        per_domain = [("weights", self.weights)]
        if isinstance(self.max_epochs, dict):
            per_domain.append(("max_epochs", {k: v for k, v in self.max_epochs.items() if k != "*"}))
        for name, mapping in per_domain:
            unknown = [d for d in mapping if d not in known]
            if unknown:
                raise ValueError(f"mix.{name} names domain(s) {', '.join(map(repr, unknown))} that no rule and not "
                                 f"default_domain makes; known domains: {', '.join(known)}")

    def epochs_cap(self, domain: str) -> float:
        if isinstance(self.max_epochs, dict):
            return float(self.max_epochs.get(domain, self.max_epochs.get("*", 4.0)))
        return float(self.max_epochs)


# ---------------------------------------------------------------------------------------- domains

def _as_list(v) -> list[str]:
    return [] if v is None else ([v] if isinstance(v, str) else list(v))


def _host_regex(patterns: list[str]) -> re.Pattern:
    parts = []
    for p in patterns:
        p = p.lower()
        rx = fnmatch.translate(p)
        if p.startswith("*."):  # "*.wikipedia.org" also names wikipedia.org itself
            rx = f"(?:{rx}|{fnmatch.translate(p[2:])})"
        parts.append(rx)
    return re.compile("|".join(parts))


class DomainAssigner:
    """Compiled ``MixConfig.rules``; ``__call__(table) -> list[str]`` (one domain per row)."""

    def __init__(self, cfg: MixConfig):
        self.default = cfg.default_domain
        self.rules = []
        for r in cfg.rules:
            self.rules.append((
                r.domain,
                _host_regex(_as_list(r.host)) if r.host is not None else None,
                re.compile("|".join(fnmatch.translate(p) for p in _as_list(r.url_path))) if r.url_path else None,
                re.compile("|".join(fnmatch.translate(p) for p in _as_list(r.source))) if r.source else None,
                set(_as_list(r.lang)) if r.lang is not None else None,
                r.column, set(_as_list(r.equals)) if r.equals is not None else None,
            ))

    def columns(self) -> list[str]:
        """Columns the rules read (besides url/host/source/lang)."""
        return sorted({r[5] for r in self.rules if r[5]})

    def __call__(self, table: pa.Table) -> list[str]:
        n = table.num_rows

        def col(name):
            return table.column(name).to_pylist() if name in table.column_names else [None] * n

        urls, hosts, sources, langs = col("url"), col("host"), col("source"), col("lang")
        extra = {c: col(c) for c in self.columns()}
        out = []
        for i in range(n):
            url = urls[i] or ""
            host = (hosts[i] or urlsplit(url).hostname or "").lower()
            path = urlsplit(url).path if url else ""
            dom = self.default
            for domain, hrx, prx, srx, langset, column, values in self.rules:
                if hrx is not None and not hrx.fullmatch(host):
                    continue
                if prx is not None and not prx.fullmatch(path):
                    continue
                if srx is not None and not srx.fullmatch(sources[i] or ""):
                    continue
                if langset is not None and langs[i] not in langset:
                    continue
                if column is not None and str(extra[column][i]) not in values:
                    continue
                dom = domain
                break
            out.append(dom)
        return out


# ---------------------------------------------------------------------------------------- planner

@dataclass
class DomainPlan:
    """Plan for one domain. Tokens include BOS/EOS. ``rate``: expected copies per document."""

    domain: str
    available_tokens: int
    target_share: float
    target_tokens: float
    planned_tokens: float
    rate: float
    max_epochs: float
    reason: str | None = None


def plan_mixture(available: dict[str, int], cfg: MixConfig) -> dict:
    """Per-domain sampling rates from counted tokens.

    ``available``: tokens per domain in the kept documents. Returns ``{"total_target", "total_planned",
    "domains": {name: DomainPlan as dict + "planned_share"}}``. Rules: with no weights every domain
    has rate 1. Otherwise shares are normalised over weighted domains that have documents; budget
    ``T`` is ``total_tokens`` or, for ``all``, ``min(A_d / w_d)``; each domain wants ``w_d * T``
    capped at ``A_d * max_epochs_d``; with ``fill_budget`` the capped shortfall is redistributed
    (repeatedly) over the uncapped domains by weight. ``reason`` says why a target is not met.
    """
    plans: dict[str, DomainPlan] = {}
    doms = sorted(set(available) | set(cfg.weights))
    if not cfg.weights:
        for d in doms:
            plans[d] = DomainPlan(d, available.get(d, 0), 0.0, 0.0, float(available.get(d, 0)), 1.0,
                                  cfg.epochs_cap(d))
        total = float(sum(available.values()))
        for p in plans.values():
            p.target_share = p.available_tokens / total if total else 0.0
            p.target_tokens = float(p.available_tokens)
        return _result(plans, total)
    wsum = sum(cfg.weights.values())
    for d in doms:
        w = cfg.weights.get(d, 0.0) / wsum
        plans[d] = DomainPlan(d, int(available.get(d, 0)), w, 0.0, 0.0, 0.0, cfg.epochs_cap(d))
        if d not in cfg.weights or w == 0:
            plans[d].reason = "no target weight: not sampled"
        elif plans[d].available_tokens == 0:
            plans[d].reason = "no documents in this domain"
    active = {d: p.target_share for d, p in plans.items() if p.target_share > 0 and p.available_tokens > 0}
    if not active:
        return _result(plans, 0.0)
    wact = sum(active.values())
    if cfg.total_tokens == "all":
        budget = min(plans[d].available_tokens / (w / wact) for d, w in active.items())
    else:
        budget = float(cfg.total_tokens)
    for p in plans.values():
        p.target_tokens = p.target_share * budget
    if cfg.total_tokens == "all" or not cfg.fill_budget:
        for d, w in active.items():
            p = plans[d]
            want = budget * w / (wact if cfg.total_tokens == "all" else 1.0)
            _allocate(p, want)
    else:
        remaining, todo = budget, dict(active)
        while todo:  # water-filling: fix capped domains, share the rest by weight, repeat
            wt = sum(todo.values())
            over = [d for d, w in todo.items()
                    if remaining * w / wt > plans[d].available_tokens * plans[d].max_epochs]
            if not over:
                for d, w in todo.items():
                    _allocate(plans[d], remaining * w / wt)
                break
            for d in over:
                _allocate(plans[d], remaining * todo[d] / wt)
                remaining -= plans[d].planned_tokens
                del todo[d]
    for p in plans.values():
        if p.reason is None and p.planned_tokens > p.target_tokens * (1 + 1e-9) and p.target_tokens > 0:
            p.reason = "raised above target to fill the budget left by capped or empty domains"
    return _result(plans, budget)


def _allocate(p: DomainPlan, want: float) -> None:
    cap = p.available_tokens * p.max_epochs
    if want > cap:
        p.planned_tokens = float(cap)
        p.reason = f"capped at max_epochs={p.max_epochs:g} (target needs {want / p.available_tokens:.4g} epochs)"
    else:
        p.planned_tokens = float(want)
    # rounded so a domain taken exactly whole has rate 1.0, not 0.9999999999999999
    p.rate = round(p.planned_tokens / p.available_tokens, 12)


def _result(plans: dict[str, DomainPlan], budget: float) -> dict:
    total = sum(p.planned_tokens for p in plans.values())
    doms = {}
    for d, p in sorted(plans.items()):
        doms[d] = asdict(p) | {"planned_share": p.planned_tokens / total if total else 0.0}
    out = {"total_target": budget, "total_planned": total, "domains": doms}
    if budget and total < budget * (1 - 1e-9):
        out["reason"] = "budget not reachable: every weighted domain is at its max_epochs cap"
    return out


# ---------------------------------------------------------------------------------------- sampling

def doc_uniform(doc_ids: list[str], seed: int, salt: int = 0) -> np.ndarray:
    """Uniform [0, 1) float64 per id: xxh3_64(id, seed=seed*2^16+salt) / 2^64 (independent of order)."""
    s = (int(seed) << 16) + salt
    return np.fromiter((xxhash.xxh3_64_intdigest(i.encode(), seed=s) for i in doc_ids),
                       dtype=np.float64, count=len(doc_ids)) / _TWO64


def copies(doc_ids: list[str], rates: np.ndarray | float, seed: int) -> np.ndarray:
    """Copies of each document in the mix (int64): ``floor(rate) + (u(id) < frac(rate))``.

    ``rates``: one rate or one per document. Expected copies = rate exactly; the same id, rate and
    seed always give the same count.
    """
    r = np.broadcast_to(np.asarray(rates, dtype=np.float64), (len(doc_ids),))
    whole = np.floor(r)
    return (whole + (doc_uniform(doc_ids, seed) < (r - whole))).astype(np.int64)


def shuffle_keys(doc_ids: list[str], copy_idx: np.ndarray, seed: int) -> np.ndarray:
    """int64 shuffle key of each (document, copy): xxh3_64 of ``id:copy`` seeded by ``seed``, top 63 bits
    (non-negative, so Parquet statistics and filters compare it as a plain signed integer)."""
    s = (int(seed) << 16) + 1
    return np.fromiter((xxhash.xxh3_64_intdigest(f"{i}:{c}".encode(), seed=s) >> 1 for i, c in zip(doc_ids, copy_idx)),
                       dtype=np.int64, count=len(doc_ids))
