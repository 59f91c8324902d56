"""``datapipe export-tokens INDEX --out OUT``: token shards -> Megatron-LM ``.bin/.idx`` or a NumPy memmap."""
from __future__ import annotations

import argparse

from datapipe.cli.commands import COMMANDS
from datapipe.cli.termfmt import os_error_line
from datapipe.loader.export import export_tokens


def add_cli(sub) -> None:
    p = sub.add_parser(
        "export-tokens", help=COMMANDS["export-tokens"].help,
        description="Read OUTPUT/tokens/index.json and write every document once, in shard order: "
                    "'megatron' writes OUT.bin + OUT.idx (one sequence per document; uint16 ids, or int32 "
                    "when the vocabulary needs more); 'memmap' writes OUT/train.bin (+ val.bin with "
                    "--val-fraction), meta.json and meta.pkl (vocab_size) as nanoGPT reads them. Files are "
                    "written under temporary names and renamed when complete.")
    p.add_argument("index", help="the run's token index, e.g. runs/sample/tokens/index.json (or the run "
                                 "folder, runs/sample, or its tokens/ folder)")
    p.add_argument("--out", metavar="OUT", help="output prefix (megatron) or folder (memmap); required")
    p.add_argument("old_out", nargs="?", metavar="OUT", help=argparse.SUPPRESS)  # the old positional: a hint
    p.add_argument("--format", choices=["megatron", "memmap"], default="megatron", help="default: megatron")
    p.add_argument("--val-fraction", type=float, default=0.0,
                   help="memmap only: fraction of documents (by seeded hash of id) written to val.bin (default 0)")
    p.set_defaults(func=cmd_export)


def cmd_export(args) -> int:
    from rich.console import Console
    from rich.markup import escape


    err = Console(stderr=True, soft_wrap=True)
    if args.old_out is not None or args.out is None:
        given = args.old_out or "OUT"
        err.print("[bold red]error:[/] " + escape(f"give the output as --out {given} (export-tokens takes --out, "
                                                  "as every other command does)"), highlight=False)
        return 2
    try:
        res = export_tokens(_index_path(args.index), args.out, args.format, val_fraction=args.val_fraction)
    except ValueError as e:
        err.print("[bold red]error:[/] " + escape(str(e)), highlight=False)
        return 2
    except OSError as e:  # a missing index, an OUT that cannot be written
        err.print("[bold red]error:[/] " + escape(os_error_line(e)), highlight=False)
        return 2
    Console().print(f"{res['documents']:,} documents, {res['tokens']:,} tokens ({res['dtype']}) -> "
                    + ", ".join(res["files"]), highlight=False)
    return 0


def _index_path(given: str) -> str:
    """``given``, or the ``index.json`` a run folder (``RUN/tokens/``) or a tokens folder holds.

    A folder holding none is returned as is: reading it then fails with a one-line error."""
    import os

    if os.path.isdir(given):
        for cand in (os.path.join(given, "tokens", "index.json"), os.path.join(given, "index.json")):
            if os.path.isfile(cand):
                return cand
        raise ValueError(f"{given} is a folder without a token index (tokens/index.json): was the run's "
                         "tokenize phase on?")
    return given
