"""The ablation manifest (``manifests/ablation.yaml``) -> a validated ``AblationManifest``.

Errors name the file, the line and the field, like the main manifest
(``ablation.yaml:9: mixtures.dirichlet.n: Input should be greater than or equal to 1``).
"""
from __future__ import annotations

import json
import os
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from datapipe.engine.lineage import digest
from datapipe.manifest.load import (
    OVERRIDDEN,
    ManifestError,
    error_location,
    read_yaml_mapping,
    validation_message,
)


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _check_weights(v: dict[str, float]) -> dict[str, float]:
    if any(w < 0 for w in v.values()):
        raise ValueError("weights must be >= 0")
    if v and sum(v.values()) <= 0:
        raise ValueError("weights must not all be 0")
    return v


class Dirichlet(_Strict):
    """``n`` mixtures drawn from Dirichlet(``concentration`` * K * prior) (RegMix, Liu et al. 2024).

    ``prior``: weights per domain (normalised); empty = the run's natural token shares. A larger
    ``concentration`` keeps samples closer to the prior; 1.0 with a uniform prior is uniform on
    the simplex. ``min_weight`` floors each prior share so no domain is never sampled.
    """

    n: int = Field(8, ge=1)
    prior: dict[str, float] = {}
    concentration: float = Field(1.0, gt=0)
    min_weight: float = Field(0.02, ge=0, lt=1)

    @field_validator("prior")
    @classmethod
    def _prior_ok(cls, v):
        return _check_weights(v)


class Grid(_Strict):
    """Every point of the simplex over the domains whose weights are multiples of ``step``."""

    step: float = Field(0.25, gt=0, le=1)


class Mixtures(_Strict):
    """Candidate mixtures: the union of ``explicit``, ``grid`` and ``dirichlet`` (duplicates once)."""

    explicit: list[dict[str, float]] = []
    grid: Grid | None = None
    dirichlet: Dirichlet | None = None

    @field_validator("explicit")
    @classmethod
    def _explicit_ok(cls, v):
        for w in v:
            _check_weights(w)
            if not w:
                raise ValueError("an explicit mixture needs at least one domain weight")
        return v

    @model_validator(mode="after")
    def _some(self):
        if not self.explicit and self.grid is None and self.dirichlet is None:
            raise ValueError("give at least one of mixtures.explicit, mixtures.grid, mixtures.dirichlet")
        return self


class ExtraEval(_Strict):
    """An extra held-out set: UTF-8 text files (globs; ``.gz`` read through gzip; ``$VAR`` and
    ``${VAR}`` expanded, e.g. ``$DATAPIPE_SHARED_DATA``), one document per file, or per line with
    ``per_line``; tokenized with the run's own tokenizer. An empty set is an error."""

    name: str = Field(pattern=r"^[A-Za-z0-9_.-]+$")
    paths: list[str]
    per_line: bool = False


class Heldout(_Strict):
    """Held-out sets per domain: the documents whose seeded id hash is below ``fraction``, at most
    ``max_tokens`` per domain. They are removed from every training set."""

    fraction: float = Field(0.05, gt=0, lt=1)
    max_tokens: int = Field(200_000, ge=1)
    extra: list[ExtraEval] = []
    #: A held-out set with fewer tokens is refused before any training (its loss would be noise or
    #: ``nan``). 0 or less: at least one full proxy window (``proxy.seq_len + 1`` tokens).
    min_tokens: int = 2_000
    #: Held-out texts vs training documents, checked before training with the decontamination
    #: matcher (``datapipe.ablate.overlap``): ``report`` writes and prints the overlaps, ``refuse``
    #: stops (exit 2) when a training document shares a run of ``overlap_n`` normalised words with
    #: a held-out text, ``off`` skips the check.
    overlap: Literal["report", "refuse", "off"] = "report"
    overlap_n: int = Field(13, ge=1, le=64)


