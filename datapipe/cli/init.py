"""``datapipe init DIR --preset NAME``: a commented starter manifest modelled on a published recipe.

Each preset is YAML text with comments saying where every setting comes from and where ours
differ from the original. ``tests/test_cli_affordances.py`` loads every preset with
``load_manifest`` and checks it against ``datapipe schema``.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from rich.console import Console

from datapipe.cli.catalog import manifest_schema
from datapipe.cli.commands import COMMANDS
from datapipe.cli.termfmt import cannot_write
from datapipe.env import shared_data
from datapipe.manifest.load import load_manifest

_HEAD = """\
# yaml-language-server: $schema=datapipe.formats.documents.json   (beside this file; `datapipe schema` rewrites it)
# A {title} job, written by `datapipe init --preset {preset}`.
#   try it:     datapipe run {path} --limit 100    (a sample: at most 100 records per file, into {out})
#   all of it:  datapipe run {path}                (the same folder: a run without --limit reads every file again)
#   look:       datapipe inspect {out}     (and {out}/report.html; token shards in {out}/tokens)
# Paths this file reads (inputs, model_path, word lists, tokenizer files) are relative to this
# file's folder; `output` is relative to where you run datapipe.
# Every stage and its settings: `datapipe stages`; the defaults of a stage left `{{}}` are its
# published ones (see each stage's docstring: `datapipe stages NAME`).
name: {preset}
inputs:
  paths: [{inputs}]   # files, globs, directories, URLs; or crawl: CC-MAIN-2026-08
output: {output}
cluster: {{workers: null, threads_per_worker: 1}}   # null workers = one per core
"""

#: Phase 3 of every preset: token shards the loader, the exports and ``ablate`` read.
_TOKENS = """
# Phase 3: every kept document tokenized with GPT-2's BPE into {out}/tokens (shards + index.json),
# read by `datapipe.loader`, `datapipe export-tokens` and `datapipe ablate`. Add mix: rules to give
# domains token shares (see manifests/cc-2026.yaml).
tokenize:
  tokenizer: r50k_base            # GPT-2 BPE (ids fit in uint16); or a tokenizer.json path
  eos: "<|endoftext|>"
"""

PRESETS: dict[str, dict] = {
    "fineweb": {"title": "FineWeb-like (Penedo et al. 2024, datatrove's FineWeb pipeline)", "body": """
stages:
  - url_blocklist: {}             # FineWeb's URL filter: UT1 adult domains + banned (sub)words
  - extract:                      # FineWeb used trafilatura; resiliparse main content here (see README)
      main_content: true
  - langid:                       # fastText lid.176, English with score >= 0.65 (FineWeb)
      languages: [en]
      min_score: 0.65
  - gopher_repetition: {}         # Gopher repetition rules (Rae et al. 2021, Table A1), as FineWeb
  - gopher_quality: {}            # Gopher quality rules, as FineWeb
  - c4:                           # FineWeb's C4 filters: no terminal-punctuation line rule, no bad words
      filter_no_terminal_punct: false
      filter_bad_words: false
  - fineweb: {}                   # FineWeb's own: line punctuation, short lines, duplicate lines, list-like
  - pii:                          # FineWeb anonymised e-mail and IP addresses (not phone numbers)
      kinds: [email, ip]

# MinHash: 5-grams, 112 hashes in 14 bands of 8 (FineWeb), no verification of candidates (as
# FineWeb); ours also drops exact copies first.
dedup:
  exact: true
  minhash: {num_perm: 112, bands: 14, rows: 8, ngram: 5, threshold: 0.75, verify: none}
"""},
    "dclm": {"title": "DCLM-Baseline-like (Li et al. 2024: RefinedWeb heuristics + a fastText quality filter)", "body": """
stages:
  - extract:                      # resiliparse main content, as DCLM
      main_content: true
  - url_blocklist: {}             # RefinedWeb's URL filter
  - langid:                       # fastText lid.176, English with score >= 0.65 (DCLM)
      languages: [en]
      min_score: 0.65
  - gopher_repetition: {}         # RefinedWeb / Gopher repetition rules
  - gopher_quality: {}            # RefinedWeb / Gopher quality rules
  - c4:                           # RefinedWeb's line-wise C4 removals; no page-level bad words
      filter_bad_words: false
  - quality_classifier:           # DCLM keeps the top 10% by its OH-2.5+ELI5 fastText model. We ship
      threshold: 0.5              # quality_wiki_cc.ftz (wiki vs cc); point model_path at DCLM's model
                                  # and raise the threshold to keep its top share.

# DCLM dedups with a Bloom filter over paragraphs and documents; MinHash near-dedup stands in.
dedup:
  exact: true
  minhash: {num_perm: 128, ngram: 5, threshold: 0.8}
