"""Stage decisions from stored signals: deciders, signal columns, thresholds, and ``what_if``.

``datapipe inspect --what-if`` and ``--reason`` need, per stage, its decision rule on one row of
stored signals: the stage's ``decide(signals, config)`` classmethod (``Stage.recomputable``), or,
for score stages built on ``fasttext_score.FastTextScoreStage`` (``toxicity``, ``nsfw``,
``quality_classifier``), ``fasttext_score.score_decision`` on the stage's declared ``column`` and
``threshold``.

Stages without any (extract, url_blocklist: they decide from the page or from lists, not from a
stored number) cannot be recomputed and say so. Rule tables (``(reason, column, params, predicate)``
lists such as ``gopher.QUALITY_RULES``) name the column and config fields behind each reason.
"""
from __future__ import annotations

import re
import sys

import yaml

from datapipe.inspect.reader import InspectError, Run, _ident
from datapipe.manifest import yaml_guard


def stage_class(name: str):
    """The registered stage class called ``name`` (InspectError if unknown)."""
    from datapipe.stage import registry

    reg = registry()
    if name not in reg:
        from datapipe.manifest.suggest import did_you_mean

        raise InspectError(f"unknown stage {name!r}{did_you_mean(name, reg)}; known: {', '.join(sorted(reg))}")
    return reg[name]


def _class_decider(cls):
    return cls.decide if getattr(cls, "recomputable", False) else None


def decider_for(stage: str, old_cfg: dict, new_cfg: dict):
    """``(decide(row, config) -> reason | None, old config object, new config object)`` for ``stage``."""
    cls = stage_class(stage)
    try:
        old_c, new_c = cls.Config(**(old_cfg or {})), cls.Config(**(new_cfg or {}))
    except Exception as e:  # pydantic ValidationError: one line per field, not a trace or a docs link
        from datapipe.manifest.suggest import config_error

        why = config_error(stage, e, cls.Config) if hasattr(e, "errors") else f"{stage}: {e}"
        raise InspectError(f"invalid config for what-if: {why}") from e
    fn = _class_decider(cls)
    if fn is not None:
        return (lambda row, c: fn(row, c)), old_c, new_c
    if hasattr(cls, "column") and hasattr(cls, "reject_above") and "threshold" in cls.Config.model_fields:
        from datapipe.stages.fasttext_score import score_decision

        def score(row, c):
            lang_ok = not getattr(c, "languages", None) or row.get("lang") in c.languages
            v = row.get(cls.column) if lang_ok else None
            return f"{stage}:score" if score_decision(v, c.threshold, cls.reject_above) else None
        return score, old_c, new_c
    raise InspectError(f"stage {stage!r} cannot be recomputed from stored signals (it exposes no decide "
                       f"function); recomputable: {', '.join(recomputable())}")


def recomputable() -> list[str]:
    """Names of the registered stages whose decisions ``--what-if`` can recompute."""
    from datapipe.stage import registry

    out = []
    for name, cls in sorted(registry().items()):
        if _class_decider(cls) is not None or (hasattr(cls, "column") and "threshold" in cls.Config.model_fields):
            out.append(name)
    return out


def rule_tables(cls) -> list[tuple]:
    """``(reason, column, params, predicate)`` tuples found in the stage's module (rule lists)."""
    mod = sys.modules[cls.__module__]
    rules = []
    for v in vars(mod).values():
        if isinstance(v, list) and v and all(isinstance(r, tuple) and len(r) == 4 and isinstance(r[0], str)
                                             and callable(r[3]) for r in v):
            rules += v
    return rules


def stage_signal_columns(stage: str, reason: str | None = None) -> list[str]:
    """Columns a stage decides on: the reason's rule column if known, else every signal it writes."""
    try:
        cls = stage_class(stage)
    except InspectError:
        return []
    if stage == "langid":
        return ["lang", "lang_score"]
    if hasattr(cls, "column") and getattr(cls, "column"):
        return [cls.column]
    cols = [r[1] for r in rule_tables(cls) if r[0] == reason]
    return cols or [f.name for f in getattr(cls, "fields", [])]


def thresholds(stage: str, reason: str | None, config: dict | None) -> dict:
    """Config values behind ``reason`` (all numeric config fields when the rule is not known)."""
    try:
        cls = stage_class(stage)
        cfg = cls.Config(**(config or {}))
    except Exception:
        return {}
    params = [p for r in rule_tables(cls) if r[0] == reason for p in r[2]]
    values = cfg.model_dump()
    if stage == "langid":
        params = ["languages", "min_score", "min_score_by_lang"]
    elif getattr(cls, "column", None) and "threshold" in values:
        params = ["threshold"]
    if params:
        return {p: values.get(p) for p in params}
    col = [r[1] for r in rule_tables(cls) if r[0] == reason]
    # Rules without declared params (word_count): fields named like the column (min_words ~ word_count).
    def stems(name):
        return {w.rstrip("s") for w in name.split("_")} - {"gopher", "c4", "fineweb", "frac", "ratio", "min", "max"}
    words = stems(col[0]) if col else set()
    return {k: v for k, v in values.items()
            if isinstance(v, (int, float, dict)) and not isinstance(v, bool) and (not words or stems(k) == words - {"count"})}


def column_thresholds(stage: str, config: dict | None) -> dict[str, list[float]]:
    """Per signal column, the numeric thresholds a stage compares it with (to draw on histograms)."""
    try:
        cls = stage_class(stage)
        values = cls.Config(**(config or {})).model_dump()
    except Exception:
        return {}
    out: dict[str, list[float]] = {}
    if stage == "langid":
        out["lang_score"] = [values["min_score"]]
    elif stage == "gopher_repetition":  # one threshold per column: gopher_<key>, n-gram keys per n
        for key, v in values.items():
            if isinstance(v, dict):
                kind = key.split("_ngram")[0]  # top / dup
                out.update({f"gopher_{kind}_{n}gram_char_frac": [float(t)] for n, t in v.items() if t is not None})
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                out[f"gopher_{key}"] = [float(v)]
    elif hasattr(cls, "column") and getattr(cls, "column") and values.get("threshold") is not None:
        out[cls.column] = [values["threshold"]]
    for reason, col, _, _ in rule_tables(cls):
        th = thresholds(stage, reason, config)
        nums = [float(v) for v in th.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        if nums:
            out.setdefault(col, [])
            out[col] += [v for v in nums if v not in out[col]]
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
        t = run.query(f"SELECT {', '.join(map(_ident, cols))} FROM {run.source(kind)} WHERE {cond}", params)
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
