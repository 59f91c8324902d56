"""Phase-1 stage ``dedup_signatures``: per-document exact hash and MinHash signature.

Computed while the text is in memory so that phase 2 (:func:`datapipe.stages.phases.dedup.phase.run_dedup`)
only reads two small columns per document. Adds no decision: it never rejects.
"""
from __future__ import annotations

from typing import Literal

import numpy as np
import pyarrow as pa
import xxhash
from pydantic import Field

from datapipe.manifest.ranges import Seed
from datapipe.stage import Stage, StageConfig, register, with_column
from datapipe.stages.lib.minhash import poly64_signatures, signatures
from datapipe.stages.lib.normalize import nfkc, normalize_text

#: xxh3-128 digest (16 bytes, big-endian as ``xxh3_128_digest`` returns) of the normalized text.
CONTENT_HASH = pa.field("content_hash", pa.binary(16))
#: ``num_perm`` uint32 MinHash values (datasketch 2.0.0 affine32 ``hashvalues``); null when the
#: normalized text is empty (no shingle).
MINHASH = pa.field("minhash", pa.list_(pa.uint32()))


def signature_columns(texts: list[str | None], num_perm: int = 128, seed: int = 1, ngram: int = 5,
                      shingle_hash: str = "poly64") -> tuple[pa.Array, pa.Array]:
    """``content_hash`` (binary(16), null for empty normalized text) and ``minhash``
    (list<uint32> of length ``num_perm``, null for empty) for a list of raw texts.
    """
    if shingle_hash == "poly64":
        # The kernel returns normalize_text's bytes too, so the text is walked once.
        sig, valid, norm = poly64_signatures([nfkc(t) for t in texts], num_perm, seed, ngram)
    else:
        norm = [normalize_text(t).encode() for t in texts]
        sig, valid = signatures([t.decode() for t in norm], num_perm=num_perm, seed=seed, ngram=ngram,
                                hash=shingle_hash)
    h = xxhash.xxh3_128_digest
    hashes = pa.array([h(t) if t else None for t in norm], type=CONTENT_HASH.type)
    offsets = pa.array(np.arange(len(norm) + 1, dtype=np.int32) * num_perm)
    lists = pa.ListArray.from_arrays(offsets, pa.array(sig.reshape(-1)), mask=pa.array(~valid))
    return hashes, lists


@register
class DedupSignatures(Stage):
    """Adds ``content_hash`` and ``minhash`` (see module constants) to every row; rows unchanged.

    Config defaults are those of :class:`datapipe.stages.phases.dedup.config.MinHashConfig` and must equal
    the manifest's ``dedup.minhash`` values (phase 2 checks ``num_perm`` and raises otherwise;
    ``DedupConfig``-derived configs come from :func:`stage_config`).
    """

    name = "dedup_signatures"
    fields = [CONTENT_HASH, MINHASH]

    class Config(StageConfig):
        num_perm: int = Field(128, ge=2, le=1024)
        ngram: int = Field(5, ge=1, le=64)
        seed: Seed = 1
        shingle_hash: Literal["poly64", "xxh32"] = "poly64"

    def setup(self) -> None:
        # Load the compiled kernels (numba's on-disk cache; its first call in a process also sets
        # up numba's target context, ~1.5 s) and the fold tables now, at worker start, not in the
        # first batch's stage time (issue 16).
        c = self.config
        signature_columns(["warm up the kernels"], c.num_perm, c.seed, c.ngram, c.shingle_hash)

    def assets(self) -> list:
        return []  # no files: the client need not load the kernels to check it (cached by config and code)

    def __call__(self, batch: pa.Table) -> pa.Table:
        c = self.config
        texts = batch.column("text").to_pylist() if batch.num_rows else []
        hashes, lists = signature_columns(texts, c.num_perm, c.seed, c.ngram, c.shingle_hash)
        batch = with_column(batch, CONTENT_HASH.name, hashes, CONTENT_HASH.type)
        return with_column(batch, MINHASH.name, lists, MINHASH.type)


def stage_config(dedup_config) -> DedupSignatures.Config:
    """The stage config matching a :class:`DedupConfig` (same num_perm, ngram, seed, hash)."""
    m = dedup_config.minhash
    return DedupSignatures.Config(num_perm=m.num_perm, ngram=m.ngram, seed=m.seed, shingle_hash=m.shingle_hash)
