"""Phase 1 throughput, ours and the bounds it is built on. Prints one JSON object of raw timings.

    python benchmarks/bench_phase1.py --part stages [--reps 3]                  # under taskset -c 0
    python benchmarks/bench_phase1.py --part phase1 --chain matched|full [--reps 1]  # under taskset -c 0
    python benchmarks/bench_phase1.py --part dask   [--reps 3]                  # sets its own affinity

``stages`` (one core, everything in this process except the extraction sandbox child; the figures
compared with each other are run in turn, A B A B, so they see the same load):
  * reading: FastWARC iteration alone and warcio alone (bounds/peers) vs our reader (``read_input``);
  * extraction: resiliparse alone (decode + ``extract_plain_text``, the bound) vs our ``extract``
    stage without and with the sandbox child;
  * language ID: fastText ``predict`` alone vs our ``langid`` stage;
  * every other registered stage (rule families, PII, signatures, safety) alone on the same
    English texts; writes those texts to ``work/texts.jsonl`` for the datatrove peer;
``phase1``: the whole phase 1, ``run_file_task`` on the file, with the chain matched to datatrove's
FineWeb pipeline or the main manifest's chain (run.py alternates these runs with datatrove's).
``ratio`` (pin it: taskset -c 0): the main manifest's chain through ``run_file_task`` vs the bound
(FastWARC + resiliparse extraction), CPU seconds of this process plus the sandbox child, taken in
turn, on realpages-1171 and a synthetic CC-sized file (``--cc-records``, default 40,000 records);
prints the ratio per repetition, its median and min-max. Also timed in the same turns: the
chain's model calls alone (lid.176, the quality, toxicity and NSFW fastText models, the profanity
model, each ``predict`` on inputs prepared untimed), so ``floor_ratio`` = bound / (bound + models)
is the most any implementation of this chain with these models can reach on the input, and
``ours_share_of_floor`` = (bound + models) / ours. Also in the same turns, extraction alone on the
file's pages, resiliparse's (``bound_extract``) and the ``extract`` stage's in this process
(``ours_extract``): ``floor_ratio_with_our_extraction`` = bound / (bound - bound_extract +
ours_extract + models), the cap with the stage's extraction rules and everything else of ours free.
``dask``: the full chain through a ``LocalCluster`` on the 4-file split, with 1 worker (this
process and its children pinned to core 0) and 2 workers (cores 0-1); the cluster is started once
and warmed by untimed runs of one file per worker, so the figure is throughput, and its start-up time is reported aside.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
from make_input import WORK, build
from timing import interleave, repeat

BATCH = 256
MATCHED_CHAIN = [  # datatrove's FineWeb-style filters, same thresholds
    {"extract": {"main_content": True}},
    {"langid": {"languages": ["en"], "min_score": 0.65}},
    {"gopher_repetition": {}},
    {"gopher_quality": {}},
    {"c4": {"filter_no_terminal_punct": False, "filter_bad_words": False}},
    {"fineweb": {}},
]
MANIFEST = Path(__file__).resolve().parent.parent / "manifests" / "cc-2026.yaml"


def main_chain() -> list[dict]:
    """The main manifest's phase-1 chain as run (``effective_stages``: its stages + dedup_signatures)."""
    from datapipe.manifest.load import load_manifest

    return load_manifest(MANIFEST, {"inputs.paths": ["x.warc.gz"], "inputs.crawl": None}).effective_stages()


def _chain_stages(chain):
    from datapipe.stage import registry

    known = registry()
    return [c for c in chain if next(iter(c)) in known], [next(iter(c)) for c in chain if next(iter(c)) not in known]


# ---------------------------------------------------------------- reading

def read_fastwarc(path: str) -> int:
    from fastwarc.warc import ArchiveIterator

    n = 0
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, parse_http=True):
            rec.reader.read()
            n += 1
    return n


def read_warcio(path: str) -> int:
    from warcio.archiveiterator import ArchiveIterator

    n = 0
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            rec.content_stream().read()
            n += 1
    return n


def read_ours(path: str) -> list:
    from datapipe.io.readers import read_input

    return list(read_input(path))


# ---------------------------------------------------------------- stages on tables

def _in_schema(chain):
    from datapipe.engine.task import build_chain
    from datapipe.formats.documents import PAYLOAD_FIELD, document_schema

    return pa.schema(list(document_schema(build_chain(chain))) + [PAYLOAD_FIELD])


def _batches(table: pa.Table) -> list[pa.Table]:
    return [table.slice(i, BATCH) for i in range(0, table.num_rows, BATCH)]


