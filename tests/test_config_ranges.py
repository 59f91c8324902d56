"""Every numeric config has a range, checked when the manifest loads (issue 14).

One manifest per range rule (``file:line: field: message``), the shipped manifests still load, and
a walk over every registered stage and phase config (and the manifest's own models) that fails on
a numeric field accepting an absurd value, so a new field cannot slip in without a range.
"""
from __future__ import annotations

import math
import re
import types
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError

from datapipe.manifest.load import (
    Cluster,
    Inputs,
    Manifest,
    ManifestError,
    load_manifest,
)
from datapipe.stage import registry

REPO = Path(__file__).resolve().parent.parent
GE0, GE1, GT0 = "greater than or equal to 0", "greater than or equal to 1", "greater than 0"
LE1, LT1 = "less than or equal to 1", "less than 1"

# (section YAML, field as the message names it, message fragment). Stages go under ``stages:`` as
# the first item; the line expected is the one holding the field's last key (or the section key
# for a rule on two fields).
STAGE_CASES = [
    ("langid: {min_score: -0.5}", "langid.min_score", GE0),   # issue 14: kept everything
    ("langid: {min_score: 1.5}", "langid.min_score", LE1),
    ("langid: {min_score: .nan}", "langid.min_score", LE1),
    ("langid:\n      min_score_by_lang:\n        de: 2", "langid.min_score_by_lang.de", LE1),
    ("langid: {max_chars: 0}", "langid.max_chars", GE1),
    ("gopher_quality:\n      min_words: -10\n      max_words: -5", "gopher_quality.min_words", GE0),  # issue 14
    ("gopher_quality:\n      min_words: -10\n      max_words: -5", "gopher_quality.max_words", GE1),
    ("gopher_quality:\n      min_words: 200\n      max_words: 100", "gopher_quality",
     "min_words (200) must be <= max_words (100)"),
    ("gopher_quality: {min_words: 200000}", "gopher_quality", "min_words (200000) must be <= max_words (100000)"),
    ("gopher_quality: {min_mean_word_length: 12}", "gopher_quality",
     "min_mean_word_length (12) must be <= max_mean_word_length (10)"),
    ("gopher_quality: {max_mean_word_length: 0}", "gopher_quality.max_mean_word_length", GT0),
    ("gopher_quality: {max_symbol_word_ratio: -0.1}", "gopher_quality.max_symbol_word_ratio", GE0),
    ("gopher_quality: {max_bullet_lines_ratio: 1.2}", "gopher_quality.max_bullet_lines_ratio", LE1),
    ("gopher_quality: {max_ellipsis_lines_ratio: -0.3}", "gopher_quality.max_ellipsis_lines_ratio", GE0),
    ("gopher_quality: {min_alpha_words_ratio: 1.8}", "gopher_quality.min_alpha_words_ratio", LE1),
    ("gopher_quality: {min_stop_words: -2}", "gopher_quality.min_stop_words", GE0),
    ("gopher_repetition: {dup_line_frac: 1.5}", "gopher_repetition.dup_line_frac", LE1),
    ("gopher_repetition: {dup_para_char_frac: -0.2}", "gopher_repetition.dup_para_char_frac", GE0),
    ("gopher_repetition:\n      top_ngram_char_frac:\n        2: -0.2", "gopher_repetition.top_ngram_char_frac[2]",
     GE0),
    ("gopher_repetition:\n      dup_ngram_char_frac:\n        5: 1.5", "gopher_repetition.dup_ngram_char_frac[5]", LE1),
    ("c4: {min_words_per_line: -3}", "c4.min_words_per_line", GE0),
    ("c4: {min_sentences: -5}", "c4.min_sentences", GE0),
    ("c4: {max_bad_words: -1}", "c4.max_bad_words", GE0),
    ("fineweb: {line_punct_thr: 2}", "fineweb.line_punct_thr", LE1),
    ("fineweb: {short_line_thr: -0.67}", "fineweb.short_line_thr", GE0),
    ("fineweb: {short_line_length: 0}", "fineweb.short_line_length", GE1),
    ("fineweb: {char_duplicates_ratio: 1.01}", "fineweb.char_duplicates_ratio", LE1),
    ("fineweb: {new_line_ratio: -0.3}", "fineweb.new_line_ratio", GE0),
    ("extract: {timeout_s: 0}", "extract.timeout_s", GT0),
    # pydantic's lax mode took a boolean as 1 / 1.0 (``min_score: true`` kept only scores of 1.0)
    ("langid: {min_score: true}", "langid.min_score", "a number is expected here, not true"),
    ("extract: {timeout_s: false}", "extract.timeout_s", "a number is expected here, not false"),
    ("nsfw: {threshold: true}", "nsfw.threshold", "a number is expected here, not true"),
    ("extract: {max_payload_bytes: 0}", "extract.max_payload_bytes", GE1),
    ("extract: {min_chars: -1}", "extract.min_chars", GE0),
    ("extract: {fallback_chars: -200}", "extract.fallback_chars", GE0),
    ("quality_classifier: {threshold: 1.5}", "quality_classifier.threshold", LE1),
    ("toxicity: {threshold: -0.5}", "toxicity.threshold", GE0),
    ("nsfw: {threshold: 2}", "nsfw.threshold", LE1),
    ("profanity: {threshold: 1.01}", "profanity.threshold", LE1),
    ("profanity: {max_chars: 0}", "profanity.max_chars", GE1),
    ("ldnoobw: {max_count: -1}", "ldnoobw.max_count", GE0),
    ("ldnoobw: {max_fraction: 1.5}", "ldnoobw.max_fraction", LE1),
    ("url_blocklist: {soft_word_threshold: 0}", "url_blocklist.soft_word_threshold", GE1),
    ("topic: {model_path: topic.ftz, min_score: 1.5}", "topic.min_score", LE1),
    ("dedup_signatures: {num_perm: 1}", "dedup_signatures.num_perm", "greater than or equal to 2"),
    ("dedup_signatures: {ngram: 0}", "dedup_signatures.ngram", GE1),
    ("dedup_signatures: {seed: -1}", "dedup_signatures.seed", GE0),
    ("pii: {max_per_100_words: -1}", "pii.max_per_100_words", GE0),
]