class Proxy(_Strict):
    """Built-in proxy: a decoder-only transformer (pre-norm, learned positions, tied embeddings)."""

    layers: int = Field(2, ge=1, le=48)
    d_model: int = Field(128, ge=8)
    heads: int = Field(4, ge=1)
    seq_len: int = Field(256, ge=8)
    batch_size: int = Field(16, ge=1)
    lr: float = Field(3e-3, gt=0)
    weight_decay: float = Field(0.1, ge=0)
    warmup_frac: float = Field(0.05, ge=0, lt=1)
    dropout: float = Field(0.0, ge=0, lt=1)
    #: Largest number of held-out tokens scored per eval set (speed); the rest are ignored.
    eval_tokens: int = Field(100_000, ge=1)
    #: None: the run's whole vocabulary. N: the N-1 ids most frequent in the training pool keep
    #: their own output, every other id shares one (a far smaller output layer for CPU proxies;
    #: losses are then comparable only between runs with the same setting).
    vocab_size: int | None = Field(None, ge=2)

    @model_validator(mode="after")
    def _heads_divide(self):
        if self.d_model % self.heads:
            raise ValueError(f"d_model {self.d_model} is not divisible by heads {self.heads}")
        return self


class Trainer(_Strict):
    """``builtin`` (PyTorch proxy) or ``command``: a template run once per mixture, e.g.
    ``python train.py {train_index} {eval_dir} {out}``; it must write ``{out}/metrics.json``.
    The command is given with ``--trainer-cmd`` only: ``load_ablation_manifest`` refuses a
    ``trainer.command`` (or ``kind: command``) written in the file."""

    kind: Literal["builtin", "command"] = "builtin"
    command: str | None = None
    timeout_s: float | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _cmd(self):
        if self.kind == "command" and not self.command:
            raise ValueError("trainer.kind=command needs trainer.command")
        return self


class Analysis(_Strict):
    """Ranking objective and the RegMix-style regression (Liu et al. 2024, arXiv:2407.01492).

    ``objective``: weights per eval-set name (empty = mean over all eval sets). ``model``:
    ``linear`` (ridge on [share, log(share + 1e-3)] per domain) or ``gbm`` (gradient boosting,
    needs more mixtures); one model per held-out set. The best mixture is the mean of the ``top_k``
    best of ``samples`` convex combinations of the tried mixtures. When the leave-one-out Spearman
    of predicted vs measured objective is below ``min_loo_spearman`` (or fewer than 5 mixtures),
    the best tried mixture is recommended instead."""

    objective: dict[str, float] = {}
    model: Literal["linear", "gbm"] = "linear"
    samples: int = Field(100_000, ge=1)
    top_k: int = Field(100, ge=1)
    min_loo_spearman: float = Field(0.5, ge=-1, le=1)
    #: Share of the mixtures set aside (chosen by a hash of their id, not their order) and never
    #: used to fit the regression: its out-of-sample check. 0 = leave-one-out only.
    holdout_mixtures: float = Field(0.25, ge=0, lt=1)
    #: A difference counts only when it exceeds ``noise_z`` standard errors of a difference of two
    #: seed means (the noise floor measured across ``seeds``); 2 ~ a two-sided 95% test.
    noise_z: float = Field(2.0, gt=0)

    @field_validator("objective")
    @classmethod
    def _objective_ok(cls, v):
        return _check_weights(v)


class ClusterCfg(_Strict):
    """``workers`` > 1 or ``scheduler``: one Dask task per proxy run; else proxies run in-process.
    ``gpu_resources``: tasks ask for the worker resource ``GPU=1`` (start workers with it)."""

    scheduler: str | None = None
    workers: int = Field(1, ge=1)
    threads_per_worker: int = Field(1, ge=1)
    gpu_resources: bool = False


