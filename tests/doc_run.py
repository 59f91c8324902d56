"""One small run shared by tests/test_examples.py and tests/test_doc_snippets.py: the main
manifest's stages (as examples/pipeline.py builds them) over the first records of one WARC
sample, made once per test process on the session's warm cluster."""
from __future__ import annotations

import functools
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def shared_data() -> Path:
    return Path(os.environ.get("DATAPIPE_SHARED_DATA", ROOT.parent / "shared" / "data"))


def example(name: str):
    """Import ``examples/<name>.py`` as a module."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@functools.lru_cache(maxsize=1)
def small_run(client) -> Path:
    """examples/pipeline.py over 40 records of dolma_wget_sample-0000 (documents, rejected, tokens)."""
    out = Path(tempfile.mkdtemp(prefix="doc-run-")) / "run"
    example("pipeline").main([str(shared_data() / "warc" / "dolma_wget_sample-0000.warc.gz"),
                              "--output", str(out), "--limit", "40"], client=client)
    return out


sys.path.insert(0, str(EXAMPLES / "my_datapipe_plugin"))