# Top-level sections (phases and the manifest's own numbers): (YAML, field, message fragment).
SECTION_CASES = [
    ("dedup:\n  minhash: {threshold: 1.0}", "dedup.minhash.threshold", LT1),
    ("dedup:\n  minhash: {band_threshold: 0}", "dedup.minhash.band_threshold", GT0),
    ("dedup:\n  minhash: {num_perm: 0}", "dedup.minhash.num_perm", "greater than or equal to 2"),
    ("dedup:\n  minhash: {seed: -1}", "dedup.minhash.seed", GE0),
    ("dedup:\n  minhash: {bands: 0}", "dedup.minhash.bands", GE1),
    ("dedup:\n  minhash: {bands: 20, rows: 7}", "dedup.minhash", "bands*rows = 20*7 exceeds num_perm = 128"),
    ("dedup:\n  minhash: {fp_weight: -0.5}", "dedup.minhash.fp_weight", GE0),
    ("dedup:\n  minhash: {fp_weight: 0, fn_weight: 0}", "dedup.minhash", "fp_weight + minhash.fn_weight must be > 0"),
    ("dedup:\n  minhash: {all_pairs_max_bucket: 300}", "dedup.minhash.all_pairs_max_bucket",
     "less than or equal to 256"),
    ("dedup:\n  lines: {max_count: 0}", "dedup.lines.max_count", GE1),
    ("dedup:\n  partitions: 0", "dedup.partitions", GE1),
    ("mix:\n  max_epochs: -4", "mix.max_epochs", "mix.max_epochs must be > 0"),   # issue 14
    ("mix:\n  max_epochs: {'*': 0, wiki: 2}", "mix.max_epochs", "mix.max_epochs['*'] must be > 0"),
    ("mix:\n  total_tokens: 0", "mix.total_tokens", "must be >= 1 (tokens) or 'all'"),
    ("mix:\n  weights: {web: -1, wiki: 1}", "mix.weights.web", GE0),
    ("mix:\n  weights: {web: 0, wiki: 0}", "mix.weights", "must not all be 0"),
    ("mix:\n  seed: -1", "mix.seed", GE0),
    ("tokenize:\n  batch_size: 0", "tokenize.batch_size", GE1),
    ("tokenize:\n  num_threads: 0", "tokenize.num_threads", GE1),
    ("tokenize:\n  shard_tokens: 0", "tokenize.shard_tokens", GE1),
    ("tokenize:\n  row_group_tokens: 0", "tokenize.row_group_tokens", GE1),
    ("tokenize:\n  compression_level: 23", "tokenize.compression_level", "less than or equal to 22"),
    ("batch_size: 0", "batch_size", GE1),
    ("shard_rows: 0", "shard_rows", GE1),
    ("cluster: {workers: 0}", "cluster.workers", GE1),
    ("cluster: {threads_per_worker: 0}", "cluster.threads_per_worker", GE1),
    ("cluster: {retries: -1}", "cluster.retries", GE0),
]
INPUT_CASES = [
    ("crawl_files: 0", "inputs.crawl_files", GE1),
    ("split_bytes: -1", "inputs.split_bytes", GE0),
]


