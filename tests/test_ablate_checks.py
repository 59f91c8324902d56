"""Degenerate ablation inputs and order-independence (issue 19): no torch, no run, seconds.

Each case is worked by hand: the planner's caps for the duplicate test, a pooled variance for the
noise floor, and a synthetic loss surface with a known optimum for the regression.
"""
from __future__ import annotations

import json
import random

import numpy as np
import pyarrow as pa
import pytest

from datapipe.ablate.checks import check_eval_sets, check_losses, effective_mixtures
from datapipe.ablate.data import Pool
from datapipe.ablate.manifest import AblationManifest
from datapipe.ablate.mixtures import mixture_id
from datapipe.ablate.noise import margin, seed_statistics
from datapipe.ablate.report import decide


def _table(domain: str, sizes: list[int]) -> pa.Table:
    ids = [[1] * n for n in sizes]
    return pa.table({"doc_id": [f"{domain}-{i}" for i in range(len(sizes))], "domain": [domain] * len(sizes),
                     "num_tokens": pa.array(sizes, pa.int32()), "input_ids": pa.array(ids, pa.list_(pa.uint16()))})


def _pool(train: dict[str, list[int]], held: dict[str, list[int]] | None = None) -> Pool:
    held = held or {d: [] for d in train}
    return Pool({d: _table(d, s) for d, s in train.items()}, {d: _table(d, s) for d, s in held.items()},
                {"tokenizer": {"vocab_size": 8}}, "test")


# --- empty / too small held-out sets -------------------------------------------------------------

def test_empty_and_small_heldout_sets_are_refused_naming_each():
    pool = _pool({"big": [100] * 10, "tiny": [5]}, {"big": [100] * 30, "tiny": []})
    with pytest.raises(ValueError) as e:
        check_eval_sets({"big": 3000, "tiny": 0, "wiki": 10}, 500, pool)
    msg = str(e.value)
    assert "'tiny' has 0 held-out tokens (domain of 1 documents, 5 training tokens)" in msg
    assert "extra set 'wiki' has 10 tokens" in msg and "'big'" not in msg
    check_eval_sets({"big": 3000}, 500, pool)  # large enough: no error


# --- effective duplicates and domains too small for their weight ------------------------------

def test_capped_mixtures_collapse_to_one_training_set_and_are_flagged():
    """b has 10 tokens, max_epochs 2 -> at most 20 of a 500-token budget. {a .5, b .5} and
    {a .4, b .6} both get b = 20 (capped), a = 480 (the shortfall): one training set. {a .98,
    b .02} wants b = 10 (1 epoch, under the cap): a different set, not flagged."""
    pool = _pool({"a": [10] * 100, "b": [1] * 10})
    m1, m2, m3 = {"a": 0.5, "b": 0.5}, {"a": 0.4, "b": 0.6}, {"a": 0.98, "b": 0.02}
    eff = effective_mixtures(pool, [m1, m2, m3], budget=500, max_epochs=2, seed=0)
    i1, i2, i3 = mixture_id(m1), mixture_id(m2), mixture_id(m3)
    keep = min(i1, i2)
    assert eff["duplicates"] == {keep: [max(i1, i2)]}
    assert {mixture_id(w) for w in eff["kept"]} == {keep, i3}
    assert eff["selections"][i1]["tokens"] == eff["selections"][i2]["tokens"] == {"a": 480, "b": 20}
    assert eff["selections"][i3]["tokens"] == {"a": 490, "b": 10}
    assert set(eff["flags"]) == {i1, i2} and "b: target 0.500, achieved 0.040" in eff["flags"][i1][0]
    assert "capped at max_epochs=2" in eff["flags"][i1][0]
    # the kept representative does not depend on the candidates' order
    back = effective_mixtures(pool, [m3, m2, m1], budget=500, max_epochs=2, seed=0)
    assert back["duplicates"] == eff["duplicates"] and {mixture_id(w) for w in back["kept"]} == {keep, i3}


# --- nan / inf losses ----------------------------------------------------------------------------

@pytest.mark.parametrize("bad", [float("nan"), float("inf"), None])
def test_non_finite_loss_is_an_error_naming_mixture_seed_and_set(bad):
    recs = [{"mixture_id": "mix-a", "runs": [{"seed": 0, "eval": {"en": {"loss": 3.0}, "de": {"loss": 3.1}}}]},
            {"mixture_id": "mix-b", "runs": [{"seed": 0, "eval": {"en": {"loss": 3.0}, "de": {"loss": 3.2}}},
                                             {"seed": 1, "eval": {"en": {"loss": 3.0}, "de": {"loss": bad}}}]}]
    with pytest.raises(ValueError, match=r"mixture mix-b seed 1: held-out set 'de' loss is \S+ \(not finite\)"):
        check_losses(recs, ["en", "de"])


