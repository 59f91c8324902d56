"""Drive an ablation: pools -> eval sets -> one training set and one proxy run per mixture.

Layout under the ablation's output directory::

    eval/<set>/{shard-00000.parquet,index.json}   held-out sets (per domain + extra files)
    mixtures/<mixture_id>/train/                  the mixture's training set (token shards)
    mixtures/<mixture_id>/metrics.json            the finished run's record (its presence = done)
    results.parquet, results.csv, ranking.md, loss_vs_weight.png, report.html, recommended_mix.yaml

Resume: a mixture whose ``metrics.json`` carries the current ``key`` (manifest training
fingerprint) is not retrained. Proxy runs go to Dask (one task each) when the manifest's cluster
has a scheduler or more than one worker; the output directory must then be visible to all workers.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from datapipe.ablate.data import load_pool, materialize, natural_shares, vocab_map, write_eval_sets
from datapipe.ablate.manifest import AblationManifest
from datapipe.ablate.mixtures import candidates, mixture_id


def _write_json(obj, path: Path) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True))
    os.replace(tmp, path)


def run_one(spec: dict) -> dict:
    """One proxy run (a Dask task): train, evaluate, write ``metrics.json``; return the record.

    A failure is returned as a record with ``error`` (and not written, so a rerun retries it).
    """
    from datapipe.ablate.manifest import Proxy
    from datapipe.ablate.train import train_builtin, train_command

    out = Path(spec["dir"])
    try:
        if spec["trainer_cmd"]:
            fields = {"train_index": spec["train_index"], "eval_dir": spec["eval_dir"], "out": out,
                      "budget_tokens": spec["budget_tokens"], "seq_len": spec["proxy"]["seq_len"],
                      "seed": spec["seed"], "device": spec["device"], "mixture_id": spec["mixture_id"]}
            m = train_command(spec["trainer_cmd"], fields, out, spec["eval_names"], spec["timeout_s"])
        else:
            m = train_builtin(Path(spec["train_index"]), Path(spec["eval_dir"]), spec["eval_names"],
                              Proxy(**spec["proxy"]), spec["budget_tokens"], spec["seed"], spec["device"],
                              spec["threads"], spec.get("vocab_map"))
    except Exception as e:  # noqa: BLE001 - one bad mixture must not lose the others' results
        return {"mixture_id": spec["mixture_id"], "error": f"{type(e).__name__}: {e}"}
    rec = {"mixture_id": spec["mixture_id"], "key": spec["key"], "weights": spec["weights"],
           "achieved": spec["achieved"], "epochs": spec["epochs"], **m}
    _write_json(rec, out / "metrics.json")
    return rec


def _client(m: AblationManifest):
    from distributed import Client, LocalCluster

    if m.cluster.scheduler:
        return Client(m.cluster.scheduler), None
    cluster = LocalCluster(n_workers=m.cluster.workers, threads_per_worker=m.cluster.threads_per_worker,
                           processes=True, dashboard_address="127.0.0.1:0", host="127.0.0.1")
    return Client(cluster), cluster


def _execute(m: AblationManifest, specs: list[dict], log) -> list[dict]:
    if not specs:
        return []
    if not m.cluster.scheduler and m.cluster.workers == 1:
        out = []
        for i, s in enumerate(specs):
            out.append(run_one(s))
            log(f"  [{i + 1}/{len(specs)}] {s['mixture_id']} {_brief(out[-1])}")
        return out
    from distributed import as_completed

    client, cluster = _client(m)
    try:
        res = {"GPU": 1} if m.cluster.gpu_resources else None
        futs = [client.submit(run_one, s, key=f"proxy-{s['mixture_id']}", pure=False, resources=res) for s in specs]
        out = []
        for fut in as_completed(futs):
            out.append(fut.result())
            log(f"  [{len(out)}/{len(specs)}] {out[-1]['mixture_id']} {_brief(out[-1])}")
        return out
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _brief(rec: dict) -> str:
    if "error" in rec:
        return f"FAILED {rec['error'][:200]}"
    losses = ", ".join(f"{k} {v['loss']:.3f}" for k, v in rec["eval"].items())
    return f"{rec.get('wall_s', 0):.1f} s; loss {losses}"


def run_ablation(m: AblationManifest, log=print) -> dict:
    """Run every candidate mixture not yet finished, then the analysis.

    Returns ``{"output", "domains", "eval_sets", "mixtures" (records, manifest order), "trained",
    "skipped", "failed", "analysis"}``. Raises RunNotReady / ValueError for a bad run or manifest.
    """
    from datapipe.ablate.analysis import analyse

    t0 = time.time()
    out = Path(m.out_dir())
    pool = load_pool(m.run, m.tokens, m.domains, m.heldout.fraction, m.heldout.max_tokens, m.seed)
    domains = sorted(pool.train)
    mixes = candidates(m.mixtures, domains, natural_shares(pool), m.seed)
    key = m.train_fingerprint()
    log(f"ablation {m.name}: {len(mixes)} mixtures over {domains}; pool from {pool.source}; "
        f"available tokens {pool.available()}")
    eval_dir = out / "eval"
    eval_dir.mkdir(parents=True, exist_ok=True)
    done_marker = eval_dir / "_done.json"
    if not done_marker.is_file() or json.loads(done_marker.read_text()).get("key") != key:
        sets = write_eval_sets(pool, m.heldout.extra, eval_dir)
        _write_json({"key": key, "sets": {k: v["total_tokens"] for k, v in sets.items()}}, done_marker)
    eval_names = list(json.loads(done_marker.read_text())["sets"])
    vmap_path = None
    if m.proxy.vocab_size and m.trainer.kind == "builtin":
        import numpy as np

        vmap_path = out / f"vocab_map-{key[:12]}.npy"
        if not vmap_path.is_file():
            np.save(vmap_path, vocab_map(pool, int(pool.index["tokenizer"]["vocab_size"]), m.proxy.vocab_size))
    records, specs = {}, []
    for w in mixes:
        mid = mixture_id(w)
        mdir = out / "mixtures" / mid
        mfile = mdir / "metrics.json"
        if mfile.is_file():
            rec = json.loads(mfile.read_text())
            if rec.get("key") == key:
                records[mid] = rec | {"resumed": True}
                continue
        idx = materialize(pool, w, m.budget_tokens, m.max_epochs, m.seed, mdir / "train")
        specs.append({"mixture_id": mid, "dir": str(mdir), "train_index": str(mdir / "train" / "index.json"),
                      "eval_dir": str(eval_dir), "eval_names": eval_names, "proxy": m.proxy.model_dump(),
                      "budget_tokens": m.budget_tokens, "seed": m.seed, "device": m.device, "threads": m.threads,
                      "trainer_cmd": m.trainer.command if m.trainer.kind == "command" else None,
                      "timeout_s": m.trainer.timeout_s, "key": key, "weights": w,
                      "achieved": idx["mixture"]["achieved"], "epochs": idx["mixture"]["epochs"],
                      "vocab_map": str(vmap_path) if vmap_path else None})
    log(f"  {len(records)} finished earlier (skipped), {len(specs)} to train")
    for rec in _execute(m, specs, log):
        records[rec["mixture_id"]] = rec | {"resumed": False}
    ordered = [records[mixture_id(w)] for w in mixes]
    failed = [r for r in ordered if "error" in r]
    good = [r for r in ordered if "error" not in r]
    analysis = analyse(good, domains, eval_names, m, pool.index, out) if good else None
    return {"output": str(out), "domains": domains, "eval_sets": eval_names, "mixtures": ordered,
            "trained": sum(1 for r in good if not r["resumed"]), "skipped": sum(1 for r in good if r["resumed"]),
            "failed": failed, "analysis": analysis, "seconds": round(time.time() - t0, 3)}
