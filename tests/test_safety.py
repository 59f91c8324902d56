"""URL block list, LDNOOBW counts, span-level toxicity / NSFW / profanity stages and issue 15's probes."""
from __future__ import annotations

import tarfile

import numpy as np
import pyarrow as pa
import pytest
from pydantic import ValidationError

from datapipe.env import shared_data
from datapipe.stage import registry
from datapipe.stages.ldnoobw import LDNOOBW
from datapipe.stages.lib import wordlists as wl
from datapipe.stages.lib.spans import span_aggregates, split_spans, split_units
from datapipe.stages.quality_classifier import QualityClassifier
from datapipe.stages.safety import NSFW, Toxicity
from datapipe.stages.url_blocklist import URLBlocklist, url_decision

UT1 = shared_data() / "blocklists" / "ut1_adult_url_filterblacklistsv0_3_0.tar.gz"


def _batch(urls=None, texts=None, langs=None):
    n = len(urls or texts)
    urls = urls or [f"https://example.org/{i}" for i in range(n)]
    return pa.table({"id": [str(i) for i in range(n)], "text": texts or ["x"] * n, "lang": langs or ["en"] * n,
                     "url": urls, "host": [u.split("/")[2] for u in urls]})


@pytest.fixture(scope="module")
def ut1_domains():
    """A few real entries read straight from the tarball (independent of the hash array)."""
    with tarfile.open(UT1, "r:gz") as tf:
        head = tf.extractfile("domains").read(200_000).decode().splitlines()[:-1]
        urls = tf.extractfile("urls").read().decode().splitlines()
    return head, urls


def test_registered():
    reg = registry()
    for name in ("url_blocklist", "ldnoobw", "toxicity", "nsfw", "pii", "quality_classifier"):
        assert name in reg


def test_ut1_lookup_against_raw_list(ut1_domains):
    domains, _ = ut1_domains
    hashes, urls = wl.load_ut1(str(UT1))
    assert len(hashes) == 4_558_940  # line count of `domains` (all lines distinct)
    assert np.all(hashes[:-1] < hashes[1:])
    picked = domains[::500][:20]
    assert wl.in_sorted(hashes, [wl.domain_hash(d) for d in picked]).all()
    # Not on the list (checked with grep on the raw file): these must not hit.
    assert not wl.in_sorted(hashes, [wl.domain_hash(d) for d in ["wikipedia.org", "python.org", "nytimes.com"]]).any()


def test_url_blocklist_stage(ut1_domains):
    domains, raw_urls = ut1_domains
    adult = domains[1000]
    listed_url = raw_urls[0]
    batch = _batch([
        f"https://{adult}/page",                      # UT1 domain
        f"http://sub.{adult}/x",                      # subdomain of a UT1 domain
        f"http://{listed_url}",                       # UT1 URL entry
        "https://en.wikipedia.org/wiki/Python",      # clean
        "https://example.com/free-porn-videos",       # 'porn' is a banned word
        "https://example.com/anus-apeshit",           # two soft-banned words
        "https://example.com/anus-only",              # one soft word: kept
        "https://example.com/2girls1cupvideo",        # banned sub-word '2girls1cup'
    ])
    out = URLBlocklist()(batch)
    assert out.column("reject_reason").to_pylist() == [
        "url_blocklist:adult", "url_blocklist:adult", "url_blocklist:adult_url", None,
        "url_blocklist:banned_word", "url_blocklist:soft_banned_words", None, "url_blocklist:banned_subword"]
    m = out.column("url_blocklist_match").to_pylist()
    assert m[0] == f"adult:{adult}" and m[1] == f"adult:{adult}" and m[4] == "banned_word:porn"
    assert m[5] == "soft_banned_words:anus,apeshit" and m[7] == "banned_subword:2girls1cup"
    assert out.column("id").to_pylist() == batch.column("id").to_pylist()


def test_url_allowlist_and_earlier_reason_kept(ut1_domains):
    adult = ut1_domains[0][1000]
    hashes, urls = wl.load_ut1(str(UT1))
    assert url_decision(f"https://{adult}/", None, hashes, urls, frozenset(), frozenset(), None,
                        allow=frozenset({adult})) == (None, None)
    batch = _batch([f"https://{adult}/"]).append_column("reject_reason", pa.array(["earlier:x"]))
    assert URLBlocklist()(batch).column("reject_reason").to_pylist() == ["earlier:x"]


