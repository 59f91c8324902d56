"""``datapipe`` command line. Subcommands live in their own modules and register themselves."""
from __future__ import annotations

import argparse
import importlib
import sys

#: Modules exposing ``add_cli(subparsers)``; each adds one subcommand with ``set_defaults(func=...)``.
CLI_MODULES = [
    "datapipe.cli.run",
    "datapipe.classifiers.cli",
    "datapipe.cli.tokenizer",
    "datapipe.cli.inspect",
    "datapipe.ablate.cli",
    "datapipe.cli.export",
    "datapipe.cli.catalog",
    "datapipe.cli.init",
    "datapipe.cli.decontam",
]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="datapipe",
        description="Turn Common Crawl WARC files into clean, deduplicated, mixed, tokenized Parquet shards on Dask.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for mod in CLI_MODULES:
        importlib.import_module(mod).add_cli(sub)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    rc = args.func(args)
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
