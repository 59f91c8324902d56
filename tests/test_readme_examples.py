"""The ``datapipe inspect --kept/--rejected --where`` examples of the README and of ``inspect --help``
can return rows on a run of the main manifest.

Before: the README's ``--kept --where "quality_score < 0.3 and lang = 'de'"`` returned 0 rows,
because the quality classifier scores English only (German documents have a null score) and a
kept document scores at least its 0.5 threshold. Two checks, on the main manifest's effective
configuration: a language filter only on columns whose stage scores that language, and on
``--kept`` a score bound that the stage's own rule (as ``inspect --what-if`` recomputes it) lets a
document pass with.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from datapipe.cli.inspect import EPILOG
from datapipe.manifest.load import load_manifest
from datapipe.stage import registry

REPO = Path(__file__).resolve().parent.parent
_EXAMPLE = re.compile(r"datapipe inspect \S+ --(kept|rejected)\b[^\n]*?--where \"([^\"]+)\"")
_BOUND = re.compile(r"\b([a-z_]+)\s*(<=|>=|<|>)\s*([0-9.]+)")


def examples() -> list[tuple[str, str]]:
    pages = [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]
    text = "".join(p.read_text() for p in pages if "reference" not in p.parts) + EPILOG
    return _EXAMPLE.findall(text)


def _chain():
    m = load_manifest(REPO / "manifests" / "cc-2026.yaml", {"inputs.paths": ["x"], "output": "y"})
    reg = registry()
    owner = {}
    for item in m.effective_stage_configs():
        (name, cfg), = item.items()
        cls = reg[name]
        for f in cls.fields:
            owner[f.name] = (cls, cfg)
    return owner


def test_the_examples_are_found():
    kinds = [k for k, _ in examples()]
    assert kinds.count("kept") >= 2 and "rejected" in kinds  # the docs' and --help's


@pytest.mark.parametrize("kind,where", examples())
def test_example_can_match_rows(kind, where):
    owner = _chain()
    langs = re.findall(r"\blang\s*=\s*'([a-z]+)'", where)
    used = [c for c in re.findall(r"\b[a-z_]+\b", where) if c in owner]
    for col in used:
        cls, cfg = owner[col]
        scored = cfg.get("languages")
        for lang in langs:  # a language the stage does not score has a null column: no row matches
            assert not scored or lang in scored, f"{where!r}: {cls.name} scores {scored}, not {lang!r}"
    if kind != "kept":
        return
    from datapipe.inspect.reader import InspectError
    from datapipe.inspect.rules import decider_for

    for col, op, num in _BOUND.findall(where):
        if col not in owner:
            continue
        cls, cfg = owner[col]
        try:
            decide, config, _ = decider_for(cls.name, cfg, cfg)
        except InspectError:  # decides from the page: no stored-signal rule to check against
            continue
        eps = 1e-6 * max(1.0, abs(float(num)))
        inside = float(num) - eps if op.startswith("<") else float(num) + eps
        signals = {col: inside, **({"lang": langs[0]} if langs else {})}
        try:
            reason = decide(signals, config)
        except (KeyError, TypeError):  # the rule needs other signals too: not a one-column bound
            continue
        assert reason is None, f"{where!r}: a kept document never has {col} {op} {num} ({cls.name}: {reason})"