def test_missing_list_error(tmp_path):
    st = URLBlocklist(URLBlocklist.Config(ut1_path=str(tmp_path / "nope.tar.gz")))
    with pytest.raises(FileNotFoundError, match="nope.tar.gz"):
        st.setup()


def test_ldnoobw_counts():
    texts = [
        "This class is a classic, nothing to see.",           # 'ass' inside words: 0
        "What a shit show, total bullshit and more shit.",    # shit, bullshit, shit: 3 of 9 words
        "这是2013. 年的 三级片",                                # zh: '三级片' counts, '13.' in 2013. does not
        "Das ist ein Text.",                                   # de list, no hit
        "Some text",                                           # lang with no list -> null
    ]
    out = LDNOOBW(LDNOOBW.Config(max_count=0))(_batch(texts=texts, langs=["en", "en", "zh", "de", "xx"]))
    assert out.column("ldnoobw_count").to_pylist() == [0, 3, 1, 0, None]
    frac = out.column("ldnoobw_fraction").to_pylist()
    assert frac[1] == pytest.approx(3 / 9)
    # zh denominator = non-space characters: 这是2013.年的三级片 -> 2+5+2+3 = 12
    assert frac[2] == pytest.approx(1 / 12)
    assert out.column("reject_reason").to_pylist() == [None, "ldnoobw:count", "ldnoobw:count", None, None]


def test_decision_rules_on_stored_signals():
    c = LDNOOBW.Config
    assert LDNOOBW.decide({"ldnoobw_count": 0, "ldnoobw_fraction": 0.0}, c(max_count=0)) is None  # not above 0
    assert LDNOOBW.decide({"ldnoobw_count": 2, "ldnoobw_fraction": 0.05}, c(max_fraction=0.01)) == "ldnoobw:fraction"
    assert LDNOOBW.decide({"ldnoobw_count": None, "ldnoobw_fraction": None}, c(max_count=0, max_fraction=0.0)) is None
    q = QualityClassifier.Config
    assert QualityClassifier.decide({"quality_score": 0.3}, q(threshold=0.5)) == "quality_classifier:score"
    assert QualityClassifier.decide({"quality_score": 0.7}, q(threshold=0.5)) is None  # kept above
    assert QualityClassifier.decide({"quality_score": float("nan")}, q(threshold=0.5)) is None
    assert QualityClassifier.decide({"quality_score": 0.3, "lang": "de"}, q(threshold=0.5)) is None  # not scored


def test_toxicity_stage_shipped_model():
    texts = ["what a fucking mess, you stupid shit", "The committee approved the budget for the new library.",
             "line one\nline two fuck\n", "Ein ganz normaler deutscher Satz."]
    out = Toxicity(Toxicity.Config(threshold=0.5))(_batch(texts=texts, langs=["en", "en", "en", "de"]))
    s = out.column("toxicity_score").to_pylist()
    assert s[0] > 0.5 and s[1] < 0.5 and s[2] > 0.5   # newlines do not reach fastText
    assert s[3] is None                                # not English: no score, kept
    assert out.column("toxicity_spans").to_pylist() == [1, 1, 1, None]
    assert out.column("reject_reason").to_pylist() == ["toxicity:score", None, "toxicity:score", None]
    # Default: signals only (see the Toxicity docstring for why).
    assert Toxicity()(_batch(texts=texts[:1])).column("reject_reason").to_pylist() == [None]


def test_nsfw_requires_model_path():
    with pytest.raises(FileNotFoundError, match="model_path"):
        NSFW(NSFW.Config(model_path=None)).setup()


# --- segmentation and aggregates ------------------------------------------------------------


