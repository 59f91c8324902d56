"""The CS336 assignment-4 NSFW and toxic-speech checks, run against the shipped models and stages.

The fixtures are not in ``../shared/data`` (``golden/cs336_a4/EXPECTATIONS.md`` only describes
them). They are four comments from the Jigsaw toxic-comment training set that the course's
``tests/test_toxicity.py`` (stanford-cs336/assignment4-data) passes to ``run_classify_nsfw`` and
``run_classify_toxic_speech``; the check is: the predicted label is the expected one and the score
is a float > 0. The four strings are quoted below verbatim (Jigsaw data, CC0; via CS336), nothing
else of that file.

Our adapters classify as the pipeline does: the main manifest's stage is applied to the text and
its decision is the label (``nsfw`` / ``non-nsfw``; ``toxic`` / ``non-toxic``), its aggregate score
the score. Toxic speech is rejected by ``profanity`` in the main manifest (``toxicity`` only
annotates), so that is the toxic-speech adapter; the shipped ``toxicity_weak_en`` model is also
checked on the whole comment, the way the course calls its fastText model.
"""
from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
import yaml
from datapipe.classifiers.model import load_classifier

from datapipe.stage import registry

NSFW_YES = ("SUCK MY C*CK WIKIPEDIA EDITORS...F*CKING *SSH*LE DORKS. "
            "JUST TRYING TO MAKE THE SITE BETTER YOU UPTIGHT C*NTS")
NSFW_NO = "Umm, theres no actual article for prostitution ring.  - Crunch Captain."
TOXIC_YES = ("Why did that idiot revert the reversion I made? "
             "Can that moron not have the decent common manners to post on the talk page? "
             "What a rude fuck. Arrogant twat who doesn't know what he's talking about. "
             "None of you fuckers have any manners.")
TOXIC_NO = "Why the fc*k should I get a warning for doing nothing?"


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


def test_toxicity_model_on_whole_comments():
    clf = load_classifier("toxicity_weak_en.ftz")
    label, prob = clf.predict(TOXIC_YES)
    assert label == "toxic" and prob > 0.5
    label, prob = clf.predict(TOXIC_NO)    # "fc*k" is not an obfuscation of a listed word
    assert label == "clean" and prob > 0.5
