"""Near-dup quality at threshold 0.8 on the evaluation set of :mod:`dedup_evaluation`
(real page text + controlled edits, exact Jaccard truth): the real phase 2 vs datasketch's
in-memory MinHashLSH on the same signatures."""
from __future__ import annotations

import numpy as np
import pytest
from dedup_evaluation import (
    datasketch_pairs,
    exact_jaccard,
    make_eval_set,
    pipeline_pairs,
    prf,
    real_texts,
)
from distributed import Client, LocalCluster

from datapipe.env import shared_data
from datapipe.stages.dedup_signatures import signature_columns
from datapipe.stages.phases.dedup.config import DedupConfig, MinHashConfig

THRESHOLD = 0.8


@pytest.fixture(scope="module")
def evalset():
    ev = make_eval_set(real_texts(str(shared_data() / "warc" / "realpages-1171.warc.gz")))
    jac = exact_jaccard(ev.texts)
    return ev, jac, {p for p, v in jac.items() if v >= THRESHOLD}


@pytest.fixture(scope="module")
def client():
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address="127.0.0.1:0") as c, \
            Client(c) as cl:
        yield cl


def test_eval_set_spans_jaccard_range(evalset):
    ev, jac, truth = evalset
    same = np.array([v for (i, j), v in jac.items() if ev.base[i] == ev.base[j]])
    counts = np.histogram(same, bins=[0.5, 0.6, 0.7, 0.8, 0.9, 1.0 + 1e-9])[0]
    assert len(ev.texts) >= 700 and counts.min() >= 50, counts   # every 0.1 band of 0.5-1.0 populated
    assert len(truth) >= 300


def test_pair_precision_recall_vs_exact_jaccard(evalset, client):
    ev, jac, truth = evalset
    edges, rep = pipeline_pairs(client, ev.texts, DedupConfig())
    p_edge, r_edge = prf(edges, truth)
    r_comp = prf({p for p in jac if rep[p[0]] == rep[p[1]]}, truth)[1]
    _, sig = signature_columns(ev.texts)
    ds = datasketch_pairs(np.array(sig.to_pylist(), dtype=np.uint32), THRESHOLD, 128)
    p_ds, r_ds = prf(ds, truth)
    print(f"pairs={len(truth)} ours edge P={p_edge:.3f} R={r_edge:.3f} component R={r_comp:.3f}; "
          f"datasketch MinHashLSH candidates P={p_ds:.3f} R={r_ds:.3f}")
    # Measured 1.000 / 0.984 / 1.000 on this set (369 pairs; texts by plain resiliparse, see real_texts).
    # Exact verification: a false edge needs a 64-bit shingle
    # hash collision; recall is bounded by the 18x7 banding (P(collide | J=0.8) = 0.986).
    assert p_edge >= 0.99 and r_edge >= 0.97 and r_comp >= 0.97
    assert r_edge > r_ds   # banding tuned below the threshold finds pairs datasketch's 9x13 misses


def test_estimate_star_configuration_loses_recall(evalset, client):
    """The first pass's setting (9x13 banding at 0.8, star edges, signature estimate) measured
    edge recall ~0.59: the reason for the new defaults, kept as a regression check of the metric."""
    ev, _, truth = evalset
    cfg = DedupConfig(minhash=MinHashConfig(band_threshold=0.8, verify="estimate", all_pairs_max_bucket=0))
    edges, _ = pipeline_pairs(client, ev.texts, cfg)
    p, r = prf(edges, truth)
    assert r < 0.8 and p < 0.99
