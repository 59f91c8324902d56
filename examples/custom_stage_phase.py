"""Run a manifest that uses a stage and a phase from your own package (examples/my_datapipe_plugin).

    python examples/custom_stage_phase.py [--output runs/plugin] [--limit 40]

The package is put on ``sys.path`` and imported at the top of this script, which registers its
stage (``shouting``) and phase (``doc_lengths``). Dask's local worker processes import this
script again, so they register them too. With ``pip install -e examples/my_datapipe_plugin``,
the ``sys.path`` line is not needed.
"""
import argparse
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "my_datapipe_plugin"))

import my_datapipe_plugin  # noqa: F401  (registers the stage and the phase)

import datapipe

SHARED = Path(os.environ.get("DATAPIPE_SHARED_DATA", HERE.parents[1] / "shared" / "data"))
JOB = {
    "name": "plugin-example",
    "stages": [{"extract": {}}, {"langid": {"min_score": 0.5}}, {"shouting": {"max_upper_frac": 0.6}}],
    "dedup": {"minhash": {"threshold": 0.8}},
    "doc_lengths": {"edges": [0, 1000, 5000]},
}


def main(argv=None, client=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--input", default=str(SHARED / "warc" / "dolma_wget_sample-0000.warc.gz"))
    ap.add_argument("--output", default="runs/plugin")
    ap.add_argument("--limit", type=int, default=40)
    a = ap.parse_args(argv)
    r = datapipe.Pipeline(JOB, report=False).run([a.input], a.output, limit=a.limit, workers=2, client=client)
    shouting = r.ledger.stage("shouting").to_dict()
    hist = json.loads(Path(a.output, "doc_lengths", "histogram.json").read_text())
    print("shouting stage:", shouting)
    print("document lengths:", hist)
    return r, hist


if __name__ == "__main__":
    main()
