"""The dashboard's counters page shows the run's output path as text: a path holding markup is
escaped, not rendered (datapipe.monitor; the path is whatever a user chose for --output)."""
from __future__ import annotations

from types import SimpleNamespace

from bokeh.document import Document
from bokeh.models import Div

from datapipe.monitor import PLUGIN_NAME, StageCounters, _counters_doc


def test_run_path_with_markup_is_escaped_in_the_page():
    evil = "runs/<img src=x onerror=alert(document.cookie)>&co"
    plugin = StageCounters()
    plugin.log_event("datapipe-progress", {"run": evil, "task": "t0", "stages": {"extract": [3, 2, 1, 0]}})
    doc = Document()
    _counters_doc(SimpleNamespace(plugins={PLUGIN_NAME: plugin}), {}, doc)
    heads = [m for m in doc.select({"type": Div})]
    assert len(heads) == 1
    text = heads[0].text
    assert "<img" not in text and "onerror=alert(document.cookie)&gt;&amp;co" in text
    assert text.startswith("<h3>datapipe run: runs/&lt;img src=x ") and "<p>1 task(s) reporting</p>" in text
