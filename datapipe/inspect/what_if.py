"""``datapipe inspect --what-if``: recompute one stage's decisions from stored signals with changed settings."""
from __future__ import annotations

import re

import yaml

from datapipe.inspect.errors import InspectError
from datapipe.inspect.reader import Run, ident
from datapipe.inspect.rules import decider_for
from datapipe.inspect.run_config import effective_stage_configs
from datapipe.manifest import yaml_guard
from datapipe.manifest.suggest import did_you_mean


def parse_change(change: str) -> tuple[str, str, object]:
    """``'langid.min_score=0.9'`` -> ``('langid', 'min_score', 0.9)``; the value is read as YAML."""
    m = re.fullmatch(r"\s*([\w-]+)\.([\w.-]+)\s*=(.*)", change)
    if not m:
        raise InspectError(f"--what-if {change!r}: expected STAGE.PARAM=VALUE, e.g. langid.min_score=0.9")
    try:
        value = yaml_guard.safe_load(m.group(3))
    except (yaml.YAMLError, yaml_guard.YamlSizeError) as e:
        raise InspectError(f"--what-if {change!r}: the value is not YAML: {e}") from None
    return m.group(1), m.group(2), value


def what_if(run: Run, changes: list[str]) -> dict:
    """Recompute one stage's decisions from stored signals with changed config values.

    Rows that reached the stage (kept, and rejected/errored at it or later) are re-decided. Returns
    old/new counts per reason of the stage, how many kept documents would be rejected, how many
    later-stage rejections would move to this stage, and how many of the stage's rejections would
    pass it (an upper bound on new kept documents: later stages never saw them). ``reproduced`` counts
    rows whose recomputed decision under the run's own config equals the stored one.
    ``config_old``/``config_new``: every setting of the stage, defaults filled in.
    """
    parsed = [parse_change(c) for c in changes]
    stage = {p[0] for p in parsed}
    if len(stage) != 1:
        raise InspectError("--what-if changes must all name the same stage")
    stage = stage.pop()
    chain = effective_stage_configs(run)  # defaults filled in, also for ledgers that recorded {}
    names = [n for n, _ in chain]
    if stage not in names:
        raise InspectError(f"stage {stage!r} is not in this run's chain{did_you_mean(stage, names)} "
                           f"({', '.join(names) or 'unknown: no stage configs'})")
    old_cfg = dict(chain)[stage] or {}
    new_cfg = dict(old_cfg)
    for _, param, value in parsed:
        new_cfg[param] = value
    decide, old_c, new_c = decider_for(stage, old_cfg, new_cfg)
    # Rows that got past the earlier stages: everything not rejected/errored before this stage
    # (global phases such as dedup count as later, whatever stage name they stamp).
    earlier = ["read"] + names[:names.index(stage)]
    rows = []
    for kind in ("kept", "rejected", "errors"):
        if not run.files(kind):
            continue
        cols = [c for c in run.columns(kind) if c not in ("text", "warnings")]
        cond = {"kept": "TRUE", "rejected": "coalesce(reject_stage, '') NOT IN (SELECT unnest(?))",
                "errors": "coalesce(error_stage, '') NOT IN (SELECT unnest(?))"}[kind]
        params = [] if kind == "kept" else [earlier]
        t = run.query(f"SELECT {', '.join(map(ident, cols))} FROM {run.source(kind)} WHERE {cond}", params)
        rows += [(kind, r) for r in t.to_pylist()]
    old_counts, new_counts = {}, {}
    moved = {"kept_to_rejected": 0, "later_rejection_to_this_stage": 0, "would_pass": 0, "reason_changed": 0}
    reproduced = 0
    for kind, r in rows:
        stored = r.get("reject_reason") if kind == "rejected" and r.get("reject_stage") == stage else None
        old, new = decide(r, old_c), decide(r, new_c)
        reproduced += old == stored
        if stored:
            old_counts[stored] = old_counts.get(stored, 0) + 1
        if new:
            new_counts[new] = new_counts.get(new, 0) + 1
        if stored and not new:
            moved["would_pass"] += 1
        elif stored and new != stored:
            moved["reason_changed"] += 1
        elif not stored and new:
            moved["kept_to_rejected" if kind == "kept" else "later_rejection_to_this_stage"] += 1
    kept = run.ledger.kept
    return {"stage": stage, "changes": {p: v for _, p, v in parsed}, "config_old": old_cfg, "config_new": new_cfg,
            "rows_reached_stage": len(rows), "reproduced": reproduced,
            "rejected_old": dict(sorted(old_counts.items())), "rejected_new": dict(sorted(new_counts.items())),
            "moved": moved, "kept_old": kept,
            "kept_new_min": kept - moved["kept_to_rejected"],
            "kept_new_max": kept - moved["kept_to_rejected"] + moved["would_pass"]}
