"""Drive an ablation: pools -> eval sets -> one training set and one proxy run per mixture.

Layout under the ablation's output directory::

    eval/<set>/{shard-00000.parquet,index.json}   held-out sets (per domain + extra files)
    eval/overlap.json                             held-out texts vs training documents
    mixtures/<mixture_id>/train/                  the mixture's training set (token shards)
    mixtures/<mixture_id>/seed-<s>/metrics.json   one proxy run's record (its presence = done)
    results.parquet, results.csv, ranking.md, loss_vs_weight.png, report.html, recommended_mix.yaml,
    summary.json (duplicates, flags, noise floor, seed-to-seed Spearman, decision)

Before training: held-out texts are matched against the training pool (``overlap.check``:
reported, or refused with ``heldout.overlap: refuse``), held-out sets too small to score are
refused (``checks.check_eval_sets``) and candidates with identical training sets are trained once
(``checks.effective_mixtures``).
Resume: a run whose ``metrics.json`` carries the current ``key`` (manifest training fingerprint)
is not retrained. Proxy runs go to Dask (one task each) when the manifest's cluster has a
scheduler or more than one worker; the output directory must then be visible to all workers
(progress is read back from each run's ``progress.json``).
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

from datapipe.ablate.analysis import analyse
from datapipe.ablate.checks import check_eval_sets, effective_mixtures
from datapipe.ablate.data import (
    load_pool,
    materialize,
    natural_shares,
    vocab_map,
    write_eval_sets,
)
from datapipe.ablate.manifest import AblationManifest, Proxy
from datapipe.ablate.mixtures import candidates, mixture_id
from datapipe.ablate.overlap import check as check_overlap
from datapipe.ablate.train import train_builtin, train_command
from datapipe.engine.runner import local_security


def _write_json(obj, path: Path) -> None:
    tmp = path.with_name(f"{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(obj, indent=2, sort_keys=True))
    os.replace(tmp, path)


class _ProgressFile:
    """``f(step, steps, loss)`` that writes ``progress.json`` at most once a second (Dask workers)."""

    def __init__(self, path: Path):
        self.path, self.last = path, 0.0

    def __call__(self, step: int, steps: int, loss) -> None:
        now = time.time()
        if now - self.last >= 1.0 or step == steps:
            self.last = now
            _write_json({"step": step, "steps": steps}, self.path)


def run_one(spec: dict, progress=None) -> dict:
    """One proxy run (a Dask task): train, evaluate, write ``metrics.json``; return the record.

    ``progress``: ``f(step, steps, loss)``; None: write ``progress.json`` in the run's folder.
    A failure is returned as a record with ``error`` naming mixture and seed (and not written,
    so a rerun retries it).
    """

    out = Path(spec["dir"])
    out.mkdir(parents=True, exist_ok=True)
    try:
        if spec["trainer_cmd"]:
            fields = {"train_index": spec["train_index"], "eval_dir": spec["eval_dir"], "out": out,
                      "budget_tokens": spec["budget_tokens"], "seq_len": spec["proxy"]["seq_len"],
                      "seed": spec["seed"], "device": spec["device"], "mixture_id": spec["mixture_id"]}
            m = train_command(spec["trainer_cmd"], fields, out, spec["eval_names"], spec["timeout_s"])
        else:
            m = train_builtin(Path(spec["train_index"]), Path(spec["eval_dir"]), spec["eval_names"],
                              Proxy(**spec["proxy"]), spec["budget_tokens"], spec["seed"], spec["device"],
                              spec["threads"], spec.get("vocab_map"),
                              progress or _ProgressFile(out / "progress.json"))
    except Exception as e:  # noqa: BLE001 - one bad mixture must not lose the others' results
        return {"mixture_id": spec["mixture_id"], "seed": spec["seed"],
                "error": f"mixture {spec['mixture_id']} seed {spec['seed']}: {type(e).__name__}: {e}"}
    rec = {"mixture_id": spec["mixture_id"], "seed": spec["seed"], "key": spec["key"], **m}
    _write_json(rec, out / "metrics.json")
    return rec


#: Dask settings for the local proxy workers. Dask's nanny starts workers with
#: MALLOC_TRIM_THRESHOLD_=65536, which also pins glibc's mmap threshold: every tensor over 128 KiB
#: of every training step is then mmap'd, zero-filled and unmapped (measured on the shipped CPU
#: proxy: 1.45M minor page faults and 4 s of system time per run instead of 0.05M and 0.2 s,
#: +70% CPU). The statistical profiler samples every task thread each 10 ms; a proxy run is one
#: long CPU-bound task, so its profile is of no use and its sampling is pure cost.
PROXY_WORKER_CONFIG = {"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None,
                       "distributed.worker.profile.enabled": False}


def _client(m: AblationManifest):
    import dask
    from distributed import Client, LocalCluster


    if m.cluster.scheduler:
        return Client(m.cluster.scheduler), None
    with dask.config.set(PROXY_WORKER_CONFIG):
        cluster = LocalCluster(n_workers=m.cluster.workers, threads_per_worker=m.cluster.threads_per_worker,
                               processes=True, dashboard_address="127.0.0.1:0", host="127.0.0.1",
                               security=local_security())  # TLS: no other local process can use it
    return Client(cluster), cluster


class _Bars:
    """Two tqdm bars on stderr: proxy runs (mixture x seed) and training steps; no-ops when off."""

    def __init__(self, on: bool, runs: int):
        self.on = on
        if on:
            import sys

            from tqdm import tqdm

            tty = sys.stderr.isatty()  # a log file gets an update every 10 s, not every 0.5 s
            self.runs = tqdm(total=runs, desc="proxy runs", unit="run", position=0, file=sys.stderr,
                             dynamic_ncols=True, mininterval=0.5 if tty else 10)
            self.steps = tqdm(total=0, desc="steps", unit="step", position=1, file=sys.stderr,
                              dynamic_ncols=True, mininterval=0.5 if tty else 10)

    def start(self, label: str, steps: int | None) -> None:
        if self.on:
            self.runs.set_description(f"proxy runs ({label})")
            self.steps.reset(total=steps)

    def step(self, step: int, steps: int, loss) -> None:
        if self.on:
            self.steps.n = step
            if loss is not None:
                self.steps.set_postfix(loss=f"{loss:.3f}", refresh=False)
            self.steps.refresh() if step == steps else self.steps.update(0)

    def done(self, line: str) -> None:
        if self.on:
            import sys

            self.runs.update(1)
            self.runs.write(line, file=sys.stderr)  # tqdm.write defaults to stdout: that is --json's

    def close(self) -> None:
        if self.on:
            self.steps.close()
            self.runs.close()


def _steps_of(spec: dict) -> int | None:
    if spec["trainer_cmd"]:
        return None
    p = spec["proxy"]
    return max(1, -(-spec["budget_tokens"] // (p["batch_size"] * p["seq_len"])))


def _execute(m: AblationManifest, specs: list[dict], log, progress: bool = False) -> list[dict]:
    if not specs:
        return []
    bars = _Bars(progress, len(specs))
    say = bars.done if progress else log
    try:
        if not m.cluster.scheduler and m.cluster.workers == 1:
            out = []
            for i, s in enumerate(specs):
                bars.start(f"{s['mixture_id']} seed {s['seed']}", _steps_of(s))
                out.append(run_one(s, progress=bars.step))
                say(f"  [{i + 1}/{len(specs)}] {s['mixture_id']} seed {s['seed']} {_brief(out[-1])}")
            return out
        return _execute_dask(m, specs, bars, say)
    finally:
        bars.close()


def _execute_dask(m: AblationManifest, specs: list[dict], bars: _Bars, say) -> list[dict]:
    from distributed import wait

    client, cluster = _client(m)
    try:
        res = {"GPU": 1} if m.cluster.gpu_resources else None
        futs = {client.submit(run_one, s, key=f"proxy-{s['mixture_id']}-seed{s['seed']}", pure=False,
                              resources=res): s for s in specs}
        total = sum(_steps_of(s) or 0 for s in specs)
        bars.start(f"{m.cluster.workers if not m.cluster.scheduler else 'cluster'} at a time", total or None)
        out, pending = [], set(futs)
        while pending:
            try:
                wait(list(pending), timeout=1.0, return_when="FIRST_COMPLETED")
            except TimeoutError:  # distributed.wait raises on timeout: none finished this second
                pass
            done = {f for f in pending if f.done()}
            pending -= done
            for fut in done:
                out.append(fut.result())
                s = futs[fut]
                say(f"  [{len(out)}/{len(specs)}] {s['mixture_id']} seed {s['seed']} {_brief(out[-1])}")
            if total:
                finished = sum(_steps_of(futs[f]) for f in futs if f.done())
                running = 0
                for f in pending:
                    pf = Path(futs[f]["dir"]) / "progress.json"
                    try:
                        running += json.loads(pf.read_text())["step"] if pf.is_file() else 0
                    except (OSError, ValueError, KeyError):
                        pass  # being replaced: read next time
                bars.step(min(total, finished + running), total, None)
        return out
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


def _brief(rec: dict) -> str:
    if "error" in rec:
        return f"FAILED {rec['error'][:300]}"
    losses = ", ".join(f"{k} {v['loss']:.3f}" for k, v in rec["eval"].items())
    return f"{rec.get('wall_s', 0):.1f} s; loss {losses}"


def _combine(mid: str, runs: list[dict], base: dict) -> dict:
    """One record per mixture from its per-seed runs: ``eval`` = the mean loss over seeds."""
    runs = sorted(runs, key=lambda r: r["seed"])
    names = list(runs[0]["eval"])
    ev = {}
    for n in names:
        mean = sum(r["eval"][n]["loss"] for r in runs) / len(runs)
        ev[n] = {"loss": mean, "ppl": math.exp(mean) if math.isfinite(mean) and mean < 700 else float("inf"),
                 "tokens": runs[0]["eval"][n].get("tokens")}
    first = runs[0]
    return base | {"mixture_id": mid, "runs": runs, "eval": ev, "steps": first.get("steps"),
                   "tokens_trained": first.get("tokens_trained"), "params": first.get("params"),
                   "device": first.get("device"), "train_loss": _mean([r.get("train_loss") for r in runs]),
                   "wall_s": round(sum(r.get("wall_s") or 0 for r in runs), 3),
                   "resumed": all(r.get("resumed") for r in runs)}


def _mean(v: list) -> float | None:
    v = [x for x in v if isinstance(x, (int, float))]
    return sum(v) / len(v) if v else None


def _other_domains(pool, domains: list[str]) -> dict[str, int]:
    per = (pool.index.get("tokens_per_domain") or {})
    return {d: int(n) for d, n in sorted(per.items()) if d not in domains}


def run_ablation(m: AblationManifest, log=print, progress: bool = False) -> dict:
    """Run every candidate mixture not yet finished (once per seed), then the analysis.

    Returns ``{"output", "domains", "eval_sets", "mixtures" (records, candidate order),
    "duplicates", "flags", "trained", "skipped", "failed", "analysis"}``. ``progress``: tqdm bars
    on stderr. Raises RunNotReady / ValueError for a bad run, manifest or held-out set.
    """

    t0 = time.time()
    out = Path(m.out_dir())
    pool = load_pool(m.run, m.tokens, m.domains, m.heldout.fraction, m.heldout.max_tokens, m.seed)
    domains = sorted(pool.train)
    mixes = candidates(m.mixtures, domains, natural_shares(pool), m.seed)
    key = m.train_fingerprint(pool.index)  # the run's tokens too: re-tokenized, its proxies train again
    left = _other_domains(pool, domains)
    log(f"ablation {m.name}: {len(mixes)} candidate mixtures over {domains}, seeds {m.seeds}; pool from "
        f"{pool.source}; training tokens {pool.available()}"
        + (f"; not in this ablation: {left}" if left else ""))
    overlap = check_overlap(pool, m, out, log)  # refuses before anything is trained
    eval_dir = out / "eval"
    eval_dir.mkdir(parents=True, exist_ok=True)
    done_marker = eval_dir / "_done.json"
    if not done_marker.is_file() or json.loads(done_marker.read_text()).get("key") != key:
        sets = write_eval_sets(pool, m.heldout.extra, eval_dir)
        _write_json({"key": key, "sets": {k: v["total_tokens"] for k, v in sets.items()}}, done_marker)
    sizes = json.loads(done_marker.read_text())["sets"]
    check_eval_sets(sizes, max(m.heldout.min_tokens, m.proxy.seq_len + 1), pool)
    eval_names = list(sizes)
    eff = effective_mixtures(pool, mixes, m.budget_tokens, m.max_epochs, m.seed)
    for kept, dropped in sorted(eff["duplicates"].items()):
        log(f"  duplicate training sets: {', '.join(dropped)} = {kept} (the same documents once whole "
            "documents and max_epochs caps apply); trained once")
    for mid, notes in sorted(eff["flags"].items()):
        log(f"  {mid} flagged: domain too small for its weight: {'; '.join(notes)}")
    vmap_path = None
    if m.proxy.vocab_size and m.trainer.kind == "builtin":
        import numpy as np

        vmap_path = out / f"vocab_map-{key[:12]}.npy"
        if not vmap_path.is_file():
            np.save(vmap_path, vocab_map(pool, int(pool.index["tokenizer"]["vocab_size"]), m.proxy.vocab_size))
    runs, specs, base = {}, [], {}
    for seed in m.seeds:
        for w in eff["kept"]:
            mid = mixture_id(w)
            mdir = out / "mixtures" / mid
            sdir = mdir / f"seed-{seed}"
            mfile = sdir / "metrics.json"
            if mid not in base:
                base[mid] = {"weights": w, "flags": eff["flags"].get(mid, []),
                             "duplicates": eff["duplicates"].get(mid, [])}
            if mfile.is_file():
                rec = json.loads(mfile.read_text())
                if rec.get("key") == key:
                    runs.setdefault(mid, []).append(rec | {"resumed": True})
                    continue
            idx_path = mdir / "train" / "index.json"
            idx = json.loads(idx_path.read_text()) if idx_path.is_file() else None
            if idx is None or idx.get("key") != key:
                idx = materialize(pool, w, m.budget_tokens, m.max_epochs, m.seed, mdir / "train",
                                  eff["selections"][mid])
                idx["key"] = key
                _write_json(idx, idx_path)
            base[mid] |= {"achieved": idx["mixture"]["achieved"], "epochs": idx["mixture"]["epochs"]}
            specs.append({"mixture_id": mid, "dir": str(sdir), "train_index": str(idx_path),
                          "eval_dir": str(eval_dir), "eval_names": eval_names, "proxy": m.proxy.model_dump(),
                          "budget_tokens": m.budget_tokens, "seed": seed, "device": m.device, "threads": m.threads,
                          "trainer_cmd": m.trainer.command if m.trainer.kind == "command" else None,
                          "timeout_s": m.trainer.timeout_s, "key": key,
                          "vocab_map": str(vmap_path) if vmap_path else None})
    for mid in base:  # resumed mixtures: shares from their training set's index
        if "achieved" not in base[mid]:
            idx = json.loads((out / "mixtures" / mid / "train" / "index.json").read_text())
            base[mid] |= {"achieved": idx["mixture"]["achieved"], "epochs": idx["mixture"]["epochs"]}
    log(f"  {len(eff['kept'])} distinct mixtures x {len(m.seeds)} seeds: {sum(map(len, runs.values()))} runs "
        f"finished earlier (skipped), {len(specs)} to train")
    for rec in _execute(m, specs, log, progress):
        runs.setdefault(rec["mixture_id"], []).append(rec | {"resumed": False})
    ordered, failed = [], []
    for w in eff["kept"]:
        mid = mixture_id(w)
        errs = [r for r in runs.get(mid, []) if "error" in r]
        if errs:
            failed.append({"mixture_id": mid, "error": "; ".join(r["error"] for r in errs)})
        else:
            ordered.append(_combine(mid, runs[mid], base[mid]))
    analysis = (analyse(ordered, domains, eval_names, m, pool.index, out,
                        {"duplicates": eff["duplicates"], "flags": eff["flags"], "failed": failed,
                         "overlap": overlap})
                if ordered else None)
    return {"output": str(out), "domains": domains, "eval_sets": eval_names, "mixtures": ordered,
            "duplicates": eff["duplicates"], "flags": eff["flags"],
            "trained": sum(1 for r in ordered for x in r["runs"] if not x["resumed"]),
            "skipped": sum(1 for r in ordered for x in r["runs"] if x["resumed"]),
            "failed": failed, "analysis": analysis, "eval_overlap": overlap, "seconds": round(time.time() - t0, 3)}
