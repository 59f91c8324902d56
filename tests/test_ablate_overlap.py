"""`datapipe ablate` matches its held-out texts against the training pool before training.

A small finished run is written by hand (two domains of random-word documents, r50k_base token
shards). Held-out text is then planted in known training documents: a 20-word excerpt of a held-out
document (once as is, once upper-cased with other punctuation), a 12-word excerpt (under n = 13: no
match), and 15 normalised words of a WikiText-style extra set in the form a crawled copy has
(``wasn't`` where the file has ``was n't``). Expected counts are worked by hand: a contiguous run of
k shared words holds k - 13 + 1 matched 13-grams, and fence words that occur nowhere else bound
each planted run.
"""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
import yaml

from datapipe.ablate.data import _with_copy, _write_token_set, load_pool
from datapipe.ablate.manifest import load_ablation_manifest
from datapipe.ablate.overlap import scan

CLI = [sys.executable, "-m", "datapipe.cli.main"]
TOKENIZE = {"tokenizer": "r50k_base"}
SEED, FRACTION = 0, 0.1
FENCE = "fencepost"  # a word no generated document has: bounds a planted run exactly
WIKI_HEAD = ["glarven", "tusk", "morrow", "plainfield", "hesket", "anvil"]  # 6 words before "was n't"
WIKI_TAIL = ["ready", "for", "the", "spring", "campaign", "of", "brightwater"]  # 7 words after


def _vocab(rng, size=3000) -> list[str]:
    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    out = set()
    while len(out) < size:
        out.add("".join(rng.choice(letters, rng.integers(5, 9))))
    return sorted(out - {FENCE, *WIKI_HEAD, *WIKI_TAIL})


def _docs(seed=7) -> dict[str, list[tuple[str, str]]]:
    rng = np.random.default_rng(seed)
    vocab = _vocab(rng)
    out = {}
    for d in ("news", "web"):
        out[d] = [(f"{d}-{i:03d}", " ".join(rng.choice(vocab, 220).tolist())) for i in range(20)]
    return out


def _write_run(root: Path, docs: dict[str, list[tuple[str, str]]]) -> None:
    from datapipe.ablate.data import run_tokenizer

    tok = run_tokenizer({"config": {"tokenize": TOKENIZE}})
    rows = [(i, d, t) for d, ds in docs.items() for i, t in ds]
    ids, lengths = tok.encode_docs([t for _, _, t in rows])
    starts = np.concatenate([[0], np.cumsum(lengths)])
    table = pa.table({"doc_id": [r[0] for r in rows], "domain": [r[1] for r in rows],
                      "num_tokens": pa.array(lengths, pa.int32()),
                      "input_ids": pa.array([ids[a:b] for a, b in zip(starts[:-1], starts[1:])],
                                            pa.list_(pa.uint16()))})
    _write_token_set(root / "tokens", _with_copy(table, np.zeros(len(rows), np.int32)), np.dtype("uint16"),
                     {"tokenizer": tok.info()}, {"config": {"tokenize": TOKENIZE}})


def _wiki(root: Path) -> Path:
    body = (" = Brightwater = \n\n The fleet of the <unk> sailed @-@ north in 1801 . "
            + " ".join(WIKI_HEAD) + " was n't " + " ".join(WIKI_TAIL) + " , and the crews waited . \n")
    p = root / "wiki.txt"
    p.write_text(body)
    return p


def _manifest(root: Path, out: str, **extra) -> Path:
    body = {"name": "t", "run": str(root / "run"), "output": str(root / out), "seed": SEED, "seeds": [0],
            "domains": ["news", "web"], "mixtures": {"explicit": [{"news": 1, "web": 1}, {"news": 3, "web": 1}]},
            "budget_tokens": 4000, "heldout": {"fraction": FRACTION, "max_tokens": 100_000, "min_tokens": 1,
                                               "extra": [{"name": "wikitext2", "paths": [str(root / "wiki.txt")]}]},
            "proxy": {"seq_len": 8}, "device": "cpu", **{k: v for k, v in extra.items() if k != "heldout"}}
    body["heldout"] |= extra.get("heldout", {})
    p = root / f"{out}.yaml"
    p.write_text(yaml.safe_dump(body))
    return p


def _plant(text: str, piece: list[str], at: int = 100) -> str:
    w = text.split(" ")
    return " ".join(w[:at] + [FENCE, *piece, FENCE] + w[at:])


@pytest.fixture(scope="module")
def runs(tmp_path_factory, data_dir):
    """(clean root, planted root, planted facts)."""
    clean, dirty = tmp_path_factory.mktemp("clean"), tmp_path_factory.mktemp("planted")
    docs = _docs()
    for r in (clean, dirty):
        _wiki(r)
    _write_run(clean / "run", docs)
    pool = load_pool(str(clean / "run"), "tokens", None, FRACTION, 100_000, SEED)  # which ids are held out
    held = {d: pool.heldout[d].column("doc_id").to_pylist() for d in ("news", "web")}
    train = {d: pool.train[d].column("doc_id").to_pylist() for d in ("news", "web")}
    text = {i: t for ds in docs.values() for i, t in ds}
    h_web, h_news = text[held["web"][0]].split(" "), text[held["news"][0]].split(" ")
    excerpt, short = h_web[30:50], h_news[60:72]  # 20 and 12 words
    shouty = [w.upper() + ("," if k % 3 == 0 else "") for k, w in enumerate(excerpt)]
    t1, t2, t3, t4 = train["web"][0], train["news"][0], train["web"][1], train["news"][1]
    planted = {t1: excerpt, t2: shouty, t3: [*WIKI_HEAD, "wasn't", *WIKI_TAIL], t4: short}
    dirty_docs = {d: [(i, _plant(t, planted[i]) if i in planted else t) for i, t in ds] for d, ds in docs.items()}
    _write_run(dirty / "run", dirty_docs)
    return clean, dirty, {"t1": t1, "t2": t2, "t3": t3, "held_web": held["web"][0], "excerpt": " ".join(excerpt),
                          "heldout_docs": {d: len(v) for d, v in held.items()}}