def test_split_spans_sentences_titles_windows():
    text = ("Dr. Smith arrived at the clinic on Monday morning. She saw twelve patients before noon! "
            "Was it enough?\nHome\nThe second paragraph has a sentence of its own here.")
    assert split_spans(text, "en") == [
        "Dr. Smith arrived at the clinic on Monday morning.",          # no split after the title
        "She saw twelve patients before noon! Was it enough? Home",    # short pieces joined to the one before
        "The second paragraph has a sentence of its own here."]
    long = " ".join(f"w{i}" for i in range(150))                       # no punctuation at all
    spans = split_spans(long, "en")
    assert [len(x.split()) for x in spans] == [64, 64, 22]
    # A short piece is never joined past the window, so no sentence is cut by the window.
    menu = "\n".join(["Menu item"] * 40) + "\nYou are a worthless fucking idiot and nobody likes you at all."
    assert split_spans(menu, "en")[-1].endswith("You are a worthless fucking idiot and nobody likes you at all.")
    assert all(len(x.split()) <= 64 for x in split_spans(menu, "en"))


def test_split_units_core_sentence_scored_alone():
    # Regression: a short line after a sentence was joined to it and diluted it ("VIDEO3:45" after a
    # porn-spam sentence took nsfw 0.997 -> 0.003 on the safety set's dev half).
    text = "Nude selfies of real girlfriends leaked, see them all here.\nVIDEO 3:45\nThe council met today."
    units = split_units(text, "en")
    assert units == [("Nude selfies of real girlfriends leaked, see them all here. VIDEO 3:45",
                      "Nude selfies of real girlfriends leaked, see them all here."),
                     ("The council met today.", None)]
    st = NSFW()
    st.ensure_setup()
    alone = float(st.score_spans(["Nude selfies of real girlfriends leaked, see them all here."])[0])
    joined = float(st.score_spans([units[0][0]])[0])
    agg = st.aggregate([text], ["en"])
    # The unit scores as the higher of the joined text and its sentence; one unit, not two.
    assert agg["max"][0] == pytest.approx(max(alone, joined)) and agg["spans"][0] == 2
    assert alone > 0.99 > joined


def test_split_spans_unspaced_language():
    zh = "这是第一句话，内容比较长一些。这是第二句话，内容也比较长。好！"
    spans = split_spans(zh, "zh")
    assert spans == ["这是第一句话，内容比较长一些。", "这是第二句话，内容也比较长。 好！"]


def test_span_aggregates_hand_worked():
    scores = np.array([0.9, 0.1, 0.6, 0.2])
    docs = np.array([0, 0, 0, 2])
    chars = np.array([10.0, 30.0, 60.0, 5.0])
    agg = span_aggregates(scores, docs, chars, np.array([100.0, 0.0, 5.0]), 3, 0.5)
    assert agg["max"][0] == pytest.approx(0.9) and np.isnan(agg["max"][1]) and agg["max"][2] == pytest.approx(0.2)
    assert agg["spans"].tolist() == [3, 0, 1] and agg["flagged"].tolist() == [2, 0, 0]
    assert agg["flagged_frac"][0] == pytest.approx(2 / 3)
    assert agg["flagged_char_frac"][0] == pytest.approx(0.7) and agg["flagged_char_frac"][2] == 0.0


def test_decide_rules_and_what_if_contract():
    cfg = Toxicity.Config(threshold=0.9, max_flagged=2, max_flagged_char_frac=0.3)
    assert Toxicity.decide({"toxicity_score": 0.95, "lang": "en"}, cfg) == "toxicity:score"
    assert Toxicity.decide({"toxicity_score": 0.8, "toxicity_flagged": 3, "lang": "en"}, cfg) == "toxicity:flagged"
    assert Toxicity.decide({"toxicity_score": 0.8, "toxicity_flagged": 1, "toxicity_flagged_char_frac": 0.5,
                            "lang": "en"}, cfg) == "toxicity:flagged_frac"
    assert Toxicity.decide({"toxicity_score": 0.99, "lang": "de"}, cfg) is None   # not a scored language
    assert Toxicity.decide({"toxicity_score": None, "lang": "en"}, cfg) is None
    # The stage's own verdict equals decide() on its stored signals.
    batch = _batch(texts=["You are a stupid fucking idiot.", "A calm sentence about the weather today."])
    out = Toxicity(Toxicity.Config(threshold=0.5))(batch).to_pylist()
    for row in out:
        assert Toxicity.decide(row, Toxicity.Config(threshold=0.5)) == row["reject_reason"]
    with pytest.raises(ValidationError, match="min_span_words"):
        Toxicity.Config(min_span_words=10, max_span_words=5)