# --- noise floor, seed-to-seed Spearman, decision ----------------------------------------------

def test_noise_floor_and_seed_spearman_by_hand():
    # 3 mixtures x 2 seeds x 1 set: per-mixture unbiased variances 0.02, 0, 0.08 -> pooled sd
    # sqrt(0.1 / 3) = 0.18257; both seeds rank the mixtures 1 < 2 < 3 -> Spearman 1.
    losses = np.array([[[1.0], [1.2]], [[2.0], [2.0]], [[3.0], [3.4]]])
    st = seed_statistics(losses, np.ones(1), ["en"])
    assert st["floor"]["en"] == pytest.approx(np.sqrt(0.1 / 3)) == pytest.approx(st["floor_objective"])
    assert st["spearman"] == pytest.approx(1.0)
    assert margin(st["floor_objective"], 2, 2.0) == pytest.approx(2 * np.sqrt(0.1 / 3))
    # seeds disagreeing on the order of 3 mixtures (2 swaps): Spearman 1 - 6 * 2 / (3 * 8) = 0.5
    swap = np.array([[[1.0], [2.0]], [[2.0], [1.0]], [[3.0], [3.0]]])
    assert seed_statistics(swap, np.ones(1), ["en"])["spearman"] == pytest.approx(0.5)
    one = seed_statistics(losses[:, :1], np.ones(1), ["en"])
    assert one["floor"] is None and one["spearman"] is None and margin(None, 1, 2.0) is None


def _rows(obj: dict[str, float]) -> list[dict]:
    return [{"mixture_id": k, "objective": v, "w_a": 0.5, "w_b": 0.5} for k, v in sorted(obj.items())]


def test_decision_needs_differences_beyond_the_noise_floor():
    untrusted = {"fallback": True, "reason": "leave-one-out Spearman 0.2 < 0.5", "predicted": 3.0, "named": {}}
    stats = {"seeds": 2, "margin": 0.05}
    tied = decide(_rows({"mix-a": 3.00, "mix-b": 3.03, "mix-c": 3.20}), untrusted, stats, ["a", "b"])
    assert tied["status"] == "none" and tied["tied"] == ["mix-a", "mix-b"] and "not separable" in tied["reason"]
    clear = decide(_rows({"mix-a": 3.00, "mix-b": 3.10, "mix-c": 3.20}), untrusted, stats, ["a", "b"])
    assert clear["status"] == "best_tried" and clear["weights"] == {"a": 0.5, "b": 0.5}
    flat = decide(_rows({"mix-a": 3.00, "mix-b": 3.01, "mix-c": 3.02}), untrusted, stats, ["a", "b"])
    assert flat["status"] == "none" and "indistinguishable" in flat["reason"]
    one = decide(_rows({"mix-a": 3.00, "mix-b": 3.10}), untrusted, {"seeds": 1, "margin": None}, ["a", "b"])
    assert one["status"] == "none" and "noise floor not measured" in one["reason"]
    trusted = {"fallback": False, "reason": "ok", "predicted": 2.99, "named": {"a": 0.6, "b": 0.4}}
    reg = decide(_rows({"mix-a": 3.00, "mix-b": 3.10, "mix-c": 3.20}), trusted, stats, ["a", "b"])
    assert reg["status"] == "regression" and reg["weights"] == {"a": 0.6, "b": 0.4}


# --- the whole analysis does not depend on the candidates' order --------------------------------

def _records(n: int, seeds=(0, 1)) -> list[dict]:
    """Synthetic proxy results on 3 domains: loss_d = 2 + B_d / (share_d + 0.05) + seed noise."""
    rng = np.random.default_rng(7)
    b = np.array([1.0, 0.25, 0.49])
    out = []
    for x in rng.dirichlet(np.ones(3), size=n):
        w = dict(zip("abc", x.tolist()))
        runs = [{"seed": s, "eval": {d: {"loss": float(2 + b[j] / (x[j] + 0.05) + 0.01 * rng.standard_normal())}
                                     for j, d in enumerate("abc")}} for s in seeds]
        ev = {d: {"loss": float(np.mean([r["eval"][d]["loss"] for r in runs]))} for d in "abc"}
        for d in ev:
            ev[d]["ppl"] = float(np.exp(ev[d]["loss"]))
        out.append({"mixture_id": mixture_id(w), "weights": w, "achieved": w, "epochs": w, "runs": runs,
                    "eval": ev, "flags": [], "duplicates": [], "wall_s": 1.0})
    return out


