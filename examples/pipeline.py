"""A whole pipeline from Python: stages, dedup and tokenize over WARC files, then read the outputs.

    python examples/pipeline.py [WARC ...] [--output runs/example] [--limit 40]

``datapipe.Pipeline`` validates the job as ``datapipe run`` validates a manifest, and ``run``
is ``datapipe run``: lineage, the output lock and the end-of-run check included. The run is
started under ``if __name__ == "__main__"`` because Dask's worker processes import this script
again.
"""
import argparse
import os
from pathlib import Path

import datapipe
from datapipe.stages import get

SHARED = Path(os.environ.get("DATAPIPE_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))


def build() -> datapipe.Pipeline:
    return datapipe.Pipeline(
        stages=[get("extract"), get("langid", min_score=0.5), "gopher_repetition", get("gopher_quality", min_words=30)],
        dedup={"minhash": {"threshold": 0.8}},
        tokenize={"tokenizer": "r50k_base"}, report=False)


def main(argv=None, client=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("inputs", nargs="*", default=[str(SHARED / "warc" / "dolma_wget_sample-0000.warc.gz")])
    ap.add_argument("--output", default="runs/example")
    ap.add_argument("--limit", type=int, default=40)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    p = build()
    r = p.run(a.inputs, a.output, limit=a.limit, workers=a.workers, client=client)
    print("totals:", r.ledger.totals())
    docs = r.documents(["id", "url", "text"])
    print(f"{docs.num_rows} documents kept; first: {docs.column('url')[0] if docs.num_rows else None}")
    Path(a.output, "job.yaml").write_text(p.to_yaml())          # the same job for `datapipe run`
    return r


if __name__ == "__main__":
    main()
