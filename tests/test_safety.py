"""URL block list, LDNOOBW counts, fastText toxicity stage."""
from __future__ import annotations

import tarfile

import numpy as np
import pyarrow as pa
import pytest

from datapipe.env import shared_data
from datapipe.stage import registry
from datapipe.stages.lib import wordlists as wl
from datapipe.stages.safety import LDNOOBW, URLBlocklist, Toxicity, ldnoobw_decision, score_decision, url_decision

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


def test_decision_functions():
    assert ldnoobw_decision(0, 0.0, 0, None) is None
    assert ldnoobw_decision(2, 0.05, None, 0.01) == "fraction"
    assert ldnoobw_decision(None, None, 0, 0.0) is None
    assert score_decision(0.7, 0.5) is True and score_decision(0.3, 0.5) is False
    assert score_decision(0.3, 0.5, reject_above=False) is True
    assert score_decision(None, 0.5) is False and score_decision(float("nan"), 0.5) is False


def test_toxicity_stage_shipped_model():
    texts = ["what a fucking mess, you stupid shit", "The committee approved the budget for the new library.",
             "line one\nline two fuck\n", "Ein ganz normaler deutscher Satz."]
    out = Toxicity()(_batch(texts=texts, langs=["en", "en", "en", "de"]))
    s = out.column("toxicity_score").to_pylist()
    assert s[0] > 0.5 and s[1] < 0.5 and s[2] > 0.5   # newlines do not reach fastText
    assert s[3] is None                                # not English: no score, kept
    assert out.column("reject_reason").to_pylist() == ["toxicity:score", None, "toxicity:score", None]


def test_nsfw_requires_model():
    with pytest.raises(FileNotFoundError, match="model_path"):
        registry()["nsfw"]().setup()
