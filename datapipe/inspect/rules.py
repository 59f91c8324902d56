"""Stage decisions from stored signals: deciders, signal columns, thresholds, and ``what_if``.

``datapipe inspect --what-if`` and ``--reason`` need, per stage, its decision rules on one row of
stored signals: the ``rules`` each stage declares (``datapipe.stage.Rule``: signal column,
comparison, the config field holding the threshold, the reason), replayed by ``Stage.decide``.
Stages without rules (extract, url_blocklist: they decide from the page or from lists, not from a
stored number) cannot be recomputed and say so.
"""
from __future__ import annotations

import re

import yaml

from datapipe.inspect.reader import InspectError, Run, ident
from datapipe.manifest import yaml_guard


def stage_class(name: str):
    """The registered stage class called ``name`` (InspectError if unknown)."""
    from datapipe.stage import registry

    reg = registry()
    if name not in reg:
        from datapipe.manifest.suggest import did_you_mean

        raise InspectError(f"unknown stage {name!r}{did_you_mean(name, reg)}; known: {', '.join(sorted(reg))}")
    return reg[name]


def decider_for(stage: str, old_cfg: dict, new_cfg: dict):
    """``(decide(row, config) -> reason | None, old config object, new config object)`` for ``stage``."""
    cls = stage_class(stage)
    try:
        old_c, new_c = cls.Config(**(old_cfg or {})), cls.Config(**(new_cfg or {}))
    except Exception as e:  # pydantic ValidationError: one line per field, not a trace or a docs link
        from datapipe.manifest.suggest import config_error

        why = config_error(stage, e, cls.Config) if hasattr(e, "errors") else f"{stage}: {e}"
        raise InspectError(f"invalid config for what-if: {why}") from e
    if not cls.rules:
        raise InspectError(f"stage {stage!r} cannot be recomputed from stored signals (it declares no decision "
                           f"rules); recomputable: {', '.join(recomputable())}")
    return cls.decide, old_c, new_c


def recomputable() -> list[str]:
    """Names of the registered stages whose decisions ``--what-if`` can recompute (those with rules)."""
    from datapipe.stage import registry

    return [name for name, cls in sorted(registry().items()) if cls.rules]


def _rules_of(cls, reason: str | None) -> tuple:
    """The stage's rules that give ``reason`` (all of them when none does)."""
    return tuple(r for r in cls.rules if r.reason == reason) or cls.rules


def stage_signal_columns(stage: str, reason: str | None = None) -> list[str]:
    """Columns a stage decides on: those of the reason's rules (``lang`` first where a rule is per
    language), of all its rules when the reason is not one of them, else every signal it writes."""
    try:
        cls = stage_class(stage)
    except InspectError:
        return []
    rules = _rules_of(cls, reason)
    cols = (["lang"] if any(r.by_lang or r.languages for r in rules) else []) + [c for r in rules for c in r.columns()]
    return list(dict.fromkeys(cols)) or [f.name for f in cls.fields]


def thresholds(stage: str, reason: str | None, config: dict | None) -> dict:
    """Config values behind ``reason``: the fields its rules read (every rule's when the reason is
    not one of them); for a stage without rules, all its numeric settings."""
    try:
        cls = stage_class(stage)
        values = cls.Config(**(config or {})).model_dump()
    except Exception:
        return {}
    params = dict.fromkeys(p for r in _rules_of(cls, reason) for p in r.params)
    if params:
        return {p: values.get(p) for p in params}
    return {k: v for k, v in values.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}


def column_thresholds(stage: str, config: dict | None) -> dict[str, list[float]]:
    """Per signal column, the thresholds (from config fields) a stage compares it with under
    ``config``, for the report's histograms: rules switched off or with fixed limits draw none."""
    try:
        cls = stage_class(stage)
        cfg = cls.Config(**(config or {}))
    except Exception:
        return {}
    out: dict[str, list[float]] = {}
    for rule in cls.rules:
        lim = rule.limit(cfg) if rule.threshold else None
        if isinstance(lim, (int, float)) and not isinstance(lim, bool) and float(lim) not in out.get(rule.column, []):
            out.setdefault(rule.column, []).append(float(lim))
    return out


def signal_reasons(stages: list[str]) -> dict[str, list[str]]:
    """Per signal column, the rejection reasons the ``stages``' declared rules decide on it."""
    out: dict[str, list[str]] = {}
    for name in stages:
        try:
            cls = stage_class(name)
        except InspectError:
            continue
        for rule in cls.rules:
            if rule.reason not in out.setdefault(rule.column, []):
                out[rule.column].append(rule.reason)
    return out


# -------------------------------------------------------------------------------- what-if

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
    from datapipe.inspect.run_config import effective_stage_configs

    chain = effective_stage_configs(run)  # defaults filled in, also for ledgers that recorded {}
    names = [n for n, _ in chain]
    if stage not in names:
        from datapipe.manifest.suggest import did_you_mean

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