def _scan(root: Path) -> dict:
    m = load_ablation_manifest(_manifest(root, "scan"))
    pool = load_pool(m.run, m.tokens, m.domains, m.heldout.fraction, m.heldout.max_tokens, m.seed)
    return scan(pool, m.heldout.extra, m.heldout.overlap_n)


def test_planted_heldout_text_is_found_with_hand_counted_overlaps(runs):
    _, dirty, f = runs
    rep = _scan(dirty)
    web, news, wiki = rep["sets"]["web"], rep["sets"]["news"], rep["sets"]["wikitext2"]
    assert rep["train_docs_scanned"] == 40 - sum(f["heldout_docs"].values())
    assert rep["heldout_texts"] == {**f["heldout_docs"], "wikitext2": 1}
    # the 20-word excerpt, in one web and (upper-cased, commas added) one news training doc: 8 13-grams each
    assert web["train_docs"] == 2 and web["train_docs_by_domain"] == {"news": 1, "web": 1}
    assert web["ngrams"] == 2 * (20 - 13 + 1) and web["texts_hit"] == 1
    ex = {x["train_doc"]: x for x in web["examples"]}
    assert set(ex) == {f["t1"], f["t2"]} and ex[f["t1"]]["heldout"] == f["held_web"]
    assert ex[f["t1"]]["text"] == f["excerpt"]  # the matched span, cut out of the decoded training text
    # the 12-word excerpt of a news held-out document is under n: no overlap
    assert news["train_docs"] == 0 and news["ngrams"] == 0 and news["texts_hit"] == 0
    # WikiText's "was n't" read as a crawled copy writes it: 6 + 2 + 7 = 15 words, 3 13-grams
    assert wiki["train_docs"] == 1 and wiki["train_docs_by_domain"] == {"web": 1} and wiki["ngrams"] == 3
    assert wiki["examples"][0]["train_doc"] == f["t3"] and wiki["texts_hit"] == 1
    assert rep["train_docs_overlapping"] == 3


def test_clean_pool_reports_no_overlap(runs):
    clean, _, f = runs
    rep = _scan(clean)
    assert rep["train_docs_scanned"] == 40 - sum(f["heldout_docs"].values())
    assert rep["train_docs_overlapping"] == 0
    assert all(r["train_docs"] == 0 and r["ngrams"] == 0 and r["texts_hit"] == 0 and not r["examples"]
               for r in rep["sets"].values())


def test_refuse_mode_exits_2_with_one_line_before_anything_is_written(runs):
    _, dirty, _ = runs
    mf = _manifest(dirty, "refuse", heldout={"overlap": "refuse"})
    p = subprocess.run(CLI + ["ablate", str(mf), "--no-progress"], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    err = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert len(err) == 1 and err[0].startswith("error: heldout.overlap is refuse and 3 training documents"), p.stderr
    assert "web 2" in err[0] and "wikitext2 1" in err[0] and "news" not in err[0].split("which ones")[0]
    out = dirty / "refuse"
    assert not (out / "mixtures").exists() and sorted(x.name for x in (out / "eval").iterdir()) == ["overlap.json"]
    # a clean pool passes the same check
    clean = runs[0]
    ok = load_ablation_manifest(_manifest(clean, "refuse-clean", heldout={"overlap": "refuse"}))
    from datapipe.ablate.data import load_pool as lp
    from datapipe.ablate.overlap import check

    pool = lp(ok.run, ok.tokens, ok.domains, ok.heldout.fraction, ok.heldout.max_tokens, ok.seed)
    assert check(pool, ok, Path(ok.out_dir()), log=lambda s: None)["train_docs_overlapping"] == 0


def test_report_mode_writes_overlaps_into_the_ablation_outputs(runs, tmp_path):
    _, dirty, _ = runs
    script = tmp_path / "fake_train.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        idx = json.load(open(sys.argv[1])); out = sys.argv[3]
        per = idx["tokens_per_domain"]; total = sum(per.values())
        json.dump({"eval": {d: 2 - per.get(d, 0) / total for d in ("news", "web", "wikitext2")}},
                  open(out + "/metrics.json", "w"))
    """))
    mf = _manifest(dirty, "report")
    cmd = f"{sys.executable} {script} {{train_index}} {{eval_dir}} {{out}}"
    p = subprocess.run(CLI + ["ablate", str(mf), "--trainer-cmd", cmd, "--no-progress"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert "held-out overlap (13-word runs, " in p.stderr and "web: 2 training documents" in p.stderr
    out = dirty / "report"
    summary = json.loads((out / "summary.json").read_text())
    ov = summary["eval_overlap"]
    assert ov["train_docs_overlapping"] == 3 and ov["sets"]["web"]["train_docs"] == 2
    assert ov["sets"]["wikitext2"]["ngrams"] == 3 and "seconds" not in ov and "key" not in ov
    md = (out / "ranking.md").read_text()
    assert "## Held-out overlap with the training pool" in md
    assert "web: 2 training documents share text with 1 of its" in md
    assert "web: 2 training documents share text with 1 of its" in (out / "report.html").read_text()
    # the check's settings are not training settings: changing them retrains nothing
    a = load_ablation_manifest(mf)
    b = load_ablation_manifest(mf, {"heldout.overlap": "off", "heldout.overlap_n": 8})
    assert a.train_fingerprint() == b.train_fingerprint()