def _expected_line(text: str, field: str, anchor: str) -> int:
    """1-based line of the field's last key in ``text`` at or after the line holding ``anchor``."""
    last = re.split(r"[.\[\]]+", field.rstrip("]"))[-1]
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if anchor in ln)
    for i in range(start, len(lines)):
        if f"{last}:" in lines[i]:
            return i + 1
    raise AssertionError(f"{last} not in the manifest")


def _check(path: Path, text: str, field: str, fragment: str, anchor: str) -> None:
    path.write_text(text)
    with pytest.raises(ManifestError) as e:
        load_manifest(path)
    line = _expected_line(text, field, anchor)
    lines = str(e.value).splitlines()
    want = f"{path}:{line}: {field}: "
    assert any(ln.startswith(want) and fragment in ln for ln in lines), (want, fragment, str(e.value))


@pytest.mark.parametrize("section,field,fragment", STAGE_CASES, ids=[c[1] + ":" + c[2][:20] for c in STAGE_CASES])
def test_stage_range(tmp_path, section, field, fragment):
    text = f"inputs:\n  paths: [in]\noutput: out\nstages:\n  - {section}\n"
    _check(tmp_path / "m.yaml", text, f"stages[0].{field}", fragment, anchor=section.split(":")[0] + ":")


@pytest.mark.parametrize("section,field,fragment", SECTION_CASES, ids=[c[1] + ":" + c[2][:20] for c in SECTION_CASES])
def test_section_range(tmp_path, section, field, fragment):
    text = f"inputs:\n  paths: [in]\noutput: out\n{section}\n"
    _check(tmp_path / "m.yaml", text, field, fragment, anchor=section.split(":")[0] + ":")


@pytest.mark.parametrize("entry,field,fragment", INPUT_CASES, ids=[c[1] for c in INPUT_CASES])
def test_inputs_range(tmp_path, entry, field, fragment):
    text = f"inputs:\n  paths: [in]\n  {entry}\noutput: out\n"
    _check(tmp_path / "m.yaml", text, field, fragment, anchor="inputs:")


def test_in_range_values_load(tmp_path):
    """The bounds themselves are allowed (a range is not off by one)."""
    text = """inputs:
  paths: [in]
  split_bytes: 0
output: out
stages:
  - langid: {min_score: 0, min_score_by_lang: {de: 1}}
  - gopher_quality: {min_words: 0, max_words: 1, min_mean_word_length: 2.5, max_mean_word_length: 2.5,
                     max_bullet_lines_ratio: 1, min_alpha_words_ratio: 0}
  - gopher_repetition: {dup_line_frac: 1, top_ngram_char_frac: {2: 0}}
  - fineweb: {line_punct_thr: 0, short_line_thr: 1, new_line_ratio: 5}
  - c4: {max_bad_words: 0, min_sentences: 0}
  - topic: {model_path: t.ftz, min_score: 1}
dedup:
  minhash: {fp_weight: 0, fn_weight: 1, all_pairs_max_bucket: 0}
mix:
  rules: [{domain: wiki, host: "*.wikipedia.org"}]
  max_epochs: {'*': 0.5}
  total_tokens: 1
  weights: {web: 0, wiki: 1}
tokenize:
  compression_level: 22
"""
    (tmp_path / "m.yaml").write_text(text)
    m = load_manifest(tmp_path / "m.yaml")
    assert m.section("mix").epochs_cap("web") == 0.5