class AblationManifest(_Strict):
    """Manifest of ``datapipe ablate``. Paths are resolved relative to the working directory."""

    name: str = "ablation"
    run: str                              # finished run directory (phase 3 done)
    tokens: str = "tokens"                # token folder under ``run`` (holds index.json)
    output: str | None = None             # default: RUN/ablation/NAME
    seed: int = 0                         # data seed: candidates, held-out split, training sets
    #: Proxy training seeds (initialisation and batch order): every mixture is trained once per
    #: seed on the same training set; two or more measure the noise floor and the seed-to-seed
    #: Spearman of the ranking, without which no recommendation is made.
    seeds: list[int] = Field([0, 1], min_length=1)
    domains: list[str] | None = None      # default: every domain of the run
    mixtures: Mixtures
    budget_tokens: int = Field(ge=1)      # training tokens per proxy run
    max_epochs: float = Field(4.0, gt=0)  # repetition cap per domain inside one training set
    heldout: Heldout = Heldout()
    proxy: Proxy = Proxy()
    trainer: Trainer = Trainer()
    device: str = "auto"                  # auto | cpu | cuda | cuda:N
    threads: int = Field(1, ge=1)         # torch CPU threads per proxy run (oversubscribing is slow)
    analysis: Analysis = Analysis()
    cluster: ClusterCfg = ClusterCfg()
    source_file: str | None = None

    @field_validator("seeds")
    @classmethod
    def _seeds_unique(cls, v):
        if len(set(v)) != len(v):
            raise ValueError(f"seeds repeat a value: {v}")
        return v

    def out_dir(self) -> str:
        return self.output or f"{self.run.rstrip('/')}/ablation/{self.name}"

    def train_fingerprint(self, index: dict | None = None) -> str:
        """sha256 of what decides a proxy run's result besides its mixture (used for resume): this
        manifest's settings and, given the run's token ``index`` (``index.json``), its identity
        (``token_index_identity``): a run re-tokenized since (another tokenizer, other documents)
        trains its proxies again."""
        keep = {"run": os.path.abspath(self.run), "tokens": self.tokens, "seed": self.seed,
                "domains": sorted(self.domains) if self.domains else None,
                "budget_tokens": self.budget_tokens, "max_epochs": self.max_epochs,
                "heldout": self.heldout.model_dump(exclude={"overlap", "overlap_n"}),  # a check, not training "proxy": self.proxy.model_dump(),
                "trainer": self.trainer.model_dump()}
        if index is not None:
            keep["tokens_index"] = token_index_identity(index)
        return digest(json.dumps(keep, sort_keys=True))


def token_index_identity(index: dict) -> dict:
    """What identifies a run's token shards in its ``index.json``: the tokenizer (name, files'
    sha256, vocabulary, special ids), dtype, the config fingerprint of mix + tokenize and each
    shard's name and sha256."""
    return {"tokenizer": index.get("tokenizer"), "dtype": index.get("dtype"),
            "config_fingerprint": index.get("config_fingerprint"),
            "shards": [[s.get("path"), s.get("sha256")] for s in index.get("shards", [])]}


def load_ablation_manifest(path: str | os.PathLike, overrides: dict[str, Any] | None = None) -> AblationManifest:
    """Read and validate an ablation manifest; ``overrides`` maps dotted keys to values.

    Raises ManifestError naming file, line and field.
    """
    data, lines, source = read_yaml_mapping(path, "ablation manifest", overrides)
    _no_program_from_file(data, lines, source)
    try:
        return AblationManifest(**data)
    except ValidationError as e:
        raise ManifestError(validation_message(source, lines, e, model=AblationManifest)) from None


def _no_program_from_file(data: dict, lines: dict, source: str) -> None:
    """A manifest is data: the external trainer's command comes from ``--trainer-cmd`` (or the
    ``overrides`` of a Python caller), never from the file, which anyone may have handed over."""
    tr = data.get("trainer")
    if not isinstance(tr, dict) or lines.get(("trainer", "command")) == OVERRIDDEN:
        return
    if "command" in tr:
        raise ManifestError(f"{error_location(source, lines, ('trainer', 'command'))}: a manifest names no program to run; "
                            "give the trainer on the command line: --trainer-cmd 'TEMPLATE'")
    if tr.get("kind") == "command":
        raise ManifestError(f"{error_location(source, lines, ('trainer', 'kind'))}: trainer kind 'command' needs "
                            "--trainer-cmd 'TEMPLATE' on the command line (a manifest names no program to run)")
