"""A stage's or phase's asset check that fails becomes one line naming the manifest setting.

``runner.check_before_work`` loads every model, word list, block list and tokenizer before any
work. What a stage raises there (a missing fastText model is FileNotFoundError, a label the model
lacks ValueError, a missing ``lid.176.ftz`` ModelError) is the user's to fix, not a bug: it is
re-raised as :class:`AssetError`, a ``ManifestError`` whose message is one line,
``manifest.yaml:LINE: stages[3].quality_classifier: <what is missing and how to get it>``, so
``datapipe run`` (with or without ``--dry-run``) prints it and exits 2.
"""
from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from datapipe.manifest.load import ManifestError, dotted_field, error_location, line_map
from datapipe.models import ModelError

#: What a check raises for a bad setting (missing or unreadable file, wrong label, bad checksum).
USER_ERRORS = (OSError, ValueError, ModelError, EOFError)


class AssetError(ManifestError):
    """A stage or phase setting names a file that is missing or cannot be used."""


def _location(manifest, loc: tuple) -> str:

    src = manifest.source_file
    if not src:
        return dotted_field(loc)
    try:
        lines = line_map(Path(src).read_text(encoding="utf-8"))
    except Exception:  # noqa: BLE001 - the file changed or went away: name the setting without a line
        lines = {}
    return error_location(src, lines, loc)


def one_line(text: object) -> str:
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


@contextmanager
def asset_error(manifest, loc: tuple):
    """Re-raise a user error of the checks run inside as AssetError located at ``loc`` (a key
    path of the manifest, e.g. ``("stages", 3, "quality_classifier")``). ManifestError passes."""
    try:
        yield
    except ManifestError:
        raise
    except USER_ERRORS as e:
        raise AssetError(f"{_location(manifest, loc)}: {one_line(e) or type(e).__name__}") from e
