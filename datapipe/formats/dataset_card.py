"""The run folder's dataset card: ``OUTPUT/README.md`` with Hugging Face ``configs:``.

A run folder holds Parquet shards of several schemas (documents, rejections, token shards) beside
JSON markers, so a loader guessing from the files fails. The card's YAML header names one
configuration per shard folder, which ``datasets.load_dataset(RUN_DIR, NAME)`` follows
(Hugging Face "Manual configuration" of a dataset repository's README):

* ``documents`` (the default): ``documents/*.parquet``, the kept documents;
* ``rejected``: ``rejected/*.parquet``, every rejection of phase 1 and of dedup, with its reason;
* ``errors``: ``errors/*.parquet``, records that could not be read or processed;
* ``tokens``: ``<tokenize.output>/shard-*.parquet``, the token shards.

A configuration is listed only when its folder holds a shard. The card depends only on the run's
outputs and ledger counts (no times, no absolute paths), so a rerun writes the same bytes as a
fresh run.
"""
from __future__ import annotations

from datapipe.io.parquet import fs_and_path, join, write_atomic

FILE = "README.md"

_ABOUT = {
    "documents": "kept documents: text, provenance (source file, offset, WARC record id) and every "
                 "stage's signals",
    "rejected": "rejected documents, phase 1 and dedup alike, with `reject_stage`, `reject_reason` and "
                "the signals they were rejected on",
    "errors": "records that could not be read or processed, with `error_stage` and `error_reason`",
    "tokens": "token shards (ids of the mixed, shuffled documents; `index.json` beside them says how "
              "they were made)",
}


def configs(output: str, storage_options: dict | None, tokens_dir: str | None) -> list[tuple[str, str]]:
    """``(config name, glob relative to the run)`` of each shard folder that holds a shard."""
    fs, root = fs_and_path(output, storage_options)
    cands = [("documents", "documents/*.parquet"), ("rejected", "rejected/*.parquet"),
             ("errors", "errors/*.parquet")]
    if tokens_dir:
        cands.append(("tokens", f"{tokens_dir}/shard-*.parquet"))
    return [(name, pat) for name, pat in cands if fs.glob(f"{root.rstrip('/')}/{pat}")]


def card_text(name: str, present: list[tuple[str, str]], totals: dict) -> str:
    """The card: YAML ``configs:`` then a short description. ``totals``: the ledger's ``in``,
    ``kept``, ``rejected`` and ``errored`` record counts."""
    head = ["---", "configs:"]
    for i, (cfg, pat) in enumerate(present):
        head += [f"- config_name: {cfg}", "  data_files:", "  - split: train", f'    path: "{pat}"']
        if cfg == "documents" or (i == 0 and not any(c == "documents" for c, _ in present)):
            head.append("  default: true")
    head.append("---")
    body = [
        f"# {name}",
        "",
        ("Written by datapipe. Every input record ends in exactly one place: kept, rejected with a reason, "
         "or errored with a reason."),
        (f"Records read: {totals.get('in', 0):,}; kept {totals.get('kept', 0):,}, rejected "
         f"{totals.get('rejected', 0):,}, errored {totals.get('errored', 0):,} (`ledger.json` has the funnel)."),
        "",
        "| configuration | files | what |",
        "| --- | --- | --- |",
        *[f"| `{cfg}` | `{pat}` | {_ABOUT[cfg]} |" for cfg, pat in present],
        "",
        ("Load one with `datasets.load_dataset(\"RUN_DIR\", \"rejected\")` (the default is `documents`), "
         "or read the Parquet files with any Parquet reader: each folder has one schema."),
        "",
    ]
    return "\n".join(head + body)


def write_card(output: str, storage_options: dict | None, name: str, totals: dict,
               tokens_dir: str | None) -> str:
    """Write ``OUTPUT/README.md`` atomically; return its URL."""
    text = card_text(name, configs(output, storage_options, tokens_dir), totals)
    url = join(output, FILE)
    write_atomic(url, lambda fh: fh.write(text), "w", storage_options)
    return url