def _stage(name: str, cfg: dict | None = None):
    from datapipe.engine.task import build_chain

    return build_chain([{name: cfg or {}}])[0]


def run_stage(stage, batches: list[pa.Table]) -> list[pa.Table]:
    return [stage(b) for b in batches]


def extract_bound(htmls: list[str]) -> None:
    # The floor: main-content extraction of already decoded HTML, nothing else.
    from resiliparse.extract.html2text import extract_plain_text

    for html in htmls:
        extract_plain_text(html, main_content=True)


def extract_detect(docs: list[bytes]) -> None:
    # Resiliparse's own path from bytes: charset detection + decoding + extraction.
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    for payload in docs:
        extract_plain_text(bytes_to_str(payload, detect_encoding(payload)), main_content=True)


def langid_bound(model, texts: list[str]) -> None:
    model.predict([t.replace("\n", " ") for t in texts], k=1)


# ---------------------------------------------------------------- whole phase 1

def phase1_once(path: str, chain: list[dict], read_output=None) -> dict:
    """``run_file_task`` of ``chain`` on ``path`` into a scratch folder; ``read_output(folder)``, if
    given, is called before the folder is removed. Returns the task record."""
    from datapipe.engine.task import run_file_task
    from datapipe.engine.task_plan import TaskSpec, chain_fingerprint, task_id_for

    out = tempfile.mkdtemp(dir=WORK)
    try:
        spec = TaskSpec(task_id_for(path), path, out, chain, chain_fingerprint(chain), batch_size=BATCH)
        rec = run_file_task(spec)
        if read_output is not None:
            read_output(Path(out))
        return rec
    finally:
        shutil.rmtree(out, ignore_errors=True)


def part_stages(reps: int) -> dict:
    """Reading, extraction, language ID and every other stage alone; compared figures interleaved."""
    meta = build()
    path = meta["single"]["path"]
    res: dict = {"input": meta["single"], "figures": {}, "notes": []}
    fig = res["figures"]

    items = read_ours(path)
    n = meta["single"]["records"]
    secs = interleave({"read.fastwarc": lambda: read_fastwarc(path), "read.warcio": lambda: read_warcio(path),
                       "read.ours": lambda: read_ours(path)}, reps)
    fig.update({k: {"seconds": v, "items": n} for k, v in secs.items()})

    from datapipe.stages.lib.charset import decode_html

    schema = _in_schema(MATCHED_CHAIN)
    rows = [it.row for it in items if it.status == "document"]
    batches = _batches(pa.Table.from_pylist(rows, schema=schema))
    docs = [r["payload"] for r in rows]
    htmls = [decode_html(r["payload"], r.get("charset"))[0] for r in rows]
    no_sb = _stage("extract", {"sandbox": False})
    sb = _stage("extract", {"sandbox": True})
    extracted = run_stage(sb, batches)
    secs = interleave({"extract.resiliparse": lambda: extract_bound(htmls),
                       "extract.resiliparse_detect": lambda: extract_detect(docs),
                       "extract.ours_no_sandbox": lambda: run_stage(no_sb, batches),
                       "extract.ours": lambda: run_stage(sb, batches)}, reps)
    fig.update({k: {"seconds": v, "items": len(docs)} for k, v in secs.items()})

    # Texts for everything downstream: what our extraction kept (non-empty), as the chain would see them.
    ext = pa.concat_tables(extracted)
    ext = ext.filter(pa.compute.is_null(ext.column("reject_reason")))
    ext = ext.drop_columns([c for c in ("reject_reason", "error_reason", "payload") if c in ext.column_names])
    texts = ext.column("text").to_pylist()
    lid = _stage("langid", {"languages": ["en"], "min_score": 0.65})
    ext_batches = _batches(ext)
    secs = interleave({"langid.fasttext": lambda: langid_bound(lid._model, texts),
                       "langid.ours": lambda: run_stage(lid, ext_batches)}, reps)
    fig.update({k: {"seconds": v, "items": len(texts)} for k, v in secs.items()})
    tagged = pa.concat_tables(run_stage(lid, ext_batches))
    en_mask = pa.compute.is_null(tagged.column("reject_reason"))
    en = tagged.filter(en_mask).drop_columns(["reject_reason"])
    with open(WORK / "texts.jsonl", "w") as fh:
        for t, keep in zip(texts, en_mask.to_pylist()):
            fh.write(json.dumps({"text": t, "en": bool(keep)}) + "\n")
    res["texts"] = {"extracted": len(texts), "english": en.num_rows}

    from datapipe.stage import registry

    en_batches = _batches(en)
    for name in registry():
        if name in ("extract", "langid"):
            continue
        try:
            st = _stage(name)
            run_stage(st, en_batches[:1])
        except Exception as e:  # noqa: BLE001 - a stage without its model is skipped, with the reason
            res["notes"].append(f"stage {name} skipped: {type(e).__name__}: {str(e)[:160]}")
            continue
        fig[f"stage.{name}"] = {"seconds": repeat(lambda: run_stage(st, en_batches), reps), "items": en.num_rows}
    return res


