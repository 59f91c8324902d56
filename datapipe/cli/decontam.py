"""``datapipe decontam index``: build the decontamination index from benchmark test items.

    datapipe decontam index --out models/decontam_index.npz            # evalsets + WikiText-2 test
    datapipe decontam index --out my.npz --no-evalsets --jsonl mine.jsonl --fields question,answer --name mine

Sources: the benchmarks of ``<shared data>/evalsets`` (``--evalsets DIR``; ``--benchmarks`` picks
some), WikiText-2 test (``--wikitext FILE``; ``--no-wikitext``) and any number of the user's JSONL
files, each with ``--fields`` (comma-separated, dotted paths into nested objects), ``--name`` (the
benchmark name in signals and reasons) and optionally ``--id-field``, given in the same order.
``--if-changed`` keeps an existing index whose sources fingerprint (bytes of every source file,
the settings and the matcher's code) is the current one: what ``make models`` runs.
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

from datapipe.cli.commands import COMMANDS
from datapipe.env import REPO_ROOT, shared_data
from datapipe.stages.lib import decontam_index as I
from datapipe.stages.lib import decontam_sources as S
from datapipe.stages.lib.decontam_sources import sources_fingerprint

#: Bump when the index's content changes for equal sources (the matcher's code is hashed too).
BUILDER_VERSION = 1
_CODE = ["decontam_text.py", "decontam_kernel.py", "decontam_sources.py", "decontam_index.py"]


def add_cli(sub) -> None:
    p = sub.add_parser("decontam", help=COMMANDS["decontam"].help,
                       description=__doc__.split("\n\n", 1)[1] if __doc__ else None)
    dsub = p.add_subparsers(dest="decontam_command", metavar="ACTION")
    q = dsub.add_parser("index", help="build the index of benchmark test items")
    q.add_argument("--out", required=True, help="index file to write (.npz)")
    q.add_argument("--evalsets", default=None, help="evalsets folder (default: <shared data>/evalsets)")
    q.add_argument("--no-evalsets", action="store_true", help="leave the evalsets benchmarks out")
    q.add_argument("--benchmarks", default=None, help="comma-separated evalsets benchmarks (default: all)")
    q.add_argument("--wikitext", default=None, help="WikiText test file (default: <shared data>/quality/wikitext-2_test.txt.gz)")
    q.add_argument("--no-wikitext", action="store_true", help="leave WikiText-2 test out")
    q.add_argument("--jsonl", action="append", default=[], help="a JSONL file of your own items (repeatable)")
    q.add_argument("--fields", action="append", default=[], help="its item fields, comma-separated (one per --jsonl)")
    q.add_argument("--name", action="append", default=[], help="its benchmark name (one per --jsonl)")
    q.add_argument("--id-field", action="append", default=None, help="its item id field (one per --jsonl; default: line number)")
    q.add_argument("-n", type=int, default=13, help="n-gram length in words (default 13)")
    q.add_argument("--min-words", type=int, default=8,
                   help="items shorter than n words match whole when they have at least this many (default 8)")
    q.add_argument("--if-changed", action="store_true", help="keep an existing index built from the same sources")
    q.set_defaults(func=cmd_index)
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])


def _err(msg: str) -> int:
    print(f"error: {msg}", file=sys.stderr)
    return 2


def collect(args) -> tuple[list, list[Path], dict]:
    """(items, source files, settings) of an ``index`` command line. Raises ValueError, FileNotFoundError."""

    items, files = [], []
    if not args.no_evalsets:
        root = Path(args.evalsets) if args.evalsets else shared_data() / "evalsets"
        names = [b for b in (args.benchmarks or "").split(",") if b] or None
        items += S.evalset_items(root, names)
        files += [root / S.BENCHMARKS[b][0] for b in S.BENCHMARKS if not names or b in names]
    if not args.no_wikitext:
        wt = Path(args.wikitext) if args.wikitext else shared_data() / S.WIKITEXT
        if not wt.is_file():
            raise FileNotFoundError(f"{wt}: WikiText test file not found (--wikitext FILE or --no-wikitext)")
        items += S.wikitext_items(wt)
        files.append(wt)
    if not (len(args.jsonl) == len(args.fields) == len(args.name)):
        raise ValueError("give --fields and --name once per --jsonl, in the same order")
    ids = args.id_field or [None] * len(args.jsonl)
    if len(ids) != len(args.jsonl):
        raise ValueError("give --id-field once per --jsonl (or not at all)")
    for f, fields, name, idf in zip(args.jsonl, args.fields, args.name, ids):
        items += S.jsonl_items(Path(f), [x for x in fields.split(",") if x], name, idf)
        files.append(Path(f))
    if not items:
        raise ValueError("no items: every source is switched off")
    if not 1 <= args.n <= 64 or args.min_words < 1:
        raise ValueError("-n must be in 1..64 and --min-words >= 1")
    code = [(REPO_ROOT / "stages" / "lib" / c) for c in _CODE]
    settings = {"n": args.n, "min_words": args.min_words, "builder": BUILDER_VERSION,
                "jsonl": [[n, fl, i] for n, fl, i in zip(args.name, args.fields, ids)],
                "benchmarks": args.benchmarks, "code": S.sources_fingerprint([c for c in code if c.is_file()], {})}
    return items, files, settings


def cmd_index(args) -> int:

    t0 = time.perf_counter()
    try:
        items, files, settings = collect(args)
        fp = sources_fingerprint(files, settings)
    except (ValueError, FileNotFoundError, KeyError) as e:
        return _err(str(e).strip("'\""))
    out = Path(args.out)
    if args.if_changed and out.is_file():
        try:
            if I.read_meta(out).get("sources_fingerprint") == fp:
                print(f"decontam index {out}: up to date (sources fingerprint {fp[:12]})")
                return 0
        except (OSError, ValueError, KeyError):
            pass  # unreadable: rebuilt below
    arrays = I.build_arrays(items, args.n, args.min_words)
    try:
        I.save(out, arrays, {"sources_fingerprint": fp, "sources": [str(f) for f in files]})
    except OSError as e:
        return _err(f"cannot write {out}: {e.strerror}")
    per = ", ".join(f"{b} {k:,}" for b, k in arrays["items_per_benchmark"].items())
    print(f"decontam index {out}: {len(items):,} items ({per}); {len(arrays['keys']):,} entries, n = {args.n}, "
          f"{len(arrays['short_keys']):,} short items matched whole, {arrays['skipped_short']:,} texts under {args.min_words} words "
          f"left out; {out.stat().st_size / 1e6:.1f} MB in {time.perf_counter() - t0:.1f} s")
    return 0
