"""The stage contract and the stage registry.

A stage is a class with a ``name``, a pydantic ``Config`` and ``__call__(batch) -> batch``.
The runner hands every stage a ``pyarrow.Table`` holding only the *live* documents (not yet
rejected or errored by an earlier stage). The stage returns a table with the same rows, in
the same order, to which it has added its signal columns (declared in ``fields``) and,
optionally, two decision columns:

* ``reject_reason`` (string, null = keep): the document is rejected, e.g. ``gopher_quality:mean_word_length``.
* ``error_reason`` (string, null = fine): the stage failed on this document (it is counted as errored).

The runner splits kept, rejected and errored rows in one place, stamps ``reject_stage`` and keeps
every signal column so ``datapipe inspect`` can explain decisions. Stages are stateless across
batches except for models, which ``setup()`` loads once per worker process.
"""
from __future__ import annotations

import importlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np
import pyarrow as pa
from pydantic import BaseModel, ConfigDict

from datapipe import plugins
from datapipe.api.stage_score import score_one

REJECT = "reject_reason"
ERROR = "error_reason"


class StageConfig(BaseModel):
    """Base class of every stage config: unknown keys are an error (typos must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


@dataclass(frozen=True)
class Rule:
    """One decision rule of a stage, as data: reject a document with ``reason`` when its stored
    signal ``column`` compares ``op`` with the rule's limit (``value < limit`` for ``"<"``).

    The limit is the config field ``threshold`` (``config.<threshold>[key]`` for tables such as
    Gopher's per-n n-gram thresholds; for ``by_lang``, a config field mapping a language code to its
    own limit, the row's ``lang`` is looked up there first), or the fixed ``value`` when no field
    holds it. A null (or NaN) signal never rejects: the rule does not apply to that document. A
    limit of None switches the rule off, and so does a false ``switch`` (a boolean config field).
    ``zero_passes``: a boolean config field; when true, a signal of exactly 0 never rejects.
    ``languages``: a config field listing the languages the rule applies to (empty: all; a row
    without ``lang`` is decided). ``only_if``: ``(config field, value)``; the rule is off unless the
    field holds that value (a mode such as decontam's ``action``). ``requires``: further rules that
    must all reject too (a conjunction; their own reasons are unused). ``reason_from``: a stored list
    column whose first item ends the reason (``decontam:<benchmark>``); an empty list never rejects. ``datapipe inspect --what-if``, the report's threshold lines and
    ``datapipe stages`` read these declarations (``Stage.rules``).
    """

    reason: str
    column: str
    op: Literal["<", ">", ">=", "==", "not in"]
    threshold: str | None = None
    value: float | str | None = None
    key: int | None = None
    switch: str | None = None
    zero_passes: str | None = None
    by_lang: str | None = None
    languages: str | None = None
    only_if: tuple[str, str] | None = None
    requires: tuple[Rule, ...] = ()
    reason_from: str | None = None

    @property
    def params(self) -> tuple[str, ...]:
        """The config fields this rule reads, its threshold first."""
        fields = (self.threshold, self.by_lang, self.switch, self.zero_passes, self.languages,
                  self.only_if[0] if self.only_if else None, *(f for r in self.requires for f in r.params))
        return tuple(dict.fromkeys(f for f in fields if f))

    def describe(self) -> str:
        """The rule in words: ``gopher_word_count < min_words``, ``c4_lorem_ipsum > 0 if filter_lorem_ipsum``."""
        limit = self.threshold + (f"[{self.key}]" if self.key is not None else "") if self.threshold else repr(self.value)
        text = f"{self.column} {self.op} {limit}"
        if self.by_lang:
            text += f" (per language: {self.by_lang})"
        if self.zero_passes:
            text += f", 0 passes if {self.zero_passes}"
        if self.switch:
            text += f" if {self.switch}"
        if self.languages:
            text += f", for {self.languages}"
        for r in self.requires:
            text += f" and {r.describe()}"
        if self.only_if:
            text += f" if {self.only_if[0]} == {self.only_if[1]!r}"
        return text

    def columns(self) -> tuple[str, ...]:
        """The stored columns this rule reads."""
        cols = (self.column, self.reason_from, *(c for r in self.requires for c in r.columns()))
        return tuple(dict.fromkeys(c for c in cols if c))

    def reason_for(self, signals: dict, config) -> str | None:
        """This rule's reason for one document's ``signals`` (column -> value), or None when it keeps."""
        lang = signals.get("lang")
        if not self.rejects(signals.get(self.column), config, lang):
            return None
        if not all(r.rejects(signals.get(r.column), config, lang) for r in self.requires):
            return None
        if self.reason_from is None:
            return self.reason
        names = signals.get(self.reason_from)
        return f"{self.reason}:{names[0]}" if names is not None and len(names) else None

    def limit(self, config, lang: str | None = None):
        """The limit under ``config`` for a row of language ``lang``; None when the rule is off."""
        if self.switch and not getattr(config, self.switch):
            return None
        if self.only_if and getattr(config, self.only_if[0]) != self.only_if[1]:
            return None
        if self.threshold is None:
            return self.value
        lim = getattr(config, self.threshold)
        if self.key is not None:
            lim = lim.get(self.key) if lim is not None else None
        if self.by_lang and lang is not None:
            lim = getattr(config, self.by_lang).get(lang, lim)
        return lim

    def applies(self, config, lang: str | None) -> bool:
        """False when ``languages`` leaves a row of language ``lang`` out."""
        langs = getattr(config, self.languages) if self.languages else None
        return not langs or lang is None or lang in langs

    def rejects(self, value, config, lang: str | None = None) -> bool:
        """Whether one document's stored ``value`` of ``column`` is rejected under ``config``."""
        if value is None or (isinstance(value, float) and math.isnan(value)) or not self.applies(config, lang):
            return False
        lim = self.limit(config, lang)
        if lim is None:
            return False
        if self.zero_passes and getattr(config, self.zero_passes) and value == 0:
            return False
        return bool(_compare(self.op, value, lim))

    def rejects_array(self, values: np.ndarray, config) -> np.ndarray:
        """``rejects`` over a float array (NaN = null) for a batch; ``languages``, ``by_lang`` and
        ``"not in"`` need the row's language and are not evaluated here (ValueError)."""
        if self.languages or self.by_lang or self.op == "not in" or self.requires or self.reason_from:
            raise ValueError(f"rule {self.reason} needs each row's language: decide it row by row")
        lim = self.limit(config)
        v = np.asarray(values, dtype=np.float64)
        if lim is None:
            return np.zeros(len(v), dtype=bool)
        with np.errstate(invalid="ignore"):
            hit = np.asarray(_compare(self.op, v, lim), dtype=bool) & ~np.isnan(v)
        if self.zero_passes and getattr(config, self.zero_passes):
            hit &= v != 0
        return hit


def _compare(op: str, value, limit):
    if op == "<":
        return value < limit
    if op == ">":
        return value > limit
    if op == ">=":
        return value >= limit
    if op == "==":
        return value == limit
    return value not in limit


def first_reason(rules, signals: dict, config) -> str | None:
    """The reason of the first of ``rules`` that rejects one document's ``signals`` (column ->
    value, ``lang`` among them where rules are per language), or None to keep."""
    for rule in rules:
        reason = rule.reason_for(signals, config)
        if reason is not None:
            return reason
    return None


class Stage:
    """Base class. Subclasses set ``name``, ``Config`` and ``fields`` and implement ``__call__``."""

    name: ClassVar[str] = ""
    Config: ClassVar[type[StageConfig]] = StageConfig
    #: Arrow fields this stage adds to the document schema (signals). Fixed, so every shard has one schema.
    fields: ClassVar[list[pa.Field]] = []
    #: Input columns beyond the stored document fields that this stage reads (``payload``: the raw
    #: record body, dropped after the last stage that needs it and never stored). A change that
    #: reruns such a stage rereads the input file; other changes rerun from stored rows.
    needs: ClassVar[tuple[str, ...]] = ()
    #: Stored columns this stage rewrites (``text``: c4's line filter, PII masking). The text as it
    #: entered such a stage is kept in ``text_before_<name>`` where the stage changed it, so a rerun
    #: from stored rows can start at any stage with the text that stage saw.
    edits: ClassVar[tuple[str, ...]] = ()
    #: Stored columns this stage reads besides ``text`` and ``needs`` (``lang``: per-language rules
    #: and models; ``url``/``host``: block lists, phone regions). ``datapipe stages`` lists them;
    #: ``stage.apply`` fills in ``lang`` (the langid stage) and ``host`` (from ``url``) when missing.
    reads: ClassVar[tuple[str, ...]] = ()
    #: Those of ``reads`` the stage cannot decide without (the others only switch a rule off or
    #: pick a region): ``stage.apply`` refuses data that lacks them, naming what provides them.
    requires: ClassVar[tuple[str, ...]] = ()
    #: Bump when a change of the stage's code can change its output on equal input and config: a
    #: rerun into an output written by another version then recomputes from this stage on (its
    #: lineage fingerprint, ``task.prefix_fingerprints``, holds the version), as a fresh run would.
    version: ClassVar[int] = 1

    def __init__(self, config: StageConfig | None = None):
        self.config = config if config is not None else self.Config()
        self._ready = False

    def setup(self) -> None:
        """Load models/word lists. Called once per worker before the first batch. Raise on missing assets."""

    def check(self) -> None:
        """Fail fast before any work (missing model, bad word list path). Default: run ``setup``."""
        self.ensure_setup()

    def assets(self) -> list | None:
        """Paths of the files ``setup`` loads (models, word lists), or None (the default) when the
        stage does not name them. A stage that names them is checked once per size + mtime of
        those files, not in every run (``datapipe.engine.check_cache``). Raise (OSError, ValueError, or
        the stage's own error) when one cannot be resolved: the stage is then checked."""
        return None

    def lineage_assets(self) -> list:
        """Files whose *contents* decide the stage's output (models, word lists, block lists):
        their content hash is part of the stage's lineage (``datapipe.engine.task_plan``), so a
        model retrained in place or a list replaced reruns the stage as a fresh run would.
        Default: ``assets()`` (none when it names none). A stage whose assets are its own code or
        the platform's libraries (not data) returns ``[]``: its ``version`` covers code."""
        return list(self.assets() or [])

    def ensure_setup(self) -> None:
        if not self._ready:
            self.setup()
            self._ready = True

    def __call__(self, batch: pa.Table) -> pa.Table:  # pragma: no cover - abstract
        raise NotImplementedError

    #: The stage's decision rules on its stored signals, in the order they are tried (the first
    #: that rejects gives the reason). Empty for stages that decide from the page itself or from
    #: lists (``extract``, ``url_blocklist``): those cannot be recomputed from stored signals.
    rules: ClassVar[tuple[Rule, ...]] = ()

    @classmethod
    def decide(cls, signals: dict, config: StageConfig) -> str | None:
        """The stage's verdict on one row of stored signals (column -> value) under ``config``: the
        ``reject_reason`` of the first of ``rules`` that rejects, or None to keep. ``datapipe
        inspect --what-if`` retunes with it without rerunning. NotImplementedError without rules."""
        if not cls.rules:
            raise NotImplementedError(f"stage {cls.name} decides from the page, not from stored signals")
        return first_reason(cls.rules, signals, config)

    def apply(self, data, lang=None, url=None, **columns) -> pa.Table:
        """This stage on plain data, outside a run: texts (or HTML for ``extract``), a table or
        rows in, a table of its signals and decisions out (see ``datapipe.api.stage_apply.apply_stage``)."""
        # Lazy: the API layer runs the langid stage (a subclass of this class) to fill in lang.
        from datapipe.api.stage_apply import apply_stage

        return apply_stage(self, data, lang=lang, url=url, **columns)

    def score(self, text, lang=None, url=None, **columns):
        """This stage on one text: a ``datapipe.api.stage_score.Score`` (``label``, ``score``, ``kept``,
        ``reason``, ``skipped``, ``signals``); ``label, score = stage.score(text)`` unpacks it."""

        return score_one(self, text, lang=lang, url=url, **columns)


def folder_assets(folder) -> list:
    """A word-list folder as assets: the folder (its mtime moves when a file is added or removed)
    and every file under it. Raises FileNotFoundError when it is not a folder."""
    d = Path(folder)
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: not a folder")
    return [d, *sorted(p for p in d.rglob("*") if p.is_file())]


_REGISTRY: dict[str, type[Stage]] = {}


def register(cls: type[Stage]) -> type[Stage]:
    """Class decorator: make a stage available to manifests under ``cls.name``."""
    if not cls.name:
        raise ValueError(f"{cls.__name__} has no name")
    if cls.name in _REGISTRY and _REGISTRY[cls.name] is not cls:
        raise ValueError(f"stage name {cls.name!r} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


#: The built-in stage modules, imported by ``registry`` (each registers its stages); a new one is added here.
STAGE_MODULES = [
    "datapipe.stages.extract",
    "datapipe.stages.langid",
    "datapipe.stages.gopher",
    "datapipe.stages.c4",
    "datapipe.stages.fineweb",
    "datapipe.stages.dedup_signatures",
    "datapipe.stages.url_blocklist",
    "datapipe.stages.ldnoobw",
    "datapipe.stages.safety",
    "datapipe.stages.profanity",
    "datapipe.stages.pii",
    "datapipe.stages.decontam",
    "datapipe.stages.quality_classifier",
    "datapipe.stages.topic",
]


def load_all() -> None:
    """Import every built-in stage module (a fixed list: see tests/test_security.py)."""
    for mod in STAGE_MODULES:
        importlib.import_module(mod)


def registry() -> dict[str, type[Stage]]:
    """All registered stages by name (imports the built-in stage modules on first use)."""
    load_all()
    for obj in plugins.load(plugins.STAGES):
        if isinstance(obj, type) and issubclass(obj, Stage) and obj.name not in _REGISTRY:
            register(obj)
    return dict(_REGISTRY)


def with_column(table: pa.Table, name: str, values, type_: pa.DataType) -> pa.Table:
    """Set (add or replace) column ``name`` of ``table`` from a Python list or Arrow array."""
    arr = values if isinstance(values, (pa.Array, pa.ChunkedArray)) else pa.array(values, type=type_)
    if arr.type != type_:
        arr = arr.cast(type_)
    i = table.schema.get_field_index(name)
    if i >= 0:
        return table.set_column(i, name, arr)
    return table.append_column(name, arr)


def merge_reasons(table: pa.Table, reasons: list, column: str = REJECT) -> pa.Table:
    """Add ``reasons`` (list of str|None) to ``column``, keeping a reason already set (first one wins)."""
    if column in table.column_names:
        old = table.column(column).to_pylist()
        reasons = [o if o is not None else r for o, r in zip(old, reasons)]
    return with_column(table, column, reasons, pa.string())


def texts_in_languages(batch: pa.Table, languages: list[str]) -> list[str | None]:
    """The ``text`` column as a list, with None for rows whose ``lang`` is not in ``languages``.

    An empty ``languages`` (or a batch without ``lang``) keeps every text. Used by the scoring
    stages, whose models are only meaningful for the languages they were trained on.
    """
    texts = batch.column("text").to_pylist()
    if not languages or "lang" not in batch.column_names:
        return texts
    keep = set(languages)
    return [t if lg in keep else None for t, lg in zip(texts, batch.column("lang").to_pylist())]
