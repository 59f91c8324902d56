"""Degenerate ablation inputs, caught before training or before ranking.

* ``check_eval_sets``: a held-out set too small to score (empty, or under ``heldout.min_tokens``)
  is refused before any proxy trains -- its loss would be ``nan`` or noise.
* ``effective_mixtures``: candidates whose training sets are identical once the planner's
  repetition caps apply (a small domain cannot be upsampled past ``max_epochs``) are trained once;
  the others are reported as duplicates. A domain too small for its weight is flagged with target
  and achieved share.
* ``check_losses``: a ``nan``/``inf`` held-out loss is an error naming the mixture, seed and set.
"""
from __future__ import annotations

import math

from datapipe.ablate.data import Pool, plan_selection
from datapipe.ablate.mixtures import mixture_id

#: Absolute share difference (target vs achieved) above which a capped domain is flagged (whole
#: documents alone also move shares a little; that is not a flag).
SHARE_TOLERANCE = 0.01


def check_eval_sets(sizes: dict[str, int], min_tokens: int, pool: Pool) -> None:
    """Raise ValueError naming every eval set with fewer than ``min_tokens`` tokens.

    ``sizes``: tokens per eval set (held-out domains and extra sets). The message says how many
    documents the domain has and which knob gives it a usable held-out set.
    """
    bad = []
    for name, n in sorted(sizes.items()):
        if n >= min_tokens:
            continue
        if name in pool.train:
            docs = pool.train[name].num_rows + pool.heldout[name].num_rows
            bad.append(f"{name!r} has {n} held-out tokens (domain of {docs} documents, "
                       f"{pool.available()[name]} training tokens)")
        else:
            bad.append(f"extra set {name!r} has {n} tokens")
    if bad:
        raise ValueError("held-out set(s) too small to score (heldout.min_tokens "
                         f"{min_tokens}): {'; '.join(bad)}. Raise heldout.fraction, drop the domain from "
                         "`domains:`, or give the extra set more text")


def effective_mixtures(pool: Pool, mixes: list[dict[str, float]], budget: int, max_epochs: float,
                       seed: int) -> dict:
    """Group candidates by the training set they produce.

    Returns ``{"kept": [weights, ...]`` (candidate order; one per distinct training set, the
    smallest ``mixture_id`` of its group, so the choice does not depend on candidate order),
    ``"duplicates": {kept_id: [dropped_id, ...]}``, ``"flags": {mixture_id: [text, ...]}``
    (domains capped at ``max_epochs`` whose achieved share misses the target by more than
    ``SHARE_TOLERANCE``: too small for their weight),
    ``"selections": {mixture_id: plan_selection result}``}``.
    """
    groups: dict[str, list[str]] = {}
    by_id, sels, flags = {}, {}, {}
    avail = pool.available()
    for w in mixes:
        mid = mixture_id(w)
        sel = plan_selection(pool, w, budget, max_epochs, seed)
        by_id[mid], sels[mid] = w, sel
        groups.setdefault(sel["signature"], []).append(mid)
        total = sum(sel["tokens"].values())
        notes = []
        for d, target in sorted(w.items()):
            got = sel["tokens"].get(d, 0) / total if total else 0.0
            why = sel["plan"]["domains"].get(d, {}).get("reason") or ""
            if target > 0 and why.startswith("capped") and abs(got - target) > SHARE_TOLERANCE:
                notes.append(f"{d}: target {target:.3f}, achieved {got:.3f} ({avail.get(d, 0)} training tokens; {why})")
        if notes:
            flags[mid] = notes
    keep = {min(ids) for ids in groups.values()}
    dups = {min(ids): sorted(set(ids) - {min(ids)}) for ids in groups.values() if len(set(ids)) > 1}
    return {"kept": [w for w in mixes if mixture_id(w) in keep], "duplicates": dups, "flags": flags,
            "selections": sels}


def check_losses(records: list[dict], eval_names: list[str]) -> None:
    """Raise ValueError for the first missing or non-finite loss, naming mixture, seed and set.

    ``records``: per-mixture records with ``runs`` ``[{"seed", "eval": {set: {"loss"}}}]``.
    """
    for r in sorted(records, key=lambda r: r["mixture_id"]):
        for run in r["runs"]:
            for n in eval_names:
                v = (run["eval"].get(n) or {}).get("loss")
                if not isinstance(v, (int, float)) or not math.isfinite(v):
                    raise ValueError(f"mixture {r['mixture_id']} seed {run['seed']}: held-out set {n!r} "
                                     f"loss is {v!r} (not finite): the proxy diverged or the set scored no "
                                     "tokens; nothing is ranked")
