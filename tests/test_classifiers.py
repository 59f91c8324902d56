"""fastText classifiers: shipped models, metrics helpers, training, CLI."""
from __future__ import annotations

import json

import pyarrow as pa
import pytest

from datapipe.classifiers import data
from datapipe.classifiers.model import MODELS_DIR, load_classifier, preprocess
from datapipe.classifiers.recipes import jigsaw_metrics, obfuscate, read_jigsaw
from datapipe.classifiers.train import auc, binary_metrics, train_binary
from datapipe.env import shared_data
from datapipe.stages.quality_classifier import QualityClassifier

CS336 = shared_data() / "golden" / "cs336_a4"


def test_shipped_models_small_with_cards():
    for name in ("quality_wiki_cc", "toxicity_weak_en", "nsfw_ut1_en"):
        model = MODELS_DIR / f"{name}.ftz"
        assert model.stat().st_size < 2_000_000
        meta = json.loads(model.with_suffix(".json").read_text())
        assert meta["thread"] == 1 and meta["metrics"]["n"] > 0
        assert (MODELS_DIR / f"{name}.MODEL_CARD.md").is_file()


def test_cs336_quality_fixtures():
    clf = load_classifier("quality_wiki_cc.ftz")
    label, p = clf.predict((CS336 / "low_quality_cc.txt").read_text())
    assert label == "cc" and p > 0
    label, p = clf.predict((CS336 / "high_quality_wiki_reference.txt").read_text())
    assert label == "wiki" and p > 0


def test_quality_stage_threshold_sides():
    texts = [(CS336 / "low_quality_cc.txt").read_text(), (CS336 / "high_quality_wiki_reference.txt").read_text(),
             "Ceci est un texte français."]
    batch = pa.table({"id": ["a", "b", "c"], "text": texts, "lang": ["en", "en", "fr"], "url": [None] * 3, "host": [None] * 3})
    out = QualityClassifier()(batch)
    s = out.column("quality_score").to_pylist()
    assert s[0] < 0.5 < s[1] and s[2] is None
    assert out.column("reject_reason").to_pylist() == ["quality_classifier:score", None, None]


def test_preprocess_never_has_newlines():
    assert "\n" not in preprocess("a\nb\r\nc")
    assert preprocess("a\nb", "newlines") == "a b"
    assert preprocess("“Sh1t,” it’s 2019") == "\" sh0t , \" it's 0000"
    with pytest.raises(ValueError):
        preprocess("x", "nope")


def test_auc_and_metrics_hand_worked():
    # pos scores {0.9, 0.4}, neg {0.5, 0.1}: pairs won 3 of 4 -> AUC 0.75
    assert auc([0.9, 0.4, 0.5, 0.1], [1, 1, 0, 0]) == pytest.approx(0.75)
    assert auc([0.5, 0.5], [1, 0]) == pytest.approx(0.5)  # a tie counts half
    m = binary_metrics([0.9, 0.4, 0.5, 0.1], [1, 1, 0, 0])
    # predicted positive: 0.9 (tp), 0.5 (fp); 0.4 missed -> P = 1/2, R = 1/2
    assert (m["precision"], m["recall"], m["f1"], m["accuracy"]) == (0.5, 0.5, 0.5, 0.5)


def test_wikitext_detokenize():
    assert data.detokenize_wikitext("a 0 @.@ 7 kg , the <unk> lobster 's claw") == "a 0.7 kg, the lobster's claw"


def test_obfuscate_deterministic():
    import random

    a = [obfuscate("fucking", random.Random(3)) for _ in range(2)]
    assert a[0] == a[1] and a[0] != "fucking" and a[0][0] == "f" and len(a[0]) == 7


def test_training_learns_and_writes_sidecar(tmp_path):
    pos = [(f"p{i}", f"the lobster is a species of crustacean number {i} in the sea") for i in range(60)]
    neg = [(f"n{i}", f"login register share on facebook cookie policy page {i}") for i in range(60)]
    # lr 0.1: at the default 0.2 this tiny set diverged once ("Encountered NaN") in a full-suite run
    meta = train_binary(pos, neg, tmp_path / "m.ftz", "wiki", "cc", params={"epoch": 5, "bucket": 1000, "lr": 0.1},
                        quantize_cutoff=1000)
    # Held-out sets trivially separable.
    assert meta["metrics"]["f1"] == 1.0 and meta["n_train"] + meta["n_heldout"] == 120
    assert json.loads((tmp_path / "m.json").read_text())["positive_label"] == "wiki"


def test_toxicity_model_on_jigsaw_and_obfuscations():
    texts, y = read_jigsaw()
    assert len(texts) == 101 and sum(y) == 13
    m = jigsaw_metrics("toxicity_weak_en.ftz")
    # Measured (see MODEL_CARD): model P 0.53 R 0.69 AUC 0.80 (the previous model: P 0.75 R 0.46
    # AUC 0.68); LDNOOBW-any P 0.64 R 0.54.
    assert m["model"]["precision"] >= 0.5 and m["model"]["recall"] >= 0.65 and m["model"]["auc"] >= 0.78
    clf = load_classifier("toxicity_weak_en.ftz")
    s = clf.score(["what a f*ck1ng mess", "this is sh1t", "the weather is nice today"])
    assert s[0] > 0.5 and s[1] > 0.5 and s[2] < 0.5


