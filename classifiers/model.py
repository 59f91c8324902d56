"""Loading fastText classifiers and scoring text with them (newline-safe).

A model is a fastText supervised ``.bin``/``.ftz`` file. Models trained by ``datapipe`` have a
sidecar ``<model>.json`` (written by :mod:`datapipe.classifiers.train`) naming the labels, the
positive label and the text preprocessing used at training time; prediction applies the same
preprocessing. Foreign models (Dolma's Jigsaw ``nsfw``/``toxic`` bins, CS336's ``wiki``/``cc``)
have no sidecar: their text only has newlines replaced by spaces, which is what their authors do.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from datapipe.env import models_dir

MODELS_DIR = Path(__file__).resolve().parent / "models"
LABEL_PREFIX = "__label__"
# A word starts and ends with a word character and may hold * @ $ # ! . ' - inside, so that
# obfuscated spellings ("f*ck", "sh!t") stay one token; other punctuation is its own token.
_TOKEN_RE = re.compile(r"\w(?:[\w*@$#!.'’-]*\w)?|[^\w\s]")
_WS_RE = re.compile(r"\s+")
# Typographic variants folded to ASCII, so that a curly quote is not a "web page" feature
# (WikiText is ASCII-quoted), and digits folded to 0 (numbers are sparse, uninformative tokens).
_FOLD = str.maketrans({"‘": "'", "’": "'", "‚": "'", "‛": "'", "“": '"', "”": '"', "„": '"',
                       "–": "-", "—": "-", "‐": "-", "…": "...", "\u00a0": " ",
                       **{str(d): "0" for d in range(1, 10)}})

#: Preprocessing names stored in sidecars. ``datapipe-v1``: lower case, typographic quotes and
#: dashes folded to ASCII, digits 1-9 -> 0, words and single punctuation marks as separate
#: tokens (fastText splits on spaces only), at most ``max_tokens``.
#: ``datapipe-v1-words``: the same without punctuation tokens, for models whose positives have no
#: punctuation (URL slugs: the NSFW model), so that a full stop is no evidence of "clean".
#: ``newlines``: whitespace runs (newlines included) become one space.
PREPROCESSORS = ("newlines", "datapipe-v1", "datapipe-v1-words")


_MEMO_CHARS = 2000  # sentences, not whole documents, are remembered


@lru_cache(maxsize=16384)
def _tokens(text: str) -> list[str]:
    # The safety stages score the same sentences with several models (toxicity, NSFW): tokenised once.
    # Callers never mutate the list.
    return _TOKEN_RE.findall(text.lower().translate(_FOLD))


_CHARS_PER_TOKEN = 16


def _long_tokens(text: str, max_tokens: int) -> list[str]:
    """At least the first ``max_tokens`` tokens of a long text, exactly as the whole text gives them.

    A prefix is tokenised first. Tokens are matched left to right and none spans whitespace, and
    lower-casing is per character except a final sigma, whose context also ends at whitespace; so
    every token before the prefix's first whitespace after token ``max_tokens`` is a token of the
    whole text. When the prefix holds no such point, the whole text is tokenised."""
    cut = max_tokens * _CHARS_PER_TOKEN
    if len(text) > cut:
        low = text[:cut].lower().translate(_FOLD)
        toks, end = [], 0
        for m in _TOKEN_RE.finditer(low):
            toks.append(m.group())
            end = m.end()
            if len(toks) == max_tokens:
                break
        if len(toks) == max_tokens and _WS_RE.search(low, end) is not None:
            return toks
    return _TOKEN_RE.findall(text.lower().translate(_FOLD))


def preprocess(text: str, kind: str = "datapipe-v1", max_tokens: int = 1000) -> str:
    """Text as fed to fastText: one line, never containing ``\\n`` (fastText's predict rejects it).

    ``kind`` is one of :data:`PREPROCESSORS`; raises ValueError for another name.
    """
    if kind == "newlines":
        return _WS_RE.sub(" ", text).strip()
    if kind in ("datapipe-v1", "datapipe-v1-words"):
        toks = _tokens(text) if len(text) <= _MEMO_CHARS else _long_tokens(text, max_tokens)
        if kind == "datapipe-v1-words":
            toks = [t for t in toks if t[0].isalnum() or t[0] == "_"]
        return " ".join(toks[:max_tokens])
    raise ValueError(f"unknown preprocessing {kind!r}; known: {PREPROCESSORS}")


def resolve_model_path(path: str | Path) -> Path:
    """An absolute path; else, in order, a path relative to the working directory (a manifest's
    relative ``model_path`` was already resolved against its folder), a file under
    ``$DATAPIPE_MODELS`` (default ``models/``, where ``lid.176.ftz`` is) and one under the shipped
    ``classifiers/models/``. Raises FileNotFoundError, one line naming the places looked at."""

    p = Path(path)
    cands = [p] if p.is_absolute() else [p, models_dir() / p, MODELS_DIR / p]
    for cand in cands:
        if cand.is_file():
            return cand
    looked = ", ".join(str(c.resolve() if c is p else c) for c in cands)
    raise FileNotFoundError(
        f"fastText model {path!s} not found (looked at {looked}); train one with `datapipe classifiers "
        "train ...` or set model_path to a .bin/.ftz file")


@dataclass
class Classifier:
    """A loaded fastText classifier. ``score(texts)`` -> float32 P(positive label) per text."""

    path: Path
    positive_label: str
    preprocessing: str = "newlines"
    max_tokens: int = 1000
    labels: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    _model: object = None

    def score(self, texts: list[str | None]) -> np.ndarray:
        """Probability of ``positive_label`` for each text, float32 in [0, 1]; NaN for None.

        Shape ``(len(texts),)``. Uses ``predict(k=-1)`` so every label's probability is known.
        """
        out = np.full(len(texts), np.nan, dtype=np.float32)
        idx = [i for i, t in enumerate(texts) if t is not None]
        if not idx:
            return out
        lines = [preprocess(texts[i], self.preprocessing, self.max_tokens) for i in idx]
        labels, probs = self._model.predict(lines, k=-1)
        want = LABEL_PREFIX + self.positive_label
        for i, labs, ps in zip(idx, labels, probs):
            p = 0.0
            for lab, pr in zip(labs, ps):
                if lab == want:
                    p = float(pr)
                    break
            out[i] = min(max(p, 0.0), 1.0)  # fastText's softmax can exceed 1 by 1e-5
        return out

    def predict_top(self, texts: list[str | None]) -> list[tuple[str | None, float | None]]:
        """(best label without prefix, its probability) per text; ``(None, None)`` for None."""
        out: list[tuple[str | None, float | None]] = [(None, None)] * len(texts)
        idx = [i for i, t in enumerate(texts) if t is not None]
        if idx:
            lines = [preprocess(texts[i], self.preprocessing, self.max_tokens) for i in idx]
            labels, probs = self._model.predict(lines, k=1)
            for i, labs, ps in zip(idx, labels, probs):
                out[i] = (labs[0].removeprefix(LABEL_PREFIX), float(min(max(ps[0], 0.0), 1.0)))
        return out

    def predict(self, text: str) -> tuple[str, float]:
        """(best label without prefix, its probability) for one text (CS336 ``classify_*`` shape)."""
        labels, probs = self._model.predict(preprocess(text, self.preprocessing, self.max_tokens), k=1)
        return labels[0].removeprefix(LABEL_PREFIX), float(min(probs[0], 1.0))


_CACHE: dict[tuple, Classifier] = {}


def load_classifier(path: str | Path, positive_label: str | None = None, preprocessing: str | None = None,
                    require_positive: bool = True) -> Classifier:
    """Load (once per process) a fastText model and its sidecar, if any.

    ``positive_label`` / ``preprocessing`` override the sidecar; without a sidecar the positive
    label must be given and preprocessing defaults to ``newlines``. Raises FileNotFoundError for
    a missing model, ValueError when the positive label is not one of the model's labels (unless
    ``require_positive`` is False: multi-class users such as the ``topic`` stage then get the
    first label as a placeholder and use ``predict_top``).
    """
    import fasttext

    p = resolve_model_path(path)
    side = p.with_suffix(".json")
    # the files' identity on disk too: a model retrained in place is loaded again
    ident = [(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino) for st in
             (f.stat() for f in (p, side) if f.is_file())]
    key = (str(p.resolve()), positive_label, preprocessing, tuple(ident))
    if key in _CACHE:
        return _CACHE[key]
    meta = json.loads(side.read_text()) if side.is_file() else {}
    fasttext.FastText.eprint = lambda *a, **k: None  # silence the load-time warning on stderr
    model = fasttext.load_model(str(p))
    labels = [lab.removeprefix(LABEL_PREFIX) for lab in model.get_labels()]
    pos = positive_label or meta.get("positive_label")
    if pos is None and not require_positive and labels:
        pos = labels[0]
    if pos is None or pos not in labels:
        raise ValueError(f"{p}: positive label {pos!r} is not among the model's labels {labels}")
    clf = Classifier(p, pos, preprocessing or meta.get("preprocessing", "newlines"),
                     int(meta.get("max_tokens", 1000)), labels, meta, model)
    _CACHE[key] = clf
    return clf
