"""Dedup phase-1 parts: normalization (B26), MinHash == datasketch 2.0.0, short/empty docs
(B22, B23), the stage contract, LSH parameter choice and the S-curve."""
from __future__ import annotations

import gzip
import json
import math
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import xxhash
from datasketch import MinHash
from datasketch.lsh import _optimal_param

from datapipe.env import shared_cases, shared_data
from datapipe.stages.dedup_signatures import DedupSignatures
from datapipe.stages.lib.minhash import poly64_hash32, shingles, signatures
from datapipe.stages.lib.normalize import normalize_lines, normalize_text
from datapipe.stages.phases.dedup.config import (
    MinHashConfig,
    collision_probability,
    optimal_bands_rows,
)

CASES = shared_cases()


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _cc_texts() -> list[str]:
    out = []
    for f in sorted((shared_data() / "cc_text").glob("*.jsonl.gz")):
        with gzip.open(f, "rt") as fh:
            out += [json.loads(line)["text"] for line in fh]
    return out


def test_b26_all_variants_normalize_to_one_text():
    expected = ("the quick survey of local libraries found that most branches now lend tools, seeds and "
                "musical instruments as well as books to their members.")
    docs = _jsonl(CASES / "B26.jsonl")
    assert len(docs) == 6
    assert {d["id"]: normalize_text(d["text"]) for d in docs} == {d["id"]: expected for d in docs}


def test_normalize_policy_details():
    assert normalize_text(None) == "" and normalize_text(" \t\n\u3000\u00a0") == ""
    assert normalize_text("Stra\u00dfe") == "strasse"              # full case folding
    assert normalize_text("soft\u00adhyphen zero\ufeffwidth") == "softhyphen zerowidth"
    assert normalize_text("Hello, World!") == "hello, world!"      # punctuation kept
    assert normalize_lines("A  b\n\nC\r\nd") == ["a b", "", "c", "d"]


@pytest.mark.parametrize("shingle_hash,hashfunc", [("poly64", poly64_hash32), ("xxh32", xxhash.xxh32_intdigest)])
@pytest.mark.parametrize("num_perm,seed,ngram", [(128, 1, 5), (100, 7, 3)])
def test_signatures_equal_datasketch_on_real_text(shingle_hash, hashfunc, num_perm, seed, ngram):
    texts = _cc_texts() + ["cat", "blue sky today", ""]
    norm = [normalize_text(t) for t in texts]
    sig, valid = signatures(norm, num_perm=num_perm, seed=seed, ngram=ngram, hash=shingle_hash, block=700)
    assert valid.tolist() == [bool(t) for t in norm]
    for i, t in enumerate(norm):
        if not t:
            continue
        m = MinHash(num_perm=num_perm, seed=seed, hashfunc=hashfunc)  # datasketch 2.0.0 default scheme affine32
        m.update_batch(shingles(t, ngram))
        assert m.hashvalues.dtype == np.uint32
        np.testing.assert_array_equal(sig[i], m.hashvalues, err_msg=f"doc {i}")


def test_shingles_short_docs_b22():
    assert shingles("cat", 5) == [b"cat"]
    assert shingles("red car parked outside", 5) == [b"red car parked outside"]
    assert shingles("a b c d e f", 5) == [b"a b c d e", b"b c d e f"]
    assert shingles("", 5) == []
    docs = {str(d["id"]): d["text"] for d in _jsonl(CASES / "B22.jsonl")}
    out = DedupSignatures()(pa.table({"text": list(docs.values())}))
    sigs = dict(zip(docs, (tuple(s) for s in out.column("minhash").to_pylist())))
    assert sigs["0"] == sigs["2"]                         # "cat" twice: exact duplicates
    assert len({sigs[k] for k in ("0", "1", "3", "4")}) == 4  # short texts do not share a signature


def test_stage_on_b23_empty_docs():
    docs = _jsonl(CASES / "B23.jsonl")
    batch = pa.table({"id": [d["id"] for d in docs], "text": [d["text"] for d in docs]})
    out = DedupSignatures()(batch)
    assert out.column("id").to_pylist() == batch.column("id").to_pylist()  # same rows, same order
    assert out.schema.field("content_hash").type == pa.binary(16)
    assert out.schema.field("minhash").type == pa.list_(pa.uint32())
    mh = dict(zip(out.column("id").to_pylist(), out.column("minhash").to_pylist()))
    ch = dict(zip(out.column("id").to_pylist(), out.column("content_hash").to_pylist()))
    for k in ("empty", "spaces", "newline"):
        assert mh[k] is None and ch[k] is None
    assert len(mh["normal"]) == 128
    assert ch["normal"] == xxhash.xxh3_128_digest(normalize_text(docs[3]["text"]).encode())


@pytest.mark.parametrize("threshold,num_perm", [(0.8, 128), (0.5, 128), (0.9, 64)])
def test_optimal_bands_rows_match_datasketch(threshold, num_perm):
    assert optimal_bands_rows(threshold, num_perm) == _optimal_param(threshold, num_perm, 0.5, 0.5)


