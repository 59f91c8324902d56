"""Per-process slowdown of a full host, from run.sh contention's JSON: CPU seconds of the ratio
bench (bound and ours, min of its repetitions) as 16 pinned copies at once over those alone.

    python3 benchmarks/device/contention_summary.py OUT_DIR
"""
import glob
import json
import statistics as st
import sys


def cpu(path: str) -> tuple[float, float]:
    with open(path) as fh:
        r = json.load(fh)["inputs"]["realpages.warc.gz"]["cpu_seconds"]
    return min(r["bound"]), min(r["ours"])


def main(d: str) -> None:
    b1, o1 = cpu(f"{d}/alone.json")
    full = [cpu(f) for f in sorted(glob.glob(f"{d}/full_*.json"))]
    bf, of = [b for b, _ in full], [o for _, o in full]
    print(f"alone: bound {b1:.2f} ours {o1:.2f} CPU s")
    print(f"16 at once ({len(full)} copies): bound median {st.median(bf):.2f} ({min(bf):.2f}-{max(bf):.2f}), "
          f"ours median {st.median(of):.2f} ({min(of):.2f}-{max(of):.2f})")
    print(f"per-process slowdown on a full host: bound {st.median(bf) / b1:.3f}, ours {st.median(of) / o1:.3f}")


if __name__ == "__main__":
    main(sys.argv[1])
