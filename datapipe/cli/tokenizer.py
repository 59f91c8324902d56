"""``datapipe tokenizer``: train a byte-level BPE on a run's kept documents, inspect and try tokenizers."""
from __future__ import annotations

import json
import sys

from datapipe.cli.commands import COMMANDS
from datapipe.stages.phases.tokenize.bpe_training import train_bpe
from datapipe.stages.phases.tokenize.tokenizer import (
    TokenizeConfig,
    TokenizerError,
    load_tokenizer,
)


class _ArgumentError(Exception):
    """What the user gave cannot be used: printed as ``error: ...``, exit 2."""


def _one_line_errors(fn):
    def run(args) -> int:
        try:
            return fn(args)
        except _ArgumentError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    return run


_TOK_HELP = ("r50k_base (GPT-2), cl100k_base, gpt2_bpe (shared gpt2_vocab.json + gpt2_merges.txt), "
             "a *.tiktoken file or a tokenizer.json path")


def _iter_texts(run_dir: str, max_docs: int | None, storage_options: dict):
    """Texts of ``run_dir/documents/*.parquet`` in file order, at most ``max_docs``."""
    import fsspec
    import pyarrow.parquet as pq

    fs, root = fsspec.core.url_to_fs(run_dir, **storage_options)
    files = sorted(fs.glob(f"{root.rstrip('/')}/documents/*.parquet"))
    if not files:
        raise _ArgumentError(f"no document shards under {run_dir}/documents (give the --output folder of a "
                             "`datapipe run` that finished phase 2)")
    n = 0
    for f in files:
        with fs.open(f, "rb") as fh:
            for batch in pq.ParquetFile(fh).iter_batches(batch_size=1024, columns=["text"]):
                for t in batch.column(0).to_pylist():
                    if max_docs is not None and n >= max_docs:
                        return
                    if t:
                        n += 1
                        yield t


def _cmd_train(args) -> int:

    specials = args.special_tokens or ["<|endoftext|>"]
    info = train_bpe(_iter_texts(args.run_dir, args.max_docs, {}), args.out, vocab_size=args.vocab_size,
                     min_frequency=args.min_frequency, special_tokens=specials)
    print(json.dumps(info, indent=2))
    return 0


def _load(args):

    name = args.tokenizer
    given = getattr(args, "tokenizer_arg", None)
    if given is not None:
        if name is not None and name != given:
            raise _ArgumentError(f"two tokenizers given: {given} and --tokenizer {name}")
        name = given
    try:
        return load_tokenizer(TokenizeConfig(tokenizer=name or "r50k_base", eos=args.eos, bos=args.bos))
    except TokenizerError as e:
        raise _ArgumentError(str(e)) from e


def _cmd_info(args) -> int:
    print(json.dumps(_load(args).info(), indent=2))
    return 0


def _cmd_encode(args) -> int:
    tok = _load(args)
    text = args.text if args.text is not None else sys.stdin.read()
    ids, _ = tok.encode_docs([text]) if args.with_special else (tok.encode_ordinary([text])[0], None)
    print(json.dumps([int(i) for i in ids]))
    return 0


def add_cli(subparsers) -> None:
    """Add ``tokenizer`` with subcommands ``train``, ``info`` and ``encode``."""
    p = subparsers.add_parser("tokenizer", help=COMMANDS["tokenizer"].help,
                              description="Tokenizers for phase 3 (mix + tokenize).")
    sub = p.add_subparsers(dest="tokenizer_command", metavar="SUBCOMMAND")

    t = sub.add_parser("train", help="train a byte-level BPE on a run's kept documents -> tokenizer.json",
                       description="Train a byte-level BPE (HF tokenizers) on RUN_DIR/documents/*.parquet "
                                   "and write a tokenizer.json usable as tokenize.tokenizer.")
    t.add_argument("run_dir", help="run directory (local path or fsspec URL) holding documents/*.parquet")
    t.add_argument("--out", required=True, help="where to write tokenizer.json")
    t.add_argument("--vocab-size", type=int, default=32000, help="vocabulary size incl. specials (default 32000)")
    t.add_argument("--min-frequency", type=int, default=2, help="minimum pair count to merge (default 2)")
    t.add_argument("--special-tokens", nargs="*", metavar="TOKEN",
                   help="special tokens, first ids in this order (default: <|endoftext|>)")
    t.add_argument("--max-docs", type=int, default=None, help="train on at most this many documents")
    t.set_defaults(func=_one_line_errors(_cmd_train))

    for name, helptext, fn in (("info", "print vocabulary size, dtype, EOS/BOS ids and file hash", _cmd_info),
                               ("encode", "print the ids of TEXT (or stdin) as JSON", _cmd_encode)):
        s = sub.add_parser(name, help=helptext, description=helptext)
        if name == "info":  # `datapipe tokenizer info tokenizer.json` (encode's positional is the text)
            s.add_argument("tokenizer_arg", nargs="?", metavar="TOKENIZER", help=f"the same as --tokenizer: {_TOK_HELP}")
        s.add_argument("--tokenizer", default=None, help=f"{_TOK_HELP} (default r50k_base)")
        s.add_argument("--eos", default="<|endoftext|>", help="EOS token (must exist; default <|endoftext|>)")
        s.add_argument("--bos", default=None, help="BOS token (optional; must exist if given)")
        if name == "encode":
            s.add_argument("text", nargs="?", help="text to encode (default: read stdin)")
            s.add_argument("--with-special", action="store_true", help="add BOS/EOS as phase 3 does")
        s.set_defaults(func=_one_line_errors(fn))
    p.set_defaults(func=lambda a: (p.print_help(), 2)[1])