def test_exact_areas_choose_as_the_quad_search_on_a_grid(monkeypatch):
    """Issue 16: importing scipy.integrate for ``quad`` cost ~1 s of every manifest load. The
    areas are now exact (Gauss-Legendre on the polynomial integrands) and ``quad`` runs only on a
    near tie. On a grid of thresholds, sizes and weights the choice equals the quad search (the
    code before) and datasketch's; ties and zero weights are decided by quad, as before."""
    from datapipe.stages.phases.dedup import config

    searched = []
    quad_search = config._quad_search
    monkeypatch.setattr(config, "_quad_search", lambda *a: searched.append(a) or quad_search(*a))
    for num_perm, thresholds in ((16, (0.1, 0.3, 0.45, 0.6, 0.75, 0.9)), (128, (0.3, 0.6, 0.9))):
        for t in thresholds:
            for w in ((0.5, 0.5), (0.3, 0.7), (0.9, 0.1), (0.0, 1.0)):
                config.optimal_bands_rows.cache_clear()
                got = config.optimal_bands_rows(t, num_perm, *w)
                assert got == quad_search(t, num_perm, *w), (t, num_perm, w)
                if 0.0 not in w:
                    assert got == _optimal_param(t, num_perm, *w), (t, num_perm, w)
    assert {a[3] for a in searched} == {1.0}  # only the zero-weight cases (many areas ~0) went to quad
    config.optimal_bands_rows.cache_clear()
    assert config.optimal_bands_rows(0.5, 2) == quad_search(0.5, 2, 0.5, 0.5)  # (1, 2) and (2, 1) tie
    assert searched[-1] == (0.5, 2, 0.5, 0.5)


def test_exact_areas_are_the_integrals():
    from datapipe.stages.phases.dedup.config import _exact_areas

    b, r, fp, fn = _exact_areas(0.6, 8)
    i = next(k for k in range(len(b)) if (b[k], r[k]) == (2, 3))
    # 1 - (1 - s^3)^2 = 2 s^3 - s^6: integral 0..0.6 = 0.6^4 / 2 - 0.6^7 / 7; (1 - s^3)^2 over 0.6..1
    assert fp[i] == pytest.approx(0.6 ** 4 / 2 - 0.6 ** 7 / 7, rel=1e-12)
    assert fn[i] == pytest.approx((1 - 0.5 + 1 / 7) - (0.6 - 0.6 ** 4 / 2 + 0.6 ** 7 / 7), rel=1e-12)
    assert [(int(x), int(y)) for x, y in zip(b, r)][:9] == [(1, k) for k in range(1, 9)] + [(2, 1)]


def test_cs336_parameters_expressible():
    assert MinHashConfig(num_perm=100, bands=10).band_rows() == (10, 10)
    assert MinHashConfig(num_perm=500, bands=50).band_rows() == (50, 10)
    with pytest.raises(ValueError):
        MinHashConfig(num_perm=100, bands=10, rows=11)
    with pytest.raises(ValueError):
        MinHashConfig(nonsense=1)


def test_lsh_s_curve():
    """Empirical P(share >= 1 band) for pairs of known Jaccard vs 1-(1-s^r)^b (bands 20, rows 5)."""
    bands, rows, n_pairs, size = 20, 5, 300, 200
    rng = np.random.default_rng(3)
    for target in (0.2, 0.4, 0.5, 0.6, 0.8):
        shared = round(2 * size * target / (1 + target))   # |A&B| / |A|B| = k / (2*size - k)
        s = shared / (2 * size - shared)
        texts_a, texts_b = [], []
        for _ in range(n_pairs):
            toks = rng.choice(10**9, size=2 * size - shared, replace=False)
            texts_a.append(" ".join(f"w{t}" for t in toks[:size]))
            texts_b.append(" ".join(f"w{t}" for t in toks[size - shared:]))
        sa, _ = signatures(texts_a, num_perm=bands * rows, ngram=1)
        sb, _ = signatures(texts_b, num_perm=bands * rows, ngram=1)
        hit = (sa == sb).reshape(n_pairs, bands, rows).all(axis=2).any(axis=1)
        p = collision_probability(s, bands, rows)
        sd = math.sqrt(p * (1 - p) / n_pairs)
        assert abs(hit.mean() - p) <= 4 * sd + 0.01, (s, hit.mean(), p)
        # the signature agreement rate estimates s itself
        assert abs((sa == sb).mean() - s) < 0.03


def test_kernel_normalization_equals_normalize_text_on_every_code_point():
    """The kernel re-implements casefold/invisible/whitespace on UTF-8 bytes: its collapsed text
    must be normalize_text's, for every code point (in a word, next to ASCII) and on real text."""
    from datapipe.stages.lib.minhash import poly64_signatures
    from datapipe.stages.lib.minhash_kernel import TABLE_SIZE
    from datapipe.stages.lib.normalize import nfkc

    assert all(chr(c).casefold() == chr(c) and not chr(c).isspace() for c in range(TABLE_SIZE, sys.maxunicode + 1))
    texts = [f"Ab{chr(c)}Cd x{chr(c)}" for c in range(sys.maxunicode + 1)] + _cc_texts() + ["", " \u3000 "]
    _, valid, norm = poly64_signatures([nfkc(t) for t in texts])
    expected = [normalize_text(t).encode("utf-8", "surrogatepass") for t in texts]
    assert [i for i, (a, b) in enumerate(zip(norm, expected)) if a != b] == []
    assert valid.tolist() == [bool(e) for e in expected]


def test_exact_jaccard_kernel_matches_python_sets():
    from datapipe.stages.lib.minhash import shingle_sets
    from datapipe.stages.lib.minhash_kernel import pair_jaccard

    norm = [normalize_text(t) for t in _cc_texts()[:40]] + ["one two", ""]
    vals, off = shingle_sets(norm, 5)
    sets = [set(shingles(t, 5)) for t in norm]
    ia, ib = np.repeat(np.arange(len(norm)), len(norm)), np.tile(np.arange(len(norm)), len(norm))
    got = pair_jaccard(vals, off, ia, vals, off, ib)
    want = [len(sets[a] & sets[b]) / len(sets[a] | sets[b]) if sets[a] | sets[b] else 0.0 for a, b in zip(ia, ib)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    assert np.diff(off).tolist() == [len(s) for s in sets]
