"""Manifest validation: errors name file, line and field, before any work."""
import textwrap

import pytest

from datapipe.manifest.load import ManifestError, load_manifest


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
    with pytest.raises(ManifestError, match=r":3: outptu: unknown setting 'outptu'; did you mean 'output'\?"):
        load_manifest(p)


def test_invalid_yaml_names_line(tmp_path):
    p = write(tmp_path, "inputs: {paths: [a\noutput: [\n")
    with pytest.raises(ManifestError, match="not valid YAML"):
        load_manifest(p)


def test_overrides_apply(tmp_path):
    m = load_manifest("manifests/cc-2026.yaml", {"inputs.paths": ["x"], "inputs.crawl": None, "output": "o"})
    assert m.inputs.paths == ["x"] and m.inputs.crawl is None and m.output == "o"


def test_a_bad_override_is_named_as_given_on_the_command_line(tmp_path, capsys):
    """--workers -3 was reported at the manifest's `cluster:` line; --workers 0 was silently the manifest's value."""
    from datapipe.cli import main as cli

    p = write(tmp_path, """\
        inputs:
          paths:
            - a.warc.gz
        output: out
        cluster: {workers: 1}
        stages:
          - extract: {}
        """)
    for argv, field in ((["--workers", "0"], "cluster.workers"), (["--workers", "-3"], "cluster.workers"),
                        (["--limit", "0"], "inputs.limit")):
        assert cli.main(["run", str(p), *argv, "--dry-run"]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert err == f"error: {p}: {field} (given on the command line): Input should be greater than or equal to 1"
    with pytest.raises(ManifestError) as e:  # an item of an overridden list is not the file's list item
        load_manifest(p, {"inputs.paths": [3]})
    assert str(e.value) == f"{p}: inputs.paths[0] (given on the command line): Input should be a valid string"
    with pytest.raises(ManifestError) as e:  # the file's own lines still name theirs
        load_manifest(p, {"output": "o", "cluster.workers": "x"})
    assert "(given on the command line)" in str(e.value) and f"{p}:5:" not in str(e.value)


def test_scheduler_address_is_checked_before_any_work(tmp_path, capsys):
    """``--scheduler notaurl`` was a ValueError traceback from distributed.Client, after the output
    folder had been made; now a manifest error naming the field, and no folder."""
    from datapipe.cli import main as cli

    out = tmp_path / "out"
    p = write(tmp_path, f"""\
        inputs: {{paths: [{tmp_path}]}}
        output: {out}
        cluster: {{address: "tcp://sched"}}
        stages:
          - extract: {{}}
        """)
    with pytest.raises(ManifestError) as e:
        load_manifest(p)
    assert str(e.value).startswith(f"{p}:3: cluster.address: Value error, address 'tcp://sched' is not a Dask "
                                   "scheduler address (tcp://HOST:PORT)")
    for bad in ("notaurl", "tcp://h:99999"):
        assert cli.main(["run", str(p), "--scheduler", bad]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert err.startswith(f"error: {p}: cluster.address (given on the command line): Value error, address {bad!r}")
    assert not out.exists()
    for good in ("tcp://10.0.0.5:8786", "10.0.0.5:8786", "tls://h:8786", "inproc://x"):
        assert load_manifest(p, {"cluster.address": good}).cluster.address == good


def test_dashboard_address_is_checked(tmp_path):
    """--dashboard nonsense (or a host that does not resolve) was a socket traceback at cluster start."""
    import time

    from datapipe.engine import runner

    p = write(tmp_path, """\
        inputs: {paths: [a.warc.gz]}
        output: out
        stages:
          - extract: {}
        """)
    for bad in ("nonsense", ":99999", "host:port"):
        with pytest.raises(ManifestError) as e:
            load_manifest(p, {"cluster.dashboard_address": bad})
        assert f"cluster.dashboard_address (given on the command line): Value error, dashboard_address {bad!r} is " \
               "not HOST:PORT" in str(e.value)
    for good in ("127.0.0.1:8787", ":0", "0.0.0.0:8787"):
        assert load_manifest(p, {"cluster.dashboard_address": good}).cluster.dashboard_address == good
    m = load_manifest(p, {"cluster.dashboard_address": "nohost.invalid:0", "cluster.workers": 1})
    t0 = time.time()
    msg = r"cannot start the local Dask cluster \(dashboard nohost.invalid:0\)"
    with pytest.raises(runner.ClusterError, match=msg), runner.dask_client(m):
        pass
    assert time.time() - t0 < 30


@pytest.mark.parametrize("text, line, field", [
    # A setting given twice in one mapping: YAML keeps the last silently (0.99, not the 0.5 read first).
    ("""\
        inputs: {paths: [a.warc.gz]}
        output: out
        stages:
          - extract: {}
          - langid: {min_score: 0.5,
                     min_score: 0.99}
        """, 6, "stages[1].langid.min_score"),
    # A second `stages:` section would replace the first, dropping langid without a word.
    ("""\
        inputs: {paths: [a.warc.gz]}
        output: out
        stages:
          - extract: {}
          - langid: {}
        stages:
          - extract: {}
        """, 6, "stages"),
])
def test_duplicate_key_names_line_and_field(tmp_path, text, line, field):
    p = write(tmp_path, text)
    with pytest.raises(ManifestError) as e:
        load_manifest(p)
    assert str(e.value).startswith(f"{p}:{line}: {field}: ") and "given twice" in str(e.value)


def test_merge_keys_and_aliases_are_not_duplicates(tmp_path):
    p = write(tmp_path, """\
        inputs: {paths: [a.warc.gz]}
        output: out
        x-base: &base {min_score: 0.5}
        stages:
          - extract: {}
          - langid: {<<: *base, min_score: 0.7}
        """)
    with pytest.raises(ManifestError, match=r":3: x-base: unknown setting 'x-base'"):  # only the unknown key is an error
        load_manifest(p)
