"""``datapipe.Pipeline``: a job from a manifest file, a manifest mapping or Python objects, run from Python.

Whatever it is built from, a ``Pipeline`` holds plain manifest data and validates it with
``datapipe.manifest.load.validate_manifest``, the check ``datapipe run`` applies to a YAML file: stage
names only from the registry, phase sections only of registered phases, every value in range.
Stage objects and config objects are turned into their JSON data first, so nothing but data
reaches the runner (a manifest stays data, not code). ``run`` is ``datapipe run``.
"""
from __future__ import annotations

import copy
import json
import os
from dataclasses import dataclass

import pyarrow as pa

from datapipe.engine import runner
from datapipe.engine.task import KINDS
from datapipe.inspect.reader import Run
from datapipe.io.parquet import join
from datapipe.manifest.load import (
    Manifest,
    ManifestError,
    read_yaml_mapping,
    validate_manifest,
)
from datapipe.phase import DOCUMENTS, phases, section_classes
from datapipe.stage import Stage

#: Stand-ins validated until ``run`` names the real inputs and output.
_NO_INPUTS, _NO_OUTPUT = "<inputs of Pipeline.run>", "<output of Pipeline.run>"


def _plain(obj, what: str):
    """``obj`` as JSON data (pydantic models dumped); TypeError for anything else (no code in a manifest)."""
    if hasattr(obj, "model_dump"):
        return obj.model_dump(mode="json")
    try:
        return json.loads(json.dumps(obj))
    except (TypeError, ValueError) as e:
        raise TypeError(f"{what}: only plain data (dicts, lists, numbers, strings) or config objects: {e}") from None


def _stage_item(item) -> dict:
    """One ``stages`` entry: a stage object, a name, ``(name, config)`` or ``{name: config}``."""

    if isinstance(item, Stage):
        # The fields the caller set, as a manifest would spell them (equal manifests, equal lineage).
        return {item.name: item.config.model_dump(mode="json", exclude_unset=True)}
    if isinstance(item, str):
        return {item: {}}
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return {item[0]: _plain(item[1], f"stage {item[0]}") or {}}
    if isinstance(item, dict) and len(item) == 1:
        (name, cfg), = item.items()
        return {str(name): _plain(cfg, f"stage {name}") or {}}
    raise TypeError(f"a stage is a stage object (datapipe.stages.get), a name, (name, config) or {{name: config}}; "
                    f"got {item!r}")


def _section(value, name: str):
    """A phase section: True = defaults, False/None = absent (``report``: off), a mapping or a config object."""
    if name == "report" and isinstance(value, bool):
        return {"enabled": value}
    if value is None or value is False:
        return None
    if value is True:
        return {}
    return _plain(value, name)