# --- issue 15's probes (scores from the issue are the old whole-document stages') ---------------

CLEAN = (shared_data() / "golden" / "cs336_a4" / "high_quality_wiki_reference.txt").read_text()
CLEAN_372 = " ".join(CLEAN.split()[:372])
OBSCENE = ["Watch her suck his cock until he cums.", "She spread her legs and he fucked her hard.",
           "Hot sluts get fucked in every hole.", "He licked her wet pussy all night.",
           "She rode his huge dick in the shower.", "Horny babes suck cock in free porn videos.",
           "He came all over her big tits.", "She fingered her pussy on webcam.",
           "They fucked on the kitchen table.", "Her tits bounced as he pounded her."]


@pytest.fixture(scope="module")
def main_chain():
    """The safety stages with the main manifest's configs."""
    from pathlib import Path

    import yaml

    m = yaml.safe_load((Path(__file__).resolve().parent.parent / "manifests" / "cc-2026.yaml").read_text())
    cfgs = {k: (v or {}) for st in m["stages"] for k, v in st.items()}
    reg = registry()
    return [reg[n](reg[n].Config(**cfgs[n])) for n in ("toxicity", "nsfw", "profanity")]


def run_chain(chain, texts):
    """(reason per text: first stage's reason or None, {stage: table})."""
    batch = _batch(texts=texts)
    outs = {st.name: st(batch) for st in chain}
    reasons = []
    for i in range(len(texts)):
        rs = [outs[st.name].column("reject_reason")[i].as_py() for st in chain]
        reasons.append(next((r for r in rs if r), None))
    return reasons, outs


def test_probe_rude_fuck_alone_and_in_a_long_page(main_chain):
    texts = ["What a rude fuck.", "What a rude fuck. The committee approved the budget for the new library.",
             CLEAN_372 + "\nWhat a rude fuck.\n" + CLEAN_372]
    reasons, outs = run_chain(main_chain, texts)
    assert all(reasons), reasons                         # flagged alone, with a clean sentence, in a long page
    prof = outs["profanity"].column("profanity_score").to_pylist()
    assert min(prof) > 0.98                               # was 0.970 alone and 0.008 with one clean sentence


def test_probe_ten_obscene_sentences_after_372_clean_words(main_chain):
    reasons, outs = run_chain(main_chain, [CLEAN_372, CLEAN_372 + "\n" + "\n".join(OBSCENE)])
    assert reasons[0] is None and reasons[1] is not None
    assert outs["nsfw"].column("nsfw_flagged").to_pylist()[1] >= 5
    assert outs["profanity"].column("profanity_flagged").to_pylist()[1] >= 5


def test_probe_sex_education_kept_insult_flagged(main_chain):
    texts = ["Sex education is taught in year nine.",
             "You are a worthless fucking idiot, nobody wants you here. I hope you die."]
    reasons, outs = run_chain(main_chain, texts)
    assert reasons[0] is None and reasons[1] is not None   # flagged (nsfw also fires on "fucking")
    assert outs["toxicity"].column("toxicity_score").to_pylist()[0] < 0.1   # the old model gave 0.967
    assert outs["nsfw"].column("nsfw_score").to_pylist()[0] < 0.1


def test_probe_three_toxic_among_hundred_clean(main_chain):
    clean = [s for s in split_spans(CLEAN, "en") if len(s.split()) >= 8][:100]
    toxic = ["You are a pathetic fucking moron.", "Shut up, you stupid bitch.", "This is total bullshit, you asshole."]
    doc = clean[:30] + [toxic[0]] + clean[30:60] + [toxic[1]] + clean[60:] + [toxic[2]]
    reasons, outs = run_chain(main_chain, [" ".join(doc)])
    assert reasons[0] is not None
    # The profanity stage alone rejects it (the old whole-document score was 0.024).
    assert outs["profanity"].column("reject_reason").to_pylist() == ["profanity:score"]
    assert outs["profanity"].column("profanity_flagged").to_pylist()[0] >= 3


