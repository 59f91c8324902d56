"""The recipes that build the shipped models from files in ``../shared/data`` (``datapipe classifiers train``).

* ``train_quality``: label ``wiki`` = WikiText-2 valid+test articles (de-tokenised) and the
  hand-checked article bodies of the Scrapinghub AEB benchmark; label ``cc`` = boilerplate of the
  English pages in ``warc/realpages-1171.warc.gz`` (lid.176 = en): page lines that resiliparse's
  main-content extraction drops (menus, footers, link lists). ~200-word chunks; 20% of
  articles/pages held out by hash. So "wiki" means "edited prose", "cc" means "web boilerplate".
* ``train_toxicity``: weak labels, sentence level. Sentences (<= 64 words) of the *development*
  half of ``warc/realpages-1171.warc.gz`` (:func:`data.page_split`; the test half is the safety
  test set), the Dolma CC samples and WikiText-2 valid. Real web text holds almost no profanity
  (14 of 51,000 sentences), so positives are made: a clean sentence with one entry of
  :data:`PROFANITY_TIER` (the insults, profanities and slurs of the English LDNOOBW list; not its
  sexual or clinical entries such as ``sex``, ``penis``, ``rape``) put at a random word position,
  half of them obfuscated (``fuck`` -> ``f*ck`` / ``fu.k`` / ``f4ck``...), plus the real sentences
  holding such an entry. Every other sentence is ``clean``, also those about sex, medicine or
  crime. So the model is an obfuscation-aware version of that part of the list; judged on the 101
  human-labelled Jigsaw comments and the safety test set, never trained on.
* ``train_nsfw``: ``nsfw`` = the titles in the URLs of the UT1 adult list (``ut1-titles``: slugs
  such as ``busty-blonde-...``, 7,562 distinct, from 2,957 hosts); ``non-nsfw`` = sentences of the
  development half of realpages, the Dolma CC samples and WikiText-2 (valid + test). Punctuation
  is dropped on both sides (``datapipe-v1-words``): slugs have none. Split by host / page.
"""
from __future__ import annotations

import csv
import random
from pathlib import Path

from datapipe.classifiers import data
from datapipe.classifiers.model import load_classifier
from datapipe.classifiers.train import binary_metrics, is_heldout, train_binary
from datapipe.env import shared_data
from datapipe.stages.lib import wordlists as wl

QUALITY_POSITIVES = ["quality/wikitext-2_valid.txt.gz", "quality/wikitext-2_test.txt.gz",
                     "aeb:extraction/scrapinghub_aeb/ground-truth.json"]
QUALITY_NEGATIVES = ["warc-boilerplate:warc/realpages-1171.warc.gz"]
TOXICITY_SOURCES = ["warc-dev:warc/realpages-1171.warc.gz", "cc_text/dolma_cc_en_head-0091.jsonl.gz",
                    "cc_text/dolma_cc_en_head-0174.jsonl.gz", "cc_text/dolma_provided_documents_000.jsonl.gz",
                    "quality/wikitext-2_valid.txt.gz"]
NSFW_POSITIVES = ["ut1-titles:blocklists/ut1_adult_url_filterblacklistsv0_3_0.tar.gz"]
NSFW_NEGATIVES = TOXICITY_SOURCES + ["quality/wikitext-2_test.txt.gz"]
#: The entries of the English LDNOOBW list that insult or swear whatever the topic: the toxicity
#: model's positives. Sexual and clinical entries (sex, sexual, penis, rape, nude ...) are left to
#: the NSFW model, ambiguous ones (xx, suck, escort, dick, cock, tit, hooker: words and names of
#: ordinary pages) to nobody, and so are entries whose letters are most of a common word
#: (darkie/dark, coon/raccoon, god damn/God, spic/spice, paki, poof, ass/class): with character
#: n-grams the model would learn the common word.
PROFANITY_TIER = frozenset("""arsehole asshole assmunch bastard bitch bitches bollocks bullshit
clusterfuck cunt faggot fuck fuckin fucking fucktards motherfucker nigga nigger raghead shit
shitty slanteye slut tosser towelhead twat wank wetback whore""".split()) | {"piece of shit"}
JIGSAW = "toxicity/jigsaw_test_examples_ibm_max.csv"
TOXICITY_PARAMS = {"dim": 16, "epoch": 10, "lr": 0.2, "wordNgrams": 1, "minn": 3, "maxn": 5,
                   "minCount": 1, "bucket": 100000}