class Pipeline:
    """A validated job. Build it from a manifest file (``Pipeline("manifests/cc-2026.yaml")``), a
    mapping (``Pipeline({"stages": [...], "dedup": {}})``) or objects::

        Pipeline(stages=[datapipe.stages.get("extract"), ("langid", {"min_score": 0.65}), "gopher_quality"],
                 dedup={"minhash": {"threshold": 0.8}}, mix=None, tokenize=None)

    Keywords set top-level manifest keys (``stages``, ``dedup``, ``mix``, ``tokenize``, ``report``,
    ``inputs``, ``output``, ``cluster``, ``name``, ``batch_size``, ...) over what the file or
    mapping gives. ``inputs``/``output`` may wait for ``run``. Raises ManifestError (a ValueError)
    naming the field, as ``datapipe run`` does, and TypeError for values that are not data.
    """

    def __init__(self, manifest: str | os.PathLike | dict | None = None, **keys):
        self._lines: dict = {}
        if manifest is None:
            data, self._source = {}, "<Pipeline>"
        elif isinstance(manifest, (str, os.PathLike)):
            data, self._lines, self._source = read_yaml_mapping(manifest, "manifest")
        elif isinstance(manifest, dict):
            data, self._source = copy.deepcopy(_plain(manifest, "manifest")), "<manifest dict>"
        else:
            raise TypeError(f"Pipeline takes a manifest path or mapping, got {type(manifest).__name__}")
        for key, value in keys.items():
            if key == "stages":
                data["stages"] = [_stage_item(s) for s in value]
            elif key in section_classes():   # any registered phase's section (dedup, tokenize, ...)
                sec = _section(value, key)
                if sec is None:
                    data.pop(key, None)
                else:
                    data[key] = sec
            elif key == "inputs" and not isinstance(value, dict):
                data["inputs"] = {"paths": _paths(value)}
            else:
                data[key] = _plain(value, key)
        self._data = data
        self._build()  # validate now: a bad stage fails where the pipeline is built

    @classmethod
    def from_manifest(cls, path: str | os.PathLike, **keys) -> Pipeline:
        """Same as ``Pipeline(path, **keys)``."""
        return cls(path, **keys)

    def _build(self, overrides: dict | None = None) -> Manifest:
        data = copy.deepcopy(self._data)
        inp = data.setdefault("inputs", {})
        if isinstance(inp, dict) and not inp.get("paths") and not inp.get("crawl"):
            inp["paths"] = [_NO_INPUTS]  # a template without inputs: run() names them
        data.setdefault("output", _NO_OUTPUT)
        for dotted, value in (overrides or {}).items():
            d = data
            *parents, last = dotted.split(".")
            for k in parents:
                d = d.setdefault(k, {})
            d[last] = value
        data["source_file"] = None if self._source.startswith("<") else self._source
        return validate_manifest(data, self._source, self._lines)

    @property
    def manifest(self) -> Manifest:
        """The validated ``Manifest`` (inputs/output are stand-ins until ``run`` gives them)."""
        return self._build()

    def to_yaml(self) -> str:
        """The manifest as YAML, to save as a file for ``datapipe run``."""
        import yaml

        data = {k: v for k, v in self._data.items() if k != "source_file"}
        return yaml.safe_dump(data, sort_keys=False)

    def run(self, inputs=None, output: str | os.PathLike | None = None, *, limit: int | None = None,
            client=None, workers: int | None = None, scheduler: str | None = None,
            force_from: str | None = None, only: list[str] | None = None, **cluster) -> PipelineResult:
        """Run the job, as ``datapipe run`` does, and return a ``PipelineResult``.

        ``inputs``: files, globs, directories or URLs (str or Path; replaces the manifest's);
        ``output``: the run directory; ``limit``: at most this many records per input file;
        ``client``: an existing ``distributed.Client``; otherwise ``workers``/``scheduler`` and the
        ``cluster`` keywords (``threads_per_worker``, ``memory_limit``, ``dashboard_address``,
        ``retries``) set the manifest's ``cluster:`` section. A rerun into the same output skips
        what is up to date (lineage). Raises ManifestError, ModelError, InputError (missing input
        or model, before any work), OutputLockedError, LedgerError, InvariantError, ClusterError;
        RuntimeError when called while a worker process imports the calling script (a script that
        calls ``run`` outside ``if __name__ == "__main__":``).
        """
        import multiprocessing

        if getattr(multiprocessing.current_process(), "_inheriting", False):
            # Dask starts worker processes by spawning: each one imports the main script again, and
            # an unguarded run() there would start a second run (it failed on the output lock).
            raise RuntimeError('Pipeline.run was called while a worker process imported the script: in a script, '
                               'call it under `if __name__ == "__main__":` (Dask spawns its workers)')

        ov: dict = {}
        if inputs is not None:
            ov.update({"inputs.paths": _paths(inputs), "inputs.crawl": None})
        if output is not None:
            ov["output"] = os.fspath(output)
        if limit is not None:
            ov["inputs.limit"] = limit
        if workers is not None:
            ov["cluster.workers"] = workers
        if scheduler is not None:
            ov["cluster.address"] = scheduler
        ov.update({f"cluster.{k}": v for k, v in cluster.items()})
        m = self._build(ov)
        if _NO_INPUTS in m.inputs.paths or m.output == _NO_OUTPUT:
            raise ManifestError("Pipeline.run needs inputs and output (here or in the manifest)")
        found = runner.check_before_work(m)
        return PipelineResult(runner.run(m, found, client=client, force_from=force_from, only=only), m)

    def __repr__(self) -> str:
        names = [next(iter(s)) for s in self._data.get("stages") or []]
        secs = [k for k in section_classes() if self._data.get(k) is not None]
        return f"Pipeline(stages={names}, phases={secs})"


