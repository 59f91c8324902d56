"""Training a byte-level BPE ``tokenizer.json`` for ``tokenize.tokenizer`` (``datapipe tokenizer train``)."""
from __future__ import annotations

from datapipe.io.parquet import write_atomic


def train_bpe(texts, out_path: str, *, vocab_size: int = 32000, min_frequency: int = 2,
              special_tokens: list[str] | None = None) -> dict:
    """Train a byte-level BPE (``tokenizers.ByteLevelBPETokenizer``) on an iterator of strings.

    Writes ``tokenizer.json`` to ``out_path`` (a path or fsspec URL; atomic, with the process
    umask's mode like every other output) and returns ``{"path", "vocab_size", "special_tokens"}``.
    ``special_tokens`` default ``["<|endoftext|>"]``.
    """
    from tokenizers.implementations import ByteLevelBPETokenizer


    specials = special_tokens if special_tokens is not None else ["<|endoftext|>"]
    tok = ByteLevelBPETokenizer()
    tok.train_from_iterator(texts, vocab_size=vocab_size, min_frequency=min_frequency,
                            show_progress=False, special_tokens=specials)
    # tok.save() into a mkstemp file kept its 0600 mode; the text is what save() writes
    write_atomic(str(out_path), lambda fh: fh.write(tok.to_str(pretty=True)), "w")
    return {"path": str(out_path), "vocab_size": tok.get_vocab_size(), "special_tokens": specials}