def part_phase1(reps: int, chain_name: str) -> dict:
    """The whole phase 1 on the file, in this process; warmed up on one quarter of it."""
    meta = build()
    path = meta["single"]["path"]
    chain, missing = _chain_stages(MATCHED_CHAIN if chain_name == "matched" else main_chain())
    phase1_once(meta["shards"][0]["path"], chain)  # models, word lists, sandbox child
    recs = []
    secs = repeat(lambda: recs.append(phase1_once(path, chain)), reps, warmup=0)
    stages = recs[-1]["ledger"]["stages"]
    fig = {"seconds": secs, "items": meta["single"]["records"], "chain": [next(iter(c)) for c in chain],
           "kept": stages[list(stages)[-1]]["kept"],
           "stage_seconds": {k: round(v.get("seconds", 0.0), 4) for k, v in stages.items()}}
    return {"input": meta["single"], "figures": {f"phase1.ours_{chain_name}": fig},
            "notes": [f"stage {m} not registered: left out of the phase-1 chain" for m in missing]}


# ---------------------------------------------------------------- Dask

def part_dask(reps: int) -> dict:
    import time

    from datapipe.engine.runner import dask_client
    from datapipe.engine.task import run_file_task
    from datapipe.engine.task_plan import TaskSpec, chain_fingerprint, task_id_for
    from datapipe.manifest.load import Manifest

    meta = build()
    files = [f["path"] for f in meta["shards"]]
    records = sum(f["records"] for f in meta["shards"])
    chain, _ = _chain_stages(main_chain())
    res: dict = {"input": {"files": len(files), "records": records}, "figures": {}}
    all_cpus = os.sched_getaffinity(0)
    for workers, cpus in ((1, {min(all_cpus)}), (2, all_cpus)):
        if workers > len(all_cpus):
            continue
        os.sched_setaffinity(0, cpus)  # worker processes inherit it
        out = tempfile.mkdtemp(dir=WORK)
        m = Manifest(inputs={"paths": files}, output=out, stages=chain,
                     cluster={"workers": workers, "dashboard_address": "127.0.0.1:0"})
        t0 = time.perf_counter()
        with dask_client(m) as client:
            client.wait_for_workers(workers)
            start = time.perf_counter() - t0

            def once():
                run_out = tempfile.mkdtemp(dir=out)
                specs = [TaskSpec(task_id_for(p), p, run_out, chain, chain_fingerprint(chain), batch_size=BATCH)
                         for p in files]
                client.gather([client.submit(run_file_task, s, pure=False) for s in specs])

            for p in files[:workers]:  # warm-up: each worker loads its models once, as in a real run
                client.submit(run_file_task, TaskSpec(task_id_for(p), p, tempfile.mkdtemp(dir=out), chain,
                                                      chain_fingerprint(chain), batch_size=BATCH), pure=False).result()
            secs = repeat(once, reps, warmup=0)
        shutil.rmtree(out, ignore_errors=True)
        res["figures"][f"phase1.dask_{workers}w"] = {"seconds": secs, "items": records, "cluster_start_s": round(start, 2),
                                                     "cpus": sorted(cpus), "chain": [next(iter(c)) for c in chain]}
    os.sched_setaffinity(0, all_cpus)
    return res


# ---------------------------------------------------------------- ratio to the bound, CPU seconds

def bound_once(path: str) -> int:
    """The bound: FastWARC read + HTTP parse, resiliparse charset detection, decoding and
    ``extract_plain_text(main_content=True)`` of every HTML response, nothing else."""
    from fastwarc.warc import ArchiveIterator, WarcRecordType
    from resiliparse.extract.html2text import extract_plain_text
    from resiliparse.parse.encoding import bytes_to_str, detect_encoding

    n = 0
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, record_types=WarcRecordType.response, parse_http=True):
            body = rec.reader.read()
            extract_plain_text(bytes_to_str(body, detect_encoding(body)), main_content=True)
            n += 1
    return n


