"""The ``datapipe`` subcommands: name -> the module that defines it and its one-line help.

``datapipe --help`` lists them from this table alone; ``datapipe <command>`` imports only the
module of that command (the engine, DuckDB or matplotlib load with the command that needs them).
"""
from __future__ import annotations

from typing import NamedTuple


class Command(NamedTuple):
    module: str  # defines ``add_cli(subparsers)``, which adds this command (and the others it lists here)
    help: str


COMMANDS: dict[str, Command] = {
    "run": Command("datapipe.cli.run", "run a manifest (read -> extract -> langid -> filters -> dedup -> mix/tokenize)"),
    "classifiers": Command("datapipe.classifiers.cli", "train, evaluate and run fastText classifiers"),
    "tokenizer": Command("datapipe.cli.tokenizer", "train, inspect or try tokenizers"),
    "inspect": Command("datapipe.cli.inspect",
                       "what the filters did: funnel, samples per reason, filters, one document, what-if"),
    "report": Command("datapipe.cli.inspect", "write the run report (self-contained HTML with plots)"),
    "ablate": Command("datapipe.ablate.cli",
                      "train small proxy models on candidate mixtures of a finished run and rank them"),
    "export-tokens": Command("datapipe.cli.export",
                             "write a run's token shards for other trainers (Megatron-LM .bin/.idx, nanoGPT memmap)"),
    "stages": Command("datapipe.cli.catalog", "list the stages and phase sections: settings, defaults, ranges, sources"),
    "schema": Command("datapipe.cli.catalog", "print the JSON Schema of a manifest (for editors' YAML validation)"),
    "init": Command("datapipe.cli.init", "write a commented starter manifest (fineweb, dclm or c4 preset)"),
    "decontam": Command("datapipe.cli.decontam", "benchmark decontamination: build the n-gram index of test items"),
}
