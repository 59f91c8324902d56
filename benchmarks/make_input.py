"""Build the benchmark inputs under benchmarks/work/ from ../shared/data/warc/realpages-1171.warc.gz.

    python benchmarks/make_input.py [--shards 4]

Writes (idempotent: rebuilt only when the source's sha256 or the shard count changed):

* ``realpages.warc.gz``      the source, copied byte for byte (1,171 real pages, 1 file);
* ``shards/part-NN.warc.gz`` the same records cut into N files at record boundaries, round robin,
  so the Dask runs have one task per file to spread over workers and the same records in total;
* ``inputs.json``            sha256, records and bytes of every file, for the results' ``input``.

Each record of the source is its own gzip member, so cutting the compressed bytes at the record
offsets FastWARC reports gives valid WARC files without recompressing.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

from datapipe.models import sha256_file

HERE = Path(__file__).resolve().parent
WORK = HERE / "work"


def source_path() -> Path:
    shared = Path(os.environ.get("DATAPIPE_SHARED_DATA", HERE.parent.parent / "shared" / "data"))
    return shared / "warc" / "realpages-1171.warc.gz"


sha256 = sha256_file  # one implementation: datapipe.models


def record_spans(path: Path) -> list[tuple[int, int]]:
    """(start, end) compressed byte span of every record."""
    from fastwarc.warc import ArchiveIterator

    starts = []
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh, parse_http=False, auto_decode="none"):
            starts.append(rec.stream_pos)
    ends = starts[1:] + [path.stat().st_size]
    return list(zip(starts, ends))


def build(shards: int = 4, work: Path = WORK) -> dict:
    src = source_path()
    meta_path = work / "inputs.json"
    digest = sha256(src)
    if meta_path.exists():
        meta = json.loads(meta_path.read_text())
        if meta.get("source_sha256") == digest and len(meta.get("shards", [])) == shards \
                and all(Path(f["path"]).exists() for f in [meta["single"], *meta["shards"]]):
            return meta
    work.mkdir(parents=True, exist_ok=True)
    single = work / "realpages.warc.gz"
    shutil.copyfile(src, single)
    spans = record_spans(single)
    shard_dir = work / "shards"
    shutil.rmtree(shard_dir, ignore_errors=True)
    shard_dir.mkdir()
    data = single.read_bytes()
    files = []
    for k in range(shards):
        mine = spans[k::shards]
        p = shard_dir / f"part-{k:02d}.warc.gz"
        with open(p, "wb") as out:
            for a, b in mine:
                out.write(data[a:b])
        files.append({"path": str(p), "records": len(mine), "bytes": p.stat().st_size, "sha256": sha256(p)})
    meta = {"source": str(src), "source_sha256": digest,
            "single": {"path": str(single), "records": len(spans), "bytes": single.stat().st_size, "sha256": digest},
            "shards": files}
    meta_path.write_text(json.dumps(meta, indent=2))
    return meta


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", type=int, default=4)
    a = ap.parse_args()
    print(json.dumps(build(a.shards), indent=2))


if __name__ == "__main__":
    main()