@pytest.mark.parametrize("where", ["start", "middle", "end"])
def test_toxic_content_anywhere_raises_the_aggregate(main_chain, where):
    # 10,600 clean words; one toxic and one sexual sentence at the start, the middle or the end.
    lines = CLEAN.split("\n")
    at = {"start": 0, "middle": len(lines) // 2, "end": len(lines)}[where]
    for bad in ("You are a worthless fucking idiot and nobody likes you.",
                "Horny sluts get fucked hard in free xxx porn videos."):
        text = "\n".join(lines[:at] + [bad] + lines[at:])
        reasons, outs = run_chain(main_chain, [CLEAN, text])
        assert reasons == [None, reasons[1]] and reasons[1] is not None, (where, bad)
        prof, nsfw = main_chain[2], main_chain[1]
        assert (outs["profanity"].column("profanity_score")[1].as_py() > prof.config.threshold
                or outs["nsfw"].column("nsfw_score")[1].as_py() > nsfw.config.threshold)


@pytest.mark.slow  # make test-slow: a long fault/figure run (make test stays near 15 min)
def test_safety_set_test_split_figures():
    """The test half of the safety set (benchmarks/safety_set.py): floors = measured values rounded
    down (README "Safety"); the dev half chose the thresholds."""
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
    import bench_safety

    res = bench_safety.evaluate("test", bench_safety._manifest_chain())
    chain = res["new"]["chain"]
    # Issue 15's targets (recall >= 0.90, false rejection <= 2%), measured on the test half after the dev
    # sweep: 0.933 (306/328), 0.018 (4/228); after issue 20's extraction change (comment sections under
    # articles no longer main text; the set is extracted at run time) 0.929 (303/326), 0.013 (3/227).
    assert chain["recall"]["rate"] >= 0.92 and chain["recall_sexual"]["rate"] >= 0.93
    assert chain["recall_toxic"]["rate"] >= 0.91
    assert chain["false_rejection"]["rate"] <= 0.02 and chain["false_rejection_benign"]["rate"] == 0.0
    # The whole-document stages it replaced caught almost nothing on the same pages.
    assert res["old"]["chain"]["recall"]["rate"] <= 0.10


def test_ut1_urls_are_read_from_the_cache_on_later_loads(tmp_path, monkeypatch):
    """Issue 16: the ``urls`` member comes after ``domains``, so reading it inflated the whole
    tarball on every worker start; it is cached beside the domain hashes, keyed the same."""
    import io
    import tarfile

    monkeypatch.setenv("DATAPIPE_CACHE", str(tmp_path / "cache"))
    tar = tmp_path / "ut1.tar.gz"
    with tarfile.open(tar, "w:gz") as tf:
        for name, body in (("domains", b"Example.com\nbad.org\n"), ("urls", b"Bad.org/Path/\n  x.net/a \n\n")):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
    wl.load_ut1.cache_clear()
    first = wl.load_ut1(str(tar))
    assert first[1] == frozenset({"bad.org/path", "x.net/a"})
    (cached,) = (tmp_path / "cache").glob("ut1_urls_*.txt")
    cached.write_text("bad.org/path\nx.net/a\nfrom.cache/only", encoding="utf-8")  # proves the cache is read
    wl.load_ut1.cache_clear()
    assert wl.load_ut1(str(tar))[1] == first[1] | {"from.cache/only"}
    wl.load_ut1.cache_clear()


def test_ut1_domain_hashes_are_sorted_and_unique(tmp_path):
    """The hash array is what ``np.unique`` gives (sorted, duplicates once, case folded); built
    without it (its hash path was 60% of a first load). Empty lists give an empty array."""
    import io
    import tarfile

    import numpy as np
    import xxhash

    def tarball(body: bytes):
        tar = tmp_path / f"ut1_{len(body)}.tar.gz"
        with tarfile.open(tar, "w:gz") as tf:
            info = tarfile.TarInfo("domains")
            info.size = len(body)
            tf.addfile(info, io.BytesIO(body))
        return tar

    names = [b"b.org", b"a.com", b"B.org", b"c.net", b"a.com", b""]
    got = wl._hash_domains(tarball(b"\n".join(names) + b"\n"))
    want = np.unique(np.array([xxhash.xxh3_64_intdigest(n.lower()) for n in names if n], dtype=np.uint64))
    assert got.dtype == np.uint64 and got.tolist() == want.tolist() and len(got) == 3
    assert wl._hash_domains(tarball(b"")).size == 0