"""},
    "c4": {"title": "C4-like (Raffel et al. 2020, the Colossal Clean Crawled Corpus)", "body": """
stages:
  - extract:                      # C4 started from WET text: the whole page, not main content
      main_content: false
  - langid:                       # C4 kept pages langdetect calls English with p >= 0.99; lid.176
      languages: [en]             # scores the same pages lower (0.99 kept none of the sample's
      min_score: 0.65             # English pages): the threshold of the other presets
  - c4: {}                        # every C4 rule: lines with terminal punctuation and >= 3 words,
                                  # no javascript/policy/lorem ipsum/curly brackets, >= 5 sentences,
                                  # no LDNOOBW bad word (max_bad_words: 0)

# C4 kept one copy of any three-sentence span seen more than once; line-level dedup is the
# nearest step here, and stricter: a line seen more than once is removed from every document.
dedup:
  exact: true
  lines: {enabled: true, max_count: 1}
  minhash: {enabled: false}
"""},
}


#: The embedded sample (``make run``'s input), so a fresh manifest runs as written.
SAMPLE = "${DATAPIPE_SAMPLE_DIR:-../shared/data/warc}"


def sample_for(folder: Path) -> str:
    """:data:`SAMPLE` with its default written relative to ``folder`` (where the manifest goes):
    a manifest's relative paths resolve against its own folder."""

    rel = os.path.relpath(os.path.abspath(shared_data() / "warc"), os.path.abspath(folder))
    return "${DATAPIPE_SAMPLE_DIR:-" + rel + "}"


def input_for(value: str, folder: Path) -> str:
    """An ``--input`` as typed (relative to the working directory) as the manifest in ``folder`` must
    say it: URLs, absolute paths and ``${VAR}`` forms unchanged, a relative path made relative to ``folder``."""
    if "://" in value or "${" in value or os.path.isabs(value):
        return value
    return os.path.relpath(os.path.abspath(value), os.path.abspath(folder))


def render(preset: str, path: str = "manifest.yaml", inputs: str = SAMPLE, output: str | None = None) -> str:
    """The manifest text of ``preset`` (KeyError for an unknown one); ``inputs`` one path or glob,
    as the manifest's folder sees it; ``output`` relative to the working directory."""
    p = PRESETS[preset]
    out = output or f"runs/{preset}"
    # JSON strings are YAML flow scalars: `${...}`, commas and brackets need the quotes.
    return (_HEAD.format(title=p["title"], preset=preset, path=path, inputs=json.dumps(inputs),
                         output=json.dumps(out), out=out) + p["body"] + _TOKENS.format(out=out))


def add_cli(sub) -> None:
    p = sub.add_parser("init", help=COMMANDS["init"].help,
                       description="Write DIR/manifest.yaml: a commented manifest modelled on a published recipe, "
                                   "with where each setting comes from. Run it as printed, e.g. with --limit 100 "
                                   "for a first look.")
    p.add_argument("dir", metavar="DIR", help="folder to write manifest.yaml into (created if missing)")
    p.add_argument("--preset", choices=sorted(PRESETS), default="fineweb", help="recipe (default fineweb)")
    p.add_argument("--input", metavar="PATH", default=None,
                   help="inputs.paths entry, relative to here (written relative to DIR); default: the embedded "
                        "sample, ${DATAPIPE_SAMPLE_DIR:-../shared/data/warc}")
    p.add_argument("--output", metavar="DIR", help="run directory (default runs/PRESET)")
    p.add_argument("--force", action="store_true", help="overwrite an existing DIR/manifest.yaml")
    p.set_defaults(func=cmd_init)


def cmd_init(args) -> int:
    err, out = Console(stderr=True, soft_wrap=True), Console()
    target = Path(args.dir) / "manifest.yaml"
    if target.exists() and not args.force:
        err.print(f"[bold red]error:[/] {target} exists (--force overwrites it)", highlight=False)
        return 2
    inputs = sample_for(target.parent) if args.input is None else input_for(args.input, target.parent)
    text = render(args.preset, str(target), inputs, args.output)

    try:  # DIR a file, or under one, or not writable: one line, exit 2
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        (target.parent / "datapipe.formats.documents.json").write_text(json.dumps(manifest_schema(), indent=2) + "\n",
                                                            encoding="utf-8")
    except OSError as e:
        return cannot_write(err, "the manifest", e)

    m = load_manifest(target)  # a preset that does not load is a bug here, not the user's
    out.print(f"wrote {target} ({args.preset}: {len(m.stages)} stages, token shards in {m.output}/tokens); "
              f"first look: datapipe run {target} --limit 100", highlight=False, soft_wrap=True)
    return 0