def test_cli_help_and_predict(capsys, tmp_path):
    from datapipe.cli.main import build_parser, main

    with pytest.raises(SystemExit):
        build_parser().parse_args(["classifiers", "train", "--help"])
    assert "held-out" in capsys.readouterr().out
    f = tmp_path / "doc.txt"
    f.write_text((CS336 / "low_quality_cc.txt").read_text())
    assert main(["classifiers", "predict", "--model", "quality_wiki_cc.ftz", str(f)]) == 0
    row = json.loads(capsys.readouterr().out.strip())
    assert row["label"] == "cc" and row["p_wiki"] < 0.5


_TRAIN_SNIPPET = """
import sys
from datapipe.classifiers.train import train_binary
pos = [(f"p{i}", f"the lobster is a species of crustacean number {i} in the sea") for i in range(60)]
neg = [(f"n{i}", f"login register share on facebook cookie policy page {i}") for i in range(60)]
for out in sys.argv[1:]:
    train_binary(pos, neg, out, "wiki", "cc", params={"epoch": 5, "bucket": 1000}, quantize_cutoff=1000)
"""


def test_trainings_are_byte_identical_in_one_process_and_across_environments(tmp_path):
    # Regression: fasttext-numpy2 read uninitialised memory while training, so the weights changed
    # with the size of the process environment (CI trained two different models from one input) and
    # a second training in one process differed or raised "Encountered NaN".
    import os
    import subprocess
    import sys

    outs = []
    for k, pad in enumerate((0, 1000, 20000)):
        env = {**os.environ, "DATAPIPE_TEST_PAD": "x" * pad}
        pair = [str(tmp_path / f"{k}a.ftz"), str(tmp_path / f"{k}b.ftz")]
        subprocess.run([sys.executable, "-c", _TRAIN_SNIPPET, *pair], env=env, check=True, timeout=300)
        outs += pair
    blobs = {open(o, "rb").read() for o in outs}
    assert len(blobs) == 1, f"{len(blobs)} different models from {len(outs)} trainings"


def test_toxicity_model_ignores_sexual_and_clinical_topics():
    # Weak labels come from PROFANITY_TIER only: "sex" (0.967 with the previous model) is no evidence.
    s = load_classifier("toxicity_weak_en.ftz").score(
        ["Sex education is taught in year nine.", "The urologist examined the penis for signs of infection.",
         "He was sentenced to twelve years in prison for rape.", "you stupid fucking bitch"])
    assert s[0] < 0.1 and s[1] < 0.1 and s[2] < 0.1 and s[3] > 0.9


def test_nsfw_model_sentences():
    clf = load_classifier("nsfw_ut1_en.ftz")
    assert clf.preprocessing == "datapipe-v1-words" and clf.positive_label == "nsfw"
    s = clf.score(["Horny teen sluts sucking cock in free xxx videos.", "Watch this busty milf get fucked hard!",
                   "Sex education is taught in year nine.", "Lesbian and gay couples may adopt children.",
                   "The committee approved the budget for the new library."])
    assert s[0] > 0.95 and s[1] > 0.95
    assert s[2] < 0.1 and s[3] < 0.1 and s[4] < 0.1  # clinical and identity words carry no NSFW weight
    meta = json.loads((MODELS_DIR / "nsfw_ut1_en.json").read_text())
    assert meta["metrics"]["auc"] >= 0.99 and meta["metrics"]["n_pos"] > 500


def test_ut1_titles_and_page_split():
    titles = data.read_source("ut1-titles:" + str(shared_data() / "blocklists" / "ut1_adult_url_filterblacklistsv0_3_0.tar.gz"))
    assert len(titles) == 7562 and all(len(t.split()) >= 4 for _, t in titles)
    assert data.page_split("https://example.org/") in ("dev", "test")
    # Same rule as the PII span set: sha1 first hex digit 0-7 = dev.
    import hashlib

    u = "https://www.bbc.com/news/newsbeat-50470672"
    assert (data.page_split(u) == "dev") == (hashlib.sha1(u.encode()).hexdigest()[0] in "01234567")


def test_preprocess_words_drops_punctuation():
    assert preprocess("Hello, f*ck! you.. 2019", "datapipe-v1-words") == "hello f*ck you 0000"


@pytest.mark.parametrize("chars_per_token", [1, 2, 3, 16])
def test_long_text_preprocessing_equals_the_whole_texts_tokens(monkeypatch, chars_per_token):
    # preprocess tokenises a prefix of a long text; the first max_tokens tokens must be those of the
    # whole text whatever sits at the cut (a token over '.', a final sigma, a fold that grows "…").
    import random

    from datapipe.classifiers import model as M

    monkeypatch.setattr(M, "_CHARS_PER_TOKEN", chars_per_token)  # small: the cut falls inside tokens
    pieces = ["word", "a.b", "e-mail", "x", "ΣΟΦΟΣ", "Σ.", "…", "“q”", "123", "İstanbul", "@", "!!", ".", "'", "-"]
    rng = random.Random(7)
    for trial in range(400):
        n_tok = rng.choice([1, 2, 5, 20])
        parts = [rng.choice(pieces) + rng.choice(["", "", " ", "\n", "  "]) for _ in range(rng.randint(1, 300))]
        text = "".join(parts)
        want = M._TOKEN_RE.findall(text.lower().translate(M._FOLD))[:n_tok]
        assert M._long_tokens(text, n_tok)[:n_tok] == want, (trial, text[: n_tok * 16 + 20])
        assert M.preprocess(text * 3, "datapipe-v1", n_tok).split() == \
            M._TOKEN_RE.findall((text * 3).lower().translate(M._FOLD))[:n_tok]
