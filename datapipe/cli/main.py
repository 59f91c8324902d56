"""``datapipe`` command line. Each subcommand lives in its own module (``datapipe.cli.commands``);
only the module of the command being run is imported, so ``datapipe --help`` answers at once."""
from __future__ import annotations

import argparse
import importlib
import sys

from datapipe.cli.commands import COMMANDS


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser with every subcommand in full (``command`` None), or with ``command`` in full and
    the others as one-line entries (what ``main`` needs: their modules are not imported)."""
    p = argparse.ArgumentParser(
        prog="datapipe",
        description="Turn Common Crawl WARC files into clean, deduplicated, mixed, tokenized Parquet shards on Dask.",
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    wanted = list(dict.fromkeys(c.module for n, c in COMMANDS.items() if command is None or n == command))
    for module in wanted:
        importlib.import_module(module).add_cli(sub)
    for name, c in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=c.help)
    return p


def _command(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first argument that is not an option."""
    return next((a for a in argv if not a.startswith("-")), None)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(_command(argv) if _command(argv) in COMMANDS else "")
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    rc = args.func(args)
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
