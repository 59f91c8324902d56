"""Decision rules as data (``datapipe.stage.Rule``): their semantics on hand-worked values, and
that every registered stage declares rules on its own columns and config fields."""
from __future__ import annotations

import math

import numpy as np
import pytest
from pydantic import Field

from datapipe.stage import Rule, Stage, StageConfig, first_reason, registry


class Cfg(StageConfig):
    lo: float | None = 0.5
    on: bool = True
    zero_ok: bool = False
    by_n: dict[int, float | None] = Field(default_factory=lambda: {2: 0.2, 3: None})
    per_lang: dict[str, float] = Field(default_factory=lambda: {"de": 0.9})
    langs: list[str] = ["en"]
    allowed: list[str] | None = ["en", "fr"]


def test_comparisons_limits_and_switches_on_scalars():
    c = Cfg()
    below = Rule("s:low", "x", "<", "lo")
    assert below.rejects(0.4, c) and not below.rejects(0.5, c)  # strictly below 0.5
    assert not below.rejects(None, c) and not below.rejects(math.nan, c)  # null: rule does not apply
    assert not below.rejects(0.0, Cfg(lo=None))  # a None threshold switches the rule off
    fixed = Rule("s:empty", "n", "==", value=0)
    assert fixed.rejects(0, c) and not fixed.rejects(1, c) and fixed.limit(c) == 0
    switched = Rule("s:flag", "b", ">", value=0, switch="on")
    assert switched.rejects(True, c) and not switched.rejects(True, Cfg(on=False))
    zero = Rule("s:frac", "f", "<", "lo", zero_passes="zero_ok")
    assert zero.rejects(0.0, c) and not zero.rejects(0.0, Cfg(zero_ok=True)) and zero.rejects(0.1, Cfg(zero_ok=True))
    keyed2, keyed3 = Rule("s:g2", "g2", ">", "by_n", key=2), Rule("s:g3", "g3", ">", "by_n", key=3)
    assert keyed2.rejects(0.21, c) and not keyed2.rejects(0.2, c) and not keyed3.rejects(1.0, c)
    assert not Rule("s:g4", "g4", ">", "by_n", key=4).rejects(1.0, c)  # size missing from the map: off
    lang = Rule("s:lang", "lang", "not in", "allowed")
    assert lang.rejects("de", c) and not lang.rejects("fr", c) and not lang.rejects("de", Cfg(allowed=None))
    per = Rule("s:score", "score", "<", "lo", by_lang="per_lang")
    assert per.rejects(0.8, c, lang="de") and not per.rejects(0.8, c, lang="en")  # de's own 0.9, else 0.5
    scoped = Rule("s:scoped", "score", ">", "lo", languages="langs")
    assert scoped.rejects(0.6, c, lang="en") and not scoped.rejects(0.6, c, lang="de")
    assert scoped.rejects(0.6, c, lang=None) and scoped.rejects(0.6, Cfg(langs=[]), lang="de")
    assert per.params == ("lo", "per_lang") and zero.params == ("lo", "zero_ok") and fixed.params == ()


def test_first_reason_takes_the_first_rule_that_rejects():
    rules = (Rule("s:a", "a", ">", "lo"), Rule("s:b", "b", "<", "lo"))
    assert first_reason(rules, {"a": 0.6, "b": 0.1}, Cfg()) == "s:a"
    assert first_reason(rules, {"a": 0.5, "b": 0.1}, Cfg()) == "s:b"
    assert first_reason(rules, {"a": None, "b": 0.9}, Cfg()) is None


def test_array_form_equals_the_scalar_form():
    values = np.array([0.0, 0.1, 0.5, 0.7, np.nan])
    for rule in (Rule("s:a", "x", "<", "lo", zero_passes="zero_ok"), Rule("s:b", "x", ">", "by_n", key=2),
                 Rule("s:c", "x", "==", value=0), Rule("s:d", "x", ">", "lo", switch="on")):
        for cfg in (Cfg(), Cfg(zero_ok=True, on=False), Cfg(lo=None)):
            want = [rule.rejects(None if math.isnan(v) else float(v), cfg) for v in values]
            assert rule.rejects_array(values, cfg).tolist() == want, (rule, cfg)
    with pytest.raises(ValueError, match="row by row"):
        Rule("s:l", "lang", "not in", "allowed").rejects_array(values, Cfg())


def _stage_params(cls) -> list[tuple[str, object]]:
    return [(name, cls) for name, cls in registry().items()]


@pytest.mark.parametrize("name,cls", _stage_params(Stage))
def test_every_stage_declares_rules_on_its_own_columns_and_config_fields(name, cls):
    """A stage that decides from stored signals declares rules: each on a column the stage writes
    (``fields``, or a stored column it ``edits``: langid's ``lang``) and reading only fields of its
    Config; each limit resolves under the default config."""
    if cls.decide.__func__ is not Stage.decide.__func__:
        assert cls.rules, f"{name} overrides decide but declares no rules"
    own = {f.name for f in cls.fields} | set(cls.edits)
    config = cls.Config.model_fields
    for rule in cls.rules:
        assert isinstance(rule, Rule)
        assert rule.column in own, (name, rule.column)
        assert set(rule.params) <= set(config), (name, rule.params)
        if rule.key is not None:
            assert isinstance(cls.Config().model_dump()[rule.threshold], dict), (name, rule)
        try:
            cfg = cls.Config()
        except Exception:  # a required setting (no default): nothing to resolve
            continue
        rule.limit(cfg)


def test_the_chain_stages_that_reject_on_signals_declare_rules():
    """The stages with a threshold on a stored signal can be retuned by --what-if."""
    reg = registry()
    with_rules = {n for n, c in reg.items() if c.rules}
    assert {"langid", "gopher_repetition", "gopher_quality", "fineweb", "c4", "ldnoobw", "toxicity", "nsfw",
            "profanity", "quality_classifier"} <= with_rules
    assert "extract" not in with_rules and "url_blocklist" not in with_rules
    gr = reg["gopher_repetition"]
    assert {r.column for r in gr.rules} == {f.name for f in gr.fields}  # one rule a repetition signal


def test_decontam_rules_replay_each_action_by_hand():
    """Hand-worked cases of decontam's two rules: a mode switch (``only_if``), a conjunction
    (``requires``) and a reason naming the top benchmark (``reason_from``)."""
    cls = registry()["decontam"]
    c = cls.Config
    hit = {"decontam_ngrams": 3, "decontam_benchmarks": ["mmlu", "gsm8k"], "decontam_share": 0.6}
    assert cls.decide(hit, c(action="drop")) == "decontam:mmlu"
    assert cls.decide({**hit, "decontam_benchmarks": []}, c(action="drop")) is None
    assert cls.decide(hit, c(action="drop", min_ngrams=4)) is None
    assert cls.decide(hit, c(action="remove", drop_share=0.5)) == "decontam:mmlu"
    assert cls.decide({**hit, "decontam_share": 0.4}, c(action="remove", drop_share=0.5)) is None
    assert cls.decide(hit, c(action="remove", drop_share=0.5, min_ngrams=4)) is None  # too few runs now
    assert cls.decide(hit, c(action="signals")) is None
    assert [r.describe() for r in cls.rules] == [
        "decontam_ngrams >= min_ngrams if action == 'drop'",
        "decontam_share >= drop_share and decontam_ngrams >= min_ngrams if action == 'remove'"]
