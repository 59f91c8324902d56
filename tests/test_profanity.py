"""profanity stage (alt-profanity-check) judged on Jigsaw and on obfuscated spellings, beside the
fastText ``toxicity`` model and the LDNOOBW list."""
import random

import pyarrow as pa
import pytest

from datapipe.classifiers.model import load_classifier
from datapipe.classifiers.recipes import obfuscate, read_jigsaw
from datapipe.classifiers.train import auc
from datapipe.env import shared_data
from datapipe.stage import registry
from datapipe.stages.lib import wordlists as wl

pytest.importorskip("profanity_check")
from datapipe.stages.profanity import Profanity  # noqa: E402

# Obfuscated spellings and the same sentences spelled plainly; all offensive.
OBFUSCATED = ["what a f*ck1ng mess", "this is sh1t", "f*ck you", "you are a b1tch", "shut up you a$$hole",
              "what the fuk", "go f u c k yourself", "you stupid c*nt", "this is bullsh!t", "you are a d1ck"]
PLAIN = ["what a fucking mess", "this is shit", "fuck you", "you are a bitch", "shut up you asshole",
         "what the fuck", "go fuck yourself", "you stupid cunt", "this is bullshit", "you are a dick"]
CLEAN = ["the weather is nice today", "thanks for the quick reply", "see the references below",
         "the meeting is at noon", "I fixed the typo in section 2", "great article, very helpful"]


@pytest.fixture(scope="module")
def prof():
    return Profanity()


@pytest.fixture(scope="module")
def ldnoobw():
    auto = wl.ldnoobw_automaton(str(shared_data() / "wordlists" / "ldnoobw"), "en")
    return lambda texts: [float(wl.count_listed_words(t, auto, "en") > 0) for t in texts]


def counts(scores, labels, thr=0.5):
    """(tp, fp, fn) at score > thr, counted here, not by the library under test."""
    tp = sum(s > thr and y for s, y in zip(scores, labels))
    fp = sum(s > thr and not y for s, y in zip(scores, labels))
    fn = sum(s <= thr and y for s, y in zip(scores, labels))
    return tp, fp, fn


def test_registered():
    assert "profanity" in registry()


def test_jigsaw_against_toxicity_and_ldnoobw(prof, ldnoobw):
    texts, y = read_jigsaw()
    assert len(texts) == 101 and sum(y) == 13
    s = prof.scores(texts)
    # Highest sentence score per comment, measured at 0.5: tp 10, fp 6, fn 3; AUC 0.963 (the whole
    # comment as one text: fp 3, AUC 0.976; a comment is one training example of the model).
    tp, fp, fn = counts(s, y)
    assert tp >= 10 and fp <= 6 and fn <= 3
    assert auc(s, y) >= 0.95
    # Side by side (measured): fastText toxicity AUC 0.80 (tp 9, fp 8), LDNOOBW-any AUC 0.75 (tp 7, fp 4).
    ft = list(load_classifier("toxicity_weak_en.ftz").score(texts))
    lw = ldnoobw(texts)
    assert auc(s, y) > auc(ft, y) + 0.15 and auc(s, y) > auc(lw, y) + 0.2
    assert tp > counts(ft, y)[0] and tp > counts(lw, y)[0]


def test_obfuscated_spellings(prof, ldnoobw):
    plain, obf, clean = prof.scores(PLAIN), prof.scores(OBFUSCATED), prof.scores(CLEAN)
    assert all(x > 0.99 for x in plain)
    assert all(x < 0.1 for x in clean)
    # Word-level TF-IDF: "f*ck" is the token "ck" and "sh1t" an unknown word, so an obfuscated word
    # counts only through its context ("you", "hole") or when the spelling itself was in training
    # ("fuk"). Measured: 4 of 10 above 0.5 (f*ck you, a$$hole, fuk, c*nt).
    assert sum(x > 0.5 for x in obf) >= 4
    assert obf[1] < 0.5  # "this is sh1t": the documented blind spot
    # LDNOOBW matches exact words only: 0 of 10; the fastText model (character n-grams) gets 8.
    assert sum(ldnoobw(OBFUSCATED)) == 0 and sum(ldnoobw(PLAIN)) == 10
    ft = load_classifier("toxicity_weak_en.ftz").score(OBFUSCATED)
    assert sum(x > 0.5 for x in ft) >= 7


def test_obfuscated_jigsaw_comments(prof, ldnoobw):
    # The toxic Jigsaw comments holding an LDNOOBW word, that word obfuscated as the toxicity
    # recipe does (seeded): 7 comments. Measured above 0.5: profanity 4, fastText 2, LDNOOBW 1.
    auto = wl.ldnoobw_automaton(str(shared_data() / "wordlists" / "ldnoobw"), "en")
    rng = random.Random(1)
    texts, y = read_jigsaw()
    obf = []
    for t, lab in zip(texts, y):
        hits = wl.find_listed_words(t, auto, "en") if lab else []
        if hits:
            low = t.lower()
            for start, end, w in reversed(hits):
                if low[start:end] == w:
                    low = low[:start] + obfuscate(w, rng) + low[end:]
            obf.append(low)
    assert len(obf) == 7
    assert sum(x > 0.5 for x in prof.scores(obf)) >= 4
    assert sum(ldnoobw(obf)) <= 1


def test_stage_columns_threshold_and_languages():
    t = pa.table({"id": ["a", "b", "c", "d"], "text": ["fuck you", "the weather is nice today", "fuck you", None],
                  "lang": ["en", "en", "de", "en"]})
    out = Profanity()(t).to_pylist()
    assert out[0]["profanity_score"] > 0.99 and out[0]["reject_reason"] == "profanity:score"
    assert out[1]["profanity_score"] < 0.1 and out[1]["reject_reason"] is None
    # Not English, no text: no score, kept.
    assert out[2]["profanity_score"] is None and out[3]["profanity_score"] is None
    assert out[2]["reject_reason"] is None and out[3]["reject_reason"] is None
    # Annotate only; an earlier reason is kept.
    t2 = t.append_column("reject_reason", pa.array(["earlier:x", None, None, None]))
    out = Profanity(Profanity.Config(threshold=None))(t2).to_pylist()
    assert [r["reject_reason"] for r in out] == ["earlier:x", None, None, None]