NSFW_PARAMS = {"dim": 16, "epoch": 10, "lr": 0.2, "wordNgrams": 2, "minn": 3, "maxn": 5,
               "minCount": 1, "bucket": 200000}
#: Span length the stages score (``stages.lib.spans``): training sentences are cut to it too.
SPAN_WORDS = 64
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
                        seed=seed, sources=positives + negatives, heldout_fn=lambda g: quality_heldout(g, seed),
                        split_rule=QUALITY_SPLIT_RULE,
                        extra_meta={"recipe": "datapipe.classifiers.recipes.train_quality"})


QUALITY_SPLIT_RULE = ("crawled pages (group = URL): data.page_split, the test half held out (the half the "
                      "safety and PII test sets use); articles: xxh64(group, seed) % 100 < 20 held out")


def quality_heldout(group: str, seed: int = 1) -> bool:
    """The quality model's test side: a page of the test half of :func:`data.page_split` (so a
    run on ``realpages`` scores its test-half pages with a model that never read them), or 20% of
    the articles by hash."""

    if group.startswith(("http://", "https://")):
        return data.page_split(group) == "test"
    return is_heldout(group, 20, seed)


def obfuscate(word: str, rng: random.Random) -> str:
    """One obfuscated spelling of ``word``: a vowel (not the first letter) becomes ``*``, ``.``
    or a look-alike digit/symbol. Words without such a vowel come back unchanged."""
    idx = [i for i, c in enumerate(word) if c in "aeiou" and i > 0]
    if not idx:
        return word
    i = rng.choice(idx)
    repl = rng.choice(["*", ".", _LEET.get(word[i], "*")])
    return word[:i] + repl + word[i + 1:]


def _cut(sentence: str, words: int = SPAN_WORDS) -> list[str]:
    w = sentence.split()
    return [" ".join(w[i:i + words]) for i in range(0, len(w), words)]


def _obfuscate_hits(sent: str, hits, rng: random.Random) -> str:
    low = sent.lower()
    for start, end, w in reversed(hits):
        if low[start:end] == w:  # skip overlaps already rewritten
            low = low[:start] + obfuscate(w, rng) + low[end:]
    return low


def weak_toxicity_examples(sources: list[str], seed: int = 1, neg_ratio: int = 10, n_obfuscated: int = 1,
                           max_sentences_per_doc: int = 400) -> tuple[list, list]:
    """(toxic, clean) ``(group, sentence)`` lists: see the module doc (``train_toxicity``)."""

    auto = wl.ldnoobw_automaton(str(shared_data() / "wordlists" / "ldnoobw"), "en")
    tier = sorted(PROFANITY_TIER)
    rng = random.Random(seed)
    toxic, clean = [], []
    for spec in sources:
        for group, text in data.read_source(spec, chunk=10**9):
            for sent in (c for s in data.sentences(text)[:max_sentences_per_doc] for c in _cut(s)):
                hits = [h for h in wl.find_listed_words(sent, auto, "en") if h[2] in PROFANITY_TIER]
                if hits:
                    toxic.append((group, sent))
                    for _ in range(n_obfuscated):
                        toxic.append((group, _obfuscate_hits(sent, hits, rng)))
                else:
                    clean.append((group, sent))
    rng.shuffle(clean)
    # One made positive per neg_ratio clean sentences: a tier entry at a random word position.
    n_made = len(clean) // (neg_ratio + 1)
    for group, sent in clean[:n_made]:
        words = sent.split()
        w = rng.choice(tier)
        if rng.random() < 0.5 and " " not in w:
            w = obfuscate(w, rng)
        words.insert(rng.randrange(len(words) + 1), w)
        toxic.append((group, " ".join(words)))
    return toxic, clean[n_made:]


#: Words taken out of the UT1 titles before training, so that they carry no NSFW weight: the
#: clinical and sex-education vocabulary (a page about sexual health is not pornography) and
#: identity words that porn titles use as categories (a model that learns "lesbian", "gay",
#: "asian" or "black" as NSFW removes pages about those people: Dodge et al. 2021 on C4's list).
NSFW_NEUTRAL_WORDS = frozenset("""sex sexe sexo sexual sexually sexuality sexy penis vagina vulva clitoris
nipple nipples breast breasts intercourse condom condoms pregnant pregnancy masturbation gay gays lesbian lesbians bisexual bi trans transgender queer lgbt lgbtq homo homme femme
asian asians ebony black white latina latin arab indian japanese chinese korean thai russian
german french african interracial mature teen teens young old fat bbw girl girls boy boys woman
women man men wife husband mom mother dad stepmom stepmother sister brother""".split())
#: LDNOOBW lists a UT1 title must hit (Latin-script languages: the titles are mostly en/fr/de/es).
NSFW_TITLE_LISTS = ("en", "fr", "de", "es", "it", "nl", "pt")


