"""HTML -> main text with resiliparse (stage ``extract``).

Input rows carry the raw HTTP body in ``payload`` (binary) and the HTTP charset in ``charset``.
Rows whose ``record_type`` is ``conversion`` (WET) or ``text`` already have ``text`` and pass
through. Decoding follows ``datapipe.stages.lib.charset.decode_payload``: when the declared charset
is not used (it does not decode cleanly, or detection reads the bytes more plausibly) the row's
``warnings`` gain ``charset_override`` and ``charset`` names the codec used. Extraction is resiliparse's
``extract_plain_text`` (main-content mode by default, as DCLM and dolma use it). Pages that yield
no text are rejected ``extract:empty``; pages over ``max_payload_bytes`` are rejected
``extract:too_large``; pages over ``timeout_s`` CPU seconds (``extract:timeout``) or over
``memory_bytes`` in the sandbox child (``extract:memory``), and pages that crash a fresh child
twice (``extract:crash``), are errored (``datapipe.stages.lib.extract_sandbox``).

Main-content mode puts structural rules around resiliparse's own heuristics
(``datapipe.stages.lib.mainblock``): guarded skips (a boilerplate selector never removes
an ``<article>``/``<main>`` block), comment sections dropped unless they are the page (the thread
rule: a schema.org discussion page), a block trim of short lines around an article-shaped body,
and fallbacks that cannot make a page worse than plain resiliparse (keep ratio) or empty (whole
page under ``fallback_chars``).
Every rule and threshold was chosen on the dev split of ``benchmarks/extraction_sets.py`` (ablation
in ``benchmarks/EXTRACTION_SETS.md``); ``benchmarks/bench_extraction.py`` reports the test split per
page type against plain resiliparse and trafilatura. ``clean=False`` keeps resiliparse's main
content plus the whole-page fallback.
"""
from __future__ import annotations

import pyarrow as pa

from datapipe.engine import procenv
from datapipe.manifest.ranges import NonNegFloat, NonNegInt, PosFloat, PosInt
from datapipe.stage import ERROR, REJECT, Stage, StageConfig, register, with_column
from datapipe.stages.lib import extract_sandbox
from datapipe.stages.lib.extract_page import extract_one
from datapipe.stages.lib.extract_sandbox import Sandbox, shared_sandbox


class ExtractConfig(StageConfig):
    """Ranges: ``fallback_chars``, ``min_chars`` >= 0 (characters); ``max_payload_bytes`` >= 1 (bytes);
    ``timeout_s`` > 0 (CPU seconds); ``memory_bytes`` >= 1 (bytes); ratios >= 0. Defaults: chosen on the dev split (module docstring)."""

    main_content: bool = True        # resiliparse boilerplate removal; False = whole page (CS336 A4 golden output)
    clean: bool = True               # main content only: the structural rules of stages/lib/mainblock.py
    fallback_chars: NonNegInt = 200  # main content only: shorter extract -> whole page instead (0 = never)
    thread_gate: NonNegFloat = 0.5   # the thread rule looks only below this share of the whole page's text
    thread_ratio: NonNegFloat = 2.0  # schema.org discussion page and with-comments text > this x without -> keep comments (0 = never)
    thread_block_chars: NonNegInt = 0  # also keep comments when no block is this long (0 = schema only; 150 lost on dev)
    keep_ratio: NonNegFloat = 0.3    # cleaned text < this x plain resiliparse main content -> plain (0 = never)
    trim_chars: NonNegInt = 100      # block trim: blocks this long are the body (characters; 0 = no trim)
    trim_share: NonNegFloat = 0.3    # block trim only when the long blocks hold this share of the text
    alt_texts: bool = False          # include <img alt> texts
    links: bool = False              # include link targets
    list_bullets: bool = True
    noscript: bool = False
    min_chars: NonNegInt = 1         # fewer non-space characters -> extract:empty (0 = keep empty pages)
    max_payload_bytes: PosInt = 20_000_000
    timeout_s: PosFloat = 10.0       # CPU seconds per document, enforced by the sandbox (not wall time)
    memory_bytes: PosInt = 1 << 30   # the sandbox child's data segment (RLIMIT_DATA); more -> extract:memory
    sandbox: bool = True             # run in a child process (crash/timeout isolation)