def _yaml_files():
    return sorted((REPO / "manifests").glob("*.yaml"))


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: p.name)
def test_shipped_manifests_load(path):
    import yaml

    data = yaml.safe_load(path.read_text())
    if "mixtures" in data:  # an ablation manifest (datapipe ablate)
        from datapipe.ablate.manifest import load_ablation_manifest

        load_ablation_manifest(path)
        return
    m = load_manifest(path)
    m.build_stages()
    for name in ("dedup", "mix", "tokenize"):
        m.section(name)


# ------------------------------------------------------------------ every numeric field has a range

def _phase_sections() -> dict[str, type[BaseModel]]:
    try:
        from datapipe.phase import section_classes
    except ImportError:  # before the phase registry: the manifest's fixed map
        from datapipe.manifest.load import SECTIONS, _section_class

        return {name: _section_class(name) for name in SECTIONS}
    return dict(section_classes())


def _all_configs() -> dict[str, type[BaseModel]]:
    out = {f"stage {n}": st.Config for n, st in registry().items()}
    out |= {f"section {n}": cls for n, cls in _phase_sections().items()}
    out |= {"Manifest": Manifest, "Inputs": Inputs, "Cluster": Cluster}
    todo = list(out.values())
    while todo:  # nested models (dedup.minhash, mix.rules[...])
        cls = todo.pop()
        for f in cls.model_fields.values():
            for sub in _models_in(f.annotation):
                if sub not in out.values():
                    out[sub.__name__] = sub
                    todo.append(sub)
    return out


def _args(tp):
    if typing.get_origin(tp) is typing.Annotated:
        return _args(typing.get_args(tp)[0])
    if typing.get_origin(tp) in (typing.Union, types.UnionType):
        return [a for m in typing.get_args(tp) for a in _args(m)]
    return [tp]


def _models_in(tp):
    for a in _args(tp):
        if isinstance(a, type) and issubclass(a, BaseModel):
            yield a
        for inner in typing.get_args(a) if typing.get_origin(a) in (list, dict) else ():
            yield from _models_in(inner)


def _bad_values(tp, default):
    """Absurd values for each numeric part of annotation ``tp``: -1e9 (and NaN for floats) for a
    number, the same under a key of a dict (a default key, or a sample one)."""
    for a in _args(tp):
        if a is bool:
            continue
        if a is int:
            yield -10**9
        elif a is float:
            yield -1e9
            yield math.nan
        elif typing.get_origin(a) is dict:
            ktype, vtype = typing.get_args(a)
            key = next(iter(default)) if isinstance(default, dict) and default else ("x" if ktype is str else 2)
            for bad in _bad_values(vtype, None):
                yield {key: bad}


_REQUIRED = {"inputs": {"paths": ["x"]}, "output": "out", "model_path": "x.ftz", "domain": "d"}


def test_every_numeric_field_has_a_range():
    unranged = []
    for name, cls in _all_configs().items():
        base = {k: _REQUIRED[k] for k, f in cls.model_fields.items() if f.is_required()}
        if cls.__name__ == "DomainRule":
            base["host"] = "x"  # a rule needs one condition
        cls(**base)  # the defaults are valid
        for field, info in cls.model_fields.items():
            default = info.get_default(call_default_factory=True)
            for bad in _bad_values(info.annotation, default):
                try:
                    cls(**(base | {field: bad}))
                except ValidationError:
                    continue
                unranged.append(f"{name}.{field} accepts {bad!r}")
    assert not unranged, "numeric config fields without a range (use datapipe.manifest.ranges):\n" + "\n".join(unranged)


def test_the_walk_sees_every_config():
    names = set(_all_configs())
    for stage in ("extract", "langid", "gopher_quality", "gopher_repetition", "c4", "fineweb", "quality_classifier",
                  "toxicity", "nsfw", "profanity", "ldnoobw", "url_blocklist", "topic", "dedup_signatures", "pii"):
        assert f"stage {stage}" in names
    assert {"section dedup", "section mix", "section tokenize", "MinHashConfig", "LinesConfig", "Inputs",
            "Cluster", "Manifest"} <= names