def nsfw_examples(positives: list[str], negatives: list[str], seed: int = 1, neg_ratio: int = 10,
                  max_sentences_per_doc: int = 400, length_matched: bool = True) -> tuple[list, list]:
    """(nsfw, clean) ``(group, text)`` lists: see the module doc (``train_nsfw``)."""

    autos = [(lang, wl.ldnoobw_automaton(str(shared_data() / "wordlists" / "ldnoobw"), lang))
             for lang in NSFW_TITLE_LISTS]
    rng = random.Random(seed)
    # Titles without a listed word are mostly fan-fiction or forum chatter (tumblr, quora): not positives.
    pos = []
    for spec in positives:
        for g, t in data.read_source(spec, chunk=10**9):
            if not any(wl.find_listed_words(t, a, lang) for lang, a in autos):
                continue
            words = [w for w in t.split() if w not in NSFW_NEUTRAL_WORDS]
            if len(words) >= 3:
                pos.append((f"ut1:{g}", " ".join(words)))
    neg = [(g, c) for spec in negatives for g, text in data.read_source(spec, chunk=10**9)
           for s in data.sentences(text)[:max_sentences_per_doc] for c in _cut(s)]
    rng.shuffle(neg)
    neg = neg[: neg_ratio * len(pos)]
    if length_matched:
        # Every other negative becomes a window of a title's length (drawn from the positives), so
        # that length is no evidence: titles are short, page sentences long, and a model that learns
        # that flags every short line ("After having one child" scored 0.999).
        lengths = [len(t.split()) for _, t in pos]
        for i in range(0, len(neg), 2):
            g, t = neg[i]
            w = t.split()
            n = rng.choice(lengths)
            if len(w) > n:
                start = rng.randrange(len(w) - n + 1)
                neg[i] = (g, " ".join(w[start:start + n]))
    return pos, neg


def read_jigsaw(path: str | Path | None = None) -> tuple[list[str], list[bool]]:
    """(comments, toxic flags) of the Jigsaw sample; a comment is toxic if any of its 6 labels is 1."""
    with open(path or shared_data() / JIGSAW, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    labels = ["toxic", "severe_toxic", "obscene", "threat", "insult", "identity_hate"]
    return [r["comment_text"] for r in rows], [any(r[k] == "1" for k in labels) for r in rows]


def jigsaw_metrics(model_path: str | Path, threshold: float = 0.5) -> dict:
    """Metrics of a toxicity model on the Jigsaw sample, and of the LDNOOBW list (count >= 1) beside it."""

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
                        max_tokens=200, quantize_cutoff=60000, sources=sources,
                        extra_meta={"recipe": "datapipe.classifiers.recipes.train_toxicity",
                                    "labels_are": "weak: a PROFANITY_TIER entry of the English LDNOOBW list "
                                                  "present or inserted (+ obfuscated copies)"})
    meta["jigsaw"] = jigsaw_metrics(out)
    Path(out).with_suffix(".json").write_text(json.dumps(meta, indent=1))
    return meta


def train_nsfw(out: str | Path, positives: list[str] | None = None, negatives: list[str] | None = None,
               seed: int = 1) -> dict:
    """Train the NSFW model (UT1 adult-URL titles vs real sentences); returns the sidecar dict."""
    positives, negatives = _abs(positives or NSFW_POSITIVES), _abs(negatives or NSFW_NEGATIVES)
    pos, neg = nsfw_examples(positives, negatives, seed)
    return train_binary(pos, neg, out, "nsfw", "non-nsfw", params=NSFW_PARAMS, seed=seed,
                        preprocessing="datapipe-v1-words", max_tokens=200, quantize_cutoff=60000,
                        sources=positives + negatives,
                        extra_meta={"recipe": "datapipe.classifiers.recipes.train_nsfw",
                                    "labels_are": "nsfw: UT1 adult-URL titles; non-nsfw: sentences of "
                                                  "dev-half real pages, Dolma CC, WikiText-2"})