@register
class Extract(Stage):
    name = "extract"
    Config = ExtractConfig
    # 2: the page-size pass gated by mainblock.skip_bound (identical on the 4,236 dev + test pages;
    # bumped because that rests on a bound, not on the same computation).
    version = 3  # 3: noscript-wrapped pages, main-block shield, clean whole-page fallback, no trim on threads
    fields = []
    needs = ("payload",)  # the raw HTML; dropped once extracted
    reads = ("record_type", "charset")  # text records pass through; the reader's declared charset

    def _options(self) -> dict:
        c = self.config
        return dict(main_content=c.main_content, alt_texts=c.alt_texts, links=c.links,
                    list_bullets=c.list_bullets, noscript=c.noscript, clean=c.clean,
                    fallback_chars=c.fallback_chars, thread_gate=c.thread_gate,
                    thread_ratio=c.thread_ratio, keep_ratio=c.keep_ratio,
                    trim_chars=c.trim_chars, trim_share=c.trim_share,
                    thread_block_chars=c.thread_block_chars)

    def setup(self) -> None:
        self._sandbox = None
        self._opts = self._options()
        if self.config.sandbox:
            self._sandbox = shared_sandbox(self._opts, memory_bytes=self.config.memory_bytes)
            # Start the child now (once per thread and settings, with the models): a sandbox that
            # cannot start fails before any work, and the first batch does not pay its start-up.
            self._sandbox.start()

    def check(self) -> None:
        """Start a child of its own and stop it: the check proves the sandbox starts from the
        files it starts from now (``assets``), whatever child this thread already runs."""
        if self.config.sandbox:

            probe = Sandbox(self._options())
            probe.start()
            probe.close()

    def lineage_assets(self) -> list:
        """No files: its assets are the sandbox's code and resiliparse's compiled modules (they differ
        by platform for one release); a change of what extraction yields bumps ``version``."""
        return []

    def assets(self) -> list:
        """What ``check`` (the sandbox child's start) depends on besides config, code and
        interpreter (``datapipe.engine.check_cache``): the files the child starts from (the sandbox
        module, ``procenv``'s environment, resiliparse's compiled modules) and the folder
        resiliparse is installed in (its mtime moves with any install or removal there). The
        client then starts a child once per identity of these, not in every run (~1 s);
        a child that cannot start on a worker errors the file's task with the reason. Without
        the sandbox, setup loads nothing: no files."""
        if not self.config.sandbox:
            return []
        from pathlib import Path

        import resiliparse


        pkg = Path(resiliparse.__file__).parent  # its compiled code: _resiliparse.*.so (2.0)
        return [Path(extract_sandbox.__file__), Path(procenv.__file__), pkg / "__init__.py",
                *sorted(pkg.rglob("*.so")), pkg.parent]

    def __call__(self, batch: pa.Table) -> pa.Table:
        self.ensure_setup()
        n = batch.num_rows
        kinds = batch.column("record_type").to_pylist()
        texts = batch.column("text").to_pylist() if "text" in batch.column_names else [None] * n
        charsets = batch.column("charset").to_pylist()
        payloads = batch.column("payload").to_pylist() if "payload" in batch.column_names else [None] * n
        reject: list[str | None] = [None] * n
        error: list[str | None] = [None] * n
        todo = []
        for i in range(n):
            if kinds[i] in ("conversion", "text"):
                continue
            p = payloads[i] or b""
            if len(p) > self.config.max_payload_bytes:
                reject[i] = "extract:too_large"
            else:
                todo.append(i)
        items = [(payloads[i] or b"", charsets[i]) for i in todo]
        if self._sandbox is not None:
            results = self._sandbox.run(items, self.config.timeout_s)
        else:
            results = []
            for p, cs in items:
                try:
                    results.append(extract_one(p, cs, **self._opts))
                except Exception as e:  # noqa: BLE001
                    results.append((None, None, f"extract:exception:{type(e).__name__}", None))
        warnings = batch.column("warnings").to_pylist() if "warnings" in batch.column_names else None
        for i, (text, codec, err, warns) in zip(todo, results):
            texts[i] = text
            if codec:
                charsets[i] = codec
            error[i] = err
            if warns and warnings is not None:
                warnings[i] = (warnings[i] or []) + [w for w in warns if w not in (warnings[i] or [])]
        for i in range(n):
            if reject[i] is None and error[i] is None and len((texts[i] or "").strip()) < self.config.min_chars:
                reject[i] = "extract:empty"
        batch = with_column(batch, "text", texts, pa.string())
        batch = with_column(batch, "charset", charsets, pa.string())
        if warnings is not None:
            batch = with_column(batch, "warnings", warnings, pa.list_(pa.string()))
        batch = with_column(batch, REJECT, reject, pa.string())
        return with_column(batch, ERROR, error, pa.string())