def _paths(value) -> list[str]:
    return [os.fspath(value)] if isinstance(value, (str, os.PathLike)) else [os.fspath(p) for p in value]


@dataclass
class PipelineResult:
    """A finished run. ``ledger``: the funnel (``datapipe.engine.ledger.Ledger``); ``paths``: where its
    outputs are; ``tasks``: phase-1 success records; ``phases``: each phase's figures;
    ``failed``: input files errored as a whole (``datapipe run`` exits 4 then)."""

    run_result: object
    manifest: Manifest

    @property
    def ledger(self):
        return self.run_result.ledger

    @property
    def output(self) -> str:
        return self.run_result.output

    @property
    def tasks(self) -> list[dict]:
        return self.run_result.tasks

    @property
    def phases(self) -> dict:
        return self.run_result.phases

    @property
    def failed(self) -> list[dict]:
        return self.run_result.failed

    @property
    def seconds(self) -> float:
        return self.run_result.seconds

    @property
    def paths(self) -> dict[str, str | None]:
        """``documents``, ``rejected``, ``errors`` (folders of Parquet shards), ``ledger`` (ledger.json),
        ``report`` (report.html or None), ``tokens`` (token shards' index.json or None), ``dolma``."""

        out, m = self.output, self.manifest
        paths = {"documents": join(out, DOCUMENTS.folder), "rejected": join(out, KINDS["rejected"]),
                 "errors": join(out, KINDS["errors"]), "ledger": join(out, "ledger.json"),
                 "report": self.run_result.report}
        for cls in phases():   # each phase's datasets of role tokens / export (None where it did not run)
            on = cls.enabled(m)
            for d in cls.datasets(cls(m).config()) if on else cls.writes:
                if d.role == "tokens":
                    paths["tokens"] = join(out, d.folder, "index.json") if on else None
                elif d.role == "export":
                    paths[d.name] = join(out, d.folder) if on else None
        return paths

    def _read(self, kind: str, columns) -> pa.Table:
        run = Run.open(self.output, self.manifest.inputs.storage_options)
        files = run.files(kind)
        if not files:
            return pa.table({})
        cols = (", ".join('"' + c.replace('"', '""') + '"' for c in columns) if columns
                else "* EXCLUDE (filename, file_row_number)")  # columns the shard scan adds
        return run.query(f"SELECT {cols} FROM {run.source(kind)} ORDER BY id")

    def documents(self, columns: list[str] | None = None) -> pa.Table:
        """The kept documents (``documents/``) as one table, ``columns`` only if given."""
        return self._read("kept", columns)

    def rejected(self, columns: list[str] | None = None) -> pa.Table:
        """The rejected documents with ``reject_reason``, ``reject_stage`` and every signal."""
        return self._read("rejected", columns)

    def errors(self, columns: list[str] | None = None) -> pa.Table:
        """The records that could not be processed, with ``error_reason`` and ``error_stage``."""
        return self._read("errors", columns)

    def __repr__(self) -> str:
        tot = self.ledger.totals()
        return (f"PipelineResult({self.output!r}: in {tot['in']:,}, kept {tot['kept']:,}, rejected {tot['rejected']:,}, "
                f"errored {tot['errored']:,}, {self.seconds:.1f} s)")
