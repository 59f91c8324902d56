"""`datapipe ablate` on a small finished run made from the real WARC sample.

The run: the first 400 records of realpages-1171.warc.gz through extract + langid, domains by
language (german / english / other), phase 3 token shards. Three explicit mixtures train a tiny
proxy on CPU (Dask, 2 workers, one seed); the checks are properties that hold whatever the exact
losses. Fake external trainers (deterministic losses) cover two seeds, nan losses and the
recommended block; tests/test_ablate_checks.py covers the degenerate inputs without a run.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from datapipe.ablate.manifest import Mixtures, load_ablation_manifest
from datapipe.ablate.mixtures import candidates, grid, mixture_id
from datapipe.engine import runner
from datapipe.manifest.load import ManifestError, load_manifest
from datapipe.stages.phases.tokenize.mixture import MixConfig

REPO = Path(__file__).resolve().parent.parent
CLI = [sys.executable, "-m", "datapipe.cli.main"]
MIXES = {"german": {"german": 0.8, "english": 0.1, "other": 0.1},
         "english": {"german": 0.1, "english": 0.8, "other": 0.1},
         "even": {"german": 1, "english": 1, "other": 1}}


def _first_records(src: Path, dst: Path, n: int) -> None:
    """Copy the first ``n`` gzip members (WARC records) of ``src`` byte for byte."""
    from warcio.archiveiterator import ArchiveIterator

    with open(src, "rb") as fh:
        it = ArchiveIterator(fh)
        for i, rec in enumerate(it):
            if i == n:
                end = it.get_record_offset()
                break
            rec.content_stream().read()
        fh.seek(0)
        dst.write_bytes(fh.read(end))


@pytest.fixture(scope="module")
def small_run(data_dir, tmp_path_factory, warm_client):
    root = tmp_path_factory.mktemp("ablate")
    warc = root / "realpages-400.warc.gz"
    _first_records(data_dir / "warc" / "realpages-1171.warc.gz", warc, 400)
    m = load_manifest(REPO / "manifests" / "cc-2026.yaml", {
        "inputs.paths": [str(warc)], "inputs.crawl": None, "output": str(root / "run"),
        "cluster.workers": 2, "cluster.dashboard_address": "127.0.0.1:0",
        "stages": [{"extract": {"main_content": True}}, {"langid": {}}], "dedup": None,
        "mix.rules": [{"domain": "german", "lang": "de"}, {"domain": "english", "lang": "en"}],
        "mix.default_domain": "other"})
    runner.run(m, client=warm_client)
    return root


def _manifest(root: Path, out: str, **extra) -> Path:
    body = {"name": "t", "run": str(root / "run"), "output": str(root / out), "seed": 3, "seeds": [0],
            "mixtures": {"explicit": list(MIXES.values())}, "budget_tokens": 40_000,
            "heldout": {"fraction": 0.1, "max_tokens": 15_000},
            "proxy": {"layers": 1, "d_model": 64, "heads": 2, "seq_len": 64, "batch_size": 8,
                      "lr": 0.003, "eval_tokens": 15_000, "vocab_size": 2048},
            "threads": 1, "device": "cpu", **extra}
    p = root / f"{out}.yaml"
    p.write_text(yaml.safe_dump(body))
    return p


@pytest.fixture(scope="module")
def ablation(small_run):
    pytest.importorskip("torch", reason="the built-in proxy needs the torch extra (make test installs it)")
    from datapipe.ablate.runner import run_ablation

    m = load_ablation_manifest(_manifest(small_run, "abl", cluster={"workers": 2}))
    return m, run_ablation(m, log=lambda s: None)


def _shards(folder: Path):
    return pq.read_table(sorted(folder.glob("shard-*.parquet")))


def _by_name(res) -> dict:
    return {name: next(r for r in res["mixtures"] if r["mixture_id"] == mixture_id(
        {d: w / sum(MIXES[name].values()) for d, w in MIXES[name].items()})) for name in MIXES}


def test_three_mixtures_train_with_finite_differing_losses(ablation):
    m, res = ablation
    assert res["trained"] == 3 and not res["failed"]
    assert res["eval_sets"] == ["english", "german", "other"]
    t = pq.read_table(Path(res["output"]) / "results.parquet")
    assert t.num_rows == 3
    losses = np.array([t.column(f"loss_{n}").to_numpy() for n in res["eval_sets"]])
    assert np.isfinite(losses).all() and (losses > 0).all()
    assert len({round(v, 6) for v in t.column("objective").to_pylist()}) == 3
    # objective = mean of the three held-out losses, recomputed here
    assert np.allclose(t.column("objective").to_numpy(), losses.mean(axis=0))
    assert (Path(res["output"]) / "loss_vs_weight.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dominant_domain_gets_lower_loss_on_its_heldout(ablation):
    _, res = ablation
    r = _by_name(res)
    assert r["german"]["eval"]["german"]["loss"] < r["english"]["eval"]["german"]["loss"]
    assert r["english"]["eval"]["english"]["loss"] < r["german"]["eval"]["english"]["loss"]


def test_training_sets_follow_mixture_and_reuse_run_tokens(ablation, small_run):
    m, res = ablation
    run_rows = _shards(small_run / "run" / "tokens")
    run_ids = dict(zip(run_rows.column("doc_id").to_pylist(), run_rows.column("input_ids").to_pylist()))
    held = set()
    for d in res["eval_sets"]:
        held |= set(_shards(Path(res["output"]) / "eval" / d).column("doc_id").to_pylist())
    for name, rec in _by_name(res).items():
        t = _shards(Path(res["output"]) / "mixtures" / rec["mixture_id"] / "train")
        for d, w in MIXES[name].items():  # whole documents: at most one document past the target
            part = t.filter(pc.equal(t.column("domain"), d)).column("num_tokens")
            want = m.budget_tokens * w / sum(MIXES[name].values())
            assert want - 1e-6 <= pc.sum(part).as_py() < want + pc.max(part).as_py(), (name, d)
        assert not held & set(t.column("doc_id").to_pylist())  # held-out documents never train
        for doc, ids in zip(t.column("doc_id").to_pylist()[:200], t.column("input_ids").to_pylist()[:200]):
            assert ids == run_ids[doc]  # the run's tokens, not a new tokenization


def test_one_seed_makes_no_recommendation(ablation):
    """One seed measures no noise floor: the ranking is written, no mix: block, and it says why."""
    _, res = ablation
    text = (Path(res["output"]) / "recommended_mix.yaml").read_text()
    assert yaml.safe_load(text) is None and "NO RECOMMENDATION" in text and "noise floor not measured" in text
    assert res["analysis"]["recommended"]["status"] == "none"
    assert "| 1 | mix-" in (Path(res["output"]) / "ranking.md").read_text()


def test_rerun_skips_finished_and_retrains_only_missing(ablation):
    from datapipe.ablate.runner import run_ablation

    m, res = ablation
    out = Path(res["output"])
    again = run_ablation(m.model_copy(update={"cluster": m.cluster.model_copy(update={"workers": 1})}),
                         log=lambda s: None)
    assert (again["trained"], again["skipped"]) == (0, 3)
    assert [r["eval"] for r in again["mixtures"]] == [r["eval"] for r in res["mixtures"]]
    victim = res["mixtures"][0]["mixture_id"]
    (out / "mixtures" / victim / "seed-0" / "metrics.json").unlink()
    third = run_ablation(m.model_copy(update={"cluster": m.cluster.model_copy(update={"workers": 1})}),
                         log=lambda s: None)
    assert (third["trained"], third["skipped"]) == (1, 2)
    assert [r["mixture_id"] for r in third["mixtures"] if not r["resumed"]] == [victim]


def test_external_trainer_command_and_regression(small_run, tmp_path):
    """A fake trainer whose loss on set d is 1 - (share of d): with objective {german: 1} the
    regression must recommend the most German mixture of the sampled region."""
    script = tmp_path / "fake_train.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        idx = json.load(open(sys.argv[1])); out = sys.argv[3]
        per = idx["tokens_per_domain"]; total = sum(per.values())
        json.dump({"eval": {d: 1 - per.get(d, 0) / total for d in ("english", "german", "other")},
                   "steps": 1}, open(out + "/metrics.json", "w"))
    """))
    # 400k tokens, max_epochs 100: no domain capped and enough documents per domain that the 6 samples
    # stay distinct training sets (at 40k, whole documents merge some of them)
    mf = _manifest(small_run, "ext", mixtures={"dirichlet": {"n": 6, "concentration": 1.0}}, seeds=[0, 1],
                   max_epochs=100, budget_tokens=400_000,
                   analysis={"objective": {"german": 1}, "samples": 20000, "top_k": 50, "holdout_mixtures": 0})
    cmd = f"{sys.executable} {script} {{train_index}} {{eval_dir}} {{out}}"
    p = subprocess.run(CLI + ["ablate", str(mf), "--trainer-cmd", cmd, "--json", "--no-progress"],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    summary = json.loads(p.stdout)
    dropped = sum(len(v) for v in summary["duplicates"].values())  # same training set once capped: trained once
    assert summary["mixtures"] == 6 - dropped >= 5 and summary["trained"] == 2 * (6 - dropped)  # x 2 seeds
    # the fake trainer is deterministic: the noise floor is 0
    assert summary["analysis"]["reproducibility"]["floor_objective"] == 0
    assert summary["analysis"]["recommended"]["status"] == "regression"
    recommended = summary["analysis"]["recommended"]
    t = pq.read_table(small_run / "ext" / "results.parquet")
    assert np.allclose(t.column("objective").to_numpy(), 1 - t.column("share_german").to_numpy())
    # losses linear in the shares: the fit is (nearly) exact, so it is trusted, and the optimum is the most
    # German point of the tried mixtures' hull, i.e. the most German tried mixture (no extrapolation)
    # (6 points, 6 features: leave-one-out is good, not exact; the losses span ~0.8)
    assert not recommended["fallback"], recommended
    assert recommended["loo_spearman"] > 0.9 and recommended["loo_mae"] < 0.1, recommended
    top = max(t.column("share_german").to_pylist())
    assert top - 0.03 <= recommended["weights"]["german"] <= top + 1e-3
    # the block is a valid mix: section of the run's own rules with the recommended weights
    block = yaml.safe_load((small_run / "ext" / "recommended_mix.yaml").read_text())["mix"]
    cfg = MixConfig(**block)
    assert math.isclose(sum(cfg.weights.values()), 1.0, abs_tol=1e-3)
    run_mix = json.loads((small_run / "run" / "tokens" / "index.json").read_text())["config"]["mix"]
    assert cfg.model_dump()["rules"] == run_mix["rules"] and cfg.default_domain == "other"
    assert cfg.weights == {d: round(w, 4) for d, w in recommended["weights"].items() if round(w, 4) > 0}


def test_bad_manifest_and_unfinished_run_are_clear_errors(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("run: x\nmixtures:\n  dirichlet: {n: 0}\nbudget_tokens: 10\n")
    with pytest.raises(ManifestError, match=r"bad.yaml:3: mixtures.dirichlet.n"):
        load_ablation_manifest(bad)
    ok = tmp_path / "ok.yaml"
    ok.write_text(f"run: {tmp_path}/nope\nmixtures: {{explicit: [{{web: 1}}]}}\nbudget_tokens: 10\n")
    p = subprocess.run(CLI + ["ablate", str(ok)], capture_output=True, text=True)
    assert p.returncode == 2 and "is not a finished run" in p.stderr


def test_grid_and_dirichlet_candidates():
    g = grid(["a", "b", "c"], 0.25)
    assert len(g) == math.comb(4 + 2, 2)  # C(n+K-1, K-1) with n = 4, K = 3
    assert all(math.isclose(sum(w.values()), 1.0) for w in g)
    spec = Mixtures(dirichlet={"n": 5, "prior": {"a": 0.7, "b": 0.2, "c": 0.1}, "concentration": 50})
    c1 = candidates(spec, ["a", "b", "c"], {}, seed=1)
    assert c1 == candidates(spec, ["a", "b", "c"], {}, seed=1) != candidates(spec, ["a", "b", "c"], {}, seed=2)
    assert np.allclose(np.mean([[w["a"], w["b"], w["c"]] for w in c1], axis=0), [0.7, 0.2, 0.1], atol=0.1)
    with pytest.raises(ValueError, match="unknown domain"):
        candidates(Mixtures(explicit=[{"zz": 1}]), ["a"], {}, seed=0)


# --- RegMix-style regression on a synthetic ground truth (no torch, seconds) -------------------
# Held-out set n has loss A + B[n] / (share_n + C[n]) (convex, blows up as its domain's share -> 0).
# Minimising sum_n w_n B_n / (s_n + C_n) on the simplex (Lagrange: w_n B_n / (s_n + C_n)^2 equal
# for all n) gives s_n = sqrt(w_n B_n) * (1 + sum C) / sum sqrt(w B) - C_n when all are positive.
B, C = np.array([1.0, 0.25, 0.49]), np.array([0.05, 0.05, 0.05])


def _true_losses(x: np.ndarray) -> np.ndarray:
    return 2.0 + B / (x + C)


def _true_optimum(w: np.ndarray) -> np.ndarray:
    r = np.sqrt(w * B)
    return r * (1 + C.sum()) / r.sum() - C


def _in_hull(point: np.ndarray, x: np.ndarray) -> bool:
    """Is ``point`` a convex combination of the rows of ``x``? (feasibility LP)"""
    from scipy.optimize import linprog

    n = len(x)
    lp = linprog(np.zeros(n), A_eq=np.vstack([x.T, np.ones(n)]), b_eq=np.r_[point, 1.0], bounds=(0, None))
    return lp.status == 0


@pytest.mark.parametrize("seed,n,w", [(0, 12, (1, 1, 1)), (1, 15, (1, 1, 1)), (2, 20, (1, 1, 1)),
                                      (3, 15, (1, 2, 1))])
def test_regmix_recovers_known_optimum(seed, n, w):
    from datapipe.ablate.regmix import fit_and_recommend

    w = np.array(w, dtype=float)
    x = np.random.default_rng(seed).dirichlet(np.ones(3), size=n)
    opt = _true_optimum(w)
    assert np.isclose(opt.sum(), 1) and (opt > 0).all() and _in_hull(opt, x)
    res = fit_and_recommend(x, _true_losses(x), w, samples=20_000, top_k=50, seed=0)
    assert not res["fallback"] and res["loo_spearman"] > 0.9
    assert np.abs(res["weights"] - opt).max() < 0.06, (res["weights"], opt)
    true_obj = lambda s: float(_true_losses(s[None])[0] @ w / w.sum())  # noqa: E731
    assert true_obj(res["weights"]) - true_obj(opt) < 0.01  # nats: the regret is small


def test_regmix_recommendation_stays_inside_sampled_region():
    """Every tried mixture has English <= 0.3 while the true optimum has English 0.47: the
    recommendation is in the tried mixtures' hull, pushed to its English-rich edge."""
    from datapipe.ablate.regmix import fit_and_recommend

    rng = np.random.default_rng(4)
    eng = 0.3 * rng.random(15)
    x = np.column_stack([eng, rng.dirichlet([1, 1], size=15) * (1 - eng)[:, None]])
    assert not _in_hull(_true_optimum(np.ones(3)), x)
    res = fit_and_recommend(x, _true_losses(x), np.ones(3), samples=20_000, top_k=50, seed=0)
    assert not res["fallback"] and _in_hull(res["weights"], x)
    assert res["weights"][0] > eng.max() - 0.03


def test_regmix_poor_fit_falls_back_to_best_tried_mixture():
    from datapipe.ablate.regmix import fit_and_recommend

    rng = np.random.default_rng(0)
    x = rng.dirichlet(np.ones(3), size=12)
    noise = 2.0 + 0.1 * rng.standard_normal((12, 3))  # losses unrelated to the mixture
    res = fit_and_recommend(x, noise, np.ones(3), samples=5_000, top_k=20, seed=0)
    best = int(np.argmin(noise.mean(axis=1)))
    assert res["fallback"] and res["loo_spearman"] < 0.5 and res["best_index"] == best
    assert np.allclose(res["weights"], x[best] / x[best].sum())
    few = fit_and_recommend(x[:4], _true_losses(x[:4]), np.ones(3), samples=1_000, top_k=10, seed=0)
    assert few["fallback"] and few["loo_spearman"] is None and "too few" in few["reason"]
    assert np.allclose(few["weights"], x[int(np.argmin(_true_losses(x[:4]).mean(axis=1)))])
    bad = _true_losses(x)
    bad[3, 1] = np.inf  # a diverged proxy: no fit on it
    with pytest.raises(ValueError, match="non-finite"):
        fit_and_recommend(x, bad, np.ones(3), samples=1_000, top_k=10, seed=0)


def test_regmix_log_share_features_beat_linear_shares_out_of_sample():
    """On the synthetic blow-up, the leave-one-out MAE of the log-share model is well below that of
    a ridge on the raw shares (the author's first fit), computed here with sklearn directly."""
    from sklearn.linear_model import Ridge
    from sklearn.model_selection import LeaveOneOut, cross_val_predict

    from datapipe.ablate.regmix import fit_and_recommend

    x = np.random.default_rng(5).dirichlet(np.ones(3), size=15)
    y = _true_losses(x).mean(axis=1)
    plain = cross_val_predict(Ridge(alpha=1e-4), x, y, cv=LeaveOneOut())
    res = fit_and_recommend(x, _true_losses(x), np.ones(3), samples=1_000, top_k=10, seed=0)
    assert res["loo_mae"] < 0.5 * float(np.mean(np.abs(plain - y)))
    assert np.isclose(res["loo_mae"], np.mean(np.abs(np.array(res["loo_objective"]) - y)))


def test_nan_loss_from_a_trainer_fails_that_mixture_naming_it(small_run, tmp_path):
    """A trainer reporting nan on one set for one mixture: that mixture is FAILED (mixture, seed and
    set named), not ranked; the others still are; the exit status is 1."""
    script = tmp_path / "nan_train.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        idx = json.load(open(sys.argv[1])); out = sys.argv[3]
        per = idx["tokens_per_domain"]; share = per.get("german", 0) / sum(per.values())
        ev = {d: 1 - per.get(d, 0) / sum(per.values()) for d in ("english", "german", "other")}
        if share > 0.5:
            ev["german"] = float("nan")
        json.dump({"eval": ev}, open(out + "/metrics.json", "w"))
    """))
    mf = _manifest(small_run, "nan", seeds=[0, 1])
    cmd = f"{sys.executable} {script} {{train_index}} {{eval_dir}} {{out}}"
    p = subprocess.run(CLI + ["ablate", str(mf), "--trainer-cmd", cmd, "--json", "--no-progress"],
                       capture_output=True, text=True)
    assert p.returncode == 1, p.stderr
    german = mixture_id({d: w / sum(MIXES["german"].values()) for d, w in MIXES["german"].items()})
    assert f"FAILED {german}: mixture {german} seed 0:" in p.stderr and "eval.german needs a finite loss" in p.stderr
    summary = json.loads(p.stdout)
    assert german not in summary["analysis"]["ranking"] and len(summary["analysis"]["ranking"]) == 2


def test_empty_extra_heldout_set_is_refused_before_training(small_run, tmp_path):
    from datapipe.ablate.runner import run_ablation

    empty = tmp_path / "empty.txt"
    empty.write_text("")
    m = load_ablation_manifest(_manifest(small_run, "empty", heldout={
        "fraction": 0.1, "max_tokens": 15_000, "extra": [{"name": "blank", "paths": [str(empty)]}]}))
    with pytest.raises(ValueError, match=r"extra set 'blank' has 0 tokens"):
        run_ablation(m, log=lambda s: None)
    assert not (small_run / "empty" / "mixtures").exists()  # refused before any training set


def test_local_proxy_workers_keep_glibc_malloc_defaults():
    """Dask's nanny would start workers with MALLOC_TRIM_THRESHOLD_=65536, which makes every
    training step mmap and zero-fill its tensors (+70% CPU per proxy run, measured); the ablation's
    local workers start without it and without the statistical profiler."""
    import os

    import dask

    from datapipe.ablate.manifest import AblationManifest
    from datapipe.ablate.runner import _client

    before = os.environ.get("MALLOC_TRIM_THRESHOLD_")
    m = AblationManifest(run="x", mixtures={"explicit": [{"a": 1}]}, budget_tokens=1, cluster={"workers": 1})
    client, cluster = _client(m)
    try:
        trim = client.run(os.getenv, "MALLOC_TRIM_THRESHOLD_")
        prof = client.run(dask.config.get, "distributed.worker.profile.enabled")
    finally:
        client.close()
        cluster.close()
    assert len(trim) == 1 and set(trim.values()) == {before} and set(prof.values()) == {False}
    assert os.environ.get("MALLOC_TRIM_THRESHOLD_") == before  # the nanny did not set it here either


def test_progress_per_training_step_and_per_run(ablation, capsys):
    """The built-in trainer reports every optimizer step (a loss every 25 steps and at the end) and
    the bars show runs done and steps of the current run on stderr; the per-run lines went to
    stdout before (tqdm.write's default), in front of `--json`'s output."""
    from datapipe.ablate.runner import _Bars
    from datapipe.ablate.train import train_builtin

    m, res = ablation
    out = Path(res["output"])
    calls = []
    proxy = m.proxy.model_copy(update={"eval_tokens": 200})
    train_builtin(out / "mixtures" / res["mixtures"][0]["mixture_id"] / "train" / "index.json", out / "eval",
                  res["eval_sets"], proxy, 3 * proxy.batch_size * proxy.seq_len, 0, "cpu", 1,
                  str(next(out.glob("vocab_map-*.npy"))), progress=lambda s, n, loss: calls.append((s, n, loss)))
    assert [c[:2] for c in calls] == [(1, 3), (2, 3), (3, 3)]
    assert calls[0][2] is None and calls[1][2] is None and math.isfinite(calls[2][2])
    bars = _Bars(True, 2)
    bars.start("mix-a seed 0", 3)
    for s, n, loss in calls:
        bars.step(s, n, loss)
    bars.done("  [1/2] mix-a seed 0 done")
    bars.close()
    cap = capsys.readouterr()
    assert "proxy runs (mix-a seed 0)" in cap.err and "1/2" in cap.err and "3/3" in cap.err
    assert "[1/2] mix-a seed 0 done" in cap.err and cap.out == ""  # stdout stays clean for --json


def test_a_manifest_cannot_run_a_program(small_run, tmp_path):
    """A manifest is data: ``trainer: {kind: command, command: ...}`` in the file is refused (one line,
    exit 2) and the program never runs; the same template given with --trainer-cmd is accepted."""
    marker = tmp_path / "ran"
    cmd = f"{sys.executable} -c \"open('{marker}', 'w')\" {{out}}"
    mf = _manifest(small_run, "prog", trainer={"kind": "command", "command": cmd})
    p = subprocess.run(CLI + ["ablate", str(mf), "--json", "--no-progress"], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr[-2000:]
    assert len(p.stderr.strip().splitlines()) == 1 and "--trainer-cmd" in p.stderr
    assert f"{mf}:" in p.stderr and "trainer.command" in p.stderr
    assert not marker.exists() and not (small_run / "prog").exists()
    # from the command line it is the user's own program: accepted (load only, nothing trained here)
    m = load_ablation_manifest(_manifest(small_run, "prog2"), {"trainer.kind": "command", "trainer.command": cmd})
    assert m.trainer.command == cmd


def test_finished_proxy_runs_are_not_reused_after_the_run_is_retokenized(ablation):
    """The run's tokens change under a finished ablation (here: its index names another tokenizer
    file, as a re-tokenized run's does): every proxy run trains again; the index put back, they
    train once more for the tokens they now see, and a further rerun reuses them."""
    from datapipe.ablate.runner import run_ablation

    m, res = ablation
    idx_path = Path(m.run) / m.tokens / "index.json"
    original = idx_path.read_text()
    changed = json.loads(original)
    changed["tokenizer"]["sha256"] = "0" * 64
    one = m.model_copy(update={"cluster": m.cluster.model_copy(update={"workers": 1})})
    try:
        idx_path.write_text(json.dumps(changed))
        again = run_ablation(one, log=lambda s: None)
        assert (again["trained"], again["skipped"]) == (3, 0)
    finally:
        idx_path.write_text(original)
    back = run_ablation(one, log=lambda s: None)
    assert (back["trained"], back["skipped"]) == (3, 0)
    assert [r["eval"] for r in back["mixtures"]] == [r["eval"] for r in res["mixtures"]]
    assert (run_ablation(one, log=lambda s: None)["skipped"]) == 3
