"""Manifest validation: errors name file, line and field, before any work."""
import textwrap

import pytest

from datapipe.manifest import ManifestError, load_manifest


def write(tmp_path, text):
    p = tmp_path / "m.yaml"
    p.write_text(textwrap.dedent(text))
    return p


def test_main_manifest_is_valid():
    m = load_manifest("manifests/cc-2026.yaml")
    assert m.inputs.crawl.startswith("CC-MAIN-2026-")
    assert [next(iter(s)) for s in m.stages][:2] == ["extract", "langid"]


def test_bad_field_type_names_line_and_field(tmp_path):
    p = write(tmp_path, """\
        inputs:
          paths: [a.warc.gz]
        output: out
        stages:
          - extract: {}
          - langid:
              min_score: high
        """)
    with pytest.raises(ManifestError) as e:
        load_manifest(p)
    msg = str(e.value)
    assert f"{p}:7:" in msg and "stages[1].langid.min_score" in msg


def test_unknown_stage_lists_known(tmp_path):
    p = write(tmp_path, """\
        inputs: {paths: [a.warc.gz]}
        output: out
        stages:
          - extract: {}
          - gopher_qualty: {}
        """)
    with pytest.raises(ManifestError) as e:
        load_manifest(p)
    msg = str(e.value)
    assert ":5:" in msg and "unknown stage 'gopher_qualty'" in msg and "langid" in msg and "extract" in msg


def test_unknown_top_level_key(tmp_path):
    p = write(tmp_path, """\
        inputs: {paths: [a.warc.gz]}
        output: out
        outptu: typo
        """)
    with pytest.raises(ManifestError, match=r":3: outptu: Extra inputs are not permitted"):
        load_manifest(p)


def test_invalid_yaml_names_line(tmp_path):
    p = write(tmp_path, "inputs: {paths: [a\noutput: [\n")
    with pytest.raises(ManifestError, match="not valid YAML"):
        load_manifest(p)


def test_overrides_apply(tmp_path):
    m = load_manifest("manifests/cc-2026.yaml", {"inputs.paths": ["x"], "inputs.crawl": None, "output": "o"})
    assert m.inputs.paths == ["x"] and m.inputs.crawl is None and m.output == "o"
