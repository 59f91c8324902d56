"""Stage decisions from stored signals: deciders, signal columns and thresholds (``what_if`` uses them).

``datapipe inspect --what-if`` and ``--reason`` need, per stage, its decision rules on one row of
stored signals: the ``rules`` each stage declares (``datapipe.stage.Rule``: signal column,
comparison, the config field holding the threshold, the reason), replayed by ``Stage.decide``.
Stages without rules (extract, url_blocklist: they decide from the page or from lists, not from a
stored number) cannot be recomputed and say so.
"""
from __future__ import annotations

from datapipe.inspect.errors import InspectError
from datapipe.manifest.suggest import config_error, did_you_mean
from datapipe.stage import registry


def stage_class(name: str):
    """The registered stage class called ``name`` (InspectError if unknown)."""

    reg = registry()
    if name not in reg:

        raise InspectError(f"unknown stage {name!r}{did_you_mean(name, reg)}; known: {', '.join(sorted(reg))}")
    return reg[name]


def decider_for(stage: str, old_cfg: dict, new_cfg: dict):
    """``(decide(row, config) -> reason | None, old config object, new config object)`` for ``stage``."""
    cls = stage_class(stage)
    try:
        old_c, new_c = cls.Config(**(old_cfg or {})), cls.Config(**(new_cfg or {}))
    except Exception as e:  # pydantic ValidationError: one line per field, not a trace or a docs link

        why = config_error(stage, e, cls.Config) if hasattr(e, "errors") else f"{stage}: {e}"
        raise InspectError(f"invalid config for what-if: {why}") from e
    if not cls.rules:
        raise InspectError(f"stage {stage!r} cannot be recomputed from stored signals (it declares no decision "
                           f"rules); recomputable: {', '.join(recomputable())}")
    return cls.decide, old_c, new_c


def recomputable() -> list[str]:
    """Names of the registered stages whose decisions ``--what-if`` can recompute (those with rules)."""

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