def model_inputs(path: str, chain: list[dict], chain_stages: list) -> dict:
    """What the chain's models are fed, prepared untimed from one run of the chain on ``path``:
    per model stage (``langid``; ``quality_classifier``, ``toxicity``, ``nsfw``, ``profanity``
    where in the chain) the documents that reach it (kept, or rejected there or later) in its
    ``languages``, each text as stored (after the line filters that edit it: never longer than
    what the stage saw), turned into the inputs of the model's own call (lines; sentence spans by
    the stages' splitter, ``spans_of``). So the floor never counts more model work than the chain
    does."""
    import re

    import pyarrow.parquet as pq

    from datapipe.classifiers.model import preprocess

    cols, shards = ["text", "lang"], {}

    def read(out: Path) -> None:
        shards["kept"] = pa.concat_tables([pq.read_table(f, columns=cols) for f in out.glob("_filtered/*.parquet")])
        shards["rej"] = pa.concat_tables([pq.read_table(f, columns=cols + ["reject_stage"])
                                          for f in out.glob("rejected/*.parquet")])

    phase1_once(path, chain, read)
    kept, rej = shards["kept"], shards["rej"]
    order = [st.name for st in chain_stages]
    rej_at = [order.index(x) if x in order else -1 for x in rej.column("reject_stage").to_pylist()]
    rows = list(zip(kept.column("text").to_pylist(), kept.column("lang").to_pylist(), [len(order)] * kept.num_rows))
    rows += list(zip(rej.column("text").to_pylist(), rej.column("lang").to_pylist(), rej_at))

    def reaching(name: str, languages) -> list[tuple[str, str]]:
        i = order.index(name)
        return [(t, lg) for t, lg, at in rows if at >= i and t and (not languages or lg in languages)]

    by = {st.name: st for st in chain_stages}
    lid = by["langid"]
    nl = re.compile(r"\s+")
    lid_lines = [x for x in (nl.sub(" ", t[: lid.config.max_chars]).strip() for t, _ in reaching("langid", None)) if x]
    inp: dict = {"langid": (lid._model, lid_lines, 1)}
    if "quality_classifier" in by:
        st = by["quality_classifier"]
        clf = st._clf
        inp["quality_classifier"] = (clf._model, [preprocess(t, clf.preprocessing, clf.max_tokens)
                                                  for t, _ in reaching(st.name, st.config.languages)], -1)
    for name in ("toxicity", "nsfw", "profanity"):
        if name in by:
            st = by[name]
            docs = reaching(name, st.config.languages)
            spans, _, _, cores = st.spans_of([t for t, _ in docs], [lg for _, lg in docs], with_cores=True)
            units = spans + [k for k in cores if k is not None]
            if name == "profanity":
                inp[name] = (st._predict, units, None)
            else:
                clf = st._clf
                inp[name] = (clf._model, [preprocess(u, clf.preprocessing, clf.max_tokens) for u in units], -1)
    return inp


def models_once(inp: dict) -> None:
    """The library calls alone: each model's predict on its prepared inputs, nothing else."""
    for key, val in inp.items():
        if not isinstance(val, tuple):
            continue
        model, lines, k = val
        if k is None:
            model(lines)
        else:
            model.predict(lines, k=k)


def _child_cpu(pid: int) -> float:
    """User + system CPU seconds of a live child process (Linux /proc)."""
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf("SC_CLK_TCK")


