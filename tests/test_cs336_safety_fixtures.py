"""NSFW and toxic-speech checks in the shape of CS336 assignment 4's (a label and a float score > 0
per text), run against the shipped models and the main manifest's stages.

The course's fixtures are four comments from a public toxic-comment set; they are not in
``../shared/data`` (``golden/cs336_a4/EXPECTATIONS.md`` only describes them) and are not quoted
here. The probes below are written for this test, each standing for one case the course checks:
an all-caps, asterisk-obfuscated sexual insult (nsfw); a plain remark about a sex-related topic
(not nsfw); insults with profanity (toxic); a complaint with a starred word that is no listed
word's obfuscation (not toxic).

Our adapters classify as the pipeline does: the main manifest's stage is applied to the text and
its decision is the label (``nsfw`` / ``non-nsfw``; ``toxic`` / ``non-toxic``), its aggregate score
the score. Toxic speech is rejected by ``profanity`` in the main manifest (``toxicity`` only
annotates), so that is the toxic-speech adapter; the shipped ``toxicity_weak_en`` model is also
checked on the whole text, the way the course calls its fastText model.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import yaml

from datapipe.classifiers.model import load_classifier
from datapipe.stage import registry

NSFW_YES = "GO SUCK A D*CK, YOU F*CKING ADMINS... BUNCH OF HORNY C*NTS WHO GET OFF ON DELETING MY PAGES"
NSFW_NO = "The article on the history of brothels in Victorian London needs better sources, not deletion."
TOXIC_YES = ("Who let this clown undo my edit again? Are you too stupid to read the talk page, you moron? "
             "What a pathetic piece of shit. Nobody here has a clue, you useless bastards.")
TOXIC_NO = "How the h*ck did I end up with a block for fixing one typo?"


@pytest.fixture(scope="module")
def stages():
    m = yaml.safe_load((Path(__file__).resolve().parent.parent / "manifests" / "cc-2026.yaml").read_text())
    cfgs = {k: (v or {}) for st in m["stages"] for k, v in st.items()}
    reg = registry()
    return {n: reg[n](reg[n].Config(**cfgs[n])) for n in ("nsfw", "profanity")}


def classify(stage, text: str, yes: str, no: str) -> tuple[str, float]:
    """(label, score) of one text under one stage: ``yes`` when the stage rejects it."""
    out = stage(pa.table({"id": ["0"], "text": [text], "lang": ["en"]}))
    reason = out.column("reject_reason")[0].as_py()
    return (yes if reason else no), out.column(f"{stage.name}_score")[0].as_py()


def test_classify_nsfw(stages):
    label, score = classify(stages["nsfw"], NSFW_YES, "nsfw", "non-nsfw")
    assert label == "nsfw" and isinstance(score, float) and score > 0
    label, score = classify(stages["nsfw"], NSFW_NO, "nsfw", "non-nsfw")
    assert label == "non-nsfw" and isinstance(score, float) and score > 0


def test_classify_toxic_speech(stages):
    label, score = classify(stages["profanity"], TOXIC_YES, "toxic", "non-toxic")
    assert label == "toxic" and isinstance(score, float) and score > 0
    label, score = classify(stages["profanity"], TOXIC_NO, "toxic", "non-toxic")
    assert label == "non-toxic" and isinstance(score, float) and score > 0


def test_toxicity_model_on_whole_texts():
    clf = load_classifier("toxicity_weak_en.ftz")
    label, prob = clf.predict(TOXIC_YES)
    assert label == "toxic" and prob > 0.5
    label, prob = clf.predict(TOXIC_NO)    # "h*ck" is not an obfuscation of a listed word
    assert label == "clean" and prob > 0.5