def _analyse(records, tmp_path, name):
    from datapipe.ablate.analysis import analyse

    m = AblationManifest(run=str(tmp_path), mixtures={"explicit": [{"a": 1}]}, budget_tokens=10,
                         analysis={"samples": 2000, "top_k": 20})
    out = tmp_path / name
    out.mkdir()
    return analyse([json.loads(json.dumps(r)) for r in records], ["a", "b", "c"], ["a", "b", "c"], m, {}, out), out


def objs_ids(recs):
    return {r["mixture_id"] for r in recs}


def test_ranking_and_recommendation_do_not_depend_on_candidate_order(tmp_path):
    recs = _records(12)
    shuffled = recs[:]
    random.Random(3).shuffle(shuffled)
    assert [r["mixture_id"] for r in shuffled] != [r["mixture_id"] for r in recs]
    a, out_a = _analyse(recs, tmp_path, "a")
    b, out_b = _analyse(shuffled, tmp_path, "b")
    assert a["ranking"] == b["ranking"] and a["recommended"] == b["recommended"]
    assert a["holdout_mixtures"] == b["holdout_mixtures"] and len(a["holdout_mixtures"]) == 3  # 25% of 12
    assert all(h["predicted"] is not None and h["mixture_id"] in objs_ids(recs) for h in a["holdout_mixtures"])
    assert (out_a / "ranking.md").read_text() == (out_b / "ranking.md").read_text()
    assert (out_a / "recommended_mix.yaml").read_text() == (out_b / "recommended_mix.yaml").read_text()
    objs = {r["mixture_id"]: np.mean([v["loss"] for v in r["eval"].values()]) for r in recs}
    assert a["ranking"] == sorted(objs, key=lambda k: (objs[k], k))  # by measured objective, not input order


def test_nan_loss_is_refused_not_ranked_in_input_order(tmp_path):
    """The old bug: every objective nan, sorted() kept the candidate order and "recommended" it."""
    recs = _records(6)
    recs[2]["runs"][1]["eval"]["b"]["loss"] = float("nan")
    with pytest.raises(ValueError, match=rf"mixture {recs[2]['mixture_id']} seed 1: held-out set 'b'"):
        _analyse(recs, tmp_path, "nan")
    assert not (tmp_path / "nan" / "ranking.md").exists()


# --- regression: planted optimum, held-out mixtures ---------------------------------------------
# loss_n = 2 + B_n / (share_n + C_n); with objective weights w the optimum on the simplex is
# s_n = sqrt(w_n B_n) (1 + sum C) / sum sqrt(w B) - C_n (Lagrange). Tolerance: every share within
# 0.06 of the optimum and a regret under 0.01 nats/token, with a quarter of the mixtures held out.
B, C = np.array([1.0, 0.25, 0.49]), np.array([0.05, 0.05, 0.05])


def _true(x):
    return 2.0 + B / (x + C)


@pytest.mark.parametrize("seed,n,w", [(0, 16, (1, 1, 1)), (3, 20, (1, 2, 1))])
def test_planted_optimum_recovered_with_mixtures_held_out(seed, n, w):
    from datapipe.ablate.regmix import fit_and_recommend, holdout_mask

    w = np.array(w, dtype=float)
    x = np.random.default_rng(seed).dirichlet(np.ones(3), size=n)
    ids = [f"mix-{i:03d}" for i in range(n)]
    hold = holdout_mask(ids, 0.25, seed)
    assert hold.sum() == n // 4
    r = np.sqrt(w * B)
    opt = r * (1 + C.sum()) / r.sum() - C
    res = fit_and_recommend(x, _true(x), w, samples=20_000, top_k=50, seed=0, holdout=hold)
    assert not res["fallback"] and res["holdout"]["n"] == n // 4
    assert res["holdout"]["mae"] < 0.25 * res["holdout"]["baseline_mae"]  # far better than the mean
    assert np.abs(res["weights"] - opt).max() < 0.06, (res["weights"], opt)
    true_obj = lambda s: float(_true(s[None])[0] @ w / w.sum())  # noqa: E731
    assert true_obj(res["weights"]) - true_obj(opt) < 0.01