def part_ratio(reps: int, inputs: list[str]) -> dict:
    """Per input: the main chain through ``run_file_task`` vs the bound, CPU seconds, A B A B.

    Ours = this process + the extraction sandbox child (read from /proc before and after each run;
    a run in which the child restarted is reported, its lost child time would flatter us). The
    ratio per repetition is bound CPU / ours CPU: the share of the bound's per-core speed kept.
    """
    import statistics

    from datapipe.engine.task import build_chain

    chain = main_chain()
    res: dict = {"chain": [next(iter(c)) for c in chain], "inputs": {}}
    built = build_chain(chain)
    extract = next(st for st in built if st.name == "extract")
    for path in inputs:
        inp = model_inputs(path, chain, built)  # its run of the chain is the warm-up: models, lists, sandbox child
        bound_once(path)
        models_once(inp)
        # Extraction alone on the same pages, the bound's (resiliparse from bytes) and the stage's
        # in this process (its rules, no sandbox child), to see what the extraction rules cost.
        rows = [it.row for it in read_ours(path) if it.status == "document"]
        pages = [r["payload"] for r in rows]
        ext_cfg = next(dict(c["extract"] or {}) for c in chain if "extract" in c)
        ext_in = _batches(pa.Table.from_pylist(rows, schema=_in_schema([{"extract": ext_cfg}])))
        ext_local = _stage("extract", {**ext_cfg, "sandbox": False})
        run_stage(ext_local, ext_in)
        cpu: dict[str, list[float]] = {"bound": [], "models": [], "ours": [], "bound_extract": [], "ours_extract": []}
        notes = []
        for _ in range(reps):
            t0 = time.process_time()
            n = bound_once(path)
            cpu["bound"].append(time.process_time() - t0)
            t0 = time.process_time()
            models_once(inp)
            cpu["models"].append(time.process_time() - t0)
            t0 = time.process_time()
            extract_detect(pages)
            cpu["bound_extract"].append(time.process_time() - t0)
            t0 = time.process_time()
            run_stage(ext_local, ext_in)
            cpu["ours_extract"].append(time.process_time() - t0)
            proc = getattr(getattr(extract, "_sandbox", None), "proc", None)
            c0 = _child_cpu(proc.pid) if proc else 0.0
            t0 = time.process_time()
            rec = phase1_once(path, chain)
            main_s = time.process_time() - t0
            proc2 = getattr(getattr(extract, "_sandbox", None), "proc", None)
            if proc and proc2 and proc2.pid == proc.pid:
                child_s = _child_cpu(proc.pid) - c0
            else:
                child_s, _ = 0.0, notes.append("sandbox child restarted during a run: its CPU time is missing")
            cpu["ours"].append(main_s + child_s)
        ratios = [b / o for b, o in zip(cpu["bound"], cpu["ours"])]
        # The floor: the bound plus the chain's model calls alone; no implementation of this chain
        # with these models does less, so bound / floor caps the ratio on this input.
        floors = [b / (b + m) for b, m in zip(cpu["bound"], cpu["models"])]
        of_floor = [(b + m) / o for b, m, o in zip(cpu["bound"], cpu["models"], cpu["ours"])]
        # The same floor with the stage's extraction in place of resiliparse's (its rules kept,
        # everything else of ours free): the cap once the extraction is what the stage does.
        floors_x = [b / (b - be + oe + m) for b, m, be, oe in
                    zip(cpu["bound"], cpu["models"], cpu["bound_extract"], cpu["ours_extract"])]
        stages = rec["ledger"]["stages"]

        def spread(xs):
            return {"runs": [round(x, 3) for x in xs], "median": round(statistics.median(xs), 3),
                    "min": round(min(xs), 3), "max": round(max(xs), 3)}

        res["inputs"][Path(path).name] = {
            "records": stages["read"]["in"], "documents": n, "kept": stages[list(stages)[-1]]["kept"],
            "cpu_seconds": {k: [round(x, 3) for x in v] for k, v in cpu.items()},
            "ratio_runs": [round(r, 3) for r in ratios], "ratio": round(statistics.median(ratios), 3),
            "ratio_min": round(min(ratios), 3), "ratio_max": round(max(ratios), 3),
            "floor_ratio": spread(floors), "ours_share_of_floor": spread(of_floor),
            "floor_ratio_with_our_extraction": spread(floors_x),
            "model_inputs": {k: (len(v[1]) if isinstance(v, tuple) else v) for k, v in inp.items()},
            "stage_seconds": {k: round(v.get("seconds", 0.0), 3) for k, v in stages.items()}, "notes": notes}
    return res


def cc_sized(records: int) -> str:
    """A synthetic Common-Crawl-sized file: ``records`` records cycled from the real pages, each a gzip
    member with a distinct WARC-Record-ID (built once under benchmarks/work/)."""
    import bench_scaling
    from make_input import source_path

    dest = WORK / f"cc-sized-{records}"
    out = dest / "rp-000.warc.gz"
    if not out.exists():
        bench_scaling.build_inputs(source_path(), 1, records, dest, 1)
    return str(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--part", choices=["stages", "phase1", "dask", "ratio"], required=True)
    ap.add_argument("--cc-records", type=int, default=40_000,
                    help="for --part ratio: records of the synthetic CC-sized file (0 = realpages only)")
    ap.add_argument("--chain", choices=["matched", "full"], default="full", help="for --part phase1")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    if a.part == "stages":
        res = part_stages(a.reps)
    elif a.part == "phase1":
        res = part_phase1(a.reps, a.chain)
    elif a.part == "ratio":
        inputs = [build()["single"]["path"]] + ([cc_sized(a.cc_records)] if a.cc_records else [])
        res = part_ratio(a.reps, inputs)
    else:
        res = part_dask(a.reps)
    json.dump(res, sys.stdout)
    print()


if __name__ == "__main__":
    main()
