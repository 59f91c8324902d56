"""``datapipe classifiers train | evaluate | predict``: fastText classifiers from the command line."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from datapipe.classifiers import data, recipes
from datapipe.classifiers.data import SourceError, expand_sources
from datapipe.classifiers.model import load_classifier
from datapipe.classifiers.train import evaluate_model
from datapipe.cli.commands import COMMANDS

_EPILOG = """examples:
  datapipe classifiers train quality --out classifiers/models/quality_wiki_cc.ftz
  datapipe classifiers train quality --positives wikitext:my_wiki.txt.gz --negatives crawl.warc.gz --out q.ftz
  datapipe classifiers train toxicity --out classifiers/models/toxicity_weak_en.ftz
  datapipe classifiers train nsfw --out classifiers/models/nsfw_ut1_en.ftz
  datapipe classifiers evaluate --model quality_wiki_cc.ftz --positives good.jsonl --negatives bad.jsonl
  datapipe classifiers evaluate --model toxicity_weak_en.ftz --jigsaw
  echo "some text" | datapipe classifiers predict --model quality_wiki_cc.ftz
  datapipe classifiers train quality --positives runs/curated --negatives runs/sample/rejected --out q.ftz

Sources are files, optionally prefixed with their kind (wikitext:, warc:, jsonl:, parquet:, lines:);
a bare path's kind is guessed from its name (.warc*, .jsonl*, .parquet, else lines). A directory
means its *.parquet files, a run directory those of documents/ (the text column of each row).
Relative sample paths resolve under ../shared/data. A file that cannot be read as its kind is
an error naming it (exit 2)."""


def _readable(fn):
    """Run a subcommand; a source that is missing or cannot be read is ``error: ...``, exit 2."""
    def run(args) -> int:

        try:
            for name in ("positives", "negatives", "sources"):
                if getattr(args, name, None):  # a run directory -> its documents/*.parquet, hashed one by one
                    setattr(args, name, expand_sources(getattr(args, name)))
            return fn(args)
        except (SourceError, FileNotFoundError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return run


def _train(args) -> int:

    if args.task == "quality":
        meta = recipes.train_quality(args.out, args.positives, args.negatives, seed=args.seed)
    elif args.task == "nsfw":
        meta = recipes.train_nsfw(args.out, args.positives, args.negatives, seed=args.seed)
    else:
        meta = recipes.train_toxicity(args.out, args.sources, seed=args.seed)
    print(json.dumps({k: meta[k] for k in ("metrics", "jigsaw", "n_train", "n_heldout", "bytes") if k in meta}, indent=1))
    print(f"wrote {args.out} and {Path(args.out).with_suffix('.json')}", file=sys.stderr)
    return 0


def _evaluate(args) -> int:

    out = {}
    if args.positives or args.negatives:
        pos = [t for s in args.positives for _, t in data.read_source(s, chunk=args.chunk)]
        neg = [t for s in args.negatives for _, t in data.read_source(s, chunk=args.chunk)]
        out["metrics"] = evaluate_model(args.model, pos, neg, args.label, args.threshold)
    if args.jigsaw:
        out["jigsaw"] = recipes.jigsaw_metrics(args.model, args.threshold)
    if not out:
        print("nothing to evaluate: give --positives/--negatives and/or --jigsaw", file=sys.stderr)
        return 2
    print(json.dumps(out, indent=1))
    return 0


def _predict(args) -> int:

    clf = load_classifier(args.model, args.label)
    if args.files:
        items = [(f, Path(f).read_text(encoding="utf-8")) for f in args.files]
    else:
        items = [(str(i), line) for i, line in enumerate(sys.stdin) if line.strip()]
    for name, text in items:
        label, prob = clf.predict(text)
        score = float(clf.score([text])[0])
        print(json.dumps({"input": name, "label": label, "prob": round(prob, 5),
                          f"p_{clf.positive_label}": round(score, 5)}))
    return 0


def add_cli(subparsers) -> None:
    """Add ``classifiers`` with ``train``, ``evaluate`` (alias ``eval``) and ``predict``."""
    p = subparsers.add_parser("classifiers", help=COMMANDS["classifiers"].help,
                              description="Train, evaluate and run the fastText quality/toxicity classifiers.",
                              epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="classifiers_command", metavar="SUBCOMMAND")
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])

    t = sub.add_parser("train", help="train a classifier (deterministic: seed, thread=1) with held-out metrics",
                       description="Train a binary fastText classifier, quantise it to .ftz, write a .json sidecar "
                       "with labels, parameters, source hashes and held-out precision/recall/F1/AUC.")
    t.add_argument("task", choices=["quality", "toxicity", "nsfw"],
                   help="quality: wiki (positives) vs cc (negatives); toxicity: weak LDNOOBW labels; "
                   "nsfw: UT1 adult-URL titles vs real sentences")
    t.add_argument("--positives", nargs="+", metavar="SRC",
                   help="quality/nsfw: positive sources: files or directories of Parquet shards, see below "
                   "(default: WikiText-2 valid+test / UT1 URL titles)")
    t.add_argument("--negatives", nargs="+", metavar="SRC",
                   help="quality/nsfw: negative sources (default: English pages of warc/realpages-1171.warc.gz "
                   "/ dev-half realpages, Dolma CC, WikiText-2)")
    t.add_argument("--sources", nargs="+", metavar="SRC", help="toxicity: text sources to weakly label")
    t.add_argument("--out", required=True, help="output model path (.ftz); the sidecar is <out>.json")
    t.add_argument("--seed", type=int, default=1, help="seed for split, shuffling and fastText (default 1)")
    t.set_defaults(func=_readable(_train))

    e = sub.add_parser("evaluate", aliases=["eval"], help="precision/recall/F1/AUC of a model on labelled files",
                       description="Evaluate a model on positive/negative sources and/or the Jigsaw sample.")
    e.add_argument("--model", required=True, help="model path or name under classifiers/models/")
    e.add_argument("--positives", nargs="*", default=[], metavar="SRC", help="sources whose texts are positive")
    e.add_argument("--negatives", nargs="*", default=[], metavar="SRC", help="sources whose texts are negative")
    e.add_argument("--jigsaw", action="store_true", help="also score the 101 labelled Jigsaw comments")
    e.add_argument("--label", help="positive label (default: from the sidecar)")
    e.add_argument("--threshold", type=float, default=0.5, help="decision threshold on P(positive) (default 0.5)")
    e.add_argument("--chunk", type=int, default=200, help="words per chunk when reading sources (default 200)")
    e.set_defaults(func=_readable(_evaluate))

    r = sub.add_parser("predict", help="label and score texts (files, or stdin one text per line)",
                       description="Print one JSON line per input: best label, its probability, P(positive).")
    r.add_argument("--model", required=True, help="model path or name under classifiers/models/")
    r.add_argument("--label", help="positive label (default: from the sidecar; required without one)")
    r.add_argument("files", nargs="*", help="text files, each one document (default: stdin lines)")
    r.set_defaults(func=_readable(_predict))