def test_holdout_mask_is_order_free_and_leaves_enough_to_fit():
    from datapipe.ablate.regmix import MIN_LOO, holdout_mask

    ids = [f"mix-{i}" for i in range(12)]
    m = holdout_mask(ids, 0.25, 0)
    rev = holdout_mask(ids[::-1], 0.25, 0)
    assert {i for i, h in zip(ids, m) if h} == {i for i, h in zip(ids[::-1], rev) if h} and m.sum() == 3
    assert not holdout_mask(ids[:MIN_LOO], 0.25, 0).any()  # 5 mixtures: all of them are needed to fit


def test_fit_that_fails_on_held_out_mixtures_is_not_trusted():
    """Losses that are pure noise: leave-one-out may look fine by chance, but the held-out check
    (fit MAE must beat predicting the mean) or the LOO check rejects the regression."""
    from datapipe.ablate.regmix import fit_and_recommend, holdout_mask

    rng = np.random.default_rng(11)
    x = rng.dirichlet(np.ones(3), size=16)
    noise = 3.0 + 0.05 * rng.standard_normal((16, 3))
    res = fit_and_recommend(x, noise, np.ones(3), samples=2_000, top_k=20, seed=0,
                            holdout=holdout_mask([f"m{i}" for i in range(16)], 0.25, 0))
    assert res["fallback"] and res["holdout"]["n"] == 4


def test_heldout_mixtures_never_enter_the_fit():
    """The held-out mixtures' losses only judge the fit: moving them changes no fitted quantity
    (predictions, leave-one-out, in-sample R^2, the recommendation while the fit stays trusted), only
    the held-out score; losses the fit cannot predict make it untrusted (fallback to the best tried);
    and the fit equals one made on the fitted rows alone."""
    from datapipe.ablate.regmix import fit_and_recommend, holdout_mask

    rng = np.random.default_rng(5)
    x = rng.dirichlet(np.ones(3), size=16)
    hold = holdout_mask([f"mix-{i:02d}" for i in range(16)], 0.25, 0)
    assert hold.sum() == 4
    kw = dict(samples=5_000, top_k=20, seed=0, holdout=hold)
    clean = fit_and_recommend(x, _true(x), np.ones(3), **kw)
    moved = _true(x)
    moved[hold] += 0.02 * rng.standard_normal((4, 3))  # a little measurement noise on the held-out rows
    noisy = fit_and_recommend(x, moved, np.ones(3), **kw)
    assert not clean["fallback"] and not noisy["fallback"]
    for k in ("weights", "predicted", "loo_spearman", "loo_mae", "loo_mae_sets", "r2_train"):
        assert np.allclose(clean[k], noisy[k]), k
    assert clean["holdout"]["predicted"] == noisy["holdout"]["predicted"]  # the same fitted models
    assert clean["holdout"]["mae"] != noisy["holdout"]["mae"]  # only the out-of-sample score moved
    wild = _true(x)
    wild[hold] = 50.0 + 10 * rng.random((4, 3))  # losses no fit of the others predicts
    bad = fit_and_recommend(x, wild, np.ones(3), **kw)
    assert bad["holdout"]["predicted"] == clean["holdout"]["predicted"] and bad["loo_mae"] == clean["loo_mae"]
    assert bad["fallback"] and "held-out mixtures" in bad["reason"]
    alone = fit_and_recommend(x[~hold], _true(x)[~hold], np.ones(3), samples=5_000, top_k=20, seed=0)
    assert np.isclose(alone["loo_spearman"], clean["loo_spearman"]) and np.isclose(alone["loo_mae"], clean["loo_mae"])
    assert np.isclose(alone["r2_train"], clean["r2_train"])


def test_shipped_manifest_holds_out_at_least_three_mixtures():
    """manifests/ablation.yaml: enough candidates that the id-hash hold-out sets aside >= 3 mixtures
    (a held-out rank correlation needs 3) and leaves >= MIN_LOO to fit, two seeds for the noise floor."""
    from pathlib import Path

    from datapipe.ablate.manifest import load_ablation_manifest
    from datapipe.ablate.regmix import MIN_LOO, holdout_mask

    m = load_ablation_manifest(Path(__file__).resolve().parent.parent / "manifests" / "ablation.yaml")
    n = len(m.mixtures.explicit) + m.mixtures.dirichlet.n
    held = int(holdout_mask([f"mix-{i:02d}" for i in range(n)], m.analysis.holdout_mixtures, m.seed).sum())
    assert held >= 3 and n - held >= MIN_LOO and len(m.seeds) >= 2
