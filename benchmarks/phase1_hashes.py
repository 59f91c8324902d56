"""Phase-1 output fingerprints: sha256 of every shard and of the per-document decisions.

    python benchmarks/phase1_hashes.py                       # print the hashes (JSON)
    python benchmarks/phase1_hashes.py --save FILE           # store them
    python benchmarks/phase1_hashes.py --check FILE          # exit 1 when anything differs

Runs the main manifest's phase-1 chain (``manifests/cc-2026.yaml``, ``effective_stages()``, so
``dedup_signatures`` included) through ``run_file_task`` on each input WARC (default: the shared
``realpages-1171.warc.gz`` and ``dolma_wget_sample-0000.warc.gz``). Per input it hashes the three
shards byte for byte, and separately the decisions (id, reject/error stage and reason, in read order)
so a difference can be told apart from a mere encoding change. Used to keep optimisations of phase 1
output-neutral (issue 16: decisions, signals and shards byte-identical).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SHARED = Path(os.environ.get("DATAPIPE_SHARED_DATA", REPO.parent / "shared" / "data"))
DEFAULT_INPUTS = [SHARED / "warc" / "realpages-1171.warc.gz", SHARED / "warc" / "dolma_wget_sample-0000.warc.gz"]


def chain(manifest: Path) -> list[dict]:
    from datapipe.manifest.load import load_manifest

    return load_manifest(manifest, {"inputs.paths": ["x.warc.gz"], "inputs.crawl": None}).effective_stages()


def hashes_of(path: Path, stages: list[dict], batch_size: int = 256, part=None, split_bytes: int = 0) -> dict:
    """{kind: sha256 of the shard bytes, kind + '.decisions': sha256 of (id, stage, reason) rows}."""
    import pyarrow.parquet as pq

    from datapipe.engine.task import KINDS, run_file_task
    from datapipe.engine.task_plan import plan_specs

    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        specs = plan_specs([str(path)], tmp, stages, "x", batch_size=batch_size, split_bytes=split_bytes)
        for s in specs:
            run_file_task(s)
        for kind, folder in KINDS.items():
            files = sorted((Path(tmp) / folder).glob("*.parquet"))
            h = hashlib.sha256()
            d = hashlib.sha256()
            rows = 0
            for f in files:
                h.update(f.read_bytes())
                t = pq.read_table(f)
                rows += t.num_rows
                cols = [c for c in ("id", "reject_stage", "reject_reason", "error_stage", "error_reason")
                        if c in t.column_names]
                d.update(json.dumps(t.select(cols).to_pylist(), sort_keys=True).encode())
            out[kind] = {"rows": rows, "shards": h.hexdigest(), "decisions": d.hexdigest()}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("inputs", nargs="*", type=Path, default=DEFAULT_INPUTS)
    ap.add_argument("--manifest", type=Path, default=REPO / "manifests" / "cc-2026.yaml")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--save", type=Path)
    g.add_argument("--check", type=Path)
    a = ap.parse_args()
    stages = chain(a.manifest)
    res = {p.name: hashes_of(p, stages) for p in a.inputs}
    print(json.dumps(res, indent=2))
    if a.save:
        a.save.write_text(json.dumps(res, indent=2) + "\n")
    if a.check:
        want = json.loads(a.check.read_text())
        bad = [f"{name}/{kind}" for name, kinds in res.items() for kind, v in kinds.items()
               if want.get(name, {}).get(kind) != v]
        print("identical" if not bad else f"DIFFERENT: {', '.join(bad)}", file=sys.stderr)
        return 1 if bad else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
