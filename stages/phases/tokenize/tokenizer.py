"""Tokenizers for phase 3 and the token-shard format.

Three tokenizer families, all loaded from local files (nothing is downloaded):

* ``r50k_base`` (GPT-2, the default) and ``cl100k_base``: tiktoken ranks files from
  ``shared_data()/tokenizers/*.tiktoken``, built into a ``tiktoken.Encoding`` with the pattern and
  special tokens of ``tiktoken_ext.openai_public`` (tiktoken's stock loaders would download).
  Any other ``*.tiktoken`` path uses the r50k pattern and ``<|endoftext|>`` = number of ranks.
  Ranks files are parsed from their bytes (``parse_tiktoken_ranks``), never through tiktoken's
  path-keyed download cache, and ``sha256`` is the hash of those same bytes.
* ``gpt2_bpe``: the GPT-2 byte-level BPE from ``gpt2_vocab.json`` + ``gpt2_merges.txt`` as a
  ``tokenizers`` BPE model with the ByteLevel pre-tokenizer (ids equal r50k_base's).
* a path ending in ``.json``: a Hugging Face ``tokenizer.json`` (``tokenizers.Tokenizer``).

Documents are encoded in batches as *ordinary* text: a special-token string inside a document
("<|endoftext|>") is encoded as plain text, never as a control id, so documents cannot inject EOS.
EOS is appended to every document and BOS prepended when configured; both ids are looked up at
load time, so a missing token fails before any work (``TokenizerError``).

A ``tokenizer.json`` may carry its own specials in its post-processor (a ``TemplateProcessing``
``"<s> $A"`` adds BOS, BERT/RoBERTa processors add CLS/SEP). With ``post_processor: use`` (the
default) they are honoured: a token it puts before the text is the BOS (``tokenize.bos`` unset or
equal), one it puts after must be ``tokenize.eos``; any other combination is refused at load with
a message naming the tokens and the settings. ``post_processor: ignore`` adds only
``tokenize.bos``/``tokenize.eos``. Either way ``index.json`` records what the post-processor would
add, whether it was used, and the BOS/EOS actually added (strings and ids). Truncation and padding
stored in a ``tokenizer.json`` are switched off: documents are never cut or padded.

The token-shard format (schema, writer) is ``shards.py``; BPE training ``bpe_training.py``. The
phase-3 driver is ``datapipe.stages.phases.tokenize.phase.run_mix_tokenize``.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import itertools
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from datapipe.engine.safe_paths import check_output_subdir
from datapipe.env import shared_data
from datapipe.manifest.path_settings import ReadFile, TokenizerName


class TokenizerError(ValueError):
    """A tokenizer cannot be loaded or lacks a token the configuration asks for."""


class TokenizeConfig(BaseModel):
    """Manifest section ``tokenize:``. Unknown keys are an error.

    Ranges (ValueError at load): ``batch_size`` (documents), ``num_threads``, ``shard_tokens`` and
    ``row_group_tokens`` (tokens) >= 1; ``compression_level`` [1, 22] (zstd's levels).
    """

    model_config = ConfigDict(extra="forbid")

    #: ``r50k_base`` (GPT-2, ids < 50,257 -> uint16), ``cl100k_base``, ``gpt2_bpe`` (vocab.json +
    #: merges.txt), a path to a ``*.tiktoken`` ranks file, or a path to a HF ``tokenizer.json``.
    tokenizer: TokenizerName = "r50k_base"
    #: For ``gpt2_bpe``: vocab/merges paths (default: the GPT-2 files in shared data).
    vocab: ReadFile | None = None
    merges: ReadFile | None = None
    #: End-of-document token appended after every document; must exist in the tokenizer.
    eos: str = "<|endoftext|>"
    #: Beginning-of-document token prepended to every document (None = none, unless the
    #: tokenizer.json's post-processor adds one and ``post_processor`` is ``use``); must exist if set.
    bos: str | None = None
    #: A tokenizer.json's own post-processor specials: ``use`` (honour them; conflicts with
    #: ``bos``/``eos`` are refused) or ``ignore`` (add only ``bos``/``eos``). See the module docstring.
    post_processor: Literal["use", "ignore"] = "use"
    #: ``auto``: uint16 when the vocabulary (specials included) has <= 65,536 ids, else uint32.
    dtype: Literal["auto", "uint16", "uint32"] = "auto"
    #: Documents per encode call.
    batch_size: int = Field(1024, ge=1)
    #: Threads of the library's batch encode inside one Dask task (the cluster supplies the rest).
    num_threads: int = Field(1, ge=1)
    #: Token budget of one output shard (2^27 = 134,217,728 tokens ~ 256 MiB of uint16).
    shard_tokens: int = Field(2**27, ge=1)
    #: Tokens per Parquet row group inside a shard: the loader's unit of reading (memory bound).
    row_group_tokens: int = Field(2**20, ge=1)
    #: zstd level of the token shards.
    compression_level: int = Field(3, ge=1, le=22)
    #: Output folder under the run directory (deleted and rewritten by a rerun of phase 3, so it
    #: must stay inside the run directory and not be one of its other folders).
    output: str = "tokens"
    #: Keep ``_tokenize/`` (per-input encoded and sampled files) after the phase completes.
    keep_intermediate: bool = False

    @field_validator("output")
    @classmethod
    def _inside_run(cls, v: str) -> str:

        return check_output_subdir(v)


@dataclass
class TextTokenizer:
    """A loaded tokenizer. ``encode_docs`` returns flat ids + per-document lengths.

    ``name``: config name; ``kind``: tiktoken | hf; ``sha256``: hash of the files it was built
    from; ``vocab_size``: number of ids (max id + 1, specials included).
    """

    name: str
    kind: str
    sha256: str
    vocab_size: int
    eos_id: int
    bos_id: int | None
    eos: str
    bos: str | None
    dtype: np.dtype
    num_threads: int = 1
    #: What a tokenizer.json's post-processor adds (``before``/``after`` token strings) and whether it
    #: was ``used``; None for tokenizers without one.
    post_processor: dict | None = None
    #: Where the BOS comes from: ``tokenize.bos``, ``post_processor`` or None (no BOS).
    bos_source: str | None = None
    _impl: object = field(default=None, repr=False)

    def encode_ordinary(self, texts: list[str]) -> list[list[int]]:
        """Ids of each text without BOS/EOS, special-token strings treated as plain text."""
        if self.kind == "tiktoken":
            if self.num_threads == 1:  # the batch call's thread pool costs ~10% on one thread, same ids
                return [self._impl.encode_ordinary(t) for t in texts]
            return self._impl.encode_ordinary_batch(texts, num_threads=self.num_threads)
        return [e.ids for e in self._impl.encode_batch(texts, add_special_tokens=False)]

    def encode_docs(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Encode documents with BOS (if set) and EOS around each.

        Returns ``(ids, lengths)``: ``ids`` 1-D array of ``self.dtype`` holding every document's
        tokens back to back; ``lengths`` int64 [len(texts)] (tokens per document, BOS/EOS included).
        """
        seqs = self.encode_ordinary(texts)
        extra = 1 + (self.bos_id is not None)
        lengths = np.fromiter((len(s) + extra for s in seqs), dtype=np.int64, count=len(seqs))
        bos, eos = ([self.bos_id] if self.bos_id is not None else []), [self.eos_id]
        # One pass over all ids into the array (no per-document list -> array conversion).
        parts = itertools.chain.from_iterable(x for s in seqs for x in (bos, s, eos))
        return np.fromiter(parts, dtype=self.dtype, count=int(lengths.sum())), lengths

    def decode_docs(self, ids: np.ndarray, lengths: np.ndarray) -> list[str]:
        """Texts of documents laid out as ``encode_docs`` returns them (flat ``ids``, per-document
        ``lengths``), BOS/EOS ids removed; bytes that do not form UTF-8 (a document cut inside a
        character) are replaced by U+FFFD. Inverse of ``encode_docs`` for the byte-level tokenizers."""
        ids = np.asarray(ids).astype(np.int64, copy=False)
        keep = ids != self.eos_id
        if self.bos_id is not None:
            keep &= ids != self.bos_id
        doc = np.repeat(np.arange(len(lengths)), lengths)
        ends = np.cumsum(np.bincount(doc[keep], minlength=len(lengths)))
        flat = ids[keep].tolist()
        seqs = [flat[a:b] for a, b in zip(np.concatenate([[0], ends[:-1]]).tolist(), ends.tolist())]
        if self.kind == "tiktoken":
            if self.num_threads == 1:
                return [self._impl.decode(s, errors="replace") for s in seqs]
            return self._impl.decode_batch(seqs, errors="replace", num_threads=self.num_threads)
        return self._impl.decode_batch(seqs, skip_special_tokens=False)

    def info(self) -> dict:
        """JSON-able description written to ``index.json``."""
        return {"name": self.name, "kind": self.kind, "sha256": self.sha256, "vocab_size": self.vocab_size,
                "eos": self.eos, "eos_id": self.eos_id, "bos": self.bos, "bos_id": self.bos_id,
                "bos_source": self.bos_source, "post_processor": self.post_processor,
                "dtype": np.dtype(self.dtype).name}


def token_dtype(vocab_size: int, requested: str = "auto") -> np.dtype:
    """uint16 when every id (0..vocab_size-1) fits in 16 bits, else uint32 (B29: never wrap).

    Raises TokenizerError for an explicit ``uint16`` with ``vocab_size > 65536``.
    """
    fits16 = vocab_size <= 2**16
    if requested == "uint16" and not fits16:
        raise TokenizerError(f"tokenize.dtype uint16 cannot hold ids up to {vocab_size - 1}; use auto or uint32")
    if requested == "uint32" or not fits16:
        return np.dtype(np.uint32)
    return np.dtype(np.uint16)


def bytes_sha256(contents: list[bytes]) -> str:
    h = hashlib.sha256()
    for data in contents:
        h.update(data)
    return h.hexdigest()


def files_sha256(paths: list[Path]) -> str:
    return bytes_sha256([p.read_bytes() for p in paths])


_SPEC_LOCK = threading.Lock()


def _openai_spec(name: str) -> dict:
    """Pattern and special tokens of tiktoken's own encoding ``name`` (``tiktoken_ext.openai_public``).

    Its constructors would download the ranks; the loader is stubbed during the call so only the
    pattern and specials are read, and the ranks come from our local file.
    """
    from tiktoken_ext import openai_public as op

    with _SPEC_LOCK:
        saved = op.load_tiktoken_bpe
        op.load_tiktoken_bpe = lambda *a, **k: {}
        try:
            return getattr(op, name)()
        finally:
            op.load_tiktoken_bpe = saved


def parse_tiktoken_ranks(data: bytes, source: str) -> dict[bytes, int]:
    """Mergeable ranks of a tiktoken ranks file's bytes: one ``<base64 token> <rank>`` a line.

    Parsed here, not by ``tiktoken.load.load_tiktoken_bpe``: that reads through a cache keyed by
    the path (``$TIKTOKEN_CACHE_DIR``, else ``/tmp/data-gym-cache``), so a file replaced at the same
    path would load its old ranks, and every new path leaves a copy behind. Raises TokenizerError
    naming ``source`` and the line for a line of another shape.
    """
    ranks: dict[bytes, int] = {}
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            token, rank = line.split()
            ranks[base64.b64decode(token, validate=True)] = int(rank)
        except (ValueError, binascii.Error):
            raise TokenizerError(f"tokenizer file {source}: line {n} is not '<base64 token> <rank>'") from None
    return ranks


def _tiktoken(path: Path, data: bytes):
    import tiktoken

    ranks = parse_tiktoken_ranks(data, str(path))
    if path.stem in ("r50k_base", "cl100k_base"):
        spec = _openai_spec(path.stem)
        pat, specials = spec["pat_str"], spec["special_tokens"]
    else:  # an unknown ranks file: GPT-2 pattern, EOS right after the ranks
        pat, specials = _openai_spec("r50k_base")["pat_str"], {"<|endoftext|>": len(ranks)}
    return tiktoken.Encoding(name=path.stem, pat_str=pat, mergeable_ranks=ranks, special_tokens=specials)


def resolve_files(cfg: TokenizeConfig) -> tuple[str, list[Path]]:
    """(kind, files) for a config: kind is ``tiktoken``, ``gpt2_bpe`` or ``hf``.

    Raises TokenizerError when a file is missing.
    """
    tok_dir = shared_data() / "tokenizers"
    name = cfg.tokenizer
    if name in ("r50k_base", "gpt2", "cl100k_base"):
        files = [tok_dir / ("cl100k_base.tiktoken" if name == "cl100k_base" else "r50k_base.tiktoken")]
        kind = "tiktoken"
    elif name == "gpt2_bpe":
        files = [Path(cfg.vocab or tok_dir / "gpt2_vocab.json"), Path(cfg.merges or tok_dir / "gpt2_merges.txt")]
        kind = "gpt2_bpe"
    elif name.endswith(".tiktoken"):
        files, kind = [Path(name)], "tiktoken"
    elif name.endswith(".json"):
        files, kind = [Path(name)], "hf"
    else:
        raise TokenizerError(f"tokenize.tokenizer {name!r}: expected r50k_base, cl100k_base, gpt2_bpe, "
                             "a *.tiktoken file or a tokenizer.json path")
    for f in files:
        if not f.is_file():
            raise TokenizerError(f"tokenizer file not found: {f} (tokenize.tokenizer={name!r})")
    return kind, files


def _post_processor_specials(impl) -> tuple[list[int], list[int]]:
    """Ids a HF tokenizer's post-processor puts before and after a text (found by encoding a probe
    with and without special tokens, so every processor type is covered). Raises TokenizerError
    when the processor changes the text's own ids."""
    if impl.post_processor is None:
        return [], []
    specials = {t.content for t in impl.get_added_tokens_decoder().values() if t.special}
    probes = ["a"] + [impl.decode([i]) for i in range(min(impl.get_vocab_size(), 64))
                      if impl.id_to_token(i) not in specials]
    for probe in probes:
        try:
            plain = impl.encode(probe, add_special_tokens=False).ids
            full = impl.encode(probe, add_special_tokens=True).ids
        except Exception:  # noqa: BLE001 - e.g. a WordLevel model without an unknown token
            continue
        if not plain:
            continue
        for i in range(len(full) - len(plain) + 1):
            if full[i:i + len(plain)] == plain:
                return full[:i], full[i + len(plain):]
        raise TokenizerError("the tokenizer.json post-processor changes the text's own ids, which token shards "
                             "cannot honour; set tokenize.post_processor: ignore")
    raise TokenizerError("cannot tell what the tokenizer.json post-processor adds (no probe text encodes); "
                         "set tokenize.post_processor: ignore")


def _honour_post_processor(cfg: TokenizeConfig, impl) -> tuple[str | None, dict | None]:
    """(BOS string to use, ``post_processor`` report) for a HF tokenizer; raises TokenizerError on a
    conflict between the post-processor's specials and ``tokenize.bos``/``tokenize.eos``."""
    before_ids, after_ids = _post_processor_specials(impl)
    before, after = list(map(impl.id_to_token, before_ids)), list(map(impl.id_to_token, after_ids))
    if not before and not after:
        return cfg.bos, None
    report = {"before": before, "before_ids": before_ids, "after": after, "after_ids": after_ids,
              "used": cfg.post_processor == "use"}
    if cfg.post_processor == "ignore":
        return cfg.bos, report

    def named(toks, ids):
        return ", ".join(f"{t!r} (id {i})" for t, i in zip(toks, ids))
    adds = " and ".join(p for p in (f"{named(before, before_ids)} before" if before else "",
                                    f"{named(after, after_ids)} after" if after else "") if p)
    how = ("; or set tokenize.post_processor: ignore to add only tokenize.bos/tokenize.eos (the "
           "post-processor's tokens are then left out)")
    if len(before) > 1 or len(after) > 1:
        raise TokenizerError(f"tokenizer {cfg.tokenizer!r}: its post-processor adds {adds} each text; token shards "
                             f"hold one BOS and one EOS per document{how}")
    if before and cfg.bos is not None and cfg.bos != before[0]:
        raise TokenizerError(f"tokenizer {cfg.tokenizer!r}: its post-processor adds {adds} each text, but "
                             f"tokenize.bos is {cfg.bos!r}: set tokenize.bos to {before[0]!r} or leave it unset{how}")
    if after and cfg.eos != after[0]:
        raise TokenizerError(f"tokenizer {cfg.tokenizer!r}: its post-processor adds {adds} each text, but "
                             f"tokenize.eos is {cfg.eos!r}: set tokenize.eos to {after[0]!r}{how}")
    return (before[0] if before else cfg.bos), report


def load_tokenizer(cfg: TokenizeConfig) -> TextTokenizer:
    """Load the configured tokenizer and check EOS/BOS exist (fail fast, before any work).

    Raises TokenizerError: unknown name, missing file, EOS/BOS not in the vocabulary, dtype too small,
    a tokenizer.json post-processor whose specials conflict with ``bos``/``eos`` (module docstring).
    """
    kind, files = resolve_files(cfg)
    contents = [f.read_bytes() for f in files]  # read once: the hash and the ranks come from the same bytes
    sha = bytes_sha256(contents)
    bos, post, bos_source = cfg.bos, None, ("tokenize.bos" if cfg.bos is not None else None)
    if kind == "tiktoken":
        impl = _tiktoken(files[0], contents[0])
        vocab_size = impl.n_vocab
        specials = {t: impl.encode_single_token(t) for t in impl.special_tokens_set}

        def lookup(tok):
            return specials.get(tok)
    else:
        if kind == "gpt2_bpe":
            from tokenizers import Tokenizer, decoders, pre_tokenizers
            from tokenizers.models import BPE

            # GPT-2 = byte-level pre-tokenizer (GPT-2 regex, no prefix space) + BPE over vocab/merges.
            impl = Tokenizer(BPE.from_file(str(files[0]), str(files[1])))
            impl.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
            impl.decoder = decoders.ByteLevel()
            if impl.token_to_id(cfg.eos) is not None:
                impl.add_special_tokens([cfg.eos])  # mark it special so text never merges into it
        else:
            from tokenizers import Tokenizer

            impl = Tokenizer.from_file(str(files[0]))
            impl.no_truncation()  # a stored max_length would cut documents silently
            impl.no_padding()
            bos, post = _honour_post_processor(cfg, impl)
            if post is not None and post["used"] and post["before"]:
                bos_source = "post_processor" if cfg.bos is None else "tokenize.bos"
        # Special-token strings inside documents are ordinary text, like tiktoken's encode_ordinary.
        impl.encode_special_tokens = True
        vocab_size = impl.get_vocab_size(with_added_tokens=True)
        lookup = impl.token_to_id
        kind = "hf"
    eos_id = lookup(cfg.eos)
    if eos_id is None:
        raise TokenizerError(f"EOS token {cfg.eos!r} is not in tokenizer {cfg.tokenizer!r}; "
                             "set tokenize.eos to one of its special tokens")
    bos_id = None
    if bos is not None:
        bos_id = lookup(bos)
        if bos_id is None:
            raise TokenizerError(f"BOS token {bos!r} is not in tokenizer {cfg.tokenizer!r}; "
                                 "set tokenize.bos to one of its tokens or leave it unset")
    vocab_size = max(vocab_size, eos_id + 1, (bos_id or 0) + 1)
    return TextTokenizer(name=cfg.tokenizer, kind=kind, sha256=sha, vocab_size=vocab_size, eos_id=eos_id,
                         bos_id=bos_id, eos=cfg.eos, bos=bos, dtype=token_dtype(vocab_size, cfg.dtype),
                         num_threads=cfg.num_threads, post_processor=post, bos_source=bos_source, _impl=impl)
