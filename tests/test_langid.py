"""Language ID with lid.176 (fasttext-community): CS336 expectations and cases B16/B17."""
import pytest

from datapipe.stages.langid import LangId, LangIdConfig, predict_languages


@pytest.fixture(scope="module")
def model(lid_model):
    st = LangId(LangIdConfig())
    st.ensure_setup()
    return st._model


def test_cs336_expectations(model, data_dir):
    moby = (data_dir / "golden" / "cs336_a4" / "moby_extracted.txt").read_text()
    (lang, score), (zh, zscore) = predict_languages(model, [moby, "欢迎来到我们的网站"])
    assert lang == "en" and 0 < score <= 1
    assert zh == "zh" and 0 < zscore <= 1


def test_b16_newlines_do_not_reach_predict(model, cases_dir):
    text = (cases_dir / "B16.txt").read_text()
    assert "\n" in text
    ((lang, score),) = predict_languages(model, [text])
    assert lang == "en" and 0 < score <= 1


def test_b17_one_result_per_line(model, cases_dir):
    lines = (cases_dir / "B17.txt").read_text().split("\n")[:4]
    res = predict_languages(model, lines)
    assert len(res) == 4
    assert res[3] == ("unknown", 0.0) and lines[3].strip() == ""
    for lang, score in res[:3]:
        assert lang == "en" or score < 0.65


def test_lingua_sentences_accuracy(model, data_dir):
    """lid.176 on 200 real sentences each of de/fr/ru/zh: published accuracy on such text is high (>90%)."""
    import gzip

    for lang in ("de", "fr", "ru", "zh"):
        with gzip.open(data_dir / "langid" / "lingua_sentences" / f"{lang}.txt.gz", "rt") as fh:
            sents = [next(fh).strip() for _ in range(200)]
        got = [p[0] for p in predict_languages(model, sents)]
        assert sum(g == lang for g in got) / len(got) >= 0.9, lang


def test_keep_rule_per_language(model):
    st = LangId(LangIdConfig(languages=["en", "de"], min_score=0.5, min_score_by_lang={"de": 0.99}))
    assert st.decide_one("fr", 0.99) == "langid:language"
    assert st.decide_one("de", 0.98) == "langid:low_score"
    assert st.decide_one("en", 0.6) is None
    assert st.decide_one("unknown", 0.0) == "langid:unknown"
