"""YAML alias bombs in user files are refused with one line naming file:line, exit 2, before any
work; small aliases still work (datapipe.manifest.yaml_guard)."""
import os
import resource
import subprocess
import sys
import textwrap

import pytest

from datapipe.manifest import yaml_guard
from datapipe.manifest.load import ManifestError, load_manifest

CLI = [sys.executable, "-m", "datapipe.cli.main"]


def bomb(levels: int = 9) -> str:
    """A manifest whose alias ``a8`` expands to 9**9 = 387,420,489 strings (473 bytes of text)."""
    rows = ["inputs: {paths: [a.warc.gz]}", "output: out",
            "a0: &a0 [" + ",".join(['"lol"'] * 9) + "]"]
    rows += [f"a{i}: &a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(rows) + "\n"


def _cap_memory():
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))  # the unguarded loader dies here, not the host


def test_alias_bomb_is_one_line_exit_2_naming_the_line(tmp_path):
    p = tmp_path / "bomb.yaml"
    p.write_text(bomb())
    assert len(p.read_bytes()) < 528
    r = subprocess.run(CLI + ["run", str(p), "--dry-run"], capture_output=True, text=True, timeout=120,
                       preexec_fn=_cap_memory, cwd=tmp_path, env={**os.environ, "COLUMNS": "400"})
    assert r.returncode == 2, r.stderr[-2000:]
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr
    # a_k (line k+3) holds 1 + 9 * size(a_{k-1}) nodes: a4 66,430 (74,7xx so far), a5 597,871: line 8
    assert f"{p}:8: " in err[0] and "aliases" in err[0], err
    assert not (tmp_path / "out").exists()


def test_expansion_counts_aliases_as_the_subtree_they_repeat():
    # mapping, key x, &b mapping of 1 pair (3 nodes), key y, mapping, <<, *b (3), k, 1 = 13
    assert yaml_guard.check_expansion("x: &b {m: 0.5}\ny: {<<: *b, k: 1}") == 13
    # root + 6 keys + inputs' {paths: [x]} (4) + 'out' + a0..a3: 10, 91, 820, 7381 (1 + 9 * previous)
    assert yaml_guard.check_expansion(bomb(4)) == 1 + 6 + 4 + 1 + 10 + 91 + 820 + 7381


def test_cycle_and_depth_are_refused():
    with pytest.raises(yaml_guard.YamlSizeError, match="cycle") as e:
        yaml_guard.check_expansion("a: 1\nb: &x [1, *x]\n")
    assert e.value.line == 2
    with pytest.raises(yaml_guard.YamlSizeError, match="deeper"):
        yaml_guard.check_expansion("a: " + "[" * 300 + "]" * 300)


def test_small_aliases_still_load(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text(textwrap.dedent("""\
        inputs: {paths: [a.warc.gz]}
        output: out
        stages:
          - extract: {}
          - langid: &lid {min_score: 0.7}
        """))
    m = load_manifest(p)
    assert m.stages[1] == {"langid": {"min_score": 0.7}}


def test_what_if_value_is_guarded():
    from datapipe.inspect.reader import InspectError
    from datapipe.inspect.what_if import parse_change

    with pytest.raises(InspectError, match="cycle"):
        parse_change("langid.min_score=&a [*a]")
    assert parse_change("langid.min_score=0.9") == ("langid", "min_score", 0.9)


def test_manifest_error_names_the_file_and_line(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text(bomb())
    with pytest.raises(ManifestError, match=rf"^{p}:8: the document expands"):
        load_manifest(p)
