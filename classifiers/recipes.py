"""The recipes that build the two shipped models from files in ``../shared/data`` (``make models``).

* ``train_quality``: label ``wiki`` = WikiText-2 valid+test articles (de-tokenised) and the
  hand-checked article bodies of the Scrapinghub AEB benchmark; label ``cc`` = boilerplate of the
  English pages in ``warc/realpages-1171.warc.gz`` (lid.176 = en): page lines that resiliparse's
  main-content extraction drops (menus, footers, link lists). ~200-word chunks; 20% of
  articles/pages held out by hash. So "wiki" means "edited prose", "cc" means "web boilerplate".
* ``train_toxicity``: weak labels. Sentences of the real pages, the Dolma CC samples and
  WikiText-2 are ``toxic`` when they contain an English LDNOOBW entry (word-boundary match), else
  ``clean``; each toxic sentence is added once more with its listed word(s) obfuscated
  (``fuck`` -> ``f*ck`` / ``fu.k`` / ``f4ck``...) so character n-grams learn such spellings; clean
  sentences are sampled to ``neg_ratio`` (10) times the toxic ones. The model therefore approximates
  the word list, with some generalisation; it is judged on the 101 human-labelled Jigsaw comments
  (``toxicity/jigsaw_test_examples_ibm_max.csv``), which are never trained on.
"""
from __future__ import annotations

import csv
import random
from pathlib import Path

from datapipe.classifiers import data
from datapipe.classifiers.train import binary_metrics, train_binary
from datapipe.env import shared_data

QUALITY_POSITIVES = ["quality/wikitext-2_valid.txt.gz", "quality/wikitext-2_test.txt.gz",
                     "aeb:extraction/scrapinghub_aeb/ground-truth.json"]
QUALITY_NEGATIVES = ["warc-boilerplate:warc/realpages-1171.warc.gz"]
TOXICITY_SOURCES = ["warc/realpages-1171.warc.gz", "cc_text/dolma_cc_en_head-0091.jsonl.gz",
                    "cc_text/dolma_cc_en_head-0174.jsonl.gz", "cc_text/dolma_provided_documents_000.jsonl.gz",
                    "quality/wikitext-2_valid.txt.gz"]
JIGSAW = "toxicity/jigsaw_test_examples_ibm_max.csv"
TOXICITY_PARAMS = {"dim": 16, "epoch": 10, "lr": 0.2, "wordNgrams": 1, "minn": 2, "maxn": 5,
                   "minCount": 1, "bucket": 100000}
_LEET = {"a": "4", "e": "3", "i": "1", "o": "0", "s": "$", "u": "*"}


def _abs(specs: list[str]) -> list[str]:
    """Resolve each ``[kind:]path`` spec's relative path under ``shared_data()`` unless it exists here."""
    out = []
    for s in specs:
        kind, sep, path = s.rpartition(":") if ":" in s and not Path(s).exists() else ("", "", s)
        if not Path(path).is_absolute() and not Path(path).exists():
            path = str(shared_data() / path)
        out.append(f"{kind}{sep}{path}")
    return out


def train_quality(out: str | Path, positives: list[str] | None = None, negatives: list[str] | None = None,
                  seed: int = 1, chunk: int = 200) -> dict:
    """Train the wiki-vs-cc quality model; returns the sidecar dict (with held-out ``metrics``)."""
    positives, negatives = _abs(positives or QUALITY_POSITIVES), _abs(negatives or QUALITY_NEGATIVES)
    pos = [p for s in positives for p in data.read_source(s, chunk=chunk)]
    neg = [n for s in negatives for n in data.read_source(s, langs={"en"}, chunk=chunk)]
    return train_binary(pos, neg, out, "wiki", "cc", params={"dim": 16, "epoch": 10, "wordNgrams": 2},
                        seed=seed, sources=positives + negatives,
                        extra_meta={"recipe": "datapipe.classifiers.recipes.train_quality"})


def obfuscate(word: str, rng: random.Random) -> str:
    """One obfuscated spelling of ``word``: a vowel (not the first letter) becomes ``*``, ``.``
    or a look-alike digit/symbol. Words without such a vowel come back unchanged."""
    idx = [i for i, c in enumerate(word) if c in "aeiou" and i > 0]
    if not idx:
        return word
    i = rng.choice(idx)
    repl = rng.choice(["*", ".", _LEET.get(word[i], "*")])
    return word[:i] + repl + word[i + 1:]


def weak_toxicity_examples(sources: list[str], seed: int = 1, neg_ratio: int = 10, n_obfuscated: int = 1,
                           max_sentences_per_doc: int = 400) -> tuple[list, list]:
    """(toxic, clean) ``(group, sentence)`` lists labelled by the English LDNOOBW list (see module doc)."""
    from datapipe.stages.lib import wordlists as wl

    auto = wl.ldnoobw_automaton(str(shared_data() / "wordlists" / "ldnoobw"), "en")
    rng = random.Random(seed)
    toxic, clean = [], []
    for spec in sources:
        for group, text in data.read_source(spec, chunk=10**9):
            for sent in data.sentences(text)[:max_sentences_per_doc]:
                hits = wl.find_listed_words(sent, auto, "en")
                if hits:
                    toxic.append((group, sent))
                    for _ in range(n_obfuscated):
                        low = sent.lower()
                        for start, end, w in reversed(hits):
                            if low[start:end] == w:  # skip overlaps already rewritten
                                low = low[:start] + obfuscate(w, rng) + low[end:]
                        toxic.append((group, low))
                else:
                    clean.append((group, sent))
    rng.shuffle(clean)
    return toxic, clean[: neg_ratio * len(toxic)]


def read_jigsaw(path: str | Path | None = None) -> tuple[list[str], list[bool]]:
    """(comments, toxic flags) of the Jigsaw sample; a comment is toxic if any of its 6 labels is 1."""
    with open(path or shared_data() / JIGSAW, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    labels = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]
    return [r["comment_text"] for r in rows], [any(r[k] == "1" for k in labels) for r in rows]


def jigsaw_metrics(model_path: str | Path, threshold: float = 0.5) -> dict:
    """Metrics of a toxicity model on the Jigsaw sample, and of the LDNOOBW list (count >= 1) beside it."""
    from datapipe.classifiers.model import load_classifier
    from datapipe.stages.lib import wordlists as wl

    texts, y = read_jigsaw()
    scores = load_classifier(model_path).score(texts)
    auto = wl.ldnoobw_automaton(str(shared_data() / "wordlists" / "ldnoobw"), "en")
    counts = [wl.count_listed_words(t, auto, "en") for t in texts]
    return {"model": binary_metrics(scores, y, threshold),
            "ldnoobw_any": binary_metrics([float(c > 0) for c in counts], y, 0.5)}


def train_toxicity(out: str | Path, sources: list[str] | None = None, seed: int = 1) -> dict:
    """Train the weakly supervised toxicity model; returns the sidecar dict (held-out + Jigsaw metrics)."""
    import json

    sources = _abs(sources or TOXICITY_SOURCES)
    toxic, clean = weak_toxicity_examples(sources, seed)
    meta = train_binary(toxic, clean, out, "toxic", "clean", params=TOXICITY_PARAMS, seed=seed,
                        max_tokens=200, quantize_cutoff=200000, sources=sources,
                        extra_meta={"recipe": "datapipe.classifiers.recipes.train_toxicity",
                                    "labels_are": "weak: English LDNOOBW word present (+ obfuscated copies)"})
    meta["jigsaw"] = jigsaw_metrics(out)
    Path(out).with_suffix(".json").write_text(json.dumps(meta, indent=1))
    return meta
